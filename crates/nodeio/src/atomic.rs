//! Atomic replace: readers see the old file or the new one, never half, and
//! root never writes through a name someone else could have placed.
//!
//! The directory is reached by [`walk::open_dir`] (so it is the one judged);
//! the temp file `.NAME.tmp.PID.SEQ` is created in it with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` (an existing name, symlink or not, is
//! never opened), written, fsynced when durability is asked for, and renamed
//! over `NAME` within the same directory descriptor; then the directory is
//! fsynced. A replacement that is only made visible (flushed later or never)
//! on a disk filesystem is exchanged with `NAME` instead and the old file
//! unlinked ([`exchange`]): ext4 starts no writeback for that, as it does
//! for a rename over a file. On a filesystem whose files do not outlive a reboot (tmpfs,
//! ramfs: `/run`, where the job records, the journal and the node's baseline
//! live, as volatile as the kernel settings they describe) nothing is
//! fsynced: there is no disk to make anything durable on ([`persistent`]).
//! The rename is atomic either way, which is all a killed process needs.
//! Temp names end in neither `.prom` nor `.json`, so node_exporter
//! and readers of the final names never see them. A writer killed between
//! create and rename leaves its temp file; [`remove_leftovers`] removes those
//! whose writer is gone, and every writer calls it.
//!
//! [`walk::open_dir`]: crate::walk::open_dir

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Dir, Judge};

mod kept;
mod leftovers;
pub use kept::{replace_kept, spare_name};
use leftovers::own_pid;
pub use leftovers::{remove_leftovers, remove_leftovers_listing, temp_file_writer};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A replacement already visible to readers whose data may not be on disk.
#[derive(Debug)]
#[must_use = "flush it, unless the file need not survive a crash"]
pub struct Pending {
    file: File,
    dir: Dir,
    persistent: bool,
}

impl Pending {
    /// Makes the replacement durable: the file's data, then the rename
    /// (nothing on a filesystem that does not outlive a reboot).
    pub fn flush(self) -> Result<()> {
        if !self.persistent {
            return Ok(());
        }
        self.file
            .sync_all()
            .map_err(Error::io("fsync", self.dir.path()))?;
        sync_dir(&self.dir)
    }
}

impl Pending {
    /// The replacement, open (not flushed): the file now at the name, for a
    /// caller that tells later whether it still is ([`crate::counter_file`]).
    pub fn into_file(self) -> File {
        self.file
    }
}

/// How durable a replacement must be before [`replace`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync the data before the rename, and the directory after it.
    Durable,
    /// Visible at once; [`Pending::flush`] makes it durable later (after a
    /// lock is released, so concurrent writers' flushes overlap).
    Visible,
}

/// Replaces `path` with `data` (mode `mode`), reaching its directory from
/// `root` under `judge`, making missing directories (0755) on the way when
/// `create_dirs`.
pub fn replace(
    root: &Path,
    path: &Path,
    data: &[u8],
    mode: u32,
    judge: Judge,
    create_dirs: bool,
    durability: Durability,
) -> Result<Pending> {
    let (dir_path, name) = walk::split(path)?;
    let dir = walk::open_dir(root, dir_path, judge, create_dirs.then_some(0o755))?;
    replace_in(dir, name, data, mode, durability)
}

/// [`replace`] with [`Durability::Durable`], flushed.
pub fn write(
    root: &Path,
    path: &Path,
    data: &[u8],
    mode: u32,
    judge: Judge,
    create_dirs: bool,
) -> Result<()> {
    flushed(root, path, data, mode, judge, create_dirs).map(|_| ())
}

/// [`write`] (under [`Judge::Trusted`]) of a file the run reads again
/// later: the replacement is remembered as read ([`trusted::read`] hands
/// `data` back while it is still the file at `path`, for one `statat`).
///
/// [`trusted::read`]: crate::trusted::read
pub fn write_read_again(
    root: &Path,
    path: &Path,
    data: &[u8],
    mode: u32,
    create_dirs: bool,
) -> Result<()> {
    let done = flushed(root, path, data, mode, Judge::Trusted, create_dirs)?;
    crate::trusted::remember_written(root, path, done.file, data);
    Ok(())
}

