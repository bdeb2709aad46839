//! Exit codes: the documented table (docs/admin-guide.md, CONTRIBUTING.md).
//! Every error kind maps to one of these in [`crate::error::Error::exit_class`].

/// Success; for hooks also "failed but rolled back under `on_failure: continue`".
pub const OK: i32 = 0;
/// The run failed: a hook under `fail_job`, an unhealthy node, a failed sync;
/// `status`: something needs attention.
pub const FAILED: i32 = 1;
/// The mapping file is invalid (`validate`, `sync`).
pub const INVALID_MAPPING: i32 = 2;
/// Bad command line or environment (an unknown `SLURM_SCRIPT_CONTEXT`).
/// A Prolog/Epilog without `SLURM_JOB_ID` is not this: it is a failed run,
/// audited, that exits 0 (a non-zero Prolog drains the node for a fault of
/// the hook wiring, and no job could be requeued by it).
pub const USAGE: i32 = 64;
/// An input file is missing or unreadable (the mapping; `log`: the audit log).
pub const NO_INPUT: i32 = 66;
/// A program qoslane needs (smpquery, squeue, ibnetdiscover) is missing or failed.
pub const UNAVAILABLE: i32 = 69;
/// A bug: an invariant did not hold.
pub const INTERNAL: i32 = 70;
/// Reading or writing state, audit or a node setting failed.
pub const IO: i32 = 74;
/// Gave up waiting: the node lock or the run's deadline. Try again.
pub const TEMPFAIL: i32 = 75;
/// The Prolog refused its job by policy (a `fail_job` level it could not
/// grant) and left the node as it was: "refuse this job, the node is fine",
/// hookrun's hook protocol (docs/hookrun.md, "Refusing a job"), which
/// requeues and holds the job and keeps the node in service. Any other
/// non-zero status of a Prolog says the hook failed: the node drains.
pub const REFUSED: i32 = 100;
/// stdout's reader went away before the output was complete (`| head`):
/// 128 + SIGPIPE, what a shell reports for a program a broken pipe ended,
/// said by nothing on stderr. hookrun's table has the same 128+N.
pub const BROKEN_PIPE: i32 = 141;

/// How a run ends, as one value: every command's result becomes one of
/// these in one place (`Session::finish`, `main`), and only here becomes a
/// number. Converted without truncating casts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitClass {
    Ok,
    Failed,
    InvalidMapping,
    Usage,
    NoInput,
    Unavailable,
    Internal,
    Io,
    TempFail,
    Refused,
    BrokenPipe,
}

impl ExitClass {
    /// The documented exit code.
    pub fn code(self) -> i32 {
        match self {
            Self::Ok => OK,
            Self::Failed => FAILED,
            Self::InvalidMapping => INVALID_MAPPING,
            Self::Usage => USAGE,
            Self::NoInput => NO_INPUT,
            Self::Unavailable => UNAVAILABLE,
            Self::Internal => INTERNAL,
            Self::Io => IO,
            Self::TempFail => TEMPFAIL,
            Self::Refused => REFUSED,
            Self::BrokenPipe => BROKEN_PIPE,
        }
    }

    /// An exit class from a code this table documents; any other is internal.
    pub fn from_code(code: i32) -> Self {
        [
            Self::Ok,
            Self::Failed,
            Self::InvalidMapping,
            Self::Usage,
            Self::NoInput,
            Self::Unavailable,
            Self::Internal,
            Self::Io,
            Self::TempFail,
            Self::Refused,
            Self::BrokenPipe,
        ]
        .into_iter()
        .find(|v| v.code() == code)
        .unwrap_or(Self::Internal)
    }
}

impl From<ExitClass> for std::process::ExitCode {
    fn from(v: ExitClass) -> Self {
        // Every documented code fits in a byte.
        Self::from(u8::try_from(v.code()).unwrap_or(70))
    }
}
