#!/usr/bin/env bash
# prometheus.sh — qoslane's and Slurm's metrics in a real Prometheus. Real hook runs on a
# real several-node Slurm (hookrun + qoslane as Prolog/Epilog/TaskProlog; by default the newest
# Slurm with OpenMetrics in rigs/slurm_versions.tsv, in its chroot rig, two slurmd, each node its
# own qoslane root) write each node's
# textfiles; a real node_exporter per node root — every compute node, and a control node
# holding `qoslane fabric audit --textfile`'s file from the multi-switch rig — exports them;
# a real Prometheus (Debian's 2.42), started from the shipped
# deploy/prometheus/scrape-qoslane.yml with the test's own targets, scrapes them and
# slurmctld's OpenMetrics (/metrics/jobs, nodes, partitions, scheduler; Slurm >= 25.11) every
# second and evaluates the shipped alert rules. The test makes the rollback, port-misalignment
# and path alerts fire on the node they concern and finds them in /api/v1/alerts, asserts
# slurmctld's series against what it did, and runs every panel query of the Grafana dashboard
# through /api/v1/query, on the healthy cluster and after the failures. Plain processes on
# loopback, free ports, temp dirs; everything it starts it stops, by PID. Bounded polls, no
# guessed sleeps.
#
#   tests/e2e/prometheus.sh [--slurm VERSION|SUITE|host]   (or SLURM_VERSION; default the newest
#                           version whose row says openmetrics; a version without it has no
#                           slurmctld metrics, and the host's one node: those parts are skipped, said)
#
# The alert rules are loaded from a test copy in which every `for:` is 1s (lib.sh's
# prom_rules_1s: `sed -E 's/^( +for:) .*/\1 1s/'`; the shipped file keeps 5m/10m/15m/30m, and
# its expressions are unchanged): the rules' expressions, not their patience, are what is
# tested here (promtool's unit tests cover the durations).
set -euo pipefail
# shellcheck source=../../rigs/slurm_versions.sh
. "$(dirname "$0")/../../rigs/slurm_versions.sh"
export SLURM_VERSION=${SLURM_VERSION:-$(slurm_newest openmetrics)}
if [ "${1:-}" = --slurm ]; then SLURM_VERSION=${2:?--slurm VERSION}; fi
. "$(dirname "$0")/lib.sh"
T0=$(date +%s%N)
# slurmctld serves OpenMetrics from 25.11 (the table's openmetrics feature; the chroot rig
# configures it with RIG_METRICS=1)
CTLD_METRICS=0; if slurm_has "$SLURM_VERSION" openmetrics; then CTLD_METRICS=1; fi
export RIG_METRICS=$CTLD_METRICS
NN=2; [ -n "$CH" ] || NN=1   # the host rig has one node

WORK=$(e2e_workdir qoslane-prom)   # as the hooks see it; the test's own files at $CH$WORK
if [ -z "$WORK" ] || [ ! -d "$CH$WORK" ]; then say "no work directory under $CH/tmp"; exit 1; fi
W=$CH$WORK
C=$W/control    # the control node: only the fabric audit's textfile (on the host)
P=$W/prom       # Prometheus: config, rules, data, log
PROBE_PID=""
FABRIC_ENV=""
cleanup() {
  local rc=$?
  prom_stop
  [ -z "$FABRIC_ENV" ] || bash "$E2E_REPO/rigs/fabric_path_rig.sh" stop "$FABRIC_ENV" >/dev/null 2>&1 || true
  stop_slurm
  [ -z "$PROBE_PID" ] || kill "$PROBE_PID" 2>/dev/null || true
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $W for inspection"; else rm -rf "$W"; fi
}
trap cleanup EXIT

for t in "$NODE_EXPORTER" "$PROMETHEUS" "$PROMTOOL"; do
  [ -x "$t" ] || { say "missing $t (scripts/install-deps.sh installs it)"; exit 1; }
done
say "Slurm $SLURM_VERSION ($SLURM_SUITE), $NN node(s), slurmctld metrics: $([ "$CTLD_METRICS" = 1 ] && echo yes || echo "none before 25.11")"

