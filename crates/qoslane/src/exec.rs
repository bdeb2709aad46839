//! Running external programs (squeue, smpquery, ibnetdiscover): qoslane's
//! face of [`nodeio::child`], which runs them by absolute path, with no
//! shell and no PATH lookup, each in its own process group, all on the
//! caller's thread in one `poll(2)` loop (no threads) — one program
//! ([`run`]) or several at once ([`run_many`]: the three SMP queries of a
//! port). Here: the run's [`Deadline`] (the group is SIGKILLed when it
//! passes: no grace, the run has its own end to keep), the output cap, the
//! environment the programs get — [`Env::tool`]'s fixed list, nothing of
//! the caller's (squeue reads `SQUEUE_USERS`, `SQUEUE_STATES`, `SLURM_CONF`…
//! as options: an admin's shell must not empty the job list `health`
//! releases levels by) — and nodeio's errors as qoslane's.

use std::path::Path;
use std::process::{ExitStatus, Output};
use std::time::Duration;

use nodeio::child::{self, Ending, Env, Program, Timing};

use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// The most output read from a program (stdout, and stderr each): squeue's
/// QoS line and smpquery's tables are a few kilobytes.
pub const MAX_OUTPUT: u64 = 1 << 20;

/// How long a program SIGKILLed at the deadline may take to die before it
/// is left to the process's own exit (a task stuck in the kernel).
const REAP_WAIT: Duration = Duration::from_millis(200);

/// Runs `program args…` and returns its output when it exits 0.
pub fn run(program: &Path, args: &[&str], deadline: &Deadline) -> Result<Output> {
    run_capped(program, args, MAX_OUTPUT, deadline)
}

/// [`run`] with another output cap than [`MAX_OUTPUT`] (a whole fabric's
/// topology).
pub fn run_capped(program: &Path, args: &[&str], cap: u64, deadline: &Deadline) -> Result<Output> {
    run_many_capped(program, &[args], cap, deadline)
        .pop()
        .unwrap_or_else(|| Err(Error::Internal("no result from exec::run".into())))
}

/// Runs `program` once per argument list, all at once, and returns each
/// one's output (when it exited 0) or error, in order. Every program still
/// running when the deadline passes is killed.
pub fn run_many(program: &Path, argvs: &[&[&str]], deadline: &Deadline) -> Vec<Result<Output>> {
    run_many_capped(program, argvs, MAX_OUTPUT, deadline)
}

/// [`run_many`] with at most `window` programs at once: in rounds of
/// `window` (each round one wait, on the caller's thread), the results in
/// order. For reads of many ports (a switch's, the fabric's), so that a
/// read never floods the fabric's agents (ibsim has 10 client slots; a
/// switch's SMA answers one at a time).
pub fn run_window(
    program: &Path,
    argvs: &[&[&str]],
    window: usize,
    deadline: &Deadline,
) -> Vec<Result<Output>> {
    argvs
        .chunks(window.max(1))
        .flat_map(|round| run_many(program, round, deadline))
        .collect()
}

/// [`run_many`], but a program that exited non-zero gives its output too
/// (`Output::status` says how it exited): for a tool that says on stdout
/// why it failed (`perfquery`'s `iberror: failed: cannot query …`).
pub fn run_many_any_exit(
    program: &Path,
    argvs: &[&[&str]],
    deadline: &Deadline,
) -> Vec<Result<Output>> {
    run_many_with(program, argvs, MAX_OUTPUT, deadline, true)
}

fn run_many_capped(
    program: &Path,
    argvs: &[&[&str]],
    cap: u64,
    deadline: &Deadline,
) -> Vec<Result<Output>> {
    run_many_with(program, argvs, cap, deadline, false)
}

fn run_many_with(
    program: &Path,
    argvs: &[&[&str]],
    cap: u64,
    deadline: &Deadline,
    any_exit: bool,
) -> Vec<Result<Output>> {
    let fail = |detail: String| Error::Program {
        program: program.to_owned(),
        detail,
    };
    if deadline.remaining().is_zero() {
        return argvs
            .iter()
            .map(|_| Err(deadline.passed(format!("run {}", program.display()))))
            .collect();
    }
    let programs: Vec<Program> = argvs
        .iter()
        .map(|args| Program::new(program, Env::tool()).args(args.iter()))
        .collect();
    let timing = Timing {
        deadline: deadline.instant(),
        kill_grace: Duration::ZERO,
        reap_wait: REAP_WAIT,
    };
    let runs = programs
        .iter()
        .map(|p| (p, child::Output::Capture { cap }))
        .collect();
    child::run_many(runs, timing, None)
        .into_iter()
        .zip(argvs)
        .map(|(r, args)| {
            let r = r.map_err(|e| fail(cannot(e)))?;
            match r.ending {
                Ending::Exited(status) if any_exit => Ok(Output {
                    status,
                    stdout: r.stdout,
                    stderr: r.stderr,
                }),
                Ending::Exited(status) => finished(status, r.stdout, r.stderr).map_err(fail),
                Ending::TooLarge => Err(fail(format!(
                    "printed more than {cap} bytes; killed (is it the right program?)"
                ))),
                Ending::TimedOut | Ending::Stuck | Ending::Interrupted => {
                    Err(deadline.passed(format!("{} {}", program.display(), args.join(" "))))
                }
            }
        })
        .collect()
}

/// Why a program could not be run or watched, as a detail of
/// [`Error::Program`] (which names the program).
fn cannot(e: nodeio::Error) -> String {
    match e {
        nodeio::Error::Io {
            op: "run", source, ..
        } => format!("cannot run: {source}"),
        nodeio::Error::Io { op, source, .. } => format!("cannot {op} it: {source}"),
        other => other.to_string(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `run_window` runs at most `window` programs at once and gives the
    /// answers in the order asked: each program marks itself in a directory,
    /// counts the marks, waits a little and leaves.
    #[test]
    fn run_window_keeps_the_order_and_never_runs_more_than_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let script =
            format!("touch {d}/$1; n=$(ls {d} | wc -l); sleep 0.05; rm {d}/$1; echo \"$1 $n\"");
        let names: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        let argvs: Vec<Vec<&str>> = names
            .iter()
            .map(|n| vec!["-c", script.as_str(), "sh", n.as_str()])
            .collect();
        let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
        let deadline = Deadline::after(Duration::from_secs(30));
        let out = run_window(Path::new("/bin/sh"), &refs, 3, &deadline);
        assert_eq!(out.len(), 7);
        for (name, r) in names.iter().zip(out) {
            let text = String::from_utf8(r.unwrap().stdout).unwrap();
            let (said, seen) = text.trim().split_once(' ').unwrap();
            assert_eq!(said, name, "in order");
            let seen: usize = seen.parse().unwrap();
            assert!((1..=3).contains(&seen), "{name} saw {seen} running at once");
        }
    }
}
