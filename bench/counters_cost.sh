#!/usr/bin/env bash
# bench/counters_cost.sh — what a job's counter evidence adds to a
# Prolog+Epilog pair, side by side in one run on the simulated fabric
# (rigs/fabric_path_rig.sh: ibsim + OpenSM): the same job on two identical
# fixture nodes whose HCA port is node2's, reached through the rig's umad
# preload as a node reaches its HCA, one with the counters on (the default:
# read in process, PMA Gets through the port, no program) and one with
# `QOSLANE_COUNTERS=off` in its site options; whole cycles interleaved run by
# run (bench/tools/cycle.rs), both sides under the same preload. Then
# qoslane's own part, the simulator taken out: the same pair with no preload
# and bench/tools/umad-answer.c as libibumad (every Get answered at once in
# process, per-SL data too, as an HCA's PMA does), beside "off" again.
#
#   flock /tmp/qoslane-rig.lock bench/counters_cost.sh [--cycles N] [--bin QOSLANE] [--rt]
#
# --rt: the run without the simulator (qoslane's own part) at a real-time
# priority (chrt -f 20, both sides alike), as bench/yardstick.sh's quiet
# cycles: for a machine shared with other work, where no wait makes it
# quiet. Not the runs through the simulator: ibsim answers at its normal
# priority, and a qoslane at a real-time one only waits longer for it
# (measured: +8.4 ms on against off under chrt, +3.9 ms without).
#
# Results: bench/results/counters-cost/counters-cost.md (raw data beside it);
# docs/PERFORMANCE.md ("Counter evidence") has the table.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CYCLES=100 BIN="" RT=()
while [ $# -gt 0 ]; do
  case $1 in
    --cycles) CYCLES=$2; shift ;;
    --bin) BIN=$2; shift ;;
    --rt) RT=(chrt -f 20) ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
  shift
done
export BENCH_REPO=$REPO
. bench/lib.sh
WORK=${BENCH_WORK:-/var/tmp/qoslane-counters-cost}
export BENCH_TMPFS=${BENCH_TMPFS:-/dev/shm/qoslane-counters-cost}
OUT=${BENCH_OUT:-$REPO/bench/results/counters-cost}
rm -rf "$WORK" "$BENCH_TMPFS" "$OUT"; mkdir -p "$WORK/bin" "$BENCH_TMPFS/scratch" "$OUT/raw"
bench_binaries "$BIN" "$WORK/bin"
QL=$WORK/bin/qoslane

ENVF=$(bash rigs/fabric_path_rig.sh start | tail -1)
trap 'bash "$REPO"/rigs/fabric_path_rig.sh stop "$ENVF" >/dev/null 2>&1 || true' EXIT
# shellcheck source=/dev/null
. "$ENVF"
lid=$(bash rigs/fabric_path_rig.sh lid "$ENVF" node2)
sm_lid=$(bash rigs/fabric_path_rig.sh lid "$ENVF" "$RIG_SM_NODE")
guid=$(awk -F'\t' '$1 == "node2" { print $4 }' "$RIG_NODES")

