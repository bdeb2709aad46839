#!/usr/bin/env bash
# ctld_cost.sh — what the hooks cost the real controller, counted by slurmctld itself (sdiag):
# RPCs per node per job start on every Slurm of rigs/slurm_versions.tsv (the host's rig, the chroot
# rigs), for 1-node and 4-node jobs; then the QoS lookup's latency under 1/16/64 concurrent callers.
#
#   bench/ctld_cost.sh [--versions "V..."] [--jobs N] [--latency "V..."]   (default: every version;
#                      [--callers 1,16,64] [--calls 20] [--out DIR]         the latency on the newest
#                                                                            whose QoS is from squeue)
#
# Method, per version and job size: the same cluster, the same hookrun as Prolog, Epilog and
# TaskProlog, J jobs (`sbatch -N1` or `-N4 --wrap true`), run twice: with qoslane's hooks, and
# as control with them taken out of prolog.d/epilog.d/task-prolog.d (hookrun and the site's
# Epilog hook still run). Counters are reset (`sdiag -r`) before each run; the script itself
# asks the controller nothing while jobs run (it waits on files the hooks write, then on
# sdiag's own MESSAGE_EPILOG_COMPLETE count), so the difference in sdiag's per-type counts is
# what qoslane asked. Prints a markdown table; raw sdiag output and ctl.py rows in --out.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../rigs/slurm_versions.sh
. rigs/slurm_versions.sh
VERSIONS=$(slurm_versions | paste -sd ' ') JOBS=8 LATENCY=$(slurm_newest qos=squeue) CALLERS=1,16,64 CALLS=20 OUT=""
while [ $# -gt 0 ]; do
  case $1 in
    --versions) VERSIONS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --latency) LATENCY=$2; shift 2 ;;
    --callers) CALLERS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "ctld_cost.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/qoslane-ctld-cost.XXXXXX)}
mkdir -p "$OUT"

# one version per child run (lib.sh picks the Slurm when sourced)
if [ "${CTLD_COST_ONE:-}" = "" ]; then
  : > "$OUT/rows.tsv"; rm -f "$OUT/results.jsonl"
  for v in $VERSIONS; do
    lat=0; case " $LATENCY " in *" $v "*) lat=1 ;; esac
    CTLD_COST_ONE=$v CTLD_COST_LAT=$lat SLURM_VERSION=$v bash "$0" --jobs "$JOBS" --callers "$CALLERS" --calls "$CALLS" --out "$OUT"
  done
  python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "rows.tsv")) if l.strip()]
print("| Slurm | nodes/job | jobs | qos_source | RPCs with the hooks − control, by type | per node per job |")
print("|---|---:|---:|---|---|---:|")
for v, n, j, src, total, by_type in rows:
    per = int(total) / (int(j) * int(n))
    print(f"| {v} | {n} | {j} | {src} | {by_type or 'none'} | {per:.2f} |")
