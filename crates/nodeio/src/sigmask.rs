//! The signal mask a process inherited: cleared before it installs handlers.
//!
//! A signal mask survives `fork` and `exec`. A program started with SIGTERM
//! blocked (a supervisor's mask, a shell that blocked it around a fork, a
//! wrapper that never restored it) never runs its SIGTERM handler: hookrun
//! would ignore slurmd's SIGTERM at PrologEpilogTimeout, and the hook in its
//! own process group would outlive slurmd's SIGKILL, which reaches only
//! hookrun's group. Children started by [`crate::child`] get an empty mask
//! anyway (std's spawn sets it); this is for the process itself.

use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};

/// Empties the calling thread's signal mask (call it first in `main`,
/// before any thread is started: threads inherit it) and returns the
/// signals that were blocked, so the caller can say so.
pub fn clear() -> nix::Result<Vec<i32>> {
    let mut old = SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::empty()),
        Some(&mut old),
    )?;
    Ok(old.iter().map(|s| s as i32).collect())
}

#[cfg(test)]
mod tests {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

    #[test]
    fn an_inherited_block_is_cleared_and_reported() {
        // On a thread of its own: the mask is per thread.
        std::thread::spawn(|| {
            pthread_sigmask(
                SigmaskHow::SIG_BLOCK,
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
}
