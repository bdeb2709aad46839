#!/usr/bin/env bash
# fabric_e2e.sh - the fabric check against a simulated InfiniBand fabric
# (ibsim + real OpenSM + real smpquery; see rigs/ibsim_rig.sh).
#
# Usage:
#   rigs/fabric_e2e.sh            run the rig tests (cargo test -p qoslane
#                                 --test integration fabric::rig::), which must not skip
#   rigs/fabric_e2e.sh capture    re-capture the smpquery output fixtures in
#                                 crates/qoslane/tests/fixtures/smpquery/
#
# The rig tests start their own rig per scenario (ibsim_rig.sh -- ...), so
# this script only sets QOSLANE_FABRIC_RIG=1 ("the rig must run: fail, do not
# skip, when its tools are missing").  The rig installs its Debian packages
# when they are missing and it runs as root (RIG_NO_INSTALL=1 forbids that).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
rig=$here/ibsim_rig.sh

capture() {
    local out=$repo/crates/qoslane/tests/fixtures/smpquery
    mkdir -p "$out"
    # one rig per OpenSM configuration; each writes <name>.<op>.txt
    run() { # run NAME RIG-ARGS... : capture sl2vl, portinfo and vlarb
        local name=$1; shift
        # shellcheck disable=SC2016  # the script is bash -c's; its $0 $1 are the arguments after it
        "$rig" "$@" -- env -u LD_PRELOAD bash -c '
            set -e
            for op in sl2vl portinfo vlarb; do
                "$0" -C mlx5_0 -P 1 -D $op 0 >"$1.$op.txt"
            done' "$here/smpquery-sim" "$out/$name"
    }
    run qos-reversed                                   # rig default table
    run qos-identity -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
    run qos-vl15 -s 0,1,2,15,4,5,6,7,0,1,2,3,4,5,6,7
    run qos-max-op-vls-2 -V 2 -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
    run qos-max-op-vls-1 -V 1
    run qos-vl3-no-weight -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7 \
        -L 0:32,1:32,2:32,4:32,5:32,6:32,7:32 -H 0:4
    run qos-off -Q
    # OperVLs lowered after OpenSM programmed the table (ibportstate ... vls 2):
    # SL2VL entries now point outside OperVLs.
    # shellcheck disable=SC2016  # bash -c's script: its $0 $1 are the arguments after it
    "$rig" -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7 -- bash -c '
        set -e
        ibportstate -D 0 1 vls 2 >/dev/null
        env -u LD_PRELOAD "$0" -C mlx5_0 -P 1 -D portinfo 0 >"$1.portinfo.txt"
        env -u LD_PRELOAD "$0" -C mlx5_0 -P 1 -D sl2vl 0 >"$1.sl2vl.txt"' \
        "$here/smpquery-sim" "$out/opervls-lowered"
    # what a failing call prints (a port the CA does not have)
    # shellcheck disable=SC2016  # bash -c's script: its $0 $1 are the arguments after it
    "$rig" -- env -u LD_PRELOAD bash -c '
        "$0" -C mlx5_0 -P 2 -D sl2vl 0 >/dev/null 2>"$1.stderr.txt"; echo "exit $?" >>"$1.stderr.txt"' \
        "$here/smpquery-sim" "$out/no-such-port"
    echo "captured into $out" >&2
}

case ${1:-test} in
capture) capture ;;
test)
    cd "$repo"
    QOSLANE_FABRIC_RIG=1 exec cargo test -p qoslane --test integration fabric::rig:: -- --test-threads=2
    ;;
*) sed -n '2,15p' "$0"; exit 2 ;;
esac