# ------------------------------------------------------------ the shipped files
DP=$E2E_REPO/deploy/prometheus
check "shipped scrape config: promtool check config" "$PROMTOOL" check config "$DP/scrape-qoslane.yml"
install -d "$P" "$C/var/lib/prometheus/node-exporter"
prom_rules_1s "$P/qoslane-alerts.yml"
fors=$(grep -cE '^ +for:' "$DP/qoslane-alerts.yml")
check "test rules: all $fors for: durations (and nothing else) shortened to 1s" \
  eq "$(diff "$DP/qoslane-alerts.yml" "$P/qoslane-alerts.yml" | grep -c '^> .*for: 1s$')/$(diff "$DP/qoslane-alerts.yml" "$P/qoslane-alerts.yml" | grep -c '^[<>]')" "$fors/$((2 * fors))"
check "test rules: promtool check rules" "$PROMTOOL" check rules "$P/qoslane-alerts.yml"

# ------------------------------------------------------------ the compute nodes
# low's second setting is a real kernel file that refuses the value: a process's
# oom_score_adj (range -1000..1000) through a directory symlink, as the metrics integration
# test does. The write fails after the journal, the transaction rolls back and restores the
# first setting: a real rollback. (A chroot's /proc is the host's: the same process.)
cat > "$W/mapping.yml" <<YML
default_level: normal
fabric_check: enforce
on_failure: continue
levels:
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
    node_settings:
      - path: $RMEM
        value: "8388608"
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low]
    service_level: 1
    virtual_lane: 1
    node_settings:
      - path: $RMEM
        value: "1048576"
      - path: /proc/sys/qoslane-probe/oom_score_adj
        value: "5000"
YML
build_release
HOST_QL=$QL         # the fabric audit runs on the host
e2e_binaries        # a chroot's hooks run copies inside it
sleep 900 8>&- 9>&- &
PROBE_PID=$!
if [ -n "$CH" ]; then
  mapfile -t names < <(RIG_NNODES=$NN bash "$CHROOT_RIG" nodes "$SLURM_SUITE")
else
  names=("$(/usr/sbin/slurmd -C | sed -n '1s/^NodeName=\([^ ]*\).*/\1/p')")   # as rigs/slurm_rig.sh names it
fi
root_of() { echo "$WORK/nodes/$1"; }
for n in "${names[@]}"; do
  make_node "$(root_of "$n")" "$W/mapping.yml"
  ln -s "/proc/$PROBE_PID" "$CH$(root_of "$n")/proc/sys/qoslane-probe"
done
# The one Prolog/Epilog/TaskProlog of slurm.conf: the node's own hookrun, by SLURMD_NODENAME
# (as tests/e2e/slurm_nodes.sh)
install -d -m 0755 "$W/dispatch/bin"
# shellcheck disable=SC2016  # the wrapper's variables, at run time
printf '#!/bin/sh\ncase $SLURMD_NODENAME in *[!a-zA-Z0-9-]* | "") echo "no node name" >&2; exit 1 ;; esac\nexec %s/nodes/$SLURMD_NODENAME/bin/hookrun "$@"\n' "$WORK" > "$W/dispatch/bin/hookrun"
chmod 0755 "$W/dispatch/bin/hookrun"

# start_cluster : the Slurm the hooks run under (lib.sh's start_slurm: the version is
# SLURM_VERSION; RIG_METRICS=1 turns on slurmctld's OpenMetrics). Sets NODES, CTLD_ADDR.
start_cluster() {
  start_slurm "$WORK/dispatch" "$NN"
  CTLD_ADDR=""
  [ "$CTLD_METRICS" = 0 ] || CTLD_ADDR=127.0.0.1:$(sed -n 's/^SlurmctldPort=//p' "$CH/etc/slurm/slurm.conf")
}
say "starting the Slurm rig"
start_cluster
read -r -a nodes <<< "$NODES"
check "the nodes Slurm runs are the roots laid out" eq "${nodes[*]}" "${names[*]}"
N1=${nodes[0]}; N2=${nodes[$((NN - 1))]}   # rollbacks on N1, the misaligned port on N2
say "nodes: ${nodes[*]}; slurmctld metrics: ${CTLD_ADDR:-none}"
textfiles_of() { echo "$CH$(root_of "$1")/var/lib/prometheus/node-exporter"; }

