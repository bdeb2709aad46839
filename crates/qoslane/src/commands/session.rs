//! The plumbing every node-changing run shares: one deadline, the node lock
//! (which first undoes an interrupted transaction), the mapping with its
//! last-known-good fallback and change detection, and the closing audit line
//! and metrics. Audit and metrics failures are logged, never fatal.

use std::time::Instant;

use crate::audit::{self, Entry, Outcome};
use crate::config::{self, Loaded, Source};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::log;
use crate::metrics::{self, Alignment, Run};
use crate::paths::Paths;
use crate::state::Store;
use crate::txn::{Node, Recovered};

#[derive(Debug)]
pub struct Session<'p> {
    pub paths: &'p Paths,
    pub deadline: Deadline,
    start: Instant,
    pub entry: Entry,
    node: Option<Node<'p>>,
    pub rolled_back: bool,
    pub fabric: Option<Vec<Alignment>>,
}

impl<'p> Session<'p> {
    pub fn new(paths: &'p Paths, event: &'static str, deadline: Deadline) -> Self {
        // Logging waits for nothing past the run's deadline (nodeio::log).
        nodeio::log::set_deadline(deadline.instant());
        Self {
            paths,
            deadline,
            start: Instant::now(),
            entry: Entry::new(event, Outcome::Failed),
            node: None,
            rolled_back: false,
            fabric: None,
        }
    }

