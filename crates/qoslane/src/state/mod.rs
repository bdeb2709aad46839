//! What qoslane keeps on the node: per-job records, the node's baseline, the
//! write-ahead journal (under `/run/qoslane`, tmpfs: gone at reboot like the
//! settings it guards) and the last-known-good mapping (under
//! `/var/lib/qoslane`). File formats are JSON; every write is atomic.

pub mod fsutil;
pub mod grants;
pub mod lock;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::JobId;
use crate::job::qos::QosSource;
use crate::paths::Paths;

/// Mode of files the job user must read (records) and of the others.
pub const PUBLIC: u32 = 0o644;
pub const PRIVATE: u32 = 0o600;

/// What the Prolog granted a job; the TaskProlog and Epilog read it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRecord {
    pub job_id: JobId,
    pub time: String,
    pub user: Option<String>,
    pub qos: Option<String>,
    pub qos_source: QosSource,
    pub level: String,
    /// 0 is the highest priority; decides whose node settings win.
    pub rank: usize,
    pub service_level: u8,
    pub virtual_lane: Option<u8>,
    pub traffic_class: Option<u8>,
    /// The node settings this job asks for, as `(path, value)`.
    pub settings: Vec<(String, String)>,
    /// The TaskProlog exports, fixed at job start.
    pub exports: Vec<(String, String)>,
    /// The export table's variables held back for this node's link layer
    /// (a traffic class on an InfiniBand port): the TaskProlog unsets them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
    pub mapping_sha256: String,
}

/// What an active job's level holds on the node: the part of its record the
/// planner and the metrics need.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Claim {
    pub level: String,
    /// 0 is the highest priority; decides whose node settings win.
    pub rank: usize,
    /// The node settings the job asks for, as `(path, value)`.
    pub settings: Vec<(String, String)>,
}

impl Claim {
    pub fn of(r: &JobRecord) -> Arc<Self> {
        Arc::new(Self {
            level: r.level.clone(),
            rank: r.rank,
            settings: r.settings.clone(),
        })
    }
}

/// Every active job's claim, by job id. The jobs of one level share one
/// claim: cloning the set copies no settings.
pub type Claims = BTreeMap<JobId, Arc<Claim>>;

/// The claims of these records.
pub fn claims_of(records: &BTreeMap<JobId, JobRecord>) -> Claims {
    records.iter().map(|(j, r)| (*j, Claim::of(r))).collect()
}

/// The claims in `node.json`: one entry per distinct claim with the jobs
/// that hold it (`[{"level", "rank", "settings", "jobs": [ids]}]`), so 256
/// jobs of four levels are four entries, not 256 copies of the same paths.
mod grouped {
    use super::{Arc, BTreeMap, Claim, Claims, JobId};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Group {
        level: String,
        rank: usize,
        settings: Vec<(String, String)>,
        jobs: Vec<JobId>,
    }

    #[derive(Serialize)]
    struct GroupRef<'a> {
        level: &'a str,
        rank: usize,
        settings: &'a [(String, String)],
        jobs: Vec<JobId>,
    }

    #[expect(
        clippy::ref_option,
        reason = "serde's `with` hands the field by reference"
    )]
    pub fn serialize<S: Serializer>(claims: &Option<Claims>, s: S) -> Result<S::Ok, S::Error> {
        let Some(claims) = claims else {
            return s.serialize_none();
        };
        let mut groups: BTreeMap<&Claim, Vec<JobId>> = BTreeMap::new();
        for (job, claim) in claims {
            groups.entry(claim).or_default().push(*job);
        }
        let groups: Vec<GroupRef<'_>> = groups
            .into_iter()
            .map(|(c, jobs)| GroupRef {
                level: &c.level,
                rank: c.rank,
                settings: &c.settings,
                jobs,
            })
            .collect();
        s.serialize_some(&groups)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Claims>, D::Error> {
        let Some(groups) = Option::<Vec<Group>>::deserialize(d)? else {
            return Ok(None);
        };
        let mut out = Claims::new();
        for g in groups {
            let claim = Arc::new(Claim {
                level: g.level,
                rank: g.rank,
                settings: g.settings,
            });
            for job in g.jobs {
                if out.insert(job, Arc::clone(&claim)).is_some() {
                    return Err(serde::de::Error::custom(format!(
                        "job {job} holds two claims"
                    )));
                }
            }
        }
        Ok(Some(out))
    }
}

/// The node's baseline: the value each setting had before the first job
/// changed it. A path leaves the baseline when it is restored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeState {
    pub baseline: BTreeMap<String, String>,
    /// Settings found gone (their file vanished) while a job still holds
    /// them: reported once, skipped quietly after, until the file is back.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub gone: std::collections::BTreeSet<String>,
    /// The active jobs' claims, kept by the transaction that puts or removes
    /// their records (and journaled with this state): the planner and the
    /// metrics read this one file, not every record ([`Store::claims`]).
    /// `None` in a state written before qoslane kept it.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "grouped")]
    pub claims: Option<Claims>,
}

