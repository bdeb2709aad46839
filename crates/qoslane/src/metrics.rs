//! Metrics: counters kept across runs in `/var/lib/qoslane/counters.json`
//! (hooks are short-lived processes), rendered in the classic Prometheus text
//! format into node_exporter's textfile directory, atomically, without
//! timestamps. Writing metrics never fails a hook.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::audit::Outcome;
use crate::error::Result;
use crate::paths::Paths;
use crate::state::fsutil;

/// Histogram buckets (seconds): a Prolog should take milliseconds; Slurm's
/// window is seconds.
pub const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Events that always have series, so rates and alerts see zeros.
pub const EVENTS: &[&str] = &["prolog", "epilog", "sync", "recover", "health"];

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is +Inf.
    pub counts: Vec<u64>,
    pub sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        self.counts.resize(BUCKETS.len() + 1, 0);
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum += secs;
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alignment {
    pub device: String,
    pub port: u32,
    pub level: String,
    pub aligned: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// event → outcome → runs.
    pub runs: BTreeMap<String, BTreeMap<String, u64>>,
    pub rollbacks: BTreeMap<String, u64>,
    pub durations: BTreeMap<String, Histogram>,
    /// event → unix seconds of the last successful run.
    pub last_success: BTreeMap<String, f64>,
    /// The last fabric assessment.
    pub fabric: Vec<Alignment>,
}

/// One finished run, as the metrics see it.
#[derive(Debug)]
pub struct Run<'a> {
    pub event: &'a str,
    pub outcome: Outcome,
    pub seconds: f64,
    pub rolled_back: bool,
    /// `Some` when this run assessed the fabric.
    pub fabric: Option<Vec<Alignment>>,
}

impl Counters {
    pub fn record(&mut self, run: &Run<'_>) {
        *self
            .runs
            .entry(run.event.into())
            .or_default()
            .entry(run.outcome.as_str().into())
            .or_default() += 1;
        if run.rolled_back {
            *self.rollbacks.entry(run.event.into()).or_default() += 1;
        }
        self.durations
            .entry(run.event.into())
            .or_default()
            .observe(run.seconds);
        if run.outcome.is_success() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.last_success
                .insert(run.event.into(), (now * 1000.0).round() / 1000.0);
        }
        if let Some(f) = &run.fabric {
            self.fabric = f.clone();
        }
    }
}

/// The gauges that come from the node's state rather than from counters.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Every level of the mapping (zero when none is active) → active jobs.
    pub active_jobs: BTreeMap<String, u64>,
    pub mapping_sha256: Option<String>,
}

/// Escapes a label value for the text format.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Renders the families of DESIGN.md in the classic text format.
pub fn render(c: &Counters, g: &Gauges) -> String {
    let mut o = String::new();
    header(
        &mut o,
        "qoslane_hook_runs_total",
        "counter",
        "qoslane runs by event and outcome.",
    );
    let mut runs = c.runs.clone();
    for e in EVENTS {
        let m = runs.entry((*e).into()).or_default();
        for oc in Outcome::ALL {
            m.entry(oc.as_str().into()).or_insert(0);
        }
    }
    for (event, outcomes) in &runs {
        for (outcome, n) in outcomes {
            let _ = writeln!(
                o,
                "qoslane_hook_runs_total{{event=\"{}\",outcome=\"{}\"}} {n}",
                esc(event),
                esc(outcome)
            );
        }
    }
    header(
        &mut o,
        "qoslane_rollbacks_total",
        "counter",
        "Transactions rolled back (settings restored) by event.",
    );
    let mut rb = c.rollbacks.clone();
    for e in EVENTS {
        rb.entry((*e).into()).or_insert(0);
    }
    for (event, n) in &rb {
        let _ = writeln!(o, "qoslane_rollbacks_total{{event=\"{}\"}} {n}", esc(event));
    }
    header(
        &mut o,
        "qoslane_hook_duration_seconds",
        "histogram",
        "Wall time of qoslane runs by event.",
    );
    for (event, h) in &c.durations {
        let mut cum = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cum += h.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(
                o,
                "qoslane_hook_duration_seconds_bucket{{event=\"{}\",le=\"{b}\"}} {cum}",
                esc(event)
            );
        }
        cum += h.counts.get(BUCKETS.len()).copied().unwrap_or(0);
        let _ = writeln!(
            o,
            "qoslane_hook_duration_seconds_bucket{{event=\"{}\",le=\"+Inf\"}} {cum}",
            esc(event)
        );
        let _ = writeln!(
            o,
            "qoslane_hook_duration_seconds_sum{{event=\"{}\"}} {}",
            esc(event),
            h.sum
        );
        let _ = writeln!(
            o,
            "qoslane_hook_duration_seconds_count{{event=\"{}\"}} {cum}",
            esc(event)
        );
    }
    header(
        &mut o,
        "qoslane_active_jobs",
        "gauge",
        "Jobs running on this node by granted level.",
    );
    for (level, n) in &g.active_jobs {
        let _ = writeln!(o, "qoslane_active_jobs{{level=\"{}\"}} {n}", esc(level));
    }
    header(
        &mut o,
        "qoslane_fabric_aligned",
        "gauge",
        "1 when the level's SL lands on its VL on the port, else 0.",
    );
    for a in &c.fabric {
        let _ = writeln!(
            o,
            "qoslane_fabric_aligned{{device=\"{}\",port=\"{}\",level=\"{}\"}} {}",
            esc(&a.device),
            a.port,
            esc(&a.level),
            u8::from(a.aligned)
        );
    }
    header(
        &mut o,
        "qoslane_mapping_info",
        "gauge",
        "The mapping in force (last known good), by SHA-256.",
    );
    if let Some(sha) = &g.mapping_sha256 {
        let _ = writeln!(o, "qoslane_mapping_info{{sha256=\"{}\"}} 1", esc(sha));
    }
    header(
        &mut o,
        "qoslane_last_success_timestamp_seconds",
        "gauge",
        "Unix time of the last successful run by event.",
    );
    for (event, t) in &c.last_success {
        let _ = writeln!(
            o,
            "qoslane_last_success_timestamp_seconds{{event=\"{}\"}} {t}",
            esc(event)
        );
    }
    o
}

pub fn load(paths: &Paths) -> Result<Counters> {
    Ok(fsutil::read_json(&paths.counters())?.unwrap_or_default())
}

/// Adds `run` to the counters and rewrites the textfile. Call under the node
/// lock. Errors are returned for logging; callers never fail a hook on them.
pub fn record_and_publish(paths: &Paths, run: &Run<'_>, gauges: &Gauges) -> Result<()> {
    let mut c = load(paths).unwrap_or_default();
    c.record(run);
    fsutil::write_json(&paths.counters(), &c, crate::state::PRIVATE)?;
    publish(paths, &c, gauges)
}

/// Writes the textfile: a temp name node_exporter ignores, then a rename.
pub fn publish(paths: &Paths, c: &Counters, gauges: &Gauges) -> Result<()> {
    fsutil::ensure_dir_relaxed(&paths.textfile_dir)?;
    fsutil::atomic_write(
        &paths.textfile(),
        render(c, gauges).as_bytes(),
        crate::state::PUBLIC,
    )
}