    /// The node lock, taken once per run. An interrupted transaction found
    /// here is rolled back and audited as its own `recover` entry.
    pub fn node(&mut self) -> Result<&Node<'p>> {
        if self.node.is_none() {
            let (node, recovered) = Node::lock(self.paths, self.deadline)?;
            if let Some(r) = recovered {
                if self.entry.event == "recover" {
                    // `qoslane recover` reports it in its own line.
                    self.entry.job_id = r.journal.job_id;
                    self.entry.changes = r.journal.changes.clone();
                    self.entry.notes.push(format!(
                        "rolled back an interrupted {} (pid {})",
                        r.journal.event, r.journal.pid
                    ));
                    self.rolled_back = true;
                } else {
                    self.audit_recovered(&r);
                }
            }
            self.node = Some(node);
        }
        self.node
            .as_ref()
            .ok_or_else(|| Error::Internal("node lock vanished".into()))
    }

    /// An interrupted transaction this run undid gets its own `recover` line
    /// and count, whichever step of the run took the lock.
    fn audit_recovered(&self, r: &Recovered) {
        let mut e = Entry::new("recover", Outcome::Reverted);
        e.job_id = r.journal.job_id;
        e.changes = r.journal.changes.clone();
        e.notes.push(format!(
            "rolled back an interrupted {} (pid {}, started {})",
            r.journal.event, r.journal.pid, r.journal.started
        ));
        log::warn(&e.notes[0]);
        self.write_audit(&e);
        self.count(&Run {
            event: "recover",
            outcome: Outcome::Reverted,
            seconds: 0.0,
            rolled_back: true,
            fabric: None,
        });
    }

    /// The mapping for this run. An unusable admin file is logged and noted;
    /// the last-known-good copy is used.
    pub fn mapping(&mut self) -> Result<Loaded> {
        let loaded = config::load(self.paths)?;
        self.entry.mapping_sha256 = Some(loaded.sha256.clone());
        if loaded.source == Source::LastKnownGood {
            let msg = format!(
                "mapping {} unusable, using last-known-good: {}",
                self.paths.config.display(),
                loaded.problem.as_deref().unwrap_or("?")
            );
            log::error(&msg);
            self.entry.notes.push(msg);
            self.audit_rejected(&loaded);
        }
        Ok(loaded)
    }

    /// Under the lock: a new valid mapping becomes last-known-good and is
    /// audited as `mapping_changed`.
    pub fn promote(&mut self, loaded: &Loaded) -> Result<()> {
        self.node()?;
        if let Some(previous) = config::promote(self.paths, loaded)? {
            let mut e = Entry::new("mapping_changed", Outcome::Applied);
            e.mapping_sha256 = Some(loaded.sha256.clone());
            e.job_id = self.entry.job_id;
            e.notes.push(match previous {
                Some(p) => format!("mapping changed from sha256 {p}; now last-known-good"),
                None => "first mapping seen on this node; now last-known-good".into(),
            });
            log::info(&e.notes[0]);
            self.write_audit(&e);
        }
        Ok(())
    }

    /// [`Session::promote`] for a hook: failing to save the last-known-good
    /// copy (a full or read-only `/var/lib`) must not cost the job its level:
    /// the mapping is valid and in use; it is noted, and the next run tries
    /// again. Failing to take the lock is still an error.
    pub fn promote_or_note(&mut self, loaded: &Loaded) -> Result<()> {
        self.node()?;
        if let Err(e) = self.promote(loaded) {
            let msg = format!("mapping not saved as last-known-good: {e}");
            log::warn(&msg);
            self.entry.notes.push(msg);
        }
        Ok(())
    }

    /// Audits a rejected admin file once per distinct content.
    fn audit_rejected(&self, loaded: &Loaded) {
        let marker = self.paths.lib_dir.join("last-rejected.sha256");
        let text = config::read_text(&self.paths.config).unwrap_or_default();
        let sha = config::sha256_hex(text.as_bytes());
        if std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == sha) {
            return;
        }
        let mut e = Entry::new("mapping_changed", Outcome::Failed);
        e.error = loaded.problem.clone();
        e.mapping_sha256 = Some(sha.clone());
        e.notes
            .push(format!("kept last-known-good sha256 {}", loaded.sha256));
        self.write_audit(&e);
        let _ = crate::state::fsutil::atomic_write(self.paths, &marker, sha.as_bytes(), crate::state::PRIVATE);
    }

    pub fn store(&self) -> Option<&Store<'p>> {
        self.node.as_ref().map(|n| &n.store)
    }

    fn write_audit(&self, e: &Entry) {
        if let Err(err) = audit::append(self.paths, e) {
            log::error(&format!("audit: {err}"));
        }
    }

    fn count(&self, run: &Run<'_>) {
        if let Err(err) = metrics::record_and_publish(self.paths, run) {
            log::warn(&format!("metrics: {err}"));
        }
    }

    /// Ends the run: the audit line, then the metrics. Both happen after the
    /// node lock is released: the transaction is committed (or never began),
    /// the audit line is one append, and the metrics have their own lock. So
    /// other jobs' Prologs and Epilogs do not queue behind this run's disk
    /// flushes. A run that never held the lock still takes it briefly (it
    /// can get it quickly): taking it undoes an interrupted transaction.
    pub fn finish(mut self, outcome: Outcome, error: Option<&Error>) {
        self.entry.outcome = outcome;
        self.entry.error = error.map(ToString::to_string);
        let secs = self.start.elapsed().as_secs_f64();
        self.entry.duration_ms = (secs * 1e6).round() / 1e3;
        if let Some(e) = error {
            log::error(&format!(
                "{} failed ({}): {e}",
                self.entry.event,
                outcome.as_str()
            ));
        }
        let held = self.node.take().is_some();
        self.write_audit(&self.entry);
        if !held {
            // A short grace is enough: this is only for recovery.
            let grace = Deadline::after(
                std::time::Duration::from_millis(500).min(
                    self.deadline
                        .remaining()
                        .max(std::time::Duration::from_millis(50)),
                ),
            );
            if let Ok((n, recovered)) = Node::lock(self.paths, grace) {
                // Taking the lock undoes an interrupted transaction: that
                // must be audited here too (health, or a run that failed
                // before it needed the lock).
                if let Some(r) = recovered {
                    self.audit_recovered(&r);
                }
                drop(n);
            }
        }
        let run = Run {
            event: self.entry.event,
            outcome,
            seconds: secs,
            rolled_back: self.rolled_back,
            fabric: self.fabric.take(),
        };
        self.count(&run);
    }
}
