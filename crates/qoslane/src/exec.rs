//! Running external programs (squeue, smpquery): absolute path, no shell,
//! no PATH lookup, each in its own process group, killed when the deadline
//! passes.
//!
//! All on the caller's thread: one `poll(2)` loop over every program's
//! stdout, stderr and pidfd (readable when it exits), bounded by the
//! deadline — one program ([`run`]) or several at once ([`run_many`]: the
//! three SMP queries of a port). No reader or waiter threads: on a busy node
//! each would wait for a time slice before it could hand its output over.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal};

use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// The most output read from a program (stdout, and stderr each): scontrol's
/// job line and smpquery's tables are a few kilobytes.
pub const MAX_OUTPUT: u64 = 1 << 20;

/// Runs `program args…` and returns its output when it exits 0.
pub fn run(program: &Path, args: &[&str], deadline: &Deadline) -> Result<Output> {
    run_many(program, &[args], deadline)
        .pop()
        .unwrap_or_else(|| Err(Error::Internal("no result from exec::run".into())))
}

/// Runs `program` once per argument list, all at once, and returns each
/// one's output (when it exited 0) or error, in order. Every program still
/// running when the deadline passes is killed.
pub fn run_many(program: &Path, argvs: &[&[&str]], deadline: &Deadline) -> Vec<Result<Output>> {
    let fail = |detail: String| Error::Program {
        program: program.to_owned(),
        detail,
    };
    if !program.is_absolute() {
        return argvs
            .iter()
            .map(|_| Err(fail("not an absolute path (hooks run with no PATH)".into())))
            .collect();
    }
    if deadline.remaining().is_zero() {
        return argvs
            .iter()
            .map(|_| Err(deadline.passed(format!("run {}", program.display()))))
            .collect();
    }
    let mut runs: Vec<std::result::Result<Running, Error>> = argvs
        .iter()
        .map(|args| Running::start(program, args).map_err(fail))
        .collect();
    if let Err(e) = wait_all(&mut runs, deadline) {
        for r in runs.iter_mut().flatten() {
            r.kill();
        }
        return argvs
            .iter()
            .map(|_| Err(fail(format!("wait: {e}"))))
            .collect();
    }
    runs.into_iter()
        .zip(argvs)
        .map(|(r, args)| {
            let r = r?;
            match r.ended {
                Some(Ended::Exited(status)) => finished(status, r.out, r.err).map_err(fail),
                Some(Ended::TooLarge) => Err(fail(format!(
                    "printed more than {MAX_OUTPUT} bytes; killed (is it the right program?)"
                ))),
                Some(Ended::Deadline) | None => {
                    Err(deadline.passed(format!("{} {}", program.display(), args.join(" "))))
                }
            }
        })
        .collect()
}

/// Its output, or why not, for a program that exited.
fn finished(
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
) -> std::result::Result<Output, String> {
    if status.success() {
        return Ok(Output {
            status,
            stdout,
            stderr,
        });
    }
    let text = String::from_utf8_lossy(&stderr);
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    Err(format!(
        "{status} ({})",
        if first.is_empty() {
            "no message"
        } else {
            first
        }
    ))
}

/// How a program's run ended.
enum Ended {
    Exited(ExitStatus),
    /// Killed for printing more than [`MAX_OUTPUT`].
    TooLarge,
    /// Killed at the deadline.
    Deadline,
}

/// One program being waited for.
struct Running {
    child: Child,
    pidfd: OwnedFd,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out: Vec<u8>,
    err: Vec<u8>,
    status: Option<ExitStatus>,
    ended: Option<Ended>,
}

