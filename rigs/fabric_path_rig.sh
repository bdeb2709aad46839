#!/usr/bin/env bash
# fabric_path_rig.sh - a multi-switch simulated InfiniBand fabric (ibsim 0.10)
# with a real OpenSM 3.3.23 running QoS, and the levers that break one switch
# behind the SM's back, for proving levels along whole paths. Debian 12
# packages: ibsim-utils libumad2sim0 opensm infiniband-diags (+ gcc for the
# SMP Set tool rigs/smpset.c, built into a cache directory).
#
#   fabric_path_rig.sh start [OPTS]          start; prints the env file
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
#        PortInfo Set OperVLs (1=VL0 2=VL0-1 3=VL0-3 4=VL0-7) on one side
#   fabric_path_rig.sh bounce ENV NODE PORT  unlink + relink one cable (ibsim
#                                            console); waits for the re-sweep
#   fabric_path_rig.sh restart-sm ENV        a fresh SM (on the next HCA)
#                                            rewrites every table
#   fabric_path_rig.sh reap ENV              free ibsim client slots of dead
#                                            clients (10 slots, OpenSM's too)
#   fabric_path_rig.sh lid ENV NAME          a node's LID
#
# OPTS: -t 2level (default: ft:3:2:2, leaf1..3 with node1..6 on ports 1-2 and
#          spine1..2 on ports 3-4; spineN port L goes to leafL)
#          | ft:L:H:S (a generated 2-level fat tree: L leaves of H HCAs, S
#          spines) | FILE (ibnetdiscover topology format)
#       -c FILE  opensm.conf options (KEY VALUE lines, e.g. the output of
#                `qoslane fabric sm-config`) over the rig's defaults
#       -V N     max_op_vls (default 4: VL0-7)
#       -Q       qos FALSE (power-on tables)
#       -s NODE  the HCA that runs OpenSM (default node1)
#       -m NODE:OUT:SL:VL / -z NODE:PORT:VL   misalign / zero-weight once up
#
# The env file holds `export KEY=VALUE` lines (no quoting: a plain parser
# reads it too): IBSIM_SOCKNAME RIG_WORK RIG_UMAD2SIM RIG_NODES (TSV: name
# type lid guid nports) RIG_SM_NODE RIG_IBSIM_PID RIG_OSM_PID RIG_CONSOLE
# RIG_SMPSET. Everything lives in a unique work dir on /dev/shm (RIG_TMPDIR
# overrides) and talks over abstract sockets named after IBSIM_SOCKNAME; only
# processes whose command line names that work dir are ever signalled.
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
        gcc -O2 -Wall -o "$SMPSET.tmp.$$" "$HERE/smpset.c" "$ibmad" || die "cannot build smpset"
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
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF "$RIG_WORK"
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
        echo "export RIG_SM_NODE=$RIG_SM_NODE"
        echo "export RIG_IBSIM_PID=$RIG_IBSIM_PID"
        echo "export RIG_OSM_PID=$RIG_OSM_PID"
        echo "export RIG_CONSOLE=$RIG_WORK/console"
        echo "export RIG_SMPSET=$SMPSET"
    } >"$RIG_WORK/rig.env.tmp"
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
    local l h s
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
            local n=$(((l - 1) * $2 + h))
            printf 'Hca\t1 "node%d"\t# "node%d HCA-1"\n[1]\t"leaf%d"[%d]\t# lid 0 4xQDR\n\n' "$n" "$n" "$l" "$h"
        done
    done
}

nodes_tsv() { # from ibnetdiscover -p: name type lid guid nports
    sim "$RIG_SM_NODE" ibnetdiscover -p | awk '
        $1 == "CA" || $1 == "SW" {
            q = index($0, "\047"); r = substr($0, q + 1); name = substr(r, 1, index(r, "\047") - 1)
            sub(/ HCA-[0-9]+$/, "", name)
            if (!(name in lid)) { order[++n] = name; lid[name] = $2; guid[name] = $4
                                  kind[name] = ($1 == "SW" ? "switch" : "ca") }
            if ($3 + 0 > np[name]) np[name] = $3 + 0
        }
        END { for (i = 1; i <= n; i++) { m = order[i]; printf "%s\t%s\t%d\t%s\t%d\n", m, kind[m], lid[m], guid[m], np[m] } }
    ' | sort -t$'\t' -k2,2r -k3,3n >"$RIG_WORK/nodes.tsv"
    [ -s "$RIG_WORK/nodes.tsv" ] || die "ibnetdiscover found nothing"
}

