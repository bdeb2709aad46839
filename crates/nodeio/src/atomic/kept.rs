//! A replacement through a kept spare file ([`replace_kept`]): for a file
//! rewritten at every run under its writers' lock in a directory nobody
//! else can write (hookrun's metric state), whose readers are its writers
//! (under the lock) and tools an admin runs. Creating a file and unlinking
//! the old one at every run is what a replacement costs on ext4 (a new
//! inode found in the bitmap, the old one freed: 0.1–0.3 ms a file); here
//! the file swapped out is kept under the spare name `.NAME.spare` and the
//! next run writes into it and swaps it back.
//!
//! What a reader sees: the file in place is never written to, so a reader
//! that opens it and reads at once sees the old content or the new one,
//! as with [`replace`](super::replace). Only a reader that holds it open
//! across two replacements (opened before one, still reading after the
//! next began to write into it, now the spare) can read a mix: not for a
//! file others read on their own schedule (node_exporter's textfiles keep
//! [`replace`](super::replace)); the owner's readers of such a file read it
//! again when it does not parse. Not flushed (`Durability::Visible`).
//!
//! The spare is judged before it is written: opened without following a
//! symlink, a regular file of this user with one link and the mode asked,
//! else removed and made again. Its owner removes it with the directory (a
//! package's purge).

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::leftovers::remove_leftovers;
use crate::error::{Error, Result};
use crate::walk::Dir;

/// The spare kept beside `name`: a dotfile, and not a temp file's name
/// (`remove_leftovers` leaves it alone).
pub fn spare_name(name: &OsStr) -> String {
    format!(".{}.spare", name.to_string_lossy())
}