# ------------------------------------------------------------ node_exporter per node, Prometheus
targets=()
for n in "${nodes[@]}"; do
  node_exporter_start "$(textfiles_of "$n")" "$W/node_exporter-$n.log"
  targets+=("$n=127.0.0.1:$NE_PORT")
done
node_exporter_start "$C/var/lib/prometheus/node-exporter" "$W/node_exporter-control.log"
targets+=("control=127.0.0.1:$NE_PORT")
say "node_exporter: ${targets[*]}"
prom_config "$P/prometheus.yml" "$P/qoslane-alerts.yml" "$CTLD_ADDR" "${targets[@]}"
if [ -n "$CTLD_ADDR" ]; then
  check "rendered config: the slurmctld job scrapes $CTLD_ADDR" grep -q "$CTLD_ADDR" "$P/prometheus.yml"
fi
check "rendered config: promtool check config" "$PROMTOOL" check config "$P/prometheus.yml"
prometheus_start "$P/prometheus.yml" "$P"
say "Prometheus at $PROM_URL"
NT=${#targets[@]}
poll 30 "all $NT node_exporter targets up" has_series "count(up{job=\"node\"} == 1) == $NT"
check "all $NT node_exporter targets up (one per node root: ${nodes[*]} control)" has_series "count(up{job=\"node\"} == 1) == $NT"

# ------------------------------------------------------------ healthy jobs first
settings_of() { local r; r=$CH$(root_of "$1"); echo "$(cat "$r$TOS") $(cat "$r$RMEM")"; }
# run_job QOS [srun args] : an srun job through the real hooks; prints its job id (the
# TaskProlog's own lines, e.g. a level not granted, are in the output too)
# shellcheck disable=SC2016  # $SLURM_JOB_ID is the job's
run_job() { local q=$1; shift; slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos="$q" "$@" /bin/sh -c 'echo "job-id=$SLURM_JOB_ID"' | sed -n 's/^job-id=//p' | sort -u; }
epilog_on() { [ "$(audit_of "$(root_of "$1")" "$2" epilog outcome)" != "<none>" ]; }   # NODE JOB
prolog_of() { audit_of "$(root_of "$1")" "$2" prolog outcome; }                         # NODE JOB
health_on() { slurm_cmd env SLURMD_NODENAME="$1" "$(root_of "$1")/bin/hookrun" health >/dev/null 2>&1 || true; }
value() { python3 "$PROM_API" value "$PROM_URL" "$1"; }
say "case: a high job on every node (applied, reverted), scraped before anything fails"
j=$(run_job high -N"$NN")
for n in "${nodes[@]}"; do
  poll 10 "job $j epilog audited on $n" epilog_on "$n" "$j"
  check "high job: prolog applied on $n" eq "$(prolog_of "$n" "$j")" applied
done
for n in "${nodes[@]}"; do
  poll 15 "Prometheus has $n's prolog run" has_series "qoslane_hook_runs_total{instance=\"$n\",event=\"prolog\",outcome=\"applied\"} >= 1"
  check "scraped from $n's textfile: qoslane's prolog count" has_series "qoslane_hook_runs_total{job=\"node\",instance=\"$n\",event=\"prolog\",outcome=\"applied\"} >= 1"
  check "scraped from $n's textfile: hookrun's prolog count" has_series "hookrun_hook_runs_total{instance=\"$n\",phase=\"prolog\",hook=\"10-qoslane\"} >= 1"
  check "scraped from $n: rollbacks 0 (the counter's start, for increase())" eq "$(value "qoslane_rollbacks_total{instance=\"$n\",event=\"prolog\"}")" 0
done
not_firing() { ! alert_is "$1" firing; }
check "no rollback alert yet" not_firing QoslaneRollbacks

# panels_answer WHEN INSTANCE : every panel query of the dashboard, its variables filled as
# Grafana would ($instance a regex or a node; $__range and $__rate_interval the time since the
# test began, so an instant query covers every run), returns a series
panels_answer() {
  local span; span=$(( ($(date +%s%N) - T0) / 1000000000 + 30 ))s
  if python3 "$PROM_API" panels "$PROM_URL" "$DP/grafana-qoslane.json" \
    instance="$2" __range="$span" __rate_interval="$span" __interval=1s > "$W/panels.out"; then
    pass "dashboard, $1: every panel query returns a series (instance=$2, ranges $span)"
  else
    fail "dashboard, $1: panel queries without a series (instance=$2):"; grep -v '^ok ' "$W/panels.out" >&2
  fi
  sed 's/^/  /' "$W/panels.out" >&2
}
say "case: a healthy cluster: every panel of the dashboard has something to show"
# rate() and increase() need two samples of the file since it appeared
poll 15 "two scrapes of $N2's textfile" has_series "count_over_time(qoslane_mapping_info{instance=\"$N2\"}[5m]) >= 2"
panels_answer "healthy cluster" '.*'

# ------------------------------------------------------------ rollbacks
say "case: three low jobs on $N1, each rolled back by the kernel refusing oom_score_adj=5000"
oom_before=$(cat "/proc/$PROBE_PID/oom_score_adj")
for i in 1 2 3; do
  j=$(run_job low -w "$N1")
  poll 10 "job $j epilog audited" epilog_on "$N1" "$j"
  check "low job $i: prolog rolled back on $N1" eq "$(prolog_of "$N1" "$j")" rolled_back
done
check "rollback: $N1 on its baseline, oom_score_adj untouched" eq "$(settings_of "$N1") $(cat "/proc/$PROBE_PID/oom_score_adj")" "$BASE_TOS $BASE_RMEM $oom_before"
poll 20 "QoslaneRollbacks firing" alert_is QoslaneRollbacks firing
alerts() { python3 "$PROM_API" alerts "$PROM_URL"; }
check "alert QoslaneRollbacks firing for $N1" bash -c "python3 '$PROM_API' alerts '$PROM_URL' | grep -q '^QoslaneRollbacks firing .*instance=$N1 '"
check "scraped from $N1: qoslane_rollbacks_total{event=prolog} = 3" eq "$(value "qoslane_rollbacks_total{instance=\"$N1\",event=\"prolog\"}")" 3
if [ "$NN" -gt 1 ]; then
  check "QoslaneRollbacks names $N1 only" eq "$(alerts | grep -c '^QoslaneRollbacks firing ')" 1
fi

# ------------------------------------------------------------ a node's port misaligned
say "case: the SM maps SL n to another VL on $N2's port: health (hookrun) sees it, a high job there runs on the baseline"
set_fabric "$(root_of "$N2")" reversed
# health: Slurm's HealthCheckProgram (hookrun), by hand as in slurm.sh; it re-probes the port
# (the Prolog reads the probe cache it refreshes)
health_on "$N2"
check "misaligned: health keeps $N2 in service (a warning)" eq "$(node_state_of "$N2")" idle
j=$(run_job high -w "$N2")
poll 10 "job $j epilog audited" epilog_on "$N2" "$j"
check "misaligned: the high job was not granted its level on $N2" eq "$(prolog_of "$N2" "$j")" failed
poll 20 "QoslaneFabricMisaligned firing" alert_is QoslaneFabricMisaligned firing
check "alert QoslaneFabricMisaligned firing: $N2, level high, mlx5_0/1" bash -c \
  "python3 '$PROM_API' alerts '$PROM_URL' | grep '^QoslaneFabricMisaligned firing ' | grep 'device=mlx5_0' | grep 'instance=$N2 ' | grep 'level=high' | grep -q 'port=1'"
if [ "$NN" -gt 1 ]; then
  check "QoslaneFabricMisaligned names no other node" eq "$(alerts | grep '^QoslaneFabricMisaligned firing ' | grep -vc "instance=$N2 ")" 0
fi
# The node's recorded grant (health decided it; the Prolog obeyed it): level high not granted.
poll 20 "QoslaneLevelNotGranted firing" alert_is QoslaneLevelNotGranted firing
check "alert QoslaneLevelNotGranted firing: $N2, level high" bash -c \
  "python3 '$PROM_API' alerts '$PROM_URL' | grep '^QoslaneLevelNotGranted firing ' | grep 'instance=$N2 ' | grep -q 'level=high'"
if [ "$NN" -gt 1 ]; then
  check "QoslaneLevelNotGranted names no other node" eq "$(alerts | grep '^QoslaneLevelNotGranted firing ' | grep -vc "instance=$N2 ")" 0
fi
# The mapping's levels are `continue`: high granted nowhere (the host's one node) is not a level
# carried nowhere whose jobs pend; qoslane_level_info gives the policy the alert reads.
check "qoslane_level_info: high's on_failure on $N2 (continue)" has_series "qoslane_level_info{instance=\"$N2\",level=\"high\",on_failure=\"continue\"}"
check "QoslaneLevelCarriedNowhere not firing: high is a continue level" not_firing QoslaneLevelCarriedNowhere
say "case: the SM fixed, the health check re-probes: the alert resolves"
set_fabric "$(root_of "$N2")" identity
health_on "$N2"
poll 20 "QoslaneFabricMisaligned resolved" not_firing QoslaneFabricMisaligned
check "aligned again: the alert is no longer firing" not_firing QoslaneFabricMisaligned
poll 20 "QoslaneLevelNotGranted resolved" not_firing QoslaneLevelNotGranted

# ------------------------------------------------------------ degraded states (issue 23)
say "case: an invalid mapping installed on $N1: the last-known-good copy serves, health warns"
MAP1=$CH$(root_of "$N1")/etc/qoslane/qos-network.yml
cp -p "$MAP1" "$W/mapping-$N1.good"
printf 'levels: [\n' > "$MAP1"   # in place: owner and mode stay root's 0644
health_on "$N1"
check "invalid mapping: health keeps $N1 in service (a warning)" eq "$(node_state_of "$N1")" idle
poll 20 "QoslaneMappingNotInForce firing" alert_is QoslaneMappingNotInForce firing
check "alert QoslaneMappingNotInForce firing for $N1 only" \
  eq "$(alerts | grep '^QoslaneMappingNotInForce firing ' | grep -c "instance=$N1 ")/$(alerts | grep -c '^QoslaneMappingNotInForce firing ')" 1/1
poll 20 "QoslaneHealthWarnings firing for $N1" bash -c "python3 '$PROM_API' alerts '$PROM_URL' | grep -q '^QoslaneHealthWarnings firing .*instance=$N1 '"
check "alert QoslaneHealthWarnings firing for $N1" bash -c "python3 '$PROM_API' alerts '$PROM_URL' | grep -q '^QoslaneHealthWarnings firing .*instance=$N1 '"
cp -p "$W/mapping-$N1.good" "$MAP1"
health_on "$N1"
poll 20 "QoslaneMappingNotInForce resolved" not_firing QoslaneMappingNotInForce
check "mapping fixed: QoslaneMappingNotInForce no longer firing" not_firing QoslaneMappingNotInForce
if [ "$NN" -gt 1 ]; then
  say "case: a new mapping reaches $N2 only (a job there puts it in force): drift across the nodes"
  MAP2=$CH$(root_of "$N2")/etc/qoslane/qos-network.yml
  cp -p "$MAP2" "$W/mapping-$N2.good"
  printf '# rolled out to %s only\n' "$N2" >> "$MAP2"
  j=$(run_job normal -w "$N2")
  poll 10 "job $j epilog audited" epilog_on "$N2" "$j"
  poll 20 "QoslaneMappingDrift firing" alert_is QoslaneMappingDrift firing
  check "alert QoslaneMappingDrift firing for job node" bash -c "python3 '$PROM_API' alerts '$PROM_URL' | grep '^QoslaneMappingDrift firing ' | grep -q 'job=node'"
  cp -p "$W/mapping-$N2.good" "$MAP2"
  j=$(run_job normal -w "$N2")
  poll 10 "job $j epilog audited" epilog_on "$N2" "$j"
  poll 20 "QoslaneMappingDrift resolved" not_firing QoslaneMappingDrift
  check "the mapping back on $N2: QoslaneMappingDrift no longer firing" not_firing QoslaneMappingDrift
fi
check "scraped: qoslane_build_info on every node" has_series "count(qoslane_build_info == 1) == $NN"

say "case: a high job alone on $N1 sends off its level's SL and its lane waits: evidence, wait per tier, QoslaneOffLevelTraffic"
# The node's ports' counters through perfquery (the site options' QOSLANE_PERFQUERY): the stand-in
# of the integration tests answers the real-format outputs of tests/fixtures/perfquery/ (no
# simulator answers PortXmitDataSL); before the job SL 0 and SL 3 have sent, while it runs 4096
# bytes leave on SL 0 and 1,000,000 on SL 3 (neither is high's SL 2) and VL 2 waits 700 ticks.
R1=$CH$(root_of "$N1")
PF=$E2E_REPO/crates/qoslane/tests/fixtures/perfquery
cp "$E2E_REPO/crates/qoslane/tests/fixtures/bin/fake-perfquery" "$R1/bin/perfquery"
counters_show() { # before|after
  cp "$PF/xmtsl-$1.txt" "$R1/bin/any.xmtsl.txt"
  cp "$PF/rcvsl-$1.txt" "$R1/bin/any.rcvsl.txt"
  local wait=0; [ "$1" = before ] || wait=700
  sed -E "s/^(PortVLXmitWait2:\.*)[0-9]+\$/\1$wait/" "$PF/vlxmit-before.txt" > "$R1/bin/any.vlxmit.txt"
}
counters_show before
install -d -m 0755 "$R1/etc/default"
printf 'QOSLANE_PERFQUERY=%s/bin/perfquery\n' "$(root_of "$N1")" >> "$R1/etc/default/qoslane"
chmod 0644 "$R1/etc/default/qoslane"
# shellcheck disable=SC2016  # $SLURM_JOB_ID is the job's
slurm_cmd /usr/bin/timeout 60 /usr/bin/srun --qos=high -w "$N1" -N1 /bin/sh -c 'echo "job-id=$SLURM_JOB_ID"; sleep 3' > "$W/offlevel.out" 2>&1 &
OFF_PID=$!
job_started() { grep -q '^job-id=' "$W/offlevel.out"; }
poll 20 "the off-level job started on $N1" job_started
j=$(sed -n 's/^job-id=//p' "$W/offlevel.out" | head -1)
check "off-level job $j: prolog applied (its counters read)" eq "$(prolog_of "$N1" "$j")" applied
counters_show after
wait "$OFF_PID" || true
poll 10 "job $j epilog audited" epilog_on "$N1" "$j"
check "off-level job $j: the Epilog's evidence, alone on $N1, 1,004,096 bytes off SL 2" \
  eq "$(audit_of "$(root_of "$N1")" "$j" epilog evidence | python3 -c 'import ast,sys; e=ast.literal_eval(sys.stdin.read()); print(e["alone"], e["sl"], e["off_level_bytes"])')" "True 2 1004096"
poll 15 "Prometheus has $N1's off-level bytes" has_series "qoslane_off_level_bytes_total{instance=\"$N1\",level=\"high\"} == 1004096"
check "scraped: qoslane_off_level_bytes_total{level=high} on $N1" has_series "qoslane_off_level_bytes_total{instance=\"$N1\",level=\"high\"} == 1004096"
check "scraped: high's VL 2 waited 700 ticks on $N1's port (qoslane_xmit_wait_ticks_total)" \
  has_series "qoslane_xmit_wait_ticks_total{instance=\"$N1\",level=\"high\",vl=\"2\",device=\"mlx5_0\",port=\"1\"} == 700"
poll 20 "QoslaneOffLevelTraffic firing" alert_is QoslaneOffLevelTraffic firing
check "alert QoslaneOffLevelTraffic firing for $N1, level high, only" \
  eq "$(alerts | grep '^QoslaneOffLevelTraffic firing ' | grep "instance=$N1 " | grep -c 'level=high')/$(alerts | grep -c '^QoslaneOffLevelTraffic firing ')" 1/1
tier_wait_panel() { # the dashboard's own "tier health" wait query for N1, without its empty-panel fallback
  python3 "$PROM_API" panel "$PROM_URL" "$DP/grafana-qoslane.json" 'Transmit wait per tier (node ports)' \
    instance="$N1" __rate_interval=5m | grep -q '^level=high '
}
poll 20 "the tier-health wait query has high's series" tier_wait_panel
check "dashboard's tier-health wait query: a series for high on $N1 (not the fallback)" tier_wait_panel

# ------------------------------------------------------------ the path: the fabric audit
say "case: the fabric audit on the multi-switch rig, one spine misaligned behind the SM"
FABRIC_ENV=$(bash "$E2E_REPO/rigs/fabric_path_rig.sh" start 8>&- 9>&-)
fenv() { sed -n "s/^export $1=//p" "$FABRIC_ENV"; }   # a value of the rig's env file
for t in smpquery ibnetdiscover perfquery; do
  ln -s "$E2E_REPO/rigs/smpquery-sim" "$W/$t"
  printf 'export %s\n' "IBSIM_SOCKNAME=$(fenv IBSIM_SOCKNAME)" "RIG_UMAD2SIM=$(fenv RIG_UMAD2SIM)" \
    "RIG_WORK=$(fenv RIG_WORK)" "SIM_HOST=node2" > "$W/$t.env"
done
AUDIT_PROM=$C/var/lib/prometheus/node-exporter/qoslane-fabric-audit.prom
fabric_audit() {
  QOSLANE_SMPQUERY=$W/smpquery QOSLANE_IBNETDISCOVER=$W/ibnetdiscover QOSLANE_PERFQUERY=$W/perfquery \
    "$HOST_QL" fabric audit --config "$W/mapping.yml" --textfile "$AUDIT_PROM" >"$W/audit.out" 2>&1
}
# high's lane (VL 2) waits 800 ticks at leaf2 port 3, as congestion would make it (ibsim's console)
bash "$E2E_REPO/rigs/fabric_path_rig.sh" console "$FABRIC_ENV" \
  'PerformanceSet "leaf2"[3] PortVLXmitWaitCounters.PortVLXmitWaitCounters2=800' >/dev/null
check "audit: every level carried (exit 0)" fabric_audit
check "audit: names the switch port where high waited" \
  grep -q '^wait: level high (SL 2) waited most at switch leaf2 (lid [0-9]*) port 3 VL 2: 800 ticks' "$W/audit.out"
poll 15 "Prometheus has the audit's wait per level" has_series 'qoslane_fabric_audit_wait_ticks_max{instance="control",level="high"} == 800'
check "scraped: high waited 800 ticks at one switch port, low never" \
  has_series 'qoslane_fabric_audit_wait_ticks_max{instance="control",level="high"} == 800 and on () qoslane_fabric_audit_wait_ticks_max{instance="control",level="low"} == 0'
poll 15 "Prometheus has the audit's carried levels" has_series 'count(qoslane_fabric_audit_level_carried{instance="control"} == 1) == 3'
check "scraped: 3 levels carried on the control node" has_series 'count(qoslane_fabric_audit_level_carried{instance="control"} == 1) == 3'
bash "$E2E_REPO/rigs/fabric_path_rig.sh" misalign "$FABRIC_ENV" spine1 2 2 15 >/dev/null
rc=0; fabric_audit || rc=$?
check "audit: spine1 drops high's SL 2 (exit 1)" eq "$rc" 1
poll 20 "QoslaneFabricPathNotCarried firing" alert_is QoslaneFabricPathNotCarried firing
check "alert QoslaneFabricPathNotCarried firing: control, level high" bash -c \
  "python3 '$PROM_API' alerts '$PROM_URL' | grep '^QoslaneFabricPathNotCarried firing ' | grep 'instance=control' | grep -q 'level=high'"
check "audit ran: QoslaneFabricAuditFailing not firing" not_firing QoslaneFabricAuditFailing
bash "$E2E_REPO/rigs/fabric_path_rig.sh" stop "$FABRIC_ENV" >/dev/null 2>&1 || true
FABRIC_ENV=""

# ------------------------------------------------------------ slurmctld's own metrics
if [ -n "$CTLD_ADDR" ]; then
  say "case: slurmctld ($SLURM_VERSION) scraped: /metrics/jobs, /metrics/nodes, /metrics/scheduler"
  python3 "$PROM_API" targets "$PROM_URL" | sed 's/^/  target: /' >&2
  for e in jobs nodes partitions scheduler; do
    check "slurmctld: target /metrics/$e up (endpoint=$e)" has_series "up{job=\"slurmctld\",endpoint=\"$e\"} == 1"
  done
  held_job=$(slurm_cmd /usr/bin/sbatch --parsable --hold --qos=normal --wrap=/bin/true)
  poll 15 "Prometheus sees the held job" has_series 'slurm_jobs_hold{job="slurmctld"} >= 1'
  check "/metrics/jobs: its series carry endpoint=jobs" has_series 'slurm_jobs{job="slurmctld",endpoint="jobs"}'
  check "/metrics/jobs: slurm_jobs_hold counts the held job $held_job" has_series 'slurm_jobs_hold{job="slurmctld"} >= 1'
  check "/metrics/jobs: slurm_jobs_completed counts the test's jobs (>= 5)" has_series 'slurm_jobs_completed{job="slurmctld"} >= 5'
  for n in "${nodes[@]}"; do
    check "/metrics/nodes: slurm_node_cpus of $n" has_series "slurm_node_cpus{job=\"slurmctld\",node=\"$n\"} > 0"
  done
  check "/metrics/nodes: slurm_nodes = $NN" has_series "slurm_nodes{job=\"slurmctld\"} == $NN"
  check "/metrics/scheduler: slurm_sdiag_jobs_submitted >= 6 since slurmctld started" has_series 'slurm_sdiag_jobs_submitted{job="slurmctld"} >= 6'
  check "/metrics/scheduler: the main scheduler has run (slurm_schedule_cycle_cnt)" has_series 'slurm_schedule_cycle_cnt{job="slurmctld"} > 0'
  slurm_cmd /usr/bin/scancel "$held_job"
else
  say "no slurmctld metrics on Slurm $SLURM_VERSION (from 25.11): that part runs on $(slurm_versions openmetrics | paste -sd ' ')"
fi

# ------------------------------------------------------------ the textfiles parse
check "node_exporter read every textfile (node_textfile_scrape_error 0 on all $NT)" \
  has_series "count(node_textfile_scrape_error == 0) == $NT"
check "QoslaneTextfileError not firing" not_firing QoslaneTextfileError

# ------------------------------------------------------------ the dashboard
say "case: every panel query of the Grafana dashboard returns a series, after the failures"
check "dashboard's Node variable (label_values(qoslane_hook_runs_total, instance)) lists ${nodes[*]}" \
  eq "$(python3 "$PROM_API" instances "$PROM_URL" qoslane_hook_runs_total | paste -sd ' ')" "$(printf '%s\n' "${nodes[@]}" | sort | paste -sd ' ')"
for inst in '.*' "$N1" "$N2"; do panels_answer "after the failures" "$inst"; done

say "alerts at the end:"; alerts | sed 's/^/  /' >&2
say "wall time: $(( ($(date +%s%N) - T0) / 1000000000 )) s"
say "summary: $E2E_PASSED passed, $E2E_FAILED failed"
echo "prometheus-$SLURM_VERSION: $E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
