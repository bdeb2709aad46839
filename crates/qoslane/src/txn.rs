//! The transaction: the one shape of every change qoslane makes to a node.
//!
//! lock → roll back an interrupted journal → plan (desired settings from the
//! active jobs) → write the journal (before and after values) → apply each
//! setting with one write → read back and verify → commit (records, node
//! state, clear the journal). Any error after the journal restores every
//! before-value, verifies the restore, and returns the original error. A
//! SIGKILL anywhere leaves the journal, which the next run undoes first.
//!
//! Rollback is data: the journal holds the inverse state, not an undo log.

use std::collections::BTreeMap;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fault;
use crate::job::JobId;
use crate::paths::Paths;
use crate::settings;
use crate::state::lock::NodeLock;
use crate::state::{Change, Claim, Claims, JobRecord, Journal, NodeState, Store};

/// The least time a rollback gets after a failure, deadline or not.
pub const ROLLBACK_GRACE_MIN: std::time::Duration = std::time::Duration::from_millis(250);

/// A change to the set of active jobs.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one or two ops per run, made once and moved into the journal: a box buys nothing"
)]
pub enum RecordOp {
    Put(JobRecord),
    Remove(JobId),
}

impl RecordOp {
    fn job(&self) -> JobId {
        match self {
            Self::Put(r) => r.job_id,
            Self::Remove(j) => *j,
        }
    }
}

/// A transaction that committed.
#[derive(Debug, Default)]
pub struct Committed {
    pub changes: Vec<Change>,
    /// Settings whose file vanished (driver reload, HCA reset): nothing to
    /// apply or restore there; recorded, never a reason to fail.
    pub gone: Vec<String>,
}

/// A transaction that failed, and what became of the node.
#[derive(Debug)]
pub struct Failed {
    pub error: Error,
    /// The changes that were attempted (and rolled back, when `rolled_back`).
    pub changes: Vec<Change>,
    /// True when settings had been touched and were restored.
    pub rolled_back: bool,
    /// Set when the restore itself failed: the journal stays for the next run.
    pub restore_error: Option<Error>,
    /// Settings found gone while planning or restoring.
    pub gone: Vec<String>,
}

impl Failed {
    /// The error to report: the original one, or both when the rollback
    /// failed too (the journal is then kept).
    pub fn into_error(self) -> Error {
        match self.restore_error {
            Some(restore) => Error::RollbackFailed {
                error: Box::new(self.error),
                restore: Box::new(restore),
            },
            None => self.error,
        }
    }
}

/// An interrupted transaction found and undone when taking the lock.
#[derive(Debug)]
pub struct Recovered {
    pub journal: Journal,
    /// Settings of the journal whose file is gone: nothing to restore.
    pub gone: Vec<String>,
}

/// The node, locked for this run.
#[derive(Debug)]
pub struct LockedNode<'p> {
    pub store: Store<'p>,
    pub deadline: Deadline,
    _lock: NodeLock,
    /// The records' ids as the look for leftovers listed them right after
    /// the lock was taken: the first transaction's claims use it (nothing
    /// else writes a record under the lock); taken by it, so a later one
    /// lists again.
    listed: std::cell::RefCell<Option<std::collections::BTreeSet<JobId>>>,
}

impl<'p> LockedNode<'p> {
    /// Takes the node lock (bounded by `deadline`) and rolls back any
    /// interrupted transaction before anything else happens.
    pub fn lock(paths: &'p Paths, deadline: Deadline) -> Result<(Self, Option<Recovered>)> {
        let store = Store::open(paths)?;
        let lock = NodeLock::acquire(paths, &deadline)?;
        fault::point("locked");
        let listed = store.remove_stale_temp_files_listing_records();
        let node = Self {
            store,
            deadline,
            _lock: lock,
            listed: std::cell::RefCell::new(listed),
        };
        let recovered = node.recover()?;
        if recovered.is_some() {
            // The rollback put records back: listed again.
            node.listed.take();
        }
        Ok((node, recovered))
    }

