//! Runs one program — a hook, or scontrol — in its own process group, under a
//! deadline, reading its output line by line, and leaves nothing behind.
//!
//! The shape, for every child:
//! 1. spawn with `process_group(0)`, stdin `/dev/null`, stdout/stderr piped;
//! 2. poll the pipes and the signal wake-up socket until the leader exits, the
//!    deadline passes or hookrun is told to stop;
//! 3. deadline: SIGTERM to the group, SIGKILL after the grace;
//!    stop signal: SIGKILL to the group at once (Slurm's own SIGKILL is ~10 ms away);
//! 4. once the leader has exited — *before* reaping it, so its pid (the group id)
//!    cannot have been reused — SIGKILL the group to remove leftovers;
//! 5. reap, read what is left in the pipes (bounded), flush partial lines.
//!
//! A process that called `setsid`/`setpgid` has left the group on purpose and is
//! not ours to kill.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};

use crate::signals::Signals;

/// Longest line passed on; longer output is cut into pieces of this size.
pub const MAX_LINE: usize = 16 * 1024;
/// How long a SIGKILLed leader may take to be reaped before hookrun gives up on it.
const REAP_WAIT: Duration = Duration::from_secs(2);
/// After an interruption hookrun is about to be SIGKILLed itself: wait less.
const INTERRUPTED_REAP_WAIT: Duration = Duration::from_millis(100);
/// After the leader exited (and the group was killed), how long to keep reading
/// output still buffered in the pipes. Only a process that left the group can
/// hold a pipe open longer.
const DRAIN_WAIT: Duration = Duration::from_millis(200);

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct ChildSpec<'a> {
    /// Absolute path; run directly, never through a shell or PATH.
    pub program: &'a Path,
    pub args: &'a [&'a OsStr],
    /// Added to the inherited environment.
    pub env: &'a [(&'a str, &'a OsStr)],
    pub deadline: Instant,
    /// Between SIGTERM and SIGKILL once the deadline has passed.
    pub kill_grace: Duration,
}

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Exited (or died of a signal) on its own before the deadline.
    Exited(ExitStatus),
    /// Overstayed its deadline; its process group was killed.
    TimedOut,
    /// hookrun received this termination signal; the group was killed.
    Interrupted(i32),
    /// Overstayed, and did not die within seconds of SIGKILL (uninterruptible
    /// sleep); left unreaped.
    Stuck,
}

/// A finished child.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub ending: Ending,
    pub elapsed: Duration,
}

/// Where the run stands with respect to the deadline.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Running,
    Terminating { kill_at: Instant },
    Killed { give_up_at: Instant },
}

/// Runs `spec`, feeding each output line (without its newline) to `sink`.
/// Errors only when the program cannot be started.
pub fn run(
    spec: &ChildSpec<'_>,
    signals: &Signals,
    sink: &mut dyn FnMut(Stream, &[u8]),
) -> io::Result<Finished> {
    let started = Instant::now();
    let mut command = Command::new(spec.program);
    command
        .args(spec.args)
        .envs(spec.env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn()?;
    let pid = Pid::from_child(&child);
    let mut pipes = [
        LineReader::new(child.stdout.take().map(OwnedFd::from), Stream::Stdout),
        LineReader::new(child.stderr.take().map(OwnedFd::from), Stream::Stderr),
    ];

    let mut stage = Stage::Running;
    let mut timed_out = false;
    let interrupted = loop {
        if let Some(signal) = signals.termination() {
            kill_group(pid, Signal::KILL);
            break Some(signal);
        }
        if leader_exited(pid) {
            break None;
        }
        let now = Instant::now();
        let wake_at = match stage {
            Stage::Running if now >= spec.deadline => {
                timed_out = true;
                kill_group(pid, Signal::TERM);
                stage = Stage::Terminating {
                    kill_at: now + spec.kill_grace,
                };
                continue;
            }
            Stage::Terminating { kill_at } if now >= kill_at => {
                kill_group(pid, Signal::KILL);
                stage = Stage::Killed {
                    give_up_at: now + REAP_WAIT,
                };
                continue;
            }
            Stage::Killed { give_up_at } if now >= give_up_at => {
                return Ok(Finished {
                    ending: Ending::Stuck,
                    elapsed: started.elapsed(),
                });
            }
            Stage::Running => spec.deadline,
            Stage::Terminating { kill_at } => kill_at,
            Stage::Killed { give_up_at } => give_up_at,
        };
        wait_for_events(signals, &mut pipes, wake_at - now, sink)?;
    };

    // The leader is a zombie (or was just SIGKILLed): its pid, which is the group
    // id, is still ours. Anything left in the group goes now.
    kill_group(pid, Signal::KILL);
    let reap_wait = if interrupted.is_some() {
        INTERRUPTED_REAP_WAIT
    } else {
        REAP_WAIT
    };
    let status = reap(&mut child, signals, Instant::now() + reap_wait)?;
    let elapsed = started.elapsed();

    if interrupted.is_none() {
        let drain_until = Instant::now() + DRAIN_WAIT;
        while pipes.iter().any(LineReader::is_open) {
            let now = Instant::now();
            if now >= drain_until {
                break;
            }
            wait_for_events(signals, &mut pipes, drain_until - now, sink)?;
        }
        for pipe in &mut pipes {
            pipe.flush(sink);
        }
    }

    let ending = match (interrupted, timed_out, status) {
        (Some(signal), _, _) => Ending::Interrupted(signal),
        (None, true, _) => Ending::TimedOut,
        (None, false, Some(status)) => Ending::Exited(status),
        (None, false, None) => Ending::Stuck,
    };
    Ok(Finished { ending, elapsed })
}

/// Signals the whole process group. Errors are ignored on purpose: ESRCH means
/// the group is already gone, which is the goal.
fn kill_group(pid: Pid, signal: Signal) {
    let _ = rustix::process::kill_process_group(pid, signal);
}

/// Whether the leader has exited, without reaping it (WNOWAIT).
fn leader_exited(pid: Pid) -> bool {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    match rustix::process::waitid(WaitId::Pid(pid), options) {
        Ok(status) => status.is_some(),
        // ECHILD: nothing left to wait for.
        Err(_) => true,
    }
}

/// Reaps the leader, waiting at most until `until`.
fn reap(child: &mut Child, signals: &Signals, until: Instant) -> io::Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= until {
            return Ok(None);
        }
        // SIGCHLD wakes this up.
        wait_for_events(signals, &mut [], until - now, &mut |_, _| {})?;
    }
}

