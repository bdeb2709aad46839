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
ctl_idle() { slurm_cmd /usr/bin/scontrol show node -o "$NODE" | grep -q 'State=IDLE '; }

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
check "both: mission-critical job SL 3, no TC on its InfiniBand port" eq "$(env_of "$jm" UCX_IB_SL)/$(env_of "$jm" NCCL_IB_TC)" 3/
release "$jm"; poll 60 "mission-critical done" is_gone "$jm"
poll 10 "mc epilog audited" test "$(audit_of "$R" "$jm" epilog outcome)" = reverted
check "low again: back to low's settings" eq "$(settings)" "$BASE_TOS 1048576"
release "$jl"; poll 60 "low done" is_gone "$jl"
poll 10 "low epilog audited" test "$(audit_of "$R" "$jl" epilog outcome)" = reverted
check "idle: baseline" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
check "site epilog hook ran for every job" eq "$(sort -u "$CH$R/out/logout_user.log" | grep -c .)" 12

# ------------------------------------------------------------ Slurm's own contract
# Assertions of Slurm's test suite (testsuite/ of SchedMD's slurm), ported: what hookrun must keep
# true of the programs it stands in for. Each names the test it comes from.
say "case: the TaskProlog protocol through hookrun: print, export, unset, as the job's user"
# From testsuite/python/tests/commands/srun/test_task-prolog_and_epilog.py: a TaskProlog's
# `print` line reaches every task's output, `export` sets a variable in every task, `unset`
# removes one the task would have had, and the TaskProlog runs as the job's user.
# shellcheck disable=SC2016  # the hook's variables, at run time
printf '#!/bin/sh
/usr/bin/id -u >> %s/out/task-prolog.uid
echo print HEADER
echo export TEST=prolog_qa
echo unset DISPLAY
' "$R" \
  > "$CH$R/etc/slurm/task-prolog.d/20-conformance"
chmod 0755 "$CH$R/etc/slurm/task-prolog.d/20-conformance"
# shellcheck disable=SC2016  # the task's variables, at run time
out=$(slurm_cmd env DISPLAY=:0 /usr/bin/timeout 60 /usr/bin/srun -n2 --qos=low /bin/sh -c 'echo TEST==$TEST; echo DISPLAY==${DISPLAY}X; /usr/bin/id -u')
check "task prolog: print reaches both tasks' output" eq "$(printf '%s\n' "$out" | grep -c '^HEADER$')" 2
check "task prolog: export sets TEST in both tasks" eq "$(printf '%s\n' "$out" | grep -c '^TEST==prolog_qa$')" 2
check "task prolog: unset removes DISPLAY in both tasks" eq "$(printf '%s\n' "$out" | grep -c '^DISPLAY==X$')" 2
task_uid=$(printf '%s\n' "$out" | grep -E '^[0-9]+$' | sort -u)
check "task prolog: ran once per task, as the job's user (uid $task_uid)" eq "$(sort "$CH$R/out/task-prolog.uid" | uniq -c | tr -s ' ')" " 2 $task_uid"
check "task prolog: qoslane's own exports still arrive beside it" eq "$(printf '%s\n' "$out" | grep -c '^HEADER$')/$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=low /usr/bin/env | sed -n 's/^UCX_IB_SL=//p')" 2/1
rm -f "$CH$R/etc/slurm/task-prolog.d/20-conformance"

say "case: the Prolog and Epilog environment through hookrun; a Prolog hook's children do not outlive it"
# From testsuite/python/tests/parameters/slurm/Prolog/test_prolog.py: the Prolog runs for a job
# and what it started in the background is killed (hookrun kills each hook's process group when
# the hook exits). From testsuite/python/tests/parameters/slurm/Epilog/test_epilog.py and
# test_prolog.py's environment checks: the job's variables reach the hooks as slurmd set them.
# shellcheck disable=SC2016  # the hook's variables, at run time
printf '#!/bin/sh
/usr/bin/env | /usr/bin/sort > %s/out/$HOOKRUN_PHASE-env.$SLURM_JOB_ID
/bin/sleep 60 &
echo $! > %s/out/$HOOKRUN_PHASE-bg.$SLURM_JOB_ID
' "$R" "$R" \
  | tee "$CH$R/etc/slurm/prolog.d/05-env" > "$CH$R/etc/slurm/epilog.d/05-env"
