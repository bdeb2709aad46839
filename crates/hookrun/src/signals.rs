//! Signal handling without `unsafe`: signal-hook records the signal and writes a
//! byte to a socket, and [`crate::child`] polls that socket next to the hook's
//! pipes. So SIGTERM from Slurm (its PrologEpilogTimeout; SIGKILL follows ~10 ms
//! later) wakes hookrun at once, and it kills the running hook's process group
//! before anything else. SIGCHLD wakes it the same way when a hook exits.

use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};

use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};

/// The signals that stop hookrun (after it stopped its hook).
pub const TERMINATION_SIGNALS: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];

/// The last termination signal received, 0 for none. Set from the handler.
static TERMINATION: AtomicUsize = AtomicUsize::new(0);

/// Installed handlers plus the read end of the wake-up socket.
#[derive(Debug)]
pub struct Signals {
    wake: UnixStream,
}

impl Signals {
    /// Installs the handlers. Call once per process.
    pub fn install() -> io::Result<Signals> {
        let (wake, notify) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        for signal in TERMINATION_SIGNALS {
            // Small positive constants: the conversion cannot fail.
            let value = usize::try_from(signal).unwrap_or(usize::MAX);
            signal_hook::flag::register_usize(signal, &TERMINATION, value)?;
            signal_hook::low_level::pipe::register(signal, notify.try_clone()?)?;
        }
        signal_hook::low_level::pipe::register(SIGCHLD, notify)?;
        Ok(Signals { wake })
    }

    /// The termination signal received so far, if any.
    pub fn termination(&self) -> Option<i32> {
        match TERMINATION.load(Ordering::SeqCst) {
            0 => None,
            signal => i32::try_from(signal).ok(),
        }
    }

    /// Readable when a signal arrived since the last [`Signals::drain`].
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Empties the wake-up socket.
    pub fn drain(&self) {
        let mut buffer = [0u8; 64];
        while let Ok(n) = (&self.wake).read(&mut buffer) {
            if n == 0 {
                break;
            }
        }
    }
}
