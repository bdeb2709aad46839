//! Timeouts: Slurm's PrologEpilogTimeout (SIGTERM, SIGKILL 10 ms later) at
//! random moments of prologs, epilogs and syncs; once any later run completes
//! the node matches its job records exactly. (Deadlines inside a run — a hung
//! scontrol, smpquery or setting write, a held lock — are in `dependencies`.)

use super::*;

/// Slurm's PrologEpilogTimeout: SIGTERM to the hook, SIGKILL about 10 ms
/// later, at random moments of prologs, epilogs and syncs. After every run
/// that completes (the next job's Prolog, the Epilog, a sync, recover) the
/// node must match its job records exactly: settings = highest active
/// level per path, baseline when idle, no journal, no stray file. Prints the
/// seed, the iterations and where the signals landed.
#[test]
fn slurm_timeout_kill_at_random_moments() {
    let mut rng = Rng::from_env("timeout harness");
    let limit = budget(12);
    let lv = levels(0);
    let n = reliability_node(0);

    // Calibrate: how long a run takes here, so the signals land across it.
    let t = Instant::now();
    for j in 1..=5 {
        ok(&Op::Prolog(j, "mission-critical").run(&n, &[]));
        ok(&Op::Epilog(j).run(&n, &[]));
    }
    let typical = t.elapsed() / 10;
    let window = u64::try_from((typical * 3 / 2).as_micros().max(1000)).unwrap_or(u64::MAX);

    let mut next_job = 100;
    // Jobs whose Prolog ran (maybe killed) and whose Epilog has not completed.
    let mut started: Vec<u32> = Vec::new();
    let mut landed: BTreeMap<&str, usize> = BTreeMap::new();
    let mut iterations = 0;
    let mut checks = 0;
    let start = Instant::now();
    while start.elapsed() < limit || iterations < 200 {
        iterations += 1;
        let op = match rng.below(10) {
            0..=4 => {
                next_job += 1;
                started.push(next_job);
                Op::Prolog(next_job, rng.qos())
            }
            5..=8 if !started.is_empty() => {
                let i = rng.index(started.len());
                Op::Epilog(started[i])
            }
            _ => Op::Sync,
        };
        let kill = rng.chance(70);
        let pending = n.journal_exists();
        let out = if kill {
            let child = op.cmd(&n, &[]).spawn().unwrap();
            let pid = rustix::process::Pid::from_child(&child);
            std::thread::sleep(Duration::from_micros(rng.below(window)));
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            std::thread::sleep(Duration::from_millis(10));
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            crate::util::output_of(child, "a killed run")
        } else {
            op.run(&n, &[])
        };
        if killed(&out) {
            // Where did it land? Judge by what the kill left behind.
            let snap = n.snapshot(&PATHS);
            let place = if snap.journal {
                "mid-transaction (journal left)"
            } else if !n.stray_files().is_empty() {
                "inside an atomic write (temp file left)"
            } else {
                "outside a transaction (nothing to undo)"
            };
            *landed.entry(place).or_default() += 1;
            if pending {
                // This run started with an earlier kill's journal to undo.
                *landed
                    .entry("of which started with a journal to undo")
                    .or_default() += 1;
            }
            continue;
        }
        if kill {
            *landed.entry("after the run completed").or_default() += 1;
        }
        assert!(out.status.success(), "{op:?}: {}", show(&out));
        if let Op::Epilog(j) = op {
            started.retain(|&s| s != j);
        }
        // A run completed: the node is consistent with its records, and the
        // records are jobs that were started and not ended.
        let active = active_from_records(&n);
        for job in active.keys() {
            assert!(
                started.contains(job),
                "record for job {job}, which was never started or has ended"
            );
        }
        for (job, w) in &active {
            let qos_rank = w.rank;
            assert!(qos_rank < lv.len(), "job {job}: rank {qos_rank}");
        }
        let bad = inconsistencies(&n, &active);
        assert!(
            bad.is_empty(),
            "after {op:?} (iteration {iterations}): {bad:?}\n{}",
            show(&out)
        );
        checks += 1;
    }
    // The end of every job: Slurm runs each Epilog.
    for j in std::mem::take(&mut started) {
        ok(&Op::Epilog(j).run(&n, &[]));
    }
    let bad = inconsistencies(&n, &BTreeMap::new());
    assert!(bad.is_empty(), "at the end: {bad:?}");
    eprintln!(
        "timeout harness: {iterations} runs in {:.1} s (typical run {:.1} ms, signal window 0..{:.1} ms, \
         SIGTERM then SIGKILL 10 ms later on 70%); signals landed: {landed:?}; \
         node consistent after all {checks} completed runs",
        start.elapsed().as_secs_f64(),
        typical.as_secs_f64() * 1e3,
        window as f64 / 1e3,
    );
}
