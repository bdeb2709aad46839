//! hookrun's children — hooks, and scontrol — through [`nodeio::child`],
//! which runs each by absolute path in its own process group, under its
//! deadline (SIGTERM to the group, SIGKILL after the grace), kills what is
//! left in the group once the leader exits and before it is reaped, and
//! passes its output on line by line, a line longer than [`MAX_LINE`] dropped
//! whole (on a TaskProlog's stdout a piece of a cut line could become an
//! instruction). Here: hookrun's limits, the environment hooks get, and its
//! stop signals ([`Signals`]), which SIGKILL the running group at once
//! (Slurm's own SIGKILL is ~10 ms away).

use std::io;
use std::time::{Duration, Instant};

pub use nodeio::child::{Dropped, Ending, Entry, Env, Finished, Line, LineSink, Program, Stream};
use nodeio::child::{Output, Timing};

use crate::signals::Signals;

/// Longest line passed on (without its newline); a longer one is dropped whole.
pub const MAX_LINE: usize = 16 * 1024;
/// How long a SIGKILLed leader may take to be reaped before hookrun gives up on it.
const REAP_WAIT: Duration = Duration::from_secs(2);

/// The environment hooks get: hookrun's own — Slurm's job variables are
/// the hooks' contract — plus what the caller adds ([`Program::var`]).
/// scontrol, a tool, gets [`Env::tool`]'s fixed list instead, nothing of
/// hookrun's (it reads `SLURM_CONF`, `SLURM_TIME_FORMAT`, `SLURM_CLUSTERS`…
/// from it: a hand-run hookrun must not drain another cluster's node or
/// read a reason it cannot parse).
pub const HOOK_ENV: Env = Env::Inherit;

/// Runs `program` until `deadline` (then `kill_grace` between SIGTERM and
/// SIGKILL), feeding each whole output line, and each over-long line
/// dropped, to `sink` in the order they were read.
/// Errors only when the program cannot be started.
pub fn run(
    program: &Program,
    deadline: Instant,
    kill_grace: Duration,
    signals: &Signals,
    sink: &mut LineSink<'_>,
) -> io::Result<Finished> {
    let timing = Timing {
        deadline,
        kill_grace,
        reap_wait: REAP_WAIT,
    };
    let output = Output::Lines {
        max_line: MAX_LINE,
        sink,
    };
    nodeio::child::run(program, output, timing, Some(signals)).map_err(|e| match e {
        nodeio::Error::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    })
}
