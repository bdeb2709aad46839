//! Running programs: the one place a program is started, waited for and
//! killed (qoslane's squeue, scontrol and smpquery, hookrun's hooks and
//! scontrol).
//!
//! Every program:
//! - by **absolute path**, never through a shell or PATH (a relative path
//!   is refused: hooks run with no PATH, and the working directory is not
//!   ours to trust);
//! - with the environment its caller chose **explicitly** ([`Env`]), plus
//!   the variables it adds; stdin `/dev/null`, stdout and stderr piped;
//! - in **its own process group** (`process_group(0)`), so that what it
//!   starts goes with it;
//! - under a **deadline** ([`Timing`]): SIGTERM to the group, SIGKILL after
//!   the grace (no grace: SIGKILL at once); an [`Interrupt`] (hookrun's stop
//!   signals) SIGKILLs the group at once;
//! - once the leader has exited — *before* reaping it, so that its pid,
//!   which is the group id, cannot have been reused — SIGKILL to the group:
//!   nothing it started outlives it; then reaped, and what is left in the
//!   pipes is read for at most [`DRAIN_WAIT`];
//! - with **bounded output** ([`Output`]): either kept whole up to a cap (a
//!   program printing more is killed: [`Ending::TooLarge`]), or passed on
//!   line by line, a line longer than the limit dropped whole ([`Line::Dropped`]).
//!
//! All on the caller's thread: one `poll(2)` loop over every program's
//! stdout, stderr and pidfd (readable when it exits), the deadline and the
//! interrupt's wake-up fd — one program ([`run`]) or several at once
//! ([`run_many`]: the three SMP queries of a port). No reader or waiter
//! threads: on a busy node each would wait for a time slice before it could
//! hand its output over. Programs are started with `posix_spawn` (no
//! `pre_exec`): one clone per program, nothing else.
//!
//! A process that called `setsid`/`setpgid` has left the group on purpose
//! and is not ours to kill; what it writes into an inherited pipe after
//! [`DRAIN_WAIT`] is not read.

mod lines;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal};

use lines::Splitter;
pub use lines::{Dropped, Line, LineSink, Stream};

use crate::error::{Error, Result};

/// After the leader exited (and its group was killed), how long to keep
/// reading output still buffered in the pipes. Only a process that left the
/// group can hold a pipe open longer.
pub const DRAIN_WAIT: Duration = Duration::from_millis(200);
/// After an [`Interrupt`] the caller is about to be SIGKILLed itself: how
/// long a SIGKILLed leader may take to be reaped.
const INTERRUPTED_REAP_WAIT: Duration = Duration::from_millis(100);
/// Most bytes taken from a pipe per wake-up: a program printing without end
/// never keeps the loop from its deadline.
const READ_CHUNK: usize = 16 * 1024;

/// The environment a program gets: a choice its caller makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Env {
    /// The caller's own environment.
    Inherit,
    /// Exactly these variables, nothing of the caller's.
    Exact(Vec<(OsString, OsString)>),
}

/// What to run: a program by absolute path, its arguments, its environment.
#[derive(Debug, Clone)]
pub struct Program {
    path: PathBuf,
    args: Vec<OsString>,
    env: Env,
    /// Set on top of `env`.
    vars: Vec<(OsString, OsString)>,
}

impl Program {
    /// `path` must be absolute ([`run`] refuses it otherwise).
    pub fn new(path: impl Into<PathBuf>, env: Env) -> Program {
        Program {
            path: path.into(),
            args: Vec::new(),
            env,
            vars: Vec::new(),
        }
    }

    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Program {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Program
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets `key` to `value` on top of the environment.
    #[must_use]
    pub fn var(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Program {
        self.vars
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What is done with a program's output.
pub enum Output<'s> {
    /// Kept whole: stdout up to `cap` bytes (a program printing more is
    /// killed: [`Ending::TooLarge`]), stderr up to `cap` (the rest unread:
    /// the program gets EPIPE).
    Capture { cap: u64 },
    /// Passed to `sink` line by line as it arrives, each line whole and
    /// without its newline; a line longer than `max_line` bytes is dropped
    /// whole ([`Line::Dropped`], counted in [`Finished::dropped`]). Nothing
    /// is kept.
    Lines {
        max_line: usize,
        sink: &'s mut LineSink<'s>,
    },
}

impl fmt::Debug for Output<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Capture { cap } => f.debug_struct("Capture").field("cap", cap).finish(),
            Output::Lines { max_line, .. } => f
                .debug_struct("Lines")
                .field("max_line", max_line)
                .finish_non_exhaustive(),
        }
    }
}

