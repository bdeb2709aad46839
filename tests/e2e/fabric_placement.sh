#!/usr/bin/env bash
# fabric_placement.sh — issue 34's "done when", the whole chain on real Slurm: the multi-switch
# simulated fabric (rigs/fabric_path_rig.sh: 3 leaves, 2 spines, 6 HCAs, a real OpenSM), the
# chroot rig's 4 slurmd, each node its own qoslane root on its own HCA (tests/e2e/lib.sh's
# fabric_nodes: nodes 1-2 under leaf1, 3-4 under leaf2), slurm.conf's part and job_submit.lua as
# `qoslane slurm-config --output /etc/slurm` writes them (Include'd), placement on in every node's
# site options (QOSLANE_SCONTROL). The health check is what slurmd runs as HealthCheckProgram (the
# nodes' hookrun, no argument, SLURMD_NODENAME set), called here once per node and step, one node
# after the other (health_round), each bounded: a round stands for one HealthCheckInterval. Not
# slurmd's own timer: the simulated fabric is one ibsim serving every HCA through one slot lock, so
# four health runs at once (HealthCheckNodeState=ANY starts them together) queue behind each other
# and run out of the 3 s every hook of the node layout has (seen: every run 3.0 s, the placement
# send and the node settings' checks cut off, grants flapping) — the rig's contention, not a
# node's (a real node reads its own HCA). So "within one health interval" is checked as "by the
# first health run after the drop", and nothing but the health runs and the fabric is touched:
# no node's features are set by the suite, no job is released or resumed by it.
#
# Cases: leaf1 drops mission-critical -> its nodes lose the level's feature by their next health
# run -> batch, srun and two-node jobs of the level run under leaf2, none held or refused, no node
# drained; the controller's requests counted with sdiag over health runs that change nothing and
# over the change; every node loses it -> a job pends with Slurm's reason in squeue and runs once
# leaf2 is repaired; leaf1 repaired -> a four-node job runs on leaf1's nodes too; placement off on
# the nodes -> a job placed on a node that refuses it is requeued (not held, the reason in its
# AdminComment) and runs by itself once the leaf is repaired; a spine drops it toward leaf2 ->
# the fabric audit (on the host) writes its verdict where every node reads it -> leaf2's nodes
# lose the feature at their next health run, jobs run under leaf1; repaired -> the next audit
# gives it back (spine_case). Bounded polls, no guessed sleeps; ~3 minutes. Leaves both rigs
# stopped.
#
#   tests/e2e/fabric_placement.sh [--slurm VERSION|SUITE]   (or SLURM_VERSION=...; a chroot's
#                                                            row of rigs/slurm_versions.tsv;
#                                                            default the newest)
set -euo pipefail
# shellcheck source=../../rigs/slurm_versions.sh
. "$(dirname "$0")/../../rigs/slurm_versions.sh"
export SLURM_VERSION=${SLURM_VERSION:-$(slurm_newest chroot)}
if [ "${1:-}" = --slurm ]; then SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"
[ -n "$CH" ] || { say "four nodes need a chroot rig ($(slurm_versions chroot | paste -sd ' ')), not the host's $SLURM_VERSION"; exit 2; }

NN=4
MC=qoslane_mission-critical    # the level's node feature (qoslane slurm-config)
WORK=$(e2e_workdir qoslane-e2e-fabric-placement)
ETC=$CH/etc/slurm
fp_cleanup() {
  local rc=$?
  e2e_cleanup "$rc"
  fabric_stop
  rm -f "$ETC/job_submit.lua" "$ETC/qoslane.conf"
}
trap fp_cleanup EXIT
say "Slurm $SLURM_VERSION ($SLURM_SUITE), $NN nodes on the multi-switch fabric, placement on"
e2e_mapping "$CH$WORK/mapping.yml"
build_release
HOST_QL=$QL   # the fabric audit runs on the host (the SM's / a service host), not in the chroot
# What slurmctld needs, from the mapping, where an admin puts it (the placeholders: as many as
# the largest job below asks nodes, each as big as a node)
"$QL" slurm-config --config "$CH$WORK/mapping.yml" --placeholders "$NN" --cpus 2 --memory 1000 --output "$ETC" >/dev/null
check "qoslane slurm-config wrote qoslane.conf and job_submit.lua into the chroot's /etc/slurm" \
  test -s "$ETC/qoslane.conf" -a -s "$ETC/job_submit.lua"
