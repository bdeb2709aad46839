#!/usr/bin/env bash
# demo.sh — the whole qoslane flow on this machine (the README's main command):
#   a simulated InfiniBand fabric (ibsim) with a real OpenSM programming QoS
#   SL2VL tables, read by the real smpquery; the host's real single-node Slurm
#   cluster (rigs/slurm_versions.tsv) with qoslane's hookrun entry as Prolog/Epilog/TaskProlog, its
#   hooks run built in as the packages lay them out; one job per QoS; what
#   each job got (its SL exports, the node setting, the fabric check, the audit
#   lines); the SM re-programmed under our feet (drift) reported by the health
#   check, the fail_job level refused (requeued by hookrun, not held) while the node serves the others; the
#   slurm.conf lines that place a fail_job level's jobs (qoslane slurm-config); the
#   metrics; then the path (scripts/demo_path.sh): the mapping's OpenSM QoS
#   options on a multi-switch fabric, proven by the fabric audit, and a spine
#   misaligned behind the SM named by it, then a node's first switch dropping a tier: health
#   records it, the Prolog refuses it, status and the metric say so; a real Prometheus (node_exporter on
#   the node's textfiles, the shipped scrape config and alert rules, every
#   `for:` at 1s) shows the drift's alert firing; then the newest Slurm in its chroot with two
#   nodes (scripts/demo_nodes.sh), each on its own leaf of the multi-switch fabric: one job, the
#   same SL on both, the QoS from the Prolog's environment; then placement: leaf1 drops the
#   mission-critical tier, each node's health check tells slurmctld, the tier's job runs on the
#   node under leaf2, and the repair gives leaf1's node the tier back. Everything it starts, it stops.
#
#   scripts/demo.sh                 as root on Debian 12 (installs what is missing)
#   QOSLANE_SKIP_INSTALL=1          do not call install-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != --inside-fabric ]; then
  [ "${QOSLANE_SKIP_INSTALL:-0}" = 1 ] || bash scripts/install-deps.sh
  . tests/e2e/lib.sh
  build_release
  # The fabric lives as long as the demo: ibsim + OpenSM programming the QoS
  # table of docs/fabric.md (SL n -> VL n, what examples/qos-network.yml and
  # the admin guide expect); the demo runs inside it. The rig preloads
  # umad2sim for its command; the demo itself must not have it.
  exec bash rigs/ibsim_rig.sh -n node2 -s 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7 -- env -u LD_PRELOAD bash "$0" --inside-fabric
fi

. tests/e2e/lib.sh
WORK=$(mktemp -d /tmp/qoslane-demo.XXXXXX); chmod 0755 "$WORK"
R=$WORK/root
cleanup() { touch "$WORK/release.all" 2>/dev/null || true; prom_stop; stop_slurm; rm -rf "$WORK"; }
trap cleanup EXIT
title() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

# ------------------------------------------------------------------ the node
make_node "$R" examples/qos-network.yml
# This node's HCA port is the simulated node2's (identity, real smpquery).
. "$E2E_REPO/rigs/sim_port.sh"
attach_sim_port "$R"
# Its hooks as the packages lay them out: slurm.conf names the entry (a link to
# qoslane named hookrun), qoslane's Prolog and Epilog hooks are links to the
# binary, run built in (scripts/lib/node.sh).
node_hooks_shipped "$R"
# The node's runs read its port by smpquery (this host has no ib_umad module: shown_run).
q() { QOSLANE_SMPQUERY=$R/bin/smpquery shown_run "$WORK/q.err" "$QL" --root "$R" "$@"; }

title "The mapping (an Omnia input file): four tiers"
grep -vE '^\s*#' examples/qos-network.yml | sed 's/^/  /'
show "$QL" validate examples/qos-network.yml
title "What a mission-critical job would get (dry run)"
q explain --qos mission-critical
title "The fabric as OpenSM programmed it: real smpquery on node2's port"
show "$R/bin/smpquery" -C mlx5_0 -P 1 -D sl2vl 0
title "Health: every level lands on its VL (fresh probe)"
q health || true

