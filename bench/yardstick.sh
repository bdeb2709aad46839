#!/usr/bin/env bash
# bench/yardstick.sh — qoslane's Prolog+Epilog against the least a
# hand-written shell Prolog does (bench/min-prolog.sh + bench/min-epilog.sh:
# the QoS from SLURM_JOB_QOS as slurmd gives it from Slurm 26.05, a case
# statement, an env file, one setting, a log line with `date`; no squeue, no
# smpquery), for the same job on the same fixture node, as a node has it:
# `/run` on a tmpfs this script mounts, `/var` on the disk (ext4 under
# /var/tmp). qoslane runs as it ships (side `shipped`): slurmd starts the
# packaged entry (/usr/lib/qoslane/hookrun: a link to the binary named
# hookrun, so the binary is hookrun), whose hook directory holds qoslane's
# hook (prolog.d/10-qoslane, epilog.d/50-qoslane: links to the binary), run
# built in (a fork, no second exec); and directly (side `qoslane`): the hook
# link run by itself, no argument, the hook picked by SLURM_SCRIPT_CONTEXT,
# as a slurm.conf naming qoslane would run it.
#
#   1. whole prolog+epilog cycles, interleaved run by run with the shell's
#      (bench/tools/cycle.rs), on a quiet machine;
#   2. the same with both cores busy (two spinning processes at normal
#      priority, as a node's running jobs keep its cores);
#   3. where a cycle's cost goes, for every side: syscalls (strace -f -c),
#      CPU time (perf stat), processes started;
#   4. with --before OLD_QOSLANE: OLD against this qoslane, interleaved the
#      same way, quiet (the change's own before/after in this run's load):
#      run directly, and, with --before-hookrun OLD_HOOKRUN, as shipped
#      before (the plain OLD_HOOKRUN exec'ing OLD_QOSLANE's hook link)
#      against as shipped now; with --before-entry, OLD_QOSLANE as shipped
#      since 0.3.0 (its own entry, its hooks built in) against as shipped now.
#
#   5. with --floor: three more sides in 1 and 2, what the machine charges
#      whatever the design: `/bin/true` as both hooks (two execs and nothing
#      else), and the least a compiled hook with qoslane's guarantees does
#      (bench/tools/floor.c with gcc, bench/tools/floor.rs in Rust: the
#      shell's job plus the node lock, the journal, the setting read back,
#      the job's record, the audit line flushed, the textfile; no mapping,
#      no checks) — the floor under any target for a hook run per job.
#
#   6. with --resident: a fourth side in 1 and 2, the prototype of a resident
#      per-node process the hooks talk to (not shipped: qoslane's example
#      resident_prototype, which forks its warm self per request and runs
#      qoslane's hook, and bench/tools/resident-client.c, the small program
#      slurmd would start, built here with gcc): what such a design gives;
#      and a fifth, the same server running the hook in itself, no fork.
#
#   bench/yardstick.sh [--cycles N] [--bin QOSLANE] [--before OLD_QOSLANE]
#                      [--before-hookrun OLD_HOOKRUN] [--before-entry] [--floor] [--resident]
#                      [--rt] [--wait-quiet S] [--update-doc]
#
# --rt: the quiet cycles (1 and 4) run at a real-time priority (chrt -f 20,
# both sides alike), as if the CPUs were idle: for a machine shared with
# other work, where no wait makes it quiet. The busy case stays at normal
# priority (it is about competing for the cores).
#
# Results: bench/results/yardstick/yardstick.md (raw data beside it);
# --update-doc puts the tables into docs/PERFORMANCE.md between the
# `bench:yardstick` markers. Needs root (the tmpfs mount), strace and perf.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CYCLES=150 BIN="" BEFORE="" BEFORE_HOOKRUN="" BEFORE_ENTRY=0 FLOOR=0 RESIDENT=0 WAIT_QUIET=0 UPDATE_DOC=0 RT=()
while [ $# -gt 0 ]; do
  case $1 in
    --cycles) CYCLES=$2; shift ;;
    --bin) BIN=$2; shift ;;
    --before) BEFORE=$2; shift ;;
    --before-hookrun) BEFORE_HOOKRUN=$2; shift ;;
    --before-entry) BEFORE_ENTRY=1 ;;
    --floor) FLOOR=1 ;;
    --resident) RESIDENT=1 ;;
    --rt) RT=(chrt -f 20) ;;
    --wait-quiet) WAIT_QUIET=$2; shift ;;
    --update-doc) UPDATE_DOC=1 ;;
    -h|--help) sed -n '2,61p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
