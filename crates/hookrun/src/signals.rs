//! Signal handling without `unsafe`: signal-hook records the signal and writes a
//! byte to a socket, and `nodeio::child` polls that socket next to the hook's
//! pipes and pidfd ([`Signals`] is its [`Interrupt`]). So SIGTERM from Slurm
//! (its PrologEpilogTimeout; SIGKILL follows ~10 ms later) wakes hookrun at
//! once, and the running hook's process group is killed before anything else.
//! A hook's exit wakes the loop through its pidfd: no SIGCHLD handler.
//! The signal mask hookrun inherited is cleared first: a SIGTERM blocked by
//! whoever started it would never reach the handler.

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodeio::child::Interrupt;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};

/// The signals that stop hookrun (after it stopped its hook).
pub const TERMINATION_SIGNALS: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];

/// The last termination signal received, 0 for none. Set from the handler.
static TERMINATION: AtomicUsize = AtomicUsize::new(0);

/// Installed handlers plus the read end of the wake-up socket.
#[derive(Debug)]
pub struct Signals {
    wake: UnixStream,
    /// The signals hookrun was started with blocked (now unblocked).
    pub were_blocked: Vec<i32>,
}

impl Signals {
    /// Clears the inherited signal mask and installs the handlers. Call once
    /// per process, before any thread is started.
    pub fn install() -> io::Result<Signals> {
        let were_blocked = nodeio::sigmask::clear().map_err(io::Error::from)?;
        let (wake, notify) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        for signal in TERMINATION_SIGNALS {
            // Small positive constants: the conversion cannot fail.
            let value = usize::try_from(signal).unwrap_or(usize::MAX);
            signal_hook::flag::register_usize(signal, &TERMINATION, value)?;
            signal_hook::low_level::pipe::register(signal, notify.try_clone()?)?;
        }
        Ok(Signals { wake, were_blocked })
    }

    /// The termination signal received so far, if any.
    pub fn termination(&self) -> Option<i32> {
        match TERMINATION.load(Ordering::SeqCst) {
            0 => None,
            signal => i32::try_from(signal).ok(),
        }
    }
}

impl Interrupt for Signals {
    /// Readable when a signal arrived since the last [`Interrupt::drain`].
    fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Empties the wake-up socket.
    fn drain(&self) {
        let mut buffer = [0u8; 64];
        while let Ok(n) = (&self.wake).read(&mut buffer) {
            if n == 0 {
                break;
            }
        }
    }

    /// A termination signal stops the running hook at once.
    fn stop(&self) -> bool {
        self.termination().is_some()
    }
}
