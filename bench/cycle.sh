#!/usr/bin/env bash
# bench/cycle.sh — qoslane side by side with the shell Prolog an admin would
# write by hand (bench/hand-prolog.sh + bench/hand-epilog.sh), for the same
# job on the same fixture node, in one run:
#
#   1. whole prolog+epilog cycles, interleaved with the shell's, on a quiet
#      machine (median, p95, p99 and the ratio qoslane / shell);
#   2. the same with both cores busy: two spinning processes at normal
#      priority, as a node's running jobs keep its cores;
#   3. the TaskProlog's median (as packaged: qoslane with no argument; also
#      with its subcommand and behind a /bin/sh wrapper; /bin/true and a Rust
#      hello world beside it), the peak RSS of every hook, 256 concurrent
#      prolog+epilog pairs (bench/tools/storm.py);
#   4. what one Prolog and one Epilog cost in syscalls, threads and fsyncs
#      (strace -f: qoslane's own process and threads, not the programs it
#      runs).
#
#   bench/cycle.sh [--cycles N] [--bin QOSLANE] [--wait-quiet S] [--update-doc]
#
# Both sides ask the fixture squeue for the QoS (Slurm 22.05–24.11: the
# Prolog has no SLURM_JOB_QOS). The shell Prolog reads the SL2VL table with
# the fixture smpquery on every run; qoslane reads its fabric cache, which
# `qoslane health` keeps fresh on a real node (HealthCheckInterval), as it
# does here once before the runs. Results: bench/results/cycle/cycle.md (raw
# data beside it); --update-doc puts the tables into docs/PERFORMANCE.md
# between the `bench:cycle` markers.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CYCLES=150 BIN="" WAIT_QUIET=0 UPDATE_DOC=0
while [ $# -gt 0 ]; do
  case $1 in
    --cycles) CYCLES=$2; shift ;;
    --bin) BIN=$2; shift ;;
    --wait-quiet) WAIT_QUIET=$2; shift ;;
    --update-doc) UPDATE_DOC=1 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
