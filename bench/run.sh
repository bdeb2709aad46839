#!/usr/bin/env bash
# bench/run.sh — every qoslane benchmark, one command: builds the release
# binaries, lays out fixture nodes, runs the hooks as Slurm would (whole
# process, hyperfine), measures peak RSS (/usr/bin/time -f %M), the growth
# curves, 256 concurrent jobs, the hand-written shell Prolog side by side,
# the real smpquery on the simulated fabric (rigs/ibsim_rig.sh), the
# controller's view (scontrol against rigs/slurm_rig.sh) and the in-process
# criterion benches; writes the tables (docs/PERFORMANCE.md shows them).
#
#   bench/run.sh [options]
#     --quick            fewer runs (a smoke test of the harness, ~2 min)
#     --runs N           hyperfine runs per row (default 200; --quick: 30)
#     --only LIST        sections, comma-separated: hooks,growth,storm,fabric,controller,criterion
#     --no-rigs          skip the sections that start rigs (fabric, controller)
#     --update-doc       splice the tables into docs/PERFORMANCE.md (between
#                        its `bench:begin`/`bench:end` markers)
#     --wait-quiet S     wait up to S seconds for the 1-min load to drop below 0.5
#                        before measuring (the machine is shared; default 0)
#     --append           keep the results of the sections not re-run (e.g. re-run
#                        `--only controller --append` once the Slurm rig is free)
#   Environment: BENCH_OUT (default bench/results/latest), BENCH_WORK (fixture
#   roots, default /var/tmp/qoslane-bench), BENCH_TMPFS (their run/ dirs,
#   default /dev/shm/qoslane-bench), RIG_DIR (Slurm rig state,
#   default /tmp/qoslane-slurmrig, as tests/e2e).
#
# Needs: cargo, hyperfine, /usr/bin/time (Debian `time`), python3; the rig
# sections need what the rigs need (they install it on Debian 12).
# Exit status: non-zero when a measured run did not do what it was measured
# doing (the audit, counters and final state are checked), not for a missed
# target: targets are reported in the tables.
#
# Each measured row's environment is scoped by a ( ... ) around it, on purpose:
# shellcheck disable=SC2030,SC2031  # (the next row must not inherit it)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

RUNS=200
QUICK=0
ONLY=hooks,growth,storm,fabric,controller,criterion
UPDATE_DOC=0
WAIT_QUIET=0
APPEND=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=1; RUNS=30 ;;
    --runs) RUNS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --no-rigs) ONLY=$(echo "$ONLY" | tr ',' '\n' | grep -vxE 'fabric|controller' | paste -sd,) ;;
    --update-doc) UPDATE_DOC=1 ;;
    --wait-quiet) WAIT_QUIET=$2; shift ;;
    --append) APPEND=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
want() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

export BENCH_REPO=$REPO
. bench/lib.sh
OUT=${BENCH_OUT:-$REPO/bench/results/latest}
WORK=${BENCH_WORK:-/var/tmp/qoslane-bench}
export BENCH_TMPFS=${BENCH_TMPFS:-/dev/shm/qoslane-bench}
if [ "$APPEND" = 1 ] && [ -f "$OUT/results.jsonl" ]; then
  # Drop the rows of the sections about to be re-run; keep the others.
  python3 - "$OUT/results.jsonl" "$ONLY" <<'PY'
import json, sys
path, only = sys.argv[1], sys.argv[2].split(",")
prefix = {"hooks": ("hooks",), "growth": ("growth",), "storm": ("storm",), "fabric": ("fabric",),
          "controller": ("controller",), "criterion": ("criterion",)}
drop = tuple(p for o in only for p in prefix.get(o, ()))
rows = [l for l in open(path) if not json.loads(l)["section"].startswith(drop)]
open(path, "w").writelines(rows)
PY
  rm -f "$OUT/failures.txt"
  mv "$OUT/meta.txt" "$OUT/meta.prev.txt" 2>/dev/null || true
else
  rm -rf "$OUT"
fi
rm -rf "$WORK" "$BENCH_TMPFS"
mkdir -p "$OUT/raw" "$WORK/bin" "$BENCH_TMPFS"
for tool in hyperfine python3 cargo; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (Debian: apt-get install hyperfine python3)" >&2; exit 69; }
done
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time is missing (Debian: apt-get install time)" >&2; exit 69; }