/// When a program is stopped.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Past it, SIGTERM to the group.
    pub deadline: Instant,
    /// Between SIGTERM and SIGKILL; zero: SIGKILL at the deadline.
    pub kill_grace: Duration,
    /// How long a SIGKILLed leader may take to die before it is left
    /// unreaped ([`Ending::Stuck`]: uninterruptible sleep).
    pub reap_wait: Duration,
}

/// Something besides the programs that can end the wait (hookrun's stop
/// signals): its fd is polled with the pipes.
pub trait Interrupt {
    /// Readable when something arrived.
    fn wake_fd(&self) -> BorrowedFd<'_>;
    /// Empties it; called when it was readable.
    fn drain(&self);
    /// Whether to stop now: every program's group is SIGKILLed at once and
    /// ends [`Ending::Interrupted`]. Asked before every wait.
    fn stop(&self) -> bool;
}

/// How a program's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Exited (or died of a signal) on its own before the deadline.
    Exited(ExitStatus),
    /// Overstayed its deadline; its process group was killed.
    TimedOut,
    /// Printed more than [`Output::Capture`]'s cap; its group was killed.
    TooLarge,
    /// The [`Interrupt`] said stop; the group was killed.
    Interrupted,
    /// Killed, and did not die within [`Timing::reap_wait`] (uninterruptible
    /// sleep); left unreaped.
    Stuck,
}

/// A finished program.
#[derive(Debug, Clone)]
pub struct Finished {
    pub ending: Ending,
    /// From its start until it was reaped (or given up on).
    pub elapsed: Duration,
    /// What it printed ([`Output::Capture`]; empty with [`Output::Lines`]).
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Over-long lines dropped ([`Output::Lines`]; each also reported to
    /// the sink).
    pub dropped: Dropped,
}

/// Runs one program. An error only when it cannot be started or watched.
pub fn run(
    program: &Program,
    output: Output<'_>,
    timing: Timing,
    interrupt: Option<&dyn Interrupt>,
) -> Result<Finished> {
    run_many(vec![(program, output)], timing, interrupt)
        .pop()
        .unwrap_or_else(|| {
            Err(Error::io("run", program.path())(
                io::ErrorKind::Other.into(),
            ))
        })
}

/// Runs several programs at once, each with its own output, in one loop;
/// one result each, in order. Every program still running at the deadline
/// is stopped.
pub fn run_many<'s>(
    programs: Vec<(&Program, Output<'s>)>,
    timing: Timing,
    interrupt: Option<&dyn Interrupt>,
) -> Vec<Result<Finished>> {
    let mut runs: Vec<Result<Running<'s>>> = programs
        .into_iter()
        .map(|(program, output)| Running::start(program, output, timing))
        .collect();
    if let Err(e) = wait_all(&mut runs, interrupt) {
        for r in runs.iter_mut().flatten() {
            r.abandon();
        }
        return runs
            .into_iter()
            .map(|r| Err(Error::errno("wait for", r?.path)(e)))
            .collect();
    }
    runs.into_iter().map(|r| r.map(Running::finished)).collect()
}

/// Where a running leader stands with respect to its deadline.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Running,
    Terminating { kill_at: Instant },
    Killed { give_up_at: Instant },
}

/// Where a program's run stands.
#[derive(Debug, Clone, Copy)]
enum State {
    /// The leader has not exited.
    Alive(Stage),
    /// Reaped; reading what the pipes still hold.
    Draining {
        until: Instant,
    },
    Done,
}

/// What becomes of a program's output.
enum Taken<'s> {
    Capture {
        cap: u64,
        out: [Vec<u8>; 2],
    },
    Lines {
        sink: &'s mut LineSink<'s>,
        split: [Splitter; 2],
    },
}

