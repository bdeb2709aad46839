#!/usr/bin/env bash
# slurm_nodes.sh — qoslane under hookrun on a real 4-node Slurm cluster on one host: the chroot
# rig's four slurmd (`slurmd -N NAME`, a port each), each node with its own qoslane root, its own
# settings and its own HCA of one simulated fabric: the host's rigs/fabric_path_rig.sh (ibsim +
# OpenSM), node K of the cluster its HCA nodeK, queried by the chroot's own smpquery through the
# simulator's preload (rigs/smpquery-sim; ibsim's sockets are abstract, and a chroot shares the
# host's network namespace). The ports' sysfs (state, rate) is the fixture tree of
# scripts/lib/node.sh: ibsim has none. One Prolog for all (WORK/dispatch/bin/hookrun) picks the
# node's root by SLURMD_NODENAME, as a site's wrapper would pick per-node configuration. Bounded
# polls, no guessed sleeps. Leaves both rigs stopped.
#
#   tests/e2e/slurm_nodes.sh [--slurm VERSION|SUITE]   (or SLURM_VERSION=...; a chroot's row of
#                                                       rigs/slurm_versions.tsv; default the newest)
set -euo pipefail
# shellcheck source=../../rigs/slurm_versions.sh
. "$(dirname "$0")/../../rigs/slurm_versions.sh"
export SLURM_VERSION=${SLURM_VERSION:-$(slurm_newest chroot)}
if [ "${1:-}" = --slurm ]; then SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"
[ -n "$CH" ] || { say "several nodes need a chroot rig ($(slurm_versions chroot | paste -sd ' ')), not the host's $SLURM_VERSION"; exit 2; }

NN=4
WORK=$(e2e_workdir qoslane-e2e-nodes)
nodes_cleanup() {
  local rc=$?
  set +e   # a failing step of the cleanup must not end it before the rig is stopped
  fabric_stop
  e2e_cleanup "$rc"
}
trap nodes_cleanup EXIT
say "Slurm $SLURM_VERSION ($SLURM_SUITE), $NN nodes: the Prolog's QoS source should be $QSRC"
e2e_mapping "$CH$WORK/mapping.yml"

build_release
e2e_binaries
# each node its own root and its own HCA of the multi-switch fabric (tests/e2e/lib.sh)
fabric_nodes "$NN"
check "fabric: each node reads its own simulated HCA from inside the chroot (SL n -> VL n)" \
  eq "$(for n in "${names[@]}"; do printf '%s=%s ' "$n" "$(sl2vl_of "$n")"; done)" \
  "$(for n in "${names[@]}"; do printf '%s=0|1|2|3|4|5|6|7 ' "$n"; done)"