/// One setting change: the unit of apply and of rollback.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub path: String,
    pub before: String,
    pub after: String,
}

/// The write-ahead journal: enough to undo a transaction that did not finish.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub event: String,
    pub job_id: Option<JobId>,
    pub pid: u32,
    pub started: String,
    pub changes: Vec<Change>,
    /// The node state before the transaction.
    pub node_before: NodeState,
    /// Each touched job's record before the transaction (`None`: absent).
    pub records_before: Vec<(JobId, Option<JobRecord>)>,
}

/// The job whose record the job directory's entry `name` is: `ID.json`
/// (a temp file, live or left by a killed writer, is none).
fn record_id(name: &std::ffi::OsStr) -> Option<JobId> {
    let name = name.to_string_lossy();
    if fsutil::temp_file_writer(&name).is_some() {
        return None;
    }
    name.strip_suffix(".json")
        .and_then(|s| JobId::parse(s).ok())
}

/// The state directories of one node, checked and ready.
#[derive(Debug)]
pub struct Store<'p> {
    pub paths: &'p Paths,
}

impl<'p> Store<'p> {
    /// Creates the state directories when missing and checks their owner and
    /// modes (a symlink or a foreign owner is refused).
    pub fn open(paths: &'p Paths) -> Result<Self> {
        fsutil::ensure_dir(paths, &paths.run_dir)?;
        fsutil::ensure_dir(paths, &paths.jobs_dir())?;
        fsutil::ensure_dir(paths, &paths.lib_dir)?;
        Ok(Self { paths })
    }

    /// The store as it is, for readers (`status`): creates nothing. A
    /// directory that does not exist yet reads as empty.
    pub fn read_only(paths: &'p Paths) -> Self {
        Self { paths }
    }

    pub fn record(&self, job: JobId) -> Result<Option<JobRecord>> {
        fsutil::read_json(self.paths, &self.paths.job_record(job))
    }

    pub fn put_record(&self, r: &JobRecord) -> Result<()> {
        fsutil::write_json(self.paths, &self.paths.job_record(r.job_id), r, PUBLIC)
    }

    pub fn remove_record(&self, job: JobId) -> Result<()> {
        fsutil::remove(self.paths, &self.paths.job_record(job)).map(drop)
    }

    /// Every active job's record, by job id. Read-only: files that are not
    /// records (temp files, live or left by a killed writer) are skipped;
    /// [`Store::remove_stale_temp_files`] cleans the dead ones. (Removing
    /// them here raced with a live writer when `status` listed the records
    /// without the lock.)
    pub fn records(&self) -> Result<BTreeMap<JobId, JobRecord>> {
        let mut out = BTreeMap::new();
        for id in self.record_ids()? {
            if let Some(r) = self.record(id)? {
                out.insert(id, r);
            }
        }
        Ok(out)
    }

    /// The ids of the jobs that have a record (one directory listing, no
    /// record read). No job directory yet: none.
    pub fn record_ids(&self) -> Result<std::collections::BTreeSet<JobId>> {
        let dir = self.paths.jobs_dir();
        let mut out = std::collections::BTreeSet::new();
        let entries = match std::fs::read_dir(&dir) {
            // No job has started on this node yet (a reader's store).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            r => r.map_err(Error::io("list", &dir))?,
        };
        for entry in entries {
            let entry = entry.map_err(Error::io("list", &dir))?;
            if let Some(id) = record_id(&entry.file_name()) {
                out.insert(id);
            }
        }
        Ok(out)
    }

    /// [`Store::remove_stale_temp_files`], and the ids of the jobs that
    /// have a record, from the same listing of the job directory (`None`:
    /// not listed there — this run looked before). Under the node lock the
    /// records stay as listed until the holder writes one.
    pub fn remove_stale_temp_files_listing_records(
        &self,
    ) -> Option<std::collections::BTreeSet<JobId>> {
        let mut ids = None;
        for dir in [
            &self.paths.run_dir,
            &self.paths.jobs_dir(),
            &self.paths.notices_dir(),
            &self.paths.lib_dir,
        ] {
            let listed = fsutil::remove_stale_temp_files_listing(self.paths, dir);
            if *dir == self.paths.jobs_dir() {
                ids = listed.map(|names| names.iter().filter_map(|n| record_id(n)).collect());
            }
        }
        ids
    }

    /// The active jobs' claims: the node state's, checked against the
    /// listing of the records. A claim whose record is gone (removed by
    /// hand) is dropped, and a record with no claim (a state written before
    /// qoslane kept claims) is read, so the claims follow the records even
    /// where something other than a transaction changed them. One listing,
    /// and no record read in the steady state.
    pub fn claims(&self, node: &NodeState) -> Result<Claims> {
        self.claims_listed(node, self.record_ids()?)
    }

