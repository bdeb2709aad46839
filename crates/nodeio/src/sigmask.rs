//! The signal mask a process inherited, and the stop signals read from a
//! descriptor.
//!
//! A signal mask survives `fork` and `exec`. A program started with SIGTERM
//! blocked (a supervisor's mask, a shell that blocked it around a fork, a
//! wrapper that never restored it) never runs its SIGTERM handler: hookrun
//! would ignore slurmd's SIGTERM at PrologEpilogTimeout, and the hook in its
//! own process group would outlive slurmd's SIGKILL, which reaches only
//! hookrun's group. Children started by [`crate::child`] get an empty mask
//! whatever their caller's (`posix_spawn`'s attribute in `child/spawn.rs` —
//! std's spawn passes the caller's mask on — and the emptied mask of a
//! built-in's fork); this is for the process itself.
//!
//! [`take_into_fd`] is how hookrun receives its stop signals: the mask set
//! to exactly them (whatever it inherited cleared) and a `signalfd` that
//! reads them, polled by [`crate::child`] beside the programs' pipes. No
//! handler, no self-pipe: one descriptor and two syscalls, where a handler
//! writing a byte to a socket per signal took a socketpair and, per signal,
//! two `sigaction`s, a `dup`, two `fcntl`s and a test `sendto`. A stop
//! signal is never lost: blocked, it stays pending until read.

use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// Empties the calling thread's signal mask (call it first in `main`,
/// before any thread is started: threads inherit it) and returns the
/// signals that were blocked, so the caller can say so.
pub fn clear() -> nix::Result<Vec<i32>> {
    set(&SigSet::empty())
}

/// Sets the calling thread's mask to exactly `mask`; what was blocked.
fn set(mask: &SigSet) -> nix::Result<Vec<i32>> {
    let mut old = SigSet::empty();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(mask), Some(&mut old))?;
    Ok(old.iter().map(|s| s as i32).collect())
}

/// Stop signals received through a `signalfd` ([`take_into_fd`]).
#[derive(Debug)]
pub struct SignalReader {
    fd: SignalFd,
}

/// Opens a non-blocking `signalfd` for `signals` and sets the calling
/// thread's mask to exactly them (call it before any thread is started:
/// threads inherit the mask, and a thread that does not block them would
/// take them with their default action); returns the reader and the
/// signals that were blocked before (the inherited mask, cleared).
/// A number that is no signal: `EINVAL`.
pub fn take_into_fd(signals: &[i32]) -> nix::Result<(SignalReader, Vec<i32>)> {
    let mut mask = SigSet::empty();
    for &signal in signals {
        mask.add(Signal::try_from(signal)?);
    }
    let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let were_blocked = set(&mask)?;
    Ok((SignalReader { fd }, were_blocked))
}

impl SignalReader {
    /// Reads every signal pending; the last one, `None` for none.
    pub fn take(&self) -> Option<i32> {
        let mut last = None;
        while let Ok(Some(info)) = self.fd.read_signal() {
            last = i32::try_from(info.ssi_signo).ok();
        }
        last
    }

    /// Readable while a signal is pending.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

    /// The calling thread's mask as a test runner may have left it: a
    /// thread inherits its creator's mask, and `cargo test` run from a
    /// shell or supervisor that blocked a signal (SIGHUP here) hands it to
    /// every test thread. What a test asserts must not depend on it.
    fn as_a_runner_may_leave_it() {
        pthread_sigmask(
            SigmaskHow::SIG_BLOCK,
            Some(&SigSet::from(Signal::SIGHUP)),
            None,
        )
        .unwrap();
    }

    #[test]
    fn an_inherited_block_is_cleared_and_reported() {
        // On a thread of its own: the mask is per thread.
        std::thread::spawn(|| {
            as_a_runner_may_leave_it();
            // the inherited mask: exactly SIGTERM, whatever the runner left.
            pthread_sigmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::from(Signal::SIGTERM)),
                None,
            )
            .unwrap();
            let was = super::clear().unwrap();
            assert_eq!(was, [Signal::SIGTERM as i32]);
            let mut now = SigSet::empty();
            pthread_sigmask(SigmaskHow::SIG_BLOCK, None, Some(&mut now)).unwrap();
            assert!(!now.contains(Signal::SIGTERM));
            assert_eq!(super::clear().unwrap(), Vec::<i32>::new());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_stop_signal_is_read_from_the_fd_and_the_mask_is_exactly_them() {
        // On a thread of its own, signalled with `raise` (to the calling
        // thread): a signal to the process could be taken by another test
        // thread.
        std::thread::spawn(|| {
            as_a_runner_may_leave_it();
            // the inherited mask: exactly SIGUSR2, whatever the runner left.
            pthread_sigmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::from(Signal::SIGUSR2)),
                None,
            )
            .unwrap();
            let (reader, was) = super::take_into_fd(&[Signal::SIGUSR1 as i32]).unwrap();
            assert_eq!(
                was,
                [Signal::SIGUSR2 as i32],
                "the inherited mask, reported"
            );
            let mut now = SigSet::empty();
            pthread_sigmask(SigmaskHow::SIG_BLOCK, None, Some(&mut now)).unwrap();
            assert_eq!(now.iter().collect::<Vec<_>>(), [Signal::SIGUSR1]);
            assert_eq!(reader.take(), None, "nothing pending yet");
            nix::sys::signal::raise(Signal::SIGUSR1).unwrap();
            let mut fds = [rustix::event::PollFd::from_borrowed_fd(
                reader.fd(),
                rustix::event::PollFlags::IN,
            )];
            let ready = rustix::event::poll(
                &mut fds,
                Some(&rustix::event::Timespec {
                    tv_sec: 5,
                    tv_nsec: 0,
                }),
            )
            .unwrap();
            assert_eq!(ready, 1, "the fd woke the poll");
            assert_eq!(reader.take(), Some(Signal::SIGUSR1 as i32));
            assert_eq!(reader.take(), None, "read once");
            super::clear().unwrap();
        })
        .join()
        .unwrap();
    }
}
