#!/usr/bin/env bash
# slurm.sh — qoslane under hookrun on a real single-node Slurm cluster, the
# version a parameter: a row of rigs/slurm_versions.tsv, the host's or a Debian
# suite's in its chroot (rigs/slurm_chroot_rig.sh), the node and its hooks inside.
# Each case asserts on what Slurm and the node actually show. Bounded polls,
# no guessed sleeps. Leaves the rig stopped.
#
#   tests/e2e/slurm.sh [--slurm VERSION|SUITE|host]   (or SLURM_VERSION=...; default: the host's)
set -euo pipefail
if [ "${1:-}" = --slurm ]; then export SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"

WORK=$(e2e_workdir qoslane-e2e)
R=$WORK/root
trap e2e_cleanup EXIT
say "Slurm $SLURM_VERSION ($SLURM_SUITE): the Prolog's QoS source should be $QSRC"
e2e_mapping "$CH$WORK/mapping.yml"

build_release
e2e_binaries
make_node "$R" "$CH$WORK/mapping.yml"
say "starting the Slurm rig"
start_slurm "$R"
say "node $NODE up ($(slurm_cmd /usr/bin/sinfo -V))"
check "the Slurm under test is $SLURM_VERSION" eq "$(slurm_cmd /usr/bin/sinfo -V | grep -o '[0-9]*\.[0-9]*' | head -1)" "$SLURM_VERSION"
settings() { echo "$(cat "$CH$R$TOS") $(cat "$CH$R$RMEM")"; }

# ------------------------------------------------------------ each QoS, its own SL
say "case: sbatch --qos=high gets the high level"
j=$(submit high)
poll 60 "job $j running" is_running "$j"
check "high job: UCX_IB_SL=2" eq "$(env_of "$j" UCX_IB_SL)" 2
check "high job: NCCL_IB_SL=2" eq "$(env_of "$j" NCCL_IB_SL)" 2
check "high job: OMPI openib SL=2" eq "$(env_of "$j" OMPI_MCA_btl_openib_ib_service_level)" 2
check "high job: MV2 SL=2" eq "$(env_of "$j" MV2_DEFAULT_SERVICE_LEVEL)" 2
check "high job: QOSLANE_LEVEL=high" eq "$(env_of "$j" QOSLANE_LEVEL)" high
check "high job: rmem_max applied while it runs" eq "$(settings)" "$BASE_TOS 8388608"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 10 "epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" = reverted
check "high job: audit prolog qos from $QSRC" eq "$(audit_of "$R" "$j" prolog qos)/$(audit_of "$R" "$j" prolog qos_source)" "high/$QSRC"
check "high job: audit epilog qos from $QSRC" eq "$(audit_of "$R" "$j" epilog qos)/$(audit_of "$R" "$j" epilog qos_source)" "high/$QSRC"
check "high job: audit prolog applied" eq "$(audit_of "$R" "$j" prolog outcome)" applied
check "high job: baseline after it ends" eq "$(settings)" "$BASE_TOS $BASE_RMEM"

say "case: srun --qos=low"
out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=low /usr/bin/env)
check "srun low: UCX_IB_SL=1" eq "$(printf '%s\n' "$out" | sed -n 's/^UCX_IB_SL=//p')" 1
check "srun low: QOSLANE_LEVEL=low" eq "$(printf '%s\n' "$out" | sed -n 's/^QOSLANE_LEVEL=//p')" low

