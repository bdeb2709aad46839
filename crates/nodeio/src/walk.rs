//! Resolving a directory one component at a time from the root prefix, with
//! `openat(O_PATH | O_NOFOLLOW)` at every step, so the directory a caller
//! ends up with is the one that was judged, whatever is renamed meanwhile.
//!
//! A symlink on the way is followed only when root or the caller owns it
//! (whoever could have made it could have written the file itself). Under
//! [`Judge::Trusted`] every directory from the root prefix down must also be
//! owned by root or the caller and not be writable by group or others unless
//! it is sticky (`/tmp`: others cannot rename or remove what is ours there).
//! Under [`Judge::NoFollow`] only the symlink rule applies: for directories
//! shared with other programs (node_exporter's textfile directory belongs to
//! the `prometheus` user on Debian).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// Longest chain of symlinks followed in one resolution, as the kernel's.
const MAX_SYMLINKS: u32 = 40;
const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// How much the directories on the way are judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judge {
    /// Owned by root or the caller, not writable by group or others unless
    /// sticky; symlinks only of root or the caller.
    Trusted,
    /// Symlinks only of root or the caller; owners and modes not judged.
    NoFollow,
}

/// An open directory that was judged on the way to it.
#[derive(Debug)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl Dir {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    /// The path it was reached by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// `path()/name`, for messages.
    pub fn child(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
    pub(crate) fn from_parts(fd: OwnedFd, path: PathBuf) -> Self {
        Self {
            fd: Arc::new(fd),
            path,
        }
    }
}

