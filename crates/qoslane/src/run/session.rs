//! The plumbing every node-changing run shares: one deadline, the node lock
//! (which first undoes an interrupted transaction), the mapping with its
//! last-known-good fallback and change detection — and [`Session::finish`],
//! the one place a run's [`Report`] (or [`Failure`]) becomes its audit
//! line, its metrics and its exit class. Audit and metrics failures are
//! logged, never fatal.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::audit::{self, Entry};
use crate::config::{self, Loaded, Promotion, Source};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::exit_code::ExitClass;
use crate::log;
use crate::metrics::{self, Run};
use crate::paths::Paths;
use crate::report::{Event, Exit, Failure, Outcome, Report, RunResult};
use crate::state::Store;
use crate::txn::{LockedNode, Recovered};

/// A committed transaction into `report`: its changes, and the settings it
/// found gone.
pub fn committed(report: &mut Report, c: crate::txn::Committed) {
    report.changes.extend(c.changes);
    report.gone(c.gone);
}

/// A failed transaction into `report`'s failure, exiting per `exit`.
pub fn txn_failed(
    mut report: Report,
    f: crate::txn::Failed,
    exit: crate::report::Exit,
) -> Box<Failure> {
    report.changes.clone_from(&f.changes);
    report.rolled_back = f.rolled_back;
    report.gone(f.gone.clone());
    report.fail(f.into_error(), exit)
}

#[derive(Debug)]
pub struct Session<'p> {
    pub paths: &'p Paths,
    pub deadline: Deadline,
    event: Event,
    start: Instant,
    node: Option<LockedNode<'p>>,
    /// The lock was held and given back before the end ([`Session::release`]).
    released: bool,
    /// The `recover` runs this run audited, counted by [`Session::finish`]
    /// after the node lock is given back.
    recovered: Vec<Report>,
    /// What a run ended by its watchdog reports (`Session::arm`).
    armed: Arc<Mutex<(Report, Exit)>>,
    /// The run resolves each trusted state directory once
    /// (`nodeio::walk::remember_judged_dirs`).
    _dirs: nodeio::walk::Remembered,
    /// The run reads the node's ports from sysfs once
    /// (`fabric::read::sysfs::remember_for_run`).
    _ports: crate::fabric::read::sysfs::PortsRemembered,
}

impl<'p> Session<'p> {
    pub fn new(paths: &'p Paths, event: Event, deadline: Deadline) -> Self {
        // Logging waits for nothing past the run's deadline (nodeio::log);
        // validating the mapping takes at most half of it.
        nodeio::log::set_deadline(deadline.instant());
        config::bound_parsing(deadline.half().instant());
        let start = Instant::now();
        let armed = Arc::new(Mutex::new((Report::new(event), Exit::ByError)));
        crate::deadline::on_hang(Box::new({
            let (paths, armed) = (paths.clone(), Arc::clone(&armed));
            move |error| ended_by_watchdog(&paths, &armed, start, error)
        }));
        Self {
            paths,
            deadline,
            event,
            start,
            node: None,
            released: false,
            recovered: Vec::new(),
            armed,
            _dirs: nodeio::walk::remember_judged_dirs(),
            _ports: crate::fabric::read::sysfs::remember_for_run(),
        }
    }

    /// What this run reports, and how it exits, if a kernel call hangs past
    /// its deadline from here on (the watchdog then ends the run: see
    /// `deadline`). Until a command arms it: the bare event, exit by error.
    pub fn arm(&self, report: &Report, exit: Exit) {
        *self
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (report.clone(), exit);
    }

    /// Takes the node lock, once per run, and hands back an interrupted
    /// transaction it undid (for `qoslane recover`, which reports it as its
    /// own run).
    pub fn lock(&mut self) -> Result<Option<Recovered>> {
        self.lock_until(self.deadline)
    }

    fn lock_until(&mut self, deadline: Deadline) -> Result<Option<Recovered>> {
        if self.node.is_some() {
            return Ok(None);
        }
        let (node, recovered) = LockedNode::lock(self.paths, deadline)?;
        self.node = Some(node);
        Ok(recovered)
    }