chmod 0755 "$CH$R/etc/slurm/prolog.d/05-env" "$CH$R/etc/slurm/epilog.d/05-env"
j=$(submit normal)
poll 60 "job $j running" is_running "$j"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 20 "epilog ran" test -s "$CH$R/out/epilog-bg.$j"
for ph in prolog epilog; do
  e=$CH$R/out/$ph-env.$j
  check "$ph env: SLURM_JOB_ID, SLURM_SCRIPT_CONTEXT=${ph}_slurmd, the job's user and node" eq \
    "$(sed -n 's/^SLURM_JOB_ID=//p; s/^SLURM_SCRIPT_CONTEXT=//p; s/^SLURMD_NODENAME=//p' "$e" | paste -sd ' ')/$(grep -c '^SLURM_JOB_U\(SER\|ID\)=' "$e")" \
    "$NODE $j ${ph}_slurmd/2"
  check "$ph env: hookrun adds HOOKRUN_PHASE=$ph" grep -qx "HOOKRUN_PHASE=$ph" "$e"
  bg=$(cat "$CH$R/out/$ph-bg.$j")
  poll 10 "$ph: the hook's background child ($bg) was killed when the hook exited" test ! -e "/proc/$bg"
done
rm -f "$CH$R/etc/slurm/prolog.d/05-env" "$CH$R/etc/slurm/epilog.d/05-env"

say "case: squeue options in an admin's environment do not reach squeue (health keeps running jobs)"
# issue 24, defect 4: squeue reads SQUEUE_USERS, SQUEUE_STATES, SLURM_CONF... from its environment;
# with the caller's, `SQUEUE_USERS=nobody qoslane health` emptied the node's job list and released
# every running job's level.
j=$(submit low)
poll 60 "job $j running" is_running "$j"
check "squeue env: the running job's record and level" eq "$(ls "$CH$R/run/qoslane/jobs")/$(settings)" "$j.json/$BASE_TOS 1048576"
# (the options only: a SLURM_CONF that breaks squeue would leave the list unread, and health then
# removes nothing — the hookrun run below gives it one, for scontrol)
slurm_cmd env SQUEUE_USERS=nobody SQUEUE_STATES=PENDING \
  SLURMD_NODENAME="$NODE" QOSLANE_SMPQUERY="$R/bin/smpquery" "$QL" --root "$R" health > "$CH$WORK/health-squeue.out" 2>&1 || true
slurm_cmd env SQUEUE_USERS=nobody SQUEUE_STATES=PENDING SLURM_CONF=/nonexistent/slurm.conf SLURM_TIME_FORMAT=relative \
  SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >> "$CH$WORK/health-squeue.out" 2>&1 || true
check "squeue env: after health with SQUEUE_USERS=nobody the job keeps its record and level" eq "$(ls "$CH$R/run/qoslane/jobs")/$(settings)" "$j.json/$BASE_TOS 1048576"
ns=$(node_state)
check "squeue env: the node stays in service ($ns)" test "${ns#drain}" = "$ns"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 10 "epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" = reverted

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