/// Opens a kernel setting file (sysfs, procfs, configfs) for reading or
/// writing, never through a symlink at its last component (sysfs's
/// directories are symlinks; its files are not), never creating it. The one
/// place such a file is opened.
pub fn open_setting(path: &Path, write: bool) -> std::io::Result<std::fs::File> {
    let flags = if write {
        OFlags::WRONLY | OFlags::TRUNC
    } else {
        OFlags::RDONLY
    };
    rfs::open(
        path,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map(std::fs::File::from)
    .map_err(Into::into)
}

/// Whether a kernel setting file may be written, without writing it: opened
/// write-only (no truncation, no creation, non-blocking: a FIFO without a
/// reader fails at once), never through a symlink at its last component,
/// and closed. The kernel refuses the open of a read-only sysfs attribute
/// or procfs entry, as it would refuse the write.
pub fn setting_writable(path: &Path) -> std::io::Result<()> {
    rfs::open(
        path,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map(drop)
    .map_err(Into::into)
}

/// Root, or the user running this program.
pub fn trusted_uid(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

/// Why a directory with this owner and mode may not be trusted, if so.
/// `sticky_ok`: a sticky group/other-writable directory is accepted (an
/// ancestor, not the directory holding the file itself).
pub fn judge_dir(uid: u32, mode: u32, sticky_ok: bool) -> Option<String> {
    if !trusted_uid(uid) {
        return Some(format!("is owned by uid {uid}, not root or the caller"));
    }
    if mode & GROUP_OR_OTHER_WRITE != 0 && !(sticky_ok && mode & STICKY != 0) {
        return Some(format!(
            "is writable by group or others (mode {:o})",
            mode & 0o7777
        ));
    }
    None
}

/// The guards alive, and the directories judged [`Judge::Trusted`]: root
/// prefix, path, descriptor. A run judges a handful and looks them up at
/// every access: a list compared byte for byte costs less than hashing
/// (a `PathBuf` hashes component by component).
/// `plain`: the descriptor is the directory the path's last component
/// names itself (opened without following a symlink there), not a link's
/// target.
type Judged = (usize, Vec<Known>);

/// One remembered directory: root prefix, path, descriptor, `plain`, and
/// its owner and mode as the walk's `fstat` gave them when it judged it
/// (`None`: not looked at here, the root prefix).
type Known = (OsString, OsString, Arc<OwnedFd>, bool, Option<(u32, u32)>);

/// The remembered descriptor of `dir` under `root`.
fn known(judged: &Judged, root: &Path, dir: &Path) -> Option<Arc<OwnedFd>> {
    known_plain(judged, root, dir).map(|(fd, _)| fd)
}

/// [`known`], and whether it is `plain` (see [`Judged`]).
fn known_plain(judged: &Judged, root: &Path, dir: &Path) -> Option<(Arc<OwnedFd>, bool)> {
    judged
        .1
        .iter()
        .find(|(r, d, ..)| d.as_os_str() == dir.as_os_str() && r.as_os_str() == root.as_os_str())
        .map(|(_, _, fd, plain, _)| (Arc::clone(fd), *plain))
}

thread_local! {
    /// The directories whose leftovers this run already removed
    /// ([`first_look_for_leftovers`]); `None` without a guard, as `JUDGED`.
    static SWEPT: RefCell<Option<Vec<OsString>>> = const { RefCell::new(None) };
    /// `None`: no [`Remembered`] guard of this thread lives, nothing is
    /// remembered. The thread's own: another thread (another test, a run's
    /// helper thread) judges every directory afresh.
    static JUDGED: RefCell<Option<Judged>> = const { RefCell::new(None) };
    /// Whether the filesystem of a directory descriptor outlives a reboot,
    /// as this run asked it ([`on_disk_once`]); `None` without a guard.
    static ON_DISK: RefCell<Option<OnDisk>> = const { RefCell::new(None) };
    /// How many runs of this thread took a first guard ([`run_remembering`]).
    static RUNS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// [`on_disk_once`]'s answers: per directory descriptor (held), whether its
/// filesystem outlives a reboot.
type OnDisk = Vec<(Arc<OwnedFd>, bool)>;

/// While it lives, [`open_dir`] resolves each directory it judges
/// [`Judge::Trusted`] once and hands out the same descriptor after.
///
/// Sound for one run, not for ever: a trusted directory and every directory
/// above it are owned by root or the caller and writable by nobody else —
/// or sticky, where others may add entries but not rename or remove root's
/// or the caller's — so nobody else can rename or replace any of them, and
/// the descriptor stays the directory that was judged (as safe as judging
/// again, and safer than any path). What root itself does meanwhile (a remount of `/run`) is not
/// seen until the guard is dropped: a run takes one (`qoslane`'s session),
/// a long-lived process must not keep one. Directories judged only
/// [`Judge::NoFollow`] are others' to change and are resolved every time.
/// The memory is the thread's that took the guard (the guard cannot move
/// to another thread).
#[derive(Debug)]
pub struct Remembered(std::marker::PhantomData<*const ()>);

pub fn remember_judged_dirs() -> Remembered {
    JUDGED.with_borrow_mut(|judged| {
        if let Some((guards, _)) = judged.as_mut() {
            *guards += 1;
        } else {
            *judged = Some((1, Vec::new()));
            SWEPT.set(Some(Vec::new()));
            ON_DISK.set(Some(Vec::new()));
            RUNS.set(RUNS.get() + 1);
        }
    });
    Remembered(std::marker::PhantomData)
}

impl Drop for Remembered {
    fn drop(&mut self) {
        JUDGED.with_borrow_mut(|judged| {
            if let Some((guards, _)) = judged.as_mut() {
                *guards -= 1;
                if *guards == 0 {
                    *judged = None;
                    SWEPT.set(None);
                    ON_DISK.set(None);
                }
            }
        });
    }
}

/// Whether a [`Remembered`] guard of this thread lives (a run: what it
/// reads may be remembered too, `trusted::read`).
pub(crate) fn remembering() -> bool {
    JUDGED.with_borrow(Option::is_some)
}

/// Which run of this thread holds the guard now (counted from 1: each time
/// a first guard is taken), `None` without one: what a run remembered
/// elsewhere (`trusted`) is its own, forgotten when another run's is asked.
pub(crate) fn run_remembering() -> Option<u64> {
    remembering().then(|| RUNS.get())
}

/// `ask()` (whether `dir`'s filesystem outlives a reboot: `fstatfs`), once
/// per directory descriptor while a [`Remembered`] guard lives: the
/// filesystem an open descriptor is on cannot change (a mount over the path
/// changes what the path names, not the descriptor). The memory holds the
/// descriptor, so its number is no other's meanwhile; it goes with the
/// guard. Without a guard, asked every time.
pub(crate) fn on_disk_once(dir: &Dir, ask: impl FnOnce() -> bool) -> bool {
    let known = ON_DISK.with_borrow(|m| {
        m.as_ref()?
            .iter()
            .find(|(fd, _)| Arc::ptr_eq(fd, &dir.fd))
            .map(|(_, on_disk)| *on_disk)
    });
    known.unwrap_or_else(|| {
        let on_disk = ask();
        ON_DISK.with_borrow_mut(|m| {
            if let Some(m) = m.as_mut() {
                m.push((Arc::clone(&dir.fd), on_disk));
            }
        });
        on_disk
    })
}

/// Whether `dir`'s dead writers' temp files are to be looked for now: always
/// without a [`Remembered`] guard; with one, the first time in the run only
/// (a run writes several files into the same directory: one look is
/// enough, a writer killed since is the next run's to clear).
pub(crate) fn first_look_for_leftovers(dir: &Dir) -> bool {
    SWEPT.with_borrow_mut(|swept| {
        swept.as_mut().is_none_or(|swept| {
            let first = !swept.iter().any(|d| d.as_os_str() == dir.path.as_os_str());
            if first {
                swept.push(dir.path.clone().into_os_string());
            }
            first
        })
    })
}

/// Opens `dir` (absolute) from the root prefix `root`; with `create`, makes
/// missing directories with that mode on the way (`mkdir -p`, race-free).
pub fn open_dir(root: &Path, dir: &Path, judge: Judge, create: Option<u32>) -> Result<Dir> {
    if judge != Judge::Trusted {
        // Others' directories are resolved every time, from the nearest
        // directory above them this run judged trusted.
        return match resume(root, dir, create, judge)? {
            Some(d) => Ok(d),
            None => resolve(root, dir, judge, create),
        };
    }
    let remembered = JUDGED.with_borrow(|judged| known(judged.as_ref()?, root, dir));
    if let Some(fd) = remembered {
        return Ok(Dir {
            fd,
            path: dir.to_path_buf(),
        });
    }
    let d = match resume(root, dir, create, judge)? {
        Some(d) => d,
        None => resolve(root, dir, judge, create)?,
    };
    // Already there (`plain`) when the walk followed no symlink: `dir`
    // is then the path it noted on the way.
    note(root, dir, &d.fd, false, None);
    Ok(d)
}

/// Remembers `d` (reached from `root`), judged at least as
/// [`Judge::Trusted`] would, while a guard lives (`trusted::state_dir`).
/// `seen`: its owner and mode as the caller's `fstat` of it gave them
/// ([`remembered_stat`]).
pub(crate) fn remember_dir(root: &Path, d: &Dir, seen: Option<(u32, u32)>) {
    note(root, &d.path, &d.fd, true, seen);
}

/// The owner and mode (uid, `st_mode`) of `d` (reached from `root`) as this
/// run's walk saw them when it judged the directory — `fstat` of the very
/// descriptor `d` holds, whose owner and mode only root or the caller can
/// change (see [`remember_judged_dirs`]) — so that a caller judging it
/// again (as a trusted file's holder, as a state directory) need not ask
/// the kernel again. `None` without a guard, or for a descriptor this run's
/// walk did not inspect.
pub(crate) fn remembered_stat(root: &Path, d: &Dir) -> Option<(u32, u32)> {
    JUDGED.with_borrow(|judged| {
        judged.as_ref()?.1.iter().find_map(|(r, p, fd, _, seen)| {
            (Arc::ptr_eq(fd, &d.fd)
                && p.as_os_str() == d.path.as_os_str()
                && r.as_os_str() == root.as_os_str())
            .then_some(*seen)
            .flatten()
        })
    })
}

/// The directory `dir` under `root` as this run judged it, if remembered,
/// and whether it is the directory `dir`'s last component names itself,
/// not a symlink's target (`plain`).
pub(crate) fn remembered_dir(root: &Path, dir: &Path) -> Option<(Dir, bool)> {
    let (fd, plain) = JUDGED.with_borrow(|judged| known_plain(judged.as_ref()?, root, dir))?;
    Some((
        Dir {
            fd,
            path: dir.to_path_buf(),
        },
        plain,
    ))
}

/// Remembers `dir` under `root`, judged [`Judge::Trusted`] (the target of a
/// walk or a directory on its way: each judged alike), while a guard lives.
fn note(root: &Path, dir: &Path, fd: &Arc<OwnedFd>, plain: bool, seen: Option<(u32, u32)>) {
    JUDGED.with_borrow_mut(|judged| {
        if let Some((_, known)) = judged.as_mut()
            && !known.iter().any(|(r, d, ..)| {
                d.as_os_str() == dir.as_os_str() && r.as_os_str() == root.as_os_str()
            })
        {
            known.push((
                root.as_os_str().to_owned(),
                dir.as_os_str().to_owned(),
                Arc::clone(fd),
                plain,
                seen,
            ));
        }
    });
}

/// `dir` reached from the nearest directory above it that this run already
/// judged [`Judge::Trusted`] (remembered: see [`remember_judged_dirs`]),
/// judging each directory below it as [`resolve`] would under `judge` (only
/// trusted ones remembered): the walk from the
/// root prefix to that ancestor is not made again. `None` when no ancestor
/// is remembered, or the rest of the way is not plain names of directories
/// (a `..`, a symlink: [`resolve`] walks it whole, from the root prefix).
fn resume(root: &Path, dir: &Path, create: Option<u32>, judge: Judge) -> Result<Option<Dir>> {
    let found = JUDGED.with_borrow(|judged| {
        let judged = judged.as_ref()?;
        dir.ancestors()
            .skip(1)
            .find_map(|a| known(judged, root, a).map(|fd| (a.to_path_buf(), fd)))
    });
    let Some(start) = found else {
        return Ok(None);
    };
    let (mut at, first) = start;
    let Ok(rest) = dir.strip_prefix(&at) else {
        return Ok(None);
    };
    let mut names = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => names.push(n.to_os_string()),
            _ => return Ok(None),
        }
    }
    let mut fd: Option<Arc<OwnedFd>> = None;
    let mut k = 0;
    while k < names.len() {
        let name = &names[k];
        let here = at.join(name);
        let from = fd.as_ref().map_or_else(|| first.as_fd(), |f| f.as_fd());
        let next = match rfs::openat(
            from,
            name.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(next) => next,
            Err(Errno::NOENT) if create.is_some() => {
                make_dir(from, name, create.unwrap_or(0o755), &here)?;
                continue;
            }
            Err(e) => return Err(Error::errno("open directory", &here)(e)),
        };
        let st = rfs::fstat(&next).map_err(Error::errno("inspect", &here))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                if judge == Judge::Trusted
                    && let Some(why) = judge_dir(st.st_uid, st.st_mode, true)
                {
                    return Err(Error::untrusted(&here, why));
                }
            }
            FileType::Symlink => return Ok(None),
            _ => return Err(Error::untrusted(&here, "is not a directory")),
        }
        let next = Arc::new(next);
        if judge == Judge::Trusted {
            note(root, &here, &next, true, Some((st.st_uid, st.st_mode)));
        }
        fd = Some(next);
        at = here;
        k += 1;
    }
    Ok(fd.map(|fd| Dir {
        fd,
        path: dir.to_path_buf(),
    }))
}