export BENCH_REPO=$REPO
. bench/lib.sh
WORK=${BENCH_WORK:-/var/tmp/qoslane-yardstick}
OUT=${BENCH_OUT:-$REPO/bench/results/yardstick}
SPIN=() SERVER="" SERVER2=""
cleanup() {
  for p in "${SPIN[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in $SERVER $SERVER2; do kill "$p" 2>/dev/null || true; done
  if mountpoint -q "$WORK/node/run"; then umount "$WORK/node/run"; fi
  if mountpoint -q "$WORK/tmpfs"; then umount "$WORK/tmpfs"; fi
}
trap cleanup EXIT
cleanup
rm -rf "$WORK" "$OUT"; mkdir -p "$WORK/bin" "$WORK/tmpfs" "$OUT/raw"
# /run on a node is a tmpfs: one of our own, mounted for this run.
mount -t tmpfs -o mode=0755,size=64m qoslane-yardstick "$WORK/tmpfs"
export BENCH_TMPFS=$WORK/tmpfs

bench_binaries "$BIN" "$WORK/bin"
QL=$WORK/bin/qoslane
# The packaged hook: a symlink to the binary (prolog.d/10-qoslane, epilog.d/50-qoslane).
ln -s "$QL" "$WORK/bin/10-qoslane"
HOOK=$WORK/bin/10-qoslane
# The packaged entry slurm.conf names: a link to the binary named hookrun.
install -d -m 0755 "$WORK/bin/entry"
ln -s "$QL" "$WORK/bin/entry/hookrun"
ENTRY=$WORK/bin/entry/hookrun

R=$WORK/node
bench_node "$R" 4 5 1 "$REPO/examples/qos-network.yml"
# hookrun's tree on the node: its hook directories under etc/slurm, qoslane's
# hooks in them as the packages and the Omnia role link them (to the binary).
export HOOKRUN_ROOT=$R
hook_links() { # hook_links DIR BINARY
  install -d -m 0755 "$1/prolog.d" "$1/epilog.d"
  ln -sfn "$2" "$1/prolog.d/10-qoslane"; ln -sfn "$2" "$1/epilog.d/50-qoslane"
}
hook_links "$R/etc/slurm" "$QL"
# A node's /run is a mount, not a symlink: the tmpfs's directory mounted at
# the node's run/ (a symlink there cost qoslane a walk from / at every
# access — ~110 syscalls and ~0.2 ms per hook — that no node makes).
run_dir=$(readlink "$R/run")
rm "$R/run"; install -d -m 0755 "$R/run"
mount --bind "$run_dir" "$R/run"
node_env "$R"
# Slurm 26.05: the QoS comes from the environment; a squeue that does not
# exist proves nobody asks it.
export SLURM_JOB_QOS=$BENCH_QOS QOSLANE_SQUEUE=$WORK/no-squeue
export HAND_ROOT=$R HAND_BASE_TOS=$BASE_TOS
install -d -m 0755 "$R/run/qos-prolog"
warm_cache "$R"
# The first Prolog promotes the mapping to last-known-good: not the steady state.
SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=1 "$HOOK" >/dev/null 2>&1
SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=1 "$HOOK" >/dev/null 2>&1
node_is_baseline "$R" || nok "the first cycle did not end at the baseline"
# The entry's first cycle: hookrun's state directory and metrics made.
SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=2 "$ENTRY" >/dev/null 2>&1
SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=2 "$ENTRY" >/dev/null 2>&1
node_is_baseline "$R" || nok "the entry's first cycle did not end at the baseline"

FLOOR_SIDE=()
if [ "$FLOOR" = 1 ]; then
  bsay "the floor: bench/tools/floor.c (gcc) and floor.rs, and /bin/true"
  gcc -O2 -o "$WORK/bin/floor-c" bench/tools/floor.c
  for side in floor-c floor; do # a first cycle each: its files made
    SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=3 "$WORK/bin/$side" || nok "$side: first prolog failed"
    SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=3 "$WORK/bin/$side" || nok "$side: first epilog failed"
  done
  node_is_baseline "$R" || nok "the floor's first cycles did not end at the baseline"
  FLOOR_SIDE=(floor-c "$WORK/bin/floor-c" "$WORK/bin/floor-c" floor-rs "$WORK/bin/floor" "$WORK/bin/floor"
              true /bin/true /bin/true)
