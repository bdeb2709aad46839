//! What the metrics keep across runs ([`Counters`], `counters.json`), what
//! one finished run adds to them ([`Run`], derived from its report here:
//! [`Run::of`]) and the gauges that come from the node's state ([`Gauges`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fabric::pma;
use crate::fabric::policy::{Alignment, HopCount};
use crate::report::payload::HealthRun;
use crate::report::{Outcome, Payload, Report};

/// Histogram buckets (seconds): a Prolog should take milliseconds; Slurm's
/// window is seconds.
pub const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

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
    /// When `xmit_wait_last` was read, by port, when its run said so: a
    /// reading older than it is not counted (its stretch is in the newer
    /// one's delta).
    #[serde(default)]
    pub xmit_wait_read_at_ms: BTreeMap<String, u64>,
    /// Each running job's last counted reading of its bytes per SL (by job
    /// id): where the next stretch of its off-level bytes starts.
    #[serde(default)]
    pub job_sent: BTreeMap<String, Stretch>,
}

/// Where a job's next stretch of bytes starts: its last counted reading.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stretch {
    pub level: String,
    pub at_ms: u64,
    /// PortXmitDataSL by `DEVICE/PORT`.
    pub sent: BTreeMap<String, [u64; 16]>,
}

/// A job's bytes per SL as one run read them. Off-level bytes are counted
/// where they were read, each stretch once: a Prolog's reading starts the
/// job's first stretch, each health run that finds the job alone counts the
/// stretch since and starts the next (so they show during the job), its
/// Epilog counts the last.
#[derive(Debug)]
pub struct JobSent<'a> {
    pub job: String,
    pub level: &'a str,
    pub stage: Stage,
    /// PortXmitDataSL by `DEVICE/PORT`.
    pub sent: Vec<(String, [u64; 16])>,
    pub at_ms: u64,
}

/// Which run read a [`JobSent`].
#[derive(Debug, PartialEq, Eq)]
pub enum Stage {
    /// The Prolog's snapshot.
    Start,
    /// A health run, the job alone on the node: its SL, and the SLs of the
    /// node's own traffic (not off its level).
    During { sl: u8, not_off: Vec<u8> },
    /// The Epilog's: its SL and the node's traffic's SLs when it ran alone
    /// (`None`: shared, nothing of it counted); `whole`, the evidence's
    /// count, for a job whose first stretch was never started.
    End {
        alone: Option<(u8, Vec<u8>)>,
        whole: Option<u64>,
    },
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
    /// A job's bytes per SL as this run read them (a Prolog's, a lone
    /// job's at a health run, an Epilog's).
    pub job_sent: Option<JobSent<'a>>,
    /// A health run's: the jobs with a counter snapshot (the other jobs'
    /// stretches are forgotten).
    pub live_jobs: Option<&'a [String]>,
    /// PortVLXmitWait as this run read it (`DEVICE/PORT`, VL 0..=15): the
    /// node's own ports, and `SWITCH/PORT` for the first hop's toward it.
    pub xmit_wait: Vec<(String, [u64; 16])>,
    /// When a hook read `xmit_wait` (ms since the epoch); `None`: recorded
    /// as read now (health's first hop).
    pub xmit_wait_read_at_ms: Option<u64>,
}

impl<'a> Run<'a> {
    /// The run as the metrics see it, from its report: what every run
    /// counts, and what its event's payload adds (the fabric's gauges, a
    /// health run's warnings and lock, an Epilog's off-level bytes, the
    /// transmit wait a hook or health read).
    pub fn of(report: &'a Report, seconds: f64, log_lines_dropped: u64) -> Self {
        let fabric = report.payload.fabric();
        let health = match &report.payload {
            Payload::Health(h) => Some(h),
            _ => None,
        };
        let evidence = match &report.payload {
            Payload::Epilog(e) => e.evidence.as_ref(),
            _ => None,
        };
        Self {
            event: report.event().as_str(),
            outcome: report.outcome,
            succeeded: report.succeeded(),
            seconds,
            rolled_back: report.rolled_back,
            fabric: fabric.and_then(|f| f.alignment.clone()),
            log_lines_dropped,
            settings_gone: u64::try_from(report.settings_gone.len()).unwrap_or(u64::MAX),
            first_hop: fabric.and_then(|f| f.first_hop.clone()),
            qos_fallback: report.job.qos_fallback,
            health_warnings: health.map(|h| u64::try_from(h.warnings()).unwrap_or(u64::MAX)),
            node_lock_held_seconds: health.and_then(|h| h.lock_held_seconds),
            job_sent: job_sent(report, health, evidence),
            live_jobs: health.and_then(|h| Some(h.counters.as_ref()?.jobs.as_slice())),
            xmit_wait: xmit_wait(report, health),
            xmit_wait_read_at_ms: report.payload.counters_read_at_ms(),
        }
    }
}

