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
//! `pre_exec`; `spawn.rs`, with an empty signal mask, SIGPIPE and SIGTERM
//! at their defaults whatever the caller's): one clone per program, nothing else — or, for a program
//! that is the running binary itself ([`Program::built_in`]), by a fork that
//! calls its entry without exec (`fork.rs`: the one `unsafe` block of this
//! module), watched, stopped and reaped the same way.
//!
//! A process that called `setsid`/`setpgid` has left the group on purpose
//! and is not ours to kill; what it writes into an inherited pipe after
//! [`DRAIN_WAIT`] is not read.

mod fork;
mod lines;
mod program;
mod running;
mod spawn;
#[cfg(test)]
mod tests;

use std::io;

pub use fork::single_threaded;
pub use lines::{Dropped, Line, LineSink, Stream};
pub use program::{Ending, Entry, Env, Finished, Interrupt, Output, Program, TOOL_PATH, Timing};
pub use running::DRAIN_WAIT;
use running::{Running, wait_all};

use crate::error::{Error, Result};

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