    pub fn paths(&self) -> &'p Paths {
        self.store.paths
    }

    fn recover(&self) -> Result<Option<Recovered>> {
        self.recover_within(&self.deadline)
    }

    fn recover_within(&self, deadline: &Deadline) -> Result<Option<Recovered>> {
        let Some(journal) = self.store.journal()? else {
            return Ok(None);
        };
        let gone = self.restore(&journal.changes, deadline)?;
        for (job, before) in &journal.records_before {
            match before {
                Some(r) => self.store.put_record(r)?,
                None => self.store.remove_record(*job)?,
            }
        }
        self.store.put_node_state(&journal.node_before)?;
        self.store.clear_journal()?;
        Ok(Some(Recovered { journal, gone }))
    }

    /// Writes every before-value back (last change first) and verifies it.
    /// Keeps going past a failure so as much as possible is restored; returns
    /// the first error. A setting whose file is gone has nothing to restore:
    /// it is returned as gone, never an error (else one vanished configfs
    /// entry would keep the journal, and every later run, stuck).
    fn restore(&self, changes: &[Change], deadline: &Deadline) -> Result<Vec<String>> {
        let mut first_err = None;
        let mut gone = Vec::new();
        for c in changes.iter().rev() {
            // A setting still at its before-value (never written, or the write
            // failed) is left alone: its driver may be the thing that broke.
            if settings::read(self.paths(), &c.path, deadline)
                .is_ok_and(|v| settings::same_value(&c.before, &v))
            {
                continue;
            }
            let r = settings::write(self.paths(), &c.path, &c.before, deadline)
                .and_then(|()| self.verify_within(&c.path, &c.before, deadline));
            match r {
                Ok(()) => {}
                Err(e) if settings::is_gone(&e) => gone.push(c.path.clone()),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(gone), Err)
    }

    fn verify(&self, path: &str, wanted: &str) -> Result<()> {
        self.verify_within(path, wanted, &self.deadline)
    }

    fn verify_within(&self, path: &str, wanted: &str, deadline: &Deadline) -> Result<()> {
        let found = settings::read(self.paths(), path, deadline)?;
        let found = if fault::active("misread") {
            format!("{found}-misread")
        } else {
            found
        };
        if settings::same_value(wanted, &found) {
            Ok(())
        } else {
            Err(Error::Verify {
                path: path.to_owned(),
                wanted: wanted.to_owned(),
                found,
            })
        }
    }

    /// Applies `ops` to the set of active jobs and brings the node settings to
    /// what the new set asks for. `check` runs after the settings are applied
    /// (e.g. "ports still ACTIVE"), when any was; its error rolls everything
    /// back.
    pub fn transact(
        &self,
        event: &str,
        job: Option<JobId>,
        ops: &[RecordOp],
        check: &dyn Fn() -> Result<()>,
    ) -> Result<Committed, Box<Failed>> {
        let early = |error: Error| {
            Box::new(Failed {
                error,
                changes: Vec::new(),
                rolled_back: false,
                restore_error: None,
                gone: Vec::new(),
            })
        };
        let node_before = self.store.node_state().map_err(early)?;
        let listed = self.listed.take();
        let mut after = match listed {
            Some(ids) => self.store.claims_listed(&node_before, ids),
            None => self.store.claims(&node_before),
        }
        .map_err(early)?;
        apply(&mut after, ops);
        let mut records_before = Vec::with_capacity(ops.len());
        for op in ops {
            let before = self.store.record(op.job()).map_err(early)?;
            records_before.push((op.job(), before));
        }
        // The settings of the jobs this transaction puts: theirs must exist.
        let own: Vec<&str> = ops
            .iter()
            .filter_map(|op| match op {
                RecordOp::Put(r) => Some(r),
                RecordOp::Remove(_) => None,
            })
            .flat_map(|r| r.settings.iter().map(|(p, _)| p.as_str()))
            .collect();
        let (changes, mut node_after, gone) =
            self.plan(&after, &node_before, &own).map_err(early)?;
        node_after.claims = Some(after);
        if changes.is_empty()
            && records_before
                .iter()
                .zip(ops)
                .all(|((_, b), op)| same_record(b.as_ref(), op))
        {
            if node_after != node_before {
                self.store.put_node_state(&node_after).map_err(early)?;
            }
            return Ok(Committed {
                changes: Vec::new(),
                gone,
            });
        }

        let journal = Journal {
            event: event.to_owned(),
            job_id: job,
            pid: std::process::id(),
            started: crate::time::now_rfc3339(),
            changes: changes.clone(),
            node_before,
            records_before,
        };
        self.store.put_journal(&journal).map_err(early)?;
        fault::point("journaled");

        let result = (|| {
            for (i, c) in changes.iter().enumerate() {
                settings::write(self.paths(), &c.path, &c.after, &self.deadline)?;
                fault::point(&format!("applied:{i}"));
                self.verify(&c.path, &c.after)?;
            }
            // What the check guards against (a setting taking a link down)
            // needs a setting written: a transaction of records only (a
            // job at a level already in force) reads no port again.
            fault::hold("check");
            if !changes.is_empty() {
                check()?;
            }
            fault::point("verified");
            for op in ops {
                match op {
                    RecordOp::Put(r) => self.store.put_record(r)?,
                    RecordOp::Remove(j) => self.store.remove_record(*j)?,
                }
            }
            fault::point("recorded");
            self.store.put_node_state(&node_after)?;
            fault::point("node_state");
            self.store.clear_journal()?;
            fault::point("committed");
            Ok(())
        })();

        match result {
            Ok(()) => Ok(Committed { changes, gone }),
            Err(error) => {
                // Undo: settings, then records and node state, as recovery
                // would. The rollback gets its own grace: the run's deadline
                // may be what failed.
                let grace = Deadline::after((self.deadline.budget() / 4).max(ROLLBACK_GRACE_MIN));
                let (restore_error, gone) = match self.recover_within(&grace) {
                    Ok(r) => (None, r.map(|r| r.gone).unwrap_or_default()),
                    Err(e) => (Some(e), Vec::new()),
                };
                Err(Box::new(Failed {
                    error,
                    changes,
                    rolled_back: true,
                    restore_error,
                    gone,
                }))
            }
        }
    }

    fn plan(
        &self,
        active: &Claims,
        node: &NodeState,
        own: &[&str],
    ) -> Result<(Vec<Change>, NodeState, Vec<String>)> {
        plan(self.paths(), &self.deadline, active, node, own)
    }
}

