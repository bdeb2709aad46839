//! The one error type of the primitives: what was being done, to which path,
//! and why. Callers convert it into their own error kinds.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A system call failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file or a directory on its way may be changed by someone other
    /// than root or the caller, or is not what it must be.
    #[error("{} {why}", path.display())]
    Untrusted { path: PathBuf, why: String },
    /// Larger than the caller allows.
    #[error("{}: {size} bytes is more than the limit of {limit}", path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    /// Gave up waiting for a lock.
    #[error("lock {}: still held by another process after {waited_ms} ms", path.display())]
    LockTimeout { path: PathBuf, waited_ms: u128 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }

    pub(crate) fn errno(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(rustix::io::Errno) -> Self {
        let path = path.into();
        move |e| Self::Io {
            op,
            path,
            source: e.into(),
        }
    }

    pub(crate) fn untrusted(path: impl Into<PathBuf>, why: impl Into<String>) -> Self {
        Self::Untrusted {
            path: path.into(),
            why: why.into(),
        }
    }

    /// Whether this is a missing file or directory.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}
