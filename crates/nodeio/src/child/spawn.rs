//! A program exec'd: `posix_spawn` (nix's safe wrapper, no `pre_exec`:
//! one clone per program, the exec's error reported by the call) with
//! what the program starts with set by the spawn itself — stdin
//! `/dev/null`, stdout and stderr the pipes the parent reads, its own
//! process group, **an empty signal mask**, SIGPIPE and SIGTERM at their
//! defaults — whatever this process's are. std's `Command` leaves the mask
//! as the parent's: hookrun reads its stop signals from a `signalfd`, so it
//! runs with SIGTERM, SIGINT and SIGHUP blocked, and a hook exec'd with them
//! blocked would never see the deadline's SIGTERM (only the SIGKILL after
//! the grace). An ignored SIGTERM survives `exec` the same way (a caller
//! started with it ignored: a wrapper's `trap '' TERM` before its `exec`): the
//! deadline's SIGTERM would be lost on the program, which could not even
//! `trap` it, so it too is set back to its default.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::{SigSet, Signal};
use rustix::fs::{Mode, OFlags};
use rustix::pipe::PipeFlags;
use rustix::process::Pid;

use super::fork::Forked;
use super::program::{Env, Program};

/// `KEY=VALUE`, or an error for a NUL inside (no C string can hold it).
fn c_string(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "nul byte found"))
}

/// The environment the program gets: the caller's choice, then its own
/// variables (a variable set twice: the later value).
fn environment(program: &Program) -> io::Result<Vec<CString>> {
    let mut vars: Vec<(OsString, OsString)> = match &program.env {
        Env::Exact(vars) => vars.clone(),
        Env::Inherit => std::env::vars_os().collect(),
    };
    for (key, value) in &program.vars {
        vars.retain(|(k, _)| k != key);
        vars.push((key.clone(), value.clone()));
    }
    vars.into_iter()
        .map(|(k, v)| {
            let mut entry = k.into_vec();
            entry.push(b'=');
            entry.extend_from_slice(v.as_bytes());
            c_string(entry)
        })
        .collect()
}

/// Spawns `program`; its pid (the group's id) and the read ends of its pipes.
pub(super) fn start(program: &Program) -> io::Result<Forked> {
    let path = c_string(program.path.as_os_str().as_bytes().to_vec())?;
    let mut argv = vec![path.clone()];
    for arg in &program.args {
        argv.push(c_string(arg.as_bytes().to_vec())?);
    }
    let envp = environment(program)?;
    let null = rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let (out_r, out_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let (err_r, err_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_dup2(null.as_raw_fd(), 0)?;
    actions.add_dup2(out_w.as_raw_fd(), 1)?;
    actions.add_dup2(err_w.as_raw_fd(), 2)?;
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_pgroup(nix::unistd::Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut default = SigSet::from(Signal::SIGPIPE);
    default.add(Signal::SIGTERM);
    attr.set_sigdefault(&default)?;
    let pid = posix_spawn(path.as_c_str(), &actions, &attr, &argv, &envp)?;
    drop::<(OwnedFd, OwnedFd, OwnedFd)>((null, out_w, err_w));
    let pid =
        Pid::from_raw(pid.as_raw()).ok_or_else(|| io::Error::other("spawn returned no pid"))?;
    Ok(Forked {
        pid,
        stdout: out_r,
        stderr: err_r,
    })
}
