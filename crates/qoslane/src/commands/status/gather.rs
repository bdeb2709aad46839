//! Reading what `qoslane status` shows: state files, the mapping and its
//! last-known-good copy, the fabric cache, the settings' current values, the
//! end of the audit log. Only reads (no lock, nothing created) and judges
//! nothing: [`super::judge`] decides what is in order. State that cannot be
//! read or trusted is a fact too (`state_errors`), never fatal.

use std::collections::BTreeMap;
use std::path::Path;

use crate::audit::read::{self as audit_read, Found};
use crate::config::{self, Loaded, Rejected};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::fabric::cache;
use crate::job::JobId;
use crate::paths::Paths;
use crate::settings;
use crate::state::{self, JobRecord, NodeState, Store};

/// At most this much of the audit log is read, from its end.
const AUDIT_TAIL_BYTES: u64 = 256 * 1024;
/// Entries looked at for problems and the last health check.
const AUDIT_TAIL_ENTRIES: usize = 500;

/// Everything status reads, as read.
#[derive(Debug)]
pub struct Facts {
    /// The audit log's path, as shown.
    pub audit_path: String,
    /// State files that could not be read or trusted (`what: error`).
    pub state_errors: Vec<String>,
    /// State files this user may not read (`what: error`): not a fault of
    /// the node.
    pub unreadable: Vec<String>,
    /// Who reads (the effective uid).
    pub uid: u32,
    pub records: BTreeMap<JobId, JobRecord>,
    pub node: NodeState,
    pub journal: Option<state::Journal>,
    pub mapping: MappingFacts,
    /// The fabric cache (no SMP query: status only reads) and why it could
    /// not be used.
    pub cache: Vec<cache::CachedPort>,
    pub cache_note: Option<String>,
    pub now_ms: u64,
    /// Every setting the active jobs (or the baseline) want, read now.
    pub settings: Vec<SettingNow>,
    /// The newest entries of the audit log.
    pub audit: Found,
    /// The recorded grants, or why they could not be read.
    pub grants: std::result::Result<Option<crate::grant::Record>, String>,
}

/// The mapping: the admin's file, what a run would use now, last-known-good.
#[derive(Debug)]
pub struct MappingFacts {
    /// The installed file's path, as shown.
    pub path: String,
    /// Its content's hash (also when invalid; `None` when unreadable), its
    /// first problem, when it was written.
    pub sha256: Option<String>,
    pub error: Option<String>,
    pub modified: Option<String>,
    /// The last-known-good copy's hash and when it was written.
    pub last_known_good_sha256: Option<String>,
    pub last_known_good_since: Option<String>,
    /// The mapping refused last (any file's).
    pub rejected: Option<Rejected>,
    /// What a run would use now, or why nothing.
    pub loaded: std::result::Result<Loaded, String>,
    /// Whether the installed file is the mapping in force (the
    /// `qoslane_mapping_valid` gauge's fact).
    pub installed: config::Installed,
}

/// One setting path: what it should hold and what it holds.
#[derive(Debug)]
pub struct SettingNow {
    pub path: String,
    pub wanted: String,
    /// The current value, or why it could not be read.
    pub current: std::result::Result<String, String>,
}

pub fn gather(paths: &Paths, deadline: &Deadline) -> Facts {
    let mut state_errors = Vec::new();
    let mut unreadable = Vec::new();
    let store = Store::read_only(paths);
    let mut lists = (&mut state_errors, &mut unreadable);
    let records = got(&mut lists, "job records", store.records());
    let node = got(&mut lists, "node state", store.node_state());
    let journal = got(&mut lists, "journal", store.journal());

    let (sha256, error) = match config::read_valid(paths, &paths.config) {
        Ok((_, sha, _)) => (Some(sha), None),
        Err(e) => (
            config::read_text(&paths.config)
                .ok()
                .map(|t| config::sha256_hex(t.as_bytes())),
            Some(e.to_string()),
        ),
    };
    let last_known_good_sha256 = config::last_known_good_sha(paths);
    let last_known_good_since = last_known_good_sha256
        .as_ref()
        .and_then(|_| modified(paths, &paths.last_known_good()));

    let wants = crate::txn::desired(&state::claims_of(&records), &node.baseline);
    let settings = wants
        .iter()
        .map(|(path, want)| {
            let (crate::txn::Want::Set(wanted) | crate::txn::Want::Restore(wanted)) = want;
            SettingNow {
                path: path.clone(),
                wanted: wanted.clone(),
                current: settings::read(paths, path, deadline).map_err(|e| e.to_string()),
            }
        })
        .collect();
    let (cache, cache_note) = cache::load(paths);

    let mapping = MappingFacts {
        path: paths.config.display().to_string(),
        sha256,
        error,
        modified: modified(paths, &paths.config),
        last_known_good_sha256,
        last_known_good_since,
        rejected: config::rejected(paths),
        loaded: config::load(paths).map_err(|e| e.to_string()),
        installed: config::installed(paths),
    };
    Facts {
        audit_path: paths.audit_log.display().to_string(),
        state_errors,
        unreadable,
        uid: rustix::process::geteuid().as_raw(),
        records,
        node,
        journal,
        mapping,
        cache,
        cache_note,
        now_ms: cache::now_ms(),
        settings,
        audit: audit_read::tail(paths, AUDIT_TAIL_BYTES, AUDIT_TAIL_ENTRIES),
        grants: state::grants::load(paths).map_err(|e| e.to_string()),
    }
}

/// A state file's content, or its default with why it could not be read:
/// into the state errors, or (permission denied: this user may not read
/// it) into the unreadable ones.
fn got<T: Default>(
    lists: &mut (&mut Vec<String>, &mut Vec<String>),
    what: &str,
    r: Result<T>,
) -> T {
    r.unwrap_or_else(|e| {
        let denied = matches!(&e, crate::error::Error::Io { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied);
        let line = format!("{what}: {e}");
        if denied {
            lists.1.push(line);
        } else {
            lists.0.push(line);
        }
        T::default()
    })
}

/// When a trusted file was last written (`None`: absent or not ours).
fn modified(paths: &Paths, path: &Path) -> Option<String> {
    let o = nodeio::trusted::open(&paths.root, path, nodeio::trusted::Symlink::FollowTrusted)
        .ok()??;
    o.file
        .metadata()
        .ok()?
        .modified()
        .ok()
        .map(crate::time::rfc3339_seconds)
}
