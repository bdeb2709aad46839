//! What `qoslane status` shows, as one value: the JSON form is this,
//! serialised (`"schema": 1`, docs/admin-guide.md §8); the human form is
//! rendered from it. Made only by [`super::judge`]. Fields marked
//! `serde(skip)` carry a judgement the renderer needs but the JSON
//! contract spells otherwise.

use serde::Serialize;

use crate::config;
use crate::job::qos::QosSource;

/// The JSON form's version: bumped when a key changes meaning or goes.
pub const SCHEMA: u32 = 1;

#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub schema: u32,
    pub state: Condition,
    /// Why the state is `attention`, one line each.
    pub attention: Vec<String>,
    pub mapping: MappingState,
    pub fabric: FabricState,
    /// Each level's recorded grant (`/run/qoslane/grants.json`).
    pub grants: GrantsState,
    pub jobs: Vec<HeldLevel>,
    pub settings: Vec<SettingRow>,
    /// Settings whose file vanished while a job held them.
    pub settings_gone: Vec<String>,
    pub health: Option<Health>,
    pub journal: Option<PendingJournal>,
    /// State files that could not be read or trusted.
    pub state_errors: Vec<String>,
    pub last_problems: Vec<Problem>,
    pub audit: AuditState,
    /// Per level, the newest Epilog's counter evidence in the audit log's
    /// end.
    pub counters: Vec<LevelCounters>,
}

/// What the counters showed for a level's newest job (its Epilog's
/// `evidence`, as written).
#[derive(Debug, Serialize)]
pub struct LevelCounters {
    pub level: String,
    pub job_id: Option<u64>,
    pub time: String,
    pub evidence: serde_json::Value,
}

/// The node as a whole: in order, or something needs attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Ok,
    Attention,
}

/// The mapping, flat where scripts compare (the Omnia role syncs when
/// `sha256` differs from `last_known_good_sha256`).
#[derive(Debug, Serialize)]
pub struct MappingState {
    /// The installed file.
    pub path: String,
    /// Its content's hash (also when invalid); `None` when unreadable.
    pub sha256: Option<String>,
    pub valid: bool,
    /// Its first problem, when invalid.
    pub error: Option<String>,
    pub modified: Option<String>,
    pub last_known_good_sha256: Option<String>,
    /// When the last-known-good copy was written (a run promoted it).
    pub last_known_good_since: Option<String>,
    pub in_force: Option<InForce>,
    pub rejected: Option<config::Rejected>,
    /// Whether the installed file is the mapping in force (what
    /// `qoslane_mapping_valid` shows), and why not.
    pub installed_in_force: bool,
    pub installed_not_in_force: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct InForce {
    /// `file` or `last_known_good`.
    pub source: &'static str,
    pub sha256: String,
    /// When it became last-known-good (a run promoted it); `None` while no
    /// run has used it yet.
    pub since: Option<String>,
    /// Why the admin's file is not the one in force.
    pub problem: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct FabricState {
    /// The in-force mapping's `fabric_check`.
    pub check: Option<&'static str>,
    /// Why the cache could not be used.
    pub note: Option<String>,
    pub ports: Vec<PortState>,
}

#[derive(Debug, Serialize)]
pub struct PortState {
    pub port: String,
    pub probed_s_ago: u64,
    pub link_state: String,
    pub oper_vls: String,
    pub levels: Vec<LevelOnPort>,
}

#[derive(Debug, Serialize)]
pub struct LevelOnPort {
    pub level: String,
    pub service_level: u8,
    pub vl: u8,
    pub want_vl: Option<u8>,
    pub lane: crate::fabric::lane::Lane,
    pub problem: Option<String>,
}

/// The node's recorded grants, as `health`, `sync` or a Prolog decided them.
#[derive(Debug, Serialize)]
pub struct GrantsState {
    /// Who recorded them and when (`health 2026-…`); `None` when no record
    /// of the mapping in force exists.
    pub recorded_by: Option<String>,
    /// Why the record may no longer hold (older than the ports' probe, of
    /// another SM); `None` when it does.
    pub stale: Option<String>,
    /// Why the record could not be read, when it could not.
    pub error: Option<String>,
    pub levels: Vec<LevelGrant>,
}

/// One level's grant.
#[derive(Debug, Serialize)]
pub struct LevelGrant {
    pub level: String,
    pub decision: crate::grant::Decision,
    /// What the decision means for the level's jobs.
    pub meaning: &'static str,
    pub reasons: Vec<String>,
    pub warnings: Vec<String>,
}

/// A job record as status shows it (the keys are the audit's).
#[derive(Debug, Serialize)]
pub struct HeldLevel {
    pub job_id: u64,
    pub user: Option<String>,
    pub qos: Option<String>,
    pub qos_source: QosSource,
    pub level: String,
    pub service_level: u8,
    pub virtual_lane: Option<u8>,
    pub since: String,
    pub mapping_sha256: String,
    /// Its Epilog ran and failed (a setting it could not restore): when,
    /// and why. `None` otherwise.
    pub epilog_failed: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SettingRow {
    pub path: String,
    pub baseline: Option<String>,
    pub current: Option<String>,
    /// Why the current value could not be read.
    pub error: Option<String>,
    pub wanted: String,
    pub in_sync: bool,
}

/// The last health check in the audit log.
#[derive(Debug, Serialize)]
pub struct Health {
    pub time: String,
    pub outcome: String,
    pub error: Option<String>,
    /// The checks it warned about (its `WARN`/`FAIL` notes), first first.
    pub warnings: Vec<String>,
    /// Judged failed (the JSON says it as `outcome`).
    #[serde(skip)]
    pub failed: bool,
}

/// A transaction's journal left behind by a run that did not finish.
#[derive(Debug, Serialize)]
pub struct PendingJournal {
    pub event: String,
    pub job_id: Option<u64>,
    pub pid: u32,
    pub started: String,
}

/// A run that failed or rolled back, from the audit log.
#[derive(Debug, Serialize)]
pub struct Problem {
    pub time: String,
    pub event: String,
    pub job_id: Option<u64>,
    pub qos: Option<String>,
    pub level: Option<String>,
    pub outcome: String,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct AuditState {
    pub path: String,
    /// Entries read from the end of the log (bounded).
    pub entries_read: usize,
    pub problems: Vec<String>,
    /// Lines of the tail skipped as not audit entries (a torn or foreign
    /// line; named in `problems`). Absent when none was.
    #[serde(skip_serializing_if = "none_skipped")]
    pub skipped_lines: usize,
}

/// `skipped_lines` is written only when a line was skipped, so the JSON of
/// a clean log is as before.
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn none_skipped(n: &usize) -> bool {
    *n == 0
}
