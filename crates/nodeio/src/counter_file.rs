//! A JSON file that short-lived processes update read-modify-write: counters
//! of runs, kept across them. The update happens under a [`lock`] beside the
//! file; the new content replaces the old atomically. It is not fsynced: a
//! power loss can cost the last increments (Prometheus reads a counter that
//! went down as a reset) or, on a filesystem that does not order the rename
//! after the data, the file (started over, and said) — never a run's
//! outcome, which the audit line keeps. A file that cannot be read as `T` is
//! started over, and said so. Readers
//! need no lock (the file is replaced, never written in place) and may be
//! other users: the file is judged as a [`trusted`] read (owned by root or
//! the reader), so its mode is the caller's choice (0644 to be readable).
//!
//! [`lock`]: crate::lock
//! [`trusted`]: crate::trusted

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::atomic::{self, Durability, Pending};
use crate::error::{Error, Result};
use crate::trusted::{self, Symlink};
use crate::walk::{self, Judge};

/// Largest counter file read: anything bigger is not ours.
pub const MAX_BYTES: u64 = 4 << 20;

/// The result of an update, still under the lock: what must follow the
/// update in the same order as the updates (a textfile rendered from it) is
/// done before [`Updated::release`].
#[derive(Debug)]
#[must_use = "release the lock"]
pub struct Updated<T> {
    pub value: T,
    /// The file's content as written (compact JSON): what a reader compares
    /// with the file now, byte for byte, to learn whether anyone updated it
    /// since, without parsing it ([`load_bytes`]).
    pub written: Vec<u8>,
    /// Set when the old file could not be read and counting started over.
    pub restarted: Option<String>,
    /// `None` when replaced through a kept spare ([`update_kept`]).
    pending: Option<Pending>,
    lock: crate::lock::Lock,
}

impl<T> Updated<T> {
    /// Releases the lock. The update is visible; it is not flushed (see the
    /// module).
    pub fn release(self) -> Result<T> {
        drop(self.lock);
        drop(self.pending);
        Ok(self.value)
    }
}

impl<T> Updated<T> {
    /// [`Updated::release`], and the file written, held open: whether it is
    /// still the file at its name tells whether anyone updated it since
    /// ([`Written::in_place`]: a `statat`, where comparing the content read
    /// back costs an open, a read and a close). `None` when replaced
    /// through a kept spare ([`update_kept`]: compare the content).
    pub fn release_written(self) -> Result<(T, Option<Written>)> {
        drop(self.lock);
        let written = self.pending.and_then(|p| {
            let file = p.into_file();
            let st = rustix::fs::fstat(&file).ok()?;
            Some(Written {
                file,
                dev: st.st_dev,
                ino: st.st_ino,
            })
        });
        Ok((self.value, written))
    }
}

/// The file an update wrote, held open: its inode, and so its number, stays
/// its own while this lives (no file made later can take the number and be
/// taken for it).
#[derive(Debug)]
pub struct Written {
    #[expect(dead_code, reason = "held: see the type")]
    file: std::fs::File,
    dev: u64,
    ino: u64,
}

impl Written {
    /// Whether `path` (the file updated) is still this file: nobody updated
    /// it since (every update puts a new file in place by a rename). Any
    /// doubt (the file or its directory unreadable) says no.
    pub fn in_place(&self, root: &Path, path: &Path) -> bool {
        let Ok((dir, name)) = walk::split(path) else {
            return false;
        };
        let Ok(d) = walk::open_dir(root, dir, Judge::Trusted, None) else {
            return false;
        };
        rustix::fs::statat(d.fd(), name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_dev == self.dev && st.st_ino == self.ino)
    }
}

/// Updates `dir/name` under the lock `dir/lock_name` (waiting until
/// `until`): reads it (default when absent), applies `f`, replaces it with
/// mode `mode`. `dir` is made when missing (0755) and must be trusted.
pub fn update<T, F>(
    root: &Path,
    dir: &Path,
    name: &str,
    lock_name: &str,
    mode: u32,
    until: Instant,
    f: F,
) -> Result<Updated<T>>
where
    T: Serialize + DeserializeOwned + Default,
    F: FnOnce(&mut T),
{
    let d = walk::open_dir(root, dir, Judge::Trusted, Some(0o755))?;
    let lock = crate::lock::acquire(&d, lock_name, until)?;
    let path = dir.join(name);
    let (value, restarted, data) = modify(&path, load::<T>(root, &path), f)?;
    let pending = atomic::replace_in(d, name.as_ref(), &data, mode, Durability::Visible)?;
    Ok(Updated {
        value,
        written: data,
        restarted,
        pending: Some(pending),
        lock,
    })
}

