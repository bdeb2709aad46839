//! Trusted reads: the file that decides what root does (the mapping, the
//! last-known-good copy, a state file, a hook) is opened once, without
//! following a final symlink, from a directory reached by [`walk`] under
//! [`Judge::Trusted`]; then the *descriptor* is judged (`fstat`): a regular
//! file, owned by root or the caller, not writable by group or others, held
//! by a directory nobody else can write. What is read is what was judged.
//!
//! [`walk`]: crate::walk

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Dir, Judge, judge_dir, trusted_uid};

/// What to do with a final symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlink {
    /// State files: ours, never a symlink.
    Refuse,
    /// Files an admin places (hooks, the mapping): a symlink of root or the
    /// caller is followed, and its target judged the same way.
    FollowTrusted,
}

/// An open, judged file.
#[derive(Debug)]
pub struct Opened {
    pub file: File,
    /// The file actually opened (after a followed symlink).
    pub path: PathBuf,
    pub size: u64,
    pub uid: u32,
    pub mode: u32,
    /// Which file it is: its device and inode (hookrun tells a hook that is
    /// its own binary by them).
    pub dev: u64,
    pub ino: u64,
}

/// Opens `path` for reading as described above. `Ok(None)` when it (or a
/// directory on its way) does not exist.
pub fn open(root: &Path, path: &Path, symlink: Symlink) -> Result<Option<Opened>> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let (dir_path, name) = walk::split(&path)?;
        let dir = match walk::open_dir(root, dir_path, Judge::Trusted, None) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        judge_holder(&dir)?;
        match open_in(&dir, name, &path)? {
            Step::Absent => return Ok(None),
            Step::Opened(o) => return Ok(Some(o)),
            Step::Link(target) => {
                if symlink == Symlink::Refuse {
                    return Err(Error::untrusted(&path, "is a symlink; refusing to read it"));
                }
                let target = Path::new(OsStr::from_bytes(&target));
                path = if target.is_absolute() {
                    target.to_path_buf()
                } else {
                    dir_path.join(target)
                };
            }
        }
    }
    Err(Error::untrusted(&path, "too many levels of symlinks"))
}

/// Reads at most `limit` bytes of a trusted file (see [`open`]).
pub fn read(root: &Path, path: &Path, symlink: Symlink, limit: u64) -> Result<Option<Vec<u8>>> {
    let Some(o) = open(root, path, symlink)? else {
        return Ok(None);
    };
    read_opened(o, path, limit).map(Some)
}

/// [`read`] of the entry `name` of a directory already reached under
/// [`Judge::Trusted`] (its caller holds it: a state directory it also locks
/// in), a symlink refused ([`Symlink::Refuse`]): the directory is not
/// reached from the root prefix again. `Ok(None)` when absent.
pub fn read_in(dir: &Dir, name: &OsStr, limit: u64) -> Result<Option<Vec<u8>>> {
    let path = dir.path().join(name);
    judge_holder(dir)?;
    match open_in(dir, name, &path)? {
        Step::Absent => Ok(None),
        Step::Link(_) => Err(Error::untrusted(&path, "is a symlink; refusing to read it")),
        Step::Opened(o) => read_opened(o, &path, limit).map(Some),
    }
}

fn read_opened(o: Opened, path: &Path, limit: u64) -> Result<Vec<u8>> {
    if o.size > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            size: o.size,
            limit,
        });
    }
    let mut buf = Vec::with_capacity(usize::try_from(o.size).unwrap_or(0));
    o.file
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(Error::io("read", path))?;
    if buf.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            size: buf.len() as u64,
            limit,
        });
    }
    Ok(buf)
}

/// Judges a file that must exist (a hook, a configuration): [`open`], with
/// absence an error.
pub fn check_file(root: &Path, path: &Path) -> Result<Opened> {
    open(root, path, Symlink::FollowTrusted)?.ok_or_else(|| Error::Io {
        op: "open",
        path: path.to_path_buf(),
        source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error()),
    })
}

