//! What `qoslane health` reads, and what it does to the node on the way: it
//! takes the node lock (which rolls back an interrupted transaction, audited
//! as its own `recover`) and gives it back at once, releases the records of
//! jobs Slurm no longer has on the node (asked without the lock; the lock
//! again only for their transaction: their changes go into the report),
//! judges the fabric under the mapping in force and records each level's
//! grant in `/run/qoslane/grants.json` (no lock). A lock held by another
//! run is named: by its journal, or — held outside a transaction — by how
//! long health has seen it so (`state::lock::seen_held`). It decides
//! nothing about the node's health: [`super::judge`] does, from these facts
//! alone.

use std::time::Duration;

use crate::config;
use crate::error::Error;
use crate::fabric::policy;
use crate::grant;
use crate::mapping::{Mapping, OnUnknownQos};
use crate::paths::Paths;
use crate::report::Report;
use crate::run::placement::{self, Synced};
use crate::run::session::{Session, committed};
use crate::state::{Store, fsutil, grants};
use crate::txn::RecordOp;

/// How long health waits for a transaction in progress before it looks past
/// it (a Prolog holding the lock is not a problem of the node).
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// Everything a health run found, in the order its checks are listed.
#[derive(Debug)]
pub struct HealthFacts {
    pub mapping: InstalledMapping,
    /// Each state directory that exists: shown as, or why it is not ours.
    pub state_dirs: Vec<Result<String, String>>,
    pub lock: Lock,
    /// The job records against Slurm's jobs on the node (`None`: no record,
    /// or no lock to look under).
    pub records: Option<Records>,
    /// The state files, when the run directory exists: how many job
    /// records, or why they cannot be trusted.
    pub state_files: Option<Result<usize, String>>,
    /// The fabric under the mapping in force, when there is one.
    pub fabric: Option<FabricFacts>,
    /// The run directory, as a fix names it.
    pub run_dir: String,
    /// The placement sync, after the lock was let go (`None`: no mapping in
    /// force, nothing decided to send).
    pub placement: Option<Synced>,
}

/// The installed mapping file and the mapping in force.
#[derive(Debug)]
pub enum InstalledMapping {
    /// The file is valid and in force.
    Valid { levels: usize, sha256: String },
    /// The file is valid but the fabric gate refused it: the previous copy
    /// (`sha256`) is in force.
    Refused {
        problem: Option<String>,
        sha256: String,
    },
    /// The file is invalid: the last-known-good copy (`sha256`) is in force.
    Invalid { error: String, sha256: String },
    /// No usable mapping at all, and what the installed file says of jobs
    /// whose QoS cannot be placed.
    Unusable {
        error: String,
        on_unknown_qos: OnUnknownQos,
    },
}

/// The node lock as health found it.
#[derive(Debug)]
pub enum Lock {
    /// Taken; it rolled back an interrupted transaction.
    RolledBack,
    /// Taken; nothing was pending.
    Free,
    /// Taken, but the interrupted transaction could not be rolled back.
    Unrecoverable(String),
    /// Held by another run outside a transaction (no journal: an admin's
    /// `flock`, a run wedged before its journal): since when health first
    /// saw it so, and how long ago.
    HeldOutside { since: String, held: Duration },
    /// Held by another run's transaction: who (its journal) and how long.
    Held {
        pid: u32,
        who: String,
        held: Duration,
    },
}

impl Lock {
    /// How long another run held the lock when health looked
    /// (`qoslane_node_lock_held_seconds`): 0 when health took it; held
    /// outside a transaction, since health first saw it so.
    pub fn held_seconds(&self) -> u64 {
        match self {
            Self::RolledBack | Self::Free | Self::Unrecoverable(_) => 0,
            Self::HeldOutside { held, .. } | Self::Held { held, .. } => held.as_secs(),
        }
    }

