//! One deadline per run, passed down to everything that can block: the node
//! lock, external programs, reads and writes of kernel files — and the one
//! watchdog that holds a run to it when a kernel file blocks.
//!
//! Kernel I/O ([`Deadline::run`]) happens on the caller's thread, inline:
//! no thread per read or write, no hand-off to wait for on a busy core. A
//! run's first such call starts the watchdog, a thread that sleeps until
//! the earliest deadline of the calls in progress and is never woken
//! otherwise. If one is still in progress when its deadline passes (a hung
//! driver: the call may never return, and no signal reaches a task in
//! uninterruptible sleep), the watchdog takes the run over: the thread in
//! the call parks for good when it comes back, and the watchdog ends the
//! run with what [`on_hang`] was given — the audit line, the metrics and
//! the exit class a deadline failure gets (`Session` installs it) — and
//! exits the process. What the transaction had changed stays journaled;
//! the next run to take the node lock rolls it back.

use std::sync::{Condvar, Mutex, OnceLock};
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

    /// A deadline for steps that must leave `reserve` of what remains to a
    /// step after them (health's fabric reads, which leave the placement
    /// send its share): it passes `reserve` before this one does.
    pub fn leaving(&self, reserve: Duration) -> Self {
        Self::after(self.remaining().saturating_sub(reserve))
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

    /// Runs `f`, a read or write of a kernel file, on this thread under the
    /// run's watchdog: if it has not returned when the deadline passes, the
    /// watchdog ends the run (see the module). An error at once when the
    /// deadline has already passed.
    pub fn run<T>(&self, what: impl FnOnce() -> String, f: impl FnOnce() -> T) -> Result<T> {
        if self.remaining().is_zero() {
            return Err(self.passed(what()));
        }
        let guard = Guard::enter(self.instant(), self.budget, what());
        let value = f();
        guard.leave();
        Ok(value)
    }
}

/// What ends a run whose kernel call hung: given the deadline error, it
/// writes what the run must leave behind and returns the exit code. Called
/// on the watchdog's thread, once; the process exits with its code.
pub type OnHang = Box<dyn Fn(Error) -> i32 + Send + Sync>;

/// Installs (or replaces) what ends this process's run if a kernel call
/// hangs. Without one, the error is written to stderr and the process exits
/// with the error's own code.
pub fn on_hang(f: OnHang) {
    let w = watchdog();
    *lock(&w.on_hang) = Some(f);
}

/// How many watchdog threads this process started (at most one): for the
/// tests that hold the design to "no thread per I/O".
pub fn watchdog_threads() -> usize {
    WATCHDOG
        .get()
        .map_or(0, |w| usize::from(lock(&w.state).started))
}

struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
    on_hang: Mutex<Option<OnHang>>,
}

#[derive(Default)]
struct State {
    started: bool,
    /// When the watchdog next looks (it sleeps until then).
    wake_at: Option<Instant>,
    next_id: u64,
    /// Calls in progress: id, their deadline, the budget, what they do.
    calls: Vec<(u64, Instant, Duration, String)>,
    taken_over: bool,
}

static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();

fn watchdog() -> &'static Watchdog {
    WATCHDOG.get_or_init(|| Watchdog {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        on_hang: Mutex::new(None),
    })
}

/// A poisoned lock means a panic elsewhere; the data (plain values) is
/// still what was last written.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Guard {
    id: u64,
}

impl Guard {
    fn enter(until: Instant, budget: Duration, what: String) -> Self {
        let w = watchdog();
        let mut s = lock(&w.state);
        if s.taken_over {
            drop(s);
            if on_watchdog_thread() {
                // The end of a run does no kernel-file I/O; if it ever did,
                // it must not wait for itself.
                return Self { id: u64::MAX };
            }
            park_forever();
        }
        let id = s.next_id;
        s.next_id += 1;
        s.calls.push((id, until, budget, what));
        if !s.started {
            s.started = true;
            s.wake_at = Some(until);
            if std::thread::Builder::new()
                .name(WATCHDOG_THREAD.into())
                .stack_size(256 * 1024)
                .spawn(|| watch(watchdog()))
                .is_err()
            {
                // No thread, no bound: the call still runs (as `echo >`
                // would); it is said once.
                crate::log::warn("no watchdog thread: kernel I/O runs without its deadline");
            }
        } else if s.wake_at.is_none_or(|t| until < t) {
            // Sooner than the watchdog means to look: the only case that
            // wakes it (a step with a shorter deadline than the ones before).
            s.wake_at = Some(until);
            w.wake.notify_one();
        }
        Self { id }
    }

    fn leave(self) {
        let w = watchdog();
        let mut s = lock(&w.state);
        if s.taken_over && !on_watchdog_thread() {
            // The watchdog is ending the run: nothing more from this thread.
            drop(s);
            park_forever();
        }
        s.calls.retain(|c| c.0 != self.id);
    }
}

const WATCHDOG_THREAD: &str = "qoslane-watchdog";

fn on_watchdog_thread() -> bool {
    std::thread::current().name() == Some(WATCHDOG_THREAD)
}

fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn watch(w: &'static Watchdog) {
    let mut s = lock(&w.state);
    loop {
        let now = Instant::now();
        if let Some((_, _, budget, what)) = s.calls.iter().find(|c| c.1 <= now).cloned() {
            s.taken_over = true;
            drop(s);
            let error = Error::Deadline {
                what: format!("{what} (blocked in the kernel; the run was ended by its watchdog)"),
                budget,
            };
            let handler = lock(&w.on_hang);
            let code = if let Some(f) = handler.as_ref() {
                f(error)
            } else {
                crate::log::error(&error.to_string());
                error.exit_class().code()
            };
            std::process::exit(code);
        }
        // Sleep until the earliest call in progress is due; with none, until
        // a call comes that is due sooner than anything known (it wakes us).
        let next = s.calls.iter().map(|c| c.1).min();
        s.wake_at = next;
        let wait = next.map_or(Duration::from_secs(3600), |t| {
            t.saturating_duration_since(now)
        });
        s = w
            .wake
            .wait_timeout(s, wait)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::Deadline;
    use std::time::Duration;

    #[test]
    fn a_call_runs_inline_and_one_watchdog_serves_them_all() {
        let d = Deadline::after(Duration::from_secs(30));
        let here = std::thread::current().id();
        for i in 0..50 {
            let v = d
                .run(|| format!("call {i}"), || (std::thread::current().id(), i))
                .unwrap();
            assert_eq!(v, (here, i), "on the caller's thread");
        }
        assert_eq!(super::watchdog_threads(), 1);
    }

    #[test]
    fn a_passed_deadline_fails_before_the_call() {
        let d = Deadline::after(Duration::ZERO);
        let mut ran = false;
        let e = d.run(|| "read x".into(), || ran = true).unwrap_err();
        assert!(!ran);
        assert!(e.to_string().contains("read x"), "{e}");
    }
}
