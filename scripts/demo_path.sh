#!/usr/bin/env bash
# demo_path.sh — the path, not only the port (a part of scripts/demo.sh; runs
# alone too): the mapping's OpenSM options (`qoslane fabric sm-config`) run a
# real OpenSM on a multi-switch simulated fabric (rigs/fabric_path_rig.sh:
# 3 leaves, 2 spines, 6 HCAs); `qoslane fabric audit` proves every level on
# every data port; one spine is then misaligned behind the SM's back, and the
# audit names it; OpenSM's event plugin then wakes `qoslane fabric watch` when the
# SM re-sweeps after a link bounce (only the switches it changed audited again);
# then the ports' own counters: the switch port where a tier
# waited, and a job's evidence line. A few seconds; everything it starts, it stops.
#
#   scripts/demo_path.sh [QOSLANE_BINARY]     (default: target/release/qoslane)
set -euo pipefail
cd "$(dirname "$0")/.."
QL=$(realpath "${1:-target/release/qoslane}")
REPO=$PWD
[ -x "$QL" ] || { echo "demo_path: no $QL (cargo build --release)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/qoslane-path-demo.XXXXXX)
ENV=""
WATCHER=""
cleanup() {
  [ -z "$WATCHER" ] || { kill "$WATCHER" 2>/dev/null; wait "$WATCHER" 2>/dev/null || true; }
  [ -z "$ENV" ] || bash rigs/fabric_path_rig.sh stop "$ENV"; rm -rf "$WORK"
}
trap cleanup EXIT
title() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

title "The path: the SM's QoS options for the mapping (qoslane fabric sm-config, abridged)"
"$QL" fabric sm-config --config examples/qos-network.yml --qos-policy-file "$WORK/qos-policy.conf" >"$WORK/sm.conf"
# The SM's QoS policy for the traffic no environment variable reaches (rdma_cm, IPoIB, storage):
# the levels' sm_traffic, in the qos-policy.conf the options name.
"$QL" fabric sm-config --config examples/qos-network.yml --qos-policy >"$WORK/qos-policy.conf"
grep -E '^#   [^ ]+ +SL |^(qos|max_op_vls|qos_swe_sl2vl|qos_swe_vlarb_high|qos_swe_vlarb_low) ' "$WORK/sm.conf" | sed 's/^/  /'
printf '$ qoslane fabric sm-config --qos-policy   (abridged: the SL each declared class gets)\n'
grep -E '^ +(qos-class|qos-level-name):|^ +[a-z].* : [0-9]+ # level' "$WORK/qos-policy.conf" | sed 's/^ */  /'
# OpenSM loads qoslane's event plugin (smplugin/, built here; found through the linker's path as an
# installed qoslane-opensm-plugin is): its records of what the SM changed go to a spool.
make -s -C smplugin O="$WORK/smplugin" all >/dev/null
ENV=$(LD_LIBRARY_PATH=$WORK/smplugin bash rigs/fabric_path_rig.sh start -c "$WORK/sm.conf" \
  -o event_plugin_name=qoslane_sm -o "event_plugin_options=qoslane_spool=$WORK/spool")
# The audit's SMPs leave from node2's HCA, through the simulator.
# shellcheck disable=SC1090  # the env file the rig just wrote
. "$ENV"
# shellcheck disable=SC2153  # RIG_WORK, IBSIM_SOCKNAME: from the rig's env file
for t in smpquery ibnetdiscover; do
  ln -s "$PWD/rigs/smpquery-sim" "$WORK/$t"
  printf 'export %s\n' "IBSIM_SOCKNAME=$IBSIM_SOCKNAME" "RIG_UMAD2SIM=$RIG_UMAD2SIM" \
    "RIG_WORK=$RIG_WORK" "SIM_HOST=node2" >"$WORK/$t.env"
done
# The audit in process (its default reader), as node2 under the rig's umad preload, which keeps
# its emulated sysfs in the rig's directory: each table read once by SMP Gets, and every switch
# port's transmit wait by a PMA Get; ibnetdiscover for the topology.
audit() {
  (cd "$RIG_WORK" && LD_PRELOAD=$RIG_UMAD2SIM IBSIM_SOCKNAME=$IBSIM_SOCKNAME SIM_HOST=node2 \
    QOSLANE_SMPQUERY=$WORK/smpquery QOSLANE_IBNETDISCOVER=$WORK/ibnetdiscover \
    "$QL" fabric audit --config "$REPO/examples/qos-network.yml")
}
title "A real OpenSM started with them: every level carried on every data port"
printf '$ qoslane fabric audit\n'; audit | sed 's/^/  /'
title "spine1 maps SL 3 to VL 15 on port 2 (SMP Set, behind the SM): the node's own port still looks fine"
bash rigs/fabric_path_rig.sh misalign "$ENV" spine1 2 3 15 >/dev/null
printf '$ qoslane fabric audit\n'; { audit || echo "  (exit $?)"; } | sed 's/^/  /'
# Drift seen when the SM makes it (issue 40): the plugin's records wake `qoslane fabric watch`,
# which audits again only what the SM changed and rewrites the verdict the nodes read.
title "Drift seen in seconds: OpenSM's event plugin tells qoslane fabric watch what the SM changed"
(cd "$RIG_WORK" && exec env LD_PRELOAD="$RIG_UMAD2SIM" IBSIM_SOCKNAME="$IBSIM_SOCKNAME" SIM_HOST=node2 \
  QOSLANE_SMPQUERY="$WORK/smpquery" QOSLANE_IBNETDISCOVER="$WORK/ibnetdiscover" \
  "$QL" --config "$REPO/examples/qos-network.yml" fabric watch --reader in-process \
  --spool "$WORK/spool" --verdict "$WORK/verdict.json") >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCHER=$!
acts() { if [ -s "$WORK/watch.out" ]; then wc -l <"$WORK/watch.out"; else echo 0; fi; }
wait_acts() { # wait_acts N: until the watcher acted N times, at most 60 s
  local i; for i in $(seq 600); do [ "$(acts)" -ge "$1" ] && return 0; sleep 0.1; done; return 1
}
cat >"$WORK/acts.py" <<'EOF'
import json, sys
for line in sys.stdin:
    a = json.loads(line)
    lost = ", ".join(f"{l}: {n} HCA ports" for l, n in a["lost"].items() if n) or "none"
    ms = a.get("sm_to_verdict_ms")
    took = "-" if ms is None else f"{ms:.0f} ms"
    why = a.get("why", "the switches the SM named")
    print(f"  {a['audit']} audit ({why}): {a['switches_named']} switches named, {a['smps']} SMPs, "
          f"SM record -> verdict {took}; levels lost: {lost}")
EOF
show_acts() { sed -n "$1,\$p" "$WORK/watch.out" | python3 "$WORK/acts.py"; }
printf '$ qoslane fabric watch --spool /run/qoslane-sm --verdict FILE   (the SM host)\n'
if wait_acts 1; then
  show_acts 1
  printf '$ (leaf2 port 4, toward a spine, bounced: the SM re-sweeps and reroutes)\n'
  bash rigs/fabric_path_rig.sh bounce "$ENV" leaf2 4 >/dev/null
  wait_acts 2 && { sleep 1; show_acts 2; } || echo "  (no act within 60 s: $(tail -2 "$WORK/watch.err"))"
else
  echo "  (the watcher did not act within 60 s: $(tail -2 "$WORK/watch.err"))"
fi
kill "$WATCHER" 2>/dev/null; wait "$WATCHER" 2>/dev/null || true; WATCHER=""

# The first switch, not the node's port: node1's leaf drops the mission-critical tier. The node's
# health records the tier as not granted; the Prolog obeys it and refuses the job (exit 100:
# hookrun requeues the job, not held; the node stays in service); status and the metric say the same.
. scripts/lib/node.sh
N1=$WORK/node1
node_layout "$N1" examples/qos-network.yml 1 identity
rm -f "$N1/bin/smpquery"; ln -s "$PWD/rigs/smpquery-sim" "$N1/bin/smpquery"
# shellcheck disable=SC2153  # from the rig's env file
printf 'export %s\n' "IBSIM_SOCKNAME=$IBSIM_SOCKNAME" "RIG_UMAD2SIM=$RIG_UMAD2SIM" \
  "RIG_WORK=$RIG_WORK" "SIM_HOST=node1" >"$N1/bin/smpquery.env"
# node1's runs read its port by smpquery (this host has no ib_umad module: shown_run).
n1() { QOSLANE_SMPQUERY=$N1/bin/smpquery QOSLANE_NO_JOURNAL=1 shown_run "$WORK/n1.err" "$QL" --root "$N1" "$@"; }
# A Prolog as slurmd starts it on 26.05: the job's QoS in its environment, from the credential.
n1_prolog() { SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=$1 SLURM_JOB_QOS=$2 n1 prolog; }
title "leaf1, node1's first switch, maps SL 3 to VL 15 toward both spines; node1's own port still maps SL 3 to VL 3"
for out in 3 4; do bash rigs/fabric_path_rig.sh misalign "$ENV" leaf1 "$out" 3 15 >/dev/null; done
printf '$ qoslane health   (on node1)\n'; { n1 health || echo "  (exit $?)"; } 2>&1 | sed 's/^/  /'
printf '$ SLURM_JOB_ID=101 SLURM_JOB_QOS=mission-critical qoslane prolog   (on node1)\n'
{ n1_prolog 101 mission-critical || echo "  (exit $?: refused; hookrun holds the job, the node stays in service)"; } 2>&1 | sed 's/^/  /'
printf '$ SLURM_JOB_ID=102 SLURM_JOB_QOS=high qoslane prolog   (on node1: SL 2 is carried)\n'
{ n1_prolog 102 high && echo "  (exit 0: granted)"; } 2>&1 | sed 's/^/  /'
SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=102 SLURM_JOB_QOS=high n1 epilog >/dev/null 2>&1 || true
printf '$ qoslane status | grep -A5 Grants\n'; { n1 status || true; } 2>&1 | grep -A5 'Grants' | sed 's/^/  /'
printf '$ qoslane metrics | grep qoslane_level_granted\n'; n1 metrics 2>/dev/null | grep '^qoslane_level_granted' | sed 's/^/  /'

# The tiers at work: the ports' own counters (issue 26). ibsim's console sets a port's transmit
# wait as congestion would; ibsim has no per-SL data counters, so those say "unsupported".
title "A tier waiting at a switch port: the audit reads every switch port's PortVLXmitWait"
console() { bash rigs/fabric_path_rig.sh console "$ENV" "PerformanceSet \"$1\"[$2] PortVLXmitWaitCounters.PortVLXmitWaitCounters$3=$4" >/dev/null; }
console leaf2 3 2 800
console leaf3 1 1 120
printf '$ qoslane fabric audit | grep ^wait:\n'; { audit || true; } | grep '^wait:' | sed 's/^/  /'
title "A job's evidence: its Prolog and Epilog read node1's port (QOSLANE_PERFQUERY)"
ln -s "$PWD/rigs/smpquery-sim" "$N1/bin/perfquery"
cp "$N1/bin/smpquery.env" "$N1/bin/perfquery.env"
n1pq() { QOSLANE_PERFQUERY=$N1/bin/perfquery n1 "$@"; }
SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=103 SLURM_JOB_QOS=high n1pq prolog >/dev/null 2>&1
console node1 1 2 350
SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=103 n1pq epilog >/dev/null 2>&1 || true
printf '$ tail -1 /var/log/qoslane/audit.jsonl | jq .evidence   (on node1)\n'
tail -1 "$N1/var/log/qoslane/audit.jsonl" | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin).get("evidence"), indent=1))' | sed 's/^/  /'
printf '$ qoslane explain --qos high | grep -A3 counters\n'; n1 explain --qos high 2>/dev/null | grep -A3 '  counters' | sed 's/^/  /'
