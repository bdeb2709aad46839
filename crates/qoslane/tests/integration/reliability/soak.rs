//! The concurrency soak: randomised rounds of concurrent prologs, epilogs,
//! syncs, recovers, healths and statuses, mapping edits between rounds and,
//! with fault injection, SIGKILLs mixed in; the model's invariants are
//! checked after every round. `QOSLANE_SOAK_SECS` sets its time budget.

use super::*;

/// Rounds of up to seven concurrent runs (Prologs and Epilogs of different
/// jobs, reruns, orphan and double Epilogs, sync, recover, health, status),
/// with mapping edits between rounds and, with fault injection, SIGKILLs at
/// random transaction points. After every round: the settings are the
/// highest active level's per path (the model's, not qoslane's), the
/// baseline is exactly what active jobs need and empty when idle, the
/// records are the model's jobs, one audit line per completed run, no
/// journal, no stray file, no held lock.
#[test]
fn concurrency_soak() {
    let mut rng = Rng::from_env("soak");
    let limit = budget(20);
    let n = reliability_node(0);
    let mut variant = 0u8;
    let mut active: BTreeMap<u32, Want> = BTreeMap::new();
    let mut qos_of: BTreeMap<u32, &'static str> = BTreeMap::new();
    let mut ended: Vec<u32> = Vec::new();
    let mut next_job = 0u32;
    let mut rounds = 0;
    let mut runs = 0;
    let mut kills = 0;
    let mut max_parallel = 0;
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut audited: BTreeMap<&str, usize> = BTreeMap::new();
    let start = Instant::now();
    while start.elapsed() < limit || rounds < 30 {
        rounds += 1;
        if rng.chance(3) {
            variant = 1 - variant;
            n.write_mapping(&mapping_yaml(&levels(variant)));
        }
        let lv = levels(variant);
        let ops = draw_round(&mut rng, &active, &qos_of, &ended, &mut next_job);
        max_parallel = max_parallel.max(ops.len());
        let faults = draw_faults(&mut rng, &ops);
        let outs = run_round(&n, &ops, &faults);
        let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
        let mut round_kills = 0;
        // Apply the round to the model. Runs of different jobs commute; a
        // sync re-plans every running job to the mapping in force; a run
        // killed before its commit changed nothing.
        let synced = sync_took_effect(&ops, &faults, &outs);
        for ((op, f), out) in ops.iter().zip(&faults).zip(&outs) {
            *by_kind.entry(op.event()).or_default() += 1;
            runs += 1;
            let took_effect = if killed(out) {
                kills += 1;
                round_kills += 1;
                *f == Some("committed")
            } else {
                *completed.entry(op.event()).or_default() += 1;
                // health and status exit 1 when something needs attention
                // (a killed run's journal, a setting out of sync).
                let allowed: &[i32] = match op {
                    Op::Health | Op::Status => &[0, 1],
                    _ => &[0],
                };
                assert!(
                    out.status.code().is_some_and(|c| allowed.contains(&c)),
                    "round {rounds}: {op:?}: {}",
                    show(out)
                );
                true
            };
            if !took_effect {
                continue;
            }
            match op {
                Op::Prolog(j, q) => {
                    active.insert(*j, Want::of(&lv, q));
                    qos_of.insert(*j, q);
                }
                Op::Epilog(j) if active.remove(j).is_some() => ended.push(*j),
                _ => {}
            }
        }
        if synced {
            for (j, w) in &mut active {
                *w = Want::of(&lv, qos_of[j]);
            }
        }
        if round_kills > 0 {
            // The next run of anything undoes a killed transaction.
            ok(&Op::Recover.run(&n, &[]));
            *completed.entry("recover").or_default() += 1;
            runs += 1;
        }
        let bad = inconsistencies(&n, &active);
        assert!(
            bad.is_empty(),
            "round {rounds} ({ops:?}, faults {faults:?}): {bad:?}\n{}",
            outs.iter().map(show).collect::<Vec<_>>().join("\n")
        );
        // One audit line per completed run (recover lines come also for
        // undone journals, mapping_changed lines for edits).
        let lines = n.audit();
        for ev in ["prolog", "epilog", "sync", "health"] {
            let want = audited.entry(ev).or_default();
            *want += completed.get(ev).copied().unwrap_or(0);
            let got = lines.iter().filter(|e| e["event"] == ev).count();
            assert_eq!(got, *want, "round {rounds}: {ev} audit lines");
        }
    }
    // Every job ends.
    for j in active.keys().copied().collect::<Vec<_>>() {
        ok(&Op::Epilog(j).run(&n, &[]));
        active.remove(&j);
    }
    let bad = inconsistencies(&n, &active);
    assert!(bad.is_empty(), "at the end: {bad:?}");
    eprintln!(
        "soak: {rounds} rounds, {runs} runs ({by_kind:?}), up to {max_parallel} concurrent, \
         {kills} killed by fault injection, {} jobs, in {:.1} s; invariants held after every round",
        next_job,
        start.elapsed().as_secs_f64()
    );
}

