#!/usr/bin/env bash
# ibsim_rig.sh - simulated InfiniBand fabric (ibsim) + real OpenSM with QoS,
# read back with real infiniband-diags tools.  Debian 12 (bookworm) packages:
#   ibsim-utils 0.10, libumad2sim0 0.10, opensm 3.3.23, infiniband-diags 44.0
#
# Usage:
#   ibsim_rig.sh [-n NODE] [-p PORT] [-s SL2VL] [-V MAX_OP_VLS] [-L VLARB_LOW]
#                [-H VLARB_HIGH] [-Q] [-- CMD ARGS...]
#
#   -n NODE    node whose port to inspect: node1|node2|node3|sw1   (default node2)
#   -p PORT    port number on that node                              (default 1)
#   -s SL2VL   16 comma-separated VLs for OpenSM qos_ca_sl2vl
#              (default 7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7)
#   -V N       OpenSM max_op_vls (1=VL0, 2=VL0-1, 3=VL0-3, 4=VL0-7; default 4)
#   -L VLARB   OpenSM qos_ca_vlarb_low, VL:weight pairs
#              (default 0:32,1:32,2:32,3:32,4:32,5:32,6:32,7:32)
#   -H VLARB   OpenSM qos_ca_vlarb_high (default 0:4)
#   -Q         run OpenSM with "qos FALSE": SL2VL stays at ibsim's power-on
#              default (SL0-14 -> VL0-14, SL15 -> VL7, OperVLs VL0-7)
#   -- CMD     instead of printing the table, run CMD inside the simulated
#              fabric (LD_PRELOAD=libumad2sim.so, SIM_HOST=NODE, IBSIM_SOCKNAME
#              exported; also RIG_LID RIG_PORT RIG_WORK RIG_UMAD2SIM RIG_OSM_PID
#              RIG_IBSIM_PID, RIG_CA (the simulated CA name, ibsim0),
#              RIG_NODE_GUID RIG_SM_LID for NODE, and RIG_<NAME>_LID,
#              RIG_<NAME>_GUID for every HCA node, e.g. RIG_NODE3_LID) and exit
#              with its status.  To re-program QoS: edit $RIG_WORK/opensm.conf,
#              then kill -HUP $RIG_OSM_PID.  rigs/smpquery-sim runs the real
#              smpquery from that environment (QOSLANE_SMPQUERY can name it).
#
# Environment: RIG_KEEP_WORKDIR=1 keeps the temp dir (logs) for debugging;
#              it is under /dev/shm when writable (RIG_TMPDIR=DIR overrides).
#              RIG_NO_INSTALL=1 never calls apt-get; RIG_FORCE_INSTALL=1 always
#              runs "apt-get install" (a no-op when already installed).
#
# Adapted for qoslane from the project's shared recipe: -L/-H set the CA VL
# arbitration tables (for the "weight 0" warning), and the -- CMD environment
# names each simulated node's GUID and LID so tests can build a sysfs fixture
# tree matching the simulated port.
#
# Everything is local: ibsim talks over abstract AF_UNIX datagram sockets named
# "@$IBSIM_SOCKNAME:ctl", ":outN", ":inPID" (no TCP ports).  A unique socket
# name per run keeps concurrent rigs (and other ibsim users) apart.
# Only the processes this script starts are stopped, by PID.
set -euo pipefail

NODE=node2
PORT=1
CA_SL2VL=7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7
MAX_OP_VLS=4
SM_NODE=node1
QOS=TRUE
CA_VLARB_LOW=0:32,1:32,2:32,3:32,4:32,5:32,6:32,7:32
CA_VLARB_HIGH=0:4
while getopts "n:p:s:V:L:H:Qh" opt; do
    case $opt in
    n) NODE=$OPTARG ;;
    p) PORT=$OPTARG ;;
    s) CA_SL2VL=$OPTARG ;;
    V) MAX_OP_VLS=$OPTARG ;;
    L) CA_VLARB_LOW=$OPTARG ;;
    H) CA_VLARB_HIGH=$OPTARG ;;
    Q) QOS=FALSE ;;
    h) sed -n "2,43p" "$0"; exit 0 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift

log() { echo "[rig] $*" >&2; }
die() { echo "[rig] ERROR: $*" >&2; exit 1; }

# ---------------------------------------------------------------- install
need_install=0
for b in ibsim opensm smpquery saquery ibstat; do
    command -v "$b" >/dev/null 2>&1 || need_install=1
