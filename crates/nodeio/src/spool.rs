//! Taking a spool file another program appends to (OpenSM's event plugin,
//! `smplugin/`): its reader protocol is "rename `DIR/events` to
//! `DIR/taken`, read it to its end, keep it open and read its tail again
//! at the next round" (a write already under way when the file was renamed
//! lands in the renamed file).
//!
//! [`Spool::take`] does one round: the tail of the file taken last round
//! (then closed), then `renameat(DIR/live → DIR/taken)` in the judged
//! directory and the renamed file read from its start — at most `limit`
//! bytes in all, so a reader's memory is bounded whatever the writer did.
//! The directory is reached under [`Judge::Trusted`] (root's or the
//! caller's, not writable by others unless sticky: whoever could write it
//! could feed the reader anything); the taken file is opened
//! `O_NOFOLLOW | O_NONBLOCK` and must be a regular file of root or the
//! caller, not writable by group or others: a symlink, a FIFO, a device or
//! another user's file put in its place is refused, never followed or
//! waited on. A directory that does not exist (yet) is no error: nothing
//! to take.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Judge, trusted_uid};

/// A spool directory and the file taken last round, held open.
#[derive(Debug)]
pub struct Spool {
    root: PathBuf,
    dir: PathBuf,
    held: Option<(File, u64, PathBuf)>,
}

/// What one round read.
#[derive(Debug, Default)]
pub struct Round {
    /// The last round's file's tail, then the file taken now.
    pub bytes: Vec<u8>,
    /// Where the file taken now starts in `bytes` (its records are at
    /// multiples of the record size from there).
    pub start: usize,
    /// A file was there to take.
    pub took: bool,
    /// More was there than `limit`: the rest is not read.
    pub truncated: bool,
    /// The directory exists.
    pub dir_exists: bool,
}

impl Spool {
    /// The spool at `dir` (absolute) under the root prefix `root`.
    pub fn new(root: &Path, dir: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            dir: dir.to_path_buf(),
            held: None,
        }
    }

    /// One round (see the module's text).
    ///
    /// # Errors
    /// The directory cannot be reached or is not trusted, the rename
    /// fails, or the file taken is not one to read (a symlink, not a
    /// regular file, another user's, writable by others).
    pub fn take(&mut self, live: &str, taken: &str, limit: usize) -> Result<Round> {
        let mut out = Round::default();
        if let Some((mut file, at, path)) = self.held.take() {
            read_from(&mut file, at, limit, &mut out.bytes, &path)?;
            if out.bytes.len() >= limit {
                out.truncated = true;
            }
        }
        // The tail read may have ended inside a record (a torn write): the
        // file taken now starts on a record boundary of its own.
        out.start = out.bytes.len();
        let dir = match walk::open_dir(&self.root, &self.dir, Judge::Trusted, None) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(out),
            Err(e) => return Err(e),
        };
        out.dir_exists = true;
        let path = dir.child(taken);
        match rfs::renameat(dir.fd(), live, dir.fd(), taken) {
            Ok(()) => {}
            Err(Errno::NOENT) => return Ok(out),
            Err(e) => return Err(Error::errno("rename", &dir.child(live))(e)),
        }
        out.took = true;
        let fd: OwnedFd = rfs::openat(
            dir.fd(),
            taken,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::LOOP => Error::untrusted(&path, "is a symlink; refusing to read it"),
            e => Error::errno("open", &path)(e),
        })?;
        let st = rfs::fstat(&fd).map_err(Error::errno("inspect", &path))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(Error::untrusted(&path, "is not a regular file"));
        }
        if !trusted_uid(st.st_uid) {
            return Err(Error::untrusted(
                &path,
                format!("is owned by uid {}, not root or the caller", st.st_uid),
            ));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(Error::untrusted(
                &path,
                format!(
                    "is writable by group or others (mode {:o})",
                    st.st_mode & 0o7777
                ),
            ));
        }
        let mut file = File::from(fd);
        let room = limit.saturating_sub(out.bytes.len());
        let before = out.bytes.len();
        read_from(&mut file, 0, room, &mut out.bytes, &path)?;
        let got = out.bytes.len() - before;
        if got >= room {
            out.truncated = true;
        }
        self.held = Some((file, u64::try_from(got).unwrap_or(u64::MAX), path));
        Ok(out)
    }
}

/// Appends at most `limit` bytes of `file` from `at` to `buf`.
fn read_from(file: &mut File, at: u64, limit: usize, buf: &mut Vec<u8>, path: &Path) -> Result<()> {
    file.seek(SeekFrom::Start(at))
        .map_err(Error::io("seek", path))?;
    file.take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(buf)
        .map_err(Error::io("read", path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn write(p: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode_0640()
            .open(p)
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    trait Mode0640 {
        fn mode_0640(&mut self) -> &mut Self;
    }
    impl Mode0640 for std::fs::OpenOptions {
        fn mode_0640(&mut self) -> &mut Self {
            use std::os::unix::fs::OpenOptionsExt;
            self.mode(0o640)
        }
    }

    #[test]
    fn a_round_takes_the_file_and_the_next_reads_its_late_tail() {
        let d = dir();
        let mut s = Spool::new(Path::new("/"), d.path());
        let t = s.take("events", "taken", 1 << 20).unwrap();
        assert!(t.dir_exists && !t.took && t.bytes.is_empty());
        write(&d.path().join("events"), b"AAAA");
        let t = s.take("events", "taken", 1 << 20).unwrap();
        assert!(t.took);
        assert_eq!(t.bytes, b"AAAA");
        assert!(!d.path().join("events").exists(), "renamed");
        // a write under way lands in the renamed file; a new file begins
        write(&d.path().join("taken"), b"BB");
        write(&d.path().join("events"), b"CC");
        let t = s.take("events", "taken", 1 << 20).unwrap();
        assert_eq!(t.bytes, b"BBCC");
        assert_eq!(t.start, 2, "the new file starts after the old one's tail");
    }

    #[test]
    fn a_missing_directory_is_nothing_to_take() {
        let d = dir();
        let mut s = Spool::new(Path::new("/"), &d.path().join("not-yet"));
        let t = s.take("events", "taken", 64).unwrap();
        assert!(!t.dir_exists && !t.took);
    }

    #[test]
    fn reads_are_bounded() {
        let d = dir();
        write(&d.path().join("events"), &[7u8; 1000]);
        let mut s = Spool::new(Path::new("/"), d.path());
        let t = s.take("events", "taken", 128).unwrap();
        assert_eq!(t.bytes.len(), 128);
        assert!(t.truncated);
    }

    #[test]
    fn a_symlink_or_fifo_in_its_place_is_refused_never_followed() {
        let d = dir();
        let secret = d.path().join("secret");
        write(&secret, b"not for the reader");
        std::os::unix::fs::symlink(&secret, d.path().join("events")).unwrap();
        let mut s = Spool::new(Path::new("/"), d.path());
        let e = s.take("events", "taken", 1024).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.path().join("events"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = s.take("events", "taken", 1024).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_file_others_may_write_is_refused() {
        let d = dir();
        let p = d.path().join("events");
        write(&p, b"x");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Spool::new(Path::new("/"), d.path())
            .take("events", "taken", 1024)
            .unwrap_err();
        assert!(e.to_string().contains("writable"), "{e}");
    }
}