do_start() {
    local topo=2level conf="" max_op_vls=4 qos=TRUE opt OPTIND=1
    local -a mis=() zer=()
    RIG_SM_NODE=node1
    while getopts "t:c:V:Qs:m:z:" opt; do
        case $opt in
        t) topo=$OPTARG ;; c) conf=$OPTARG ;; V) max_op_vls=$OPTARG ;; Q) qos=FALSE ;;
        s) RIG_SM_NODE=$OPTARG ;; m) mis+=("$OPTARG") ;; z) zer+=("$OPTARG") ;;
        *) exit 2 ;;
        esac
    done
    SHIFTED=$((OPTIND - 1))
    tools
    local base=${RIG_TMPDIR:-/tmp} t0
    [ -n "${RIG_TMPDIR:-}" ] || { [ -w /dev/shm ] && base=/dev/shm; }
    t0=$(ms)
    RIG_WORK=$(mktemp -d "$base/fabric-path-rig.XXXXXX")
    RIG_UMAD2SIM=$UMAD2SIM RIG_NODES=$RIG_WORK/nodes.tsv RIG_IBSIM_PID="" RIG_OSM_PID=""
    export IBSIM_SOCKNAME="fpr$$x$RANDOM"
    unset SIM_SET_ISSM IBSIM_SERVER_NAME IBSIM_SERVER_PORT || true
    case $topo in
    2level) fat_tree 3 2 2 >"$RIG_WORK/net" ;;
    ft:*:*:*) IFS=: read -r _ L H S <<<"$topo"; fat_tree "$L" "$H" "$S" >"$RIG_WORK/net" ;;
    *) [ -f "$topo" ] || die "no topology '$topo'"; cp "$topo" "$RIG_WORK/net" ;;
    esac
    # The rig's defaults: every SL on its own VL, every VL weighted.
    {
        echo "log_file $RIG_WORK/opensm.log"
        echo "dump_files_dir $RIG_WORK"
        echo "force_log_flush TRUE"
        echo "sweep_interval 0"
        echo "console off"
        echo "qos $qos"
        echo "max_op_vls $max_op_vls"
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
        [ -f "$conf" ] || die "no options file '$conf'"
        local key val
        while read -r key val; do
            case $key in '' | '#'*) continue ;; esac
            set_option "$key" "$val"
        done <"$conf"
    fi
    mkfifo "$RIG_WORK/console"
    local n
    n=$(grep -cE '^(Switch|Hca|Ca)[[:space:]]' "$RIG_WORK/net" || true)
    local -a big=()
    [ "$n" -le 2000 ] || big=(-N $((n + 16)))
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
    nodes_tsv
    log "$(awk -F'\t' '$2 == "switch"' "$RIG_NODES" | wc -l) switches, $(awk -F'\t' '$2 == "ca"' "$RIG_NODES" | wc -l) HCAs: SUBNET UP after $(( $(ms) - t0 )) ms"
    local m a b c d
    for m in ${mis[@]+"${mis[@]}"}; do IFS=: read -r a b c d <<<"$m"; do_misalign "$a" "$b" "$c" "$d" >&2; done
    for m in ${zer[@]+"${zer[@]}"}; do IFS=: read -r a b c <<<"$m"; do_zero "$a" "$b" "$c" >&2; done
}

set_option() { # set_option KEY VALUE in opensm.conf
    [[ $1 =~ ^[a-z0-9_]+$ ]] || die "option '$1' is not an opensm.conf key"
    if grep -q "^$1 " "$RIG_WORK/opensm.conf"; then
        sed -i "s|^$1 .*|$1 $2|" "$RIG_WORK/opensm.conf"
    else
        echo "$1 $2" >>"$RIG_WORK/opensm.conf"
    fi
}

do_stop() {
    halt "${RIG_OSM_PID:-}" opensm   # the SM first: it hangs when ibsim goes first
    halt "${RIG_IBSIM_PID:-}" ibsim
    [ "${RIG_KEEP_WORKDIR:-0}" = 1 ] && { log "kept $RIG_WORK"; return; }
    case $RIG_WORK in */fabric-path-rig.*) rm -rf "$RIG_WORK" ;; esac
}

do_misalign() { # NODE OUT SL VL
    local lid
    lid=$(field "$1" 3)
    [ "$(field "$1" 2)" = switch ] || set -- "$1" 0 "$3" "$4"
    log "misalign $1 (lid $lid) out $2: SL $3 -> VL $4, behind the SM"
    sim "$RIG_SM_NODE" "$SMPSET" sl2vl-entry "$lid" "$2" "$3" "$4"
}

