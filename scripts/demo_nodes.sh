#!/usr/bin/env bash
# demo_nodes.sh — the demo's several-node part (scripts/demo.sh calls it): the newest real Slurm
# of rigs/slurm_versions.tsv (in its Debian suite's chroot: rigs/slurm_chroot_rig.sh makes it the
# first time, ~30 s, then reuses it) with two slurmd, each node with its own qoslane root and its
# own HCA of the multi-switch simulated fabric (rigs/fabric_path_rig.sh: the first node under
# leaf1, the second under leaf2). One `srun -N2 --qos=high` job: the same SL on both nodes, each
# node's Prolog took the QoS from where that version gives it (from 26.05 its environment: no call
# to the controller), each Epilog put its node back. Then placement (`qoslane slurm-config` in
# slurm.conf, QOSLANE_SCONTROL on the nodes): leaf1 drops mission-critical, each node's health
# check tells slurmctld what it carries, a mission-critical job runs under leaf2; leaf1 repaired,
# the level comes back; a spine drops it toward leaf2, the fabric audit's verdict (on the host,
# QOSLANE_FABRIC_VERDICT on the nodes) takes it off the node under leaf2 alone. Stops what it
# started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../rigs/slurm_versions.sh
. rigs/slurm_versions.sh
SLURM_VERSION=$(slurm_newest chroot)
export SLURM_VERSION
. tests/e2e/lib.sh

title() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
title "Slurm $SLURM_VERSION, two nodes: one job, one SL on every node (the QoS from $QSRC)"
WORK=$(e2e_workdir qoslane-demo-nodes)
cleanup() { stop_slurm; fabric_stop; rm -f "$CH/etc/slurm/job_submit.lua" "$CH/etc/slurm/qoslane.conf"; rm -rf "${CH:?}$WORK"; }
trap cleanup EXIT
e2e_mapping "$CH$WORK/mapping.yml"
# placement: what slurmctld needs, where an admin puts it; the nodes send their levels
"$QL" slurm-config --config "$CH$WORK/mapping.yml" --placeholders 2 --cpus 2 --memory 1000 --output "$CH/etc/slurm" 2>/dev/null
HOST_QL=$QL   # the fabric audit runs on the host (as on the SM's)
e2e_binaries
fabric_nodes 2 node1 node3 2>/dev/null
for n in "${names[@]}"; do
  install -d -m 0755 "$CH$(root_of "$n")/etc/default"
  echo 'QOSLANE_SCONTROL=/usr/bin/scontrol' > "$CH$(root_of "$n")/etc/default/qoslane"
done
dispatch_hooks
E2E_EXTRA_CONF="Include /etc/slurm/qoslane.conf" start_slurm "$WORK/dispatch" 2
read -r -a nodes <<< "$NODES"
echo "\$ sinfo -N   (inside the $SLURM_SUITE chroot)"
slurm_cmd /usr/bin/sinfo -N -o '%N %T %v' | sed 's/^/  /'
# shellcheck disable=SC2016  # expanded by the task's shell, on each node
task='echo "job $SLURM_JOB_ID on $SLURMD_NODENAME: UCX_IB_SL=$UCX_IB_SL NCCL_IB_SL=$NCCL_IB_SL QOSLANE_LEVEL=$QOSLANE_LEVEL"'
echo "\$ srun -N2 --qos=high --ntasks-per-node=1 -l sh -c '$task'"
out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun -N2 --qos=high --ntasks-per-node=1 -l /bin/sh -c "$task")
printf '%s\n' "$out" | sort | sed 's/^/  /'
j=$(printf '%s\n' "$out" | sed -n 's/^0: job \([0-9]*\) .*/\1/p' | head -1)
[ -n "$j" ] || { echo "demo_nodes: no job id in the srun output" >&2; exit 1; }
done_on() { [ "$(audit_of "$(root_of "$1")" "$j" epilog outcome)" != "<none>" ]; }
for n in "${nodes[@]}"; do poll 20 "$n's Epilog of job $j" done_on "$n"; done
echo "  each node's audit for job $j:"
for n in "${nodes[@]}"; do
  for ev in prolog epilog; do
    printf '  %s %-6s qos=%s via %s level=%s SL=%s %s\n' "$n" "$ev" \
      "$(audit_of "$(root_of "$n")" "$j" "$ev" qos)" "$(audit_of "$(root_of "$n")" "$j" "$ev" qos_source)" \
      "$(audit_of "$(root_of "$n")" "$j" "$ev" level)" "$(audit_of "$(root_of "$n")" "$j" "$ev" service_level)" \
      "$(audit_of "$(root_of "$n")" "$j" "$ev" outcome)"
  done
