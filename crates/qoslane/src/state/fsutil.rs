//! File primitives for state that root writes and others read: atomic
//! replace, no symlink following, owner checks, bounded sizes.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Largest state file we read; anything bigger is not ours.
pub const MAX_STATE_BYTES: u64 = 1 << 20;

/// Creates `dir` (mode 0755) if missing and checks it is a real directory
/// owned by us and not writable by group or others.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(Error::io("create directory", dir))?;
        }
        Err(e) => return Err(Error::io("inspect directory", dir)(e)),
    }
    check_dir(dir)
}

/// A state directory must be a directory (not a symlink), owned by the
/// effective user, not group- or world-writable.
pub fn check_dir(dir: &Path) -> Result<()> {
    let md = fs::symlink_metadata(dir).map_err(Error::io("inspect directory", dir))?;
    if md.file_type().is_symlink() {
        return Err(Error::state(dir, "is a symlink; refusing to use it"));
    }
    if !md.is_dir() {
        return Err(Error::state(dir, "is not a directory"));
    }
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me {
        return Err(Error::state(
            dir,
            format!("is owned by uid {}, not {me}", md.uid()),
        ));
    }
    if md.mode() & 0o022 != 0 {
        return Err(Error::state(
            dir,
            format!(
                "is writable by group or others (mode {:o})",
                md.mode() & 0o7777
            ),
        ));
    }
    Ok(())
}

/// Replaces `path` atomically with `data`: a temp file beside it (created
/// exclusively, never through a symlink), fsynced, renamed over, the
/// directory fsynced. Readers see the old or the new file, never half.
pub fn atomic_write(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let (_, dir) = replace(path, data, mode, true)?;
    sync_dir(dir)
}

/// A file [`atomic_replace`] put in place whose content may not be on disk yet.
#[derive(Debug)]
#[must_use = "flush it, unless the file need not survive a crash"]
pub struct Unflushed {
    file: File,
    path: PathBuf,
}

impl Unflushed {
    /// Makes the replacement durable: the file's data, then the rename.
    pub fn flush(self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(Error::io("fsync", &self.path))?;
        match self.path.parent() {
            Some(dir) => sync_dir(dir),
            None => Ok(()),
        }
    }
}

/// [`atomic_write`] without waiting for the disk: readers see the old or the
/// new file, never half, as soon as it returns; [`Unflushed::flush`] makes it
/// durable, and can run after a lock is released so that concurrent writers'
/// flushes overlap (a journaling filesystem commits them together) instead of
/// queueing behind the lock. Left unflushed, a crash may bring back the
/// previous version or, on some filesystems, an empty file: for files that are
/// rewritten by the next run (the metrics textfile) or read defensively.
pub fn atomic_replace(path: &Path, data: &[u8], mode: u32) -> Result<Unflushed> {
    let (file, _) = replace(path, data, mode, false)?;
    Ok(Unflushed {
        file,
        path: path.to_owned(),
    })
}

/// Writes `data` to an exclusive temp file beside `path` (fsynced first when
/// `flush`), renames it over `path`; the file and its directory.
fn replace<'a>(path: &'a Path, data: &[u8], mode: u32, flush: bool) -> Result<(File, &'a Path)> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::state(path, "has no parent directory"))?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::state(path, "has no file name"))?;
    let tmp = dir.join(temp_name(&name.to_string_lossy(), std::process::id()));
    let _ = fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)
        .map_err(Error::io("create", &tmp))?;
    // create_new honours the umask; set the mode we mean.
    let res = (|| {
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(Error::io("chmod", &tmp))?;
        f.write_all(data).map_err(Error::io("write", &tmp))?;
        if flush {
            f.sync_all().map_err(Error::io("fsync", &tmp))?;
        }
        fs::rename(&tmp, path).map_err(Error::io("rename into place", path))
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res?;
    Ok((f, dir))
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("fsync directory", dir))
}

/// The name of [`atomic_write`]'s temp file for `name`, by process `pid`.
fn temp_name(name: &str, pid: u32) -> String {
    format!(".{name}.tmp.{pid}")
}

/// Whether `name` is one of [`atomic_write`]'s temp files; its writer's pid.
pub fn temp_file_writer(name: &str) -> Option<i32> {
    let (_, pid) = name.strip_prefix('.')?.rsplit_once(".tmp.")?;
    pid.parse().ok()
}

/// Removes the temp files of atomic writes in `dir` whose writer is gone (a
/// write killed between creating and renaming it: Slurm's timeout kill, an
/// OOM kill). A live writer's file is never touched, so this is safe with or
/// without the node lock. Best effort: failures are ignored.
pub fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = temp_file_writer(&name.to_string_lossy()) else {
            continue;
        };
        let alive = rustix::process::Pid::from_raw(pid).is_some_and(|p| {
            !matches!(
                rustix::process::test_kill_process(p),
                Err(rustix::io::Errno::SRCH)
            )
        });
        if !alive {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Removes `path` if present and makes the removal durable.
pub fn remove(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", path)(e)),
    }
}

/// Reads a state file we wrote: never through a symlink, only a regular file
/// owned by `owner`, at most [`MAX_STATE_BYTES`]. `Ok(None)` when absent.
pub fn read_trusted(path: &Path, owner: u32) -> Result<Option<Vec<u8>>> {
    let f = match OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(Error::state(path, "is a symlink; refusing to read it"));
        }
        Err(e) => return Err(Error::io("open", path)(e)),
    };
    let md = f.metadata().map_err(Error::io("stat", path))?;
    if !md.is_file() {
        return Err(Error::state(path, "is not a regular file"));
    }
    if md.uid() != owner {
        return Err(Error::state(
            path,
            format!(
                "is owned by uid {}, not {owner}; refusing to trust it",
                md.uid()
            ),
        ));
    }
    if md.len() > MAX_STATE_BYTES {
        return Err(Error::state(
            path,
            format!("is {} bytes, more than a state file can be", md.len()),
        ));
    }
    let mut buf = Vec::with_capacity(md.len() as usize);
    f.take(MAX_STATE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(Error::io("read", path))?;
    Ok(Some(buf))
}

/// Reads and parses a JSON state file owned by us.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    let me = rustix::process::geteuid().as_raw();
    match read_trusted(path, me)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::state(path, format!("is not valid: {e}"))),
    }
}

pub fn write_json<T: serde::Serialize>(path: &Path, value: &T, mode: u32) -> Result<()> {
    let mut data = serde_json::to_vec_pretty(value)
        .map_err(|e| Error::Internal(format!("serialise {}: {e}", path.display())))?;
    data.push(b'\n');
    atomic_write(path, &data, mode)
}

/// Creates a directory shared with other programs (node_exporter's textfile
/// directory) without insisting on owning it.
pub fn ensure_dir_relaxed(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(Error::io("create directory", dir))
}
