#!/usr/bin/env bash
# selftest_fabric_path.sh - proves rigs/fabric_path_rig.sh and the tool
# wrappers (rigs/smpquery-sim and its symlinks) on a real ibsim + OpenSM:
# every lever's effect is read back with the real smpquery / ibnetdiscover /
# ibroute / ibtracert / saquery / ibportstate through the wrappers, never
# through the rig's own view. A step of scripts/test.sh; about 10-20 s, and
# it leaves nothing running (every process it started is stopped by PID).
#
#   rigs/selftest_fabric_path.sh        exit 0: every check passed
#
# The 2-level fabric (rigs/net.2level): the LIDs and cabling the Rust tests
# rely on; the env file read by `.` and by a plain KEY=VALUE parser; a symlink
# with a `.env` beside it and SIM_TOOL; then, with a timing line each:
# misalign (spine1 out 2: SL 3 -> VL 15 on every in port, nothing else moved),
# bounce (the SM rewrites the bounced port), zero-weight, opervls (one side of
# the link only), reconf (every switch external port, not the HCAs; drift
# elsewhere survives the heavy sweep), restart-sm (a fresh SM on the next HCA
# rewrites every table). A start that fails half-way leaves nothing. Then a
# generated ft:4:3:2 fabric started with SM options (-c FILE, -L, -o) and
# faults (-m, -z), each read back; 9 clients fill
# ibsim's 10 slots (the SM holds one), a 10th is refused; SIGKILLed, they keep
# their slots until `reap` frees them, and a new client works again.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RIG=$HERE/fabric_path_rig.sh
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/selftest-fabric-path.XXXXXX")
ENV=""
HOLDERS=()
T_ALL=$(date +%s%N)
CHECKS=0

ms() { echo $(( $(date +%s%N) / 1000000 )); }
say() { echo "selftest_fabric_path: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
ok() { CHECKS=$((CHECKS + 1)); say "  ok   $*"; }
check() { # check DESC CMD...: CMD must succeed
    local d=$1; shift
    "$@" || fail "$d"
    ok "$d"
}
eq() { # eq DESC GOT WANT
    [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
    ok "$1"
}
rig() { "$RIG" "$@"; }
timed() { # timed LEVER ARGS...: run a rig lever, print its wall time
    local t0
    t0=$(ms)
    rig "$@" >/dev/null 2>"$SCRATCH/lever.err" || { cat "$SCRATCH/lever.err" >&2; fail "lever $1 failed"; }
    say "time $(printf '%-12s %5d ms' "$1" $(( $(ms) - t0 )))  (${*:3})"
}

holder_pid() { # holder_pid PID: PID is still one of our ibsysstat clients
    [ "$({ tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null)" = "ibsysstat -S " ]
}
cleanup() {
    local rc=$? p
    trap - EXIT
    for p in ${HOLDERS[@]+"${HOLDERS[@]}"}; do holder_pid "$p" && kill -KILL "$p" 2>/dev/null; done
    [ -z "$ENV" ] || [ ! -f "$ENV" ] || rig stop "$ENV" || true
    rm -rf "$SCRATCH"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start() { # start OPTS...: a rig; its env exported here
    local t0
    t0=$(ms)
    ENV=$(rig start "$@" 2>"$SCRATCH/start.err") || { cat "$SCRATCH/start.err" >&2; fail "start $*"; }
    say "time $(printf '%-12s %5d ms' start $(( $(ms) - t0 )))  ($* $(sed -n 's/.*\] \(.*SUBNET UP.*\)/\1/p' "$SCRATCH/start.err"))"
    reload
}
reload() { # the env file again (restart-sm rewrites it)
    set -a
    # shellcheck disable=SC1090  # the env file the rig wrote
    . "$ENV"
    set +a
}
stopped() { # stop the rig; nothing of it may be left
    local work=$RIG_WORK p
    rig stop "$ENV"
    ENV=""
    for p in /proc/[0-9]*; do
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$work" && fail "left running: ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline")"
    done
    [ ! -e "$work" ] || fail "work dir $work left behind"
    ok "stop: no process names $work, the dir is gone"
}

# The wrappers, as qoslane runs them: the device name qoslane sees (mlx5_0)
# is node2's HCA.
export SMPQUERY_SIM_HOSTS=mlx5_0=node2
sq() { "$HERE/smpquery-sim" -C mlx5_0 -P 1 "$@"; }
lid() { rig lid "$ENV" "$1"; }

# vls LID OUT SL: the VL of SL in each in-port row of out port OUT
# (one line per row; an HCA's own port has one row)
vls() {
    sq sl2vl "$1" "$2" | awk -v sl="$3" -F'|' '/^ports:/ { print $(sl + 2) + 0 }'
}
# same LID OUT SL VL: every row of out port OUT maps SL to VL
same() {
    local rows
    rows=$(vls "$1" "$2" "$3")
    [ -n "$rows" ] && ! grep -qvx "$4" <<<"$rows"
}
# weight LID PORT VL: the weight VL has in the low and the high table, "LOW HIGH"
weight() {
    local t line vl=() w=() i low=0 high=0
    t=low
    while IFS= read -r line; do
        case $line in
        '# High'*) t=high ;;
        'VL    :'*) IFS='|' read -r -a vl <<<"${line#*:}" ;;
        'WEIGHT:'*)
            IFS='|' read -r -a w <<<"${line#*:}"
            for i in "${!vl[@]}"; do
                [ -n "${vl[i]// /}" ] || continue
                [ $((vl[i])) -eq "$3" ] || continue
                if [ $t = low ]; then low=$((low + w[i])); else high=$((high + w[i])); fi
            done ;;
        esac
    done < <(sq vlarb "$1" "$2")
    echo "$low $high"
}
opervls() { sq portinfo "$1" "$2" | sed -n 's/^OperVLs:\.*//p'; }
peer() { rig peer "$ENV" "$1" "$2"; }

