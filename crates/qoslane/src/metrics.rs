//! Metrics: counters kept across runs in `/var/lib/qoslane/counters.json`
//! (hooks are short-lived processes), rendered in the classic Prometheus text
//! format into node_exporter's textfile directory, atomically, without
//! timestamps. Writing metrics never fails a hook. docs/metrics.md describes
//! every family.
//!
//! Concurrency: Prologs and Epilogs of different jobs run at once, and a run
//! that could not get the node lock still counts itself, so the
//! read-modify-write of the counters has its own lock
//! (`counters.lock` beside them, bounded wait).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::fabric::policy::{Alignment, HopCount};
use crate::paths::Paths;
use crate::report::Outcome;
use crate::state::fsutil;

/// Histogram buckets (seconds): a Prolog should take milliseconds; Slurm's
/// window is seconds.
pub const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The counters and their lock, in the lib directory. The counters are
/// public (0644: `qoslane metrics` may run as a metrics user); the lock is
/// private (nodeio::lock), so no user can hold it.
const COUNTERS_FILE: &str = "counters.json";
const COUNTERS_LOCK: &str = "counters.lock";
const PUBLISH_LOCK: &str = "publish.lock";

/// The least a run waits for the other runs' counter updates (a fraction of
/// a millisecond each); a run whose deadline is further waits until then, so
/// that no count is lost when hundreds of jobs start at once.
pub const COUNTERS_LOCK_WAIT: Duration = Duration::from_secs(1);

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
        // Whole nanoseconds: such a sum survives the JSON round trip exactly,
        // so every reader renders the same text.
        self.sum = ((self.sum + secs) * 1e9).round() / 1e9;
    }
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
    /// Log lines that could not be sent without waiting (nodeio::log).
    #[serde(default)]
    pub log_lines_dropped: u64,
    /// Settings found gone (their file vanished), by event.
    #[serde(default)]
    pub settings_gone: BTreeMap<String, u64>,
    /// The last first-hop check (`sync`, `health`).
    #[serde(default)]
    pub first_hop: Vec<HopCount>,
    /// Jobs whose QoS could not be learnt (the default level, or a refusal
    /// under `on_unknown_qos: fail_job`), by reason.
    #[serde(default)]
    pub qos_fallbacks: BTreeMap<String, u64>,
    /// The warnings of the last health run.
    #[serde(default)]
    pub health_warnings: u64,
    /// How long a transaction held the node lock when the last health run
    /// looked (0: free).
    #[serde(default)]
    pub node_lock_held_seconds: u64,
    /// Bytes jobs that ran alone sent on SLs other than their level's, by
    /// level (their Epilogs' counter evidence).
    #[serde(default)]
    pub off_level_bytes: BTreeMap<String, u64>,
    /// The node's ports' PortVLXmitWait: the last reading and the ticks
    /// counted since the first, by `DEVICE/PORT` (index: VL).
    #[serde(default)]
    pub xmit_wait_last: BTreeMap<String, [u64; 16]>,
    #[serde(default)]
    pub xmit_wait_ticks: BTreeMap<String, [u64; 16]>,
}

/// One finished run, as the metrics see it.
#[derive(Debug)]
pub struct Run<'a> {
    pub event: &'a str,
    pub outcome: Outcome,
    /// The outcome is a success and nothing was warned of
    /// (`Report::succeeded`): moves the last-success time.
    pub succeeded: bool,
    pub seconds: f64,
    pub rolled_back: bool,
    /// `Some` when this run assessed the fabric.
    pub fabric: Option<Vec<Alignment>>,
    /// Log lines this run dropped rather than wait for a sink.
    pub log_lines_dropped: u64,
    /// Settings this run found gone.
    pub settings_gone: u64,
    /// `Some` when this run read the first hop.
    pub first_hop: Option<Vec<HopCount>>,
    /// Why this run's job's QoS could not be learnt, if it could not.
    pub qos_fallback: Option<crate::job::qos::Fallback>,
    /// `Some` for a health run: how many warnings it found.
    pub health_warnings: Option<u64>,
    /// `Some` for a health run that saw the node lock: how long a
    /// transaction had held it.
    pub node_lock_held_seconds: Option<u64>,
    /// An Epilog's job's level and its off-level bytes (`CounterEvidence`).
    pub off_level_bytes: Option<(&'a str, u64)>,
    /// PortVLXmitWait as this run read it (`DEVICE/PORT`, VL 0..=15): the
    /// node's own ports, and `SWITCH/PORT` for the first hop's toward it.
    pub xmit_wait: Vec<(String, [u64; 16])>,
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
        if run.succeeded {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.last_success
                .insert(run.event.into(), (now * 1000.0).round() / 1000.0);
        }
        self.log_lines_dropped += run.log_lines_dropped;
        if run.settings_gone > 0 {
            *self.settings_gone.entry(run.event.into()).or_default() += run.settings_gone;
        }
        if let Some(f) = &run.fabric {
            self.fabric.clone_from(f);
        }
        if let Some(h) = &run.first_hop {
            self.first_hop.clone_from(h);
        }
        if let Some(f) = run.qos_fallback {
            *self.qos_fallbacks.entry(f.as_str().into()).or_default() += 1;
        }
        if let Some(w) = run.health_warnings {
            self.health_warnings = w;
        }
        if let Some(s) = run.node_lock_held_seconds {
            self.node_lock_held_seconds = s;
        }
        if let Some((level, n)) = run.off_level_bytes {
            let total = self.off_level_bytes.entry(level.into()).or_default();
            *total = total.saturating_add(n);
        }
        for (port, now) in &run.xmit_wait {
            let total = self.xmit_wait_ticks.entry(port.clone()).or_default();
            if let Some(last) = self.xmit_wait_last.get(port) {
                for ((t, l), n) in total.iter_mut().zip(last).zip(now) {
                    // Only what the counter says passed: a saturated or
                    // cleared one adds nothing.
                    let kind = crate::fabric::pma::Kind::VlXmitWait;
                    if let crate::fabric::pma::Delta::Count(d) =
                        crate::fabric::pma::delta(kind, *l, *n)
                    {
                        *t = t.saturating_add(d);
                    }
                }
            }
            self.xmit_wait_last.insert(port.clone(), *now);
        }
    }
}

