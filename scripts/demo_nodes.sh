#!/usr/bin/env bash
# demo_nodes.sh — the demo's several-node part (scripts/demo.sh calls it): the newest real Slurm
# of rigs/slurm_versions.tsv (in its Debian suite's chroot: rigs/slurm_chroot_rig.sh makes it the
# first time, ~30 s, then reuses it) with two slurmd, each node with its own qoslane root and HCA
# port. One `srun -N2 --qos=high` job: the same SL on both nodes, each node's Prolog took the QoS
# from where that version gives it (from 26.05 its environment: no call to the controller), each
# Epilog put its node back. Stops what it started.
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
cleanup() { stop_slurm; rm -rf "${CH:?}$WORK"; }
trap cleanup EXIT
e2e_mapping "$CH$WORK/mapping.yml"
e2e_binaries
mapfile -t names < <(RIG_NNODES=2 bash "$CHROOT_RIG" nodes "$SLURM_SUITE")
for n in "${names[@]}"; do make_node "$(root_of "$n")" "$CH$WORK/mapping.yml"; done
dispatch_hooks
start_slurm "$WORK/dispatch" 2
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
