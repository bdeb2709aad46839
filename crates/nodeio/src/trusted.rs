//! Trusted reads: the file that decides what root does (the mapping, the
//! last-known-good copy, a state file, a hook) is opened once, without
//! following a final symlink, from a directory reached by [`walk`] under
//! [`Judge::Trusted`]; then the *descriptor* is judged (`fstat`): a regular
//! file, owned by root or the caller, not writable by group or others, held
//! by a directory nobody else can write. What is read is what was judged.
//!
//! [`walk`]: crate::walk

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Dir, Judge, judge_dir, trusted_uid};

mod own_dir;
pub use own_dir::STATE_DIR_MODE;
use own_dir::{judge_state_dir, judge_state_fd};

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
    /// When it was last changed, as `fstat` gave it: what a run's second
    /// read of the same file compares ([`read`]).
    changed: Changed,
}

/// A file's last modification and status change, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Changed {
    mtime: i128,
    ctime: i128,
}

impl Changed {
    fn of(st: &rfs::Stat) -> Self {
        let ns = |s: i128, n: i128| s * 1_000_000_000 + n;
        Self {
            mtime: ns(i128::from(st.st_mtime), i128::from(st.st_mtime_nsec)),
            ctime: ns(i128::from(st.st_ctime), i128::from(st.st_ctime_nsec)),
        }
    }
}

/// A file read while a run's guard lives ([`walk::remember_judged_dirs`]):
/// its descriptor held (so that its inode, and the inode's number, stay
/// this file's while remembered), what `fstat` said of it, and its bytes.
struct KeptRead {
    root: OsString,
    path: OsString,
    _held: File,
    dev: u64,
    ino: u64,
    size: u64,
    uid: u32,
    mode: u32,
    changed: Changed,
    bytes: Vec<u8>,
}

/// What this thread's run remembers: which run it is
/// ([`walk::run_remembering`]), the files it read ([`read`]), the state
/// directories it judged ([`state_dir`]) and the holders of the files it
/// read (`judge_holder`).
#[derive(Default)]
struct RunMemory {
    run: u64,
    read: Vec<KeptRead>,
    state_dirs: Vec<(OsString, OsString)>,
    /// The directories judged as a trusted file's holder (root prefix, path).
    holders: Vec<(OsString, OsString)>,
}

thread_local! {
    static MEMORY: RefCell<RunMemory> = RefCell::new(RunMemory::default());
}

/// `f` on this run's memory, `None` without a run's guard. A memory of an
/// earlier run (its guard gone) is forgotten first.
fn remembered<R>(f: impl FnOnce(&mut RunMemory) -> R) -> Option<R> {
    let run = walk::run_remembering()?;
    Some(MEMORY.with_borrow_mut(|m| {
        if m.run != run {
            *m = RunMemory {
                run,
                ..RunMemory::default()
            };
        }
        f(m)
    }))
}

/// Opens `path` for reading as described above. `Ok(None)` when it (or a
/// directory on its way) does not exist.
pub fn open(root: &Path, path: &Path, symlink: Symlink) -> Result<Option<Opened>> {
    open_for(root, path, symlink, true)
}

/// [`open`]; `hand_out`: the file is handed to the caller (`O_NONBLOCK`
/// cleared), not only read here.
fn open_for(root: &Path, path: &Path, symlink: Symlink, hand_out: bool) -> Result<Option<Opened>> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let (dir_path, name) = walk::split(&path)?;
        let dir = match walk::open_dir(root, dir_path, Judge::Trusted, None) {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        judge_holder(root, &dir)?;
        match open_in(&dir, name, &path, hand_out)? {
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
///
/// While a run's guard lives ([`walk::remember_judged_dirs`]), a file read
/// once is read again only if it changed: the name is looked up in its
/// judged directory (`statat`, no symlink followed) and, when it is still
/// the inode read (its descriptor is held: the number cannot have been
/// given to another file), with the size, owner, mode and change times read,
/// the bytes read are handed out again — one `statx` for an open, `fstat`s,
/// reads and a close. A file replaced (every state file is put in place by a
/// rename: another inode), changed in place, removed, or reached through a
/// symlink is read afresh.
pub fn read(root: &Path, path: &Path, symlink: Symlink, limit: u64) -> Result<Option<Vec<u8>>> {
    if let Some(bytes) = read_again(root, path, limit) {
        return Ok(Some(bytes));
    }
    let Some(o) = open_for(root, path, symlink, false)? else {
        return Ok(None);
    };
    let buf = read_opened(&o, path, limit)?;
    remember(root, path, o, &buf);
    Ok(Some(buf))
}

/// [`read`] of the entry `name` of a directory already reached under
/// [`Judge::Trusted`] (its caller holds it: a state directory it also locks
/// in), a symlink refused ([`Symlink::Refuse`]): the directory is not
/// reached from the root prefix again. `Ok(None)` when absent.
pub fn read_in(root: &Path, dir: &Dir, name: &OsStr, limit: u64) -> Result<Option<Vec<u8>>> {
    let path = dir.path().join(name);
    judge_holder(root, dir)?;
    match open_in(dir, name, &path, false)? {
        Step::Absent => Ok(None),
        Step::Link(_) => Err(Error::untrusted(&path, "is a symlink; refusing to read it")),
        Step::Opened(o) => read_opened(&o, &path, limit).map(Some),
    }
}

fn read_opened(o: &Opened, path: &Path, limit: u64) -> Result<Vec<u8>> {
    if o.size > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            size: o.size,
            limit,
        });
    }
    let buf = read_sized(&o.file, o.size, limit).map_err(Error::io("read", path))?;
    if buf.len() as u64 > limit {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            size: buf.len() as u64,
            limit,
        });
    }
    Ok(buf)
}