done

# ------------------------------------------------------------------ placement
a=${nodes[0]} b=${nodes[1]}
title "Placement: $(leaf_of "$a") ($a's first switch) drops mission-critical; Slurm sends the tier's jobs under $(leaf_of "$b")"
health() {
  local n
  echo "\$ hookrun health   (on ${nodes[*]}, as slurmd runs its HealthCheckProgram: qoslane health sends a node's levels to slurmctld when they change)"
  for n in "${nodes[@]}"; do health_of "$n"; done
}
features() { echo "\$ sinfo -N -o '%N %T %b'   (ActiveFeatures: the levels each node carries)"; slurm_cmd /usr/bin/sinfo -N -o '%N %T %b' | sed 's/^/  /'; }
health
echo "$(leaf_of "$a") maps SL 3 to VL 15 toward both spines (SMP Sets, behind the SM):"
leaf_sl "$(leaf_of "$a")" 3 15
health
features
echo "\$ sbatch --qos=mission-critical job.sh; squeue -o '%i %q %T %N %f'"
m=$(submit mission-critical)
poll 60 "job $m running" is_running "$m"
slurm_cmd /usr/bin/squeue -j "$m" -o '%i %q %T %N %f' | sed 's/^/  /'
tried=$(audit_of "$(root_of "$a")" "$m" prolog outcome)
echo "  (job_submit.lua added the tier's feature to its constraint; $a's audit for job $m: $tried — $([ "$tried" = "<none>" ] && echo "never tried there: no refusal, no requeue" || echo "tried there"); nodes: $(slurm_cmd /usr/bin/sinfo -h -N -o '%N=%T' | paste -sd ' '))"
release "$m"; poll 60 "job $m done" is_gone "$m"
echo "$(leaf_of "$a") repaired:"
leaf_sl "$(leaf_of "$a")" 3 3
health
echo "\$ scontrol show node $a | grep ActiveFeatures"
slurm_cmd /usr/bin/scontrol show node "$a" | grep -o 'ActiveFeatures=[^ ]*' | sed 's/^/  /'

# ------------------------------------------------------------------ a spine: the audit's verdict
title "A spine drops mission-critical toward $(leaf_of "$b"): only the fabric audit sees it; its verdict reaches $b's grant"
verdict_host "${nodes[@]}"
for n in "${nodes[@]}"; do echo "QOSLANE_FABRIC_VERDICT=$WORK/fabric/verdict.json" >> "$CH$(root_of "$n")/etc/default/qoslane"; done
for sp in spine1 spine2; do bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$sp" 2 3 15 >/dev/null 2>&1; done
echo "\$ qoslane fabric audit --verdict /shared/fabric-verdict.json   (on the SM's host; exit $(fabric_audit))"
echo "  the verdict, the HCAs that lose a level (the nodes read it in their health run):"
python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
print("\n".join(sorted({"  %s: %s" % (p["node"], x) for l in v["levels"] for p in l["lost"] for x in p["lines"]})))' \
  "$CH$WORK/fabric/verdict.json"
health
features
for sp in spine1 spine2; do bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$sp" 2 3 3 >/dev/null 2>&1; done
echo "spines repaired; the next audit (exit $(fabric_audit)) and health run give it back:"
health
features