/// What taking a chunk of output asks for.
enum Took {
    More,
    /// The stream's cap is reached: close it.
    Full,
    /// stdout went past the cap: kill the program.
    TooLarge,
}

impl Taken<'_> {
    fn take(&mut self, i: usize, bytes: &[u8]) -> Took {
        match self {
            Taken::Capture { cap, out } => {
                // stdout is read to one byte past the cap, to tell a runaway.
                let cap = if i == 0 { cap.saturating_add(1) } else { *cap };
                let into = &mut out[i];
                let room =
                    usize::try_from(cap.saturating_sub(into.len() as u64)).unwrap_or(usize::MAX);
                into.extend_from_slice(&bytes[..bytes.len().min(room)]);
                match (into.len() as u64 >= cap, i) {
                    (false, _) => Took::More,
                    (true, 0) => Took::TooLarge,
                    (true, _) => Took::Full,
                }
            }
            Taken::Lines { sink, split } => {
                split[i].feed(bytes, &mut **sink);
                Took::More
            }
        }
    }

    /// The stream ended (or will not be read any more): a last line
    /// without a newline is passed on.
    fn end(&mut self, i: usize) {
        if let Taken::Lines { sink, split } = self {
            split[i].finish(&mut **sink);
        }
    }
}

/// One program being waited for.
struct Running<'s> {
    path: PathBuf,
    child: std::process::Child,
    pid: Pid,
    pidfd: OwnedFd,
    /// stdout, stderr; `None` once closed.
    pipes: [Option<File>; 2],
    taken: Taken<'s>,
    timing: Timing,
    started: Instant,
    state: State,
    status: Option<ExitStatus>,
    elapsed: Option<Duration>,
    /// Why it was stopped, if it was: the first reason, or an interrupt.
    stopped: Option<Ending>,
    /// Left unreaped.
    stuck: bool,
}