# node ROOT: a fixture node whose HCA is node2's port, named as the preload
# names it (ibsim0), with the fabric cache warm.
node() {
  local r=$1 d
  bench_node "$r" 4 5 1 "$REPO/examples/qos-network.yml"
  d=$r/sys/class/infiniband/ibsim0
  mv "$r/sys/class/infiniband/mlx5_0" "$d"
  printf '%s\n' "$guid" | sed 's/^0x//; s/\(....\)/\1:/g; s/:$//' > "$d/node_guid"
  printf '0x%x\n' "$lid" > "$d/ports/1/lid"
  printf '0x%x\n' "$sm_lid" > "$d/ports/1/sm_lid"
  # ib_umad loaded (the preload, or umad-answer, is its umad): its ABI file
  # in the node's sysfs, without which qoslane does not load libibumad.
  install -d -m 0755 "$r/sys/class/infiniband_mad"
  echo 5 > "$r/sys/class/infiniband_mad/abi_version"
}
ON=$WORK/on OFF=$WORK/off PQ=$WORK/perfquery
node "$ON"
node "$OFF"
install -d -m 0755 "$OFF/etc/default"
echo "QOSLANE_COUNTERS=off" > "$OFF/etc/default/qoslane"
# The fallback's node: its HCA keeps a name the preload does not know
# (mlx5_0), so its port does not open in process; perfquery reads it.
node "$PQ"
mv "$PQ/sys/class/infiniband/ibsim0" "$PQ/sys/class/infiniband/mlx5_0"
ln -s "$REPO/rigs/smpquery-sim" "$WORK/bin/perfquery"
# shellcheck disable=SC2153  # RIG_WORK and the others come from the rig's env file ($ENVF)
cat > "$WORK/bin/perfquery.env" <<ENV
export IBSIM_SOCKNAME=$IBSIM_SOCKNAME RIG_UMAD2SIM=$RIG_UMAD2SIM RIG_WORK=$RIG_WORK RIG_CA=ibsim0
export SMPQUERY_SIM_HOSTS=mlx5_0=node2
ENV
install -d -m 0755 "$PQ/etc/default"
echo "QOSLANE_PERFQUERY=$WORK/bin/perfquery" > "$PQ/etc/default/qoslane"
AO=$WORK/attach-only
node "$AO"
mv "$AO/sys/class/infiniband/ibsim0" "$AO/sys/class/infiniband/mlx5_0"
# qoslane's own part: its HCA answers through umad-answer (no preload, no
# simulator), every attribute served.
AN=$WORK/answered ANSWER=$WORK/umad-answer
node "$AN"
mkdir -p "$ANSWER"
gcc -O2 -shared -fPIC -Wall -Wextra -o "$ANSWER/libibumad.so.3" bench/tools/umad-answer.c
node_env "$ON"
unset QOSLANE_ROOT QOSLANE_COUNTERS QOSLANE_PERFQUERY
export LD_PRELOAD=$RIG_UMAD2SIM SIM_HOST=node2 IBSIM_SOCKNAME
cd "$BENCH_TMPFS/scratch"   # umad2sim writes ./sys-PID here
for r in "$ON" "$OFF" "$PQ" "$AO"; do "$QL" --root "$r" health >/dev/null 2>&1 || true; done
answered() { env -u LD_PRELOAD LD_LIBRARY_PATH="$ANSWER" "$@"; }
answered "$QL" --root "$AN" health >/dev/null 2>&1 || true

commit=$(git -C "$REPO" rev-parse --short HEAD)
load_start=$(cut -d' ' -f1 /proc/loadavg)
"$WORK/bin/cycle" "$CYCLES" 700000 \
  on "$QL --root $ON" "$QL --root $ON" \
  off "$QL --root $OFF" "$QL --root $OFF" > "$OUT/raw/cycles.txt"
"$WORK/bin/cycle" "$CYCLES" 800000 \
  perfquery "$QL --root $PQ" "$QL --root $PQ" \
  off "$QL --root $OFF" "$QL --root $OFF" > "$OUT/raw/cycles-perfquery.txt"
"$WORK/bin/cycle" "$CYCLES" 900000 \
  on "$QL --root $ON" "$QL --root $ON" \
  attach-only "$QL --root $AO" "$QL --root $AO" > "$OUT/raw/cycles-attach.txt"
answered "${RT[@]}" "$WORK/bin/cycle" "$CYCLES" 950000 \
  answered "$QL --root $AN" "$QL --root $AN" \
  off "$QL --root $OFF" "$QL --root $OFF" > "$OUT/raw/cycles-answer.txt"
load_end=$(cut -d' ' -f1 /proc/loadavg)
SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=900001 \
  strace -f -tt -o "$OUT/raw/strace-on-prolog.txt" "$QL" --root "$ON" >/dev/null 2>&1 || true
SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=900001 "$QL" --root "$ON" >/dev/null 2>&1 || true
# Syscalls of one Prolog and one Epilog, qoslane's own (answered) and off.
for r in answered:"$AN" off:"$OFF"; do
  for h in prolog epilog; do
    SLURM_SCRIPT_CONTEXT=${h}_slurmd SLURM_JOB_ID=900002 answered \
      strace -f -c -o "$OUT/raw/strace-c-${r%%:*}-$h.txt" "$QL" --root "${r#*:}" >/dev/null 2>&1 || true
  done