    /// Health took the lock (and gave it back).
    fn taken(&self) -> bool {
        matches!(self, Self::RolledBack | Self::Free | Self::Unrecoverable(_))
    }
}

/// The job records against the jobs Slurm has on this node.
#[derive(Debug)]
pub enum Records {
    /// Slurm did not answer: nothing compared, nothing removed.
    NotCompared { count: usize, why: String },
    /// Every record's job is on the node.
    AllOnNode { count: usize, node: String },
    /// Records of jobs Slurm no longer has were released.
    Released { jobs: String, node: String },
    /// They could not be released.
    NotReleased { jobs: String, error: String },
}

/// The fabric judged under the mapping in force, and the grants recorded.
#[derive(Debug)]
pub struct FabricFacts {
    pub mapping: Mapping,
    pub judgement: policy::Judgement,
    pub record: grant::Record,
    /// Why the record could not be stored.
    pub store_error: Option<String>,
    /// The transmit wait of the first hop's port toward this node.
    pub first_hop_wait: Vec<crate::fabric::pma::PortWait>,
    /// The node's ports the first hop's read opened in process, still open
    /// for the run's counters.
    pub opened: crate::fabric::read::own_counters::Opened,
}

/// Reads (and acts: see the module) in the order the checks are listed;
/// what the run did goes into `r`.
pub fn gather(s: &mut Session<'_>, r: &mut Report) -> HealthFacts {
    let paths = s.paths;
    let (mapping, in_force) = mapping_in_force(paths);
    // The audit line names the mapping in force.
    r.mapping_sha256 = config::load(paths).ok().map(|l| l.sha256);
    let state_dirs = state_dirs(paths);
    let lock = lock(s);
    let records = if lock.taken() {
        stale_records(s, r)
    } else {
        None
    };
    sweep_counters(s, r);
    let state_files = state_files(paths);
    let fabric = in_force.map(|(m, sha)| fabric(s, m, sha));
    let placement = fabric.as_ref().map(|f| placement(s, f));
    HealthFacts {
        mapping,
        state_dirs,
        lock,
        records,
        state_files,
        fabric,
        run_dir: paths.display(&paths.run_dir).into_owned(),
        placement,
    }
}

/// Slurm told which `fail_job` levels this node carries, when placement is
/// on: never under the node lock (only a transaction holds it; slurmctld
/// may be slow), so the lock goes first.
fn placement(s: &mut Session<'_>, f: &FabricFacts) -> Synced {
    if s.paths.scontrol.is_none() {
        return Synced::Off;
    }
    s.unlock();
    placement::sync(s.paths, &f.mapping, &f.record, &s.deadline, false)
}

/// The installed file and the mapping in force: an unusable file leaves
/// the last-known-good copy (if any) in force.
fn mapping_in_force(paths: &Paths) -> (InstalledMapping, Option<(Mapping, String)>) {
    match config::read_valid(paths, &paths.config) {
        Ok((m, sha, _)) => match config::load(paths) {
            // Valid, but refused by the fabric gate: the previous copy serves.
            Ok(l) if l.source == config::Source::LastKnownGood => (
                InstalledMapping::Refused {
                    problem: l.problem,
                    sha256: l.sha256.clone(),
                },
                Some((l.mapping, l.sha256)),
            ),
            _ => (
                InstalledMapping::Valid {
                    levels: m.levels().len(),
                    sha256: sha.clone(),
                },
                Some((m, sha)),
            ),
        },
        Err(e) => match config::load(paths) {
            Ok(l) => (
                InstalledMapping::Invalid {
                    error: e.to_string(),
                    sha256: l.sha256.clone(),
                },
                Some((l.mapping, l.sha256)),
            ),
            Err(_) => (
                InstalledMapping::Unusable {
                    error: e.to_string(),
                    on_unknown_qos: config::on_unknown_qos_of_installed(paths),
                },
                None,
            ),
        },
    }
}