impl<'s> Running<'s> {
    fn start(program: &Program, output: Output<'s>, timing: Timing) -> Result<Self> {
        let path = program.path.clone();
        if !path.is_absolute() {
            return Err(Error::io("run", path)(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an absolute path (programs run with no PATH)",
            )));
        }
        let mut command = Command::new(&path);
        command.args(&program.args);
        if let Env::Exact(vars) = &program.env {
            command.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
        }
        command
            .envs(program.vars.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = command.spawn().map_err(Error::io("run", &path))?;
        let pid = Pid::from_child(&child);
        let stdout = child.stdout.take().map(OwnedFd::from);
        let stderr = child.stderr.take().map(OwnedFd::from);
        let setup = (|| {
            let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty())?;
            for fd in [&stdout, &stderr].into_iter().flatten() {
                rustix::io::ioctl_fionbio(fd, true)?;
            }
            Ok::<_, Errno>(pidfd)
        })();
        let pidfd = match setup {
            Ok(pidfd) => pidfd,
            Err(e) => {
                kill_group(pid, Signal::KILL);
                let _ = child.wait();
                return Err(Error::errno("watch", path)(e));
            }
        };
        let taken = match output {
            Output::Capture { cap } => Taken::Capture {
                cap,
                out: [Vec::new(), Vec::new()],
            },
            Output::Lines { max_line, sink } => Taken::Lines {
                sink,
                split: [
                    Splitter::new(Stream::Stdout, max_line),
                    Splitter::new(Stream::Stderr, max_line),
                ],
            },
        };
        Ok(Running {
            path,
            child,
            pid,
            pidfd,
            pipes: [stdout.map(File::from), stderr.map(File::from)],
            taken,
            timing,
            started,
            state: State::Alive(Stage::Running),
            status: None,
            elapsed: None,
            stopped: None,
            stuck: false,
        })
    }

    /// Sends the group SIGKILL and gives the leader `wait` to die.
    fn kill(&mut self, now: Instant, wait: Duration) {
        kill_group(self.pid, Signal::KILL);
        let give_up_at = match self.state {
            State::Alive(Stage::Killed { give_up_at }) => give_up_at.min(now + wait),
            _ => now + wait,
        };
        self.state = State::Alive(Stage::Killed { give_up_at });
    }

    /// The deadline's steps, the drain's end, and giving up on a leader
    /// that does not die.
    fn advance(&mut self, now: Instant) {
        let timing = self.timing;
        match self.state {
            State::Alive(Stage::Running) if now >= timing.deadline => {
                self.stopped.get_or_insert(Ending::TimedOut);
                if timing.kill_grace.is_zero() {
                    self.kill(now, timing.reap_wait);
                } else {
                    kill_group(self.pid, Signal::TERM);
                    self.state = State::Alive(Stage::Terminating {
                        kill_at: now + timing.kill_grace,
                    });
                }
            }
            State::Alive(Stage::Terminating { kill_at }) if now >= kill_at => {
                self.kill(now, timing.reap_wait);
            }
            State::Alive(Stage::Killed { give_up_at }) if now >= give_up_at => {
                self.stuck = true;
                self.elapsed = Some(self.started.elapsed());
                self.pipes = [None, None];
                self.state = State::Done;
            }
            State::Draining { until } if now >= until => self.done(),
            _ => {}
        }
    }

    /// When [`Running::advance`] must next be called.
    fn wake_at(&self) -> Option<Instant> {
        match self.state {
            State::Alive(Stage::Running) => Some(self.timing.deadline),
            State::Alive(Stage::Terminating { kill_at }) => Some(kill_at),
            State::Alive(Stage::Killed { give_up_at }) => Some(give_up_at),
            State::Draining { until } => Some(until),
            State::Done => None,
        }
    }

    /// Stop now: SIGKILL to the group, nothing more read or passed on.
    fn interrupt(&mut self, now: Instant) {
        self.stopped = Some(Ending::Interrupted);
        self.pipes = [None, None];
        match self.state {
            State::Alive(_) => self.kill(now, INTERRUPTED_REAP_WAIT),
            State::Draining { .. } => self.state = State::Done,
            State::Done => {}
        }
    }

    /// Its pidfd is readable: the leader has exited, and is a zombie until
    /// reaped — its pid, which is the group id, is still ours. Anything left
    /// in the group goes now; then it is reaped.
    fn leader_exited(&mut self) {
        kill_group(self.pid, Signal::KILL);
        self.status = self.child.try_wait().ok().flatten();
        self.elapsed = Some(self.started.elapsed());
        if self.status.is_none() {
            // A pidfd is readable only once the process has exited: not
            // reapable means not ours any more.
            self.stuck = true;
        }
        if self.stopped == Some(Ending::Interrupted) || self.status.is_none() {
            self.pipes = [None, None];
            self.state = State::Done;
        } else if self.pipes.iter().all(Option::is_none) {
            self.done();
        } else {
            self.state = State::Draining {
                until: Instant::now() + DRAIN_WAIT,
            };
        }
    }

    /// Reads what pipe `i` has (poll said it is ready); closes it at its
    /// end, at an error, or at its cap.
    fn read(&mut self, i: usize, buf: &mut [u8]) {
        let Some(pipe) = self.pipes[i].as_mut() else {
            return;
        };
        let took = match pipe.read(buf) {
            Ok(0) => None,
            Ok(n) => Some(self.taken.take(i, &buf[..n])),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Some(Took::More)
            }
            Err(_) => None,
        };
        match took {
            Some(Took::More) => {}
            None => {
                self.pipes[i] = None;
                self.taken.end(i);
            }
            Some(Took::Full) => self.pipes[i] = None,
            Some(Took::TooLarge) => {
                self.pipes[i] = None;
                self.stopped.get_or_insert(Ending::TooLarge);
                if let State::Alive(_) = self.state {
                    self.kill(Instant::now(), self.timing.reap_wait);
                }
            }
        }
        if matches!(self.state, State::Draining { .. }) && self.pipes.iter().all(Option::is_none) {
            self.done();
        }
    }

    /// Reaped and read: a last unended line is passed on.
    fn done(&mut self) {
        for i in 0..2 {
            if self.pipes[i].take().is_some() {
                self.taken.end(i);
            }
        }
        self.state = State::Done;
    }

    /// On a failed wait: kill the group and reap what died at once.
    fn abandon(&mut self) {
        if let State::Alive(_) = self.state {
            kill_group(self.pid, Signal::KILL);
            let timeout = Timespec::try_from(INTERRUPTED_REAP_WAIT).unwrap_or_default();
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&timeout));
            let _ = self.child.try_wait();
        }
    }

    fn finished(self) -> Finished {
        let ending = match (self.stopped, self.status) {
            (Some(Ending::Interrupted), _) => Ending::Interrupted,
            _ if self.stuck => Ending::Stuck,
            (Some(why), _) => why,
            (None, Some(status)) => Ending::Exited(status),
            (None, None) => Ending::Stuck,
        };
        let mut dropped = Dropped::default();
        let (stdout, stderr) = match self.taken {
            Taken::Capture { out: [o, e], .. } => (o, e),
            Taken::Lines { split, .. } => {
                for s in &split {
                    dropped.add(s.stream(), s.dropped());
                }
                (Vec::new(), Vec::new())
            }
        };
        Finished {
            ending,
            elapsed: self.elapsed.unwrap_or_else(|| self.started.elapsed()),
            stdout,
            stderr,
            dropped,
        }
    }
}