done
UMAD2SIM=$(dpkg -L libumad2sim0 2>/dev/null | grep '/libumad2sim\.so$' | head -n1 || true)
[ -n "$UMAD2SIM" ] && [ -f "$UMAD2SIM" ] || need_install=1
[ "${RIG_FORCE_INSTALL:-0}" = 1 ] && need_install=1
if [ "$need_install" = 1 ]; then
    [ "${RIG_NO_INSTALL:-0}" = 1 ] && die "packages missing and RIG_NO_INSTALL=1"
    [ "$(id -u)" = 0 ] || die "need root to apt-get install ibsim-utils opensm infiniband-diags"
    log "installing ibsim-utils opensm infiniband-diags"
    export DEBIAN_FRONTEND=noninteractive
    pkgs=(ibsim-utils libumad2sim0 opensm infiniband-diags)
    # fresh containers have no package lists yet
    ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 || apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null &&
          apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; } ||
        die "apt-get install ${pkgs[*]} failed"
    UMAD2SIM=$(dpkg -L libumad2sim0 | grep '/libumad2sim\.so$' | head -n1)
fi
[ -f "$UMAD2SIM" ] || die "libumad2sim.so not found"

# ---------------------------------------------------------------- workdir
# On tmpfs when there is one: every umad2sim client writes a fake sysfs tree
# (./sys-<pid>/) into its working directory, and on a busy ext4 disk that
# makes a 4 ms smpquery call take 60-80 ms.  RIG_TMPDIR overrides.
tmpbase=${RIG_TMPDIR:-}
if [ -z "$tmpbase" ]; then
    tmpbase=/tmp
    [ -d /dev/shm ] && [ -w /dev/shm ] && tmpbase=/dev/shm
fi
WORK=$(mktemp -d "$tmpbase/ibsim-rig.XXXXXX")
IBSIM_PID=""
OSM_PID=""
export IBSIM_SOCKNAME="rig$$x${RANDOM}"
unset IBSIM_SERVER_NAME IBSIM_SERVER_PORT SIM_SET_ISSM || true

stop_pid() { # stop_pid PID NAME : TERM, wait up to 5 s, then KILL; reap
    local pid=$1 name=$2 _
    [ -n "$pid" ] || return 0
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        # a reaped-by-us child disappears at once; zombies need wait
        [ "$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null)" = Z ] && break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null)" != Z ]; then
        log "$name (pid $pid) ignored SIGTERM, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pid "$OSM_PID" opensm     # SM first, then the fabric
    stop_pid "$IBSIM_PID" ibsim
    if [ "${RIG_KEEP_WORKDIR:-0}" = 1 ] || [ $rc -ne 0 ]; then
        log "logs kept in $WORK"
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
ORIG_PWD=$PWD
cd "$WORK"   # umad2sim creates ./sys-<pid>/ in the CWD of every client

# ---------------------------------------------------------------- topology
cat >net <<'EOF'
# 1 switch, 3 single-port HCAs. node1 hosts the SM.
# "# lid 0 4xQDR" tails let ibsim parse link width/speed (else it warns).
Hca	1 "node1"	# "node1 HCA-1"
[1]	"sw1"[1]	# lid 0 4xQDR

Hca	1 "node2"	# "node2 HCA-1"
[1]	"sw1"[2]	# lid 0 4xQDR

Hca	1 "node3"	# "node3 HCA-1"
[1]	"sw1"[3]	# lid 0 4xQDR

Switch	8 "sw1"	# "sw1" enhanced port 0
[1]	"node1"[1]	# lid 0 4xQDR
[2]	"node2"[1]	# lid 0 4xQDR
[3]	"node3"[1]	# lid 0 4xQDR
EOF

cat >qos-policy.conf <<'EOF'
qos-levels
    qos-level
        name: default
        sl: 0
    end-qos-level
end-qos-levels
EOF

cat >opensm.conf <<EOF
log_file $WORK/opensm.log
dump_files_dir $WORK
accum_log_file FALSE
force_log_flush TRUE
sweep_interval 0
console off
max_op_vls $MAX_OP_VLS
qos $QOS
qos_policy_file $WORK/qos-policy.conf
qos_max_vls 8
qos_high_limit 0
qos_vlarb_high 0:4
qos_vlarb_low 0:64,1:64,2:64,3:64,4:64,5:64,6:64,7:64
qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
qos_ca_max_vls 8
qos_ca_high_limit 0
qos_ca_vlarb_high $CA_VLARB_HIGH
qos_ca_vlarb_low $CA_VLARB_LOW
qos_ca_sl2vl $CA_SL2VL
EOF

# ---------------------------------------------------------------- ibsim
t0=$(date +%s%N)
ms() { echo $(( ($(date +%s%N) - t0) / 1000000 )); }
ibsim -s -n net >ibsim.log 2>&1 </dev/null &
IBSIM_PID=$!
for _ in $(seq 100); do   # abstract socket shows up as "@name:ctl" in /proc/net/unix
    grep -qE "@${IBSIM_SOCKNAME}:ctl@?\$" /proc/net/unix && break
    kill -0 "$IBSIM_PID" 2>/dev/null || { cat ibsim.log >&2; die "ibsim exited"; }
    sleep 0.05