# ------------------------------------------------------------------ build
# Others build in the same target dir: copy the binaries so a rebuild during
# the run cannot swap them mid-measurement.
bsay "building release binaries"
cargo build --release -q -p qoslane -p hookrun
cp target/release/qoslane target/release/hookrun "$WORK/bin/"
QL=$WORK/bin/qoslane
export QL
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' + uncommitted changes in crates/')"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "kernel: $(uname -r); fixture roots on $(df --output=fstype "$WORK" | tail -1) (run/ on $(df --output=fstype "$BENCH_TMPFS" | tail -1))"
  echo "tools: $(hyperfine --version), $(rustc --version)"
  echo "binary: $(stat -c %s "$QL") bytes"
  echo "runs per row: $RUNS"
  echo "sections: $ONLY$([ "$APPEND" = 1 ] && echo " (appended to an earlier run's other sections)")"
} > "$OUT/meta.txt"
cat "$OUT/meta.txt" >&2
if [ "$WAIT_QUIET" -gt 0 ]; then
  bsay "waiting up to ${WAIT_QUIET}s for a quiet machine: $(wait_quiet "$WAIT_QUIET" 0.5)"
fi
echo "load at start: $(cat /proc/loadavg)" >> "$OUT/meta.txt"

HF=(hyperfine -N --style basic --warmup 10 --runs "$RUNS")
RSS_RUNS=$(( QUICK ? 5 : 25 ))

# ------------------------------------------------------------------ 1. the hooks
if want hooks; then
  bsay "section hooks: the Slurm hooks on a fixture node (examples/qos-network.yml, one port)"
  R=$WORK/hooks
  bench_node "$R" 4 5 1 "$REPO/examples/qos-network.yml"
  node_env "$R"
  warm_cache "$R"

  # 22.05-25.11: the QoS from `squeue -o %q` (the fixture squeue, a sh script)
  measure_prolog prolog-squeue "$R" 7 hooks "prolog, fabric cache fresh, QoS from the fixture squeue" squeue 5
  # 26.05+: SLURM_JOB_QOS in the Prolog's environment, no squeue at all
  ( export SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=high QOSLANE_SQUEUE=/nonexistent/squeue
    measure_prolog prolog-env "$R" 7 hooks "prolog, fabric cache fresh, QoS from SLURM_JOB_QOS (no squeue)" env 5 )
  # no cache: every prolog probes the port (3 fixture smpquery processes)
  ( export SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=high
    from=$(alines "$R"); export SLURM_JOB_ID=7
    hf prolog-probe-fixture --prepare "bash -c '$QL epilog; rm -f $R/run/qoslane/fabric.json'" "$QL prolog"
    check_audit prolog-probe-fixture "$R" "$from" prolog applied --source env --min "$RUNS" >/dev/null
    rss prolog-probe-fixture "$QL epilog; rm -f $R/run/qoslane/fabric.json" "$QL" prolog
    record hooks "prolog, no fabric cache: probe with the fixture smpquery (sh script)" prolog-probe-fixture --target-rss-mb 8 )
  "$QL" epilog >/dev/null 2>&1 || true
  warm_cache "$R"
  measure_epilog epilog "$R" 7 hooks "epilog (reverts the ToS)" 5

  # task-prolog: runs per task, as the job user, reads the Prolog's record
  export SLURM_JOB_ID=7
  "$QL" prolog >/dev/null 2>&1
  out=$("$QL" --root "$R" task-prolog)
  if [ "$(echo "$out" | grep -c '^export UCX_IB_SL=2$')" = 1 ]; then
    echo "ok task-prolog prints export UCX_IB_SL=2 ($(echo "$out" | wc -l) lines)" > "$OUT/raw/task-prolog.check"
  else
    echo "FAIL task-prolog printed: $out" > "$OUT/raw/task-prolog.check"; nok "task-prolog output"
  fi
  hf task-prolog "$QL --root $R task-prolog"
  rss task-prolog "" "$QL" --root "$R" task-prolog
  record hooks "task-prolog (the job's exports)" task-prolog --target-ms 2 --target-rss-mb 8
  "$QL" epilog >/dev/null 2>&1

  # The same job done by hand: a shell Prolog (bench/hand-prolog.sh).
  ( export HAND_ROOT=$R HAND_SQUEUE=$QOSLANE_SQUEUE HAND_SMPQUERY=$R/bin/smpquery SLURM_JOB_ID=7
    hf hand-prolog "/bin/sh $REPO/bench/hand-prolog.sh"
    if [ "$(cat "$R$TOS")" = 74 ] && grep -q 'job=7 qos=high sl=2 vl=2 tos=74' "$R/var/log/qos-prolog.log"; then
      echo "ok hand-prolog set ToS 74 and logged job=7 qos=high sl=2 vl=2" > "$OUT/raw/hand-prolog.check"
    else
      echo "FAIL hand-prolog did not do the job" > "$OUT/raw/hand-prolog.check"; nok "hand-prolog"
    fi
    rss hand-prolog "" /bin/sh "$REPO/bench/hand-prolog.sh"
    record hooks "by hand: shell Prolog (fixture squeue, fixture smpquery | awk, echo > ToS, log line)" hand-prolog )
  echo "$BASE_TOS" > "$R$TOS"

  # A shared node whose running jobs keep every core busy: one busy loop per
  # core at the jobs' priority while the hooks run (informative, no target).
  hogs=()
  for ((i = 0; i < $(nproc); i++)); do
    bash -c 'while :; do :; done' & hogs+=($!)
  done
  ( HF=(hyperfine -N --style basic --warmup 3 --runs 50); MRUNS=50
    export SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=high
    measure_prolog prolog-busy "$R" 7 hooks-busy "prolog, every core busy with a running job's loop (QoS from SLURM_JOB_QOS)" env ""
    measure_epilog epilog-busy "$R" 7 hooks-busy "epilog, every core busy" "" ) || true
  kill "${hogs[@]}"; wait "${hogs[@]}" 2>/dev/null || true
  node_is_baseline "$R" || nok "hooks node not at baseline"