export BENCH_REPO=$REPO
. bench/lib.sh
WORK=${BENCH_WORK:-/var/tmp/qoslane-cycle}
export BENCH_TMPFS=${BENCH_TMPFS:-/dev/shm/qoslane-cycle}
OUT=${BENCH_OUT:-$REPO/bench/results/cycle}
rm -rf "$WORK" "$BENCH_TMPFS" "$OUT"; mkdir -p "$WORK/bin" "$BENCH_TMPFS" "$OUT/raw"
SPIN=()
cleanup() { for p in "${SPIN[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

bench_binaries "$BIN" "$WORK/bin"
QL=$WORK/bin/qoslane

R=$WORK/node
bench_node "$R" 4 5 1 "$REPO/examples/qos-network.yml"
node_env "$R"
export HAND_ROOT=$R HAND_SQUEUE=$QOSLANE_SQUEUE HAND_SMPQUERY=$R/bin/smpquery HAND_BASE_TOS=$BASE_TOS
install -d -m 0755 "$R/run/qos-prolog"
warm_cache "$R"
# The first Prolog promotes the mapping to last-known-good: not the steady state.
SLURM_JOB_ID=1 "$QL" prolog >/dev/null 2>&1 && SLURM_JOB_ID=1 "$QL" epilog >/dev/null 2>&1

if [ "$WAIT_QUIET" -gt 0 ]; then bsay "waiting for a quiet machine: $(wait_quiet "$WAIT_QUIET" 0.5)"; fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

cycles() { # cycles NAME FIRST_JOB
  "$WORK/bin/cycle" "$CYCLES" "$2" \
    qoslane "$QL prolog" "$QL epilog" \
    shell "/bin/sh $REPO/bench/hand-prolog.sh" "/bin/sh $REPO/bench/hand-epilog.sh" > "$OUT/raw/$1.txt"
  node_is_baseline "$R" || nok "$1: node not at baseline after the cycles"
}

bsay "1. $CYCLES interleaved cycles each, quiet machine (load $(load1))"
from=$(alines "$R")
cycles quiet 1000
check_audit cycles-quiet "$R" "$from" prolog applied --source squeue --min "$CYCLES" >/dev/null

bsay "2. the same with both cores busy (two spinning processes at normal priority)"
for _ in 1 2; do sh -c 'while :; do :; done' & SPIN+=($!); done
sleep 1
from=$(alines "$R")
cycles busy 100000
check_audit cycles-busy "$R" "$from" prolog applied --source squeue --min "$CYCLES" >/dev/null
cleanup; SPIN=()

bsay "3. TaskProlog, peak RSS, 256 concurrent pairs"
HF=(hyperfine -N --style none --warmup 10 --runs 300)
SLURM_JOB_ID=77 "$QL" prolog >/dev/null 2>&1
# The TaskProlog runs as the job user and trusts no QOSLANE_ROOT: it reads
# the real /run/qoslane. So it is measured in a private mount namespace
# whose /run/qoslane is the bench node's, in three forms: as packaged (a
# symlink to qoslane, started with no argument: hookrun's hook), with its
# subcommand, and behind a /bin/sh wrapper (the hook before stage 2).
in_node_ns() {
  # shellcheck disable=SC2016  # the inner script's own arguments
  unshare --mount --propagation private bash -c '
    set -e; mount -t tmpfs -o mode=0755 qoslane-bench /run
    mkdir -m 0755 /run/qoslane; mount --bind "$1" /run/qoslane; shift; exec "$@"' _ "$R/run/qoslane" "$@"
}
ln -sfn "$QL" "$WORK/bin/10-qoslane"
printf '#!/bin/sh\nexec %s task-prolog\n' "$QL" > "$WORK/bin/10-qoslane.sh"; chmod 0755 "$WORK/bin/10-qoslane.sh"
export SLURM_JOB_ID=77 SLURM_SCRIPT_CONTEXT=prolog_task
for form in "task-prolog:$WORK/bin/10-qoslane" "task-prolog-subcommand:$QL task-prolog" "task-prolog-sh:$WORK/bin/10-qoslane.sh"; do
  name=${form%%:*} cmd=${form#*:}
  # shellcheck disable=SC2086  # "PROGRAM [ARG]": split on purpose
  in_node_ns $cmd | grep -q '^export UCX_IB_SL=2$' || nok "$name: the job's exports not printed"
  in_node_ns "${HF[@]}" --export-json "$OUT/raw/$name.json" "$cmd" > "$OUT/raw/$name.txt" 2>&1 ||
    { cat "$OUT/raw/$name.txt" >&2; nok "$name: hyperfine failed"; }
done
unset SLURM_JOB_ID SLURM_SCRIPT_CONTEXT
# The floors: what starting any program costs on this machine now, and any
# dynamically linked Rust program (hello world, as rustc builds it).
hf true /bin/true
printf 'fn main() { println!("hello"); }\n' > "$WORK/hello.rs"
rustc -O --edition 2021 -C panic=abort "$WORK/hello.rs" -o "$WORK/bin/rust-hello" && strip "$WORK/bin/rust-hello"
hf rust-hello "$WORK/bin/rust-hello"
: > "$OUT/raw/rss.txt"
for hook in prolog epilog task-prolog; do
  for _ in 1 2 3 4 5; do
    [ "$hook" = prolog ] && SLURM_JOB_ID=78 "$QL" epilog >/dev/null 2>&1
    SLURM_JOB_ID=78 /usr/bin/time -f "$hook %M" -a -o "$OUT/raw/rss.txt" "$QL" "$hook" >/dev/null 2>&1 || true
    [ "$hook" = prolog ] && SLURM_JOB_ID=78 "$QL" epilog >/dev/null 2>&1
  done
done
SLURM_JOB_ID=77 "$QL" epilog >/dev/null 2>&1
for via in env squeue; do
  S=$WORK/storm-$via
  bench_node "$S" 4 5 1 "$REPO/examples/qos-network.yml"
  node_env "$S"
  warm_cache "$S"
  python3 bench/tools/storm.py "$OUT" "$S" "$QL" 256 --via "$via" --driver "$WORK/bin/storm" > "$OUT/raw/storm-$via.txt" || nok "storm ($via): $(cat "$OUT/raw/storm-$via.txt")"
  node_is_baseline "$S" || nok "storm ($via): node not at baseline"
done
node_env "$R"

bsay "4. syscalls, threads and fsyncs of one Prolog and one Epilog (strace -f)"
for hook in prolog epilog; do
  SLURM_JOB_ID=90 strace -f -qq -o "$OUT/raw/strace-$hook.txt" "$QL" "$hook" >/dev/null 2>&1
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

splice=(); [ "$UPDATE_DOC" = 1 ] && splice=(--splice docs/PERFORMANCE.md)
python3 bench/tools/cycle_report.py "$OUT" "$CYCLES" "$LOAD_START" "$LOAD_END" "$(git rev-parse --short HEAD)" "${splice[@]}" > "$OUT/cycle.md"
cat "$OUT/cycle.md"
[ "$UPDATE_DOC" = 1 ] && bsay "tables written into docs/PERFORMANCE.md"
[ ! -s "$OUT/failures.txt" ]
