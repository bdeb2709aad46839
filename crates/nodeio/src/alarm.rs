//! A blocking syscall with an end: a timer that signals the calling thread
//! (`SIGALRM`, thread-directed) at an instant and every millisecond after it,
//! so that the syscall returns `EINTR` and its caller can give up.
//!
//! This is how a bounded wait can sleep in the kernel instead of polling: a
//! lock waiter blocked in `flock` is woken by the holder's release at once,
//! where a polling waiter left the lock free for up to its period and, many
//! at a time, took the cores from the holder (256 waiters polling every 5 ms
//! on a 2-core node: the 256-pair storm of bench/cycle.sh ran into its
//! deadlines).
//!
//! The signal's disposition is set on every [`Alarm::at`] (a handler that does
//! nothing, without `SA_RESTART`), so an inherited `SIG_IGN` cannot defeat it,
//! and the signal is unblocked in the calling thread while the alarm exists
//! (a signal mask survives `exec`: slurmd's could block it). The repeat after
//! the instant covers a signal that lands just before the thread enters the
//! syscall. Nothing else in qoslane or hookrun may use `SIGALRM`.

use std::time::{Duration, Instant};

use nix::sys::signal::{
    self, SaFlags, SigAction, SigEvent, SigHandler, SigSet, SigevNotify, SigmaskHow, Signal,
};
use nix::sys::time::TimeSpec;
use nix::sys::timer::{Expiration, Timer, TimerSetTimeFlags};
use nix::time::ClockId;

const SIGNAL: Signal = Signal::SIGALRM;
const REPEAT: Duration = Duration::from_millis(1);

extern "C" fn interrupt(_: nix::libc::c_int) {}

/// While it exists, the calling thread is sent `SIGALRM` at `until` and every
/// millisecond after; dropping it deletes the timer and restores the thread's
/// signal mask.
#[derive(Debug)]
pub struct Alarm {
    timer: Option<Timer>,
    mask: SigSet,
}

impl Alarm {
    pub fn at(until: Instant) -> nix::Result<Alarm> {
        let action = SigAction::new(
            SigHandler::Handler(interrupt),
            SaFlags::empty(),
            SigSet::empty(),
        );
        // SAFETY: the handler does nothing, which is async-signal-safe, and
        // touches no state; replacing SIGALRM's disposition is this module's
        // documented contract (nothing else in the workspace uses SIGALRM).
        #[expect(unsafe_code, reason = "installing a signal handler is unsafe in nix")]
        unsafe {
            signal::sigaction(SIGNAL, &action)?;
        }
        let mut mask = SigSet::empty();
        signal::pthread_sigmask(
            SigmaskHow::SIG_UNBLOCK,
            Some(&SigSet::from(SIGNAL)),
            Some(&mut mask),
        )?;
        let mut alarm = Alarm { timer: None, mask };
        let thread = nix::unistd::gettid().as_raw();
        let mut timer = Timer::new(
            ClockId::CLOCK_MONOTONIC,
            SigEvent::new(SigevNotify::SigevThreadId {
                signal: SIGNAL,
                thread_id: thread,
                si_value: 0,
            }),
        )?;
        // An instant already past still fires (a zero value would disarm).
        let first = until
            .saturating_duration_since(Instant::now())
            .max(Duration::from_micros(1));
        timer.set(
            Expiration::IntervalDelayed(TimeSpec::from(first), TimeSpec::from(REPEAT)),
            TimerSetTimeFlags::empty(),
        )?;
        alarm.timer = Some(timer);
        Ok(alarm)
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // The timer goes first: a signal it already sent is delivered, to the
        // handler that does nothing, when timer_delete returns.
        drop(self.timer.take());
        if self.mask.contains(SIGNAL) {
            let _ = signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.mask), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A read of a pipe nobody writes blocks for ever; the alarm ends it,
    /// also in a thread that blocks SIGALRM and with SIGALRM ignored.
    #[test]
    fn ends_a_blocking_read_whatever_the_mask_and_disposition() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::from(SIGNAL)), None)
                .expect("block");
            // SAFETY: SIG_IGN installs no code.
            #[expect(
                unsafe_code,
                reason = "the test ignores SIGALRM as an inherited disposition would"
            )]
            unsafe {
                signal::signal(SIGNAL, SigHandler::SigIgn).expect("ignore");
            }
            let (r, _w) = rustix::pipe::pipe().expect("pipe");
            let start = Instant::now();
            let alarm = Alarm::at(start + Duration::from_millis(30)).expect("alarm");
            let mut buf = [0u8; 1];
            let got = rustix::io::read(&r, &mut buf);
            drop(alarm);
            let _ = tx.send((got, start.elapsed()));
        });
        let (got, waited) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the read was not interrupted");
        assert_eq!(got, Err(rustix::io::Errno::INTR));
        assert!(waited >= Duration::from_millis(30), "{waited:?}");
    }

    /// After the alarm is dropped, a blocked SIGALRM is blocked again.
    #[test]
    fn restores_the_mask() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::from(SIGNAL)), None)
                .expect("block");
            drop(Alarm::at(Instant::now() + Duration::from_secs(60)).expect("alarm"));
            let mut now = SigSet::empty();
            signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, None, Some(&mut now)).expect("mask");
            let _ = tx.send(now.contains(SIGNAL));
        });
        assert!(rx.recv_timeout(Duration::from_secs(20)).expect("thread"));
    }
}