fi

# ------------------------------------------------------------------ 2. growth
# Each curve is measured interleaved (bench/tools/curve.py: every iteration
# runs the hook once on each node of the curve), so load that comes and goes
# on the shared machine hits every point alike.
if want growth; then
  bsay "section growth: mapping size, active jobs, ports"
  GRUNS=$(( RUNS / 2 > 20 ? RUNS / 2 : 20 ))
  # shellcheck disable=SC2016  # curve.py puts each node's $BENCH_QOS in
  ENVQ='SLURM_SCRIPT_CONTEXT=prolog_slurmd,SLURM_JOB_QOS=$BENCH_QOS'
  curve() { python3 bench/tools/curve.py "$OUT" "$@" >> "$OUT/raw/growth.txt" || nok "growth curve $2 $1: $(tail -3 "$OUT/raw/growth.txt")"; }

  # Mapping size: levels (at most 16: SLs are 4 bits and distinct) and QoS names.
  specs=()
  for spec in 4:4 16:16 16:64 16:1024; do
    lv=${spec%%:*}; nq=${spec##*:}
    R=$WORK/map-$lv-$nq
    bench_node "$R" "$lv" "$nq" 1
    node_env "$R"; warm_cache "$R"
    specs+=("$lv levels, $nq QoS names=$R,$ENVQ")
  done
  curve growth-mapping prolog "$GRUNS" "${specs[@]}"
  curve growth-mapping-epilog epilog "$GRUNS" "${specs[@]}"
  HF=(hyperfine -N --style basic --warmup 5 --runs "$GRUNS")
  for spec in 4:4 16:16 16:64 16:1024; do
    lv=${spec%%:*}; nq=${spec##*:}; R=$WORK/map-$lv-$nq
    hf "validate-$lv-$nq" "$QL validate $R/etc/qoslane/qos-network.yml"
    record growth-validate "qoslane validate: $lv levels, $nq QoS names ($(wc -c < "$R/etc/qoslane/qos-network.yml") bytes)" "validate-$lv-$nq" --param levels="$lv" --param qos="$nq"
    node_is_baseline "$R" || nok "map-$lv-$nq not at baseline"
  done
  # 1,024 levels cannot exist; show that the validator says so.
  if gen_mapping 17 17 3>/dev/null >/dev/null 2>&1; then nok "gen_mapping accepted 17 levels"; fi
  python3 - "$WORK/map-1024-levels.yml" <<'PY'
import sys
lines = ["default_level: l0000", "levels:"]
for i in range(1024):
    lines += [f"  - name: l{i:04d}", f"    qos: [q{i:04d}]", f"    service_level: {i % 16}"]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
  set +e
  "$QL" validate "$WORK/map-1024-levels.yml" > "$OUT/raw/validate-1024-levels.out" 2>&1
  echo "exit $?" >> "$OUT/raw/validate-1024-levels.out"
  set -e
  hf validate-1024-levels -i "$QL validate $WORK/map-1024-levels.yml"
  record growth-validate "qoslane validate: 1,024 levels (invalid: $(grep -c ': error:' "$OUT/raw/validate-1024-levels.out") duplicate-SL errors, all reported, $(tail -1 "$OUT/raw/validate-1024-levels.out"))" validate-1024-levels --param levels=1024 --param qos=1024

  # Active jobs on the node (examples/qos-network.yml, one port).
  specs=()
  for n in 1 8 64; do
    R=$WORK/jobs-$n
    bench_node "$R" 4 5 1 "$REPO/examples/qos-network.yml"
    node_env "$R"; warm_cache "$R"
    populate "$R" "$n"
    specs+=("$n active job(s) with it=$R,$ENVQ")
  done
  curve growth-jobs prolog "$GRUNS" "${specs[@]}"
  curve growth-jobs-epilog epilog "$GRUNS" "${specs[@]}"

  # Ports: cached (job start), interleaved; probed (no cache), one by one.
  specs=()
  for p in 1 4 16; do
    R=$WORK/ports-$p
    bench_node "$R" 4 5 "$p" "$REPO/examples/qos-network.yml"
    node_env "$R"; warm_cache "$R"
    specs+=("$p port(s), fabric cache fresh=$R,$ENVQ")
  done
  curve growth-ports prolog "$GRUNS" "${specs[@]}"
  HF=(hyperfine -N --style basic --warmup 5 --runs "$(( GRUNS / 2 ))"); MRUNS=$(( GRUNS / 2 ))
  for p in 1 4 16; do
    R=$WORK/ports-$p
    node_env "$R"; export SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=high
    from=$(alines "$R"); export SLURM_JOB_ID=7
    hf "ports-$p-probe" --prepare "bash -c '$QL epilog; rm -f $R/run/qoslane/fabric.json'" "$QL prolog"
    check_audit "ports-$p-probe" "$R" "$from" prolog applied --source env --min "$MRUNS" >/dev/null
    record growth-ports-probe "$p port(s), no cache: probe every port (fixture smpquery)" "ports-$p-probe" --param ports="$p"
    "$QL" epilog >/dev/null 2>&1
    warm_cache "$R"
    node_is_baseline "$R" || nok "ports-$p not at baseline"
  done
  unset SLURM_SCRIPT_CONTEXT SLURM_JOB_QOS MRUNS
  # shellcheck disable=SC2034  # read by bench/lib.sh's hf
  HF=(hyperfine -N --style basic --warmup 10 --runs "$RUNS")
fi

# ------------------------------------------------------------------ 3. storm
if want storm; then
  bsay "section storm: 256 jobs' prolog+epilog pairs at once on one node"
  cargo build --release -q -p qoslane-bench-tools   # the driver (bench/tools)
  cp "${CARGO_TARGET_DIR:-target}/release/storm" "$WORK/bin/storm"
  for via in env squeue; do
    R=$WORK/storm-$via
    bench_node "$R" 4 5 1 "$REPO/examples/qos-network.yml"
    node_env "$R"
    warm_cache "$R"
    python3 bench/tools/storm.py "$OUT" "$R" "$QL" 256 --via "$via" --driver "$WORK/bin/storm" > "$OUT/raw/storm-$via.txt" || nok "storm ($via): $(cat "$OUT/raw/storm-$via.txt")"
    node_is_baseline "$R" || nok "storm ($via): node not at baseline"
    cat "$OUT/raw/storm-$via.txt"
  done
fi

# ------------------------------------------------------------------ 4. the simulated fabric
if want fabric; then
  bsay "section fabric: real smpquery on the simulated fabric (rigs/ibsim_rig.sh)"
  if ! bash rigs/ibsim_rig.sh -n node2 -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7 -- env -u LD_PRELOAD \
      BENCH_OUT="$OUT" BENCH_WORK="$WORK" BENCH_RUNS="$RUNS" BENCH_RSS_RUNS="$RSS_RUNS" QL="$QL" \
      bash bench/probe.sh > "$OUT/raw/fabric.log" 2>&1; then
    cat "$OUT/raw/fabric.log" >&2
    nok "fabric section"
  fi
fi

# ------------------------------------------------------------------ 5. the controller
if want controller; then
  bsay "section controller: scontrol show job against the local slurmctld (rigs/slurm_rig.sh)"
  if ! rig_lock 0; then
    echo "skipped: another suite holds the Slurm rig lock ($RIG_LOCK); re-run with --only controller --append" > "$OUT/raw/controller.note"
    bsay "$(cat "$OUT/raw/controller.note")"
  elif host_slurmctld; then
    rig_unlock
    echo "skipped: a slurmctld is already running (another test's rig); not touching it" > "$OUT/raw/controller.note"
    bsay "$(cat "$OUT/raw/controller.note")"
  else
    started=0
    if RIG_PROLOG="" RIG_EPILOG="" RIG_TASKPROLOG="" RIG_TASKEPILOG="" RIG_PROLOGSLURMCTLD="" RIG_EPILOGSLURMCTLD="" \
        bash "$RIG" start > "$OUT/raw/slurm-rig.log" 2>&1; then
      started=1
      job=$(/usr/bin/sbatch --parsable --hold --qos=high -o /dev/null --wrap 'sleep 1')
      python3 bench/tools/ctl.py "$OUT" "$job" --callers 1,16,64 --calls $(( QUICK ? 5 : 20 )) > "$OUT/raw/controller.txt" ||
        nok "controller: $(cat "$OUT/raw/controller.txt")"
      hf scontrol-single "/usr/bin/scontrol show job -o $job"
      record controller-single "scontrol show job -o ID, one caller, idle controller" scontrol-single
      /usr/bin/scancel "$job" || true
    else
      tail -20 "$OUT/raw/slurm-rig.log" >&2; nok "slurm rig did not start"
    fi
    if [ "$started" = 1 ]; then bash "$RIG" stop >> "$OUT/raw/slurm-rig.log" 2>&1 || nok "slurm rig stop"; fi
    rig_unlock
  fi
fi

# ------------------------------------------------------------------ 6. in-process (criterion)
if want criterion; then
  bsay "section criterion: mapping validation, level lookup, txn::desired, fabric check (in process)"
  ctime=$(( QUICK ? 1 : 3 ))
  if cargo bench -q -p qoslane --bench plan -- --warm-up-time 1 --measurement-time "$ctime" > "$OUT/raw/criterion.txt" 2>&1; then
    python3 bench/tools/criterion_rows.py "$OUT" "$REPO/target/criterion"
  else
    tail -30 "$OUT/raw/criterion.txt" >&2; nok "criterion benches"
  fi
fi

echo "load at end: $(cat /proc/loadavg)" >> "$OUT/meta.txt"
python3 bench/tools/report.py "$OUT" > "$OUT/tables.md"
bsay "tables: $OUT/tables.md"
if [ "$UPDATE_DOC" = 1 ]; then
  python3 bench/tools/report.py "$OUT" --splice docs/PERFORMANCE.md
  bsay "docs/PERFORMANCE.md updated"
fi
rm -rf "$BENCH_TMPFS"
FAILED=0
[ -f "$OUT/failures.txt" ] && FAILED=$(wc -l < "$OUT/failures.txt")
if [ "$FAILED" -gt 0 ]; then
  bsay "$FAILED check(s) failed: $OUT/failures.txt"
  exit 1
fi
bsay "done"