done
tail -n 1 "$AN/var/log/qoslane/audit.jsonl" > "$OUT/raw/answered-epilog.json"

# The last Epilog of each side: in process (on), nothing (off).
tail -n 1 "$ON/var/log/qoslane/audit.jsonl" > "$OUT/raw/on-epilog.json"
tail -n 1 "$OFF/var/log/qoslane/audit.jsonl" > "$OUT/raw/off-epilog.json"
tail -n 1 "$PQ/var/log/qoslane/audit.jsonl" > "$OUT/raw/perfquery-epilog.json"
python3 - "$OUT" "$CYCLES" "$commit${RT[*]:+ (run 4 under ${RT[*]})}" "$load_start" "$load_end" <<'PY' | tee "$OUT/counters-cost.md"
import json, statistics as st, sys
out, cycles, commit, l0, l1 = sys.argv[1:6]
def load(f):
    by = {}
    for line in open(f"{out}/raw/{f}"):
        name, c, p, e = line.split()
        by.setdefault(name, []).append((int(c), int(p), int(e)))
    return by
runs = [("on", "off", load("cycles.txt")), ("perfquery", "off", load("cycles-perfquery.txt")),
        ("on", "attach-only", load("cycles-attach.txt")), ("answered", "off", load("cycles-answer.txt"))]
an = json.load(open(f"{out}/raw/answered-epilog.json"))
an_ports = an.get("evidence", {}).get("ports", [])
assert an_ports and an_ports[0].get("read_by") == "in-process", an
pq = json.load(open(f"{out}/raw/perfquery-epilog.json"))
assert pq["evidence"]["ports"][0].get("read_by") == "perfquery", pq
on = json.load(open(f"{out}/raw/on-epilog.json"))
off = json.load(open(f"{out}/raw/off-epilog.json"))
ports = on.get("evidence", {}).get("ports", [])
assert ports and ports[0].get("read_by") == "in-process", on
assert "evidence" not in off, off
def q(v, p):
    v = sorted(v); return v[min(len(v) - 1, int(p * len(v)))]
print(f"commit {commit}, {cycles} interleaved cycles per side, load {l0} -> {l1}")
print()
print("| run | side | cycle median ms | p95 ms | prolog median ms | epilog median ms | added (median) ms |")
print("|---|---|---:|---:|---:|---:|---:|")
for k, (side, base, by) in enumerate(runs, 1):
    med = {n: st.median(r[0] / 1000 for r in by[n]) for n in (side, base)}
    for name in (side, base):
        rows = by[name]
        c = [r[0] / 1000 for r in rows]
        added = f"{med[side] - med[base]:.2f}" if name == side else ""
        label = {"on": "counters on, in process", "perfquery": "counters by perfquery (fallback)",
                 "answered": "counters on, in process, no simulator (umad-answer: every Get answered at once)",
                 "off": "counters off", "attach-only": "attach only (port not opened, nothing read)"}[name]
        print(f"| {k} | {label} | {st.median(c):.2f} | {q(c, 0.95):.2f} | "
              f"{st.median(r[1] / 1000 for r in rows):.2f} | {st.median(r[2] / 1000 for r in rows):.2f} | {added} |")
print(f"the last Epilog's evidence: read_by {ports[0]['read_by']}, {ports[0].get('said', '')}")
trace = open(f"{out}/raw/strace-on-prolog.txt").read().splitlines()
own = [l for l in trace if "./sys-" in l]
print(f"one in-process Prolog under strace -f: {len(trace)} syscalls, {len(own)} of them the "
      f"preload's fake sysfs (./sys-PID, made at attach, removed at exit)")
def calls(f):
    for line in open(f"{out}/raw/{f}"):
        w = line.split()
        if w and w[-1] == "total":
            return int(w[3])
    return 0
for h in ("prolog", "epilog"):
    a, o = calls(f"strace-c-answered-{h}.txt"), calls(f"strace-c-off-{h}.txt")
    print(f"one {h} without the simulator (strace -f -c): counters on {a} syscalls, off {o} (+{a - o})")
print(f"the answered Epilog's evidence: read_by {an_ports[0]['read_by']}, {an_ports[0].get('said', '')}")
PY