fn state_dirs(paths: &Paths) -> Vec<Result<String, String>> {
    [&paths.run_dir, &paths.lib_dir]
        .into_iter()
        .filter(|dir| dir.exists())
        .map(|dir| {
            fsutil::check_dir(paths, dir)
                .map(|()| dir.display().to_string())
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Takes the node lock, waiting at most [`LOCK_WAIT`], and gives it back:
/// taking it rolls back an interrupted transaction. Held by another run,
/// its journal (written under the lock when its transaction began) says
/// who and since when; with no journal, how long health has seen it held.
fn lock(s: &mut Session<'_>) -> Lock {
    let lock = match s.node_within(LOCK_WAIT) {
        Ok(Some(())) => Lock::RolledBack,
        Ok(None) => Lock::Free,
        Err(Error::LockTimeout { .. }) => held_by(s.paths),
        Err(e) => Lock::Unrecoverable(e.with_causes()),
    };
    s.release();
    if !matches!(lock, Lock::HeldOutside { .. }) {
        crate::state::lock::seen_free(s.paths);
    }
    lock
}

fn held_by(paths: &Paths) -> Lock {
    let Some(j) = (Store { paths }).journal().ok().flatten() else {
        let (since, held) = crate::state::lock::seen_held(paths);
        return Lock::HeldOutside { since, held };
    };
    let held = crate::time::parse_rfc3339(&j.started)
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let who = format!(
        "pid {} ({}{}) since {}, {} s",
        j.pid,
        j.event,
        j.job_id
            .map_or_else(String::new, |id| format!(" of job {id}")),
        j.started,
        held.as_secs()
    );
    Lock::Held {
        pid: j.pid,
        who,
        held,
    }
}

/// Records of jobs Slurm no longer has on this node (an Epilog killed
/// mid-way, a node rebooted under a job): their levels are released through
/// the transaction, so the settings follow the jobs that remain, and the
/// report (audit) lists the changes. Records and Slurm are read without
/// the lock (`squeue` may take seconds: no Prolog waits on it); the lock is
/// taken again only for the transaction, and a record that changed
/// meanwhile (a requeued job's Prolog) is left alone. Only when Slurm
/// answered: any doubt removes nothing.
fn stale_records(s: &mut Session<'_>, r: &mut Report) -> Option<Records> {
    let paths = s.paths;
    let deadline = s.deadline.half();
    let records = (Store { paths }).records().ok()?;
    if records.is_empty() {
        return None;
    }
    let count = records.len();
    let node = crate::audit::node_name();
    let on_node = match crate::job::on_node::jobs_on_node(&paths.squeue, &node, &deadline) {
        Ok(ids) => ids,
        Err(e) => {
            return Some(Records::NotCompared {
                count,
                why: e.to_string(),
            });
        }
    };
    let gone = |id: &&crate::job::JobId| !on_node.contains(id);
    if !records.keys().any(|id| gone(&id)) {
        return Some(Records::AllOnNode { count, node });
    }
    if let Err(e) = s.node_within(LOCK_WAIT) {
        return Some(Records::NotCompared {
            count,
            why: format!("the records of jobs gone are released by a later run: {e}"),
        });
    }
    let store = s.store()?;
    let stale: Vec<crate::job::JobId> = records
        .iter()
        .filter(|(id, rec)| gone(id) && store.record(**id).ok().flatten().as_ref() == Some(*rec))
        .map(|(id, _)| *id)
        .collect();
    if stale.is_empty() {
        s.release();
        return Some(Records::AllOnNode { count, node });
    }
    let ops: Vec<RecordOp> = stale.iter().map(|id| RecordOp::Remove(*id)).collect();
    let jobs = stale
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let locked = s.node().ok()?;
    let result = locked.transact("health", None, &ops, &|| Ok(()));
    s.release();
    Some(match result {
        Ok(c) => {
            committed(r, c);
            if let crate::report::Payload::Health(h) = &mut r.payload {
                h.released_jobs.clone_from(&stale);
            }
            for id in &stale {
                r.notes.extend(crate::run::job_counters::release(paths, id));
            }
            r.notes.push(format!(
                "released the level of job(s) {jobs}: Slurm no longer has them on node {node} \
                 (their Epilog did not finish)"
            ));
            Records::Released { jobs, node }
        }
        Err(f) => Records::NotReleased {
            jobs,
            error: f.into_error().with_causes(),
        },
    })
}

/// The counter snapshots no live job owns (an Epilog killed after its
/// transaction): removed, said (`run::job_counters::sweep`).
fn sweep_counters(s: &Session<'_>, r: &mut Report) {
    let paths = s.paths;
    let recorded = Store { paths }
        .records()
        .map(|m| m.into_keys().collect())
        .unwrap_or_default();
    let deadline = s.deadline.half();
    let on_node =
        || crate::job::on_node::jobs_on_node(&paths.squeue, &crate::audit::node_name(), &deadline);
    match crate::run::job_counters::sweep(paths, &recorded, on_node) {
        Ok(gone) if gone.is_empty() => {}
        Ok(gone) => r.notes.push(format!(
            "removed the counter snapshot(s) of job(s) {}: no live job owns them",
            gone.join(", ")
        )),
        Err(e) => r.notes.push(format!("counter snapshots not swept: {e}")),
    }
}

/// The state files must be readable and trusted: a corrupt or foreign
/// record, baseline or journal stops every change.
fn state_files(paths: &Paths) -> Option<Result<usize, String>> {
    if !paths.run_dir.is_dir() {
        return None;
    }
    let store = Store { paths };
    // The jobs directory appears with the first job (the fabric cache
    // may have created the run directory before).
    let records = if paths.jobs_dir().exists() {
        store.records().map(|r| r.len())
    } else {
        Ok(0)
    };
    Some(
        records
            .and_then(|n| store.node_state().map(|_| n))
            .and_then(|n| store.journal().map(|_| n))
            .map_err(|e| e.to_string()),
    )
}

/// The placement send's share of a health run's budget: one in this many
/// (a quarter: 750 ms of the default 3 s, for at most two scontrol calls).
const PLACEMENT_SHARE: u32 = 4;

/// The fabric under the mapping in force (and the first hop's transmit
/// wait), each level's grant from every scope, recorded for the
/// Prologs, `status`, `explain` and the metrics.
///
/// With placement on, the reads leave [`PLACEMENT_SHARE`] of the run's
/// budget to the placement send after them: a slow fabric read (a busy SM,
/// a hung SMP query) costs a reading, never slurmctld's news of the grants.
fn fabric(s: &Session<'_>, m: Mapping, sha: String) -> FabricFacts {
    let paths = s.paths;
    let reads = if paths.scontrol.is_some() {
        s.deadline.leaving(s.deadline.budget() / PLACEMENT_SHARE)
    } else {
        s.deadline
    };
    let (judgement, first_hop_wait, opened) = policy::judge_health(paths, &m, &reads);
    let settings = crate::settings::check_levels(paths, &m, &reads);
    // The fabric audit's verdict, when the site names one: read outside the
    // node lock (health gave it back), bounded (a shared filesystem).
    let path =
        crate::fabric::gather::verdict::fabric_path(paths, &m, &sha, &judgement.ports(), &reads);
    let record = grant::Record {
        mapping_sha256: sha,
        by: "health".to_owned(),
        time: crate::time::now_rfc3339(),
        first_hop: judgement.first_hop_read(&m),
        grants: judgement.grants(&m, Some(&settings), path.as_ref()),
        settings: Some(settings),
        fabric_path: path,
    };
    let store_error = grants::store(paths, &record).err().map(|e| e.to_string());
    FabricFacts {
        mapping: m,
        judgement,
        record,
        store_error,
        first_hop_wait,
        opened,
    }
}
