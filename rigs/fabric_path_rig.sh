#!/usr/bin/env bash
# fabric_path_rig.sh - a multi-switch simulated InfiniBand fabric (ibsim 0.10)
# with a real OpenSM 3.3.23 running QoS, and the levers that break one switch
# behind the SM's back, for proving levels along whole paths. Debian 12
# packages: ibsim-utils libumad2sim0 opensm infiniband-diags (+ gcc for the
# SMP Set tool rigs/smpset.c, built into a cache directory).
#
#   fabric_path_rig.sh start [OPTS]          start; prints the env file's path
#   fabric_path_rig.sh run [OPTS] -- CMD...  start, run CMD with the env
#                                            exported (RIG_ENV too), stop
#   fabric_path_rig.sh stop ENV              stop what start started (by PID)
#   fabric_path_rig.sh sim ENV HOST CMD...   run a umad tool as simulated HOST
#   fabric_path_rig.sh misalign ENV NODE OUT SL VL
#        SMP Set on NODE (a switch: every in port of OUT; an HCA: OUT 0):
#        SL -> VL. OpenSM keeps its cached copy: a SIGHUP re-sweep does not
#        repair it (bounce the link or restart the SM)
#   fabric_path_rig.sh zero-weight ENV NODE PORT VL
#        weight 0 for VL in both VLArb tables of NODE's PORT
#   fabric_path_rig.sh reconf ENV KEY VALUE [KEY VALUE...]
#        edit opensm.conf, SIGHUP OpenSM, wait for the heavy sweep's SUBNET UP
#   fabric_path_rig.sh opervls ENV NODE PORT N
#        PortInfo Set OperVLs (1=VL0 2=VL0-1 3=VL0-3 4=VL0-7) on one side of
#        the link only; read back
#   fabric_path_rig.sh bounce ENV NODE PORT  unlink + relink one cable (ibsim
#                                            console); waits for both sweeps
#                                            (not the SM's own link: refused)
#   fabric_path_rig.sh restart-sm ENV        a fresh SM (on the next HCA)
#                                            rewrites every table
#   fabric_path_rig.sh reap ENV              free ibsim client slots of dead
#                                            clients (10 slots, OpenSM's too)
#   fabric_path_rig.sh lid ENV NAME          a node's LID
#   fabric_path_rig.sh peer ENV NAME PORT    what that port is cabled to:
#                                            "NAME PORT" (from RIG_LINKS)
#   fabric_path_rig.sh console ENV CMD...    ibsim console commands (one per
#                                            argument: Attached, Dump, ...)
#   fabric_path_rig.sh topology TOPO         print a -t topology's net file
#
# OPTS (later ones win; -c's lines before every other option):
#   -t TOPO  2level (default: rigs/net.2level, leaf1..3 with node1..6 on
#            ports 1-2 and spine1..2 on ports 3-4; spineN port L goes to leafL)
#            | ft:L:H:S (a generated 2-level fat tree: L leaves of H HCAs, S
#            spines; leaf ports 1..H HCAs, H+1..H+S spines) | FILE
#            (ibnetdiscover topology format)
#   -c FILE  opensm.conf options (KEY VALUE lines, `#` comments, e.g. the
#            output of `qoslane fabric sm-config`) over the rig's defaults
#   -o KEY=VALUE  one opensm.conf option (repeatable)
#   -C SL2VL qos_ca_sl2vl      -W SL2VL  qos_swe_sl2vl   (16 VLs, comma-separated)
#   -a VLARB qos_ca_vlarb_low  -A VLARB  qos_ca_vlarb_high  (VL:WEIGHT,...)
#   -L VLARB qos_swe_vlarb_low -H VLARB  qos_swe_vlarb_high
#   -V N     max_op_vls (default 4: VL0-7)
#   -Q       qos FALSE (power-on tables)
#   -s NODE  the HCA that runs OpenSM (default node1)
#   -m NODE:OUT:SL:VL / -z NODE:PORT:VL   misalign / zero-weight once up
# Defaults: every SL on its own VL (SL n -> VL n mod 8), every VL weighted
# (switch ports 64, CA ports 64, high table 0:4), QoS on, no periodic sweep.
#
# The env file holds `export KEY=VALUE` lines (no quoting, no spaces: a plain
# parser reads it too): IBSIM_SOCKNAME RIG_WORK RIG_UMAD2SIM RIG_SM_NODE
# RIG_IBSIM_PID RIG_OSM_PID RIG_CONSOLE RIG_SMPSET RIG_NODES (TSV: name type
# lid guid nports; type switch|ca) RIG_LINKS (TSV: name port peer peer_port,
# both directions). Everything lives in a unique work dir on /dev/shm
# (RIG_TMPDIR overrides) and talks over abstract sockets named after
# IBSIM_SOCKNAME; only processes whose command line names that work dir are
# ever signalled. RIG_KEEP_WORKDIR=1 keeps the work dir (logs) at stop.
# Self-test of every lever: rigs/selftest_fabric_path.sh.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { echo "[fabric-path-rig] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }

CACHE=${QOSLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/qoslane}
SMPSET=$CACHE/smpset

tools() {
    local t
    for t in ibsim opensm smpquery ibnetdiscover ibportstate gcc; do
        command -v "$t" >/dev/null || die "$t missing (scripts/install-deps.sh installs it)"
    done
    UMAD2SIM=$(dpkg -L libumad2sim0 2>/dev/null | grep '/libumad2sim\.so$' | head -n1 || true)
    [ -f "$UMAD2SIM" ] || die "libumad2sim.so missing (apt-get install libumad2sim0)"
    if [ ! -x "$SMPSET" ] || [ "$HERE/smpset.c" -nt "$SMPSET" ]; then
        local ibmad
        ibmad=$(find /usr/lib -name libibmad.so.5 -print -quit)
        [ -n "$ibmad" ] || die "libibmad.so.5 missing (apt-get install libibmad5)"
        mkdir -p "$CACHE"
        gcc -O2 -Wall -Wextra -o "$SMPSET.tmp.$$" "$HERE/smpset.c" "$ibmad" || die "cannot build smpset"
        mv "$SMPSET.tmp.$$" "$SMPSET"
    fi
}

load() {
    [ -f "${1:-}" ] || die "no env file '${1:-}'"
    # shellcheck disable=SC1090  # the env file this rig wrote
    . "$1"
}

# sim HOST CMD...: a umad client as simulated HOST, from a tmpfs scratch dir
# (umad2sim writes ./sys-PID/ there), bounded (clients retry forever when
# ibsim is gone).
sim() {
    local host=$1; shift
    mkdir -p "$RIG_WORK/scratch"
    (cd "$RIG_WORK/scratch" && SIM_HOST=$host LD_PRELOAD=$RIG_UMAD2SIM \
        timeout -k 2 "${RIG_SIM_TIMEOUT:-30}" "$@")
}

field() { # field NAME COLUMN (of nodes.tsv)
    awk -F'\t' -v n="$1" -v c="$2" '$1 == n { print $c; f = 1; exit } END { exit !f }' "$RIG_NODES" ||
        die "no node '$1' in $RIG_NODES"
}

ours() { # ours PID: alive, not a zombie, and started by this rig
    [ -n "${1:-}" ] && [ -r "/proc/$1/cmdline" ] || return 1
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ] || return 1
    # the process may exit between the tests: its /proc entry vanishes
    { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF "$RIG_WORK"
}

halt() { # halt PID NAME: TERM, then KILL after 5 s
    local _
    ours "$1" || return 0
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 50); do ours "$1" || return 0; sleep 0.1; done
    log "$2 (pid $1) ignored SIGTERM: SIGKILL"
    kill -KILL "$1" 2>/dev/null || true
}

ups() { # how many SUBNET UP the current opensm.log has
    local n
    n=$(grep -c "SUBNET UP" "$RIG_WORK/opensm.log" 2>/dev/null) || true
    echo "${n:-0}"
}

wait_up() { # wait_up COUNT SECONDS
    local _
    for _ in $(seq $(($2 * 20))); do
        [ "$(ups)" -ge "$1" ] && return 0
        ours "$RIG_OSM_PID" || { tail -5 "$RIG_WORK/opensm.log" >&2 || true; die "opensm died"; }
        sleep 0.05
    done
    die "no SUBNET UP #$1 within $2 s"
}

