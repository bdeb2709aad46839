//! Appending to a log file (the audit log) that root keeps: the directory is
//! reached without following anyone else's symlink (made 0750 when missing),
//! the file opened with `O_APPEND | O_CREAT | O_NOFOLLOW`, each record one
//! `write(2)` (appends of one write do not interleave), then `fdatasync`
//! (where files outlive a reboot: [`atomic::persistent`]). The audit line is
//! the one record of a run that must survive a crash of the node, so this is
//! the one flush a hook makes on a real node.
//!
//! [`atomic::persistent`]: crate::atomic::persistent

use std::fs::File;
use std::io::Write;
use std::path::Path;

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Judge};

/// Appends `record` (one line, with its newline) to `path`, made with mode
/// `mode` (exactly, whatever the umask) when missing.
pub fn append_line(root: &Path, path: &Path, record: &[u8], mode: u32) -> Result<()> {
    let (dir_path, name) = walk::split(path)?;
    let dir = walk::open_dir(root, dir_path, Judge::NoFollow, Some(0o750))?;
    let open = |create: OFlags| {
        rfs::openat(
            dir.fd(),
            name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC | create,
            Mode::from_raw_mode(mode),
        )
    };
    // Made here: `mode` exactly, whatever the umask; an existing file keeps
    // the mode it has.
    let fd = match open(OFlags::CREATE | OFlags::EXCL) {
        Ok(fd) => rfs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777)).map(|()| fd),
        Err(Errno::EXIST) => open(OFlags::empty()),
        Err(e) => Err(e),
    }
    .map_err(Error::errno("open", path))?;
    let mut f = File::from(fd);
    let n = f.write(record).map_err(Error::io("append to", path))?;
    if n != record.len() {
        return Err(Error::io("append to", path)(std::io::Error::other(
            "short write",
        )));
    }
    if crate::atomic::persistent(&f) {
        f.sync_data().map_err(Error::io("fsync", path))?;
    }
    Ok(())
}
