//! What the primitives remember of the process they run in: its pid, asked
//! of the kernel once (every temp file's name and every look for a dead
//! writer's leftovers need it). A fork that does not `exec` — `child`'s
//! built-in programs — starts a new process with the old one's memory:
//! [`forget`] is called first thing in it, so that the new process asks again.

use std::sync::atomic::{AtomicU32, Ordering};

/// 0: not asked yet in this process.
static PID: AtomicU32 = AtomicU32::new(0);

/// This process's pid.
pub fn id() -> u32 {
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// Forgets what was remembered: called in the child of a fork without exec.
pub(crate) fn forget() {
    PID.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pid_is_the_process_s_and_asked_again_after_forget() {
        assert_eq!(super::id(), std::process::id());
        super::forget();
        assert_eq!(super::id(), std::process::id());
    }
}
