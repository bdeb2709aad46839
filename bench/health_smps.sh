#!/usr/bin/env bash
# bench/health_smps.sh — the SMPs `health` sends to read its first hop,
# counted on the simulated multi-switch fabric (rigs/fabric_path_rig.sh),
# and the load per leaf per HealthCheckInterval they make: before (every
# node reads its whole first hop by smpquery every run) and after
# (crates/qoslane/src/fabric/first_hop/share.rs). It runs the rig test
# fabric::share under strace and counts every MAD (bench/tools/health_smps.py).
#
#   bench/health_smps.sh [--interval S]
#
# Results: bench/results/health-smps/health-smps.md; docs/fabric.md has the table.
set -euo pipefail
cd "$(dirname "$0")/.."
INTERVAL=120
while [ $# -gt 0 ]; do
  case $1 in
    --interval) INTERVAL=$2; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
OUT=${BENCH_OUT:-bench/results/health-smps}
mkdir -p "$OUT"
cargo test -q -p qoslane --features fault-injection --test integration --no-run
QOSLANE_FABRIC_RIG=1 strace -f -qq -e trace=write,execve,clone,clone3,vfork,fork -o "$OUT/strace.txt" \
  cargo test -q -p qoslane --features fault-injection --test integration fabric::share >/dev/null
python3 bench/tools/health_smps.py "$OUT/strace.txt" --interval "$INTERVAL" | tee "$OUT/health-smps.md"