    /// [`Store::claims`], the records' ids listed already (`ids`: under
    /// the node lock, by [`Store::remove_stale_temp_files_listing_records`]).
    pub fn claims_listed(
        &self,
        node: &NodeState,
        ids: std::collections::BTreeSet<JobId>,
    ) -> Result<Claims> {
        let mut out = node.claims.clone().unwrap_or_default();
        out.retain(|id, _| ids.contains(id));
        for id in ids {
            if out.contains_key(&id) {
                continue;
            }
            if let Some(r) = self.record(id)? {
                out.insert(id, Claim::of(&r));
            }
        }
        Ok(out)
    }

    /// Removes what atomic writes killed mid-way left in the state
    /// directories (temp files of writers that are gone: `nodeio`'s
    /// `remove_leftovers` judges that, zombies and reused pids included).
    /// Taking the node lock calls it, before the recovery.
    pub fn remove_stale_temp_files(&self) {
        let _ = self.remove_stale_temp_files_listing_records();
    }

    pub fn node_state(&self) -> Result<NodeState> {
        Ok(fsutil::read_json(self.paths, &self.paths.node_state())?.unwrap_or_default())
    }

    pub fn put_node_state(&self, s: &NodeState) -> Result<()> {
        fsutil::write_json_read_again(self.paths, &self.paths.node_state(), s, PRIVATE)
    }

    pub fn journal(&self) -> Result<Option<Journal>> {
        fsutil::read_json(self.paths, &self.paths.journal())
    }

    pub fn put_journal(&self, j: &Journal) -> Result<()> {
        fsutil::write_json(self.paths, &self.paths.journal(), j, PRIVATE)
    }

    pub fn clear_journal(&self) -> Result<()> {
        fsutil::remove(self.paths, &self.paths.journal()).map(drop)
    }
}

/// The baseline notice of a job (see `commands::hooks`), for the TaskProlog:
/// a root-owned file reached through trusted directories, one printable line.
pub fn read_notice_as_user(paths: &Paths, job: JobId) -> Result<Option<String>> {
    read_line_as_user(paths, &paths.job_notice(job))
}

/// The refusal a job's Prolog left (`run::notice`), for the TaskProlog,
/// read as [`read_notice_as_user`] reads a notice.
pub fn read_refusal_as_user(paths: &Paths, job: JobId) -> Result<Option<String>> {
    read_line_as_user(paths, &paths.job_refusal(job))
}

fn read_line_as_user(paths: &Paths, path: &std::path::Path) -> Result<Option<String>> {
    Ok(fsutil::read_trusted(paths, path)?.map(|b| {
        String::from_utf8_lossy(&b)
            .chars()
            .filter(|c| !c.is_control())
            .take(400)
            .collect()
    }))
}

/// Reads a job's record for the TaskProlog, which runs as the job user: the
/// record must be a regular root-owned file reached without symlinks.
pub fn read_record_as_user(paths: &Paths, job: JobId) -> Result<Option<JobRecord>> {
    let path = paths.job_record(job);
    // The directories on the way and the file are judged by nodeio's
    // trusted read: root-owned (or ours), never a symlink at the end.
    match fsutil::read_trusted(paths, &path)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::state(&path, format!("is not a job record: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(level: &str, rank: usize) -> Arc<Claim> {
        Arc::new(Claim {
            level: level.into(),
            rank,
            settings: vec![("/proc/sys/net/core/rmem_max".into(), rank.to_string())],
        })
    }

    fn job(n: u32) -> JobId {
        JobId::parse(&n.to_string()).expect("job id")
    }

    /// Jobs of one level are one entry in node.json and share one claim
    /// when read back.
    #[test]
    fn claims_are_kept_grouped_and_read_back_shared() {
        let high = claim("high", 1);
        let claims: Claims = [
            (job(1), Arc::clone(&high)),
            (job(2), claim("low", 3)),
            (job(3), high),
        ]
        .into_iter()
        .collect();
        let node = NodeState {
            claims: Some(claims),
            ..NodeState::default()
        };
        let text = serde_json::to_string(&node).expect("json");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["claims"].as_array().expect("groups").len(), 2, "{text}");
        let back: NodeState = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, node);
        let c = back.claims.expect("claims");
        assert!(Arc::ptr_eq(&c[&job(1)], &c[&job(3)]));
        // A state from before claims has none, and writes none.
        let old: NodeState = serde_json::from_str(r#"{"baseline":{}}"#).expect("old state");
        assert_eq!(old.claims, None);
        assert!(
            !serde_json::to_string(&old)
                .expect("json")
                .contains("claims")
        );
    }

    #[test]
    fn a_job_in_two_claims_is_refused() {
        let text = r#"{"baseline":{},"claims":[
            {"level":"high","rank":1,"settings":[],"jobs":[7]},
            {"level":"low","rank":3,"settings":[],"jobs":[7]}]}"#;
        let e = serde_json::from_str::<NodeState>(text).unwrap_err();
        assert!(e.to_string().contains("job 7 holds two claims"), "{e}");
    }
}