/// [`check_file`] of the entry `name` of a directory [`check_dir`] judged,
/// opened from its descriptor: the directory is not reached from the root
/// prefix again for each of its files (a hook directory's hooks). A symlink
/// (of root or the caller) is followed as [`open`] follows it, its target
/// reached and judged from the root prefix.
pub fn check_file_in(root: &Path, dir: &Dir, name: &OsStr) -> Result<Opened> {
    let path = dir.path().join(name);
    judge_holder(dir)?;
    let absent = || Error::Io {
        op: "open",
        path: path.clone(),
        source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error()),
    };
    match open_in(dir, name, &path)? {
        Step::Absent => Err(absent()),
        Step::Opened(o) => Ok(o),
        Step::Link(target) => {
            let target = Path::new(OsStr::from_bytes(&target));
            let target = if target.is_absolute() {
                target.to_path_buf()
            } else {
                dir.path().join(target)
            };
            check_file(root, &target)
        }
    }
}

/// Judges a directory whose entries decide what root does (a hook
/// directory): reached under [`Judge::Trusted`], and itself writable by
/// nobody else, sticky or not.
pub fn check_dir(root: &Path, dir: &Path) -> Result<Dir> {
    let d = walk::open_dir(root, dir, Judge::Trusted, None)?;
    judge_holder(&d)?;
    Ok(d)
}

