//! What one act of `fabric watch` did (its JSON line), and the watcher's
//! own metrics: what it did since it started.

use std::collections::BTreeMap;

use nodeio::prom::{Kind as PromKind, Writer};

/// What one act did (the JSON line, the log line, the metrics).
#[derive(Debug, serde::Serialize)]
pub(super) struct Acted {
    /// `full` or `switches`.
    pub(super) audit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) why: Option<String>,
    pub(super) records: u64,
    pub(super) switches_named: usize,
    pub(super) topology_read: bool,
    pub(super) nodes_read: usize,
    /// Of them, nodes read again because the last audit found a problem there.
    pub(super) problem_nodes: usize,
    pub(super) egress_read: usize,
    /// Ports of the switches named checked by a sentinel read (PortInfo,
    /// one SL2VL row, VLArb): kept when it agreed, else read whole.
    pub(super) egress_checked: usize,
    pub(super) egress_kept: usize,
    pub(super) forwarding_read: usize,
    pub(super) forwarding_kept: usize,
    pub(super) smps: u64,
    /// Reading the topology (`ibnetdiscover`; 0: kept from the last act).
    pub(super) topology_ms: u64,
    /// Egress ports whose levels were judged again (the others' reading
    /// the same as the last act's: its judgements kept), and how long
    /// judging every level on every port took.
    pub(super) ports_judged: usize,
    pub(super) judge_ms: u64,
    /// The deadlock check's verdicts kept from the last act (forwarding
    /// tables, SL2VL rows and cabling the same), and how long it took.
    pub(super) deadlock_kept: bool,
    pub(super) deadlock_ms: u64,
    pub(super) audit_ms: u64,
    /// From the SM's record (`time_ns` of the sweep's end, else of the
    /// first record of the batch) to the verdict written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sm_to_verdict_ms: Option<f64>,
    /// Per level, the HCA ports the verdict says lose it.
    pub(super) lost: BTreeMap<String, usize>,
    /// Nodes whose ActiveFeatures were sent without a lost level's feature
    /// (`QOSLANE_SCONTROL` set), and sends that failed.
    pub(super) placement_sent: usize,
    pub(super) placement_failed: usize,
    pub(super) unread: usize,
}

/// The watcher's counts since it started.
#[derive(Debug, Default)]
pub(super) struct Counts {
    full: u64,
    switches: u64,
    pub(super) failed: u64,
    smps: u64,
}

impl Counts {
    pub(super) fn add(&mut self, a: &Acted) {
        if a.audit == "full" {
            self.full += 1;
        } else {
            self.switches += 1;
        }
        self.smps += a.smps;
    }

    pub(super) fn render(&self, a: &Acted) -> String {
        let mut w = Writer::new();
        w.family(
            "qoslane_fabric_watch_audits_total",
            PromKind::Counter,
            "Audits fabric watch made since it started, by kind (full; switches: only what the SM changed) or failed.",
        );
        w.sample(
            "qoslane_fabric_watch_audits_total",
            &[("audit", "full")],
            self.full,
        );
        w.sample(
            "qoslane_fabric_watch_audits_total",
            &[("audit", "switches")],
            self.switches,
        );
        w.sample(
            "qoslane_fabric_watch_audits_total",
            &[("audit", "failed")],
            self.failed,
        );
        w.family(
            "qoslane_fabric_watch_smps_total",
            PromKind::Counter,
            "MADs fabric watch sent since it started.",
        );
        w.sample("qoslane_fabric_watch_smps_total", &[], self.smps);
        w.family(
            "qoslane_fabric_watch_last_egress_read",
            PromKind::Gauge,
            "Egress ports the last audit of fabric watch read (the rest kept from the last reading).",
        );
        w.sample("qoslane_fabric_watch_last_egress_read", &[], a.egress_read);
        if let Some(ms) = a.sm_to_verdict_ms {
            w.family(
                "qoslane_fabric_watch_last_latency_seconds",
                PromKind::Gauge,
                "From the SM's record to the fabric verdict written, in the last audit of fabric watch.",
            );
            w.sample(
                "qoslane_fabric_watch_last_latency_seconds",
                &[],
                (ms / 1000.0 * 1e6).round() / 1e6,
            );
        }
        w.finish()
    }
}
