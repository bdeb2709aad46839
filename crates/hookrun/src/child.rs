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
//! A line is passed on whole or not at all: one longer than [`MAX_LINE`] is
//! dropped whole (reported as [`Output::Dropped`] and counted in
//! [`Finished::dropped`]), never cut into pieces — the rest of a cut line
//! would read as a line of its own, and on a TaskProlog's stdout text a hook
//! merely echoed could become an instruction.
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

/// Longest line passed on (without its newline); a longer one is dropped whole.
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

impl Stream {
    /// `stdout` / `stderr`: the metric label and the word in log lines.
    pub fn label(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a child's output pipe produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output<'a> {
    /// One whole line, without its newline; at most [`MAX_LINE`] bytes.
    Line(&'a [u8]),
    /// A line longer than [`MAX_LINE`] was dropped whole; `bytes` is its
    /// length without the newline. Nothing of it was passed on.
    Dropped { bytes: usize },
}

/// Over-long lines dropped, per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub stdout: u64,
    pub stderr: u64,
}

impl Dropped {
    pub fn of(&self, stream: Stream) -> u64 {
        match stream {
            Stream::Stdout => self.stdout,
            Stream::Stderr => self.stderr,
        }
    }

    fn add(&mut self, stream: Stream, lines: u64) {
        match stream {
            Stream::Stdout => self.stdout += lines,
            Stream::Stderr => self.stderr += lines,
        }
    }
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
    /// Over-long lines dropped (each also reported to the sink).
    pub dropped: Dropped,
}

/// Where the run stands with respect to the deadline.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Running,
    Terminating { kill_at: Instant },
    Killed { give_up_at: Instant },
}

/// Runs `spec`, feeding each whole output line (without its newline) to
/// `sink`; over-long lines are only counted ([`Finished::dropped`]).
/// Errors only when the program cannot be started.
pub fn run(
    spec: &ChildSpec<'_>,
    signals: &Signals,
    sink: &mut dyn FnMut(Stream, &[u8]),
) -> io::Result<Finished> {
    run_output(spec, signals, &mut |stream, output| {
        if let Output::Line(line) = output {
            sink(stream, line);
        }
    })
}

/// Runs `spec`, feeding each whole output line, and each over-long line
/// dropped, to `sink` in the order they were read.
/// Errors only when the program cannot be started.
pub fn run_output(
    spec: &ChildSpec<'_>,
    signals: &Signals,
    sink: &mut dyn FnMut(Stream, Output<'_>),
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
                    dropped: dropped(&pipes),
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
    Ok(Finished {
        ending,
        elapsed,
        dropped: dropped(&pipes),
    })
}

fn dropped(pipes: &[LineReader]) -> Dropped {
    let mut dropped = Dropped::default();
    for pipe in pipes {
        dropped.add(pipe.stream, pipe.dropped);
    }
    dropped
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
    sink: &mut dyn FnMut(Stream, Output<'_>),
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

/// One output pipe, split into whole lines.
///
/// `pending` holds the start of a line not yet ended, at most [`MAX_LINE`]
/// bytes past the last read; once it is longer the line is over-long:
/// what has arrived is discarded (`overlong` counts it) and so is the rest,
/// up to the next newline, where one [`Output::Dropped`] reports it. Memory
/// stays bounded however long a line is.
#[derive(Debug)]
struct LineReader {
    file: Option<File>,
    stream: Stream,
    pending: Vec<u8>,
    /// Bytes of an over-long line discarded so far; `None`: not in one.
    overlong: Option<usize>,
    /// Over-long lines dropped.
    dropped: u64,
}

impl LineReader {
    fn new(fd: Option<OwnedFd>, stream: Stream) -> LineReader {
        LineReader {
            file: fd.map(File::from),
            stream,
            pending: Vec::new(),
            overlong: None,
            dropped: 0,
        }
    }

    fn is_open(&self) -> bool {
        self.file.is_some()
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.file.as_ref().map(AsFd::as_fd)
    }

    /// One read (poll said it will not block); EOF or an error closes the pipe.
    fn read_available(&mut self, sink: &mut dyn FnMut(Stream, Output<'_>)) {
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

    /// Passes on every whole line in `pending`; keeps the unended rest, or
    /// starts discarding it once it is over-long.
    fn emit_lines(&mut self, sink: &mut dyn FnMut(Stream, Output<'_>)) {
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            self.end_line(start, end, sink);
            start = end + 1;
        }
        let rest = self.pending.len() - start;
        if let Some(discarded) = self.overlong.as_mut() {
            *discarded += rest;
            self.pending.clear();
        } else if rest > MAX_LINE {
            self.overlong = Some(rest);
            self.pending.clear();
        } else {
            self.pending.drain(..start);
        }
    }

    /// `pending[start..end]` ends a line: the whole of it, or the end of an
    /// over-long one.
    fn end_line(&mut self, start: usize, end: usize, sink: &mut dyn FnMut(Stream, Output<'_>)) {
        let length = self.overlong.take().unwrap_or(0) + (end - start);
        if length > MAX_LINE {
            self.dropped += 1;
            sink(self.stream, Output::Dropped { bytes: length });
        } else {
            sink(self.stream, Output::Line(&self.pending[start..end]));
        }
    }

    /// Passes on a last line that had no newline (or reports it dropped).
    fn flush(&mut self, sink: &mut dyn FnMut(Stream, Output<'_>)) {
        if !self.pending.is_empty() || self.overlong.is_some() {
            let end = self.pending.len();
            self.end_line(0, end, sink);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        Line(Vec<u8>),
        Dropped(usize),
    }

    fn split(chunks: &[&[u8]]) -> (Vec<Got>, u64) {
        let mut reader = LineReader::new(None, Stream::Stdout);
        let mut got = Vec::new();
        let mut sink = |_: Stream, output: Output<'_>| {
            got.push(match output {
                Output::Line(line) => Got::Line(line.to_vec()),
                Output::Dropped { bytes } => Got::Dropped(bytes),
            });
        };
        for chunk in chunks {
            reader.pending.extend_from_slice(chunk);
            reader.emit_lines(&mut sink);
            assert!(reader.pending.len() <= MAX_LINE, "pending stays bounded");
        }
        reader.flush(&mut sink);
        (got, reader.dropped)
    }

    fn line(text: &[u8]) -> Got {
        Got::Line(text.to_vec())
    }

    #[test]
    fn lines_split_across_reads() {
        assert_eq!(
            split(&[b"exp", b"ort A=1\nunset", b" B\nprint x"]).0,
            vec![line(b"export A=1"), line(b"unset B"), line(b"print x")]
        );
    }

    #[test]
    fn empty_lines_are_kept_and_overlong_lines_are_dropped_whole() {
        let long = vec![b'x'; MAX_LINE + 3];
        let (got, dropped) = split(&[b"\n", &long, b"\nexport A=1\n"]);
        assert_eq!(
            got,
            vec![line(b""), Got::Dropped(MAX_LINE + 3), line(b"export A=1")]
        );
        assert_eq!(dropped, 1);
    }

    #[test]
    fn no_piece_of_an_overlong_line_is_passed_on_however_it_arrives() {
        let tail = b"export LD_PRELOAD=/tmp/x.so";
        let mut text = vec![b'x'; MAX_LINE];
        text.extend_from_slice(tail);
        text.extend_from_slice(b"\nprint ok\n");
        let length = MAX_LINE + tail.len();
        for size in [1, 7, 4096, 8192, MAX_LINE, MAX_LINE + 1, text.len()] {
            let chunks: Vec<&[u8]> = text.chunks(size).collect();
            let (got, dropped) = split(&chunks);
            assert_eq!(
                got,
                vec![Got::Dropped(length), line(b"print ok")],
                "chunks of {size}"
            );
            assert_eq!(dropped, 1);
        }
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_and_one_byte_more_does_not() {
        let exact = vec![b'x'; MAX_LINE];
        let mut over = exact.clone();
        over.push(b'y');
        assert_eq!(split(&[&exact, b"\n"]).0, vec![Got::Line(exact.clone())]);
        assert_eq!(split(&[&exact]).0, vec![Got::Line(exact.clone())]);
        assert_eq!(split(&[&over, b"\n"]).0, vec![Got::Dropped(MAX_LINE + 1)]);
        // An over-long last line without a newline is dropped at EOF.
        assert_eq!(split(&[&over]).0, vec![Got::Dropped(MAX_LINE + 1)]);
        assert_eq!(
            split(&[&over, &over]).0,
            vec![Got::Dropped(2 * MAX_LINE + 2)]
        );
    }
}
