//! Exit codes: the documented constants and the one place that maps how a run
//! ended ([`ExitClass`]) onto them (docs/hookrun.md has the table); and the
//! one status a hook exits with to say something other than "failed"
//! ([`HOOK_REFUSES_JOB`]).
//!
//! Slurm only tells zero from non-zero for Prolog/Epilog (non-zero drains the
//! node) and TaskProlog (non-zero fails the task), and only logs the status of
//! HealthCheckProgram. The distinct non-zero values are for the admin reading
//! slurmd's log or running hookrun by hand.

/// What a Prolog hook exits with to say "refuse this job, the node is fine"
/// (any other non-zero status says "I failed"): hookrun sets the job's
/// `AdminComment` to the hook's first line and requeues it (`scontrol
/// requeue`: pending again, not held) — or, when it cannot be requeued (an
/// srun's or salloc's job), leaves it to the hook's TaskProlog — and exits
/// 0, so the node stays in service: a refusal never drains it. Outside sysexits' 64–78 and the shell's 126–165; in the other
/// phases it is a failure like any non-zero status.
pub const HOOK_REFUSES_JOB: i32 = 100;

/// Every required hook passed, or a failure was handled without draining
/// (`on_failure = requeue` and `scontrol requeuehold` succeeded), or a hook
/// refused the job; health: healthy.
pub const OK: i32 = 0;
/// A required hook failed (policy `drain`, or an Epilog/TaskProlog); health: unhealthy.
pub const HOOK_FAILED: i32 = 1;
/// `hookrun.conf` is invalid (a bad line or value) or may not be trusted
/// (others may write it): the code qoslane exits with for an invalid
/// mapping, its configuration file — one table for both programs.
pub const BAD_CONFIG: i32 = 2;
/// Invalid command line or environment (an unsupported
/// `SLURM_SCRIPT_CONTEXT`): sysexits' `EX_USAGE`, as qoslane's.
pub const USAGE: i32 = 64;
/// A required Prolog hook failed under `on_failure = requeue` and the
/// requeue-hold did not succeed, so hookrun falls back to draining.
pub const REQUEUE_FAILED: i32 = 3;
/// hookrun could not run the hooks at all (hook directory unreadable, not a
/// directory, signal set-up failed).
pub const SETUP_FAILED: i32 = 4;
/// Offset added to the signal number when hookrun is stopped by SIGTERM,
/// SIGINT or SIGHUP (143 for SIGTERM), as a shell would report it.
pub const SIGNAL_BASE: i32 = 128;
/// stdout's reader went away before `hookrun list` finished (`| head`):
/// 128 + SIGPIPE, said by nothing — qoslane's views end the same way.
pub const BROKEN_PIPE: i32 = SIGNAL_BASE + nix::sys::signal::Signal::SIGPIPE as i32;

/// How a hookrun invocation ended, before it becomes a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitClass {
    /// All required hooks passed (optional failures do not count).
    Success,
    /// A required Prolog hook failed and `scontrol requeuehold` held the job:
    /// the node stays in service.
    Requeued,
    /// A required Prolog hook refused the job ([`HOOK_REFUSES_JOB`]) and
    /// `scontrol requeue` put it back to pending (not held): the node stays
    /// in service.
    Refused,
    /// A required Prolog hook refused the job and it could not be requeued
    /// (an srun's or salloc's job, scontrol unreachable): the hook's
    /// TaskProlog fails its tasks; the node stays in service.
    RefusedInPlace,
    /// A required hook failed and the phase reports it with a non-zero status.
    RequiredHookFailed,
    /// Health check found a problem (the node was drained, if it could be).
    Unhealthy,
    /// Requeue-hold was the policy (`on_failure = requeue`) but did not
    /// work; non-zero so the Prolog fails (the node drains). Never a
    /// refusal's.
    RequeueFailed,
    /// `hookrun.conf` invalid or untrusted.
    BadConfig,
    /// Bad command line or environment.
    Usage,
    /// The hooks could not be run at all.
    SetupFailed,
    /// hookrun received this termination signal and stopped its hooks.
    Interrupted(i32),
}

impl ExitClass {
    /// The process exit status for this class. Exhaustive on purpose: a new
    /// class has to pick its code here.
    pub fn exit_code(self) -> i32 {
        match self {
            ExitClass::Success
            | ExitClass::Requeued
            | ExitClass::Refused
            | ExitClass::RefusedInPlace => OK,
            ExitClass::RequiredHookFailed | ExitClass::Unhealthy => HOOK_FAILED,
            ExitClass::BadConfig => BAD_CONFIG,
            ExitClass::Usage => USAGE,
            ExitClass::RequeueFailed => REQUEUE_FAILED,
            ExitClass::SetupFailed => SETUP_FAILED,
            ExitClass::Interrupted(signal) => SIGNAL_BASE + signal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_values() {
        assert_eq!(ExitClass::Success.exit_code(), 0);
        assert_eq!(ExitClass::Requeued.exit_code(), 0);
        assert_eq!(ExitClass::Refused.exit_code(), 0);
        assert_eq!(ExitClass::RefusedInPlace.exit_code(), 0);
        assert_eq!(HOOK_REFUSES_JOB, 100);
        assert_eq!(ExitClass::RequiredHookFailed.exit_code(), 1);
        assert_eq!(ExitClass::Unhealthy.exit_code(), 1);
        assert_eq!(ExitClass::BadConfig.exit_code(), 2);
        assert_eq!(ExitClass::Usage.exit_code(), 64);
        assert_eq!(ExitClass::RequeueFailed.exit_code(), 3);
        assert_eq!(ExitClass::SetupFailed.exit_code(), 4);
        assert_eq!(ExitClass::Interrupted(15).exit_code(), 143);
        assert_eq!(BROKEN_PIPE, 141);
    }
}