/// A job's bytes per SL as `report`'s run read them, and which run it was.
fn job_sent<'a>(
    report: &'a Report,
    health: Option<&'a HealthRun>,
    evidence: Option<&'a pma::CounterEvidence>,
) -> Option<JobSent<'a>> {
    let sent: Vec<(String, [u64; 16])> = report
        .payload
        .counters()
        .iter()
        .filter_map(|p| match p.readings.get(&pma::Kind::XmitDataSl) {
            Some(pma::Reading::Values(v)) => Some((p.port.to_string(), *v)),
            _ => None,
        })
        .collect();
    let at_ms = report.payload.counters_read_at_ms()?;
    let (job, level, stage) = match (&report.payload, health, evidence) {
        (Payload::Prolog(_), _, _) => (
            report.job.job_id?.to_string(),
            report.job.level.as_deref()?,
            Stage::Start,
        ),
        (Payload::Health(_), Some(h), _) => {
            let a = h.counters.as_ref()?.alone.as_ref()?;
            let stage = Stage::During {
                sl: a.sl,
                not_off: a.sm_traffic_sls.clone(),
            };
            (a.job.to_string(), a.level.as_str(), stage)
        }
        (Payload::Epilog(_), _, Some(e)) => (
            report.job.job_id?.to_string(),
            report.job.level.as_deref()?,
            Stage::End {
                alone: e
                    .sl
                    .filter(|_| e.alone)
                    .map(|sl| (sl, e.sm_traffic_sls.clone())),
                whole: e.off_level_bytes,
            },
        ),
        _ => return None,
    };
    Some(JobSent {
        job,
        level,
        stage,
        sent,
        at_ms,
    })
}

/// The bytes sent off `sl` (and off `not_off`) from `from` to `to`, where
/// the counters say how much (saturated or cleared: nothing).
fn off_level(from: &Stretch, to: &[(String, [u64; 16])], sl: u8, not_off: &[u8]) -> u64 {
    let mut n = 0u64;
    for (port, now) in to {
        let Some(before) = from.sent.get(port) else {
            continue;
        };
        for (s, (b, a)) in (0u8..).zip(before.iter().zip(now)) {
            if s == sl || not_off.contains(&s) {
                continue;
            }
            if let pma::Delta::Count(d) = pma::delta(pma::Kind::XmitDataSl, *b, *a) {
                n = n.saturating_add(d);
            }
        }
    }
    n
}

/// PortVLXmitWait as a run read it: a hook's of the node's own ports
/// (`DEVICE/PORT`), health's of the first hop's port toward the node
/// (`SWITCH/PORT`).
fn xmit_wait(report: &Report, health: Option<&HealthRun>) -> Vec<(String, [u64; 16])> {
    report
        .payload
        .counters()
        .iter()
        .filter_map(|p| match p.readings.get(&pma::Kind::VlXmitWait) {
            Some(pma::Reading::Values(v)) => Some((p.port.to_string(), *v)),
            _ => None,
        })
        .chain(
            health
                .into_iter()
                .flat_map(|h| &h.first_hop_wait)
                .filter_map(|w| Some((format!("{}/{}", w.name, w.port), w.values()?))),
        )
        .collect()
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
        if let Some(j) = &run.job_sent {
            self.count_sent(j);
        }
        if let (Some(jobs), Some(at)) = (run.live_jobs, run.xmit_wait_read_at_ms) {
            self.job_sent
                .retain(|job, s| jobs.contains(job) || s.at_ms >= at);
        }
        for (port, now) in &run.xmit_wait {
            if let Some(at) = run.xmit_wait_read_at_ms {
                match self.xmit_wait_read_at_ms.get(port) {
                    // Another hook read later and recorded first: its delta
                    // covers this reading's stretch already.
                    Some(last) if at < *last => continue,
                    _ => {
                        self.xmit_wait_read_at_ms.insert(port.clone(), at);
                    }
                }
            }
            let total = self.xmit_wait_ticks.entry(port.clone()).or_default();
            if let Some(last) = self.xmit_wait_last.get(port) {
                for ((t, l), n) in total.iter_mut().zip(last).zip(now) {
                    // Only what the counter says passed: a saturated or
                    // cleared one adds nothing.
                    if let pma::Delta::Count(d) = pma::delta(pma::Kind::VlXmitWait, *l, *n) {
                        *t = t.saturating_add(d);
                    }
                }
            }
            self.xmit_wait_last.insert(port.clone(), *now);
        }
    }
}