# ------------------------------------------------------------------ Slurm
title "A real Slurm $SLURM_VERSION cluster (the host's), qoslane's hookrun entry as Prolog/Epilog/TaskProlog"
start_slurm "$R"
sed -n '/^Prolog=/p; /^Epilog=/p; /^TaskProlog=/p; /^PrologFlags=/p; /^PrologEpilogTimeout=/p' /etc/slurm/slurm.conf | sed 's/^/  /'
echo "  (bin/hookrun: the node's wrapper for its root prefix; on a node slurm.conf names /usr/lib/qoslane/hookrun)"
for f in "$R"/bin/entry/hookrun "$R"/etc/slurm/*.d/*; do
  if [ -L "$f" ]; then echo "  ${f#"$R"} -> qoslane"; else echo "  ${f#"$R"} (a script)"; fi
done
echo "  (the links to qoslane run built in: one program start per hook, hookrun's deadline and process group kept)"
# A real Prometheus on the node's textfiles from now on (tests/e2e/lib.sh; the
# shipped rules with every for: at 1s, so the alert below shows within seconds)
install -d "$WORK/prom"
node_exporter_start "$R/var/lib/prometheus/node-exporter" "$WORK/node_exporter.log"
prom_rules_1s "$WORK/prom/qoslane-alerts.yml"
prom_config "$WORK/prom/prometheus.yml" "$WORK/prom/qoslane-alerts.yml" "" "$NODE=127.0.0.1:$NE_PORT"
prometheus_start "$WORK/prom/prometheus.yml" "$WORK/prom"

title "One job per QoS (two at a time: this node has $(nproc) CPUs)"
printf '  %-5s %-17s %-9s %-10s %-7s %-17s %s\n' JOB QOS UCX_IB_SL NCCL_IB_SL NCCL_TC QOSLANE_LEVEL "default_roce_tos while running"
run_pair() {
  local a b
  a=$(submit "$1"); b=$(submit "$2")
  poll 90 "job $a running" is_running "$a"; poll 90 "job $b running" is_running "$b"
  local tos; tos=$(cat "$R$TOS")
  for j in "$a" "$b"; do
    printf '  %-5s %-17s %-9s %-10s %-7s %-17s %s\n' "$j" "$(env_of "$j" SLURM_JOB_QOS)" "$(env_of "$j" UCX_IB_SL)" \
      "$(env_of "$j" NCCL_IB_SL)" "$(env_of "$j" NCCL_IB_TC)" "$(env_of "$j" QOSLANE_LEVEL)" "$tos"
  done
  release "$a"; release "$b"
  poll 90 "job $a done" is_gone "$a"; poll 90 "job $b done" is_gone "$b"
}
run_pair mission-critical low
run_pair high normal
poll 10 "epilogs audited" test "$(grep -c '"event":"epilog"' "$R/var/log/qoslane/audit.jsonl")" -ge 4
echo "  (shared node: the highest active level's setting wins; the baseline returns when the last job ends: now $(cat "$R$TOS"))"

title "The audit log (one line per run; abridged)"
python3 - "$R/var/log/qoslane/audit.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["event"] not in ("prolog", "epilog"):
        continue
    fab = e.get("fabric") or {}
    ports = fab.get("ports") if isinstance(fab, dict) else None
    checked = ""
    if ports:
        checked = "; ".join(f'{p.get("port")}: SL {p.get("sl")} -> VL {p.get("vl")} ({"aligned" if p.get("aligned") else "NOT aligned"}, {p.get("source")})' for p in ports)[:90]
    ch = ", ".join(f'{c["path"].rsplit("/",1)[-1]} {c["before"]}->{c["after"]}' for c in e["changes"])
    print(f'  job {e["job_id"]:<3} {e["event"]:<6} qos={e["qos"] or "-":<16} via {e["qos_source"] or "-":<8} '
          f'level={e["level"] or "-":<16} SL={e["service_level"]} VL={e["virtual_lane"]} {e["outcome"]:<9} '
          f'{e["duration_ms"]:.1f} ms  {ch}')
PY
echo "  one prolog line in full:"
grep '"event":"prolog"' "$R/var/log/qoslane/audit.jsonl" | head -1 | sed 's/^/  /'

# ------------------------------------------------------------------ drift
title "The SM is re-programmed (SL3 -> VL4 now): health reports the drift, the node stays in service"
sed -i 's/^qos_ca_sl2vl .*/qos_ca_sl2vl 7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7/' "$RIG_WORK/opensm.conf"
kill -HUP "$RIG_OSM_PID"
drifted() { q health 2>/dev/null | grep -q 'warn: level: level .*: mlx5_0/1: SL '; }
poll 20 "the new table on node2's port" drifted
q health || true
echo "  a mission-critical job now (on_failure: fail_job) is refused (qoslane exits 100), not run"
echo "  unprotected: hookrun requeues it (pending, not held) with the reason where its user reads it;"
echo "  the node stays in service for the other tiers:"
j=$(submit mission-critical)
poll 60 "job $j requeued" requeued "$j"
/usr/bin/scontrol show job -o "$j" | grep -o 'JobState=[^ ]* Reason=[^ ]*' | sed 's/^/  /'
/usr/bin/scontrol show job "$j" | grep -o 'AdminComment=.*' | sed 's/^ */  /'
echo "  node $NODE: $(node_state)"
{ grep "\"job_id\":$j," "$R/var/log/qoslane/audit.jsonl" | grep -o '"error":"[^"]*"' | head -1 | sed 's/^/  audit: /'; } || true
/usr/bin/scancel "$j"; poll 30 "job $j gone" is_gone "$j"

