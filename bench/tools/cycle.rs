//! The side-by-side driver (bench/cycle.sh builds it with cargo and runs
//! it): whole prolog+epilog cycles of two or more implementations of the
//! same job, interleaved run by run (A then B, then B then A, …; with more
//! sides each cycle starts one side further: A B C, B C A, C A B) so that
//! whatever else the machine does hits all alike. std only, so the driver's
//! own cost per process is small next to what it measures.
//!
//!   cycle N FIRST_JOB NAME_A PROLOG_A EPILOG_A NAME_B PROLOG_B EPILOG_B [NAME PROLOG EPILOG]...
//!
//! Each PROLOG/EPILOG is a command line split on spaces (no shell), leading
//! NAME=VALUE words its own environment variables (as env(1)'s); it runs
//! with the inherited environment plus SLURM_JOB_ID (a new id per cycle) and
//! SLURM_SCRIPT_CONTEXT (prolog_slurmd / epilog_slurmd), stdout and stderr to
//! /dev/null. A cycle is the wall time from the prolog's spawn to the
//! epilog's exit. A non-zero exit stops the run (exit 1: the measurement
//! would not be of the job). Prints one line per cycle: `name cycle_us
//! prolog_us epilog_us`.

#![expect(
    clippy::print_stdout,
    reason = "its one line per cycle on stdout is its output (bench/tools/cycle_report.py reads it)"
)]

use std::process::{Command, Stdio};
use std::time::Instant;

fn run(cmd: &str, job: &str, ctx: &str) -> u128 {
    let mut words = cmd.split(' ').filter(|w| !w.is_empty()).peekable();
    // Leading NAME=VALUE words are the program's environment (as env(1)'s).
    let mut vars = Vec::new();
    while let Some((name, value)) = words.peek().and_then(|w| w.split_once('=')) {
        vars.push((name, value));
        words.next();
    }
    let program = words.next().expect("empty command");
    let t = Instant::now();
    let status = Command::new(program)
        .args(words)
        .envs(vars)
        .env("SLURM_JOB_ID", job)
        .env("SLURM_SCRIPT_CONTEXT", ctx)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let us = t.elapsed().as_micros();
    if !status.success() {
        eprintln!("cycle: `{cmd}` for job {job} exited {status}");
        std::process::exit(1);
    }
    us
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 9 || !(args.len() - 3).is_multiple_of(3) {
        eprintln!(
            "usage: cycle N FIRST_JOB NAME_A PROLOG_A EPILOG_A NAME_B PROLOG_B EPILOG_B [NAME PROLOG EPILOG]..."
        );
        std::process::exit(64);
    }
    let n: u64 = args[1].parse().expect("N");
    let first: u64 = args[2].parse().expect("FIRST_JOB");
    let sides: Vec<(&String, &String, &String)> =
        args[3..].chunks(3).map(|s| (&s[0], &s[1], &s[2])).collect();
    let count = sides.len() as u64;
    for i in 0..n {
        for k in 0..count {
            let (name, prolog, epilog) = sides[usize::try_from((i + k) % count).expect("index")];
            let job = (first + count * i + k).to_string();
            let p = run(prolog, &job, "prolog_slurmd");
            let e = run(epilog, &job, "epilog_slurmd");
            println!("{name} {} {p} {e}", p + e);
        }
    }
}
