//! qoslane's face of the `nodeio` primitives: its state files (JSON, owned by
//! root, never a symlink, bounded) through nodeio's trusted read and atomic
//! replace, with nodeio's errors as qoslane's. No primitive is written here:
//! each lives once, in `nodeio`.

use std::ffi::OsString;
use std::path::Path;

use nodeio::atomic::{self, Durability};
use nodeio::trusted::{self, Symlink};
use nodeio::walk::Judge;

use crate::error::{Error, Result};
use crate::paths::Paths;

pub use nodeio::atomic::{Pending, temp_file_writer};

/// Largest state file we read; anything bigger is not ours.
pub const MAX_STATE_BYTES: u64 = 1 << 20;

impl From<nodeio::Error> for Error {
    fn from(e: nodeio::Error) -> Self {
        match e {
            nodeio::Error::Io { op, path, source } => Error::Io {
                action: op,
                path,
                source,
            },
            nodeio::Error::Untrusted { path, why } => Error::State { path, detail: why },
            nodeio::Error::TooLarge { path, size, .. } => Error::State {
                path,
                detail: format!("is {size} bytes, more than a state file can be"),
            },
            nodeio::Error::LockTimeout { path, waited_ms } => Error::LockTimeout {
                path,
                waited: std::time::Duration::from_millis(
                    u64::try_from(waited_ms).unwrap_or(u64::MAX),
                ),
            },
        }
    }
}

/// Creates a state directory (0755) if missing and checks it: reached
/// through trusted directories, not a symlink, owned by us, not writable by
/// group or others.
pub fn ensure_dir(paths: &Paths, dir: &Path) -> Result<()> {
    trusted::state_dir(&paths.root, dir, true)?;
    Ok(())
}

/// [`ensure_dir`] without creating.
pub fn check_dir(paths: &Paths, dir: &Path) -> Result<()> {
    trusted::state_dir(&paths.root, dir, false)?;
    Ok(())
}

/// Replaces a state file durably (`nodeio::atomic`).
pub fn atomic_write(paths: &Paths, path: &Path, data: &[u8], mode: u32) -> Result<()> {
    atomic::write(&paths.root, path, data, mode, Judge::Trusted, false)?;
    Ok(())
}

/// Replaces a file of a state directory with one another user owns
/// (`owner`: uid, gid) and reads (`mode`), durably (`nodeio::atomic::write_owned`).
pub fn write_for_user(
    paths: &Paths,
    path: &Path,
    data: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> Result<()> {
    atomic::write_owned(&paths.root, path, data, (mode, owner), Judge::Trusted)?;
    Ok(())
}

/// Replaces a state file, visible at once, durable on [`Pending::flush`].
pub fn atomic_replace(paths: &Paths, path: &Path, data: &[u8], mode: u32) -> Result<Pending> {
    Ok(atomic::replace(
        &paths.root,
        path,
        data,
        mode,
        Judge::Trusted,
        false,
        Durability::Visible,
    )?)
}

/// Replaces a file an admin asked for (`--output`, `--textfile`: a shared
/// directory, judged no-follow) with `mode`, visible at once and not
/// flushed: every run writes it whole again.
pub fn publish(paths: &Paths, path: &Path, text: &str, mode: u32) -> Result<()> {
    let _visible = atomic::replace(
        &paths.root,
        path,
        text.as_bytes(),
        mode,
        Judge::NoFollow,
        false,
        Durability::Visible,
    )?;
    Ok(())
}

/// Removes a state file if present, durably.
pub fn remove(paths: &Paths, path: &Path) -> Result<bool> {
    Ok(atomic::remove(&paths.root, path, Judge::Trusted)?)
}

/// Removes the temp files of atomic writes in `dir` whose writer is gone.
pub fn remove_stale_temp_files(paths: &Paths, dir: &Path) {
    let _ = remove_stale_temp_files_listing(paths, dir);
}

/// [`remove_stale_temp_files`], and the other names the look found in `dir`
/// (`nodeio`'s `remove_leftovers_listing`): `None` when it did not list it.
pub fn remove_stale_temp_files_listing(paths: &Paths, dir: &Path) -> Option<Vec<OsString>> {
    let d = nodeio::walk::open_dir(&paths.root, dir, Judge::Trusted, None).ok()?;
    atomic::remove_leftovers_listing(&d)
}

/// Reads a state file: never through a symlink, a regular file of root or
/// us, at most [`MAX_STATE_BYTES`]. `Ok(None)` when absent.
pub fn read_trusted(paths: &Paths, path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(trusted::read(
        &paths.root,
        path,
        Symlink::Refuse,
        MAX_STATE_BYTES,
    )?)
}

/// Reads and parses a JSON state file.
pub fn read_json<T: serde::de::DeserializeOwned>(paths: &Paths, path: &Path) -> Result<Option<T>> {
    match read_trusted(paths, path)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::state(path, format!("is not valid: {e}"))),
    }
}

/// [`write_json`] of a state file this run reads again (the node state and
/// the grants: the metrics' gauges read them after the run wrote them): the read
/// is handed what was written while nobody replaced it since
/// (`nodeio::atomic::write_read_again`).
pub fn write_json_read_again<T: serde::Serialize>(
    paths: &Paths,
    path: &Path,
    value: &T,
    mode: u32,
) -> Result<()> {
    let data = json_line(path, value)?;
    atomic::write_read_again(&paths.root, path, &data, mode, false)?;
    Ok(())
}

/// Writes a state file as compact JSON (one line): the hooks write and read
/// them at every run; `qoslane status` shows them to people.
pub fn write_json<T: serde::Serialize>(
    paths: &Paths,
    path: &Path,
    value: &T,
    mode: u32,
) -> Result<()> {
    atomic_write(paths, path, &json_line(path, value)?, mode)
}

/// `value` as the one JSON line a state file holds.
fn json_line<T: serde::Serialize>(path: &Path, value: &T) -> Result<Vec<u8>> {
    let mut data = serde_json::to_vec(value)
        .map_err(|e| Error::Internal(format!("serialise {}: {e}", path.display())))?;
    data.push(b'\n');
    Ok(data)
}