/// The gauges that come from the node's state rather than from counters.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Every level of the mapping (zero when none is active) → active jobs.
    pub active_jobs: BTreeMap<String, u64>,
    pub mapping_sha256: Option<String>,
    /// Level → whether a job of it starting now gets its SL, from the
    /// node's recorded grants (`grant::Record`); empty when none is
    /// recorded.
    pub granted: BTreeMap<String, bool>,
    /// Whether the installed mapping file is the mapping in force
    /// (`config::Installed`).
    pub mapping_valid: bool,
    /// VL → the levels the mapping in force names it for (`virtual_lane`).
    pub vl_levels: BTreeMap<u8, String>,
}

impl Gauges {
    /// The gauges from what the caller read: every level of the mapping in
    /// force (zero when none is active), its hash, and the level of every
    /// active job (one per job).
    pub fn new(
        levels: impl IntoIterator<Item = String>,
        mapping_sha256: Option<String>,
        active: impl IntoIterator<Item = String>,
    ) -> Self {
        let mut g = Self {
            active_jobs: levels.into_iter().map(|l| (l, 0)).collect(),
            mapping_sha256,
            granted: BTreeMap::new(),
            mapping_valid: false,
            vl_levels: BTreeMap::new(),
        };
        for level in active {
            *g.active_jobs.entry(level).or_default() += 1;
        }
        g
    }
}

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

/// The counters so far; all zero when the file does not exist yet.
pub fn load(paths: &Paths) -> Result<Counters> {
    Ok(fsutil::read_json(paths, &paths.counters())?.unwrap_or_default())
}

/// Adds `run` to the counters, then brings the textfile up to date. The
/// counters have their own lock, so this is safe with or without the node
/// lock. Under that lock only the read-add-replace of `counters.json`
/// happens; the file is not flushed (a node crash costs at most the last
/// counts: `nodeio::counter_file`). Errors are returned for logging;
/// callers never fail a hook on them.
pub fn record_and_publish(
    paths: &Paths,
    run: &Run<'_>,
    deadline: std::time::Instant,
    gauges: &dyn Fn() -> Gauges,
) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.lib_dir)?;
    let updated = nodeio::counter_file::update::<Counters, _>(
        &paths.root,
        &paths.lib_dir,
        COUNTERS_FILE,
        COUNTERS_LOCK,
        crate::state::PUBLIC,
        deadline.max(std::time::Instant::now() + COUNTERS_LOCK_WAIT),
        |c| c.record(run),
    )?;
    if let Some(note) = &updated.restarted {
        // Prometheus' rate() takes a reset in its stride.
        crate::log::warn(&format!("metrics: {note}"));
    }
    // Visible at once, not flushed: see nodeio::counter_file.
    updated.release()?;
    publish_latest(paths, gauges)
}

/// Rewrites the textfile from the counters and the gauges as the node's
/// state has them now (`gauges` reads them: the caller knows where) — once for many runs when they finish together.
///
/// One run publishes at a time (`publish.lock`, never waited for). A run
/// that finds another one publishing leaves it to that one: when done, a
/// publisher looks at the counters again and publishes again if any run
/// counted meanwhile. Every run counts after its transaction committed, so
/// the last textfile written shows every count and the final state, while
/// N jobs ending at once read the N job records far fewer than N times.
fn publish_latest(paths: &Paths, gauges: &dyn Fn() -> Gauges) -> Result<()> {
    let dir = nodeio::walk::open_dir(
        &paths.root,
        &paths.lib_dir,
        nodeio::walk::Judge::Trusted,
        None,
    )?;
    // The counters are read under the publish lock, so what is published
    // never goes back (a run publishing the value it counted, after another
    // published a later one, made a counter drop for a scrape: a reset to
    // Prometheus). Bounded: each round is a few milliseconds.
    for _ in 0..64 {
        let publishing = match nodeio::lock::acquire(&dir, PUBLISH_LOCK, std::time::Instant::now())
        {
            Ok(l) => l,
            Err(nodeio::Error::LockTimeout { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let c = load(paths)?;
        publish(paths, &c, &gauges())?;
        drop(publishing);
        if load(paths).is_ok_and(|now| now == c) {
            return Ok(());
        }
    }
    Ok(())
}

/// Writes the textfile (`nodeio::atomic`: a temp name node_exporter
/// ignores, then a rename, in a directory reached without following anyone
/// else's symlink: it belongs to the `prometheus` user on Debian). Not
/// flushed to disk: it is rewritten from the counters by every run; a crash
/// before write-back leaves the previous file (or an empty one) until then.
pub fn publish(paths: &Paths, c: &Counters, gauges: &Gauges) -> Result<()> {
    let _visible = nodeio::atomic::replace(
        &paths.root,
        &paths.textfile(),
        render(c, gauges).as_bytes(),
        crate::state::PUBLIC,
        nodeio::walk::Judge::NoFollow,
        true,
        nodeio::atomic::Durability::Visible,
    )?;
    Ok(())
}
