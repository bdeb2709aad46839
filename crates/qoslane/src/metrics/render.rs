//! The Prometheus text of the families docs/metrics.md describes, from the
//! counters and the gauges (`nodeio::prom`): one family after another, and
//! the series helpers that give every event, outcome and label a series
//! from the first scrape.

use std::collections::BTreeMap;

use super::counters::{BUCKETS, Counters, Gauges};
use crate::fabric::policy::{Alignment, HopCount};
use crate::report::Outcome;

/// Renders the families of docs/metrics.md in the classic text format
/// (`nodeio::prom`).
#[expect(
    clippy::too_many_lines,
    reason = "one family after another in docs/metrics.md's order, each its help text and samples: a table, its aggregations are helpers"
)]
pub fn render(c: &Counters, g: &Gauges) -> String {
    use nodeio::prom::{Kind, Writer};
    let mut w = Writer::new();
    w.family(
        "qoslane_hook_runs_total",
        Kind::Counter,
        "Runs of qoslane by event (prolog, epilog, sync, recover, health) and outcome.",
    );
    for (event, outcomes) in &runs_by_outcome(&c.runs) {
        for (outcome, n) in outcomes {
            w.sample(
                "qoslane_hook_runs_total",
                &[("event", event), ("outcome", outcome)],
                n,
            );
        }
    }
    w.family(
        "qoslane_rollbacks_total",
        Kind::Counter,
        "Transactions rolled back (node settings restored to their before-values) by event.",
    );
    for (event, n) in &every_event(&c.rollbacks) {
        w.sample("qoslane_rollbacks_total", &[("event", event)], n);
    }
    w.family(
        "qoslane_hook_duration_seconds",
        Kind::Histogram,
        "Wall time of qoslane runs by event, in seconds.",
    );
    for (event, h) in &every_event(&c.durations) {
        w.histogram(
            "qoslane_hook_duration_seconds",
            &[("event", event)],
            &BUCKETS,
            &h.counts,
            h.sum,
        );
    }
    w.family(
        "qoslane_active_jobs",
        Kind::Gauge,
        "Jobs with a granted level on this node, by level (as of the last run).",
    );
    for (level, n) in &g.active_jobs {
        w.sample("qoslane_active_jobs", &[("level", level)], n);
    }
    w.family(
        "qoslane_level_granted",
        Kind::Gauge,
        "1 when a job of the level starting now would get its SL on this node, 0 when it would be \
         refused or run on the baseline (the node's recorded grant: own ports, first hop, node settings).",
    );
    for (level, granted) in &g.granted {
        w.sample(
            "qoslane_level_granted",
            &[("level", level)],
            u8::from(*granted),
        );
    }
    w.family(
        "qoslane_level_info",
        Kind::Gauge,
        "Always 1, one per level of the mapping in force; on_failure is the level's policy as the \
         mapping sets it (fail_job: refused where not granted, placed only where carried; continue: \
         run on the baseline).",
    );
    for (level, on_failure) in &g.on_failure {
        w.sample(
            "qoslane_level_info",
            &[("level", level), ("on_failure", on_failure)],
            1,
        );
    }
    w.family(
        "qoslane_fabric_aligned",
        Kind::Gauge,
        "1 when the level's SL lands on its intended VL on the HCA port, else 0 (last fabric check).",
    );
    for ((device, port, level), aligned) in aligned_series(&c.fabric) {
        w.sample(
            "qoslane_fabric_aligned",
            &[
                ("device", device),
                ("port", &port.to_string()),
                ("level", level),
            ],
            u8::from(aligned),
        );
    }
    w.family(
        "qoslane_first_hop_ports",
        Kind::Gauge,
        "Output ports of the switch each HCA port is cabled to, by level and verdict \
         (carried, dropped, not_operational, other_vl, starved, link_down, arbitration_unknown, \
         unread), as of the last sync or health.",
    );
    for ((level, verdict), n) in hop_series(&c.first_hop) {
        w.sample(
            "qoslane_first_hop_ports",
            &[("level", level), ("verdict", verdict)],
            n,
        );
    }
    w.family(
        "qoslane_mapping_info",
        Kind::Gauge,
        "Always 1; the sha256 label identifies the mapping in force (last known good).",
    );
    if let Some(sha) = &g.mapping_sha256 {
        w.sample("qoslane_mapping_info", &[("sha256", sha)], 1);
    }
    w.family(
        "qoslane_mapping_valid",
        Kind::Gauge,
        "1 when the installed mapping file is the mapping in force; 0 when it is invalid, refused, absent or not yet in force.",
    );
    w.sample("qoslane_mapping_valid", &[], u8::from(g.mapping_valid));
    w.family(
        "qoslane_last_success_timestamp_seconds",
        Kind::Gauge,
        "Unix time of the last successful run, by event.",
    );
    for (event, t) in &c.last_success {
        w.sample(
            "qoslane_last_success_timestamp_seconds",
            &[("event", event)],
            t,
        );
    }
    w.family(
        "qoslane_log_lines_dropped_total",
        Kind::Counter,
        "Log lines dropped because the journal, syslog or stderr could not take them before the deadline.",
    );
    w.sample("qoslane_log_lines_dropped_total", &[], c.log_lines_dropped);
    w.family(
        "qoslane_settings_gone_total",
        Kind::Counter,
        "Node settings found gone (their file vanished: driver reload, HCA reset) by event; nothing was applied or restored there.",
    );
    for (event, n) in &every_event(&c.settings_gone) {
        w.sample("qoslane_settings_gone_total", &[("event", event)], n);
    }
    w.family(
        "qoslane_qos_fallbacks_total",
        Kind::Counter,
        "Prologs whose job's QoS could not be learnt (the default level was used, or the job refused under on_unknown_qos: fail_job), by reason.",
    );
    let reasons = crate::job::qos::Fallback::ALL.iter().map(|f| f.as_str());
    for (reason, n) in &with_every(&c.qos_fallbacks, reasons) {
        w.sample("qoslane_qos_fallbacks_total", &[("reason", reason)], n);
    }
    w.family(
        "qoslane_health_warnings",
        Kind::Gauge,
        "Warnings of the last health run (a run with warnings is not a success).",
    );
    w.sample("qoslane_health_warnings", &[], c.health_warnings);
    w.family(
        "qoslane_node_lock_held_seconds",
        Kind::Gauge,
        "How long a transaction had held the node lock when the last health run looked (0: free).",
    );
    w.sample(
        "qoslane_node_lock_held_seconds",
        &[],
        c.node_lock_held_seconds,
    );
    w.family(
        "qoslane_off_level_bytes_total",
        Kind::Counter,
        "Bytes jobs that ran alone on this node sent on SLs other than their level's, by level (their ports' PortXmitDataSL between Prolog and Epilog).",
    );
    let levels = g.active_jobs.keys().map(String::as_str);
    for (level, n) in &with_every(&c.off_level_bytes, levels) {
        w.sample("qoslane_off_level_bytes_total", &[("level", level)], n);
    }
    w.family(
        "qoslane_xmit_wait_ticks_total",
        Kind::Counter,
        "Ticks the port had data on the VL and could not send it (PortVLXmitWait, counted between the runs that read it): the node's own ports (device: the HCA) by its Prologs and Epilogs, and the first hop's port toward the node (device: the switch) by health; level: the levels whose virtual_lane it is.",
    );
    for (port, ticks) in &c.xmit_wait_ticks {
        let (device, n) = port.rsplit_once('/').unwrap_or((port, ""));
        for (vl, t) in (0u8..).zip(ticks) {
            let level = g.vl_levels.get(&vl).map_or("", String::as_str);
            if *t > 0 || !level.is_empty() {
                let vl = vl.to_string();
                let labels = [
                    ("device", device),
                    ("port", n),
                    ("vl", &vl),
                    ("level", level),
                ];
                w.sample("qoslane_xmit_wait_ticks_total", &labels, t);
            }
        }
    }
    w.family(
        "qoslane_build_info",
        Kind::Gauge,
        "Always 1; the labels are the qoslane build that wrote this file (version, package revision, commit).",
    );
    w.sample("qoslane_build_info", &nodeio::build::labels(), 1);
    w.finish()
}

