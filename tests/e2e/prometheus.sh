#!/usr/bin/env bash
# prometheus.sh — qoslane's metrics in a real Prometheus. Real hook runs on the
# real Slurm rig (hookrun + qoslane as Prolog/Epilog/TaskProlog) write the
# node's textfiles; a real node_exporter per node root (the compute node, and
# the control node that holds `qoslane fabric audit --textfile`'s file on the
# multi-switch rig) exports them; a real Prometheus (Debian's 2.42), started
# from the shipped deploy/prometheus/scrape-qoslane.yml with the test's own
# targets, scrapes them every second and evaluates the shipped alert rules.
# The test makes the rollback, port-misalignment and path alerts fire and finds
# them in /api/v1/alerts, then runs every panel query of the Grafana dashboard
# through /api/v1/query. Plain processes on loopback, free ports, temp dirs;
# everything it starts it stops, by PID. Bounded polls, no guessed sleeps.
#
# The alert rules are loaded from a test copy in which every `for:` is 1s
# (lib.sh's prom_rules_1s: `sed -E 's/^( +for:) .*/\1 1s/'`; the shipped file keeps 5m/10m/15m/30m, and
# its expressions are unchanged): the rules' expressions, not their patience,
# are what is tested here (promtool's unit tests cover the durations).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
T0=$(date +%s%N)