e2e_binaries
fabric_nodes "$NN"
# placement on a node: QOSLANE_SCONTROL in its site options (the admin guide's §11 file)
placement() {
  local n f
  for n in "${names[@]}"; do
    f=$CH$(root_of "$n")/etc/default/qoslane
    if [ "$1" = on ]; then
      install -d -m 0755 "$(dirname "$f")"; printf 'QOSLANE_SCONTROL=/usr/bin/scontrol\n' > "$f"
      [ -z "${VERDICT:-}" ] || printf 'QOSLANE_FABRIC_VERDICT=%s\n' "$VERDICT" >> "$f"
    else rm -f "$f"; fi
  done
}
placement on
dispatch_hooks
export E2E_EXTRA_CONF="Include /etc/slurm/qoslane.conf"
say "starting the $NN-node Slurm rig"
start_slurm "$WORK/dispatch" "$NN"
read -r -a nodes <<< "$NODES"
L1=$(leaf_of "${nodes[0]}") L2=$(leaf_of "${nodes[2]}")
under() { local n; for n in "${nodes[@]}"; do [ "$(leaf_of "$n")" != "$1" ] || printf '%s ' "$n"; done; }
read -r -a N1 <<< "$(under "$L1")"
read -r -a N2 <<< "$(under "$L2")"
check "the fabric: ${N1[*]} under $L1, ${N2[*]} under $L2" eq "$L1:${#N1[@]} $L2:${#N2[@]}" "leaf1:2 leaf2:2"

