//! The audit log: one JSON object per line, appended with a single write and
//! fsynced; never rewritten. Every hook run and every change gets a line.

pub mod evidence;
pub mod follow;
pub mod logged;
pub mod read;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::fabric::assessment::FabricVerdict;
use crate::job::JobId;
use crate::job::qos::QosSource;
use crate::paths::Paths;
use crate::report::health::HealthCheck;
use crate::report::{Event, Outcome, Payload, Report};
use crate::state::Change;

/// One audit line. Field names are a contract (docs/admin-guide.md §7).
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub time: String,
    pub node: String,
    pub event: Event,
    pub job_id: Option<JobId>,
    pub user: Option<String>,
    pub qos: Option<String>,
    pub qos_source: Option<QosSource>,
    pub level: Option<String>,
    pub service_level: Option<u8>,
    pub virtual_lane: Option<u8>,
    pub changes: Vec<Change>,
    pub fabric: FabricVerdict,
    pub outcome: Outcome,
    pub error: Option<String>,
    pub duration_ms: f64,
    pub mapping_sha256: Option<String>,
    /// Settings whose file had vanished (nothing applied or restored).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings_gone: Vec<String>,
    /// Things the admin should know that are not errors (fallbacks, warnings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// An Epilog's: what the job's ports' counters showed while it ran
    /// (`fabric::pma::CounterEvidence`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::fabric::pma::CounterEvidence>,
    /// The jobs whose level a run that is not theirs released (health, of
    /// jobs Slurm no longer has on the node): `log --job N` keeps the line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub released_jobs: Vec<JobId>,
}

impl Entry {
    /// The audit line of a finished run: its report, its error with causes.
    pub fn of(report: &Report, error: Option<&Error>, duration_ms: f64) -> Self {
        let j = &report.job;
        Self {
            job_id: j.job_id,
            user: j.user.clone(),
            qos: j.qos.clone(),
            qos_source: j.qos_source,
            level: j.level.clone(),
            service_level: j.service_level,
            virtual_lane: j.virtual_lane,
            changes: report.changes.clone(),
            fabric: report.fabric.clone(),
            error: error.map(Error::with_causes),
            duration_ms,
            mapping_sha256: report.mapping_sha256.clone(),
            notes: notes(report),
            settings_gone: report.settings_gone.clone(),
            evidence: match &report.payload {
                Payload::Epilog(e) => e.evidence.clone(),
                _ => None,
            },
            released_jobs: match &report.payload {
                Payload::Health(h) => h.released_jobs.clone(),
                _ => Vec::new(),
            },
            ..Self::new(report.event(), report.outcome)
        }
    }

    pub fn new(event: Event, outcome: Outcome) -> Self {
        Self {
            time: crate::time::now_rfc3339(),
            node: node_name(),
            event,
            job_id: None,
            user: None,
            qos: None,
            qos_source: None,
            level: None,
            service_level: None,
            virtual_lane: None,
            changes: Vec::new(),
            fabric: FabricVerdict::NotChecked,
            outcome,
            error: None,
            duration_ms: 0.0,
            mapping_sha256: None,
            settings_gone: Vec::new(),
            evidence: None,
            released_jobs: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// The audit line's notes: the report's, then a health run's checks, each
/// in its written form (`NAME: WARN: DETAIL`: `report::health`).
fn notes(report: &Report) -> Vec<String> {
    let mut notes = report.notes.clone();
    if let Payload::Health(h) = &report.payload {
        notes.extend(h.checks.iter().map(HealthCheck::note));
    }
    notes
}

/// Appends `entry` as one line with one write(2), then fsyncs
/// (`nodeio::append`: no symlink of anyone else's followed on the way, the
/// file itself never a symlink).
pub fn append(paths: &Paths, entry: &Entry) -> Result<()> {
    let mut line = serde_json::to_vec(entry)
        .map_err(|e| Error::Internal(format!("serialise audit entry: {e}")))?;
    line.push(b'\n');
    nodeio::append::append_line(&paths.root, &paths.audit_log, &line, 0o640)?;
    Ok(())
}

/// The Slurm node name when run by slurmd, else the host name.
pub fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned()
        })
}