fi

RESIDENT_SIDE=()
if [ "$RESIDENT" = 1 ]; then
  bsay "the resident prototype: its server (qoslane's example) and its client (gcc)"
  cargo build --release -q -p qoslane --example resident_prototype
  cp "${CARGO_TARGET_DIR:-target}/release/examples/resident_prototype" "$WORK/bin/"
  gcc -O2 -o "$WORK/bin/resident-client" bench/tools/resident-client.c
  # As a daemon would be started: with the node's environment (QOSLANE_ROOT, ...),
  # given each job's by the client. $! is the server itself (exec).
  ( exec "$WORK/bin/resident_prototype" "$WORK/resident.sock" fork ) >"$OUT/raw/resident.log" 2>&1 &
  SERVER=$!
  ( exec "$WORK/bin/resident_prototype" "$WORK/resident-in.sock" in-process ) >"$OUT/raw/resident-in.log" 2>&1 &
  SERVER2=$!
  job=3
  for sock in "$WORK/resident.sock" "$WORK/resident-in.sock"; do
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
    [ -S "$sock" ] || nok "the resident prototype did not listen on $sock"
    SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=$job "$WORK/bin/resident-client" "$sock" || nok "resident: first prolog failed"
    SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=$job "$WORK/bin/resident-client" "$sock" || nok "resident: first epilog failed"
    node_is_baseline "$R" || nok "the resident's first cycle did not end at the baseline"
    job=$((job + 1))
  done
  RESIDENT_SIDE=(resident "$WORK/bin/resident-client $WORK/resident.sock" "$WORK/bin/resident-client $WORK/resident.sock"
                 resident-in "$WORK/bin/resident-client $WORK/resident-in.sock" "$WORK/bin/resident-client $WORK/resident-in.sock")
fi

if [ "$WAIT_QUIET" -gt 0 ]; then bsay "waiting for a quiet machine: $(wait_quiet "$WAIT_QUIET" 0.5)"; fi
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

cycles() { # cycles NAME FIRST_JOB [PRIORITY...]
  local name=$1 first=$2; shift 2
  "$@" "$WORK/bin/cycle" "$CYCLES" "$first" \
    shipped "$ENTRY" "$ENTRY" \
    qoslane "$HOOK" "$HOOK" \
    shell "/bin/sh $REPO/bench/min-prolog.sh" "/bin/sh $REPO/bench/min-epilog.sh" \
    "${FLOOR_SIDE[@]}" "${RESIDENT_SIDE[@]}" > "$OUT/raw/$name.txt"
  node_is_baseline "$R" || nok "$name: node not at baseline after the cycles"
}

