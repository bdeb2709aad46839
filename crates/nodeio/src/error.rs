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

/// Whether a file of a device is gone: "gone" judged once, from what the
/// kernel answers for a file or device that vanished. qoslane's settings
/// (the planner, the rollback, recovery) and its reads of HCA ports under
/// sysfs ask this, nothing else compares errnos.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absence {
    /// `ENOENT`: the file itself was removed (a configfs entry or a sysfs
    /// directory taken away with its device).
    File,
    /// `ENODEV` or `ENXIO`: the file is still there, the device behind it is
    /// not — an admin-made configfs group outliving an HCA reset or a driver
    /// reload (`default_roce_tos` answers `ENODEV`), a sysfs attribute of an
    /// unregistered device, a device node whose driver is gone.
    Device,
}

impl Absence {
    /// What `errno` says of the file, if it says it is gone. `EIO` is not
    /// gone: a live driver answers it too (a write the hardware refused), and
    /// taking it for gone would grant or restore nothing while saying all is
    /// well (docs/RELIABILITY.md argues it).
    pub fn of(errno: i32) -> Option<Self> {
        use rustix::io::Errno;
        if errno == Errno::NOENT.raw_os_error() {
            Some(Self::File)
        } else if errno == Errno::NODEV.raw_os_error() || errno == Errno::NXIO.raw_os_error() {
            Some(Self::Device)
        } else {
            None
        }
    }

    /// What an I/O error says of the file, if it says it is gone.
    pub fn of_io(e: &io::Error) -> Option<Self> {
        e.raw_os_error().and_then(Self::of)
    }
}