/// A per-event map with every counted event in it (zero where none ran
/// yet), so each series exists from the first scrape.
fn every_event<T: Clone + Default>(by_event: &BTreeMap<String, T>) -> BTreeMap<String, T> {
    with_every(
        by_event,
        crate::report::Event::COUNTED.iter().map(|e| e.as_str()),
    )
}

/// `by_label` with every one of `labels` in it (zero where none counted yet).
fn with_every<'a, T: Clone + Default>(
    by_label: &BTreeMap<String, T>,
    labels: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, T> {
    let mut all = by_label.clone();
    for l in labels {
        all.entry(l.into()).or_default();
    }
    all
}

/// Runs by event and outcome, with every counted event and every outcome.
fn runs_by_outcome(
    runs: &BTreeMap<String, BTreeMap<String, u64>>,
) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut all = every_event(runs);
    for m in all.values_mut() {
        for oc in Outcome::ALL {
            m.entry(oc.as_str().into()).or_insert(0);
        }
    }
    all
}

/// One series per (device, port, level), even if an assessment listed a
/// port twice: a duplicate series makes node_exporter drop the file. A
/// port is aligned only if every listing says so.
fn aligned_series(fabric: &[Alignment]) -> BTreeMap<(&str, u32, &str), bool> {
    let mut series: BTreeMap<(&str, u32, &str), bool> = BTreeMap::new();
    for a in fabric {
        *series
            .entry((a.device.as_str(), a.port, a.level.as_str()))
            .or_insert(true) &= a.aligned;
    }
    series
}

/// First-hop ports summed by (level, verdict).
fn hop_series(first_hop: &[HopCount]) -> BTreeMap<(&str, &str), u64> {
    let mut series: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for h in first_hop {
        *series
            .entry((h.level.as_str(), h.verdict.as_str()))
            .or_default() += h.ports;
    }
    series
}