sc() { slurm_cmd /usr/bin/scontrol "$@"; }
active_of() { slurm_cmd /usr/bin/sinfo -h -N -n "$1" -o %b; }
has_mc() { case ",$1," in *",$MC,"*) return 0 ;; esac; return 1; }
# features: "node=yes|no" per node, whether slurmctld lists the level's feature active
features() { local n; for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$(has_mc "$(active_of "$n")" && echo yes || echo no)"; done; }
want_features() { local n; for n in "${nodes[@]}"; do case " $* " in *" $n "*) printf '%s=yes ' "$n" ;; *) printf '%s=no ' "$n" ;; esac; done; }
# what a node last sent (its /run/qoslane/placement.json), read on its disk: no request to slurmctld
sent_of() {
  python3 -c 'import json, sys; print(",".join(json.load(open(sys.argv[1]))["active"]))' \
    "$CH$(root_of "$1")/run/qoslane/placement.json" 2>/dev/null
}
sent_with() { local n; for n in "$@"; do has_mc "$(sent_of "$n")" || return 1; done; }
sent_without() { local n s; for n in "$@"; do s=$(sent_of "$n"); [ -n "$s" ] && ! has_mc "$s" || return 1; done; }
# health_round [NODE...] : one health interval: every node's (or the named nodes') health check,
# one after the other
health_round() { local n; [ $# -gt 0 ] || set -- "${nodes[@]}"; for n in "$@"; do health_of "$n"; done; }
# sdiag: the count of one request type since `sdiag -r`; every type seen (sdiag's own aside)
rpc_reset() { slurm_cmd /usr/bin/sdiag -r >/dev/null; }
rpc_count() { slurm_cmd /usr/bin/sdiag | awk -v n="$1" '$1 == n { sub(/.*count:/, ""); c = $1 + 0 } END { print c + 0 }'; }
rpc_all() {
  slurm_cmd /usr/bin/sdiag | awk '$1 ~ /^[A-Z][A-Z_]+$/ && $1 != "REQUEST_STATS_INFO" && /count:/ {
    c = $0; sub(/.*count:/, "", c); printf "%s%s=%d", sep, $1, c + 0; sep = " " }'
}
nodes_of() { slurm_cmd /usr/bin/squeue -h -j "$1" -o %N; }
reason_of() { slurm_cmd /usr/bin/squeue -h -j "$1" -o %r; }
pending_reason() { [ "$(job_state "$1")" = PENDING ] && [ "$(reason_of "$1")" = "$2" ]; }
# in_set NODELIST NODE... : every node of the (compressed) list is one of NODE...
in_set() {
  local list=$1 n; shift
  [ -n "$list" ] || { say "  no node"; return 1; }
  for n in $(sc show hostnames "$list"); do case " $* " in *" $n "*) ;; *) say "  $n not in: $*"; return 1 ;; esac; done
}
hostlist() { local IFS=,; sc show hostlist "$*"; }
release_all() { local j; for j in "$@"; do release "$j"; done; for j in "$@"; do poll 60 "job $j done" is_gone "$j" || return 1; done; }
# no_drain : every node in service (idle, mixed or allocated; none drained, down or failing)
states() { slurm_cmd /usr/bin/sinfo -h -N -o '%N=%T' | sort -u | paste -sd ' '; }
no_drain() { local s; s=$(states); ! grep -qE '=(drain|drng|down|fail)' <<<"$s" || { say "  $s"; return 1; }; }
# none_held : no pending job is held (a reason of a hold, or priority 0)
none_held() {
  local j
  for j in $(slurm_cmd /usr/bin/squeue -h -t PD -o %i); do not_held "$(sc show job -o "$j")" || return 1; done
}
# prolog_of NODE JOB : the outcome of JOB's Prolog on NODE (<none> when it never ran there)
prolog_of() { audit_of "$(root_of "$1")" "$2" prolog outcome; }
prologs() { local n; for n in "${nodes[@]}"; do printf '%s=%s ' "$n" "$(prolog_of "$n" "$1")"; done; }
T0=$(date +%s)

# ------------------------------------------------------------ boot: every node sends its features
say "case: each node's first health run since boot sends its features"
rpc_reset; health_round
UB=$(rpc_count REQUEST_UPDATE_NODE) ALLB=$(rpc_all)
say "sdiag over $NN first health runs: $ALLB"
check "every node sent its features, the level's among them" sent_with "${nodes[@]}"
check "the first run: 1 REQUEST_UPDATE_NODE per node" eq "$UB" "$NN"
check "slurmctld: every node carries mission-critical" eq "$(features)" "$(want_features "${nodes[@]}")"
check "every node idle" no_drain

# ------------------------------------------------------------ health runs that change nothing
say "case: a health round that changes nothing (sdiag around it)"
rpc_reset; health_round
U0=$(rpc_count REQUEST_UPDATE_NODE) ALL0=$(rpc_all)
say "sdiag over $NN health runs that changed nothing: ${ALL0:-no request}"
check "unchanged: 0 REQUEST_UPDATE_NODE over $NN health runs" eq "$U0" 0
# hookrun's passing check asks slurmctld about the node only when a drain of its own may be in
# place (the first run on a node asks once): no node information read either, nor any job's
check "unchanged: no node, partition or job information read either" \
  eq "$(rpc_count REQUEST_NODE_INFO) $(rpc_count REQUEST_PARTITION_INFO) $(rpc_count REQUEST_JOB_INFO)" "0 0 0"

# ------------------------------------------------------------ leaf1 drops mission-critical
say "case: $L1 drops mission-critical toward the spines (SL 3 -> VL 15, behind the SM): ${N1[*]} lose it"
leaf_sl "$L1" 3 15
rpc_reset; health_round
U1=$(rpc_count REQUEST_UPDATE_NODE) ALL1=$(rpc_all)
say "sdiag over $NN health runs, ${#N1[@]} of which changed a grant: $ALL1"
check "within one health interval: ${N1[*]} sent the level off at their first health run after the drop" sent_without "${N1[@]}"
check "the change: 1 REQUEST_UPDATE_NODE per node whose grant changed (${#N1[@]}), over $NN runs" eq "$U1" "${#N1[@]}"
check "the change: nothing read (the node's own features are known since its first send)" \
  eq "$(rpc_count REQUEST_NODE_INFO) $(rpc_count REQUEST_PARTITION_INFO)" "0 0"
