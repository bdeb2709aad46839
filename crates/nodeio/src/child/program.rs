//! What `run` is given: the program, its environment, what to do
//! with its output, when to stop it, what can interrupt it; and what it
//! gives back.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::lines::{Dropped, LineSink};

/// The environment a program gets: a choice its caller makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Env {
    /// The caller's own environment: only for a program whose contract is
    /// that environment (hookrun's hooks get Slurm's job variables).
    Inherit,
    /// Exactly these variables, nothing of the caller's.
    Exact(Vec<(OsString, OsString)>),
}

/// The `PATH` of [`Env::tool`]: the system's directories, for what a tool
/// (or a site's wrapper script around it) starts by name.
pub const TOOL_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

impl Env {
    /// The environment of a program run as a tool (squeue, scontrol,
    /// smpquery, ibnetdiscover): `PATH` ([`TOOL_PATH`]) and `LC_ALL=C` (the
    /// output is parsed), nothing of the caller's. Slurm's clients read
    /// their options from the environment (`SQUEUE_USERS`, `SQUEUE_STATES`,
    /// `SLURM_CONF`, `SLURM_TIME_FORMAT`, …): whoever starts qoslane or
    /// hookrun must not be able to change what squeue lists or scontrol
    /// prints. A site whose tool needs a variable (a `slurm.conf` outside
    /// the build's default) points the program's path at a wrapper script
    /// that sets it.
    pub fn tool() -> Env {
        Env::Exact(vec![
            ("PATH".into(), TOOL_PATH.into()),
            ("LC_ALL".into(), "C".into()),
        ])
    }
}

/// A program's entry point compiled into the running binary: called in the
/// child of a fork, without exec ([`Program::built_in`]), with the argument
/// vector an exec would have given the program (its path first, then its
/// arguments); returns its exit status (the low 8 bits are what its parent
/// sees, as with `exit`).
pub type Entry = fn(&[OsString]) -> i32;

/// What to run: a program by absolute path, its arguments, its environment.
#[derive(Debug, Clone)]
pub struct Program {
    pub(super) path: PathBuf,
    pub(super) args: Vec<OsString>,
    pub(super) env: Env,
    /// Set on top of `env`.
    pub(super) vars: Vec<(OsString, OsString)>,
    /// Run in a fork of this process instead of exec'ing `path`.
    pub(super) built_in: Option<Entry>,
}

impl Program {
    /// `path` must be absolute (`run` refuses it otherwise).
    pub fn new(path: impl Into<PathBuf>, env: Env) -> Program {
        Program {
            path: path.into(),
            args: Vec::new(),
            env,
            vars: Vec::new(),
            built_in: None,
        }
    }

    /// `path` is the running binary itself (the caller checked: the same
    /// file), and `entry` is what exec'ing it would run: call `entry` in a
    /// fork of this process instead of exec'ing it, when this process is
    /// single-threaded (a fork of a process with other threads may find a
    /// lock held that no thread of the child will release); else `path` is
    /// exec'd as usual. Everything else is the same either way: its own
    /// process group, stdin `/dev/null`, its stdout and stderr piped, the
    /// environment (`env` and `vars`), the deadline, the group's kills, the
    /// pidfd, the reaping. The child is a new program: the signal handlers
    /// of this one are reset to their defaults (as exec resets them; ignored
    /// signals stay ignored; Rust's own stack-overflow handlers stay, as the
    /// program's start would install them) and what `nodeio` remembers of
    /// the process (its pid, the log's sink) is forgotten (`child/fork.rs`).
    #[must_use]
    pub fn built_in(mut self, entry: Entry) -> Program {
        self.built_in = Some(entry);
        self
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
    /// whole (`Line::Dropped`, counted in [`Finished::dropped`]). Nothing
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