/// Replaces `name` in `dir` with `data` (mode `mode`) through its kept
/// spare (see the module). `dir` must be one nobody else can write (reached
/// under `Judge::Trusted`).
pub fn replace_kept(dir: &Dir, name: &OsStr, data: &[u8], mode: u32) -> Result<()> {
    let spare = spare_name(name);
    let path = dir.path().join(&spare);
    let (file, old_len) = if let Some(kept) = reuse(dir, &spare, mode) {
        kept
    } else {
        // The first run, or a spare that was not ours as asked: made anew
        // (and a writer of an older version's leftovers removed).
        remove_leftovers(dir);
        let fd = rfs::openat(
            dir.fd(),
            spare.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(Error::errno("create", &path))?;
        // The create honoured the umask; set the mode we mean.
        rfs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(Error::errno("chmod", &path))?;
        (File::from(fd), 0)
    };
    write_over(&file, old_len, data).map_err(Error::io("write", &path))?;
    match rfs::renameat_with(
        dir.fd(),
        spare.as_str(),
        dir.fd(),
        name,
        RenameFlags::EXCHANGE,
    ) {
        Ok(()) => Ok(()),
        // No file in place yet, or a filesystem without exchange: the spare
        // becomes the file (the next run makes a spare again).
        Err(_) => rfs::renameat(dir.fd(), spare.as_str(), dir.fd(), name)
            .map_err(Error::errno("rename into place", &dir.path().join(name))),
    }
}

/// The kept spare, opened for writing, and its length, if it is one this
/// process may write into: else removed (whatever it is: the name goes,
/// nothing is followed) and `None`.
fn reuse(dir: &Dir, spare: &str, mode: u32) -> Option<(File, u64)> {
    let opened = rfs::openat(
        dir.fd(),
        spare,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return None,
        Err(_) => {
            let _ = rfs::unlinkat(dir.fd(), spare, AtFlags::empty());
            return None;
        }
    };
    let ours = rfs::fstat(&fd).ok().filter(|st| {
        FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_uid == rustix::process::geteuid().as_raw()
            && st.st_nlink == 1
            && st.st_mode & 0o7777 == mode
    });
    let Some(st) = ours else {
        drop(fd);
        let _ = rfs::unlinkat(dir.fd(), spare, AtFlags::empty());
        return None;
    };
    Some((
        File::from(fd),
        u64::try_from(st.st_size).unwrap_or(u64::MAX),
    ))
}

/// `data` written over the file from its start, then the file cut to its
/// length — never truncated to zero first: ext4 (`auto_da_alloc`) flushes a
/// file truncated to zero when it is closed, which a run would wait for.
fn write_over(file: &File, old_len: u64, data: &[u8]) -> std::io::Result<()> {
    file.write_all_at(data, 0)?;
    let len = data.len() as u64;
    if old_len > len {
        file.set_len(len)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::{self, Judge};
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The file in place has each content in turn, the spare is the one
    /// swapped out (no new inode after the first two), longer and shorter
    /// contents leave nothing of the other behind, and a reader that opened
    /// the file keeps what it opened until the next replacement.
    #[test]
    fn replaced_in_turn_through_one_spare() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let d = walk::open_dir(root, root, Judge::Trusted, None).expect("dir");
        let name = OsStr::new("m.json");
        replace_kept(&d, name, b"first, a long one\n", 0o644).expect("first");
        assert_eq!(
            names(root),
            ["m.json"],
            "no spare before there is an old file"
        );
        replace_kept(&d, name, b"second\n", 0o644).expect("second");
        assert_eq!(names(root), [".m.json.spare", "m.json"]);
        assert_eq!(fs::read(root.join("m.json")).expect("read"), b"second\n");
        let inodes = |p: &str| fs::metadata(root.join(p)).expect("stat").ino();
        let (a, b) = (inodes("m.json"), inodes(".m.json.spare"));
        let reader = fs::File::open(root.join("m.json")).expect("open");
        replace_kept(&d, name, b"third, longer than the second\n", 0o644).expect("third");
        assert_eq!(
            fs::read(root.join("m.json")).expect("read"),
            b"third, longer than the second\n"
        );
        assert_eq!((inodes("m.json"), inodes(".m.json.spare")), (b, a));
        let mut held = String::new();
        std::io::Read::read_to_string(&mut &reader, &mut held).expect("read held");
        assert_eq!(held, "second\n", "what a reader opened is not written to");
        replace_kept(&d, name, b"4\n", 0o644).expect("fourth");
        assert_eq!(fs::read(root.join("m.json")).expect("read"), b"4\n");
        let mode = fs::metadata(root.join("m.json"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o644);
    }

    /// A spare that is not a file of ours as asked — a symlink, a hard link
    /// of another file, another mode — is removed, never written through.
    #[test]
    fn a_spare_that_is_not_ours_is_made_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let d = walk::open_dir(root, root, Judge::Trusted, None).expect("dir");
        let name = OsStr::new("m.json");
        let other = root.join("other");
        fs::write(&other, "keep me\n").expect("write");
        replace_kept(&d, name, b"old\n", 0o644).expect("first");
        symlink(&other, root.join(".m.json.spare")).expect("symlink");
        replace_kept(&d, name, b"new\n", 0o644).expect("through a symlink");
        fs::hard_link(&other, root.join(".m.json.spare.tmp")).expect("link");
        fs::remove_file(root.join(".m.json.spare")).expect("rm");
        fs::rename(root.join(".m.json.spare.tmp"), root.join(".m.json.spare")).expect("mv");
        replace_kept(&d, name, b"newer\n", 0o644).expect("over a hard link");
        assert_eq!(fs::read_to_string(&other).expect("read"), "keep me\n");
        fs::set_permissions(
            root.join(".m.json.spare"),
            fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        replace_kept(&d, name, b"newest\n", 0o644).expect("another mode");
        assert_eq!(fs::read(root.join("m.json")).expect("read"), b"newest\n");
        let mode = fs::metadata(root.join("m.json"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o644);
        assert_eq!(fs::read_to_string(&other).expect("read"), "keep me\n");
    }
}