/// A directory of the caller's own state (`/run/qoslane`): reached under
/// [`Judge::Trusted`] (made when `create`, [`STATE_DIR_MODE`] whatever the
/// umask, and widened to it when narrower), itself never a symlink, owned by
/// the caller (not merely by root), writable by nobody else.
pub fn state_dir(root: &Path, dir: &Path, create: bool) -> Result<Dir> {
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
    let st = rfs::fstat(&fd).map_err(Error::errno("inspect directory", dir))?;
    let me = rustix::process::geteuid().as_raw();
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => return Err(Error::untrusted(dir, "is a symlink; refusing to use it")),
        FileType::Directory => {}
        _ => return Err(Error::untrusted(dir, "is not a directory")),
    }
    if st.st_uid != me {
        return Err(Error::untrusted(
            dir,
            format!("is owned by uid {}, not {me}", st.st_uid),
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(Error::untrusted(
            dir,
            format!(
                "is writable by group or others (mode {:o})",
                st.st_mode & 0o7777
            ),
        ));
    }
    if st.st_mode & STATE_DIR_MODE != STATE_DIR_MODE {
        widen(&fd, dir, st.st_mode & 0o7777)?;
    }
    Ok(Dir::from_parts(fd, dir.to_path_buf()))
}

/// A state directory's mode: its readers are other users (a job's
/// TaskProlog reads its record, a metrics user the counters).
pub const STATE_DIR_MODE: u32 = 0o755;

/// Widens our own state directory made too narrow (by an earlier run under
/// a umask such as 027, or by hand) to what its readers need, and says so.
/// Only the read and search bits are added: the caller has refused one
/// writable by others, and owns it.
fn widen(fd: &OwnedFd, dir: &Path, mode: u32) -> Result<()> {
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

/// The directory holding a trusted file: sticky does not help there (others
/// could add a file beside ours).
fn judge_holder(dir: &Dir) -> Result<()> {
    let st = rfs::fstat(dir.fd()).map_err(Error::errno("inspect", dir.path()))?;
    match judge_dir(st.st_uid, st.st_mode, false) {
        Some(why) => Err(Error::untrusted(dir.path(), why)),
        None => Ok(()),
    }
}

enum Step {
    Absent,
    Opened(Opened),
    Link(Vec<u8>),
}

fn open_in(dir: &Dir, name: &OsStr, path: &Path) -> Result<Step> {
    let fd: OwnedFd = match rfs::openat(
        dir.fd(),
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(Step::Absent),
        Err(Errno::LOOP) => {
            let st = rfs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(Error::errno("inspect", path))?;
            if !trusted_uid(st.st_uid) {
                return Err(Error::untrusted(
                    path,
                    format!(
                        "is a symlink owned by uid {}; refusing to follow it",
                        st.st_uid
                    ),
                ));
            }
            let link = rfs::readlinkat(dir.fd(), name, Vec::new())
                .map_err(Error::errno("read symlink", path))?;
            return Ok(Step::Link(link.into_bytes()));
        }
        Err(e) => return Err(Error::errno("open", path)(e)),
    };
    let st = rfs::fstat(&fd).map_err(Error::errno("inspect", path))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::untrusted(path, "is not a regular file"));
    }
    if !trusted_uid(st.st_uid) {
        return Err(Error::untrusted(
            path,
            format!("is owned by uid {}, not root or the caller", st.st_uid),
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(Error::untrusted(
            path,
            format!(
                "is writable by group or others (mode {:o})",
                st.st_mode & 0o7777
            ),
        ));
    }
    // Reads of a regular file do not block; clear O_NONBLOCK anyway.
    let _ = rfs::fcntl_setfl(&fd, OFlags::empty());
    Ok(Step::Opened(Opened {
        file: File::from(fd),
        path: path.to_path_buf(),
        size: u64::try_from(st.st_size).unwrap_or(0),
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        dev: st.st_dev,
        ino: st.st_ino,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn reads_what_it_judged() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("etc/q")).expect("mkdir");
        let f = root.join("etc/q/m.yml");
        fs::write(&f, "x: 1\n").expect("write");
        chmod(&f, 0o644);
        assert_eq!(
            read(root, &f, Symlink::Refuse, 100).expect("read"),
            Some(b"x: 1\n".to_vec())
        );
        assert_eq!(
            read(root, &root.join("etc/q/none"), Symlink::Refuse, 100).expect("absent"),
            None
        );
        assert_eq!(
            read(root, &root.join("no/dir/f"), Symlink::Refuse, 100).expect("absent"),
            None
        );
        assert!(matches!(
            read(root, &f, Symlink::Refuse, 2),
            Err(Error::TooLarge { size: 5, .. })
        ));
        chmod(&f, 0o664);
        assert!(
            read(root, &f, Symlink::Refuse, 100)
                .unwrap_err()
                .to_string()
                .contains("mode 664")
        );
        chmod(&f, 0o644);
        chmod(&root.join("etc"), 0o777);
        let e = read(root, &f, Symlink::Refuse, 100)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("etc is writable by group or others (mode 777)"),
            "{e}"
        );
        chmod(&root.join("etc"), 0o755);
        chmod(&root.join("etc/q"), 0o1777);
        assert!(
            read(root, &f, Symlink::Refuse, 100).is_err(),
            "sticky does not help the holder"
        );
    }

    /// Our own state directory left too narrow (0750, an earlier run's
    /// umask) is widened to 0755 for its readers; one writable by others
    /// is refused and left alone.
    #[test]
    fn a_state_directory_too_narrow_is_widened() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let dir = root.join("run/q");
        fs::create_dir_all(&dir).expect("mkdir");
        chmod(&dir, 0o750);
        state_dir(root, &dir, false).expect("ours");
        assert_eq!(fs::metadata(&dir).expect("md").mode() & 0o7777, 0o755);
        chmod(&dir, 0o730);
        assert!(state_dir(root, &dir, false).is_err());
        assert_eq!(fs::metadata(&dir).expect("md").mode() & 0o7777, 0o730);
    }

    #[test]
    fn final_symlinks() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::write(root.join("real"), "a").expect("write");
        symlink("real", root.join("link")).expect("symlink");
        assert!(
            read(root, &root.join("link"), Symlink::Refuse, 9)
                .unwrap_err()
                .to_string()
                .contains("is a symlink")
        );
        assert_eq!(
            read(root, &root.join("link"), Symlink::FollowTrusted, 9).expect("followed"),
            Some(b"a".to_vec())
        );
        // A symlink someone else made is not followed, wherever it leads.
        std::os::unix::fs::lchown(root.join("link"), Some(65534), None).expect("lchown");
        if rustix::process::geteuid().is_root() {
            let e = read(root, &root.join("link"), Symlink::FollowTrusted, 9).unwrap_err();
            assert!(e.to_string().contains("symlink owned by uid 65534"), "{e}");
        }
    }
}
