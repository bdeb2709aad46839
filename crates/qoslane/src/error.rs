//! The error type of every fallible operation, and its exit code.
//!
//! Messages are lowercase fragments that read well after "failed to"; each
//! names the thing (path, job, program) and, for a failed check, both values.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::exit_code;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Usage(String),

    #[error("read mapping {}: {source}", path.display())]
    MappingMissing { path: PathBuf, source: io::Error },

    #[error("{first}{}", if *count > 1 { format!(" (and {} more)", count - 1) } else { String::new() })]
    MappingInvalid {
        path: PathBuf,
        count: usize,
        first: String,
    },

    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },

    #[error("node lock {} still held by another run after {} ms", path.display(), waited.as_millis())]
    LockTimeout { path: PathBuf, waited: Duration },

    #[error("{what}: deadline of {} ms passed", budget.as_millis())]
    Deadline { what: String, budget: Duration },

    #[error("{}: {detail}", program.display())]
    Program { program: PathBuf, detail: String },

    #[error("verify {path}: wrote {wanted:?}, read back {found:?}")]
    Verify {
        path: String,
        wanted: String,
        found: String,
    },

    #[error("fabric check: {0}")]
    Fabric(String),

    /// A level refused for a node setting that cannot be written.
    #[error("node settings: {0}")]
    Settings(String),

    #[error("unhealthy: {0}")]
    Unhealthy(String),

    /// A job whose QoS could not be learnt, refused (`on_unknown_qos:
    /// fail_job`, or no usable mapping that says otherwise).
    #[error("QoS unknown: {0}")]
    QosUnknown(String),

    #[error("state {}: {detail}", path.display())]
    State { path: PathBuf, detail: String },

    /// A change failed and so did putting the node back: the journal is
    /// kept for the next run (or `qoslane recover`). Both errors are kept;
    /// the CLI prints the restore error as the cause.
    #[error("{error}; and the rollback failed too (journal kept for the next run)")]
    RollbackFailed {
        error: Box<Error>,
        #[source]
        restore: Box<Error>,
    },

    #[error("internal (a bug): {0}")]
    Internal(String),

    /// stdout's reader went away (`qoslane log | head -1`): nothing more is
    /// written and nothing is said; the run ends as a shell reports a
    /// program SIGPIPE ended (141).
    #[error("write output: the reader closed the pipe")]
    BrokenPipe,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }

    /// A failed write of a command's output to stdout: a reader that went
    /// away is [`Self::BrokenPipe`], anything else an I/O error.
    pub fn output(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Self::BrokenPipe
        } else {
            Self::io("write output", "<stdout>")(e)
        }
    }

    pub fn state(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Self::State {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// The documented exit code. Exhaustive: a new kind forces a decision.
    pub fn exit_code(&self) -> i32 {
        self.exit_class().code()
    }

    /// The exit class of this error. Exhaustive: a new kind forces a
    /// decision.
    pub fn exit_class(&self) -> exit_code::ExitClass {
        use exit_code::ExitClass;
        match self {
            Self::Usage(_) => ExitClass::Usage,
            Self::MappingMissing { .. } => ExitClass::NoInput,
            Self::MappingInvalid { .. } => ExitClass::InvalidMapping,
            Self::Io { .. } | Self::State { .. } => ExitClass::Io,
            Self::LockTimeout { .. } | Self::Deadline { .. } => ExitClass::TempFail,
            Self::Program { .. } => ExitClass::Unavailable,
            Self::Verify { .. }
            | Self::Fabric(_)
            | Self::Settings(_)
            | Self::Unhealthy(_)
            | Self::QosUnknown(_) => ExitClass::Failed,
            // The documented meaning of 70: a bug, or a rollback that itself
            // failed (the node needs `recover`).
            Self::RollbackFailed { .. } | Self::Internal(_) => ExitClass::Internal,
            Self::BrokenPipe => ExitClass::BrokenPipe,
        }
    }

    /// Whether a run that failed with this error left the node as a
    /// finished transaction leaves it (nothing begun, or rolled back): what
    /// lets a `fail_job` Prolog refuse its job without taking the node out
    /// of service. Not after a rollback that failed or a bug. (A run the
    /// watchdog ended — a kernel call hung — is never a refusal either:
    /// `session.rs` decides that where it ends such a run.) Exhaustive: a
    /// new kind forces a decision.
    pub fn leaves_node_consistent(&self) -> bool {
        match self {
            Self::Usage(_)
            | Self::MappingMissing { .. }
            | Self::MappingInvalid { .. }
            | Self::Io { .. }
            | Self::State { .. }
            | Self::LockTimeout { .. }
            | Self::Deadline { .. }
            | Self::Program { .. }
            | Self::Verify { .. }
            | Self::Fabric(_)
            | Self::Settings(_)
            | Self::QosUnknown(_)
            | Self::Unhealthy(_)
            | Self::BrokenPipe => true,
            Self::RollbackFailed { .. } | Self::Internal(_) => false,
        }
    }

    /// The whole chain on one line, for the audit log and the journal:
    /// `outer; caused by: inner`.
    pub fn with_causes(&self) -> String {
        let mut out = self.to_string();
        for cause in self.chain().skip(1) {
            // An I/O error's message already ends with its source's.
            let text = cause.to_string();
            if !out.ends_with(&text) {
                out.push_str("; caused by: ");
                out.push_str(&text);
            }
        }
        out
    }

    /// This error and its causes, outermost first (for `caused by:` lines).
    pub fn chain(&self) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
        std::iter::successors(Some(self as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
    }
}