# ------------------------------------------------------------------ 2-level
check "rigs/net.2level is the generated ft:3:2:2 (same cabling, same order)" \
    diff <(grep -v '^#' "$HERE/net.2level" | grep -v '^$') <(rig topology ft:3:2:2 | grep -v '^$')
start
eq "5 switches, 6 HCAs" "$(cut -f2 "$RIG_NODES" | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')" "6 ca 5 switch "
eq "LIDs of the 2-level fabric" \
    "$(for n in node1 spine1 spine2 leaf1 node2 leaf2 leaf3 node3 node4 node5 node6; do lid "$n"; done | xargs)" \
    "1 2 3 4 5 6 7 8 9 10 11"
eq "cabling: node2 on leaf1 port 2, leaf1 ports 3/4 up to spine1/spine2 port 1" \
    "$(peer node2 1), $(peer leaf1 3), $(peer leaf1 4), $(peer spine1 2)" "leaf1 2, spine1 1, spine2 1, leaf2 3"

# The env file: `.` and a plain parser agree on every key.
required="IBSIM_SOCKNAME RIG_WORK RIG_UMAD2SIM RIG_NODES RIG_LINKS RIG_SM_NODE RIG_IBSIM_PID RIG_OSM_PID"
plain=$(while IFS= read -r l; do
    [[ $l =~ ^export\ ([A-Z_][A-Z0-9_]*)=([^[:space:]]*)$ ]] || { echo "unparsable: $l"; continue; }
    k=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]}
    [ "${!k-}" = "$v" ] || echo "$k: plain '$v' vs sourced '${!k-}'"
    echo "$k"
done <"$ENV")
for k in $required; do grep -qx "$k" <<<"$plain" || fail "env file lacks $k: $plain"; done
eq "env file: plain KEY=VALUE parse = bash's, and it names $required" "$(grep -c ' ' <<<"$plain" || true)" 0

# A symlink with an arbitrary name, SIM_TOOL and the rig's env in `.env`
# beside it, run from an empty environment (as qoslane runs its tools).
ln -s "$HERE/smpquery-sim" "$SCRATCH/discover"
{ sed -n '/IBSIM_SOCKNAME\|RIG_UMAD2SIM\|RIG_WORK/p' "$ENV"
  echo "export SIM_TOOL=ibnetdiscover SMPQUERY_SIM_HOSTS=mlx5_3=node4"; } >"$SCRATCH/discover.env"