say "case: a failing required hook under drain: the node drains, the reason names the hook; health resumes it"
# issue 23 item 4: the reason is hookrun's ("hookrun: prolog HOOK: what it said"), set before the
# Prolog exits non-zero (slurmctld keeps a drained node's reason), not Slurm's bare "Prolog error";
# the job is requeued and held as Slurm does for a failed Prolog (Slurm's expect test "Validate that
# a job is held and reason is set to launch failed requeued held when the prolog fails").
sed -i 's/^on_failure = requeue/on_failure = drain/' "$CH$R/etc/slurm/hookrun.conf"
j=$(submit high)
drained() { case "$(node_state)" in drain*) return 0;; *) return 1;; esac; }
poll 60 "node drained" drained
check "drain policy: the reason names the hook and its cause" eq "$(node_reason)" "hookrun: prolog 60-scratch: scratch not mounted"
poll 30 "job $j requeued and held" held "$j"
check "drain policy: Slurm's reason for the held job" bash -c "[[ \"$(slurm_cmd /usr/bin/scontrol show job -o "$j")\" == *'Reason=launch_failed_requeued_held'* ]]"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
rm -f "$CH$R/etc/slurm/prolog.d/60-scratch"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
poll 30 "health resumed the node the Prolog drained" ctl_idle
sed -i 's/^on_failure = drain/on_failure = requeue/' "$CH$R/etc/slurm/hookrun.conf"

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
# Under hookrun's built-in defaults (on_failure = drain): qoslane's Prolog refuses the job (exit
# 100, the node restored, the reason on its stdout); hookrun puts the reason in the job's
# AdminComment and requeues it: pending again, not held (issue 34 item 2; before, requeuehold
# left it held for ever), and the node stays in service. An srun cannot be requeued ("Only batch
# jobs"): its task fails with the reason, srun prints it, and the node is not drained (item 3;
# before, the Prolog failed and the node drained).
set_fabric "$R" reversed
sed -i '/^on_failure = /d' "$CH$R/etc/slurm/hookrun.conf"
out=$(slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health 2>&1 || true)
check "drift: health does not drain (a level the fabric does not carry is a warning)" eq "$(node_state)" idle
refused_why="qoslane: level mission-critical (QoS mission-critical) refused on $NODE: "
j=$(submit mission-critical --comment mine)
poll 60 "job $j requeued, pending" requeued "$j"
show=$(slurm_cmd /usr/bin/scontrol show job -o "$j")
check "refusal under the defaults: requeued, pending, not held ($(grep -o 'Reason=[^ ]*' <<<"$show"))" not_held "$show"
check "refusal: the job's AdminComment says why" has_text "$show" "AdminComment=$refused_why"
check "refusal: the user's own Comment is not touched" has_text "$show" " Comment=mine"
check "refusal under the defaults: the node stays in service" eq "$(node_state)" idle
check "refusal: counted in hookrun's textfile" grep -Eq 'hookrun_hook_runs_total\{phase="prolog",hook="10-qoslane",outcome="refused"\} [1-9]' "$CH$R/var/lib/prometheus/node-exporter/hookrun.prom"
check "fail_job on misaligned fabric: audit failed" eq "$(audit_of "$R" "$j" prolog outcome)" failed
check "fail_job: error names SL/VL" grep -q 'SL 3 -> VL 4, want VL 3' "$CH$R/var/log/qoslane/audit.jsonl"
check "fail_job: node untouched" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
rc=0; out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=mission-critical /bin/echo ran-the-task 2>&1) || rc=$?
check "srun refused: srun fails ($rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "srun refused: srun prints the reason" has_text "$out" "$refused_why"
check "srun refused: the task never ran" lacks_text "$out" "ran-the-task"
say "  srun said: $(tr '\n' '|' <<<"$out")"
not_completing() { [ "$(node_state)" != completing ]; }
poll 30 "srun refused: the job's Epilog done" not_completing
check "srun refused: the node is not drained" eq "$(node_state)" idle
no_refusal_left() { local f; for f in "$CH$R"/run/qoslane/notices/*.refused; do [ ! -e "$f" ] || return 1; done; }
poll 30 "srun refused: its Epilog removed the refusal" no_refusal_left
j=$(submit high)
poll 60 "job $j running on the baseline" is_running "$j"
check "drift: a continue job runs without its SL" eq "$(env_of "$j" UCX_IB_SL)" ""
check "drift: and its output says why (TaskProlog print)" grep -q "^qoslane: QoS high: level high was not granted (fabric check: .*SL 2 -> VL" "$CH$WORK/slurm-$j.out"
release "$j"; poll 60 "job $j done" is_gone "$j"
set_fabric "$R" identity
printf 'on_failure = requeue\n' >> "$CH$R/etc/slurm/hookrun.conf"

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

say "case: the QoS cannot be learnt (squeue slower than half the deadline): on_unknown_qos decides, the job is told"
# Issue 23 item 3. Before 26.05 the Prolog asks squeue; the node's site options file (qoslane
# reads <root>/etc/default/qoslane itself) points it at one that never answers in time.
if [ "$QSRC" = squeue ]; then
  printf '#!/bin/sh\nexec /bin/sleep 30\n' > "$CH$R/bin/squeue-slow"; chmod 0755 "$CH$R/bin/squeue-slow"
  install -d -m 0755 "$CH$R/etc/default"
  printf 'QOSLANE_SQUEUE=%s\n' "$R/bin/squeue-slow" > "$CH$R/etc/default/qoslane"
  chmod 0644 "$CH$R/etc/default/qoslane"
  cp "$CH$R/etc/qoslane/qos-network.yml" "$CH$WORK/mapping.good"
  sed -i '1i on_unknown_qos: fail_job' "$CH$R/etc/qoslane/qos-network.yml"
  j=$(submit high)
  poll 60 "job $j requeued, pending" requeued "$j"
  check "unknown QoS, fail_job: the job is refused, pending again, not held" not_held "$(slurm_cmd /usr/bin/scontrol show job -o "$j")"
  check "unknown QoS, fail_job: the node stays in service" eq "$(node_state)" idle
  check "unknown QoS, fail_job: the audit says why" grep -q "\"job_id\":$j,.*on_unknown_qos: fail_job refuses the job" "$CH$R/var/log/qoslane/audit.jsonl"
  check "unknown QoS: counted (qoslane_qos_fallbacks_total{reason=squeue_slow})" \
    grep -Eq '^qoslane_qos_fallbacks_total\{reason="squeue_slow"\} [1-9]' "$CH$R/var/lib/prometheus/node-exporter/qoslane.prom"
  slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
  cp "$CH$WORK/mapping.good" "$CH$R/etc/qoslane/qos-network.yml"
  j=$(submit high)
  poll 60 "job $j running at the default level" is_running "$j"
  check "unknown QoS, default_level: the job runs at the default level" eq "$(env_of "$j" QOSLANE_LEVEL)" normal
  check "unknown QoS, default_level: its output says so" grep -q "^qoslane: QoS unknown (squeue: .*): the job runs at the default level normal" "$CH$WORK/slurm-$j.out"
  release "$j"; poll 60 "job $j done" is_gone "$j"
  rm -f "$CH$R/etc/default/qoslane" "$CH$R/bin/squeue-slow"
else
  say "  (Slurm $SLURM_VERSION gives the Prolog the job's QoS from its credential: squeue is never asked)"
fi

say "case: an HCA port that should be ACTIVE is DOWN: health drains with the reason, then resumes"
echo "1: DOWN" > "$CH$R/sys/class/infiniband/mlx5_0/ports/1/state"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health >/dev/null 2>&1 || true
poll 10 "health drained the node" drained
check "port down: drain reason names the port" bash -c "[[ \"$(node_reason)\" == 'hookrun: 10-qoslane: qoslane: mlx5_0/1: not ACTIVE'* ]]"
echo "4: ACTIVE" > "$CH$R/sys/class/infiniband/mlx5_0/ports/1/state"
slurm_cmd env SLURMD_NODENAME="$NODE" "$R/bin/hookrun" health > "$CH$WORK/health-up.out" 2>&1 || true
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

say "case: as shipped: slurm.conf's hookrun is qoslane's entry, its hooks built in (one program start per hook)"
# The packaged layout: the entry a link to qoslane named hookrun, qoslane's Prolog and Epilog hooks
# links to the binary (run built in, in a fork of the entry); the TaskProlog's hook stays a script
# (its own --root: the job user's environment is not trusted) and the site's Epilog hook is a
# script: both started as before. Under strace where the node has it: the programs each hook
# phase starts, counted.
cp "$CH$R/bin/hookrun" "$CH$WORK/hookrun.plain"
cp -P "$CH$R/etc/slurm/prolog.d/10-qoslane" "$CH$WORK/prolog-10-qoslane"
cp -P "$CH$R/etc/slurm/epilog.d/10-qoslane" "$CH$WORK/epilog-10-qoslane"
STRACE=""; [ -x "$CH/usr/bin/strace" ] && STRACE="/usr/bin/strace -f -qq -e trace=execve -o $R/out/strace.\$SLURM_SCRIPT_CONTEXT.\$\$"
rm -f "$CH$R"/out/strace.*
node_hooks_shipped "$R" "$STRACE"
j=$(submit high)
poll 60 "job $j running" is_running "$j"
check "as shipped: high job UCX_IB_SL=2 (the TaskProlog's exports through the entry)" eq "$(env_of "$j" UCX_IB_SL)" 2
check "as shipped: high's setting in force" eq "$(settings)" "$BASE_TOS 8388608"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 10 "epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" = reverted
check "as shipped: audit prolog applied, epilog reverted" eq \
  "$(audit_of "$R" "$j" prolog outcome)/$(audit_of "$R" "$j" epilog outcome)" applied/reverted
check "as shipped: the site's Epilog hook ran" grep -qx "$j" "$CH$R/out/logout_user.log"
check "as shipped: baseline after it ends" eq "$(settings)" "$BASE_TOS $BASE_RMEM"
if [ -n "$STRACE" ]; then
  execs() { cat "$CH$R/out/strace.$1".* 2>/dev/null | grep -E 'execve\(.* = 0$' | sed -E 's/^[0-9]+ +execve\("([^"]*)".*/\1/'; }
  # (and squeue, which qoslane asks for the QoS where this Slurm gives the Prolog none: $QSRC)
  sq=""; [ "$QSRC" = squeue ] && sq="/usr/bin/squeue "
  check "as shipped: the Prolog started the entry${sq:+ and squeue}, no second program; qoslane's hook ran built in" eq \
    "$(execs prolog_slurmd | tr '\n' ' ')" "$R/bin/entry/hookrun $sq"
  check "as shipped: the Epilog started the entry and the site's script only" eq \
    "$(execs epilog_slurmd | sort | tr '\n' ' ')" "$R/bin/entry/hookrun $R/etc/slurm/epilog.d/90-logout_user.sh "
  check "as shipped: the TaskProlog's script hook was started (a plain hook still runs)" bash -c \
    "$(declare -f execs); CH='$CH' R='$R'; execs prolog_task | grep -qx '$R/etc/slurm/task-prolog.d/10-qoslane'"
else
  say "  (no strace in $SLURM_SUITE: the programs each hook starts are not counted here)"
fi
mv "$CH$WORK/hookrun.plain" "$CH$R/bin/hookrun"
mv "$CH$WORK/prolog-10-qoslane" "$CH$R/etc/slurm/prolog.d/10-qoslane"
mv "$CH$WORK/epilog-10-qoslane" "$CH$R/etc/slurm/epilog.d/10-qoslane"

check "the node ends idle" eq "$(node_state)" idle
check "no job record left on the node" eq "$(ls "$CH$R/run/qoslane/jobs")" ""
say "summary (Slurm $SLURM_VERSION): $E2E_PASSED passed, $E2E_FAILED failed"
echo "slurm-$SLURM_VERSION: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