/// [`update`], for a file only its writers and an admin's tools read: the
/// directory reached once (the lock and the file opened through it), the
/// file replaced through a kept spare (`atomic::replace_kept`: no file
/// created or removed per update; a reader holding the file open across two
/// updates can read a mix: its readers read again what does not parse).
/// The spare, `.NAME.spare`, lives in `dir` for good: whoever removes the
/// directory removes it.
pub fn update_kept<T, F>(
    root: &Path,
    dir: &Path,
    name: &str,
    lock_name: &str,
    mode: u32,
    until: Instant,
    f: F,
) -> Result<Updated<T>>
where
    T: Serialize + DeserializeOwned + Default,
    F: FnOnce(&mut T),
{
    let d = walk::open_dir(root, dir, Judge::Trusted, Some(0o755))?;
    let lock = crate::lock::acquire(&d, lock_name, until)?;
    let path = dir.join(name);
    let read = trusted::read_in(root, &d, name.as_ref(), MAX_BYTES).and_then(|b| parse(&path, b));
    let (value, restarted, data) = modify(&path, read, f)?;
    atomic::replace_kept(&d, name.as_ref(), &data, mode)?;
    Ok(Updated {
        value,
        written: data,
        restarted,
        pending: None,
        lock,
    })
}

/// The value read (or started over, and said), `f` applied, and the bytes
/// to write (compact JSON).
fn modify<T, F>(path: &Path, read: Result<Option<T>>, f: F) -> Result<(T, Option<String>, Vec<u8>)>
where
    T: Serialize + Default,
    F: FnOnce(&mut T),
{
    let mut restarted = None;
    let mut value = match read {
        Ok(v) => v.unwrap_or_default(),
        Err(e @ (Error::Untrusted { .. } | Error::TooLarge { .. })) => {
            restarted = Some(format!("{e}; counting from zero"));
            T::default()
        }
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::InvalidData => {
            restarted = Some(format!(
                "{} is not valid ({source}); counting from zero",
                path.display()
            ));
            T::default()
        }
        Err(e) => return Err(e),
    };
    f(&mut value);
    // Compact: a short-lived process reads and writes it at every run.
    let mut data = serde_json::to_vec(&value).map_err(|e| Error::Io {
        op: "serialise",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    data.push(b'\n');
    Ok((value, restarted, data))
}

/// The file's bytes, judged as [`load`] judges them, unparsed; `Ok(None)`
/// when absent.
pub fn load_bytes(root: &Path, path: &Path) -> Result<Option<Vec<u8>>> {
    trusted::read(root, path, Symlink::Refuse, MAX_BYTES)
}

/// Reads the file (no lock needed); `Ok(None)` when absent. Content that is
/// not a `T` is an `InvalidData` I/O error.
pub fn load<T: DeserializeOwned>(root: &Path, path: &Path) -> Result<Option<T>> {
    parse(path, load_bytes(root, path)?)
}

/// [`load`] of bytes already read.
pub fn parse<T: DeserializeOwned>(path: &Path, bytes: Option<Vec<u8>>) -> Result<Option<T>> {
    match bytes {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Error::Io {
                op: "parse",
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// A writer tells whether anyone updated the file since its own update
    /// by the file at the name, not by reading it back.
    #[test]
    fn the_file_written_is_in_place_until_another_update() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("lib");
        let path = dir.join("c.json");
        let update = || {
            update::<BTreeMap<String, u64>, _>(
                tmp.path(),
                &dir,
                "c.json",
                "c.lock",
                0o644,
                Instant::now() + Duration::from_secs(1),
                |m| *m.entry("runs".into()).or_default() += 1,
            )
            .expect("updated")
        };
        let (_, mine) = update().release_written().expect("released");
        let mine = mine.expect("written by a rename");
        assert!(mine.in_place(tmp.path(), &path));
        // Another run's update, even with the same content.
        let (_, theirs) = update().release_written().expect("released");
        assert!(!mine.in_place(tmp.path(), &path), "updated since");
        assert!(theirs.expect("written").in_place(tmp.path(), &path));
        std::fs::remove_file(&path).expect("rm");
        assert!(!mine.in_place(tmp.path(), &path), "gone");
    }

    #[test]
    fn counts_add_up_and_corrupt_files_restart() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("lib");
        let until = || Instant::now() + Duration::from_secs(1);
        for _ in 0..3 {
            let u = update::<BTreeMap<String, u64>, _>(
                tmp.path(),
                &dir,
                "c.json",
                "c.lock",
                0o644,
                until(),
                |m| {
                    *m.entry("runs".into()).or_default() += 1;
                },
            )
            .expect("updated");
            assert!(u.restarted.is_none());
            u.release().expect("flushed");
        }
        let m: BTreeMap<String, u64> = load(tmp.path(), &dir.join("c.json"))
            .expect("load")
            .expect("some");
        assert_eq!(m["runs"], 3);
        std::fs::write(dir.join("c.json"), "{not json").expect("write");
        let u = update::<BTreeMap<String, u64>, _>(
            tmp.path(),
            &dir,
            "c.json",
            "c.lock",
            0o644,
            until(),
            |_| {},
        )
        .expect("updated");
        assert!(
            u.restarted
                .as_deref()
                .expect("restarted")
                .contains("counting from zero")
        );
        u.release().expect("flushed");
    }
}
