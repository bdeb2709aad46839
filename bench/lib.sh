#!/usr/bin/env bash
# bench/lib.sh — fixture nodes for the benchmarks and the measuring helpers
# (sourced by bench/run.sh, bench/probe.sh and bench/compare.sh; expects
# `set -euo pipefail`).
#
# A bench node is scripts/lib/node.sh's fixture node (the one tests/e2e and
# the demo use), parameterised for the growth curves:
#   bench_node ROOT LEVELS QOS_TOTAL PORTS [MAPPING_FILE]
# - the mapping: MAPPING_FILE as given (examples/qos-network.yml for the
#   headline rows), or generated: LEVELS levels (SL 0..LEVELS-1, each level's
#   virtual_lane what the fixture fabric maps its SL to), QOS_TOTAL QoS names
#   spread evenly over them, node settings on the first, second and last level;
# - PORTS ACTIVE InfiniBand ports (mlx5_0..mlx5_{PORTS-1});
# - the fixture smpquery answering with the SL2VL table of docs/fabric.md's
#   OpenSM configuration (SL n -> VL n, SL 8-15 -> VL 0-7: `identity`), the
#   one examples/qos-network.yml and the admin guide are written for;
# - run/ on tmpfs and var/ on disk, as on a real node (/run is tmpfs; the
#   audit log, counters and the textfile are on a persistent disk).
#
# Each node gets ROOT/bench.env: the environment a Slurm Prolog would run
# qoslane with (fixture squeue, fixture smpquery, the root).

# The node layout, FIX, TOS, RMEM, BASE_TOS, BASE_RMEM and the rig lock.
# shellcheck source=../scripts/lib/node.sh
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/node.sh"
BENCH_REPO=${BENCH_REPO:-$NODE_REPO}
# The SL -> VL table of the fixture answers (qos-identity).
IDENTITY_VL=(0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7)