write_env() {
    {
        echo "export IBSIM_SOCKNAME=$IBSIM_SOCKNAME"
        echo "export RIG_WORK=$RIG_WORK"
        echo "export RIG_UMAD2SIM=$RIG_UMAD2SIM"
        echo "export RIG_NODES=$RIG_WORK/nodes.tsv"
        echo "export RIG_LINKS=$RIG_WORK/links.tsv"
        echo "export RIG_SM_NODE=$RIG_SM_NODE"
        echo "export RIG_IBSIM_PID=$RIG_IBSIM_PID"
        echo "export RIG_OSM_PID=$RIG_OSM_PID"
        echo "export RIG_CONSOLE=$RIG_WORK/console"
        echo "export RIG_SMPSET=$SMPSET"
    } >"$RIG_WORK/rig.env.tmp"
    # a value with a space or a quote would need quoting: the plain parsers
    # (qoslane's tests) read KEY=VALUE as it stands
    ! grep -vqE '^export [A-Z_][A-Z0-9_]*=[^[:space:]"'\''$`\\]*$' "$RIG_WORK/rig.env.tmp" ||
        die "a value in the env file needs quoting (work dir '$RIG_WORK'?)"
    mv "$RIG_WORK/rig.env.tmp" "$RIG_WORK/rig.env"
}

start_sm() {
    (cd "$RIG_WORK" && SIM_HOST=$RIG_SM_NODE SIM_SET_ISSM=1 LD_PRELOAD=$RIG_UMAD2SIM \
        OSM_CACHE_DIR=$RIG_WORK OSM_TMP_DIR=$RIG_WORK \
        exec opensm -F "$RIG_WORK/opensm.conf" >>"$RIG_WORK/opensm.out" 2>&1 </dev/null) &
    RIG_OSM_PID=$!
    write_env
}

fat_tree() { # fat_tree L H S: ibnetdiscover-format 2-level fat tree
    local l h s n
    for s in $(seq "$3"); do
        printf 'Switch\t%d "spine%d"\t# "spine%d" enhanced port 0\n' "$1" "$s" "$s"
        for l in $(seq "$1"); do printf '[%d]\t"leaf%d"[%d]\t# lid 0 4xQDR\n' "$l" "$l" $(($2 + s)); done
        echo
    done
    for l in $(seq "$1"); do
        printf 'Switch\t%d "leaf%d"\t# "leaf%d" enhanced port 0\n' $(($2 + $3)) "$l" "$l"
        for h in $(seq "$2"); do printf '[%d]\t"node%d"[1]\t# lid 0 4xQDR\n' "$h" $(((l - 1) * $2 + h)); done
        for s in $(seq "$3"); do printf '[%d]\t"spine%d"[%d]\t# lid 0 4xQDR\n' $(($2 + s)) "$s" "$l"; done
        echo
    done
    for l in $(seq "$1"); do
        for h in $(seq "$2"); do
            n=$(((l - 1) * $2 + h))
            printf 'Hca\t1 "node%d"\t# "node%d HCA-1"\n[1]\t"leaf%d"[%d]\t# lid 0 4xQDR\n\n' "$n" "$n" "$l" "$h"
        done
    done
}

topology() { # topology TOPO: the net file of a -t value, on stdout
    local L H S
    case $1 in
    2level) cat "$HERE/net.2level" ;;
    ft:*:*:*)
        IFS=: read -r _ L H S <<<"$1"
        if ! [[ $L =~ ^[1-9][0-9]*$ && $H =~ ^[1-9][0-9]*$ && $S =~ ^[1-9][0-9]*$ ]]; then
            die "topology '$1': ft:LEAVES:HCAS:SPINES, each a number >= 1"
        fi
        if [ $((H + S)) -gt 254 ] || [ "$L" -gt 254 ]; then die "topology '$1': a switch has at most 254 ports"; fi
        fat_tree "$L" "$H" "$S" ;;
    *) [ -f "$1" ] || die "no topology '$1'"; cat "$1" ;;
    esac
}

# nodes.tsv (name type lid guid nports) and links.tsv (name port peer
# peer_port, every cable in both directions) from `ibnetdiscover -p`.
discover() {
    sim "$RIG_SM_NODE" ibnetdiscover -p >"$RIG_WORK/ibnetdiscover-p.txt" || die "ibnetdiscover -p failed"
    awk -v nodes="$RIG_WORK/nodes.tsv" -v links="$RIG_WORK/links.tsv" '
        function names(line,   q, r, a, b) {   # ( '\''a'\'' - '\''b'\'' )
            q = index(line, "\047"); r = substr(line, q + 1); a = substr(r, 1, index(r, "\047") - 1)
            r = substr(r, index(r, "\047") + 1); q = index(r, "\047"); r = substr(r, q + 1)
            b = substr(r, 1, index(r, "\047") - 1)
            sub(/ HCA-[0-9]+$/, "", a); sub(/ HCA-[0-9]+$/, "", b)
            me = a; peer = b
        }
        $1 == "CA" || $1 == "SW" {
            names($0)
            if (!(me in lid)) { order[++n] = me; lid[me] = $2; guid[me] = $4
                                kind[me] = ($1 == "SW" ? "switch" : "ca") }
            if ($3 + 0 > np[me]) np[me] = $3 + 0
            # "SW 4 3 GUID 4x QDR - SW 2 1 GUID ( ... )": the peer port is $(NF-?)
            for (i = 1; i <= NF; i++) if ($i == "-") { pp = $(i + 3); break }
            print me "\t" $3 "\t" peer "\t" pp | "sort -t\"\t\" -k1,1 -k2,2n >" links
        }
        END { for (i = 1; i <= n; i++) { m = order[i]; printf "%s\t%s\t%d\t%s\t%d\n", m, kind[m], lid[m], guid[m], np[m] } }
    ' "$RIG_WORK/ibnetdiscover-p.txt" | sort -t$'\t' -k2,2r -k3,3n >"$RIG_WORK/nodes.tsv"
    [ -s "$RIG_WORK/nodes.tsv" ] || die "ibnetdiscover found nothing"
}

do_start() {
    local topo=2level conf="" opt OPTIND=1
    local -a mis=() zer=() opts=()
    RIG_SM_NODE=node1
    while getopts "t:c:o:C:W:a:A:L:H:V:Qs:m:z:" opt; do
        case $opt in
        t) topo=$OPTARG ;; c) conf=$OPTARG ;;
        o) [[ $OPTARG == *=* ]] || die "-o KEY=VALUE, not '$OPTARG'"; opts+=("${OPTARG%%=*}" "${OPTARG#*=}") ;;
        C) opts+=(qos_ca_sl2vl "$OPTARG") ;; W) opts+=(qos_swe_sl2vl "$OPTARG") ;;
        a) opts+=(qos_ca_vlarb_low "$OPTARG") ;; A) opts+=(qos_ca_vlarb_high "$OPTARG") ;;
        L) opts+=(qos_swe_vlarb_low "$OPTARG") ;; H) opts+=(qos_swe_vlarb_high "$OPTARG") ;;
        V) opts+=(max_op_vls "$OPTARG") ;; Q) opts+=(qos FALSE) ;;
        s) RIG_SM_NODE=$OPTARG ;; m) mis+=("$OPTARG") ;; z) zer+=("$OPTARG") ;;
        *) exit 2 ;;
        esac
    done
    SHIFTED=$((OPTIND - 1))
    [ -z "$conf" ] || [ -f "$conf" ] || die "no options file '$conf'"
    tools
    local base=${RIG_TMPDIR:-/tmp} t0
    [ -n "${RIG_TMPDIR:-}" ] || { [ -w /dev/shm ] && base=/dev/shm; }
    t0=$(ms)
    RIG_WORK=$(mktemp -d "$base/fabric-path-rig.XXXXXX")
    RIG_UMAD2SIM=$UMAD2SIM RIG_NODES=$RIG_WORK/nodes.tsv RIG_LINKS=$RIG_WORK/links.tsv
    RIG_SMPSET=$SMPSET RIG_IBSIM_PID="" RIG_OSM_PID=""
    export IBSIM_SOCKNAME="fpr$$x$RANDOM"
    unset SIM_SET_ISSM IBSIM_SERVER_NAME IBSIM_SERVER_PORT || true
    topology "$topo" >"$RIG_WORK/net"
    # The rig's defaults: every SL on its own VL, every VL weighted.
    {
        echo "log_file $RIG_WORK/opensm.log"
        echo "dump_files_dir $RIG_WORK"
        echo "force_log_flush TRUE"
        echo "sweep_interval 0"
        echo "console off"
        echo "qos TRUE"
        echo "max_op_vls 4"
        local p
        for p in qos qos_ca qos_swe qos_sw0; do
            echo "${p}_max_vls 8"
            echo "${p}_high_limit 0"
            echo "${p}_vlarb_high 0:4"
            echo "${p}_vlarb_low 0:64,1:64,2:64,3:64,4:64,5:64,6:64,7:64"
            echo "${p}_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7"
        done
    } >"$RIG_WORK/opensm.conf"
    if [ -n "$conf" ]; then
        local key val
        while read -r key val; do
            case $key in '' | '#'*) continue ;; esac
            set_option "$key" "$val"
        done <"$conf"
    fi
    local i
    for ((i = 0; i < ${#opts[@]}; i += 2)); do set_option "${opts[i]}" "${opts[i + 1]}"; done
    mkfifo "$RIG_WORK/console"
    local n
    n=$(grep -cE '^(Switch|Hca|Ca)[[:space:]]' "$RIG_WORK/net" || true)
    local -a big=()
    [ "$n" -le 2000 ] || big=(-N $((n + 16)))
    # ibsim's default port table holds 13,312 ports (every node's port 0 too).
    local ports
    ports=$(grep -cE '^\[' "$RIG_WORK/net" || true)
    [ $((ports + n)) -le 13000 ] || big+=(-P $((ports + n + 64)))
    # The console FIFO opened read-write never reads EOF.
    (cd "$RIG_WORK" && exec ibsim -s "${big[@]}" "$RIG_WORK/net" <>"$RIG_WORK/console" >"$RIG_WORK/ibsim.log" 2>&1) &
    RIG_IBSIM_PID=$!
    write_env
    local _
    for _ in $(seq 400); do
        grep -qE "@$IBSIM_SOCKNAME:ctl@?\$" /proc/net/unix && break
        ours "$RIG_IBSIM_PID" || { cat "$RIG_WORK/ibsim.log" >&2; die "ibsim died"; }
        sleep 0.05
    done
    start_sm
    wait_up 1 "${RIG_UP_TIMEOUT:-60}"
    discover
    log "$(awk -F'\t' '$2 == "switch"' "$RIG_NODES" | wc -l) switches, $(awk -F'\t' '$2 == "ca"' "$RIG_NODES" | wc -l) HCAs: SUBNET UP after $(( $(ms) - t0 )) ms"
    local m a b c d
    for m in ${mis[@]+"${mis[@]}"}; do IFS=: read -r a b c d <<<"$m"; do_misalign "$a" "$b" "$c" "$d" >&2; done
    for m in ${zer[@]+"${zer[@]}"}; do IFS=: read -r a b c <<<"$m"; do_zero "$a" "$b" "$c" >&2; done
}

set_option() { # set_option KEY VALUE in opensm.conf (replaced, else appended)
    [[ $1 =~ ^[a-z0-9_]+$ ]] || die "option '$1' is not an opensm.conf key"
    [[ $2 != *$'\n'* ]] || die "option '$1': a value is one line"
    awk -v k="$1" -v v="$2" '$1 == k { print k " " v; done = 1; next } { print } END { if (!done) print k " " v }' \
        "$RIG_WORK/opensm.conf" >"$RIG_WORK/opensm.conf.tmp"
    mv "$RIG_WORK/opensm.conf.tmp" "$RIG_WORK/opensm.conf"
}

do_stop() {
    halt "${RIG_OSM_PID:-}" opensm   # the SM first: it hangs when ibsim goes first
    halt "${RIG_IBSIM_PID:-}" ibsim
    [ "${RIG_KEEP_WORKDIR:-0}" = 1 ] && { log "kept $RIG_WORK"; return; }
    case $RIG_WORK in */fabric-path-rig.*) rm -rf "$RIG_WORK" ;; esac
}

num() { [[ $2 =~ ^[0-9]+$ ]] || die "$1: '$2' is not a number"; }

do_misalign() { # NODE OUT SL VL
    local lid
    num port "$2"; num SL "$3"; num VL "$4"
    lid=$(field "$1" 3)
    [ "$(field "$1" 2)" = switch ] || set -- "$1" 0 "$3" "$4"
    log "misalign $1 (lid $lid) out $2: SL $3 -> VL $4, behind the SM"
    sim "$RIG_SM_NODE" "$RIG_SMPSET" sl2vl-entry "$lid" "$2" "$3" "$4"
}

do_zero() { # NODE PORT VL
    local lid
    num port "$2"; num VL "$3"
    lid=$(field "$1" 3)
    log "zero-weight $1 (lid $lid) port $2: VL $3"
    sim "$RIG_SM_NODE" "$RIG_SMPSET" vlarb-zero "$lid" "$2" "$3"
}

do_opervls() { # NODE PORT N
    local lid want got
    num port "$2"; num N "$3"
    case $3 in 1) want=VL0 ;; 2) want=VL0-1 ;; 3) want=VL0-3 ;; 4) want=VL0-7 ;; *) die "opervls: N is 1..4" ;; esac
    lid=$(field "$1" 3)
    log "OperVLs of $1 (lid $lid) port $2 -> $want (this side of the link only)"
    sim "$RIG_SM_NODE" ibportstate "$lid" "$2" vls "$3" >/dev/null 2>&1 || true  # it also queries the peer, and says so
    got=$(sim "$RIG_SM_NODE" smpquery portinfo "$lid" "$2" | sed -n 's/^OperVLs:\.*//p')
    [ "$got" = "$want" ] || die "opervls: $1 port $2 reads OperVLs '$got', not $want"
}

# console CMD...: ibsim console commands (one per argument), sent at once;
# prints what ibsim printed for them. ibsim answers in order, so an unknown
# command sent last marks the end ("command 'MARK' unknown - skipped").
console() {
    local before mark=rig_mark_$$_$RANDOM _
    before=$(wc -c <"$RIG_WORK/ibsim.log")
    # Opening a FIFO for writing waits for a reader: bounded, in case ibsim is gone.
    # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
    timeout 5 bash -c 'printf "%s\n" "$@" >"$0"' "$RIG_WORK/console" "$@" "$mark" ||
        die "ibsim's console could not be written within 5 s (is ibsim running?) ($*)"
    for _ in $(seq 500); do
        tail -c +$((before + 1)) "$RIG_WORK/ibsim.log" | grep -qF "'$mark'" && break
        sleep 0.01
    done
    tail -c +$((before + 1)) "$RIG_WORK/ibsim.log" | grep -qF "'$mark'" ||
        die "ibsim's console did not answer within 5 s ($*)"
    tail -c +$((before + 1)) "$RIG_WORK/ibsim.log" | sed "/'$mark'/,\$d; s/sim> //g"
}

do_bounce() { # NODE PORT
    local lid n state far
    num port "$2"
    lid=$(field "$1" 3)
    far=$(awk -F'\t' -v n="$1" -v p="$2" '$1 == n && $2 == p { print $3 }' "$RIG_LINKS")
    [ -n "$far" ] || die "bounce: $1 port $2 is not cabled"
    # The SM learns of a link through the traps of its ends, which it cannot
    # receive over its own cut link (and it sweeps on no timer here).
    if [ "$1" = "$RIG_SM_NODE" ] || [ "$far" = "$RIG_SM_NODE" ]; then
        die "bounce: $1 port $2 is the SM's own link ($RIG_SM_NODE): the SM would not notice; bounce another, or restart-sm first (it moves the SM to the next HCA)"
    fi
    # each half makes the SM sweep: wait for the unlink's, then the relink's
    n=$(ups)
    console "Unlink \"$1\"[$2]" >/dev/null
    wait_up $((n + 1)) 20
    console "ReLink \"$1\"[$2]" >/dev/null
    wait_up $((n + 2)) 20
    state=$(sim "$RIG_SM_NODE" smpquery portinfo "$lid" "$2" | sed -n 's/^LinkState:\.*//p')
    [ "$state" = Active ] || die "bounce: $1 port $2 is '$state' after the re-sweep"
    log "$1[$2] bounced, re-swept, Active"
}

do_restart_sm() {
    # A new SM on the node that already holds the SM LID crashes umad2sim
    # 0.10 (the trap it provokes reaches it before its agent exists): move
    # the SM to the next HCA, and free the old SM's slot.
    local old=$RIG_OSM_PID t0
    local -a stale=()
    t0=$(ms)
    halt "$old" opensm
    mapfile -t stale < <(console Attached | awk -v p="$old" '$1 == "Client" && $4 == p { sub(":", "", $2); print "X " $2 }')
    [ ${#stale[@]} -eq 0 ] || { log "freeing the old SM's ibsim slot"; console "${stale[@]}" >/dev/null; }
    RIG_SM_NODE=$(awk -F'\t' -v o="$RIG_SM_NODE" '$2 == "ca" { n[++c] = $1; if ($1 == o) i = c } END { print n[i % c + 1] }' "$RIG_NODES")
    mv "$RIG_WORK/opensm.log" "$RIG_WORK/opensm.log.$old"
    start_sm
    wait_up 1 60
    log "opensm restarted on $RIG_SM_NODE (pid $RIG_OSM_PID): SUBNET UP after $(( $(ms) - t0 )) ms"
}

do_reap() {
    # A client killed by a signal never says goodbye; ibsim frees its slot
    # only when a send to it fails. Free the slots of dead clients.
    local id pid state freed=()
    while read -r id pid; do
        state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
        [ -n "$state" ] && [ "$state" != Z ] && continue
        freed+=("X $id")
    done < <(console Attached | awk '$1 == "Client" { sub(":", "", $2); print $2, $4 }')
    [ ${#freed[@]} -eq 0 ] || console "${freed[@]}" >/dev/null
    log "reap: freed ${#freed[@]} ibsim client slot(s) of dead clients"
}

cmd=${1:-help}; [ $# -gt 0 ] && shift
usage() { die "usage: $0 $cmd ENV $1"; }
case $cmd in
start)
    # a start that fails half-way stops what it started
    trap 'rc=$?; [ $rc = 0 ] || [ -z "${RIG_WORK:-}" ] || do_stop; exit $rc' EXIT
    do_start "$@"; echo "$RIG_WORK/rig.env" ;;
run)
    trap 'rc=$?; [ -z "${RIG_WORK:-}" ] || do_stop; exit $rc' EXIT
    do_start "$@"; shift "$SHIFTED"; [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "run: no command"
    set -a; load "$RIG_WORK/rig.env"; set +a
    export RIG_ENV=$RIG_WORK/rig.env
    set +e; "$@"; rc=$?; set -e; exit $rc ;;
topology) [ $# -eq 1 ] || die "usage: $0 topology TOPO"; topology "$1" ;;
stop) load "${1:-}"; do_stop ;;
sim) load "${1:-}"; shift; [ $# -ge 2 ] || usage "HOST CMD..."; sim "$@" ;;
misalign) load "${1:-}"; shift; [ $# -eq 4 ] || usage "NODE OUT SL VL"; do_misalign "$@" ;;
zero-weight) load "${1:-}"; shift; [ $# -eq 3 ] || usage "NODE PORT VL"; do_zero "$@" ;;
reconf)
    load "${1:-}"; shift
    if [ $# -lt 2 ] || [ $(($# % 2)) != 0 ]; then usage "KEY VALUE..."; fi
    while [ $# -ge 2 ]; do set_option "$1" "$2"; log "opensm.conf: $1 $2"; shift 2; done
    n=$(ups); ours "$RIG_OSM_PID" || die "opensm is not running"
    kill -HUP "$RIG_OSM_PID"; wait_up $((n + 1)) 60; log "re-swept" ;;
opervls) load "${1:-}"; shift; [ $# -eq 3 ] || usage "NODE PORT N"; do_opervls "$@" ;;
bounce) load "${1:-}"; shift; [ $# -eq 2 ] || usage "NODE PORT"; do_bounce "$@" ;;
restart-sm) load "${1:-}"; do_restart_sm ;;
reap) load "${1:-}"; do_reap ;;
lid) load "${1:-}"; shift; [ $# -eq 1 ] || usage NAME; field "$1" 3 ;;
peer)
    load "${1:-}"; shift; [ $# -eq 2 ] || usage "NAME PORT"
    awk -F'\t' -v n="$1" -v p="$2" '$1 == n && $2 == p { print $3, $4; f = 1; exit } END { exit !f }' "$RIG_LINKS" ||
        die "$1 port $2 is not cabled" ;;
console) load "${1:-}"; shift; [ $# -ge 1 ] || usage "CMD..."; console "$@" ;;
help | -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*) die "unknown command '$cmd' (try help)" ;;
esac