    /// The node lock, taken once per run. An interrupted transaction found
    /// here is rolled back and audited as its own `recover` entry.
    pub fn node(&mut self) -> Result<&LockedNode<'p>> {
        if let Some(r) = self.lock()? {
            self.audit_recovered(&r);
        }
        match &self.node {
            Some(n) => Ok(n),
            None => Err(crate::error::Error::Internal("node lock vanished".into())),
        }
    }

    /// [`Session::node`] waiting at most `wait` (or the run's deadline, if
    /// sooner) for the lock: for `health`, which must not queue behind a
    /// Prolog. The recovered transaction, if any, is audited.
    pub fn node_within(&mut self, wait: std::time::Duration) -> Result<Option<()>> {
        let recovered = self.lock_until(Deadline::after(wait.min(self.deadline.remaining())))?;
        Ok(recovered.map(|r| self.audit_recovered(&r)))
    }

    /// An interrupted transaction this run undid gets its own `recover` line
    /// and count, whichever step of the run took the lock. The line is
    /// written at once, under the lock (the rolled-back journal is gone: the
    /// line is the rollback's only record); the count waits for
    /// [`Session::finish`], after the lock (the metrics' locks are waited
    /// for, and nothing that waits runs under the node lock).
    fn audit_recovered(&mut self, r: &Recovered) {
        let mut report = Report::new(Event::Recover).with(Outcome::Reverted);
        report.job.job_id = r.journal.job_id;
        report.changes.clone_from(&r.journal.changes);
        report.rolled_back = true;
        report.notes.push(format!(
            "rolled back an interrupted {} (pid {}, started {})",
            r.journal.event, r.journal.pid, r.journal.started
        ));
        report.gone(r.gone.clone());
        log::warn(&report.notes[0]);
        write_audit(self.paths, &Entry::of(&report, None, 0.0));
        self.recovered.push(report);
    }

    /// The mapping for this run. An unusable admin file is logged and noted
    /// in `report`; the last-known-good copy is used.
    pub fn mapping(&mut self, report: &mut Report) -> Result<Loaded> {
        let loaded = config::load(self.paths)?;
        report.mapping_sha256 = Some(loaded.sha256.clone());
        if loaded.source == Source::LastKnownGood {
            let msg = format!(
                "mapping {} unusable, using last-known-good: {}",
                self.paths.config.display(),
                loaded.problem.as_deref().unwrap_or("?")
            );
            log::error(&msg);
            report.notes.push(msg);
            self.audit_rejected(&loaded);
        }
        Ok(loaded)
    }

    /// [`Session::mapping`] with the fabric gate of a changed mapping: the
    /// first run to see a new valid mapping asks `judge` (every level on the
    /// fabric under the policy) before it puts it in force; a refusal is
    /// recorded (`config::reject`), and the previous copy stays in force —
    /// as `sync` would decide.
    pub fn mapping_gated(
        &mut self,
        report: &mut Report,
        judge: impl FnOnce(&crate::mapping::Mapping) -> Option<String>,
    ) -> Result<Loaded> {
        let loaded = self.mapping(report)?;
        let changed = loaded.source == Source::Config
            && config::last_known_good_sha(self.paths).as_deref() != Some(loaded.sha256.as_str());
        if !changed {
            return Ok(loaded);
        }
        let Some(why) = judge(&loaded.mapping) else {
            return Ok(loaded);
        };
        if let Err(e) = config::reject(self.paths, &loaded.sha256, &why) {
            log::warn(&format!(
                "the refusal of mapping sha256 {} could not be recorded: {e}",
                loaded.sha256
            ));
        }
        // Now `load` gives the previous copy, when there is one.
        match config::load(self.paths) {
            Ok(previous) if previous.source == Source::LastKnownGood => self.mapping(report),
            _ => Ok(loaded),
        }
    }

    /// Under the lock: a new valid mapping becomes last-known-good and is
    /// audited as `mapping_changed` — unless the mapping in force is no
    /// longer the one `loaded` ([`Promotion::Stale`]: nothing written, the
    /// caller re-loads or fails).
    pub fn promote(
        &mut self,
        loaded: &Loaded,
        job: Option<crate::job::JobId>,
    ) -> Result<Promotion> {
        self.node()?;
        let done = config::promote(self.paths, loaded)?;
        if let Promotion::Promoted(previous) = &done {
            let mut r = Report::new(Event::MappingChanged).with(Outcome::Applied);
            r.mapping_sha256 = Some(loaded.sha256.clone());
            r.job.job_id = job;
            r.notes.push(match previous {
                Some(p) => format!("mapping changed from sha256 {p}; now last-known-good"),
                None => "first mapping seen on this node; now last-known-good".into(),
            });
            log::info(&r.notes[0]);
            write_audit(self.paths, &Entry::of(&r, None, 0.0));
        }
        Ok(done)
    }

    /// [`Session::promote`] for a hook: failing to save the last-known-good
    /// copy (a full or read-only `/var/lib`) must not cost the job its level:
    /// the mapping is valid and in use; it is noted, and the next run tries
    /// again. Failing to take the lock is still an error. `false`: `loaded`
    /// is no longer the mapping in force (a rollout landed while this run
    /// waited) and was not promoted: the run re-loads under the lock.
    pub fn promote_or_note(&mut self, loaded: &Loaded, report: &mut Report) -> Result<bool> {
        crate::fault::hold("promote");
        self.node()?;
        match self.promote(loaded, report.job.job_id) {
            Ok(Promotion::Stale) => return Ok(false),
            Ok(_) => {}
            Err(e) => {
                let msg = format!("mapping not saved as last-known-good: {e}");
                log::warn(&msg);
                report.notes.push(msg);
            }
        }
        Ok(true)
    }

    /// Audits a rejected admin file once per distinct content.
    fn audit_rejected(&self, loaded: &Loaded) {
        let marker = self.paths.lib_dir.join("last-rejected.sha256");
        let text = config::read_text(&self.paths.config).unwrap_or_default();
        let sha = config::sha256_hex(text.as_bytes());
        if crate::state::fsutil::read_trusted(self.paths, &marker)
            .ok()
            .flatten()
            .is_some_and(|s| String::from_utf8_lossy(&s).trim() == sha)
        {
            return;
        }
        let mut r = Report::new(Event::MappingChanged).with(Outcome::Failed);
        r.mapping_sha256 = Some(sha.clone());
        r.notes
            .push(format!("kept last-known-good sha256 {}", loaded.sha256));
        let mut e = Entry::of(&r, None, 0.0);
        e.error.clone_from(&loaded.problem);
        write_audit(self.paths, &e);
        let _ = crate::state::fsutil::atomic_write(
            self.paths,
            &marker,
            sha.as_bytes(),
            crate::state::PRIVATE,
        );
    }

    /// Gives the node lock back before the run ends, once its transaction
    /// is done: what the run still does (a job's counters) must not hold
    /// other jobs' hooks. The run does not take it again.
    pub fn release(&mut self) {
        self.released |= self.node.take().is_some();
    }

    /// Lets the node lock go before the run ends: what follows (slurmctld,
    /// which may answer slowly: the placement sync) must not hold up the
    /// transactions of the node's jobs. The end of the run still looks for
    /// an interrupted transaction ([`Session::finish`]).
    pub fn unlock(&mut self) {
        self.node = None;
    }

    pub fn store(&self) -> Option<&Store<'p>> {
        self.node.as_ref().map(|n| &n.store)
    }

    /// Ends the run — the one place a result becomes the audit line, the
    /// metrics and the exit class. Both are written after the node lock is
    /// released: the transaction is committed (or never began), the audit
    /// line is one append, and the metrics have their own lock, so other
    /// jobs' hooks do not queue behind this run's disk flushes. A run that
    /// never held the lock still takes it briefly (it can get it quickly):
    /// taking it undoes an interrupted transaction.
    pub fn finish(mut self, result: RunResult) -> ExitClass {
        debug_assert!(
            result
                .as_ref()
                .map_or_else(|f| f.report.event(), Report::event)
                == self.event,
            "a run reports its own event"
        );
        let secs = self.start.elapsed().as_secs_f64();
        let (report, error, class) = match result {
            Ok(r) => {
                if let Some(line) = &r.said {
                    // A command run by hand says what it did or checked
                    // (stdout's reader gone: nobody to tell).
                    let _ = writeln!(std::io::stdout().lock(), "{line}");
                }
                (r, None, ExitClass::Ok)
            }
            Err(f) => {
                let class = f.exit_class();
                log_failure(&f);
                let f = *f;
                (f.report, Some(f.error), class)
            }
        };
        let held = self.node.take().is_some() || self.released;
        write_audit(
            self.paths,
            &Entry::of(&report, error.as_ref(), millis(secs)),
        );
        if !held {
            // A short grace is enough: this is only for recovery.
            let grace = Deadline::after(
                Duration::from_millis(500)
                    .min(self.deadline.remaining().max(Duration::from_millis(50))),
            );
            if let Ok((n, recovered)) = LockedNode::lock(self.paths, grace) {
                // Taking the lock undoes an interrupted transaction: that
                // must be audited here too (health, or a run that failed
                // before it needed the lock).
                if let Some(r) = recovered {
                    self.audit_recovered(&r);
                }
                drop(n);
            }
        }
        count(self.paths, &report, secs, self.deadline.instant());
        for recovered in std::mem::take(&mut self.recovered) {
            count(self.paths, &recovered, 0.0, self.deadline.instant());
        }
        class
    }
}