/// Whether a sync of the round took effect: it completed, or was killed
/// after its commit.
fn sync_took_effect(ops: &[Op], faults: &[Option<&'static str>], outs: &[Output]) -> bool {
    ops.iter()
        .zip(outs)
        .any(|(op, o)| *op == Op::Sync && !killed(o))
        || ops
            .iter()
            .zip(faults)
            .zip(outs)
            .any(|((op, f), o)| *op == Op::Sync && killed(o) && *f == Some("committed"))
}

/// One round's runs: distinct jobs, at most one sync (new jobs numbered
/// from `next_job`).
fn draw_round(
    rng: &mut Rng,
    active: &BTreeMap<u32, Want>,
    qos_of: &BTreeMap<u32, &'static str>,
    ended: &[u32],
    next_job: &mut u32,
) -> Vec<Op> {
    let k = 1 + rng.index(7);
    let mut ops: Vec<Op> = Vec::new();
    let mut busy: BTreeSet<u32> = BTreeSet::new();
    for _ in 0..k {
        let idle: Vec<u32> = active
            .keys()
            .copied()
            .filter(|j| !busy.contains(j))
            .collect();
        let op = match rng.below(100) {
            0..=39 => {
                *next_job += 1;
                Op::Prolog(*next_job, rng.qos())
            }
            40..=74 if !idle.is_empty() => Op::Epilog(*rng.pick(&idle)),
            75..=79 if !idle.is_empty() => {
                let j = *rng.pick(&idle);
                Op::Prolog(j, qos_of[&j])
            }
            80..=84 => {
                // A double Epilog, or one for a job that never ran here.
                match ended.iter().copied().find(|j| !busy.contains(j)) {
                    Some(j) if rng.chance(50) => Op::Epilog(j),
                    _ => {
                        Op::Epilog(1_000_000 + u32::try_from(rng.below(1000)).expect("below 1000"))
                    }
                }
            }
            85..=89 if !ops.contains(&Op::Sync) => Op::Sync,
            90..=93 => Op::Status,
            94..=96 => Op::Health,
            _ => Op::Recover,
        };
        if let Op::Prolog(j, _) | Op::Epilog(j) = op
            && !busy.insert(j)
        {
            continue;
        }
        ops.push(op);
    }
    ops
}

/// The fault point each run of a round is killed at, if any (fault
/// injection builds only; a Prolog, an Epilog or a sync).
fn draw_faults(rng: &mut Rng, ops: &[Op]) -> Vec<Option<&'static str>> {
    ops.iter()
        .map(|op| {
            let faultable = matches!(op, Op::Prolog(..) | Op::Epilog(_) | Op::Sync);
            (cfg!(feature = "fault-injection") && faultable && rng.chance(8))
                .then(|| *rng.pick(&POINTS_FOR_SOAK))
        })
        .collect()
}

/// Starts a round's runs at once and waits for them all.
fn run_round(n: &Node, ops: &[Op], faults: &[Option<&'static str>]) -> Vec<Output> {
    let children: Vec<_> = ops
        .iter()
        .zip(faults)
        .map(|(op, f)| {
            let env: Vec<(&str, &str)> = f.iter().map(|f| ("QOSLANE_FAULT", *f)).collect();
            op.cmd(n, &env).spawn().unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| crate::util::output_of(c, "a soak run"))
        .collect()
}

/// Fault points the soak draws from (fault injection builds only).
const POINTS_FOR_SOAK: [&str; 7] = [
    "locked",
    "journaled",
    "applied:0",
    "applied:1",
    "verified",
    "recorded",
    "committed",
];