done
grep -qE "@${IBSIM_SOCKNAME}:ctl@?\$" /proc/net/unix || die "ibsim socket never appeared"
log "ibsim pid $IBSIM_PID up after $(ms) ms (socket @${IBSIM_SOCKNAME}:ctl)"

# Run a libibumad tool inside the sim. umad2sim clients retry connect() every
# 2 s forever if ibsim is gone (opensm even ignores SIGTERM then), so always
# bound them with timeout -k.
sim() { local host=$1; shift
    SIM_HOST=$host LD_PRELOAD=$UMAD2SIM timeout -k 5 20 "$@"; }

# ---------------------------------------------------------------- opensm
# SIM_SET_ISSM=1 makes ibsim refuse a 2nd SM on the same node
# ("SM already exists on ...") instead of silently breaking the first.
SIM_HOST=$SM_NODE SIM_SET_ISSM=1 LD_PRELOAD=$UMAD2SIM \
    OSM_CACHE_DIR=$WORK OSM_TMP_DIR=$WORK \
    opensm -F "$WORK/opensm.conf" >opensm.stdout 2>&1 </dev/null &
OSM_PID=$!
for _ in $(seq 300); do
    grep -q "SUBNET UP" opensm.log 2>/dev/null && break
    kill -0 "$OSM_PID" 2>/dev/null || { cat opensm.stdout opensm.log >&2 2>/dev/null; die "opensm exited"; }
    sleep 0.05
done
grep -q "SUBNET UP" opensm.log || { cat opensm.log >&2; die "no SUBNET UP within 15 s"; }
if grep -q "ERR" opensm.log; then grep "ERR" opensm.log >&2; fi
log "opensm pid $OSM_PID: SUBNET UP after $(ms) ms"

# ---------------------------------------------------------------- target
addr=$(sim "$NODE" ibaddr 2>&1) || die "ibaddr as $NODE failed: $addr"
LID=$(printf '%s\n' "$addr" | sed -n 's/.*LID start \(0x[0-9a-fA-F]*\).*/\1/p')
[ -n "$LID" ] || die "cannot parse LID from: $addr"
LID=$((LID))
state=$(sim "$SM_NODE" smpquery portinfo "$LID" "$PORT" | sed -n 's/^LinkState:\.*//p')
[ "$state" = Active ] || die "$NODE lid $LID port $PORT state '$state' (expected Active)"
log "$NODE: lid $LID port $PORT Active after $(ms) ms"

# Identity of every simulated HCA, as its sysfs would show it (tests build a
# fixture tree from these: the preload's fake sysfs is invisible to Rust).
for n in node1 node2 node3; do
    info=$(sim "$n" ibstat) || die "ibstat as $n failed: $info"
    guid=$(printf '%s\n' "$info" | sed -n 's/.*Node GUID: \(0x[0-9a-fA-F]*\).*/\1/p')
    nlid=$(printf '%s\n' "$info" | sed -n 's/.*Base lid: \([0-9]*\).*/\1/p')
    smlid=$(printf '%s\n' "$info" | sed -n 's/.*SM lid: \([0-9]*\).*/\1/p')
    ca=$(sim "$n" ibstat -l | head -n1)
    if [ -z "$guid" ] || [ -z "$nlid" ]; then die "cannot parse ibstat of $n: $info"; fi
    N=$(printf '%s' "$n" | tr '[:lower:]' '[:upper:]')
    export "RIG_${N}_GUID=$guid" "RIG_${N}_LID=$nlid"
    if [ "$n" = "$NODE" ]; then
        export RIG_NODE_GUID=$guid RIG_SM_LID=$smlid RIG_CA=$ca
    fi
done

export RIG_LID=$LID RIG_PORT=$PORT RIG_WORK=$WORK RIG_UMAD2SIM=$UMAD2SIM \
    RIG_OSM_PID=$OSM_PID RIG_IBSIM_PID=$IBSIM_PID
if [ $# -gt 0 ]; then
    set +e
    # run from the caller's directory (relative paths keep working); note that
    # umad2sim makes ./sys-<pid>/ there while a client runs (removed at exit)
    (cd "$ORIG_PWD" && SIM_HOST=$NODE LD_PRELOAD=$UMAD2SIM exec "$@")
    rc=$?
    set -e
    exit $rc
fi

case $NODE in sw*) cfg="qos_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7" ;; *) cfg="qos_ca_sl2vl $CA_SL2VL" ;; esac
[ "$QOS" = TRUE ] || cfg="qos FALSE: nothing, ibsim default"
echo "# smpquery sl2vl $LID $PORT   (node $NODE, configured $cfg)"
sim "$SM_NODE" smpquery sl2vl "$LID" "$PORT"
echo "# smpquery portinfo $LID $PORT | VL fields"
sim "$SM_NODE" smpquery portinfo "$LID" "$PORT" | grep -E '^(VLCap|OperVLs|VLHighLimit|VLArb)'
log "done after $(ms) ms"