check "slurmctld: only ${N2[*]} carry mission-critical" eq "$(features)" "$(want_features "${N2[@]}")"
check "${N1[*]} stay in service (a level they do not carry is not a drain)" no_drain

say "case: mission-critical jobs (batch, srun, two nodes) run under $L2"
b=$(submit mission-critical)
poll 60 "job $b running" is_running "$b"
check "sbatch --qos=mission-critical: runs on a node under $L2" in_set "$(nodes_of "$b")" "${N2[@]}"
# shellcheck disable=SC2016  # the task's variable
out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=mission-critical -N1 /bin/sh -c 'echo $SLURM_JOB_ID $SLURMD_NODENAME')
s=${out%% *}
check "srun --qos=mission-critical: its task ran on a node under $L2" in_set "${out#* }" "${N2[@]}"
m=$(submit mission-critical -N2)
poll 60 "job $m running" is_running "$m"
check "sbatch -N2 --qos=mission-critical: on both nodes under $L2" eq "$(nodes_of "$m")" "$(hostlist "${N2[@]}")"
check "nothing pending, nothing held" eq "$(slurm_cmd /usr/bin/squeue -h -t PD -o '%i %r')" ""
check "no Prolog of them ran under $L1 (no refusal: Slurm never placed them there)" \
  eq "$(for j in "$b" "$s" "$m"; do for n in "${N1[@]}"; do prolog_of "$n" "$j"; done; done | sort -u | paste -sd ' ')" "<none>"
check "no node drained" no_drain
release_all "$b" "$m"

# ------------------------------------------------------------ no node carries it
say "case: $L2 drops it too: no node carries mission-critical; a job waits, with Slurm's reason"
leaf_sl "$L2" 3 15
health_round
check "${N2[*]} sent the level off" sent_without "${N2[@]}"
check "slurmctld: no node carries mission-critical" eq "$(features)" "$(want_features)"
p=$(submit mission-critical)
check "a mission-critical job is accepted though no node carries the level (the placeholders)" test -n "$p"
poll 30 "job $p pending on ReqNodeNotAvail" pending_reason "$p" "ReqNodeNotAvail, May be reserved for other job"
check "it waits and squeue says why: $(reason_of "$p")" eq "$(reason_of "$p")" "ReqNodeNotAvail, May be reserved for other job"
check "it is not held" not_held "$(sc show job -o "$p")"
n=$(submit normal)
poll 60 "job $n running" is_running "$n"
check "a normal job runs meanwhile (every node in service for the other levels)" eq "$(job_state "$n")" RUNNING
release_all "$n"
check "no node drained" no_drain
say "case: $L2 repaired: the waiting job runs there, nobody touching Slurm"
leaf_sl "$L2" 3 3
health_round
check "the waiting job runs once $L2's nodes carry the level again" poll 60 "job $p running" is_running "$p"
check "... on a node under $L2" in_set "$(nodes_of "$p")" "${N2[@]}"
release_all "$p"

# ------------------------------------------------------------ leaf1 repaired
say "case: $L1 repaired: ${N1[*]} carry the level again, a job runs there"
leaf_sl "$L1" 3 3
health_round
check "${N1[*]} sent the level on" sent_with "${N1[@]}"
check "slurmctld: every node carries mission-critical" eq "$(features)" "$(want_features "${nodes[@]}")"
a=$(submit mission-critical -N"$NN")
poll 60 "job $a running" is_running "$a"
check "sbatch -N$NN --qos=mission-critical (no node named): runs on every node, ${N1[*]} among them" eq "$(nodes_of "$a")" "$(hostlist "${nodes[@]}")"
check "every node's Prolog granted it" eq "$(prologs "$a")" "$(for n in "${nodes[@]}"; do printf '%s=applied ' "$n"; done)"
release_all "$a"