fn resolve(root: &Path, dir: &Path, judge: Judge, create: Option<u32>) -> Result<Dir> {
    // `..` never climbs above the root prefix (as in a chroot).
    let (start, rest) = match dir.strip_prefix(root) {
        Ok(rest) if root.is_absolute() => (root, rest),
        _ => (Path::new("/"), dir.strip_prefix("/").unwrap_or(dir)),
    };
    let mut queue: VecDeque<Comp> = VecDeque::new();
    push_components(&mut queue, rest);
    let mut fd = Arc::new(open_start(start, judge)?);
    let mut at = start.to_path_buf();
    if judge == Judge::Trusted {
        // The root prefix is opened following a symlink: not `plain`.
        note(root, &at, &fd, false, None);
    }
    // The directories above `fd`, for `..` (physical, as the kernel's).
    let mut above: Vec<(Arc<OwnedFd>, PathBuf)> = Vec::new();
    let mut hops = 0;
    while let Some(comp) = queue.pop_front() {
        let comp = match comp {
            Comp::Up => {
                if let Some((up, path)) = above.pop() {
                    fd = up;
                    at = path;
                }
                continue;
            }
            Comp::Name(n) => n,
        };
        let here = at.join(&comp);
        let next = match rfs::openat(
            &fd,
            comp.as_os_str(),
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(next) => next,
            Err(Errno::NOENT) if create.is_some() => {
                make_dir(fd.as_fd(), &comp, create.unwrap_or(0o755), &here)?;
                queue.push_front(Comp::Name(comp));
                continue;
            }
            Err(e) => return Err(Error::errno("open directory", &here)(e)),
        };
        let st = rfs::fstat(&next).map_err(Error::errno("inspect", &here))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => {
                if !trusted_uid(st.st_uid) {
                    return Err(Error::untrusted(
                        &here,
                        format!(
                            "is a symlink owned by uid {}; refusing to follow it",
                            st.st_uid
                        ),
                    ));
                }
                hops += 1;
                if hops > MAX_SYMLINKS {
                    return Err(Error::untrusted(&here, "too many levels of symlinks"));
                }
                let target = read_link(&next, &here)?;
                let target = Path::new(OsStr::from_bytes(&target));
                let mut pushed = VecDeque::new();
                push_components(&mut pushed, target);
                pushed.extend(queue);
                queue = pushed;
                if target.is_absolute() {
                    fd = Arc::new(open_start(Path::new("/"), judge)?);
                    at = PathBuf::from("/");
                    above.clear();
                }
            }
            FileType::Directory => {
                if judge == Judge::Trusted
                    && let Some(why) = judge_dir(st.st_uid, st.st_mode, true)
                {
                    return Err(Error::untrusted(&here, why));
                }
                let next = Arc::new(next);
                if judge == Judge::Trusted {
                    note(root, &here, &next, true, Some((st.st_uid, st.st_mode)));
                }
                above.push((
                    std::mem::replace(&mut fd, next),
                    std::mem::replace(&mut at, here),
                ));
            }
            _ => return Err(Error::untrusted(&here, "is not a directory")),
        }
    }
    Ok(Dir {
        fd,
        path: dir.to_path_buf(),
    })
}