/// A failed run's log line (its audit line says the same, in fields).
fn log_failure(f: &Failure) {
    log::error(&format!(
        "{} failed ({}): {}",
        f.report.event(),
        f.report.outcome.as_str(),
        f.error.with_causes()
    ));
}

/// A run's duration for its audit line: milliseconds, to the microsecond.
fn millis(secs: f64) -> f64 {
    (secs * 1e6).round() / 1e3
}

fn write_audit(paths: &Paths, e: &Entry) {
    if let Err(err) = audit::append(paths, e) {
        log::error(&format!("audit: {err}"));
    }
}

/// Counts the run, waiting for the counters' lock until `deadline` (at least
/// `metrics::COUNTERS_LOCK_WAIT`).
fn count(paths: &Paths, report: &Report, seconds: f64, deadline: Instant) {
    let run = Run::of(report, seconds, nodeio::log::take_dropped());
    if let Err(err) = metrics::record_and_publish(paths, &run, deadline, &|| node_gauges(paths)) {
        log::warn(&format!("metrics: {err}"));
    }
}

/// The gauges as the node's state has them now, read-only (no directory is
/// created, no stray file removed): every level of the last-known-good
/// mapping with zero, plus one per active job. For every run's textfile and
/// for readers such as `qoslane metrics`.
pub fn node_gauges(paths: &Paths) -> metrics::Gauges {
    // One read of the last-known-good copy gives both its levels and its hash.
    let mut vl_levels: std::collections::BTreeMap<u8, String> = std::collections::BTreeMap::new();
    let mut on_failure = std::collections::BTreeMap::new();
    let (levels, sha) = match config::read_valid(paths, &paths.last_known_good()) {
        Ok((m, sha, _)) => {
            for l in m.levels() {
                on_failure.insert(l.name.clone(), m.on_failure_for(l).as_str());
                if let Some(vl) = l.virtual_lane {
                    let names = vl_levels.entry(vl.get()).or_default();
                    if !names.is_empty() {
                        names.push(',');
                    }
                    names.push_str(&l.name);
                }
            }
            (
                m.levels().iter().map(|l| l.name.clone()).collect(),
                Some(sha),
            )
        }
        Err(_) => (Vec::new(), config::last_known_good_sha(paths)),
    };
    // The node state's claims: one file, no record read. A reader that may
    // not read it (node.json is root's) counts the records.
    let store = Store::read_only(paths);
    let active: Vec<String> = match store.node_state().and_then(|n| store.claims(&n)) {
        Ok(claims) => claims.into_values().map(|c| c.level.clone()).collect(),
        Err(_) => store
            .record_ids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|id| store.record(id).ok().flatten())
            .map(|r| r.level)
            .collect(),
    };
    // The installed file in force: its hash is the copy's, read above (not
    // read again for it: `config::installed_in_force` would).
    let mapping_valid = config::installed_is(paths, sha.as_deref());
    let mut g = metrics::Gauges::new(levels, sha, active);
    // The recorded grants, of the levels in force (a record of an older
    // mapping may name levels that are gone).
    if let Ok(Some(record)) = crate::state::grants::load(paths) {
        g.granted = record
            .grants
            .into_iter()
            .filter(|(l, _)| g.active_jobs.is_empty() || g.active_jobs.contains_key(l))
            .map(|(l, grant)| (l, grant.decision.gets_its_sl()))
            .collect();
    }
    g.mapping_valid = mapping_valid;
    g.vl_levels = vl_levels;
    g.on_failure = on_failure;
    g
}

/// The end of a run whose kernel call hung (on the watchdog's thread, the
/// run's own thread stuck in the call): the armed report fails with the
/// deadline error, is audited and counted as `finish` would, and gives the
/// exit code. The node lock, if held, goes with the process; the journal
/// stays for the next run, which rolls it back.
fn ended_by_watchdog(
    paths: &Paths,
    armed: &Mutex<(Report, Exit)>,
    start: Instant,
    error: crate::error::Error,
) -> i32 {
    let (mut report, exit) = armed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    report.notes.push(
        "a kernel call hung past the deadline: the run was ended there; a change it had begun \
         stays journaled and the next run to take the node lock rolls it back"
            .into(),
    );
    let f = report.fail(error, exit);
    log_failure(&f);
    let secs = start.elapsed().as_secs_f64();
    write_audit(paths, &Entry::of(&f.report, Some(&f.error), millis(secs)));
    count(paths, &f.report, secs, Instant::now());
    // A change may be half made until the next run rolls it back: never
    // "refused, the node is fine" (hookrun would keep the node in service).
    match f.exit_class() {
        ExitClass::Refused => ExitClass::Failed,
        class => class,
    }
    .code()
}
