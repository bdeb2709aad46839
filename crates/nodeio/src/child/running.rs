//! The loop that runs programs: starting each, one `poll(2)` over every
//! pipe, pidfd and the interrupt's fd, the deadline's steps, the group
//! kills, reaping and the bounded drain.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal};

use super::lines::{Dropped, LineSink, Splitter, Stream};
use super::program::{Ending, Finished, Interrupt, Output, Program, Timing};
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

/// The process a program runs in: spawned (`posix_spawn` and exec), or a
/// fork of this one running a built-in entry (`fork.rs`).
enum Leader {
    Spawned(Pid),
    Forked(Pid),
}

impl Leader {
    /// Reaps it if it has exited.
    fn try_wait(&mut self) -> Option<ExitStatus> {
        match self {
            Leader::Spawned(pid) | Leader::Forked(pid) => {
                match rustix::process::waitpid(Some(*pid), rustix::process::WaitOptions::NOHANG) {
                    Ok(Some((_, status))) => Some(ExitStatus::from_raw(status.as_raw())),
                    _ => None,
                }
            }
        }
    }

    /// Waits for it (it was just SIGKILLed).
    fn wait(&mut self) {
        match self {
            Leader::Spawned(pid) | Leader::Forked(pid) => {
                let _ = rustix::process::waitpid(Some(*pid), rustix::process::WaitOptions::empty());
            }
        }
    }
}

/// One program being waited for.
pub(super) struct Running<'s> {
    pub(super) path: PathBuf,
    child: Leader,
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
    pub(super) fn start(program: &Program, output: Output<'s>, timing: Timing) -> Result<Self> {
        let path = program.path.clone();
        if !path.is_absolute() {
            return Err(Error::io("run", path)(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an absolute path (programs run with no PATH)",
            )));
        }
        let started = Instant::now();
        let (mut child, pid, stdout, stderr) = match program.built_in {
            Some(entry) if super::fork::single_threaded() => {
                let forked = super::fork::start(program, entry).map_err(Error::io("run", &path))?;
                (
                    Leader::Forked(forked.pid),
                    forked.pid,
                    Some(forked.stdout),
                    Some(forked.stderr),
                )
            }
            _ => {
                let spawned = super::spawn::start(program).map_err(Error::io("run", &path))?;
                (
                    Leader::Spawned(spawned.pid),
                    spawned.pid,
                    Some(spawned.stdout),
                    Some(spawned.stderr),
                )
            }
        };
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
                child.wait();
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
        self.status = self.child.try_wait();
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
    pub(super) fn abandon(&mut self) {
        if let State::Alive(_) = self.state {
            kill_group(self.pid, Signal::KILL);
            let timeout = Timespec::try_from(INTERRUPTED_REAP_WAIT).unwrap_or_default();
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            let _ = poll(&mut fds, Some(&timeout));
            let _ = self.child.try_wait();
        }
    }

    pub(super) fn finished(self) -> Finished {
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
pub(super) fn wait_all(
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