bsay "1. $CYCLES interleaved cycles each, quiet machine (load $(load1)${RT[*]:+; ${RT[*]}})"
from=$(alines "$R")
# The resident server runs its hooks at the priority the clients have (its forks inherit it).
server_like() { local p; for p in $SERVER $SERVER2; do "$@" "$p"; done; }
if [ ${#RT[@]} -gt 0 ]; then server_like chrt -f -p 20; fi
cycles quiet 1000 "${RT[@]}"
server_like chrt -o -p 0
check_audit yardstick-quiet "$R" "$from" prolog applied --source env --min "$(((2 + 2 * RESIDENT) * CYCLES))" >/dev/null

bsay "2. the same with both cores busy (two spinning processes at normal priority)"
for _ in 1 2; do sh -c 'while :; do :; done' & SPIN+=($!); done
sleep 1
from=$(alines "$R")
cycles busy 100000
check_audit yardstick-busy "$R" "$from" prolog applied --source env --min "$(((2 + 2 * RESIDENT) * CYCLES))" >/dev/null
for p in "${SPIN[@]}"; do kill "$p" 2>/dev/null || true; done; SPIN=()
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

bsay "3. where the cost goes: strace -f -c and perf stat of one cycle each side"
cost() { # cost NAME PROLOG... -- EPILOG...
  local name=$1; shift
  local pro=() epi=()
  while [ "$1" != -- ]; do pro+=("$1"); shift; done; shift; epi=("$@")
  local j
  for j in 1 2 3 4 5; do # a few cycles: perf's and strace's numbers of the last
    SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=$((500 + j)) strace -f -c -o "$OUT/raw/strace-$name-prolog.txt" "${pro[@]}" >/dev/null 2>&1
    SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=$((500 + j)) strace -f -c -o "$OUT/raw/strace-$name-epilog.txt" "${epi[@]}" >/dev/null 2>&1
    SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=$((600 + j)) perf stat -x, -e task-clock -o "$OUT/raw/perf-$name-prolog.txt" "${pro[@]}" >/dev/null 2>&1
    SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=$((600 + j)) perf stat -x, -e task-clock -o "$OUT/raw/perf-$name-epilog.txt" "${epi[@]}" >/dev/null 2>&1
  done
}
cost shipped "$ENTRY" -- "$ENTRY"
cost qoslane "$HOOK" -- "$HOOK"
if [ -n "$BEFORE" ]; then
  bsay "4. the binary before (--before) against this one, interleaved, quiet"
  cp "$BEFORE" "$WORK/bin/qoslane-before"; ln -s "$WORK/bin/qoslane-before" "$WORK/bin/10-qoslane-before"
  sides=(before "$WORK/bin/10-qoslane-before" "$WORK/bin/10-qoslane-before" qoslane "$HOOK" "$HOOK")
  if [ -n "$BEFORE_HOOKRUN" ]; then
    # As shipped before: the plain hookrun, exec'ing the hook link (its own hook tree).
    cp "$BEFORE_HOOKRUN" "$WORK/bin/hookrun-before"
    hook_links "$R/etc/slurm-before" "$WORK/bin/qoslane-before"
    # Both given their hook directory by --hook-dir (an argument costs hookrun its full
    # command-line parse, ~0.3 ms of CPU): the same for both.
    sides=(shipped-before "$WORK/bin/hookrun-before --hook-dir $R/etc/slurm-before" "$WORK/bin/hookrun-before --hook-dir $R/etc/slurm-before"
           shipped "$ENTRY --hook-dir $R/etc/slurm" "$ENTRY --hook-dir $R/etc/slurm" "${sides[@]}")
  fi
  if [ "$BEFORE_ENTRY" = 1 ]; then
    # As shipped since 0.3.0: OLD's own entry (a link to it named hookrun), its hooks built in
    # (their own hook tree), given by --hook-dir as the entry now is.
    install -d -m 0755 "$WORK/bin/entry-before"
    ln -s "$WORK/bin/qoslane-before" "$WORK/bin/entry-before/hookrun"
    hook_links "$R/etc/slurm-entry-before" "$WORK/bin/qoslane-before"
    sides=(entry-before "$WORK/bin/entry-before/hookrun --hook-dir $R/etc/slurm-entry-before"
           "$WORK/bin/entry-before/hookrun --hook-dir $R/etc/slurm-entry-before" "${sides[@]}")
    [ -n "$BEFORE_HOOKRUN" ] || sides+=(shipped "$ENTRY --hook-dir $R/etc/slurm" "$ENTRY --hook-dir $R/etc/slurm")
  fi
  from=$(alines "$R")
  "${RT[@]}" "$WORK/bin/cycle" "$CYCLES" 200000 "${sides[@]}" > "$OUT/raw/before-after.txt"
  node_is_baseline "$R" || nok "before/after: node not at baseline after the cycles"
  check_audit yardstick-before-after "$R" "$from" prolog applied --source env --min "$(( ${#sides[@]} * CYCLES / 3 ))" >/dev/null
fi
cost shell /bin/sh "$REPO/bench/min-prolog.sh" -- /bin/sh "$REPO/bench/min-epilog.sh"
node_is_baseline "$R" || nok "cost: node not at baseline"

splice=(); [ "$UPDATE_DOC" = 1 ] && splice=(--splice docs/PERFORMANCE.md)
python3 bench/tools/yardstick_report.py "$OUT" "$CYCLES" "$LOAD_START" "$LOAD_END" "$(git rev-parse --short HEAD)${RT[*]:+ (quiet cycles under ${RT[*]})}" "${splice[@]}" > "$OUT/yardstick.md"
cat "$OUT/yardstick.md"
[ "$UPDATE_DOC" = 1 ] && bsay "tables written into docs/PERFORMANCE.md"
[ ! -s "$OUT/failures.txt" ]