/// Makes the directory `name` in `at` with exactly `mode`, whatever the
/// caller's umask (`mkdirat` masks its mode with it; changing the umask
/// would change it for every thread of the process): the new directory is
/// opened without following a symlink and `fchmod`ed, if it is still ours.
/// `Ok(false)`: it existed already, and is left as it is.
pub(crate) fn make_dir(at: BorrowedFd<'_>, name: &OsStr, mode: u32, path: &Path) -> Result<bool> {
    match rfs::mkdirat(at, name, Mode::from_raw_mode(mode)) {
        Ok(()) => {}
        Err(Errno::EXIST) => return Ok(false),
        Err(e) => return Err(Error::errno("create directory", path)(e)),
    }
    let made = rfs::openat(
        at,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Error::errno("open directory", path))?;
    let st = rfs::fstat(&made).map_err(Error::errno("inspect", path))?;
    // Renamed away and replaced meanwhile (in a shared directory): not
    // ours to change; the walk judges what is there.
    if st.st_uid == rustix::process::geteuid().as_raw() {
        rfs::fchmod(&made, Mode::from_raw_mode(mode & 0o7777))
            .map_err(Error::errno("set the mode of", path))?;
    }
    Ok(true)
}

fn open_start(start: &Path, judge: Judge) -> Result<OwnedFd> {
    let fd = rfs::open(
        start,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Error::errno("open directory", start))?;
    if judge == Judge::Trusted {
        let st = rfs::fstat(&fd).map_err(Error::errno("inspect", start))?;
        if let Some(why) = judge_dir(st.st_uid, st.st_mode, true) {
            return Err(Error::untrusted(start, why));
        }
    }
    Ok(fd)
}

