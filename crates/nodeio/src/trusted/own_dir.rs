//! Judging the caller's own state directories (`/run/qoslane`,
//! `/var/lib/qoslane`) for `trusted::state_dir`: never a symlink, the
//! caller's, writable by nobody else, made with exactly [`STATE_DIR_MODE`]
//! and one found narrower widened to it.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Dir, Judge};

pub(super) fn judge_state_dir(root: &Path, dir: &Path, create: bool) -> Result<(Dir, (u32, u32))> {
    let (parent, name) = walk::split(dir)?;
    let holder = walk::open_dir(root, parent, Judge::Trusted, create.then_some(0o755))?;
    let open = || {
        rfs::openat(
            holder.fd(),
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let fd = match open() {
        Err(Errno::NOENT) if create => {
            walk::make_dir(holder.fd(), name, STATE_DIR_MODE, dir)?;
            open()
        }
        other => other,
    }
    .map_err(Error::errno("open directory", dir))?;
    let seen = judge_state_fd(fd.as_fd(), dir, None)?;
    Ok((Dir::from_parts(fd, dir.to_path_buf()), seen))
}

/// Judges the state directory `dir` by its descriptor (opened without
/// following a symlink at its last step): a directory, the caller's, not
/// writable by others; widened to [`STATE_DIR_MODE`] when narrower.
/// `seen`: its owner and mode as this run's walk saw them by the same
/// descriptor ([`walk::remembered_stat`]), not asked again. The owner and
/// mode judged.
pub(super) fn judge_state_fd(
    fd: BorrowedFd<'_>,
    dir: &Path,
    seen: Option<(u32, u32)>,
) -> Result<(u32, u32)> {
    let (st_uid, st_mode) = if let Some(seen) = seen {
        seen
    } else {
        let st = rfs::fstat(fd).map_err(Error::errno("inspect directory", dir))?;
        (st.st_uid, st.st_mode)
    };
    let me = rustix::process::geteuid().as_raw();
    match FileType::from_raw_mode(st_mode) {
        FileType::Symlink => return Err(Error::untrusted(dir, "is a symlink; refusing to use it")),
        FileType::Directory => {}
        _ => return Err(Error::untrusted(dir, "is not a directory")),
    }
    if st_uid != me {
        return Err(Error::untrusted(
            dir,
            format!("is owned by uid {st_uid}, not {me}"),
        ));
    }
    if st_mode & 0o022 != 0 {
        return Err(Error::untrusted(
            dir,
            format!(
                "is writable by group or others (mode {:o})",
                st_mode & 0o7777
            ),
        ));
    }
    if st_mode & STATE_DIR_MODE != STATE_DIR_MODE {
        widen(fd, dir, st_mode & 0o7777)?;
    }
    Ok((st_uid, st_mode))
}

/// A state directory's mode: its readers are other users (a job's
/// TaskProlog reads its record, a metrics user the counters).
pub const STATE_DIR_MODE: u32 = 0o755;

/// Widens our own state directory made too narrow (by an earlier run under
/// a umask such as 027, or by hand) to what its readers need, and says so.
/// Only the read and search bits are added: the caller has refused one
/// writable by others, and owns it.
fn widen(fd: BorrowedFd<'_>, dir: &Path, mode: u32) -> Result<()> {
    let wanted = mode | STATE_DIR_MODE;
    let opened = rfs::openat(
        fd,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Error::errno("open directory", dir))?;
    rfs::fchmod(&opened, Mode::from_raw_mode(wanted))
        .map_err(Error::errno("set the mode of", dir))?;
    let msg = format!(
        "{}: mode {mode:o} is too narrow for its readers; widened to {wanted:o}",
        dir.display()
    );
    crate::log::emit(
        crate::log::Priority::Warning,
        &format!("{}: warning: {msg}", crate::log::ident()),
        &msg,
        &[],
    );
    Ok(())
}