dispatch_hooks
say "starting the $NN-node Slurm rig"
start_slurm "$WORK/dispatch" "$NN"
read -r -a nodes <<< "$NODES"
check "$NN nodes, all idle" eq "$(slurm_cmd /usr/bin/sinfo -h -N -o %T | sort | uniq -c | tr -s ' ')" " $NN idle"
settings_of() { local r; r=$CH$(root_of "$1"); echo "$(cat "$r$TOS") $(cat "$r$RMEM")"; }
all_settings() { local n; for n in "${nodes[@]}"; do settings_of "$n"; done | sort | uniq -c | tr -s ' '; }
audit_n() { audit_of "$(root_of "$1")" "$2" "$3" "$4"; }  # audit_n NODE JOB EVENT FIELD
# every node's audit FIELD of JOB's EVENT, one "node=value" a node
audits() { local n; for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$(audit_n "$n" "$1" "$2" "$3")"; done; }
same_on_all() { local want=$1 n out=""; shift; for n in "${nodes[@]}"; do out+="$n=$want "; done; echo "$out"; }
# epilogs_done JOB [NODE...]: every node's (or the named nodes') Epilog of JOB has audited
epilogs_done() { local j=$1 n; shift; [ $# -gt 0 ] || set -- "${nodes[@]}"; for n in "$@"; do [ "$(audit_n "$n" "$j" epilog outcome)" != "<none>" ] || return 1; done; }
records_left() { local n; for n in "${nodes[@]}"; do ls "$CH$(root_of "$n")/run/qoslane/jobs"; done; }

# A batch script that starts one task per node (each dumps its environment), then waits.
nodes_script() {
  local f=$WORK/nodes-job.sh
  cat > "$CH$f" <<EOS
#!/bin/sh
/usr/bin/srun --ntasks-per-node=1 -N\$SLURM_JOB_NUM_NODES /bin/sh -c 'env | sort > $WORK/\$SLURM_JOB_ID.\$SLURMD_NODENAME.env'
env | sort > $WORK/\$SLURM_JOB_ID.env
i=0; while [ ! -e $WORK/release.\$SLURM_JOB_ID ] && [ ! -e $WORK/release.all ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
EOS
  chmod 0755 "$CH$f"; echo "$f"
}
task_env() { grep "^$3=" "$CH$WORK/$1.$2.env" | head -1 | cut -d= -f2-; }  # task_env JOB NODE VAR
tasks_of() { local n out=""; for n in "${nodes[@]}"; do out+="$n=$(task_env "$1" "$n" "$2") "; done; echo "$out"; }

# ------------------------------------------------------------ sbatch -N4: one SL on every node
say "case: sbatch -N$NN --qos=high: SL 2 and high's settings on every node"
j=$(slurm_cmd /usr/bin/sbatch --parsable -N"$NN" --qos=high -o "$WORK/slurm-%j.out" "$(nodes_script)")
poll 60 "job $j running" is_running "$j"
check "sbatch -N$NN: every node's task has UCX_IB_SL=2" eq "$(tasks_of "$j" UCX_IB_SL)" "$(same_on_all 2)"
check "sbatch -N$NN: every node's task has QOSLANE_LEVEL=high" eq "$(tasks_of "$j" QOSLANE_LEVEL)" "$(same_on_all high)"
check "sbatch -N$NN: each task ran on its own node" eq "$(tasks_of "$j" SLURMD_NODENAME)" "$(for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$n"; done)"
check "sbatch -N$NN: high's rmem_max on every node while it runs" eq "$(all_settings)" " $NN $BASE_TOS 8388608"
check "sbatch -N$NN: every node's Prolog granted high from $QSRC" eq "$(audits "$j" prolog qos_source)/$(audits "$j" prolog outcome)" "$(same_on_all "$QSRC")/$(same_on_all applied)"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 20 "every node's Epilog audited" epilogs_done "$j"
check "sbatch -N$NN: every node's Epilog reverted" eq "$(audits "$j" epilog outcome)" "$(same_on_all reverted)"
check "sbatch -N$NN: baseline on every node after it" eq "$(all_settings)" " $NN $BASE_TOS $BASE_RMEM"

# ------------------------------------------------------------ srun -N2
say "case: srun -N2 --qos=low: SL 1 on both nodes"
out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun -N2 --qos=low --ntasks-per-node=1 -l /usr/bin/env)
check "srun -N2: two tasks, two nodes" eq "$(printf '%s\n' "$out" | sed -n 's/^[01]: SLURMD_NODENAME=//p' | sort -u | wc -l)" 2
check "srun -N2: UCX_IB_SL=1 in both tasks" eq "$(printf '%s\n' "$out" | sed -n 's/^\([01]\): UCX_IB_SL=/\1=/p' | sort | paste -sd ' ')" "0=1 1=1"
check "srun -N2: QOSLANE_LEVEL=low in both tasks" eq "$(printf '%s\n' "$out" | sed -n 's/^\([01]\): QOSLANE_LEVEL=/\1=/p' | sort | paste -sd ' ')" "0=low 1=low"
# srun returns when its tasks end; slurmd runs the Epilogs after that, so wait for them
j=$(printf '%s\n' "$out" | sed -n 's/^0: SLURM_JOB_ID=//p')
read -r -a ran <<< "$(printf '%s\n' "$out" | sed -n 's/^[01]: SLURMD_NODENAME=//p' | sort -u | paste -sd ' ')"
poll 20 "srun -N2's Epilogs audited" epilogs_done "$j" "${ran[@]}"
check "srun -N2: no job record left on any node" eq "$(records_left)" ""

# ------------------------------------------------------------ a heterogeneous job
say "case: a heterogeneous job, components high and low: each node its own component's level"
# issue 24 (suspected case, confirmed on 22.05 and 24.11): `squeue -j LEADER` lists every component
# with its own QoS, and a het step's tasks carry the leader's SLURM_JOB_ID (and SLURM_JOB_QOS)
# whatever their component; each component's Prolog runs with its own id.
het=$WORK/het-job.sh
cat > "$CH$het" <<EOS
#!/bin/sh
/usr/bin/srun --het-group=0,1 /bin/sh -c 'env | sort > $WORK/het.\$SLURMD_NODENAME.env'
i=0; while [ ! -e $WORK/release.\$SLURM_JOB_ID ] && [ ! -e $WORK/release.all ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
EOS
chmod 0755 "$CH$het"
j=$(slurm_cmd /usr/bin/sbatch --parsable -o "$WORK/slurm-%j.out" --qos=high -N1 : --qos=low -N1 "$het")
het_tasks() { [ "$(find "$CH$WORK" -maxdepth 1 -name 'het.*.env' | wc -l)" = 2 ]; }
poll 60 "het job $j: a task on each component's node" het_tasks
# "ID NODE" per component, the leader first
mapfile -t comps < <(slurm_cmd /usr/bin/squeue -h -j "$j" -o '%A %N' | sort -n)
want_level=(high low) want_sl=(2 1) got="" want=""
for k in 0 1; do
  read -r cid cnode <<< "${comps[k]}"
  got+="$cnode:$(audit_n "$cnode" "$cid" prolog qos)/$(grep '^QOSLANE_LEVEL=' "$CH$WORK/het.$cnode.env" | cut -d= -f2)/$(grep '^UCX_IB_SL=' "$CH$WORK/het.$cnode.env" | cut -d= -f2) "
  want+="$cnode:${want_level[k]}/${want_level[k]}/${want_sl[k]} "
done
check "het job: each component's Prolog granted its own QoS, each node's task exports its component's level and SL" eq "$got" "$want"
release "$j"; poll 60 "het job $j done" is_gone "$j"
poll 20 "het job: every record released" test -z "$(records_left)"
rm -f "$CH$WORK"/het.*.env

# ------------------------------------------------------------ one node's port misaligned
bad=${nodes[2]}
say "case: $bad's port misaligned (SL 3 -> VL 4, SL 2 -> VL 5: SMP Sets behind the SM): a fail_job level on $NN nodes"
bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$(hca_of "$bad")" 0 3 4 >/dev/null
bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$(hca_of "$bad")" 0 2 5 >/dev/null
check "misaligned: $bad's own smpquery reads the new table" eq "$(sl2vl_of "$bad")" "0|1|5|4|4|5|6|7"
health_of "$bad"   # the periodic health check sees the SM's re-sweep (and refreshes the probe)
check "misaligned: health keeps $bad in service (a level it cannot carry is a warning)" eq "$(node_state_of "$bad")" idle
j=$(slurm_cmd /usr/bin/sbatch --parsable -N"$NN" --qos=mission-critical -o "$WORK/slurm-%j.out" "$(nodes_script)")
poll 60 "job $j requeued, pending" requeued "$j"
poll 20 "every node's Epilog ran" epilogs_done "$j"
got=$(audits "$j" prolog outcome)
want=""; for n in "${nodes[@]}"; do if [ "$n" = "$bad" ]; then want+="$n=failed "; else want+="$n=applied "; fi; done
check "misaligned: $bad refused mission-critical, the other nodes granted it" eq "$got" "$want"
want=""; for n in "${nodes[@]}"; do if [ "$n" = "$bad" ]; then want+="$n=unchanged "; else want+="$n=reverted "; fi; done
check "misaligned: each node's Epilog undid what its own Prolog did" eq "$(audits "$j" epilog outcome)" "$want"
check "misaligned: $bad's audit names its lane" grep -q 'SL 3 -> VL 4, want VL 3' "$CH$(root_of "$bad")/var/log/qoslane/audit.jsonl"
check "misaligned: the whole job is requeued, not held (one node's Prolog decides for all)" not_held "$(slurm_cmd /usr/bin/scontrol show job -o "$j")"
# Slurm starts the batch script on the batch host once that host's Prolog is done, so it can run
# for a few milliseconds before the refusing node's requeue lands (seen on 24.11: 34 ms). What
# holds is that no step ran: a step needs every node's Prolog, and the refusing node requeues first.
check "misaligned: no step of the job ran on any node" eq "$(cd "$CH$WORK" && ls -- "$j".*.env 2>/dev/null)" ""
check "misaligned: every node's Epilog restored its own state (baseline everywhere)" eq "$(all_settings)" " $NN $BASE_TOS $BASE_RMEM"
check "misaligned: no job record left on any node" eq "$(records_left)" ""
check "misaligned: no node drained (a refused level is the job's, not the node's)" eq "$(slurm_cmd /usr/bin/sinfo -h -N -o %T | sort | uniq -c | tr -s ' ')" " $NN idle"
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
say "case: the same job at a continue level runs on all $NN nodes, $bad without its SL"
j=$(slurm_cmd /usr/bin/sbatch --parsable -N"$NN" --qos=high -o "$WORK/slurm-%j.out" "$(nodes_script)")
poll 60 "job $j running" is_running "$j"
want=""; for n in "${nodes[@]}"; do if [ "$n" = "$bad" ]; then want+="$n= "; else want+="$n=2 "; fi; done
check "misaligned, continue: SL 2 on the aligned nodes, none on $bad" eq "$(tasks_of "$j" UCX_IB_SL)" "$want"
release "$j"; poll 60 "job $j done" is_gone "$j"
poll 20 "every node's Epilog ran" epilogs_done "$j"
bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$(hca_of "$bad")" 0 3 3 >/dev/null
bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$(hca_of "$bad")" 0 2 2 >/dev/null
health_of "$bad"

# ------------------------------------------------------------ the first switch drops a level
# Issue 23: the node's own port carries the level, the leaf it is cabled to does not. health
# records the level's grant (refused); the next Prolog of the level obeys it; hookrun requeues the
# job, not held (exit 100: refuse the job, the node is fine), and the node stays in service.
fh=${nodes[2]}
leaf=$(leaf_of "$fh")
say "case: $leaf, $fh's first switch, drops SL 3 toward the spines (SL 3 -> VL 15, SMP Sets behind the SM)"
leaf_sl "$leaf" 3 15
check "first hop: $fh's own port still maps SL n -> VL n" eq "$(sl2vl_of "$fh")" "0|1|2|3|4|5|6|7"
health_of "$fh"
check "first hop: health keeps $fh in service" eq "$(node_state_of "$fh")" idle
prom_of() { cat "$CH$(root_of "$1")/var/lib/prometheus/node-exporter/qoslane.prom"; }
check "first hop: $fh's metrics say mission-critical is not granted, high is" bash -c \
  "grep -qx 'qoslane_level_granted{level=\"mission-critical\"} 0' <<<\"\$1\" && grep -qx 'qoslane_level_granted{level=\"high\"} 1' <<<\"\$1\"" _ "$(prom_of "$fh")"
j=$(slurm_cmd /usr/bin/sbatch --parsable -N1 -w "$fh" --qos=mission-critical -o "$WORK/slurm-%j.out" "$(nodes_script)")
poll 60 "job $j requeued, pending" requeued "$j"
check "first hop: $fh refused the job (its Prolog's audit)" eq "$(audit_n "$fh" "$j" prolog outcome)" failed
check "first hop: ... naming the leaf's lane" grep -q "first hop: SL 3 -> VL 15" "$CH$(root_of "$fh")/var/log/qoslane/audit.jsonl"
check "first hop: the job is pending again, not held" not_held "$(slurm_cmd /usr/bin/scontrol show job -o "$j")"
check "first hop: no step ran" eq "$(cd "$CH$WORK" && ls -- "$j".*.env 2>/dev/null)" ""
check "first hop: $fh stays in service (a refusal is the job's, not the node's)" eq "$(node_state_of "$fh")" idle
slurm_cmd /usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"
leaf_sl "$leaf" 3 3
health_of "$fh"
check "first hop: repaired, health grants mission-critical again" bash -c \
  "grep -qx 'qoslane_level_granted{level=\"mission-critical\"} 1' <<<\"\$1\"" _ "$(prom_of "$fh")"

# ------------------------------------------------------------ only the node that must go
down=${nodes[3]}
say "case: $down's HCA port DOWN: health drains $down only"
echo "1: DOWN" > "$CH$(root_of "$down")/sys/class/infiniband/mlx5_0/ports/1/state"
for n in "${nodes[@]}"; do health_of "$n"; done
drained_of() { case "$(node_state_of "$1")" in drain*) return 0 ;; *) return 1 ;; esac; }
poll 10 "health drained $down" drained_of "$down"
want=""; for n in "${nodes[@]}"; do if [ "$n" = "$down" ]; then want+="$n=drained "; else want+="$n=idle "; fi; done
check "port down: $down drained, the others in service" eq "$(for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$(node_state_of "$n")"; done)" "$want"
check "port down: the reason names $down's port" bash -c "[[ \"$(node_reason_of "$down")\" == 'hookrun: 10-qoslane: qoslane: mlx5_0/1: not ACTIVE'* ]]"
j=$(slurm_cmd /usr/bin/sbatch --parsable -N$((NN - 1)) --qos=high -o "$WORK/slurm-%j.out" "$(nodes_script)")
poll 60 "job $j running on the $((NN - 1)) nodes in service" is_running "$j"
check "port down: a -N$((NN - 1)) job runs, not on $down" eq "$(slurm_cmd /usr/bin/squeue -h -j "$j" -o %N)" "$(slurm_cmd /usr/bin/scontrol show hostlist "$(printf '%s,' "${nodes[@]:0:NN-1}" | sed 's/,$//')")"
release "$j"; poll 60 "job $j done" is_gone "$j"
echo "4: ACTIVE" > "$CH$(root_of "$down")/sys/class/infiniband/mlx5_0/ports/1/state"
health_of "$down"
idle_of() { [ "$(node_state_of "$1")" = idle ]; }
poll 30 "health resumed $down" idle_of "$down"

calls() { local n; for n in "${names[@]}"; do printf '%s=%s ' "$n" "$(grep -c -- '-C mlx5_0' "$CH$WORK/sim/$n.calls" 2>/dev/null || echo 0)"; done; }
check "fabric: every node's Prologs and health checks asked its own HCA (calls per node: $(calls))" \
  bash -c "! printf '%s' '$(calls)' | grep -qE '=0( |$)'"
check "all $NN nodes end idle" eq "$(slurm_cmd /usr/bin/sinfo -h -N -o %T | sort | uniq -c | tr -s ' ')" " $NN idle"
check "no job record left on any node" eq "$(records_left)" ""
check "baseline on every node" eq "$(all_settings)" " $NN $BASE_TOS $BASE_RMEM"
say "summary (Slurm $SLURM_VERSION, $NN nodes): $E2E_PASSED passed, $E2E_FAILED failed"
echo "slurm-$SLURM_VERSION-${NN}nodes: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
