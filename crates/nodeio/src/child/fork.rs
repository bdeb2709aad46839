//! A built-in program ([`Program::built_in`]): the running binary's own
//! entry, called in the child of a fork instead of exec'ing the binary again
//! (what an exec costs — the loader, the relocations, the runtime's start,
//! the page faults of a fresh address space — is not paid).
//!
//! The child is made what an exec'd program would be, before the entry
//! runs: its own process group (set by both sides, so that the parent's
//! kills reach the group as soon as `fork` returns); stdin `/dev/null`,
//! stdout and stderr the pipes the parent reads; the signal handlers reset
//! to their defaults as exec resets them (ignored signals stay ignored but
//! SIGTERM, set to its default as `spawn.rs` sets a spawned program's: the
//! deadline is a SIGTERM to the group; Rust's stack-overflow handlers,
//! which the program's own start would install, stay), every signal blocked
//! across the fork so that none
//! reaches a handler of the parent's in the child, then the mask emptied
//! (as `posix_spawn` leaves a spawned program's: the parent's is not the
//! program's — hookrun blocks its stop signals into a `signalfd`); the environment the
//! program is given; what `nodeio` remembers of the process (the pid, the
//! log's sink) forgotten. The child never returns into its parent's code:
//! it ends with `_exit` and the entry's status (a panic: 101, as Rust's).
//!
//! Sound only in a single-threaded process: the child of a fork has only
//! the thread that forked, and a lock another thread held (the allocator's,
//! stdout's, the environment's) would stay held in it for ever.
//! [`single_threaded`] is asked before every fork; a process with another
//! thread execs the binary instead (the same program, the slow way).

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::OwnedFd;

use nix::sys::signal::{
    SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, pthread_sigmask, sigaction,
};
use nix::unistd::{ForkResult, Pid as NixPid};
use rustix::fs::{Mode, OFlags};
use rustix::pipe::PipeFlags;
use rustix::process::Pid;

use super::program::{Entry, Env, Program};

/// Exit status of a built-in whose stdio could not be set up (as a shell's
/// for a program it could not exec).
const SETUP_FAILED: i32 = 127;
/// Exit status of a built-in that panicked (Rust's own for a panicking main).
const PANICKED: i32 = 101;

/// A forked built-in: its pid (the group's id) and the read ends of its pipes.
pub(super) struct Forked {
    pub(super) pid: Pid,
    pub(super) stdout: OwnedFd,
    pub(super) stderr: OwnedFd,
}

/// Whether this process has one thread: `/proc/self/task` holds a directory
/// per thread, and its link count is 2 plus their number (one `stat`, where
/// reading `/proc/self/stat` took an open, a read per doubling of the buffer
/// and the kernel's formatting of fifty fields). Unknown counts as no, and
/// so does any other count: the binary is exec'd instead.
pub fn single_threaded() -> bool {
    rustix::fs::stat("/proc/self/task").is_ok_and(|st| st.st_nlink == 3)
}

/// Forks and calls `entry` in the child, set up as described above.
pub(super) fn start(program: &Program, entry: Entry) -> io::Result<Forked> {
    let null = rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let (out_r, out_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let (err_r, err_w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC)?;
    let mut argv: Vec<OsString> = Vec::with_capacity(program.args.len() + 1);
    argv.push(program.path.clone().into_os_string());
    argv.extend(program.args.iter().cloned());
    let clear: Vec<OsString> = match program.env {
        Env::Exact(_) => std::env::vars_os().map(|(k, _)| k).collect(),
        Env::Inherit => Vec::new(),
    };
    let set: Vec<&(OsString, OsString)> = match &program.env {
        Env::Exact(vars) => vars.iter().chain(&program.vars).collect(),
        Env::Inherit => program.vars.iter().collect(),
    };
    // What this process's stdout still holds would be written twice.
    let _ = io::stdout().flush();
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    let mut mask = SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut mask),
    )?;
    // SAFETY: `fork` in a process that `single_threaded` found with one
    // thread (the caller asked just before; nothing of these crates starts a
    // thread between): no lock of another thread can be held in the child,
    // so it may allocate and run ordinary code. Every signal is blocked
    // across the fork, and in the child the handlers are reset before the
    // mask is emptied, so no handler of the parent's runs in the child
    // (`sigaction` is unsafe only for the handler it installs: here the
    // defaults and SIG_IGN, no code). The environment is changed
    // (`set_var`/`remove_var`) in the child, which has no other thread to
    // read it. The child never returns from this block: `_exit` ends it
    // without running its parent's exit handlers or destructors.
    #[expect(
        unsafe_code,
        reason = "fork without exec, the child's signal dispositions and environment, _exit: the one audited block of nodeio::child"
    )]
    let forked = unsafe {
        match nix::unistd::fork() {
            Ok(ForkResult::Child) => {
                let _ = nix::unistd::setpgid(NixPid::from_raw(0), NixPid::from_raw(0));
                for signal in Signal::iterator() {
                    if matches!(
                        signal,
                        Signal::SIGKILL | Signal::SIGSTOP | Signal::SIGSEGV | Signal::SIGBUS
                    ) {
                        continue;
                    }
                    if let Ok(old) = sigaction(signal, &default)
                        && matches!(old.handler(), SigHandler::SigIgn)
                        && signal != Signal::SIGTERM
                    {
                        let _ = sigaction(signal, &ignore);
                    }
                }
                // Empty, as `spawn.rs`'s attribute leaves an exec'd
                // program's: not the parent's (hookrun's stop signals are blocked into its
                // signalfd, and a blocked SIGTERM would reach no handler of
                // the hook's).
                let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
                let stdio = nix::unistd::dup2_stdin(&null)
                    .and_then(|()| nix::unistd::dup2_stdout(&out_w))
                    .and_then(|()| nix::unistd::dup2_stderr(&err_w));
                drop((null, out_r, out_w, err_r, err_w));
                if stdio.is_err() {
                    nix::libc::_exit(SETUP_FAILED);
                }
                for key in &clear {
                    std::env::remove_var(key);
                }
                for (key, value) in set {
                    std::env::set_var(key, value);
                }
                crate::process::forget();
                crate::log::forget();
                let code = std::panic::catch_unwind(|| entry(&argv)).unwrap_or(PANICKED);
                let _ = io::stdout().flush();
                nix::libc::_exit(code)
            }
            other => other,
        }
    };
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
    let child = match forked? {
        ForkResult::Parent { child } => child,
        ForkResult::Child => unreachable!("the child ends in _exit"),
    };
    // Also here: the group exists before the parent can signal it.
    let _ = nix::unistd::setpgid(child, child);
    drop((null, out_w, err_w));
    let pid =
        Pid::from_raw(child.as_raw()).ok_or_else(|| io::Error::other("fork returned no pid"))?;
    Ok(Forked {
        pid,
        stdout: out_r,
        stderr: err_r,
    })
}