/// [`replace`] durably, then the directory flushed where it outlives a
/// reboot (the data was fsynced before the rename: only the directory is
/// left).
fn flushed(
    root: &Path,
    path: &Path,
    data: &[u8],
    mode: u32,
    judge: Judge,
    create_dirs: bool,
) -> Result<Pending> {
    let done = replace(
        root,
        path,
        data,
        mode,
        judge,
        create_dirs,
        Durability::Durable,
    )?;
    if done.persistent {
        sync_dir(&done.dir)?;
    }
    Ok(done)
}

/// Whether files under `fd` outlive a reboot, so that an fsync there means
/// something: false on tmpfs and ramfs. When the filesystem cannot be told,
/// true (an fsync too many costs time, one too few a torn file).
pub fn persistent(fd: impl std::os::fd::AsFd) -> bool {
    const TMPFS_MAGIC: rfs::FsWord = 0x0102_1994;
    const RAMFS_MAGIC: rfs::FsWord = 0x8584_58f6;
    rfs::fstatfs(fd).map_or(true, |st| !matches!(st.f_type, TMPFS_MAGIC | RAMFS_MAGIC))
}

/// [`persistent`] of a directory a caller writes into. While a run's guard
/// lives ([`walk::remember_judged_dirs`]) asked once per directory
/// descriptor ([`walk::on_disk_once`]): the filesystem an open directory is
/// on cannot change under its descriptor (a mount over its path changes
/// what the path names, not what the descriptor is), so a run writing
/// several files into one directory makes one `fstatfs` there, not one per
/// file.
pub(crate) fn dir_persistent(dir: &Dir) -> bool {
    walk::on_disk_once(dir, || persistent(dir.fd()))
}

/// [`write`] of a file another user owns (`owner`: uid, gid), made theirs
/// before it is in place (`fchown` of the temp file this process created:
/// no name is followed or changed hands on the way); mode `mode` (e.g.
/// 0400: only its owner reads it). For a file a job's user reads (qoslane's
/// notice of what the job did); the directory stays root's.
pub fn write_owned(
    root: &Path,
    path: &Path,
    data: &[u8],
    (mode, owner): (u32, (u32, u32)),
    judge: Judge,
) -> Result<()> {
    let (dir_path, name) = walk::split(path)?;
    let dir = walk::open_dir(root, dir_path, judge, None)?;
    let done = replace_in_as(dir, name, data, mode, Some(owner), Durability::Durable)?;
    if done.persistent {
        sync_dir(&done.dir)?;
    }
    Ok(())
}

/// [`replace`] into an already open directory.
pub fn replace_in(
    dir: Dir,
    name: &OsStr,
    data: &[u8],
    mode: u32,
    durability: Durability,
) -> Result<Pending> {
    replace_in_as(dir, name, data, mode, None, durability)
}

