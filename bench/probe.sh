#!/usr/bin/env bash
# bench/probe.sh — the fabric section of bench/run.sh: qoslane probing a real
# (simulated) fabric. Runs inside rigs/ibsim_rig.sh (ibsim + a real OpenSM
# programming docs/fabric.md's QoS table, SL n -> VL n, the one
# examples/qos-network.yml is written for), the real smpquery reached
# through rigs/smpquery-sim, as scripts/demo.sh wires it:
#
#   rigs/ibsim_rig.sh -n node2 -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7 -- env -u LD_PRELOAD \
#     BENCH_OUT=... BENCH_WORK=... BENCH_RUNS=... BENCH_RSS_RUNS=... QL=... bash bench/probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_REPO=$PWD
. bench/lib.sh
OUT=${BENCH_OUT:?} WORK=${BENCH_WORK:?} QL=${QL:?}
RUNS=${BENCH_RUNS:-200}
RSS_RUNS=${BENCH_RSS_RUNS:-25}
export BENCH_TMPFS=${BENCH_TMPFS:-/dev/shm/qoslane-bench}
mkdir -p "$BENCH_TMPFS"
# Each probe costs ~10-40 ms here: fewer runs keep the section short.
PRUNS=$(( RUNS / 2 > 20 ? RUNS / 2 : 20 ))
HF=(hyperfine -N --style basic --warmup 5 --runs "$PRUNS"); MRUNS=$PRUNS

R=$WORK/fabric
bench_node "$R" 4 5 1 "$BENCH_REPO/examples/qos-network.yml"
# This node's HCA port is the simulated node2's (identity, real smpquery).
. "$BENCH_REPO/rigs/sim_port.sh"
attach_sim_port "$R"
node_env "$R"
export SLURM_JOB_ID=7

# The floor: one real smpquery through the wrapper (bash + timeout + preload).
hf smpquery-sim "$R/bin/smpquery -C mlx5_0 -P 1 -D sl2vl 0"
record fabric "one real smpquery (sl2vl) through rigs/smpquery-sim" smpquery-sim

# Health: a fresh probe of every port, every level checked.
from=$(alines "$R")
hf health-probe "$QL health"
check_audit health-probe "$R" "$from" health applied,unchanged --min "$PRUNS" >/dev/null || true
record fabric "health (fresh probe: 3 real smpquery calls at once)" health-probe

# Prolog with a probe: no cache before each run (QoS via the fixture squeue).
from=$(alines "$R")
hf prolog-probe-real --prepare "bash -c '$QL epilog; rm -f $R/run/qoslane/fabric.json'" "$QL prolog"
check_audit prolog-probe-real "$R" "$from" prolog applied --source squeue --min "$PRUNS" >/dev/null
tail -1 "$R/var/log/qoslane/audit.jsonl" | grep -q '"source":"probe"' ||
  nok "prolog-probe-real: the last prolog's audit line does not show a probe"
rss prolog-probe-real "$QL epilog; rm -f $R/run/qoslane/fabric.json" "$QL" prolog
record fabric "prolog, no fabric cache: probe with the real smpquery" prolog-probe-real --target-ms 50 --target-rss-mb 8
"$QL" epilog >/dev/null 2>&1

# Prolog with the cache the probe left (the usual job start).
"$QL" health >/dev/null 2>&1
from=$(alines "$R")
hf prolog-cached-real --prepare "$QL epilog" "$QL prolog"
check_audit prolog-cached-real "$R" "$from" prolog applied --source squeue --min "$PRUNS" >/dev/null
record fabric "prolog on the ibsim node, fabric cache fresh (QoS from the fixture squeue)" prolog-cached-real --target-ms 5
"$QL" epilog >/dev/null 2>&1

# By hand, probing every time like qoslane without a cache.
( export HAND_ROOT=$R HAND_SQUEUE=$QOSLANE_SQUEUE HAND_SMPQUERY=$R/bin/smpquery
  hf hand-prolog-real "/bin/sh $BENCH_REPO/bench/hand-prolog.sh"
  if grep -q 'job=7 qos=high sl=2 vl=2 tos=74' "$R/var/log/qos-prolog.log"; then
    echo "ok hand-prolog read SL 2 -> VL 2 from the real port and set ToS 74" > "$OUT/raw/hand-prolog-real.check"
  else
    echo "FAIL hand-prolog-real" > "$OUT/raw/hand-prolog-real.check"; nok "hand-prolog-real"
  fi
  record fabric "by hand: shell Prolog with the real smpquery (fixture squeue)" hand-prolog-real )
echo "$BASE_TOS" > "$R$TOS"
node_is_baseline "$R" || nok "fabric node not at baseline"