WORK=$(mktemp -d /tmp/qoslane-prom.XXXXXX); chmod 0755 "$WORK"
R=$WORK/root       # the compute node, under Slurm
C=$WORK/control    # the control node: only the fabric audit's textfile
P=$WORK/prom       # Prometheus: config, rules, data, log
PROBE_PID=""
FABRIC_ENV=""
CTLD_UP=0
cleanup() {
  local rc=$?
  prom_stop
  [ -z "$FABRIC_ENV" ] || bash "$E2E_REPO/rigs/fabric_path_rig.sh" stop "$FABRIC_ENV" >/dev/null 2>&1 || true
  [ "$CTLD_UP" = 0 ] || stop_ctld_metrics
  stop_slurm
  [ -z "$PROBE_PID" ] || kill "$PROBE_PID" 2>/dev/null || true
  if [ "$rc" -ne 0 ] || [ "$E2E_FAILED" -ne 0 ]; then say "kept $WORK for inspection"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

for t in "$NODE_EXPORTER" "$PROMETHEUS" "$PROMTOOL"; do
  [ -x "$t" ] || { say "missing $t (scripts/install-deps.sh installs it)"; exit 1; }
done

# ------------------------------------------------------------ the shipped files
DP=$E2E_REPO/deploy/prometheus
check "shipped scrape config: promtool check config" "$PROMTOOL" check config "$DP/scrape-qoslane.yml"
install -d "$P" "$C/var/lib/prometheus/node-exporter"
prom_rules_1s "$P/qoslane-alerts.yml"
fors=$(grep -cE '^ +for:' "$DP/qoslane-alerts.yml")
check "test rules: all $fors for: durations (and nothing else) shortened to 1s" \
  eq "$(diff "$DP/qoslane-alerts.yml" "$P/qoslane-alerts.yml" | grep -c '^> .*for: 1s$')/$(diff "$DP/qoslane-alerts.yml" "$P/qoslane-alerts.yml" | grep -c '^[<>]')" "$fors/$((2 * fors))"
check "test rules: promtool check rules" "$PROMTOOL" check rules "$P/qoslane-alerts.yml"

# ------------------------------------------------------------ the compute node
# low's second setting is a real kernel file that refuses the value: a
# process's oom_score_adj (range -1000..1000) through a directory symlink, as
# the metrics integration test does. The write fails after the journal, the
# transaction rolls back and restores the first setting: a real rollback.
cat > "$WORK/mapping.yml" <<YML
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
make_node "$R" "$WORK/mapping.yml"
sleep 900 9>&- &
PROBE_PID=$!
ln -s "/proc/$PROBE_PID" "$R/proc/sys/qoslane-probe"
TEXTFILES=$R/var/lib/prometheus/node-exporter

# start_cluster ROOT : the Slurm the hooks run under (one line to switch rigs)
start_cluster() { start_slurm "$1"; }
say "starting the Slurm rig"
start_cluster "$R"
say "node $NODE up"

# start_ctld_metrics : a slurmctld serving OpenMetrics (Slurm >= 25.11): Slurm 26.05 of the
# sid chroot rig with MetricsType=metrics/openmetrics, under the suite's lock (fd 8) for the
# whole test. Sets CTLD_ADDR (host:port) and ctld (a command inside the chroot).
CHROOT_RIG=$E2E_REPO/rigs/slurm_chroot_rig.sh
CTLD_LOCK=/run/lock/qoslane-slurm-sid.lock
start_ctld_metrics() {
  exec 8>"$CTLD_LOCK"
  flock -w "$RIG_LOCK_WAIT" 8 || { say "another suite holds $CTLD_LOCK"; return 1; }
  CTLD_UP=1
  RIG_LOCK_HELD=$CTLD_LOCK RIG_METRICS=1 bash "$CHROOT_RIG" start sid 2>"$WORK/ctld-start.log" ||
    { cat "$WORK/ctld-start.log" >&2; return 1; }
  CTLD_ADDR=127.0.0.1:$(sed -n 's/^SlurmctldPort=//p' "$(bash "$CHROOT_RIG" path sid)/etc/slurm/slurm.conf")
}
stop_ctld_metrics() { RIG_LOCK_HELD=$CTLD_LOCK bash "$CHROOT_RIG" stop sid 2>/dev/null || true; }
ctld() { bash "$CHROOT_RIG" run sid "$@"; }
say "starting Slurm 26.05 (sid chroot) with slurmctld's OpenMetrics"
start_ctld_metrics
say "slurmctld metrics at $CTLD_ADDR"

# ------------------------------------------------------------ node_exporter per node, Prometheus
node_exporter_start "$TEXTFILES" "$WORK/node_exporter-node.log"; NE_NODE=$NE_PORT
node_exporter_start "$C/var/lib/prometheus/node-exporter" "$WORK/node_exporter-control.log"; NE_CTL=$NE_PORT
say "node_exporter: $NODE on :$NE_NODE, control on :$NE_CTL"
prom_config "$P/prometheus.yml" "$P/qoslane-alerts.yml" "${CTLD_ADDR:-}" "$NODE=127.0.0.1:$NE_NODE" "control=127.0.0.1:$NE_CTL"
check "rendered config: the slurmctld job scrapes $CTLD_ADDR" grep -q "$CTLD_ADDR" "$P/prometheus.yml"
check "rendered config: promtool check config" "$PROMTOOL" check config "$P/prometheus.yml"
prometheus_start "$P/prometheus.yml" "$P"
say "Prometheus at $PROM_URL"
poll 30 "both node_exporter targets up" has_series 'count(up{job="node"} == 1) == 2'
check "both node_exporter targets up" has_series 'count(up{job="node"} == 1) == 2'

# ------------------------------------------------------------ a healthy job first
settings() { echo "$(cat "$R$TOS") $(cat "$R$RMEM")"; }
# run_job QOS : an srun job through the real hooks; prints its job id (the
# TaskProlog's own lines, e.g. a level not granted, are in the output too)
# shellcheck disable=SC2016  # $SLURM_JOB_ID is the job's
run_job() { timeout 60 /usr/bin/srun --qos="$1" /bin/sh -c 'echo "job-id=$SLURM_JOB_ID"' | sed -n 's/^job-id=//p'; }
say "case: a high job (applied, reverted), scraped before anything fails"
j=$(run_job high)
poll 10 "job $j epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" = reverted
check "high job: prolog applied" eq "$(audit_of "$R" "$j" prolog outcome)" applied
poll 15 "Prometheus has the node's prolog run" has_series "qoslane_hook_runs_total{instance=\"$NODE\",event=\"prolog\",outcome=\"applied\"} >= 1"
check "scraped: qoslane's prolog count from the node's textfile" has_series "qoslane_hook_runs_total{job=\"node\",instance=\"$NODE\",event=\"prolog\",outcome=\"applied\"} >= 1"
check "scraped: hookrun's textfile too" has_series "hookrun_hook_runs_total{instance=\"$NODE\",phase=\"prolog\",hook=\"10-qoslane\"} >= 1"
check "scraped: rollbacks still 0 (the counter's start, for increase())" eq "$(python3 "$PROM_API" value "$PROM_URL" "qoslane_rollbacks_total{instance=\"$NODE\",event=\"prolog\"}")" 0
check "no rollback alert yet" bash -c "! python3 '$PROM_API' alert '$PROM_URL' QoslaneRollbacks firing"

# panels_answer WHEN INSTANCE : every panel query of the dashboard, its variables
# filled as Grafana would ($instance a regex or a node; $__range and $__rate_interval
# the time since the test began, so an instant query covers every run), returns a series
panels_answer() {
  local span; span=$(( ($(date +%s%N) - T0) / 1000000000 + 30 ))s
  if python3 "$PROM_API" panels "$PROM_URL" "$DP/grafana-qoslane.json" \
    instance="$2" __range="$span" __rate_interval="$span" __interval=1s > "$WORK/panels.out"; then
    pass "dashboard, $1: every panel query returns a series (instance=$2, ranges $span)"
  else
    fail "dashboard, $1: panel queries without a series (instance=$2):"; grep -v '^ok ' "$WORK/panels.out" >&2
  fi
  sed 's/^/  /' "$WORK/panels.out" >&2
}
say "case: a healthy node: every panel of the dashboard has something to show"
# rate() and increase() need two samples of the file since it appeared
poll 15 "two scrapes of the node's textfile" has_series "count_over_time(qoslane_mapping_info{instance=\"$NODE\"}[5m]) >= 2"
panels_answer "healthy node" '.*'

# ------------------------------------------------------------ rollbacks
say "case: three low jobs, each rolled back by the kernel refusing oom_score_adj=5000"
oom_before=$(cat "/proc/$PROBE_PID/oom_score_adj")
for i in 1 2 3; do
  j=$(run_job low)
  poll 10 "job $j epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" != "<none>"
  check "low job $i: prolog rolled back" eq "$(audit_of "$R" "$j" prolog outcome)" rolled_back
done
check "rollback: the node is on its baseline, oom_score_adj untouched" eq "$(settings) $(cat "/proc/$PROBE_PID/oom_score_adj")" "$BASE_TOS $BASE_RMEM $oom_before"
poll 20 "QoslaneRollbacks firing" alert_is QoslaneRollbacks firing
check "alert QoslaneRollbacks firing for $NODE" bash -c "python3 '$PROM_API' alerts '$PROM_URL' | grep -q '^QoslaneRollbacks firing .*instance=$NODE'"
check "scraped: qoslane_rollbacks_total{event=prolog} = 3" eq "$(python3 "$PROM_API" value "$PROM_URL" "qoslane_rollbacks_total{instance=\"$NODE\",event=\"prolog\"}")" 3

# ------------------------------------------------------------ the node's port misaligned
say "case: the SM maps SL n to another VL on the node's port: health (hookrun) sees it, a high job runs on the baseline"
set_fabric "$R" reversed
# health: Slurm's HealthCheckProgram (hookrun), by hand as in slurm.sh; it
# re-probes the port (the Prolog reads the probe cache it refreshes)
health() { SLURMD_NODENAME=$NODE "$R/bin/hookrun" health >/dev/null 2>&1 || true; }
health
check "misaligned: health keeps the node in service (a warning)" eq "$(node_state)" idle
j=$(run_job high)
poll 10 "job $j epilog audited" test "$(audit_of "$R" "$j" epilog outcome)" != "<none>"
check "misaligned: the high job was not granted its level" eq "$(audit_of "$R" "$j" prolog outcome)" failed
poll 20 "QoslaneFabricMisaligned firing" alert_is QoslaneFabricMisaligned firing
check "alert QoslaneFabricMisaligned firing: $NODE, level high, mlx5_0/1" bash -c \
  "python3 '$PROM_API' alerts '$PROM_URL' | grep '^QoslaneFabricMisaligned firing ' | grep 'device=mlx5_0' | grep 'instance=$NODE' | grep 'level=high' | grep -q 'port=1'"
say "case: the SM fixed, the health check (hookrun) re-checks: the alert resolves"
set_fabric "$R" identity
health
not_firing() { ! alert_is "$1" firing; }
poll 20 "QoslaneFabricMisaligned resolved" not_firing QoslaneFabricMisaligned
check "aligned again: the alert is no longer firing" not_firing QoslaneFabricMisaligned

# ------------------------------------------------------------ the path: the fabric audit
say "case: the fabric audit on the multi-switch rig, one spine misaligned behind the SM"
FABRIC_ENV=$(bash "$E2E_REPO/rigs/fabric_path_rig.sh" start 9>&-)
fenv() { sed -n "s/^export $1=//p" "$FABRIC_ENV"; }   # a value of the rig's env file
for t in smpquery ibnetdiscover; do
  ln -s "$E2E_REPO/rigs/smpquery-sim" "$WORK/$t"
  printf 'export %s\n' "IBSIM_SOCKNAME=$(fenv IBSIM_SOCKNAME)" "RIG_UMAD2SIM=$(fenv RIG_UMAD2SIM)" \
    "RIG_WORK=$(fenv RIG_WORK)" "SIM_HOST=node2" > "$WORK/$t.env"
done
AUDIT_PROM=$C/var/lib/prometheus/node-exporter/qoslane-fabric-audit.prom
fabric_audit() {
  QOSLANE_SMPQUERY=$WORK/smpquery QOSLANE_IBNETDISCOVER=$WORK/ibnetdiscover \
    "$QL" fabric audit --mapping "$WORK/mapping.yml" --textfile "$AUDIT_PROM" >"$WORK/audit.out" 2>&1
}
check "audit: every level carried (exit 0)" fabric_audit
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
say "case: slurmctld (26.05) scraped: /metrics/jobs, /metrics/nodes, /metrics/scheduler"
python3 "$PROM_API" targets "$PROM_URL" | sed 's/^/  target: /' >&2
for e in jobs nodes partitions scheduler; do
  check "slurmctld: target /metrics/$e up (endpoint=$e)" has_series "up{job=\"slurmctld\",endpoint=\"$e\"} == 1"
done
ctld /usr/bin/srun --qos=high /bin/true
held_job=$(ctld /usr/bin/sbatch --parsable --hold --qos=normal --wrap=/bin/true)
ctld_node=$(bash "$CHROOT_RIG" nodes sid | head -1)
poll 15 "Prometheus sees the held job" has_series 'slurm_jobs_hold{job="slurmctld"} >= 1'
check "/metrics/jobs: its series carry endpoint=jobs" has_series 'slurm_jobs{job="slurmctld",endpoint="jobs"}'
check "/metrics/jobs: slurm_jobs_hold counts the held job $held_job" has_series 'slurm_jobs_hold{job="slurmctld"} >= 1'
check "/metrics/jobs: slurm_jobs_completed counts the srun job" has_series 'slurm_jobs_completed{job="slurmctld"} >= 1'
check "/metrics/nodes: slurm_node_cpus of $ctld_node" has_series "slurm_node_cpus{job=\"slurmctld\",node=\"$ctld_node\"} > 0"
check "/metrics/nodes: slurm_nodes = 1" has_series 'slurm_nodes{job="slurmctld"} == 1'
check "/metrics/scheduler: slurm_sdiag_jobs_submitted >= 2 since slurmctld started" has_series 'slurm_sdiag_jobs_submitted{job="slurmctld"} >= 2'
check "/metrics/scheduler: the main scheduler has run (slurm_schedule_cycle_cnt)" has_series 'slurm_schedule_cycle_cnt{job="slurmctld"} > 0'
ctld /usr/bin/scancel "$held_job"

# ------------------------------------------------------------ the textfiles parse
check "node_exporter read every textfile (node_textfile_scrape_error 0 on both)" \
  has_series 'count(node_textfile_scrape_error == 0) == 2'
check "QoslaneTextfileError not firing" not_firing QoslaneTextfileError

# ------------------------------------------------------------ the dashboard
say "case: every panel query of the Grafana dashboard returns a series"
check "dashboard's Node variable (label_values(qoslane_hook_runs_total, instance)) lists $NODE" \
  bash -c "python3 '$PROM_API' instances '$PROM_URL' qoslane_hook_runs_total | grep -qx '$NODE'"
for inst in '.*' "$NODE"; do panels_answer "after the failures" "$inst"; done

say "alerts at the end:"; python3 "$PROM_API" alerts "$PROM_URL" | sed 's/^/  /' >&2
say "wall time: $(( ($(date +%s%N) - T0) / 1000000000 )) s"
say "summary: $E2E_PASSED passed, $E2E_FAILED failed"
echo "$E2E_PASSED passed, $E2E_FAILED failed"
[ "$E2E_FAILED" -eq 0 ]