/// [`replace_in`], the file given to `owner` (uid, gid) before it is in
/// place.
fn replace_in_as(
    dir: Dir,
    name: &OsStr,
    data: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    durability: Durability,
) -> Result<Pending> {
    remove_leftovers(&dir);
    let on_disk = dir_persistent(&dir);
    let tmp = temp_name(name, own_pid(), SEQ.fetch_add(1, Ordering::Relaxed));
    let tmp_path = dir.path().join(&tmp);
    let final_path = dir.path().join(name);
    let create = || {
        rfs::openat(
            dir.fd(),
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
    };
    // The name is this process's: whatever holds it (a dead process of the
    // same pid, or a planted link) is removed, never opened.
    let fd = match create() {
        Err(Errno::EXIST) => {
            let _ = rfs::unlinkat(dir.fd(), tmp.as_str(), AtFlags::empty());
            create()
        }
        other => other,
    }
    .map_err(Error::errno("create", &tmp_path))?;
    let mut file = File::from(fd);
    let res = (|| {
        // The create honoured the umask; set the mode we mean.
        rfs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(Error::errno("chmod", &tmp_path))?;
        if let Some((uid, gid)) = owner {
            rfs::fchown(
                &file,
                Some(rfs::Uid::from_raw(uid)),
                Some(rfs::Gid::from_raw(gid)),
            )
            .map_err(Error::errno("chown", &tmp_path))?;
        }
        file.write_all(data)
            .map_err(Error::io("write", &tmp_path))?;
        if durability == Durability::Durable && on_disk {
            file.sync_all().map_err(Error::io("fsync", &tmp_path))?;
        }
        if durability == Durability::Visible && on_disk && exchange(&dir, &tmp, name) {
            return Ok(());
        }
        rfs::renameat(dir.fd(), tmp.as_str(), dir.fd(), name)
            .map_err(Error::errno("rename into place", &final_path))
    })();
    if let Err(e) = res {
        let _ = rfs::unlinkat(dir.fd(), tmp.as_str(), AtFlags::empty());
        return Err(e);
    }
    Ok(Pending {
        file,
        dir,
        persistent: on_disk,
    })
}

/// Puts the written temp file `tmp` in place of the existing `name` with one
/// `renameat2(RENAME_EXCHANGE)` and removes what it swapped out (the old
/// file, now under `tmp`). For a replacement that is not flushed on a disk
/// filesystem: ext4 (`auto_da_alloc`) starts writing a file's data back when
/// a plain rename replaces another file, fsync or not, which a run would
/// wait for; an exchange is not such a rename. Readers see the old file or
/// the new one, as with a rename. False (nothing changed) when it does not
/// apply: no `name` yet, a filesystem without exchange, or `name` a
/// directory (swapped back): the caller renames, and says what a rename
/// says.
fn exchange(dir: &Dir, tmp: &str, name: &OsStr) -> bool {
    if rfs::renameat_with(dir.fd(), tmp, dir.fd(), name, rfs::RenameFlags::EXCHANGE).is_err() {
        return false;
    }
    if rfs::unlinkat(dir.fd(), tmp, AtFlags::empty()).is_ok() {
        return true;
    }
    // Not a file we may replace (a directory): back as it was.
    let _ = rfs::renameat_with(dir.fd(), tmp, dir.fd(), name, rfs::RenameFlags::EXCHANGE);
    false
}

/// Removes `path` if present (never following a symlink: the name goes) and
/// makes the removal durable (where files outlive a reboot). Whether it was there.
pub fn remove(root: &Path, path: &Path, judge: Judge) -> Result<bool> {
    let (dir_path, name) = walk::split(path)?;
    let dir = match walk::open_dir(root, dir_path, judge, None) {
        Ok(d) => d,
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e),
    };
    match rfs::unlinkat(dir.fd(), name, AtFlags::empty()) {
        Ok(()) => {
            if dir_persistent(&dir) {
                sync_dir(&dir)?;
            }
            Ok(true)
        }
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(Error::errno("remove", path)(e)),
    }
}