# ------------------------------------------------------------ placement off: a refused job
say "case: placement off on the nodes, $L1 drops the level: a job Slurm places there is refused, requeued, and runs by itself after the repair"
placement off
leaf_sl "$L1" 3 15
health_round
check "placement off: slurmctld still lists the level on ${N1[*]} (nobody tells it)" eq "$(features)" "$(want_features "${nodes[@]}")"
f=$(submit normal -N2 --exclusive -w "$(hostlist "${N2[@]}")")
poll 60 "job $f running on ${N2[*]}" is_running "$f"
r=$(submit mission-critical)
poll 60 "job $r requeued" requeued "$r"
show=$(sc show job -o "$r")
refused_on=""; for n in "${N1[@]}"; do [ "$(prolog_of "$n" "$r")" = failed ] && refused_on=$n; done
check "the job landed under $L1 and its Prolog refused it" test -n "$refused_on"
check "it is pending again, not held" not_held "$show"
check "its AdminComment says why" has_text "$show" "AdminComment=qoslane: "
check "... naming the level" has_text "$(grep -o 'AdminComment=.*' <<<"$show")" mission-critical
check "no node drained by the refusal" no_drain
say "case: $L1 repaired (the fabric only): the job runs by itself"
leaf_sl "$L1" 3 3
health_round
check "the refused job runs, nobody touching Slurm" poll 90 "job $r running" is_running "$r"
check "... under $L1 ($L2's nodes are busy), granted there" eq "$(prolog_of "$(nodes_of "$r")" "$r")" applied
check "... after at least one requeue, never held" bash -c "grep -qE 'Restarts=[1-9]' <<<'$(sc show job -o "$r")'"
release_all "$r" "$f"
check "all $NN nodes end in service" no_drain
check "nothing left pending" eq "$(slurm_cmd /usr/bin/squeue -h -t PD -o %i)" ""