env -i "$SCRATCH/discover" -C mlx5_3 -P 1 -p >"$SCRATCH/ports.txt" || fail "ibnetdiscover through $SCRATCH/discover"
eq "ibnetdiscover -C mlx5_3 -P 1 -p (symlink + .env + SIM_TOOL): 24 port lines" "$(grep -c . "$SCRATCH/ports.txt")" 24
check "... and node4 (lid 9) is on leaf2 (lid 6) port 2" grep -qE "^CA +9 +1 .* - SW +6 +2 " "$SCRATCH/ports.txt"
eq "rigs/ibnetdiscover-sim --Ca=mlx5_0 -S: the 5 switches" "$("$HERE/ibnetdiscover-sim" --Ca=mlx5_0 -S | grep -c '^Switch')" 5
eq "rigs/ibtracert-sim 5 8: node2 -> leaf1 -> spine -> leaf2 -> node3" \
    "$("$HERE/ibtracert-sim" -C mlx5_0 5 8 | sed -n 's/.*"\(.*\)"$/\1/p' | sed 's/spine[12]/spine/' | xargs)" \
    "node2 HCA-1 leaf1 spine leaf2 node3 HCA-1 node3 HCA-1"
eq "rigs/ibroute-sim -n 4: leaf1 forwards lid 5 (node2) to port 2" \
    "$("$HERE/ibroute-sim" -C mlx5_0 -n 4 | awk '$1 == "0x0005" { print $2 + 0 }')" 2
eq "rigs/saquery-sim -p --src-to-dst 5:8: the SA's SL" \
    "$("$HERE/saquery-sim" -C mlx5_0 -p --src-to-dst 5:8 | sed -n 's/^[[:space:]]*sl\.\{2,\}//p')" 0x0
check "rigs/ibportstate-sim 4 2: leaf1 port 2 is Active" \
    grep -q '^LinkState:\.*Active' <("$HERE/ibportstate-sim" -C mlx5_0 4 2 2>/dev/null)
check "sim ENV node3 ibaddr: lid 8" grep -q 'LID start 0x8 ' <(rig sim "$ENV" node3 ibaddr)
rig console "$ENV" 'PerformanceSet "leaf1"[2] PortVLXmitWaitCounters.PortVLXmitWaitCounters3=700' >/dev/null
check "rigs/perfquery-sim --vlxmitcounters 4 2: the console's 700 ticks on leaf1 port 2 VL 3" \
    grep -q '^PortVLXmitWait3:\.*700$' <("$HERE/perfquery-sim" -C mlx5_0 --vlxmitcounters 4 2)

# Aligned: SL n -> VL n everywhere, every VL weighted, 8 VLs.
SP1=$(lid spine1) SP2=$(lid spine2) L1=$(lid leaf1) L2=$(lid leaf2) L3=$(lid leaf3) N2=$(lid node2)
check "aligned: spine1 out 2 maps SL 3 -> VL 3 on every in port (4 rows)" same "$SP1" 2 3 3
eq "aligned: 4 in-port rows for a 3-port switch (in 0..3)" "$(vls "$SP1" 2 3 | wc -l)" 4
eq "aligned: node2's own port SL 3 -> VL 3" "$(sq -D sl2vl 0 | awk -F'|' '/^ports:/ { print $5 + 0 }')" 3
eq "aligned: leaf3 port 2 weights VL 3 (low high)" "$(weight "$L3" 2 3)" "64 0"
eq "aligned: spine1 port 2 OperVLs" "$(opervls "$SP1" 2)" VL0-7

timed misalign "$ENV" spine1 2 3 15
check "misalign: spine1 out 2 maps SL 3 -> VL 15 on every in port" same "$SP1" 2 3 15
check "misalign: spine1 out 2 keeps SL 2 -> VL 2" same "$SP1" 2 2 2
check "misalign: spine1 out 1 untouched (SL 3 -> VL 3)" same "$SP1" 1 3 3
check "misalign: leaf2 (the other end) untouched" same "$L2" 3 3 3
eq "misalign: node2's own port still SL 3 -> VL 3" "$(sq -D sl2vl 0 | awk -F'|' '/^ports:/ { print $5 + 0 }')" 3