say "case: user text cannot move a job to another level (default normal ranks above low)"
mkdir -p "$CH$WORK/d QOS=high"; chmod 0777 "$CH$WORK/d QOS=high"
spoofs=(--comment " QOS=mission-critical" -J "x QOS=mission-critical" -D "$WORK/d QOS=high" -J $'x Account=a QOS=mission-critical JobState=R\nrest')
for ((i = 0; i < ${#spoofs[@]}; i += 2)); do
  j=$(submit low "${spoofs[i]}" "${spoofs[i+1]}")
  poll 60 "spoof $((i / 2 + 1)) job $j running" is_running "$j"
  check "spoof $((i / 2 + 1)) (${spoofs[i]}): level low, SL 1" eq "$(env_of "$j" QOSLANE_LEVEL)/$(env_of "$j" UCX_IB_SL)" low/1
  release "$j"; poll 60 "job $j done" is_gone "$j"
  check "spoof $((i / 2 + 1)): audit says $QSRC gave low" eq "$(audit_of "$R" "$j" prolog qos)/$(audit_of "$R" "$j" prolog qos_source)" "low/$QSRC"
done

say "case: SLURM_JOB_QOS=mission-critical in the submitter's environment is not the job's QoS"
# (where the table's qos_source is env, slurmd's own SLURM_JOB_QOS is what the Prolog trusts: the
# user's must not reach it)
j=$(slurm_cmd env SLURM_JOB_QOS=mission-critical /usr/bin/sbatch --parsable --qos=low -o "$WORK/slurm-%j.out" "$(job_script job-envspoof)")
poll 60 "env spoof job $j running" is_running "$j"
check "env spoof (sbatch env): level low, SL 1" eq "$(env_of "$j" QOSLANE_LEVEL)/$(env_of "$j" UCX_IB_SL)" low/1
release "$j"; poll 60 "job $j done" is_gone "$j"
check "env spoof (sbatch env): audit says $QSRC gave low" eq "$(audit_of "$R" "$j" prolog qos)/$(audit_of "$R" "$j" prolog qos_source)" "low/$QSRC"
j=$(submit low --export=ALL,SLURM_JOB_QOS=mission-critical)
poll 60 "export spoof job $j running" is_running "$j"
check "env spoof (--export): level low, SL 1" eq "$(env_of "$j" QOSLANE_LEVEL)/$(env_of "$j" UCX_IB_SL)" low/1
release "$j"; poll 60 "job $j done" is_gone "$j"
check "env spoof (--export): audit says $QSRC gave low" eq "$(audit_of "$R" "$j" prolog qos)/$(audit_of "$R" "$j" prolog qos_source)" "low/$QSRC"
out=$(slurm_cmd env SLURM_JOB_QOS=mission-critical /usr/bin/timeout 60 /usr/bin/srun --qos=low /usr/bin/env)
check "env spoof (srun env): level low, SL 1" eq "$(printf '%s\n' "$out" | sed -n 's/^QOSLANE_LEVEL=//p')/$(printf '%s\n' "$out" | sed -n 's/^UCX_IB_SL=//p')" low/1

say "case: a QoS no level lists gets the default level"
j=$(submit scavenger)
poll 60 "job $j running" is_running "$j"
check "scavenger job: default level normal" eq "$(env_of "$j" QOSLANE_LEVEL)" normal
check "scavenger job: UCX_IB_SL=0" eq "$(env_of "$j" UCX_IB_SL)" 0
release "$j"; poll 60 "job $j done" is_gone "$j"

say "case: two jobs share the node; settings follow the higher level"
jl=$(submit low)
poll 60 "low job running" is_running "$jl"
check "low alone: rmem 1048576" eq "$(settings)" "$BASE_TOS 1048576"
jm=$(submit mission-critical)
poll 60 "mission-critical job running" is_running "$jm"
check "both: mission-critical wins" eq "$(settings)" "106 16777216"
check "both: low job kept SL 1" eq "$(env_of "$jl" UCX_IB_SL)" 1
check "both: mission-critical job SL 3, TC 106" eq "$(env_of "$jm" UCX_IB_SL)/$(env_of "$jm" NCCL_IB_TC)" 3/106
release "$jm"; poll 60 "mission-critical done" is_gone "$jm"
poll 10 "mc epilog audited" test "$(audit_of "$R" "$jm" epilog outcome)" = reverted
check "low again: back to low's settings" eq "$(settings)" "$BASE_TOS 1048576"
release "$jl"; poll 60 "low done" is_gone "$jl"
poll 10 "low epilog audited" test "$(audit_of "$R" "$jl" epilog outcome)" = reverted
check "idle: baseline" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
check "site epilog hook ran for every job" eq "$(sort -u "$CH$R/out/logout_user.log" | grep -c .)" 12

# ------------------------------------------------------------ failures
say "case: a failing required hook under requeue: job held, node in service"
printf '#!/bin/sh\necho "scratch not mounted" >&2\nexit 1\n' > "$CH$R/etc/slurm/prolog.d/60-scratch"
chmod 0755 "$CH$R/etc/slurm/prolog.d/60-scratch"
j=$(submit high)
poll 60 "job $j requeued and held" held "$j"
check "requeue policy: node still in service" test "$(node_state)" != drained -a "$(node_state)" != draining
poll 20 "epilog reverted the failed start" test "$(settings)" = "$BASE_TOS $BASE_RMEM"
check "requeue policy: baseline restored" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"

say "case: a failing required hook under drain: Slurm drains the node"
sed -i 's/^on_failure = requeue/on_failure = drain/' "$CH$R/etc/slurm/hookrun.conf"
j=$(submit high)
drained() { case "$(node_state)" in drain*) return 0;; *) return 1;; esac; }
poll 60 "node drained" drained
check "drain policy: reason Prolog error" eq "$(node_reason)" "Prolog error"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
rm -f "$CH$R/etc/slurm/prolog.d/60-scratch"
sed -i 's/^on_failure = drain/on_failure = requeue/' "$CH$R/etc/slurm/hookrun.conf"
resume_node

say "case: a hanging optional hook is killed at its deadline; the job starts"
printf '#!/bin/sh\nsleep 600\n' > "$CH$R/etc/slurm/prolog.d/70-slow.optional"
chmod 0755 "$CH$R/etc/slurm/prolog.d/70-slow.optional"
t0=$(date +%s)
j=$(submit normal)
poll 60 "job $j running despite the hang" is_running "$j"
check "hang: job started within the hook deadline (+ scheduling)" test $(( $(date +%s) - t0 )) -lt 30
check "hang: counted as timeout" grep -q 'hookrun_hook_runs_total{phase="prolog",hook="70-slow.optional",outcome="timeout"} 1' "$CH$R/var/lib/prometheus/node-exporter/hookrun.prom"
release "$j"; poll 60 "job $j done" is_gone "$j"
rm -f "$CH$R/etc/slurm/prolog.d/70-slow.optional"

say "case: fabric drift (SM re-swept): health warns, the node stays in service, fail_job level refused"
set_fabric "$R" reversed
out=$(slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health 2>&1 || true)
check "drift: health does not drain (a level the fabric does not carry is a warning)" eq "$(node_state)" idle
j=$(submit mission-critical)
poll 60 "job $j requeued and held" held "$j"
check "fail_job on misaligned fabric: audit failed" eq "$(audit_of "$R" "$j" prolog outcome)" failed
check "fail_job: error names SL/VL" grep -q 'SL 3 -> VL 4, want VL 3' "$CH$R/var/log/qoslane/audit.jsonl"
check "fail_job: node untouched" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
j=$(submit high)
poll 60 "job $j running on the baseline" is_running "$j"
check "drift: a continue job runs without its SL" eq "$(env_of "$j" UCX_IB_SL)" ""
check "drift: and its output says why (TaskProlog print)" grep -q "^qoslane: QoS high: level high was not granted (fabric check: .*SL 2 -> VL" "$CH$WORK/slurm-$j.out"
release "$j"; poll 60 "job $j done" is_gone "$j"
set_fabric "$R" identity

say "case: a typo in the mapping: the node stays in service, jobs run on the last-known-good copy"
cp "$CH$R/etc/qoslane/qos-network.yml" "$CH$WORK/mapping.good"
sed -i 's/^levels:/levles:/' "$CH$R/etc/qoslane/qos-network.yml"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
check "typo: health does not drain" eq "$(node_state)" idle
j=$(submit high)
poll 60 "job $j running on the last-known-good copy" is_running "$j"
check "typo: high job still gets SL 2" eq "$(env_of "$j" UCX_IB_SL)" 2
release "$j"; poll 60 "job $j done" is_gone "$j"
cp "$CH$WORK/mapping.good" "$CH$R/etc/qoslane/qos-network.yml"

say "case: an HCA port that should be ACTIVE is DOWN: health drains with the reason, then resumes"
echo "1: DOWN" > "$CH$R/sys/class/infiniband/mlx5_0/ports/1/state"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
poll 10 "health drained the node" drained
check "port down: drain reason names the port" bash -c "[[ \"$(node_reason)\" == 'hookrun: 10-qoslane: qoslane: mlx5_0/1: not ACTIVE'* ]]"
echo "4: ACTIVE" > "$CH$R/sys/class/infiniband/mlx5_0/ports/1/state"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health > "$CH$WORK/health-up.out" 2>&1 || true
ctl_idle() { slurm_cmd /usr/bin/scontrol show node -o "$NODE" | grep -q 'State=IDLE '; }
poll 30 "health resumed the node it drained" ctl_idle

say "case: a record left by a killed Epilog is released by health (Slurm no longer has the job here)"
slurm_cmd env SLURM_JOB_ID=999999 SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_QOS=high QOSLANE_SMPQUERY="$R/bin/smpquery" \
  "$QL" --root "$R" prolog >/dev/null 2>&1
check "stale: the record is there, high's setting in force" eq "$(ls "$CH$R/run/qoslane/jobs")/$(settings)" "999999.json/$BASE_TOS 8388608"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
check "stale: health released it" eq "$(ls "$CH$R/run/qoslane/jobs")/$(settings)" "/$BASE_TOS $BASE_RMEM"
check "stale: audited" grep -q 'job(s) 999999: Slurm no longer has them on node' "$CH$R/var/log/qoslane/audit.jsonl"
check "stale: the node stays in service" eq "$(node_state)" idle

say "case: health leaves an admin-drained node alone"
slurm_cmd /usr/bin/scontrol update nodename="$NODE" state=drain reason="admin: maintenance"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
check "admin drain kept" eq "$(node_reason)" "admin: maintenance"
resume_node

check "the node ends idle" eq "$(node_state)" idle
check "no job record left on the node" eq "$(ls "$CH$R/run/qoslane/jobs")" ""
say "summary (Slurm $SLURM_VERSION): $E2E_PASSED passed, $E2E_FAILED failed"
echo "slurm-$SLURM_VERSION: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