enum Comp {
    Name(OsString),
    Up,
}

fn push_components(queue: &mut VecDeque<Comp>, path: &Path) {
    for c in path.components() {
        match c {
            Component::Normal(n) => queue.push_back(Comp::Name(n.to_os_string())),
            Component::ParentDir => queue.push_back(Comp::Up),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
}

/// The target of the symlink open (`O_PATH | O_NOFOLLOW`) at `fd`.
pub(crate) fn read_link(fd: &OwnedFd, path: &Path) -> Result<Vec<u8>> {
    rfs::readlinkat(fd, c"", Vec::new())
        .map(std::ffi::CString::into_bytes)
        .map_err(Error::errno("read symlink", path))
}

/// Splits `path` into its directory and final name.
pub(crate) fn split(path: &Path) -> Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(Error::untrusted(path, "has no directory or no file name")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// The check writes nothing (a regular file keeps its content), follows
    /// no symlink at the last component, creates nothing and refuses what
    /// the kernel would refuse to write.
    #[test]
    fn setting_writable_neither_writes_nor_follows_nor_creates() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let f = tmp.path().join("setting");
        fs::write(&f, "42\n").expect("write");
        setting_writable(&f).expect("writable");
        assert_eq!(fs::read_to_string(&f).expect("read"), "42\n");
        let link = tmp.path().join("link");
        symlink(&f, &link).expect("symlink");
        assert!(setting_writable(&link).is_err());
        let gone = tmp.path().join("gone");
        assert_eq!(
            setting_writable(&gone).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound)
        );
        assert!(!gone.exists());
        let fifo = tmp.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        assert!(setting_writable(&fifo).is_err(), "no reader: fails at once");
        if !rustix::process::geteuid().is_root() {
            chmod(&f, 0o444);
            assert!(setting_writable(&f).is_err());
        }
    }

    #[test]
    fn trusted_walk_refuses_writable_dirs_and_accepts_sticky() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("a/b")).expect("mkdir");
        chmod(&root.join("a"), 0o777);
        let e = open_dir(root, &root.join("a/b"), Judge::Trusted, None).unwrap_err();
        assert!(e.to_string().contains("mode 777"), "{e}");
        assert!(open_dir(root, &root.join("a/b"), Judge::NoFollow, None).is_ok());
        chmod(&root.join("a"), 0o1777);
        assert!(open_dir(root, &root.join("a/b"), Judge::Trusted, None).is_ok());
    }

    #[test]
    fn own_symlinks_are_followed_and_create_makes_dirs() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("real")).expect("mkdir");
        symlink("real", root.join("link")).expect("symlink");
        let d = open_dir(root, &root.join("link/x/y"), Judge::Trusted, Some(0o755))
            .expect("created through our own symlink");
        assert_eq!(d.path(), root.join("link/x/y"));
        assert!(root.join("real/x/y").is_dir());
        assert!(
            open_dir(root, &root.join("nope"), Judge::Trusted, None)
                .unwrap_err()
                .is_not_found()
        );
    }

    /// A directory made on the way has exactly the mode asked for: the
    /// umask (022 here, 027 on a hardened shell) no longer takes bits off.
    #[test]
    fn made_directories_have_the_mode_asked_whatever_the_umask() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        open_dir(root, &root.join("a/b"), Judge::NoFollow, Some(0o775)).expect("made");
        for d in ["a", "a/b"] {
            let mode = fs::metadata(root.join(d)).expect("md").mode() & 0o7777;
            assert_eq!(mode, 0o775, "{d}: {mode:o}");
        }
    }

    /// A run judging a directory again (a trusted file's holder, a state
    /// directory) is handed the owner and mode the walk's `fstat` saw for
    /// that very descriptor; a descriptor the walk did not inspect, or no
    /// run, gets nothing (the caller asks the kernel).
    #[test]
    fn the_walk_hands_out_what_it_saw_of_the_descriptor_it_judged() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("etc/q")).expect("mkdir");
        chmod(&root.join("etc/q"), 0o750);
        let dir = root.join("etc/q");
        let outside = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
        assert_eq!(remembered_stat(root, &outside), None, "no run: not kept");
        let _remembered = remember_judged_dirs();
        let d = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
        let st = rfs::fstat(d.fd()).expect("fstat");
        assert_eq!(remembered_stat(root, &d), Some((st.st_uid, st.st_mode)));
        assert_eq!(st.st_mode & 0o7777, 0o750);
        // Another descriptor of the same path: not what the walk looked at.
        assert_eq!(remembered_stat(root, &outside), None);
    }

    /// Whether a directory's files outlive a reboot is asked once per
    /// directory descriptor in a run, every time without a run, and afresh
    /// in the next run.
    #[test]
    fn a_directory_s_filesystem_is_asked_once_per_run() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("var/q")).expect("mkdir");
        let dir = root.join("var/q");
        let asked = std::cell::Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            true
        };
        let d = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
        assert!(on_disk_once(&d, ask) && on_disk_once(&d, ask));
        assert_eq!(asked.get(), 2, "no run: asked every time");
        for run in 1..=2 {
            let _remembered = remember_judged_dirs();
            let d = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
            let again = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
            assert!(on_disk_once(&d, ask) && on_disk_once(&again, ask));
            assert_eq!(asked.get(), 2 + run, "once in run {run}");
        }
    }

    /// While a guard lives, a trusted directory is resolved once: renamed
    /// away and replaced (by root, here the test), the run keeps the one it
    /// judged. Without a guard, or judged only NoFollow, every call resolves.
    #[test]
    fn trusted_directories_are_resolved_once_while_remembered() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("run/q")).expect("mkdir");
        fs::write(root.join("run/q/marker"), "first").expect("write");
        let marker = |d: &Dir| {
            let fd = rfs::openat(
                d.fd(),
                "marker",
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .expect("open marker");
            let mut s = String::new();
            std::io::Read::read_to_string(&mut fs::File::from(fd), &mut s).expect("read");
            s
        };
        let swap = || {
            fs::rename(root.join("run/q"), root.join("run/old")).expect("rename");
            fs::create_dir(root.join("run/q")).expect("mkdir");
            fs::write(root.join("run/q/marker"), "second").expect("write");
        };
        let dir = root.join("run/q");
        {
            let _remembered = remember_judged_dirs();
            let first = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
            swap();
            let again = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
            assert_eq!(marker(&first), "first");
            assert_eq!(
                marker(&again),
                "first",
                "the run keeps the directory it judged"
            );
            let shared = open_dir(root, &dir, Judge::NoFollow, None).expect("dir");
            assert_eq!(marker(&shared), "second", "NoFollow resolves every time");
        }
        let after = open_dir(root, &dir, Judge::Trusted, None).expect("dir");
        assert_eq!(
            marker(&after),
            "second",
            "without a guard every call resolves"
        );
    }

    /// While a guard lives, the directories judged on the way to one are
    /// remembered as it is: a later walk to one of them (or below it) starts
    /// there, not at the root prefix.
    #[test]
    fn the_directories_on_the_way_are_remembered_too() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("run/q/jobs")).expect("mkdir");
        fs::write(root.join("run/q/marker"), "first").expect("write");
        let _remembered = remember_judged_dirs();
        open_dir(root, &root.join("run/q/jobs"), Judge::Trusted, None).expect("dir");
        fs::rename(root.join("run/q"), root.join("run/old")).expect("rename");
        fs::create_dir_all(root.join("run/q")).expect("mkdir");
        fs::write(root.join("run/q/marker"), "second").expect("write");
        let q = open_dir(root, &root.join("run/q"), Judge::Trusted, None).expect("dir");
        let fd = rfs::openat(
            q.fd(),
            "marker",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("marker");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut fs::File::from(fd), &mut text).expect("read");
        assert_eq!(text, "first", "judged on the way to run/q/jobs");
    }

    /// While a guard lives, a directory below one already judged is reached
    /// from it, not from the root prefix again: below the remembered (and
    /// since replaced) ancestor; each directory on the rest of the way still
    /// judged (a writable one refused), made with the mode asked; a symlink
    /// on the rest of the way walked whole from the root prefix.
    #[test]
    fn a_directory_below_a_remembered_one_is_reached_from_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir_all(root.join("run/q/jobs")).expect("mkdir");
        fs::write(root.join("run/q/jobs/marker"), "first").expect("write");
        let _remembered = remember_judged_dirs();
        open_dir(root, &root.join("run/q"), Judge::Trusted, None).expect("dir");
        fs::rename(root.join("run/q"), root.join("run/old")).expect("rename");
        fs::create_dir_all(root.join("run/q/jobs")).expect("mkdir");
        let jobs = open_dir(root, &root.join("run/q/jobs"), Judge::Trusted, None).expect("dir");
        let fd = rfs::openat(
            jobs.fd(),
            "marker",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("below the directory the run judged");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut fs::File::from(fd), &mut text).expect("read");
        assert_eq!(text, "first");

        fs::create_dir_all(root.join("run/old/open/x")).expect("mkdir");
        chmod(&root.join("run/old/open"), 0o777);
        let e = open_dir(root, &root.join("run/q/open/x"), Judge::Trusted, None).unwrap_err();
        assert!(e.to_string().contains("mode 777"), "{e}");

        use std::os::unix::fs::MetadataExt;
        open_dir(
            root,
            &root.join("run/q/made/here"),
            Judge::Trusted,
            Some(0o750),
        )
        .expect("made");
        for d in ["made", "made/here"] {
            let mode = fs::metadata(root.join("run/old").join(d))
                .expect("md")
                .mode()
                & 0o7777;
            assert_eq!(mode, 0o750, "{d}: {mode:o}");
        }

        fs::create_dir_all(root.join("elsewhere")).expect("mkdir");
        fs::write(root.join("elsewhere/marker"), "through the link").expect("write");
        symlink(root.join("elsewhere"), root.join("run/old/link")).expect("symlink");
        assert!(
            open_dir(root, &root.join("run/q/link"), Judge::Trusted, None)
                .unwrap_err()
                .is_not_found(),
            "walked whole from the root prefix: there run/q is the new directory, without the link"
        );
    }
}