if rig bounce "$ENV" leaf1 1 2>"$SCRATCH/bounce.err"; then fail "bounce of the SM's own link (node1) succeeded"; fi
check "bounce refuses the SM's own link at once (the SM would never notice)" grep -q "the SM's own link" "$SCRATCH/bounce.err"
timed bounce "$ENV" spine1 2
check "bounce: the SM rewrote spine1 out 2 (SL 3 -> VL 3)" same "$SP1" 2 3 3

timed misalign "$ENV" leaf2 3 3 15
timed zero-weight "$ENV" leaf3 2 3
eq "zero-weight: leaf3 port 2 gives VL 3 weight 0 in both tables" "$(weight "$L3" 2 3)" "0 0"
eq "zero-weight: leaf3 port 2 keeps VL 2's weight" "$(weight "$L3" 2 2)" "64 0"
eq "zero-weight: leaf3 port 1 untouched" "$(weight "$L3" 1 3)" "64 0"
timed opervls "$ENV" spine2 1 2
eq "opervls: spine2 port 1 runs VL0-1" "$(opervls "$SP2" 1)" VL0-1
read -r p pp <<<"$(peer spine2 1)"
eq "opervls: the other side ($p port $pp) still VL0-7" "$(opervls "$(lid "$p")" "$pp")" VL0-7

timed reconf "$ENV" qos_swe_sl2vl 0,1,2,15,4,5,6,7,0,1,2,3,4,5,6,7
check "reconf: leaf1 out 3 SL 3 -> VL 15 (every switch external port)" same "$L1" 3 3 15
check "reconf: spine2 out 3 SL 3 -> VL 15" same "$SP2" 3 3 15
eq "reconf: node2's own port (qos_ca_sl2vl) still SL 3 -> VL 3" "$(sq -D sl2vl 0 | awk -F'|' '/^ports:/ { print $5 + 0 }')" 3
eq "reconf: the heavy sweep leaves leaf3's zeroed weight alone (OpenSM never reads back)" "$(weight "$L3" 2 3)" "0 0"
timed reconf "$ENV" qos_swe_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
check "reconf back: leaf1 out 3 SL 3 -> VL 3" same "$L1" 3 3 3

