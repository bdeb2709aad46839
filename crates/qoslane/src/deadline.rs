//! One deadline per run, passed down to everything that can block: the node
//! lock, external programs, reads and writes of kernel files.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    start: Instant,
    budget: Duration,
}

impl Deadline {
    pub fn after(budget: Duration) -> Self {
        Self {
            start: Instant::now(),
            budget,
        }
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// A deadline for a step that must leave the rest of the run time to
    /// finish (asking slurmctld, probing the fabric): half of what remains.
    /// A slow controller or a hung SMP query then costs the job its QoS (it
    /// falls back) but never the transaction's time.
    pub fn half(&self) -> Self {
        Self::after(self.remaining() / 2)
    }

    /// The instant it passes.
    pub fn instant(&self) -> Instant {
        self.start + self.budget
    }

    /// Time left; zero once passed.
    pub fn remaining(&self) -> Duration {
        self.budget.saturating_sub(self.start.elapsed())
    }

    pub fn check(&self, what: impl FnOnce() -> String) -> Result<()> {
        if self.remaining().is_zero() {
            Err(self.passed(what()))
        } else {
            Ok(())
        }
    }

    pub fn passed(&self, what: String) -> Error {
        Error::Deadline {
            what,
            budget: self.budget,
        }
    }

    /// Runs `f` on a helper thread and gives up when the deadline passes, so a
    /// kernel file that blocks (a hung driver) cannot make the run overstay.
    /// The abandoned thread dies with the process.
    pub fn run<T: Send + 'static>(
        &self,
        what: impl FnOnce() -> String,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("qoslane-io".into())
            .spawn(move || {
                let _ = tx.send(f());
            })
            .map_err(|e| Error::Internal(format!("spawn io thread: {e}")))?;
        rx.recv_timeout(self.remaining())
            .map_err(|_| self.passed(what()))
    }
}