/// The whole of a file expected to hold `size` bytes (as `fstat` said, or
/// the most a sysfs attribute holds), at most `limit` + 1: one `read` of
/// `size` + 1 bytes, whose short count is the end of a regular file (a
/// sysfs attribute comes whole in one read); a file that fills it is read
/// on to its end. Also qoslane's sysfs attributes.
pub fn read_sized(mut file: &File, size: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    let first = usize::try_from(size.min(limit).saturating_add(1)).unwrap_or(usize::MAX);
    let mut buf = vec![0; first];
    let got = loop {
        match file.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other?,
        }
    };
    buf.truncate(got);
    if got == first {
        file.take(limit.saturating_add(1) - got as u64)
            .read_to_end(&mut buf)?;
    }
    Ok(buf)
}

/// The bytes of `path` this run read before, if it is still that file,
/// unchanged and still trusted (see [`read`]). `None`: read it afresh.
fn read_again(root: &Path, path: &Path, limit: u64) -> Option<Vec<u8>> {
    let at = remembered(|m| {
        m.read.iter().position(|r| {
            r.path.as_os_str() == path.as_os_str() && r.root.as_os_str() == root.as_os_str()
        })
    })??;
    let still = (|| {
        let (dir_path, name) = walk::split(path).ok()?;
        let dir = walk::open_dir(root, dir_path, Judge::Trusted, None).ok()?;
        judge_holder(root, &dir).ok()?;
        rfs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW).ok()
    })();
    remembered(|m| {
        let read = &mut m.read;
        let r = &read[at];
        let same = still.as_ref().is_some_and(|st| {
            st.st_dev == r.dev
                && st.st_ino == r.ino
                && u64::try_from(st.st_size).ok() == Some(r.size)
                && st.st_uid == r.uid
                && st.st_mode & 0o7777 == r.mode
                && Changed::of(st) == r.changed
        });
        if same && r.size <= limit {
            Some(r.bytes.clone())
        } else {
            read.swap_remove(at);
            None
        }
    })?
}

/// Remembers what [`read`] read, while a run's guard lives: only a file
/// opened at its own path (no symlink followed on the last step).
fn remember(root: &Path, path: &Path, o: Opened, bytes: &[u8]) {
    if o.path != path || o.size != bytes.len() as u64 {
        return;
    }
    remembered(|m| {
        let read = &mut m.read;
        read.retain(|r| {
            r.path.as_os_str() != path.as_os_str() || r.root.as_os_str() != root.as_os_str()
        });
        read.push(KeptRead {
            root: root.as_os_str().to_owned(),
            path: path.as_os_str().to_owned(),
            _held: o.file,
            dev: o.dev,
            ino: o.ino,
            size: o.size,
            uid: o.uid,
            mode: o.mode,
            changed: o.changed,
            bytes: bytes.to_vec(),
        });
    });
}

