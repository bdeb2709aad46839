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

    #[error("unhealthy: {0}")]
    Unhealthy(String),

    #[error("state {}: {detail}", path.display())]
    State { path: PathBuf, detail: String },

    #[error("internal error: {0}")]
    Internal(String),
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

    pub fn state(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Self::State {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// The documented exit code. Exhaustive: a new kind forces a decision.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) => exit_code::USAGE,
            Self::MappingMissing { .. } => exit_code::NO_INPUT,
            Self::MappingInvalid { .. } => exit_code::INVALID_MAPPING,
            Self::Io { .. } | Self::State { .. } => exit_code::IO,
            Self::LockTimeout { .. } | Self::Deadline { .. } => exit_code::TEMPFAIL,
            Self::Program { .. } => exit_code::UNAVAILABLE,
            Self::Verify { .. } | Self::Fabric(_) | Self::Unhealthy(_) => exit_code::FAILED,
            Self::Internal(_) => exit_code::INTERNAL,
        }
    }
}