title "Placement (opt-in): what slurmctld needs so fail_job levels go only where they are carried"
printf '$ qoslane slurm-config --config examples/qos-network.yml --placeholders 1 --cpus %s --memory 1000   (its slurm.conf part)\n' "$(nproc)"
"$QL" slurm-config --config examples/qos-network.yml --placeholders 1 --cpus "$(nproc)" --memory 1000 |
  sed -n '/^# ==== qoslane.conf/,/^-- ====/p' | grep -vE '^(#|--|$)' | sed 's/^/  /'
echo "  (with QOSLANE_SCONTROL set, each node's health sends its carried levels as ActiveFeatures"
echo "   only when they change; tests/e2e/placement.sh proves it on Slurm 22.05, 24.11 and 26.05)"

title "Metrics (node_exporter textfile, Prometheus text format)"
grep -E '^(qoslane_hook_runs_total\{event="(prolog|epilog)",outcome="(applied|reverted|failed)"|qoslane_rollbacks_total|qoslane_active_jobs|qoslane_fabric_aligned|qoslane_hook_duration_seconds_(sum|count)|hookrun_hook_runs_total)' \
  "$R/var/lib/prometheus/node-exporter/qoslane.prom" "$R/var/lib/prometheus/node-exporter/hookrun.prom" | sed "s|$R/var/lib/prometheus/node-exporter/||; s/^/  /"

title "A real Prometheus scraping node_exporter: the drift's alert (shipped rules, for: shortened to 1s)"
poll 30 "QoslaneFabricMisaligned firing" alert_is QoslaneFabricMisaligned firing || true
printf '$ curl %s/api/v1/alerts   (name, state, labels)\n' "$PROM_URL"
python3 "$PROM_API" alerts "$PROM_URL" | sed 's/^/  /'

# ------------------------------------------------------------------ the path
# A multi-switch fabric: the SM's options from the mapping, the fabric audit.
bash scripts/demo_path.sh "$QL"

# ------------------------------------------------------------------ several nodes, the newest Slurm
bash scripts/demo_nodes.sh

title "Done: rigs stopped, node restored"
