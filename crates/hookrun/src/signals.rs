//! Signal handling without handlers: SIGTERM, SIGINT and SIGHUP are blocked
//! and read from a `signalfd` (`nodeio::sigmask::take_into_fd`), which
//! `nodeio::child` polls next to the hook's pipes and pidfd ([`Signals`] is
//! its [`Interrupt`]). So SIGTERM from Slurm (its PrologEpilogTimeout;
//! SIGKILL follows ~10 ms later) wakes hookrun at once, and the running
//! hook's process group is killed before anything else; a stop signal that
//! arrives between hooks stays pending until [`Signals::termination`] reads
//! it. A hook's exit wakes the loop through its pidfd: no SIGCHLD handler.
//! The signal mask hookrun inherited is cleared (but for the three): a
//! SIGTERM blocked by whoever started it still reaches hookrun, through the
//! fd. Its hooks start with an empty mask (spawned or forked).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::Signal;
use nodeio::child::Interrupt;
use nodeio::sigmask::SignalReader;

/// The signals that stop hookrun (after it stopped its hook).
pub const TERMINATION_SIGNALS: [i32; 3] = [
    Signal::SIGTERM as i32,
    Signal::SIGINT as i32,
    Signal::SIGHUP as i32,
];

/// The stop signals' descriptor and the last one read.
#[derive(Debug)]
pub struct Signals {
    reader: SignalReader,
    /// The last termination signal read, 0 for none.
    received: AtomicI32,
    /// The signals hookrun was started with blocked (the mask now holds
    /// only the stop signals, read from the fd).
    pub were_blocked: Vec<i32>,
}

impl Signals {
    /// Blocks the stop signals into their descriptor, the rest of the
    /// inherited mask cleared. Call once per process, before any thread is
    /// started.
    pub fn install() -> io::Result<Signals> {
        let (reader, were_blocked) =
            nodeio::sigmask::take_into_fd(&TERMINATION_SIGNALS).map_err(io::Error::from)?;
        Ok(Signals {
            reader,
            received: AtomicI32::new(0),
            were_blocked,
        })
    }

    /// Takes what the descriptor holds into `received`.
    fn read(&self) {
        if let Some(signal) = self.reader.take() {
            self.received.store(signal, Ordering::SeqCst);
        }
    }

    /// The termination signal received so far, if any (one read of the
    /// descriptor: a signal pending since is taken now).
    pub fn termination(&self) -> Option<i32> {
        self.read();
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }
}

impl Interrupt for Signals {
    /// Readable while a stop signal is pending.
    fn wake_fd(&self) -> BorrowedFd<'_> {
        self.reader.fd()
    }

    /// Reads the pending signals.
    fn drain(&self) {
        self.read();
    }

    /// A termination signal stops the running hook at once. Asked before
    /// every wait: what was read when the fd woke the loop (a signal that
    /// came before the wait makes the fd readable at once).
    fn stop(&self) -> bool {
        self.received.load(Ordering::SeqCst) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stop signal that comes while hookrun runs no hook stays pending
    /// (blocked, not lost) until `termination` reads it; `stop` answers
    /// what was read, and the descriptor is what the poll loop waits on.
    #[test]
    fn a_stop_signal_between_hooks_is_read_when_asked() {
        // On a thread of its own, signalled with `raise` (to the calling
        // thread): the mask is per thread, and a signal to the process could
        // be taken by another test thread with its default action.
        std::thread::spawn(|| {
            let signals = Signals::install().expect("signalfd");
            assert_eq!(signals.termination(), None);
            assert!(!signals.stop());
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGHUP).expect("raise");
            assert!(!signals.stop(), "not read yet");
            let mut fds = [rustix::event::PollFd::from_borrowed_fd(
                signals.wake_fd(),
                rustix::event::PollFlags::IN,
            )];
            let timeout = rustix::event::Timespec {
                tv_sec: 5,
                tv_nsec: 0,
            };
            assert_eq!(
                rustix::event::poll(&mut fds, Some(&timeout)).expect("poll"),
                1
            );
            signals.drain();
            assert!(signals.stop(), "read by the drain");
            assert_eq!(signals.termination(), Some(Signal::SIGHUP as i32));
            nodeio::sigmask::clear().expect("unblock");
        })
        .join()
        .expect("the test thread");
    }
}
