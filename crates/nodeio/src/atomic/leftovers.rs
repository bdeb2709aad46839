//! The temp files of writers killed between create and rename: whose a
//! name is ([`temp_file_writer`]) and their removal once the writer is gone
//! ([`remove_leftovers`]: no process with its pid, a zombie, or a pid reused
//! by a later process), told from `/proc`. A live writer's file is never
//! touched.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::walk::Dir;

/// This process's pid ([`crate::process::id`]: asked of the kernel once
/// per process; a fork without `exec`, `child`'s built-in program, asks again).
pub(super) fn own_pid() -> u32 {
    crate::process::id()
}

/// Whether `name` is a temp file of [`replace`](super::replace): its writer's pid.
pub fn temp_file_writer(name: &str) -> Option<i32> {
    let rest = name.strip_prefix('.')?;
    let (_, tail) = rest.rsplit_once(".tmp.")?;
    let pid = tail.split_once('.').map_or(tail, |(pid, _)| pid);
    pid.parse().ok()
}

/// Removes the temp files in `dir` whose writer is gone (killed between
/// create and rename: Slurm's timeout kill, the OOM killer), also when
/// its pid is still taken, by its zombie or by a process that reused it
/// ([`writer_gone`]). A live writer's file is never touched. Best effort.
/// A run (a [`Remembered`](crate::walk::Remembered) guard) looks in each
/// directory once.
pub fn remove_leftovers(dir: &Dir) {
    let _ = remove_leftovers_listing(dir);
}

/// [`remove_leftovers`], and the names the look found in `dir` that are not
/// temp files (`.` and `..` left out): one listing for a caller that lists
/// the directory too (a state directory's records, under the lock that
/// keeps them as they are). `None` when it did not look (this run looked
/// before) or could not list the whole directory.
pub fn remove_leftovers_listing(dir: &Dir) -> Option<Vec<OsString>> {
    if !crate::walk::first_look_for_leftovers(dir) {
        return None;
    }
    let fd = rfs::openat(
        dir.fd(),
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    // The descriptor is the stream's own (`read_from` would open "." again).
    let mut entries = rfs::Dir::new(fd).ok()?;
    let me = own_pid();
    let mut dead = Vec::new();
    let mut listed = Some(Vec::new());
    loop {
        let e = match entries.next() {
            None => break,
            Some(Ok(e)) => e,
            // Not the whole directory: no listing to hand out.
            Some(Err(_)) => {
                listed = None;
                break;
            }
        };
        let name = e.file_name().to_bytes();
        let Some(pid) = temp_file_writer(&String::from_utf8_lossy(name)) else {
            if name != b"."
                && name != b".."
                && let Some(l) = listed.as_mut()
            {
                l.push(OsStr::from_bytes(name).to_owned());
            }
            continue;
        };
        // Our own pid's names are left to the writer (see `replace_in`).
        if u32::try_from(pid).ok() != Some(me) && writer_gone(dir, e.file_name(), pid) {
            dead.push(name.to_vec());
        }
    }
    for name in dead {
        let _ = rfs::unlinkat(dir.fd(), OsStr::from_bytes(&name), AtFlags::empty());
    }
    listed
}

/// Seconds of slack when comparing a process's start with a file's time:
/// the boot time the kernel gives is whole seconds.
const START_SLACK_SECS: i64 = 2;

/// Whether the writer `pid` of the temp file `name` in `dir` is gone: no
/// process has the pid; or the one that has it is a zombie (killed and not
/// yet reaped by its parent — it writes nothing more, and the first run
/// after the kill comes exactly then); or it started after the file was
/// made (the pid was reused: the writer died before it). What cannot be
/// told is taken as alive.
fn writer_gone(dir: &Dir, name: &std::ffi::CStr, pid: i32) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid) else {
        return true;
    };
    if matches!(rustix::process::test_kill_process(p), Err(Errno::SRCH)) {
        return true;
    }
    let Some((state, started_ticks)) = process_state(pid) else {
        return false;
    };
    if matches!(state, 'Z' | 'X') {
        return true;
    }
    let Ok(st) = rfs::statat(dir.fd(), name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    let (Some(boot), Ok(started)) = (boot_time(), i64::try_from(started_ticks)) else {
        return false;
    };
    let ticks = i64::try_from(rustix::param::clock_ticks_per_second()).unwrap_or(100);
    let started = boot + started / ticks.max(1);
    started > st.st_mtime + START_SLACK_SECS
}

/// A process's state letter and start (clock ticks after boot), from
/// `/proc/PID/stat` (its name, in parentheses, may hold anything: the
/// fields are read after the last `)`).
pub(super) fn process_state(pid: i32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, fields) = stat.rsplit_once(')')?;
    let mut fields = fields.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 22 of proc_pid_stat(5); the state was field 3.
    let started = fields.nth(18)?.parse().ok()?;
    Some((state, started))
}

/// When the system booted (seconds since the epoch), from `/proc/stat`.
fn boot_time() -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|t| t.trim().parse().ok())
}