old_sm=$RIG_SM_NODE old_pid=$RIG_OSM_PID
timed restart-sm "$ENV"
reload
eq "restart-sm: the SM moved to the next HCA" "$old_sm -> $RIG_SM_NODE" "node1 -> node2"
gone() { [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
check "restart-sm: the old SM (pid $old_pid) is gone" gone "$old_pid"
eq "restart-sm: ibsim has one client, the new SM" \
    "$(rig console "$ENV" Attached | awk '$1 == "Client" { print $4, $NF }')" "$RIG_OSM_PID SM"
check "restart-sm: leaf2 out 3 rewritten (SL 3 -> VL 3)" same "$L2" 3 3 3
eq "restart-sm: leaf3 port 2 weights VL 3 again" "$(weight "$L3" 2 3)" "64 0"
eq "restart-sm: spine2 port 1 runs VL0-7 again" "$(opervls "$SP2" 1)" VL0-7
for s in "$SP1" "$SP2" "$L1" "$L2" "$L3"; do
    for o in 1 2 3; do same "$s" "$o" 3 3 || fail "restart-sm: lid $s out $o SL 3 is not VL 3"; done
done
ok "restart-sm: every switch port 1-3 maps SL 3 -> VL 3"
[ "$N2" = 5 ] || fail "node2 lid $N2"
stopped

# ------------------------------------------------------------------ ft:4:3:2
# A start that fails half-way (after ibsim and OpenSM are up) stops them.
if out=$(rig start -m nosuch:1:1:1 2>&1); then fail "start -m nosuch:... succeeded"; fi
work=$(sed -n "s/.*no node 'nosuch' in \(.*\)\/nodes.tsv.*/\1/p" <<<"$out")
[ -n "$work" ] || fail "start -m nosuch: unexpected error: $out"
check "a failed start leaves no work dir" test ! -e "$work"
for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$work" && fail "a failed start left ${p#/proc/} running"
done
ok "a failed start leaves no process"

# OpenSM options at start: -c FILE first, then the flags in order (later
# wins); -m/-z once up.
cat >"$SCRATCH/sm.conf" <<'EOF'
# as `qoslane fabric sm-config` writes them
qos_ca_sl2vl 7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7
qos_swe_vlarb_low 0:32,1:32,2:32,3:32,4:32,5:32,6:32,7:32
EOF
start -t ft:4:3:2 -c "$SCRATCH/sm.conf" -L 0:16,1:16,2:16,3:16,4:16,5:16,6:16,7:16 \
    -o qos_swe_vlarb_high=0:4,5:8 -m spine1:2:3:15 -z leaf3:2:3
eq "ft:4:3:2: 6 switches, 12 HCAs" "$(cut -f2 "$RIG_NODES" | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')" "12 ca 6 switch "
eq "ft:4:3:2: leaf4 port 5 goes to spine2 port 4" "$(peer leaf4 5)" "spine2 4"
eq "-c FILE: node2's own port (qos_ca_sl2vl) SL 0 -> VL 7" "$(sq -D sl2vl 0 | awk -F'|' '/^ports:/ { print $2 + 0 }')" 7
eq "-L after -c: leaf1 port 4 weights VL 2 with 16" "$(weight "$(lid leaf1)" 4 2)" "16 0"
eq "-o: leaf1 port 4's high table weights VL 5 with 8" "$(weight "$(lid leaf1)" 4 5)" "16 8"
check "-m spine1:2:3:15: spine1 out 2 SL 3 -> VL 15" same "$(lid spine1)" 2 3 15
check "-m: spine1 out 1 untouched" same "$(lid spine1)" 1 3 3
eq "-z leaf3:2:3: leaf3 port 2 VL 3 weight 0" "$(weight "$(lid leaf3)" 2 3)" "0 0"
clients() { rig console "$ENV" Attached | grep -c '^Client' || true; }
mkdir -p "$RIG_WORK/scratch"
t0=$(ms)
for i in $(seq 9); do
    (cd "$RIG_WORK/scratch" && SIM_HOST=node$i LD_PRELOAD=$RIG_UMAD2SIM exec ibsysstat -S >/dev/null 2>&1) &
    HOLDERS+=($!)
done
for _ in $(seq 100); do [ "$(clients)" -ge 10 ] && break; sleep 0.05; done
eq "9 clients + the SM hold ibsim's 10 slots" "$(clients)" 10
tenth() { rig sim "$ENV" node10 smpquery nodeinfo "$(lid node1)" >/dev/null 2>&1; }
check "a 10th client is refused" eval '! tenth'
# (wait: the shell would report each "Killed" job on stderr)
{ kill -KILL "${HOLDERS[@]}"; wait "${HOLDERS[@]}"; } 2>/dev/null || true
for p in "${HOLDERS[@]}"; do [ ! -e "/proc/$p" ] || fail "holder $p survived SIGKILL"; done
HOLDERS=()
stale=$(( $(clients) - 1 ))
say "after SIGKILL: $stale of 9 slots still held by dead clients"
[ "$stale" -lt 9 ] || check "the dead clients' slots still refuse a new client" eval '! tenth'
t1=$(ms)
rig reap "$ENV" 2>"$SCRATCH/reap.err" || { cat "$SCRATCH/reap.err" >&2; fail reap; }
say "time $(printf '%-12s %5d ms' reap $(( $(ms) - t1 )))  ($(sed -n 's/.*reap: //p' "$SCRATCH/reap.err"))"
[ "$(clients)" = 1 ] || { cat "$SCRATCH/reap.err" >&2; rig console "$ENV" Attached >&2; }
eq "reap: only the SM is attached" "$(clients)" 1
check "reap: a new client works" tenth
say "time $(printf '%-12s %5d ms' slots $(( $(ms) - t0 )))  (9 clients, 10th refused, SIGKILL, reap, 10th works)"
stopped

say "passed: $CHECKS checks in $(( ($(date +%s%N) - T_ALL) / 1000000 )) ms"