# ------------------------------------------------------------ a spine: the fabric audit's verdict
# spine_case : a spine drops mission-critical toward leaf2 only (each spine's port toward leaf2,
# SL 3 -> VL 15): the nodes' own ports and first hops still carry it; only the fabric audit sees
# the path (issue 34, Build 4). The audit runs on the host, as on the SM's or a service host:
# `qoslane fabric audit --verdict` through the rig's reader (rigs/smpquery-sim as smpquery,
# ibnetdiscover and perfquery, on node5's HCA under leaf3: no node of the cluster's) writes the
# verdict into the chroot's $WORK/fabric (the filesystem every node shares: root's, 0755; the
# file root's, 0644), and every node's site options name it (QOSLANE_FABRIC_VERDICT). Each node's
# HCA shows the simulated HCA's node GUID in its sysfs, so the node finds itself in the verdict
# (lib.sh: verdict_host, fabric_audit, lost_by).
VERDICT=$WORK/fabric/verdict.json
# trusted_verdict : the file as the nodes' trust rules want it (root's, not writable by others)
trusted_verdict() { [ "$(stat -c '%u %a' "$CH$VERDICT")" = "0 644" ] && [ "$(stat -c '%u %a' "$CH$WORK/fabric")" = "0 755" ]; }
spine_case() {
  local sp rc j k
  verdict_host "${nodes[@]}"
  rc=$(fabric_audit)
  check "audit (every level carried): exit 0, the verdict written" eq "$rc:$(lost_by mission-critical)" "0:"
  check "the verdict is root's, 0644, in a directory of root's (the nodes' trust rules)" trusted_verdict
  placement on        # now with QOSLANE_FABRIC_VERDICT=$VERDICT
  health_round
  check "spine: the verdict read, every node still carries the level" eq "$(features)" "$(want_features "${nodes[@]}")"
  say "case: spine1 and spine2 drop mission-critical toward $L2 (SL 3 -> VL 15 on their port 2): only the audit sees it"
  for sp in spine1 spine2; do bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$sp" 2 3 15 >/dev/null; done
  health_round
  check "spine: before the audit, the nodes' own checks see nothing (all still carry it)" \
    eq "$(features)" "$(want_features "${nodes[@]}")"
  rc=$(fabric_audit)
  check "audit: exit 1 (a level not carried), the verdict names $L2's HCAs" eq "$rc:$(lost_by mission-critical)" \
    "1:$(for n in "${N2[@]}"; do printf '%s HCA-1\n' "$(hca_of "$n")"; done | sort | paste -sd ' ')"
  check "the verdict names the spine port" grep -q 'fabric path: spine[12] port 2 -> leaf2: SL 3 -> VL 15' "$CH$VERDICT"
  health_round
  check "spine: ${N2[*]} sent the level off at their first health run after the audit" sent_without "${N2[@]}"
  check "spine: ${N1[*]} still send it" sent_with "${N1[@]}"
  check "spine: slurmctld: only ${N1[*]} carry mission-critical" eq "$(features)" "$(want_features "${N1[@]}")"
  j=$(submit mission-critical)
  poll 60 "job $j running" is_running "$j"
  check "spine: sbatch --qos=mission-critical runs under $L1" in_set "$(nodes_of "$j")" "${N1[@]}"
  # shellcheck disable=SC2016  # the task's variable
  out=$(slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=mission-critical -N1 /bin/sh -c 'echo $SLURM_JOB_ID $SLURMD_NODENAME')
  k=${out%% *}
  check "spine: srun --qos=mission-critical: its task ran under $L1" in_set "${out#* }" "${N1[@]}"
  check "spine: nothing pending, nothing held" eq "$(slurm_cmd /usr/bin/squeue -h -t PD -o '%i %r')" ""
  check "spine: no Prolog of them ran under $L2 (Slurm never placed them there)" \
    eq "$(for x in "$j" "$k"; do for n in "${N2[@]}"; do prolog_of "$n" "$x"; done; done | sort -u | paste -sd ' ')" "<none>"
  check "spine: no node drained" no_drain
  release_all "$j"
  say "case: the spines repaired (SMP Sets back): the next audit gives the level back"
  for sp in spine1 spine2; do bash "$FABRIC_RIG" misalign "$FABRIC_ENV" "$sp" 2 3 3 >/dev/null; done
  rc=$(fabric_audit)
  check "audit after the repair: exit 0, the verdict names nobody" eq "$rc:$(lost_by mission-critical)" "0:"
  health_round
  check "spine: ${N2[*]} sent the level on" sent_with "${N2[@]}"
  check "spine: slurmctld: every node carries mission-critical" eq "$(features)" "$(want_features "${nodes[@]}")"
  j=$(submit mission-critical -N2 -w "$(hostlist "${N2[@]}")")
  poll 60 "job $j running" is_running "$j"
  check "spine: a mission-critical job runs on ${N2[*]} again, nobody touching Slurm" eq "$(nodes_of "$j")" "$(hostlist "${N2[@]}")"
  check "spine: granted there" eq "$(for n in "${N2[@]}"; do prolog_of "$n" "$j"; done | sort -u)" applied
  release_all "$j"
  check "spine: all $NN nodes end in service" no_drain
}
spine_case

say "the cases took $(($(date +%s) - T0)) s"
say "measured (Slurm $SLURM_VERSION, one health round of $NN nodes): the first: $ALLB; unchanged: REQUEST_UPDATE_NODE=$U0 (${ALL0:-no request}); a leaf's drop (${#N1[@]} nodes changed): REQUEST_UPDATE_NODE=$U1 ($ALL1)"
say "summary (Slurm $SLURM_VERSION, fabric placement): $E2E_PASSED passed, $E2E_FAILED failed"
echo "fabric-placement-$SLURM_VERSION: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