/// What `ops` would change, read-only and without the node lock (for
/// `sync --dry-run`): the records and baseline as they are now, the planner
/// and the settings' current values. Nothing is written.
pub fn preview(paths: &Paths, ops: &[RecordOp], deadline: &Deadline) -> Result<Vec<Change>> {
    let store = Store { paths };
    let node = store.node_state()?;
    let mut after = store.claims(&node)?;
    let own: Vec<String> = ops
        .iter()
        .filter_map(|op| match op {
            RecordOp::Put(r) => Some(r),
            RecordOp::Remove(_) => None,
        })
        .flat_map(|r| r.settings.iter().map(|(p, _)| p.clone()))
        .collect();
    apply(&mut after, ops);
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    plan(paths, deadline, &after, &node, &own).map(|(changes, _, _)| changes)
}
/// The claims once `ops` are done.
fn apply(claims: &mut Claims, ops: &[RecordOp]) {
    for op in ops {
        match op {
            RecordOp::Put(r) => claims.insert(r.job_id, Claim::of(r)),
            RecordOp::Remove(j) => claims.remove(j),
        };
    }
}

/// The settings the active jobs ask for, and the changes to get there.
/// A setting whose file vanished is gone: dropped from the plan and from
/// the baseline (nothing can be applied or restored there), unless it is
/// one of `own` — the settings of the level this transaction grants, which
/// then cannot be granted.
fn plan(
    paths: &Paths,
    deadline: &Deadline,
    active: &Claims,
    node: &NodeState,
    own: &[&str],
) -> Result<(Vec<Change>, NodeState, Vec<String>)> {
    let wants = desired(active, &node.baseline);
    let mut changes = Vec::new();
    let mut gone = Vec::new();
    let mut next = node.clone();
    // A gone setting no job holds any more is forgotten.
    next.gone.retain(|p| wants.contains_key(p));
    for (path, want) in wants {
        let current = match settings::read(paths, &path, deadline) {
            Ok(v) => v,
            Err(e) if settings::is_gone(&e) && !own.contains(&path.as_str()) => {
                next.baseline.remove(&path);
                // Held by a job still: remembered, so it is said once.
                let held = matches!(want, Want::Set(_));
                if !node.gone.contains(&path) {
                    gone.push(path.clone());
                }
                if held {
                    next.gone.insert(path);
                } else {
                    next.gone.remove(&path);
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        next.gone.remove(&path);
        let after = match want {
            Want::Set(v) => {
                next.baseline
                    .entry(path.clone())
                    .or_insert_with(|| current.clone());
                v
            }
            Want::Restore(v) => {
                next.baseline.remove(&path);
                v
            }
        };
        if !settings::same_value(&after, &current) {
            changes.push(Change {
                path,
                before: current,
                after,
            });
        }
    }
    Ok((changes, next, gone))
}

fn same_record(before: Option<&JobRecord>, op: &RecordOp) -> bool {
    match op {
        RecordOp::Put(r) => before == Some(r),
        RecordOp::Remove(_) => before.is_none(),
    }
}

/// What one setting path should hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// An active job's level asks for this value.
    Set(String),
    /// No active job asks for the path any more: back to the baseline.
    Restore(String),
}

/// Per path, the value of the highest-priority active job that sets it
/// (lowest rank, then lowest job id); paths no active job sets go back to
/// their baseline. Pure: the heart of shared-node behaviour.
pub fn desired(active: &Claims, baseline: &BTreeMap<String, String>) -> BTreeMap<String, Want> {
    let mut best: BTreeMap<&str, (usize, JobId, &str)> = BTreeMap::new();
    for (job, c) in active {
        for (path, value) in &c.settings {
            let cand = (c.rank, *job, value.as_str());
            best.entry(path)
                .and_modify(|cur| {
                    if (cand.0, cand.1) < (cur.0, cur.1) {
                        *cur = cand;
                    }
                })
                .or_insert(cand);
        }
    }
    let mut out: BTreeMap<String, Want> = best
        .into_iter()
        .map(|(p, (_, _, v))| (p.to_owned(), Want::Set(v.to_owned())))
        .collect();
    for (path, value) in baseline {
        out.entry(path.clone())
            .or_insert_with(|| Want::Restore(value.clone()));
    }
    out
}