lat = os.path.join(out, "results.jsonl")
if os.path.exists(lat):
    print()
    print("| Slurm | query | callers | calls | median ms | p95 ms | max ms | calls/s | errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for l in open(lat):
        r = json.loads(l)
        m = r["latency_ms"]
        print(f"| {r.get('slurm', '?')} | {r['query']} | {r['callers']} | {r['calls']} | {m['median']:.1f} | {m['p95']:.1f} | {m['max']:.1f} | {r['throughput_per_s']:.0f} | {r['errors']} |")
PY
  echo "raw: $OUT" >&2
  exit 0
fi

. tests/e2e/lib.sh
V=$CTLD_COST_ONE
WORK=$(e2e_workdir qoslane-ctld)
cleanup() { stop_slurm; rm -rf "$CH$WORK"; }
trap cleanup EXIT
NN=4; [ -z "$CH" ] && NN=1   # the host rig has one node
e2e_mapping "$CH$WORK/mapping.yml"
build_release >/dev/null 2>&1
e2e_binaries
dispatch_hooks
say "Slurm $V: $NN node(s)"
start_slurm "$WORK/dispatch" "$NN"
read -r -a nodes <<< "$NODES"
for n in "${nodes[@]}"; do make_node "$(root_of "$n")" "$CH$WORK/mapping.yml"; done

sdiag_counts() { # TYPE COUNT per line, from sdiag's "by message type" section
  slurm_cmd /usr/bin/sdiag | awk '/by message type/ {on=1; next} /by user/ {on=0} on && /count:/ {
    c=$0; sub(/.*count:/, "", c); sub(/[^0-9].*/, "", c); print $1, c }'
}
count_of() { awk -v t="$2" '$1 == t { print $2; f=1 } END { if (!f) print 0 }' "$1"; }
epilogs_seen() { # all site Epilog hook lines written (each node's WORK/nodes/N/out/logout_user.log)
  local n total=0
  for n in "${nodes[@]}"; do
    [ -e "$CH$(root_of "$n")/out/logout_user.log" ] && total=$((total + $(grep -c . "$CH$(root_of "$n")/out/logout_user.log")))
  done
  [ "$total" -ge "$1" ]
}
epilog_msgs() { [ "$(sdiag_counts | awk '$1 == "MESSAGE_EPILOG_COMPLETE" { print $2 }')" -ge "$1" ] 2>/dev/null; }
hooks_on() { # on|off: qoslane's hook files in place, or moved aside
  local n r d
  for n in "${nodes[@]}"; do
    r=$CH$(root_of "$n")/etc/slurm
    for d in prolog.d epilog.d task-prolog.d; do
      if [ "$1" = on ]; then [ -e "$r/off.$d" ] && mv "$r/off.$d" "$r/$d/10-qoslane"
      else [ -e "$r/$d/10-qoslane" ] && mv "$r/$d/10-qoslane" "$r/off.$d"; fi
    done
  done
  return 0
}
# run_jobs NODES_PER_JOB TAG : J jobs, counters reset before; sdiag counts after, in OUT/TAG.counts
run_jobs() {
  local k=$1 tag=$2 i n before=0
  for n in "${nodes[@]}"; do
    [ -e "$CH$(root_of "$n")/out/logout_user.log" ] && before=$((before + $(grep -c . "$CH$(root_of "$n")/out/logout_user.log")))
  done
  slurm_cmd /usr/bin/sdiag -r >/dev/null
  for ((i = 0; i < JOBS; i++)); do
    slurm_cmd /usr/bin/sbatch --parsable -N"$k" --qos=high -o /dev/null --wrap true >/dev/null
  done
  poll 120 "$tag: $JOBS jobs' Epilogs on $k node(s)" epilogs_seen $((before + JOBS * k))
  poll 30 "$tag: the controller has every Epilog's completion" epilog_msgs $((JOBS * k))
  slurm_cmd /usr/bin/sdiag > "$OUT/$V.$tag.sdiag"
  sdiag_counts > "$OUT/$V.$tag.counts"
}
sizes=(1); [ "$NN" -gt 1 ] && sizes+=("$NN")
for k in "${sizes[@]}"; do
  hooks_on on;  run_jobs "$k" "N$k.hooks"
  hooks_on off; run_jobs "$k" "N$k.control"
  hooks_on on
  # every message type's count, hooks − control (sdiag's own REQUEST_STATS_INFO left out)
  diff=$(join -a1 -a2 -e0 -o 0,1.2,2.2 <(sort "$OUT/$V.N$k.hooks.counts") <(sort "$OUT/$V.N$k.control.counts") |
    awk '$1 != "REQUEST_STATS_INFO" && $2 != $3 { print $1, $2 - $3 }')
  total=$(awk '{ t += $2 } END { print t + 0 }' <<< "$diff")
  by_type=$(awk 'NF { printf "%s%s %+d", (n++ ? ", " : ""), $1, $2 }' <<< "$diff")
  src=$(python3 -c 'import json, sys
print([json.loads(l) for l in open(sys.argv[1]) if "\"event\":\"prolog\"" in l][-1]["qos_source"])' \
    "$CH$(root_of "${nodes[0]}")/var/log/qoslane/audit.jsonl")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$V" "$k" "$JOBS" "$src" "$total" "$by_type" >> "$OUT/rows.tsv"
  say "Slurm $V, $k node(s)/job, $JOBS jobs: $total RPCs more with the hooks (${by_type:-none}; qos_source $src)"
done

if [ "${CTLD_COST_LAT:-0}" = 1 ]; then
  j=$(slurm_cmd /usr/bin/sbatch --parsable --hold --qos=high -o /dev/null --wrap true)
  rm -rf "$OUT/lat"; mkdir -p "$OUT/lat"
  chroot_arg=(); [ -z "$CH" ] || chroot_arg=(--chroot "$CH")
  python3 bench/tools/ctl.py "$OUT/lat" "$j" --query squeue "${chroot_arg[@]}" --callers "$CALLERS" --calls "$CALLS" >/dev/null
  python3 - "$OUT/lat/results.jsonl" "$OUT/results.jsonl" "$V" <<'PY'
import json, sys
src, dst, v = sys.argv[1:]
with open(dst, "a") as f:
    for l in open(src):
        r = json.loads(l); r["slurm"] = v; f.write(json.dumps(r) + "\n")
PY
  rm -rf "$OUT/lat"
  slurm_cmd /usr/bin/scancel "$j"
fi