/// Remembers the file this run just put at `path` (an atomic replacement:
/// `file` is the replacement, now at the name, `bytes` its content), while
/// a run's guard lives, as if [`read`] had read it: a later read of `path`
/// in the run is handed `bytes` back after one `statat` showing the name
/// still holds that file, unchanged (anyone's replacement since is another
/// inode: read afresh). One `fstat` here, for an open, an `fstat`, a read
/// and a close there. Without a guard, nothing.
pub(crate) fn remember_written(root: &Path, path: &Path, file: File, bytes: &[u8]) {
    if walk::run_remembering().is_none() {
        return;
    }
    let Ok(st) = rfs::fstat(&file) else {
        return;
    };
    if u64::try_from(st.st_size).ok() != Some(bytes.len() as u64) {
        return;
    }
    let o = Opened {
        file,
        path: path.to_path_buf(),
        size: bytes.len() as u64,
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        dev: st.st_dev,
        ino: st.st_ino,
        changed: Changed::of(&st),
    };
    remember(root, path, o, bytes);
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
    judge_holder(root, dir)?;
    let absent = || Error::Io {
        op: "open",
        path: path.clone(),
        source: std::io::Error::from_raw_os_error(rustix::io::Errno::NOENT.raw_os_error()),
    };
    match open_in(dir, name, &path, true)? {
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
    judge_holder(root, &d)?;
    Ok(d)
}

/// A directory of the caller's own state (`/run/qoslane`): reached under
/// [`Judge::Trusted`] (made when `create`, [`STATE_DIR_MODE`] whatever the
/// umask, and widened to it when narrower), itself never a symlink, owned by
/// the caller (not merely by root), writable by nobody else.
///
/// While a run's guard lives ([`walk::remember_judged_dirs`]) it is judged
/// once: the same descriptor is handed out after (nobody else can rename or
/// replace it, nor a directory above it: see the guard).
pub fn state_dir(root: &Path, dir: &Path, create: bool) -> Result<Dir> {
    let judged = remembered(|m| {
        m.state_dirs
            .iter()
            .any(|(r, d)| d.as_os_str() == dir.as_os_str() && r.as_os_str() == root.as_os_str())
    });
    let walked = walk::remembered_dir(root, dir);
    if judged == Some(true)
        && let Some((d, _)) = walked
    {
        return Ok(d);
    }
    let (d, seen) = match walked {
        // Walked to already, its last step no symlink: judged by its
        // descriptor, not opened again.
        Some((d, true)) => {
            let seen = judge_state_fd(d.fd(), dir, walk::remembered_stat(root, &d))?;
            (d, seen)
        }
        _ => judge_state_dir(root, dir, create)?,
    };
    remembered(|m| {
        // With what it saw of it: a read in it judges its holder by that.
        walk::remember_dir(root, &d, Some(seen));
        m.state_dirs
            .push((root.as_os_str().to_owned(), dir.as_os_str().to_owned()));
    });
    Ok(d)
}

/// The directory holding a trusted file: sticky does not help there (others
/// could add a file beside ours). While a run's guard lives, judged once
/// (the walk hands out the descriptor it judged, whose owner and mode only
/// root or the caller can change).
fn judge_holder(root: &Path, dir: &Dir) -> Result<()> {
    let known = |m: &RunMemory| {
        m.holders.iter().any(|(r, d)| {
            d.as_os_str() == dir.path().as_os_str() && r.as_os_str() == root.as_os_str()
        })
    };
    if remembered(|m| known(m)) == Some(true) {
        return Ok(());
    }
    // The walk that reached it this run looked at this very descriptor: its
    // owner and mode as it saw them (only root or the caller can change
    // them since), not a second `fstat`.
    let (uid, mode) = if let Some(seen) = walk::remembered_stat(root, dir) {
        seen
    } else {
        let st = rfs::fstat(dir.fd()).map_err(Error::errno("inspect", dir.path()))?;
        (st.st_uid, st.st_mode)
    };
    if let Some(why) = judge_dir(uid, mode, false) {
        return Err(Error::untrusted(dir.path(), why));
    }
    remembered(|m| {
        if !known(m) {
            m.holders.push((
                root.as_os_str().to_owned(),
                dir.path().as_os_str().to_owned(),
            ));
        }
    });
    Ok(())
}

enum Step {
    Absent,
    Opened(Opened),
    Link(Vec<u8>),
}

fn open_in(dir: &Dir, name: &OsStr, path: &Path, hand_out: bool) -> Result<Step> {
    #[cfg(test)]
    tests::OPENS.set(tests::OPENS.get() + 1);
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
    // Reads of a regular file do not block; a file handed out has
    // O_NONBLOCK cleared anyway (one read here needs no `fcntl`).
    if hand_out {
        let _ = rfs::fcntl_setfl(&fd, OFlags::empty());
    }
    Ok(Step::Opened(Opened {
        file: File::from(fd),
        path: path.to_path_buf(),
        size: u64::try_from(st.st_size).unwrap_or(0),
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        dev: st.st_dev,
        ino: st.st_ino,
        changed: Changed::of(&st),
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

    thread_local! {
        /// The files this thread opened to read them (`open_in`).
        pub(super) static OPENS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A file the run put in place itself (`atomic::write_read_again`) is
    /// handed back by a later read without being opened, while it is still
    /// the file at its name; replaced since (by anyone), it is read afresh.
    #[test]
    fn a_run_reads_back_what_it_wrote_without_opening_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("run/q")).expect("mkdir");
        let f = root.join("run/q/node.json");
        let opens = || OPENS.get();
        let read = || read(root, &f, Symlink::Refuse, 100);
        let run = walk::remember_judged_dirs();
        crate::atomic::write_read_again(root, &f, b"{\"n\":1}", 0o600, false).expect("write");
        let before = opens();
        assert_eq!(read().expect("read"), Some(b"{\"n\":1}".to_vec()));
        assert_eq!(opens(), before, "what the run wrote is not opened");
        // Another writer's replacement (same size, same content even).
        crate::atomic::write(root, &f, b"{\"n\":2}", 0o600, Judge::Trusted, false).expect("write");
        assert_eq!(read().expect("replaced"), Some(b"{\"n\":2}".to_vec()));
        assert_eq!(opens(), before + 1, "read afresh");
        drop(run);
        // Without a run: nothing remembered.
        crate::atomic::write_read_again(root, &f, b"{\"n\":3}", 0o600, false).expect("write");
        assert_eq!(read().expect("read"), Some(b"{\"n\":3}".to_vec()));
        assert_eq!(opens(), before + 2);
    }

    /// While a run's guard lives, a file read again that is the same,
    /// unchanged file is not opened again (its bytes are the ones read);
    /// replaced by a rename, changed in place, made writable by others or
    /// removed, it is read (or refused) afresh; without a guard, always.
    #[test]
    fn a_run_reads_an_unchanged_file_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("etc/q")).expect("mkdir");
        let f = root.join("etc/q/m.yml");
        fs::write(&f, "one").expect("write");
        chmod(&f, 0o644);
        let read = || read(root, &f, Symlink::Refuse, 100);
        let opens = || OPENS.get();
        let run = walk::remember_judged_dirs();
        assert_eq!(read().expect("read"), Some(b"one".to_vec()));
        let first = opens();
        assert_eq!(read().expect("again"), Some(b"one".to_vec()));
        assert_eq!(opens(), first, "an unchanged file is not opened again");
        assert!(
            matches!(
                super::read(root, &f, Symlink::Refuse, 2),
                Err(Error::TooLarge { size: 3, .. })
            ),
            "the caller's limit still holds"
        );

        let new = root.join("etc/q/.m.yml.new");
        fs::write(&new, "two").expect("write");
        chmod(&new, 0o644);
        fs::rename(&new, &f).expect("rename");
        assert_eq!(read().expect("replaced"), Some(b"two".to_vec()));

        let mut w = fs::OpenOptions::new().append(true).open(&f).expect("open");
        std::io::Write::write_all(&mut w, b"!").expect("append");
        drop(w);
        assert_eq!(read().expect("changed"), Some(b"two!".to_vec()));
        let now = opens();
        assert_eq!(read().expect("again"), Some(b"two!".to_vec()));
        assert_eq!(opens(), now);

        chmod(&f, 0o666);
        assert!(read().unwrap_err().to_string().contains("mode 666"));
        chmod(&f, 0o644);
        fs::remove_file(&f).expect("rm");
        assert_eq!(read().expect("gone"), None);

        fs::write(&f, "three").expect("write");
        chmod(&f, 0o644);
        assert_eq!(read().expect("back"), Some(b"three".to_vec()));
        drop(run);
        let now = opens();
        assert_eq!(read().expect("no guard"), Some(b"three".to_vec()));
        assert_eq!(opens(), now + 1, "without a guard every read opens");
    }

    /// While a run's guard lives, its state directory is judged once: the
    /// same directory is handed out after, as the walk's remembered ones.
    #[test]
    fn a_run_judges_its_state_directory_once() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let dir = root.join("run/q");
        fs::create_dir_all(&dir).expect("mkdir");
        let _run = walk::remember_judged_dirs();
        let first = state_dir(root, &dir, false).expect("ours");
        fs::rename(&dir, root.join("run/old")).expect("rename");
        fs::create_dir(&dir).expect("mkdir");
        chmod(&dir, 0o777);
        let again = state_dir(root, &dir, false).expect("the one judged");
        let fd = rfs::openat(again.fd(), c".", OFlags::RDONLY, Mode::empty()).expect("open");
        let st = rfs::fstat(&fd).expect("stat");
        let old = fs::metadata(root.join("run/old")).expect("md");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(st.st_ino, old.ino(), "the directory the run judged");
        drop(first);
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
