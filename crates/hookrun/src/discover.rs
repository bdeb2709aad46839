//! Which files of a hook directory run, in which order, and which are ignored
//! (and why — `hookrun list` shows the reasons).
//!
//! Rules: ascending byte order of the file name; dotfiles, editor and package
//! leftovers, directories, non-executables and broken symlinks are ignored;
//! symlinks to executables run. A name ending in [`OPTIONAL_SUFFIX`] marks an
//! optional hook; every other hook is required.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nodeio::walk::Dir;
use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::trust::FileId;

/// A hook whose file name ends with this is optional: its failure is logged and
/// counted, never acted on.
pub const OPTIONAL_SUFFIX: &str = ".optional";

/// Name suffixes left behind by editors and package managers.
const LEFTOVER_SUFFIXES: [&str; 10] = [
    "~",
    ".bak",
    ".swp",
    ".rpmnew",
    ".rpmsave",
    ".rpmorig",
    ".dpkg-old",
    ".dpkg-new",
    ".dpkg-dist",
    ".dpkg-tmp",
];

/// One hook that will run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The file name, as on disk.
    pub file_name: OsString,
    /// The file name for logs and metric labels (lossy for non-UTF-8 names).
    pub name: String,
    /// Full path, run directly (no shell).
    pub path: PathBuf,
    pub required: bool,
    /// Set when the file may not be trusted to run as this user (see
    /// [`crate::trust`]): it is not run, and counts as a failed hook.
    pub refused: Option<String>,
    /// The file judged (a symlink's target), when it was: a hook that is
    /// the running binary itself may run built in ([`crate::builtin`]).
    pub file: Option<FileId>,
}

/// Why an entry of the directory does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    Dotfile,
    Leftover(&'static str),
    Directory,
    NotRegularFile,
    NotExecutable,
    BrokenSymlink,
    Unreadable(String),
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ignored::Dotfile => f.write_str("dotfile"),
            Ignored::Leftover(pattern) => write!(f, "editor/package leftover ({pattern})"),
            Ignored::Directory => f.write_str("directory"),
            Ignored::NotRegularFile => f.write_str("not a regular file"),
            Ignored::NotExecutable => f.write_str("not executable"),
            Ignored::BrokenSymlink => f.write_str("broken symlink"),
            Ignored::Unreadable(error) => write!(f, "cannot inspect: {error}"),
        }
    }
}

impl Ignored {
    /// Worth a warning on every run: probably a mistake, not a convention.
    pub fn is_suspicious(&self) -> bool {
        matches!(self, Ignored::BrokenSymlink | Ignored::Unreadable(_))
    }
}

/// The contents of one hook directory.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub dir: PathBuf,
    /// `false` when the directory does not exist (nothing runs; success).
    pub exists: bool,
    /// In run order.
    pub hooks: Vec<Hook>,
    /// In name order.
    pub ignored: Vec<(String, Ignored)>,
}

/// A hook directory that cannot be read.
#[derive(Debug)]
pub struct ScanError {
    pub dir: PathBuf,
    pub error: io::Error,
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "failed to read hook directory {}: {}",
            self.dir.display(),
            self.error
        )
    }
}

impl std::error::Error for ScanError {}

/// Decides from the name alone whether an entry is ignored.
pub fn ignored_by_name(name: &OsStr) -> Option<Ignored> {
    let bytes = name.as_bytes();
    if bytes.starts_with(b".") {
        return Some(Ignored::Dotfile);
    }
    if bytes.len() >= 2 && bytes.starts_with(b"#") && bytes.ends_with(b"#") {
        return Some(Ignored::Leftover("#*#"));
    }
    LEFTOVER_SUFFIXES
        .iter()
        .find(|suffix| bytes.ends_with(suffix.as_bytes()))
        .map(|suffix| Ignored::Leftover(suffix))
}

/// Whether a hook with this file name is optional.
pub fn is_optional(name: &OsStr) -> bool {
    name.as_bytes().ends_with(OPTIONAL_SUFFIX.as_bytes())
}