impl Counters {
    /// A job's off-level bytes of the stretch `j` ends, counted once (see
    /// [`JobSent`]); a reading older than the job's last counted one counts
    /// nothing (its stretch is in the newer one's).
    fn count_sent(&mut self, j: &JobSent<'_>) {
        let stretch = || Stretch {
            level: j.level.to_owned(),
            at_ms: j.at_ms,
            sent: j.sent.iter().cloned().collect(),
        };
        let mut off = 0;
        match &j.stage {
            Stage::Start => {
                self.job_sent.insert(j.job.clone(), stretch());
            }
            Stage::During { sl, not_off } => match self.job_sent.get(&j.job) {
                Some(from) if from.at_ms >= j.at_ms => {}
                Some(from) => {
                    off = off_level(from, &j.sent, *sl, not_off);
                    self.job_sent.insert(j.job.clone(), stretch());
                }
                None => {
                    self.job_sent.insert(j.job.clone(), stretch());
                }
            },
            Stage::End { alone, whole } => match (self.job_sent.remove(&j.job), alone) {
                (Some(from), Some((sl, not_off))) if from.at_ms < j.at_ms => {
                    off = off_level(&from, &j.sent, *sl, not_off);
                }
                (None, Some(_)) => off = whole.unwrap_or(0),
                _ => {}
            },
        }
        if off > 0 || j.stage != Stage::Start {
            let total = self.off_level_bytes.entry(j.level.to_owned()).or_default();
            *total = total.saturating_add(off);
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
    /// Level → its `on_failure` as the mapping in force sets it
    /// (`qoslane_level_info`); empty when no mapping could be read.
    pub on_failure: BTreeMap<String, &'static str>,
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
            on_failure: BTreeMap::new(),
            mapping_valid: false,
            vl_levels: BTreeMap::new(),
        };
        for level in active {
            *g.active_jobs.entry(level).or_default() += 1;
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hook's run that read `ticks` on VL 0 of mlx5_0/1.
    fn hook(ticks: u64, read_at_ms: u64) -> Run<'static> {
        let mut v = [0; 16];
        v[0] = ticks;
        Run {
            event: "epilog",
            outcome: Outcome::Unchanged,
            succeeded: true,
            seconds: 0.01,
            rolled_back: false,
            fabric: None,
            log_lines_dropped: 0,
            settings_gone: 0,
            first_hop: None,
            qos_fallback: None,
            health_warnings: None,
            node_lock_held_seconds: None,
            job_sent: None,
            live_jobs: None,
            xmit_wait: vec![("mlx5_0/1".into(), v)],
            xmit_wait_read_at_ms: Some(read_at_ms),
        }
    }

    /// Issue 39, suspected case (confirmed): two hooks read the wait after
    /// their transactions, so the one that read later can record first.
    /// The earlier reading then looked like a cleared counter (nothing)
    /// and the next one counted its stretch again.
    #[test]
    fn a_wait_reading_recorded_after_a_later_one_counts_nothing_twice() {
        let mut c = Counters::default();
        c.record(&hook(50, 1_000));
        // Read 100 (hook A), then 200 (hook B); B records first.
        c.record(&hook(200, 3_000));
        c.record(&hook(100, 2_000));
        c.record(&hook(300, 4_000));
        assert_eq!(c.xmit_wait_ticks["mlx5_0/1"][0], 250, "300 - 50");
        assert_eq!(c.xmit_wait_last["mlx5_0/1"][0], 300);
        // A cleared counter read later still counts nothing and starts
        // the next stretch.
        c.record(&hook(10, 5_000));
        c.record(&hook(40, 6_000));
        assert_eq!(c.xmit_wait_ticks["mlx5_0/1"][0], 280);
    }

    fn sent(stage: Stage, sl0: u64, sl3: u64, at_ms: u64) -> JobSent<'static> {
        let mut v = [0; 16];
        v[0] = sl0;
        v[3] = sl3;
        JobSent {
            job: "7".into(),
            level: "mc",
            stage,
            sent: vec![("mlx5_0/1".into(), v)],
            at_ms,
        }
    }

    fn during() -> Stage {
        Stage::During {
            sl: 3,
            not_off: vec![1],
        }
    }

    /// Issue 35: a lone job's bytes off its SL are counted during the job
    /// (each health run counts its stretch) and the Epilog counts only the
    /// rest: each byte once, whatever order the runs record in.
    #[test]
    fn off_level_bytes_are_counted_during_the_job_each_stretch_once() {
        let mut c = Counters::default();
        c.count_sent(&sent(Stage::Start, 100, 0, 1_000));
        c.count_sent(&sent(during(), 150, 9, 2_000));
        assert_eq!(c.off_level_bytes["mc"], 200, "50 units of SL 0, x4");
        // A health run that read earlier than the last counted reading
        // recorded later: nothing twice.
        c.count_sent(&sent(during(), 120, 9, 1_500));
        assert_eq!(c.off_level_bytes["mc"], 200);
        c.count_sent(&sent(during(), 160, 9, 3_000));
        assert_eq!(c.off_level_bytes["mc"], 240);
        let end = || Stage::End {
            alone: Some((3, vec![1])),
            whole: Some(400),
        };
        c.count_sent(&sent(end(), 200, 9, 4_000));
        assert_eq!(c.off_level_bytes["mc"], 400, "the whole job, once");
        assert!(c.job_sent.is_empty(), "its stretch forgotten");
        // A job whose stretch never started (an older Prolog) counts the
        // evidence's whole; a shared one nothing.
        c.count_sent(&sent(end(), 0, 0, 5_000));
        assert_eq!(c.off_level_bytes["mc"], 800);
        c.count_sent(&sent(Stage::Start, 0, 0, 6_000));
        c.count_sent(&sent(
            Stage::End {
                alone: None,
                whole: None,
            },
            500,
            0,
            7_000,
        ));
        assert_eq!(c.off_level_bytes["mc"], 800);
    }
}