bsay() { printf '[bench %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# bench_binaries BIN DIR : DIR/qoslane, a copy of BIN (or of a release build
# made now when BIN is empty: others may rebuild target/ during a run), and
# the drivers of bench/tools (a workspace member, linted like the rest)
# beside it: DIR/cycle, DIR/storm, DIR/floor.
bench_binaries() {
  local bin=$1 dir=$2 t=${CARGO_TARGET_DIR:-target}
  if [ -z "$bin" ]; then
    bsay "building the release binary"
    cargo build --release -q -p qoslane
    bin=$t/release/qoslane
  fi
  cp "$bin" "$dir/qoslane"
  cargo build --release -q -p qoslane-bench-tools
  cp "$t/release/cycle" "$t/release/storm" "$t/release/floor" "$dir/"
}

# gen_mapping LEVELS QOS_TOTAL : a valid mapping on stdout. Prints the QoS the
# measured job uses (the last name of the last level: the longest lookup) to fd 3.
gen_mapping() {
  local levels=$1 total=$2 i k n per rest
  if [ "$levels" -gt 16 ]; then
    echo "gen_mapping: $levels levels: service levels are 4 bits (0..15) and distinct, so at most 16 levels exist" >&2
    return 2
  fi
  per=$((total / levels)); rest=$((total % levels))
  printf 'default_level: tier-%02d\nfabric_check: enforce\non_failure: continue\ndevices: []\nlevels:\n' $((levels - 1))
  local last=""
  for ((i = 0; i < levels; i++)); do
    n=$per; [ "$i" -lt "$rest" ] && n=$((n + 1))
    printf '  - name: tier-%02d\n    qos: [' "$i"
    for ((k = 0; k < n; k++)); do
      [ "$k" -gt 0 ] && printf ', '
      printf 'q%02d-%04d' "$i" "$k"
      last=$(printf 'q%02d-%04d' "$i" "$k")
    done
    printf ']\n    service_level: %d\n    virtual_lane: %d\n' "$i" "${IDENTITY_VL[$i]}"
    if [ "$i" -eq 0 ] || [ "$i" -eq 1 ] || [ "$i" -eq $((levels - 1)) ]; then
      local tos=106; [ "$i" -eq 1 ] && tos=74; [ "$i" -gt 1 ] && tos=26
      printf '    node_settings:\n      - path: %s\n        value: "%d"\n' "$TOS" "$tos"
      [ "$i" -eq 0 ] && printf '      - path: %s\n        value: "16777216"\n' "$RMEM"
    fi
  done
  echo "$last" >&3
}

# bench_node ROOT LEVELS QOS_TOTAL PORTS [MAPPING_FILE]
bench_node() {
  local r=$1 levels=$2 total=$3 ports=$4 mapping=${5:-}
  local tmpfs=${BENCH_TMPFS:?}
  node_layout "$r" "$mapping" "$ports" identity
  install -d -m 0755 "$r/var/log"
  # /run is tmpfs on a real node: the same here.
  local run; run=$tmpfs/$(basename "$r")-run
  rm -rf "$run"; install -d -m 0755 "$run"
  ln -s "$run" "$r/run"
  local qos=high
  if [ -z "$mapping" ]; then
    qos=$(gen_mapping "$levels" "$total" 3>&1 >"$r/etc/qoslane/qos-network.yml")
  fi
  # qoslane runs squeue with an environment of its own: the fixture answers from the file
  # beside its symlink (FAKE_QOS below is for the hand-written Prolog's own squeue call)
  ln -sfn "$FIX/bin/squeue" "$r/bin/squeue"
  printf "export FAKE_QOS='%s'\n" "$qos" > "$r/bin/squeue.env"
  cat > "$r/bench.env" <<ENV
export QOSLANE_ROOT=$r
export QOSLANE_SMPQUERY=$r/bin/smpquery
export QOSLANE_SQUEUE=$r/bin/squeue
export QOSLANE_NO_JOURNAL=1
export SLURMD_NODENAME=cn0001
export SLURM_JOB_USER=alice
export FAKE_QOS=$qos
export BENCH_QOS=$qos
export BENCH_LEVELS=$levels BENCH_PORTS=$ports
ENV
}

# node_env ROOT : load a node's environment into this shell (clearing the
# variables a previous node or variant set)
node_env() {
  unset SLURM_SCRIPT_CONTEXT SLURM_JOB_QOS SLURM_JOB_ID
  # shellcheck source=/dev/null  # written by bench_node
  . "$1/bench.env"
}

# warm_cache ROOT : probe every port once (health probes fresh and writes the
# fabric cache) and check the cache holds every port.
warm_cache() {
  local r=$1
  "$QL" --root "$r" health >/dev/null 2>&1 || { bsay "health failed on $r"; "$QL" --root "$r" health; return 1; }
  local n
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ports"]))' "$r/run/qoslane/fabric.json")
  [ "$n" -eq "$BENCH_PORTS" ] || { bsay "fabric cache of $r has $n ports, want $BENCH_PORTS"; return 1; }
}

# populate ROOT N : N-1 other active jobs (ids 100001..), QoS spread over the
# levels, granted through the Slurm 26.05 path (no squeue).
populate() {
  local r=$1 n=$2 j names
  mapfile -t names < <(python3 "$BENCH_REPO/bench/tools/qos_names.py" "$r/etc/qoslane/qos-network.yml")
  for ((j = 1; j < n; j++)); do
    SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=${names[$((j % ${#names[@]}))]} SLURM_JOB_ID=$((100000 + j)) \
      "$QL" --root "$r" prolog >/dev/null 2>&1
  done
  local have; have=$(find "$r/run/qoslane/jobs" -name '*.json' | wc -l)
  [ "$have" -eq $((n - 1)) ] || { bsay "populate $r: $have records, want $((n - 1))"; return 1; }
}

# node_is_baseline ROOT : no job record, no journal, settings at baseline
node_is_baseline() {
  local r=$1
  [ -z "$(find "$r/run/qoslane/jobs" -name '*.json' 2>/dev/null)" ] || { bsay "job records left in $r"; return 1; }
  [ ! -e "$r/run/qoslane/journal.json" ] || { bsay "journal left in $r"; return 1; }
  [ "$(cat "$r$TOS")" = "$BASE_TOS" ] || { bsay "ToS is $(cat "$r$TOS"), not $BASE_TOS"; return 1; }
  [ "$(cat "$r$RMEM")" = "$BASE_RMEM" ] || { bsay "rmem_max is $(cat "$r$RMEM"), not $BASE_RMEM"; return 1; }
}

# load1 : the 1-minute load average
load1() { cut -d' ' -f1 /proc/loadavg; }

# wait_quiet MAX_S THRESHOLD : wait (at most MAX_S) until load1 < THRESHOLD;
# prints the load it started with and the one it measured at.
wait_quiet() {
  local max=$1 thr=$2 start; start=$(load1)
  local end=$((SECONDS + max))
  while awk -v l="$(load1)" -v t="$thr" 'BEGIN{exit !(l >= t)}' && [ $SECONDS -lt $end ]; do sleep 5; done
  echo "load1 $start -> $(load1)"
}

# ------------------------------------------------------------------ measuring
# These expect: OUT (results dir), RUNS, RSS_RUNS, QL (the qoslane binary),
# HF (the hyperfine command line as an array), MRUNS (the runs HF makes when
# it is not RUNS).

# nok TEXT : a measured run did not do its job (the run goes on; run.sh exits non-zero at the end)
nok() { bsay "FAIL: $*"; echo "FAIL: $*" >> "$OUT/failures.txt"; }

# hf NAME ARGS... : hyperfine with its JSON export in raw/NAME.json
hf() {
  local name=$1; shift
  "${HF[@]}" --export-json "$OUT/raw/$name.json" "$@" > "$OUT/raw/$name.txt" 2>&1 || {
    cat "$OUT/raw/$name.txt" >&2; nok "$name: hyperfine failed"; return 1; }
}

# rss NAME PREPARE CMD... : peak RSS of RSS_RUNS runs (KiB, raw/NAME.rss)
rss() {
  local name=$1 prep=$2; shift 2
  local i
  : > "$OUT/raw/$name.rss"
  for ((i = 0; i < RSS_RUNS; i++)); do
    [ -n "$prep" ] && bash -c "$prep" >/dev/null 2>&1
    /usr/bin/time -f %M -o "$OUT/raw/$name.rss.one" "$@" >/dev/null 2>&1 || true
    tail -1 "$OUT/raw/$name.rss.one" >> "$OUT/raw/$name.rss"
  done
  rm -f "$OUT/raw/$name.rss.one"
}

alines() { if [ -f "$1/var/log/qoslane/audit.jsonl" ]; then wc -l < "$1/var/log/qoslane/audit.jsonl"; else echo 0; fi; }

# check_audit NAME ROOT FROM EVENT OUTCOMES [--source S] [--min N] : the audit
# log's lines from line FROM say every run did it (bench/tools/check_audit.py);
# the verdict goes to raw/NAME.check, a failure to failures.txt (nok)
check_audit() {
  local name=$1 root=$2 from=$3; shift 3
  local res
  if res=$(python3 "$BENCH_REPO/bench/tools/check_audit.py" "$root/var/log/qoslane/audit.jsonl" "$from" "$@"); then
    echo "$res" > "$OUT/raw/$name.check"
  else
    echo "$res" > "$OUT/raw/$name.check"; nok "$name: $res"
  fi
  cat "$OUT/raw/$name.check"
}

# record SECTION LABEL NAME [record.py options] : one table row
record() {
  local section=$1 label=$2 name=$3; shift 3
  local extra=()
  [ -f "$OUT/raw/$name.rss" ] && extra+=(--rss "$OUT/raw/$name.rss")
  [ -f "$OUT/raw/$name.check" ] && extra+=(--check "$(cat "$OUT/raw/$name.check")")
  python3 "$BENCH_REPO/bench/tools/record.py" "$OUT" "$section" "$label" "$OUT/raw/$name.json" "${extra[@]}" "$@"
}

# measure_prolog NAME ROOT JOB SECTION LABEL SOURCE [TARGET] [PARAMS...] :
# each measured prolog is a real grant (an epilog before each run)
measure_prolog() {
  local name=$1 r=$2 job=$3 section=$4 label=$5 source=$6 target=${7:-}; shift 7 || shift $#
  local from; from=$(alines "$r")
  export SLURM_JOB_ID=$job
  hf "$name" --prepare "$QL epilog" "$QL prolog" || return 0
  check_audit "$name" "$r" "$from" prolog applied --source "$source" --min "${MRUNS:-$RUNS}" >/dev/null
  "$QL" epilog >/dev/null 2>&1
  if [ -n "$target" ]; then
    rss "$name" "$QL epilog" "$QL" prolog
    "$QL" epilog >/dev/null 2>&1
    record "$section" "$label" "$name" --target-ms "$target" --target-rss-mb 8 "$@"
  else
    record "$section" "$label" "$name" "$@"
  fi
}

# measure_epilog NAME ROOT JOB SECTION LABEL [TARGET] [PARAMS...]
# (EPILOG_OUTCOMES: what the audit must say, default `reverted`)
measure_epilog() {
  local name=$1 r=$2 job=$3 section=$4 label=$5 target=${6:-}; shift 6 || shift $#
  local from; from=$(alines "$r")
  export SLURM_JOB_ID=$job
  hf "$name" --prepare "$QL prolog" "$QL epilog" || return 0
  check_audit "$name" "$r" "$from" epilog "${EPILOG_OUTCOMES:-reverted}" --min "${MRUNS:-$RUNS}" >/dev/null
  if [ -n "$target" ]; then
    rss "$name" "$QL prolog" "$QL" epilog
    record "$section" "$label" "$name" --target-ms "$target" --target-rss-mb 8 "$@"
  else
    record "$section" "$label" "$name" "$@"
  fi
}