/// Signals the whole process group. Errors are ignored on purpose: ESRCH
/// means the group is already gone, which is the goal.
fn kill_group(pid: Pid, signal: Signal) {
    let _ = rustix::process::kill_process_group(pid, signal);
}

/// What a ready descriptor of the poll set is.
#[derive(Debug, Clone, Copy)]
enum Ready {
    Interrupt,
    Pipe(usize, usize),
    Exit(usize),
}

/// Waits for every started program: its output to its end (or its cap),
/// its exit — or the deadline, or the interrupt, which stop what is left.
/// An error only when `poll` fails.
fn wait_all(
    runs: &mut [Result<Running<'_>>],
    interrupt: Option<&dyn Interrupt>,
) -> std::result::Result<(), Errno> {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut interrupted = false;
    loop {
        let now = Instant::now();
        if !interrupted && interrupt.is_some_and(Interrupt::stop) {
            interrupted = true;
            for r in runs.iter_mut().flatten() {
                r.interrupt(now);
            }
        }
        for r in runs.iter_mut().flatten() {
            r.advance(now);
        }
        let Some(wake_at) = runs.iter().flatten().filter_map(Running::wake_at).min() else {
            return Ok(());
        };
        let ready: Vec<Ready> = {
            let mut fds = Vec::new();
            let mut which = Vec::new();
            if let Some(i) = interrupt {
                fds.push(PollFd::from_borrowed_fd(i.wake_fd(), PollFlags::IN));
                which.push(Ready::Interrupt);
            }
            for (n, r) in runs.iter().enumerate() {
                let Ok(r) = r else { continue };
                for (i, pipe) in r.pipes.iter().enumerate() {
                    if let Some(pipe) = pipe {
                        fds.push(PollFd::from_borrowed_fd(pipe.as_fd(), PollFlags::IN));
                        which.push(Ready::Pipe(n, i));
                    }
                }
                if let State::Alive(_) = r.state {
                    fds.push(PollFd::new(&r.pidfd, PollFlags::IN));
                    which.push(Ready::Exit(n));
                }
            }
            // Round up so a wake-up never comes a hair before its instant.
            let timeout = Timespec::try_from(
                wake_at.saturating_duration_since(now) + Duration::from_micros(500),
            )
            .unwrap_or(Timespec {
                tv_sec: i64::from(i32::MAX),
                tv_nsec: 0,
            });
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e),
            }
            fds.iter()
                .zip(which)
                .filter(|(f, _)| !f.revents().is_empty())
                .map(|(_, w)| w)
                .collect()
        };
        for w in ready {
            match w {
                Ready::Interrupt => {
                    if let Some(i) = interrupt {
                        i.drain();
                    }
                }
                Ready::Pipe(n, i) => {
                    if let Ok(r) = &mut runs[n] {
                        r.read(i, &mut buf);
                    }
                }
                Ready::Exit(n) => {
                    if let Ok(r) = &mut runs[n]
                        && let State::Alive(_) = r.state
                    {
                        r.leader_exited();
                    }
                }
            }
        }
    }
}