/// fsync of a directory (through an `O_PATH` descriptor: reopened for it).
pub fn sync_dir(dir: &Dir) -> Result<()> {
    let fd = rfs::openat(
        dir.fd(),
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(Error::errno("open directory", dir.path()))?;
    rfs::fsync(&fd).map_err(Error::errno("fsync directory", dir.path()))
}

fn temp_name(name: &OsStr, pid: u32, seq: u32) -> String {
    format!(".{}.tmp.{pid}.{seq}", name.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, symlink};

    /// A file given to another user: theirs and of the mode asked when it
    /// appears, and a link planted at its name (by that user, say) is
    /// replaced, never followed (root's file it points at keeps its owner).
    #[test]
    fn a_file_written_for_another_user_is_theirs_and_follows_no_link() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: giving a file away needs root");
            return;
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir(root.join("told")).expect("mkdir");
        let victim = root.join("victim");
        fs::write(&victim, "root's").expect("write");
        symlink(&victim, root.join("told/7")).expect("symlink");
        write_owned(
            root,
            &root.join("told/7"),
            b"what job 7 did\n",
            (0o400, (65534, 65534)),
            Judge::Trusted,
        )
        .expect("written");
        let md = fs::symlink_metadata(root.join("told/7")).expect("md");
        assert!(md.file_type().is_file());
        assert_eq!(
            (md.uid(), md.gid(), md.mode() & 0o777),
            (65534, 65534, 0o400)
        );
        assert_eq!(
            fs::read_to_string(root.join("told/7")).expect("read"),
            "what job 7 did\n"
        );
        let v = fs::metadata(&victim).expect("md");
        assert_eq!(
            (v.uid(), fs::read_to_string(&victim).expect("read").as_str()),
            (0, "root's")
        );
    }

    #[test]
    fn replaces_without_following_a_planted_temp_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let victim = root.join("victim");
        fs::write(&victim, "secret").expect("write");
        fs::create_dir(root.join("prom")).expect("mkdir");
        // Every temp name this process could use next is a symlink.
        let seq = SEQ.load(Ordering::Relaxed);
        for s in seq..seq + 64 {
            let n = temp_name(OsStr::new("x.prom"), std::process::id(), s);
            symlink(&victim, root.join("prom").join(n)).expect("symlink");
        }
        // Each is removed when its name comes up, never followed.
        replace(
            root,
            &root.join("prom/x.prom"),
            b"m 1\n",
            0o644,
            Judge::NoFollow,
            false,
            Durability::Durable,
        )
        .expect("replaced")
        .flush()
        .expect("flushed");
        assert_eq!(fs::read_to_string(&victim).expect("read"), "secret");
        assert_eq!(
            fs::read_to_string(root.join("prom/x.prom")).expect("read"),
            "m 1\n"
        );
        assert_eq!(
            fs::metadata(root.join("prom/x.prom")).expect("md").mode() & 0o777,
            0o644
        );
    }

    #[test]
    fn a_symlinked_directory_of_someone_else_is_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir(root.join("elsewhere")).expect("mkdir");
        symlink(root.join("elsewhere"), root.join("prom")).expect("symlink");
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::lchown(root.join("prom"), Some(65534), None).expect("lchown");
            let e = replace(
                root,
                &root.join("prom/x.prom"),
                b"",
                0o644,
                Judge::NoFollow,
                false,
                Durability::Visible,
            )
            .unwrap_err();
            assert!(e.to_string().contains("symlink owned by uid 65534"), "{e}");
            assert!(!root.join("elsewhere/x.prom").exists());
        }
    }

    /// A writer's run in `root`: `f.json` replaced (its leftovers cleaned).
    fn write_f_json(root: &Path) {
        replace(
            root,
            &root.join("f.json"),
            b"{}",
            0o600,
            Judge::Trusted,
            false,
            Durability::Visible,
        )
        .expect("replaced")
        .flush()
        .expect("flushed");
    }

    /// Every file `dir` holds, names sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_visible_replacement_swaps_the_file_readers_see_old_or_new_and_nothing_is_left() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let visible = |data: &[u8]| {
            replace(
                root,
                &root.join("c.json"),
                data,
                0o644,
                Judge::Trusted,
                false,
                Durability::Visible,
            )
        };
        // No file yet: renamed into place.
        drop(visible(b"one").expect("created"));
        let mut old = fs::File::open(root.join("c.json")).expect("open");
        // Over it: the new file in place, the old one gone from the
        // directory but whole for a reader that had it open.
        drop(visible(b"two").expect("replaced"));
        assert_eq!(
            fs::read_to_string(root.join("c.json")).expect("read"),
            "two"
        );
        let mut was = String::new();
        std::io::Read::read_to_string(&mut old, &mut was).expect("read old");
        assert_eq!(was, "one");
        assert_eq!(names(root), ["c.json"]);
        assert_eq!(
            fs::metadata(root.join("c.json")).expect("md").mode() & 0o777,
            0o644
        );
        // Flushed later, it stays what it is.
        visible(b"three")
            .expect("replaced")
            .flush()
            .expect("flushed");
        assert_eq!(
            fs::read_to_string(root.join("c.json")).expect("read"),
            "three"
        );
        assert_eq!(names(root), ["c.json"]);
        // A directory under the name is not replaced, as with a rename.
        fs::create_dir(root.join("d.json")).expect("mkdir");
        fs::write(root.join("d.json/inside"), "kept").expect("write");
        let e = replace(
            root,
            &root.join("d.json"),
            b"x",
            0o644,
            Judge::Trusted,
            false,
            Durability::Visible,
        )
        .unwrap_err();
        assert!(e.to_string().contains("rename into place"), "{e}");
        assert_eq!(
            fs::read_to_string(root.join("d.json/inside")).expect("read"),
            "kept"
        );
        assert_eq!(names(root), ["c.json", "d.json"]);
    }

    #[test]
    fn leftovers_of_dead_writers_go() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        // pid 2^22+1 is above the kernel's pid_max limit: never alive.
        fs::write(root.join(".f.json.tmp.4194305.0"), "half").expect("write");
        fs::write(root.join(".f.json.tmp.1.0"), "init is alive").expect("write");
        write_f_json(root);
        assert!(!root.join(".f.json.tmp.4194305.0").exists());
        assert!(root.join(".f.json.tmp.1.0").exists());
        assert_eq!(temp_file_writer(".a.b.tmp.12.3"), Some(12));
        assert_eq!(temp_file_writer(".a.b.tmp.12"), Some(12));
        assert_eq!(temp_file_writer("a.b"), None);
    }

    /// The look for leftovers hands out the other names it listed (one
    /// listing for a caller that lists the directory too), once per run
    /// and directory, as it looks once.
    #[test]
    fn the_look_for_leftovers_hands_out_the_other_names_once_per_run() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        fs::create_dir(root.join("jobs")).expect("mkdir");
        for f in [
            "1.json",
            "2.json",
            ".3.json.tmp.4194305.0",
            ".4.json.tmp.1.0",
        ] {
            fs::write(root.join("jobs").join(f), "{}").expect("write");
        }
        let _run = walk::remember_judged_dirs();
        let d = walk::open_dir(root, &root.join("jobs"), Judge::Trusted, None).expect("dir");
        let mut listed = remove_leftovers_listing(&d).expect("listed");
        listed.sort();
        assert_eq!(listed, ["1.json", "2.json"]);
        assert!(
            !root.join("jobs/.3.json.tmp.4194305.0").exists(),
            "dead writer's"
        );
        assert!(
            root.join("jobs/.4.json.tmp.1.0").exists(),
            "a live writer's"
        );
        assert_eq!(remove_leftovers_listing(&d), None, "looked already");
    }

    /// A writer killed and not yet reaped (a zombie: the first run after a
    /// kill comes exactly then) and a dead writer whose pid another process
    /// took since were judged alive by `kill(pid, 0)`: their temp files
    /// stayed until some later run. A live writer's file stays.
    #[test]
    fn leftovers_of_zombies_and_of_reused_pids_go() {
        use std::process::{Command, Stdio};
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let sleep = || {
            Command::new("sleep")
                .arg("60")
                .stdin(Stdio::null())
                .spawn()
                .expect("sleep")
        };
        let mut zombie = sleep();
        zombie.kill().expect("kill");
        let mut reused = sleep();
        let mut live = sleep();
        let name = |c: &std::process::Child| format!(".f.json.tmp.{}.0", c.id());
        for c in [&zombie, &reused, &live] {
            fs::write(root.join(name(c)), "half").expect("write");
        }
        // The file of `reused`'s pid was made an hour before it started.
        fs::File::options()
            .write(true)
            .open(root.join(name(&reused)))
            .expect("open")
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
            .expect("set mtime");
        // The zombie is one once the kill has landed.
        for _ in 0..500 {
            if super::leftovers::process_state(i32::try_from(zombie.id()).expect("pid"))
                .is_some_and(|(s, _)| s == 'Z')
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        write_f_json(root);
        let zombie_left = root.join(name(&zombie)).exists();
        let reused_left = root.join(name(&reused)).exists();
        let live_left = root.join(name(&live)).exists();
        for c in [&mut reused, &mut live] {
            let _ = c.kill();
        }
        for c in [&mut zombie, &mut reused, &mut live] {
            let _ = c.wait();
        }
        assert!(!zombie_left, "a zombie writer's temp file is gone");
        assert!(!reused_left, "a reused pid's temp file is gone");
        assert!(live_left, "a live writer's temp file stays");
    }
}