do_zero() { # NODE PORT VL
    log "zero-weight $1 (lid $(field "$1" 3)) port $2: VL $3"
    sim "$RIG_SM_NODE" "$SMPSET" vlarb-zero "$(field "$1" 3)" "$2" "$3"
}

console() { # console CMD: one ibsim console command, its output
    local before
    before=$(wc -c <"$RIG_WORK/ibsim.log")
    printf '%s\n' "$1" >"$RIG_WORK/console"
    sleep 0.3
    tail -c +$((before + 1)) "$RIG_WORK/ibsim.log"
}

cmd=${1:-help}; [ $# -gt 0 ] && shift
case $cmd in
start) do_start "$@"; echo "$RIG_WORK/rig.env" ;;
run)
    trap 'rc=$?; [ -z "${RIG_WORK:-}" ] || do_stop; exit $rc' EXIT
    do_start "$@"; shift "$SHIFTED"; [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "run: no command"
    set -a; load "$RIG_WORK/rig.env"; set +a
    export RIG_ENV=$RIG_WORK/rig.env
    set +e; "$@"; rc=$?; set -e; exit $rc ;;
stop) load "${1:-}"; do_stop ;;
sim) load "${1:-}"; shift; [ $# -ge 2 ] || die "sim ENV HOST CMD..."; sim "$@" ;;
misalign) load "${1:-}"; shift; [ $# -eq 4 ] || die "misalign ENV NODE OUT SL VL"; do_misalign "$@" ;;
zero-weight) load "${1:-}"; shift; [ $# -eq 3 ] || die "zero-weight ENV NODE PORT VL"; do_zero "$@" ;;
reconf)
    load "${1:-}"; shift
    if [ $# -lt 2 ] || [ $(($# % 2)) != 0 ]; then die "reconf ENV KEY VALUE..."; fi
    while [ $# -ge 2 ]; do set_option "$1" "$2"; log "opensm.conf: $1 $2"; shift 2; done
    n=$(ups); ours "$RIG_OSM_PID" || die "opensm is not running"
    kill -HUP "$RIG_OSM_PID"; wait_up $((n + 1)) 60; log "re-swept" ;;
opervls)
    load "${1:-}"; shift; [ $# -eq 3 ] || die "opervls ENV NODE PORT N"
    log "OperVLs of $1 (lid $(field "$1" 3)) port $2 -> $3"
    sim "$RIG_SM_NODE" ibportstate "$(field "$1" 3)" "$2" vls "$3" >/dev/null ;;
bounce)
    load "${1:-}"; shift; [ $# -eq 2 ] || die "bounce ENV NODE PORT"
    n=$(ups); console "Unlink \"$1\"[$2]" >/dev/null; sleep 0.5; console "ReLink \"$1\"[$2]" >/dev/null
    wait_up $((n + 1)) 60; log "$1[$2] bounced, re-swept" ;;
restart-sm)
    # A new SM on the node that already holds the SM LID crashes umad2sim
    # 0.10 (the trap it provokes reaches it before its agent exists): move
    # the SM to the next HCA, and free the old SM's slot.
    load "${1:-}"; old=$RIG_OSM_PID; halt "$old" opensm
    console Attached | awk -v p="$old" '$1 == "Client" && $4 == p { sub(":", "", $2); print $2 }' |
        while read -r id; do console "X $id" >/dev/null; done
    RIG_SM_NODE=$(awk -F'\t' -v o="$RIG_SM_NODE" '$2 == "ca" { n[++c] = $1; if ($1 == o) i = c } END { print n[i % c + 1] }' "$RIG_NODES")
    mv "$RIG_WORK/opensm.log" "$RIG_WORK/opensm.log.$old"
    start_sm; wait_up 1 60; log "opensm restarted on $RIG_SM_NODE" ;;
reap)
    # A client killed by a signal never says goodbye; ibsim frees its slot
    # only when a send to it fails. Free the slots of dead clients.
    load "${1:-}"
    console Attached | awk '$1 == "Client" { sub(":", "", $2); print $2, $4 }' |
        while read -r id pid; do
            kill -0 "$pid" 2>/dev/null && continue
            log "freeing ibsim client slot $id (pid $pid is gone)"; console "X $id" >/dev/null
        done ;;
lid) load "${1:-}"; field "$2" 3 ;;
help | -h | --help) sed -n '2,44p' "$0" ;;
*) die "unknown command '$cmd' (try help)" ;;
esac