/// Lists `dir`. A missing directory is an empty listing. The directory is
/// judged once ([`crate::trust::open_dir`]) and everything after goes
/// through its descriptor: its entries read, each one looked at and each
/// hook judged in it — not by its path again, which could lead elsewhere by
/// then.
pub fn scan(root: &Path, dir: &Path) -> Result<Listing, ScanError> {
    let scan_error = |error| ScanError {
        dir: dir.to_owned(),
        error,
    };
    // Whoever can write the directory decides what runs (crate::trust).
    let judged = match crate::trust::open_dir(root, dir) {
        Ok(judged) => judged,
        // Missing, whatever the directories above it are (as before it was
        // judged through its descriptor): nothing runs.
        Err(e) if e.is_not_found() || !dir.exists() => {
            return Ok(Listing {
                dir: dir.to_owned(),
                exists: false,
                ..Listing::default()
            });
        }
        Err(why) => {
            return Err(scan_error(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("refusing to use it: {why}"),
            )));
        }
    };
    let mut names = entries(&judged).map_err(scan_error)?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));

    let mut listing = Listing {
        dir: dir.to_owned(),
        exists: true,
        ..Listing::default()
    };
    for file_name in names {
        let name = file_name.to_string_lossy().into_owned();
        let path = dir.join(&file_name);
        if let Some(reason) = classify(&judged, &file_name) {
            listing.ignored.push((name, reason));
            continue;
        }
        let (file, refused) = match crate::trust::check_file_in(root, &judged, &file_name) {
            Ok(file) => (Some(file), None),
            Err(why) => (None, Some(why)),
        };
        listing.hooks.push(Hook {
            required: !is_optional(&file_name),
            refused,
            file,
            file_name,
            name,
            path,
        });
    }
    Ok(listing)
}

/// The names in a judged directory (`.` and `..` left out).
fn entries(dir: &Dir) -> io::Result<Vec<OsString>> {
    let fd = rustix::fs::openat(
        dir.fd(),
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    let mut reader = rustix::fs::Dir::new(fd)?;
    while let Some(entry) = reader.read() {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(OsString::from_vec(name));
        }
    }
    Ok(names)
}

/// `None` when the entry runs.
fn classify(dir: &Dir, file_name: &OsStr) -> Option<Ignored> {
    if let Some(reason) = ignored_by_name(file_name) {
        return Some(reason);
    }
    // Followed: a link to an executable is a hook.
    let st = match rustix::fs::statat(dir.fd(), file_name, AtFlags::empty()) {
        Ok(st) => st,
        Err(errno) => {
            let is_link = rustix::fs::statat(dir.fd(), file_name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
            return Some(if is_link && errno == Errno::NOENT {
                Ignored::BrokenSymlink
            } else {
                Ignored::Unreadable(io::Error::from(errno).to_string())
            });
        }
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => return Some(Ignored::Directory),
        FileType::RegularFile => {}
        _ => return Some(Ignored::NotRegularFile),
    }
    // access(2) answers "may *this* process execute it", which is what matters
    // (the TaskProlog runs as the job user).
    if rustix::fs::accessat(dir.fd(), file_name, Access::EXEC_OK, AtFlags::empty()).is_err() {
        return Some(Ignored::NotExecutable);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_name(name: &str) -> Option<Ignored> {
        ignored_by_name(OsStr::new(name))
    }

    #[test]
    fn leftovers_and_dotfiles_are_ignored_by_name() {
        for name in [
            "10-x~",
            "10-x.bak",
            "10-x.swp",
            "10-x.rpmnew",
            "10-x.rpmsave",
            "10-x.rpmorig",
            "10-x.dpkg-old",
            "10-x.dpkg-new",
            "10-x.dpkg-dist",
            "10-x.dpkg-tmp",
            "#10-x#",
            ".10-x",
            ".10-x.swp",
        ] {
            assert!(by_name(name).is_some(), "{name} should be ignored");
        }
        for name in ["10-x", "10-x.sh", "10-x.optional", "#10", "bak", "x.bak.sh"] {
            assert_eq!(by_name(name), None, "{name} should run");
        }
    }

    #[test]
    fn optional_suffix() {
        assert!(is_optional(OsStr::new("20-gpu.optional")));
        assert!(!is_optional(OsStr::new("20-gpu.optional.sh")));
        assert!(!is_optional(OsStr::new("20-optional")));
    }
}
