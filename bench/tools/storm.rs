//! The storm driver (bench/tools/storm.py runs it and checks what it did):
//! N threads behind one barrier, each the Prolog then the Epilog of its own
//! job, as slurmd starts them when N jobs land on a node at once. Written in
//! Rust with std only (bench/run.sh builds it with cargo) so that the
//! driver's own cost per process is small next to what it measures; a
//! Python driver spent ~0.5 s of a 2 s storm spawning.
//!
//!   storm QOSLANE N FIRST_JOB VIA QOS...
//!
//! VIA `env`: the QoS in SLURM_JOB_QOS (Slurm 26.05+); `squeue`: the
//! fixture squeue's answer for the job, `QOSLANE_SQUEUE.JOB.env` beside it
//! (qoslane runs squeue with an environment of its own, so the answer is a
//! file; bench/lib.sh makes QOSLANE_SQUEUE a symlink in the node's root),
//! written before the barrier (22.05-25.11). The rest of the environment is
//! inherited. Prints one line per job:
//! `job t_start_us t_prolog_end_us t_epilog_end_us prolog_exit epilog_exit
//! stderr_bytes` (times from the barrier), then each non-empty stderr.

#![expect(
    clippy::print_stdout,
    reason = "its one line per job on stdout is its output (bench/tools/storm.py reads it)"
)]

use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: storm QOSLANE N FIRST_JOB env|squeue QOS...");
        std::process::exit(64);
    }
    let qoslane = args[1].clone();
    let n: usize = args[2].parse().expect("N");
    let first: u64 = args[3].parse().expect("FIRST_JOB");
    let via = args[4].clone();
    let qos: Vec<String> = args[5..].to_vec();
    if via == "squeue" {
        let squeue = std::env::var("QOSLANE_SQUEUE").expect("QOSLANE_SQUEUE (bench/lib.sh)");
        for i in 0..n {
            let job = first + i as u64;
            let answer = format!("export FAKE_QOS='{}'\n", qos[i % qos.len()]);
            std::fs::write(format!("{squeue}.{job}.env"), answer).expect("write the squeue answer");
        }
    }
    let barrier = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::with_capacity(n);
    let start = Arc::new(std::sync::OnceLock::<Instant>::new());
    for i in 0..n {
        let (qoslane, via, barrier, start) =
            (qoslane.clone(), via.clone(), barrier.clone(), start.clone());
        let q = qos[i % qos.len()].clone();
        let job = (first + i as u64).to_string();
        handles.push(
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || {
                    let run = |hook: &str| {
                        let mut c = Command::new(&qoslane);
                        c.arg(hook)
                            .env("SLURM_JOB_ID", &job)
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::piped());
                        if via == "env" {
                            let ctx = if hook == "prolog" {
                                "prolog_slurmd"
                            } else {
                                "epilog_slurmd"
                            };
                            c.env("SLURM_SCRIPT_CONTEXT", ctx).env("SLURM_JOB_QOS", &q);
                        } else {
                            c.env_remove("SLURM_SCRIPT_CONTEXT")
                                .env_remove("SLURM_JOB_QOS");
                        }
                        let out = c.output().expect("spawn qoslane");
                        (out.status.code().unwrap_or(-1), out.stderr)
                    };
                    barrier.wait();
                    let t0 = start.get_or_init(Instant::now);
                    let s = t0.elapsed().as_micros();
                    let (pc, mut perr) = run("prolog");
                    let p = t0.elapsed().as_micros();
                    let (ec, eerr) = run("epilog");
                    let e = t0.elapsed().as_micros();
                    perr.extend_from_slice(&eerr);
                    (job, s, p, e, pc, ec, perr)
                })
                .expect("thread"),
        );
    }
    barrier.wait();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("join"))
        .collect();
    for (job, s, p, e, pc, ec, err) in &results {
        println!("{job} {s} {p} {e} {pc} {ec} {}", err.len());
    }
    for (job, .., err) in &results {
        if !err.is_empty() {
            println!(
                "stderr {job}: {}",
                String::from_utf8_lossy(err).replace('\n', " | ")
            );
        }
    }
}
