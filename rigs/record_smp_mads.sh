#!/usr/bin/env bash
# record_smp_mads.sh ENV OUTDIR - record the MADs real smpquery exchanges on a
# running rigs/fabric_path_rig.sh fabric (started with
# `-m spine1:2:3:15 -z leaf3:2:3`), as fixtures for the in-process SMP
# reader's encoder and decoders (crates/qoslane/src/fabric/read/mad.rs).
#
# For each query, OUTDIR/NAME.txt is smpquery's normal output and
# OUTDIR/NAME.mads every MAD it sent and received (`smpquery -ddd`): a line
# `send` or `recv`, then the 256-byte MAD as 16 lines of hex (the send
# buffer's 64-byte umad header is dropped).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 ENV OUTDIR" >&2; exit 2; }
env_file=$1
out=$2
rig=$(dirname "$0")/fabric_path_rig.sh
mkdir -p "$out"

# The MADs of a `-ddd` debug stream on stdin.
mads_of() {
    awk '
        /^send buf$/ { mode = "send"; skip = 4; n = 0; print "send"; next }
        /^rcv buf$/  { mode = "recv"; skip = 0; n = 0; print "recv"; next }
        mode != "" && /^[0-9a-f]{4}( [0-9a-f]{4}){7}$/ {
            if (skip > 0) { skip--; next }
            print; n++
            if (n == 16) mode = ""
            next
        }
        { mode = "" }'
}

record() { # NAME ARGS...
    local name=$1
    shift
    bash "$rig" sim "$env_file" node2 smpquery "$@" >"$out/$name.txt" 2>/dev/null
    bash "$rig" sim "$env_file" node2 smpquery -ddd "$@" 2>&1 >/dev/null | mads_of >"$out/$name.mads"
}

# perfquery's PMA Gets (ClassPortInfo first, then the attribute; what it
# printed, stdout and stderr, in NAME.txt). PortXmitDataSL: the simulator
# does not serve it and gives the request back (three tries).
record_pma() { # NAME ARGS...
    local name=$1
    shift
    bash "$rig" sim "$env_file" node2 perfquery "$@" >"$out/$name.txt" 2>&1 || true
    bash "$rig" sim "$env_file" node2 perfquery -ddd "$@" 2>&1 >/dev/null | mads_of >"$out/$name.mads"
}

record spine1.lid2.portinfo.2 portinfo 2 2
record spine1.lid2.sl2vl.2 sl2vl 2 2
record leaf3.lid7.vlarb.2 vlarb 7 2
record node2.lid5.portinfo.1 portinfo 5 1
record node2.lid5.sl2vl sl2vl 5
record node2.lid5.vlarb.1 vlarb 5 1
record leaf1.lid4.nodeinfo nodeinfo 4
record leaf1.dr.portinfo.3 -D portinfo 0,1 3
# Issue 35: the PMA attributes (the console set node2's VL 3 wait to 500
# first: `PerformanceSet "node2"[1] PortVLXmitWaitCounters.PortVLXmitWaitCounters3=500`).
record_pma node2.lid5.vlxmit.1 --vlxmitcounters 5 1
record_pma node2.lid5.xmtsl.1 -t 200 -X 5 1