impl Running {
    fn start(program: &Path, args: &[&str]) -> std::result::Result<Self, String> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run: {e}"))?;
        let setup = (|| {
            let pidfd = rustix::process::pidfd_open(Pid::from_child(&child), PidfdFlags::empty())?;
            let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
            for fd in [
                stdout.as_ref().map(AsFd::as_fd),
                stderr.as_ref().map(AsFd::as_fd),
            ]
            .into_iter()
            .flatten()
            {
                rustix::io::ioctl_fionbio(fd, true)?;
            }
            Ok::<_, Errno>((pidfd, stdout, stderr))
        })();
        match setup {
            Ok((pidfd, stdout, stderr)) => Ok(Self {
                child,
                pidfd,
                stdout,
                stderr,
                out: Vec::new(),
                err: Vec::new(),
                status: None,
                ended: None,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("cannot watch it: {e}"))
            }
        }
    }

    /// Kills its process group (a wrapper script's children go too) and
    /// reaps it, waiting at most a moment (a task stuck in the kernel is left
    /// to the process's own exit).
    fn kill(&mut self) {
        if let Some(pid) = Pid::from_raw(i32::try_from(self.child.id()).unwrap_or(0)) {
            let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        }
        self.stdout = None;
        self.stderr = None;
        let timeout = Timespec::try_from(Duration::from_millis(200)).unwrap_or_default();
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&timeout));
        let _ = self.child.try_wait();
    }
}

/// Waits for every started program: its stdout (at most [`MAX_OUTPUT`] + 1
/// bytes, to tell a runaway), its stderr (at most [`MAX_OUTPUT`]) to their
/// ends, and its exit — or the deadline, which kills what is left.
fn wait_all(
    runs: &mut [std::result::Result<Running, Error>],
    deadline: &Deadline,
) -> std::io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        for r in runs.iter_mut().flatten() {
            if r.ended.is_none()
                && let Some(st) = r.status
                && r.stdout.is_none()
                && r.stderr.is_none()
            {
                r.ended = Some(Ended::Exited(st));
            }
        }
        if runs.iter().flatten().all(|r| r.ended.is_some()) {
            return Ok(());
        }
        let left = deadline.remaining();
        if left.is_zero() {
            for r in runs.iter_mut().flatten().filter(|r| r.ended.is_none()) {
                r.kill();
                r.ended = Some(Ended::Deadline);
            }
            return Ok(());
        }
        // (run index, stream: 0 stdout, 1 stderr, 2 exit)
        let mut which = Vec::new();
        let ready: Vec<(usize, u8)> = {
            let mut fds = Vec::new();
            for (i, r) in runs.iter().enumerate() {
                let Ok(r) = r else { continue };
                if r.ended.is_some() {
                    continue;
                }
                if let Some(o) = &r.stdout {
                    fds.push(PollFd::new(o, PollFlags::IN));
                    which.push((i, 0));
                }
                if let Some(e) = &r.stderr {
                    fds.push(PollFd::new(e, PollFlags::IN));
                    which.push((i, 1));
                }
                if r.status.is_none() {
                    fds.push(PollFd::new(&r.pidfd, PollFlags::IN));
                    which.push((i, 2));
                }
            }
            let timeout = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: 3600,
                tv_nsec: 0,
            });
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            fds.iter()
                .zip(&which)
                .filter(|(f, _)| !f.revents().is_empty())
                .map(|(_, w)| *w)
                .collect()
        };
        for (i, stream) in ready {
            let Ok(r) = &mut runs[i] else { continue };
            match stream {
                0 => {
                    if drain(&mut r.stdout, &mut r.out, &mut buf, MAX_OUTPUT + 1)? {
                        r.kill();
                        r.ended = Some(Ended::TooLarge);
                    }
                }
                1 => {
                    drain(&mut r.stderr, &mut r.err, &mut buf, MAX_OUTPUT)?;
                }
                _ => r.status = r.child.try_wait()?,
            }
        }
    }
}

/// Reads what a pipe has (non-blocking) into `into`, at most `cap` bytes in
/// all; closes it at its end or at the cap (the program then gets EPIPE).
/// True when the cap was reached.
fn drain(
    pipe: &mut Option<impl Read>,
    into: &mut Vec<u8>,
    buf: &mut [u8],
    cap: u64,
) -> std::io::Result<bool> {
    let Some(p) = pipe else { return Ok(false) };
    loop {
        match p.read(buf) {
            Ok(0) => {
                *pipe = None;
                return Ok(false);
            }
            Ok(n) => {
                let room = usize::try_from(cap.saturating_sub(into.len() as u64)).unwrap_or(0);
                into.extend_from_slice(&buf[..n.min(room)]);
                if into.len() as u64 >= cap {
                    *pipe = None;
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