/// Sleeps until a pipe has data, a signal arrives, or `timeout` passes, then
/// handles what is ready.
fn wait_for_events(
    signals: &Signals,
    pipes: &mut [LineReader],
    timeout: Duration,
    sink: &mut dyn FnMut(Stream, &[u8]),
) -> io::Result<()> {
    let ready: Vec<bool> = {
        let mut fds = vec![PollFd::from_borrowed_fd(signals.wake_fd(), PollFlags::IN)];
        fds.extend(
            pipes
                .iter()
                .filter_map(LineReader::fd)
                .map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)),
        );
        // Round up so a wake-up never comes a hair before the deadline.
        let timeout =
            Timespec::try_from(timeout + Duration::from_micros(500)).unwrap_or(Timespec {
                tv_sec: i64::from(i32::MAX),
                tv_nsec: 0,
            });
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(error) => return Err(error.into()),
        }
        fds.iter().map(|fd| !fd.revents().is_empty()).collect()
    };
    if ready[0] {
        signals.drain();
    }
    let mut ready = ready[1..].iter();
    for pipe in pipes.iter_mut().filter(|pipe| pipe.is_open()) {
        if ready.next().copied().unwrap_or(false) {
            pipe.read_available(sink);
        }
    }
    Ok(())
}

/// One output pipe, split into lines.
#[derive(Debug)]
struct LineReader {
    file: Option<File>,
    stream: Stream,
    pending: Vec<u8>,
}

impl LineReader {
    fn new(fd: Option<OwnedFd>, stream: Stream) -> LineReader {
        LineReader {
            file: fd.map(File::from),
            stream,
            pending: Vec::new(),
        }
    }

    fn is_open(&self) -> bool {
        self.file.is_some()
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(AsFd::as_fd)
    }

    /// One read (poll said it will not block); EOF or an error closes the pipe.
    fn read_available(&mut self, sink: &mut dyn FnMut(Stream, &[u8])) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let mut buffer = [0u8; 8192];
        match file.read(&mut buffer) {
            Ok(0) => {
                self.file = None;
                self.flush(sink);
            }
            Ok(n) => {
                self.pending.extend_from_slice(&buffer[..n]);
                self.emit_lines(sink);
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) => {}
            Err(_) => {
                self.file = None;
                self.flush(sink);
            }
        }
    }

    fn emit_lines(&mut self, sink: &mut dyn FnMut(Stream, &[u8])) {
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            sink(self.stream, &self.pending[start..end]);
            start = end + 1;
        }
        while self.pending.len() - start >= MAX_LINE {
            sink(self.stream, &self.pending[start..start + MAX_LINE]);
            start += MAX_LINE;
        }
        self.pending.drain(..start);
    }

    /// Passes on a last line that had no newline.
    fn flush(&mut self, sink: &mut dyn FnMut(Stream, &[u8])) {
        if !self.pending.is_empty() {
            sink(self.stream, &self.pending);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut reader = LineReader::new(None, Stream::Stdout);
        let mut lines = Vec::new();
        let mut sink = |_: Stream, line: &[u8]| lines.push(line.to_vec());
        for chunk in chunks {
            reader.pending.extend_from_slice(chunk);
            reader.emit_lines(&mut sink);
        }
        reader.flush(&mut sink);
        lines
    }

    #[test]
    fn lines_split_across_reads() {
        assert_eq!(
            split(&[b"exp", b"ort A=1\nunset", b" B\nprint x"]),
            vec![
                b"export A=1".to_vec(),
                b"unset B".to_vec(),
                b"print x".to_vec()
            ]
        );
    }

    #[test]
    fn empty_lines_are_kept_and_overlong_lines_are_cut() {
        let long = vec![b'x'; MAX_LINE + 3];
        let lines = split(&[b"\n", &long, b"\n"]);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].is_empty());
        assert_eq!(lines[1].len(), MAX_LINE);
        assert_eq!(lines[2], b"xxx".to_vec());
    }
}
