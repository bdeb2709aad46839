//! Reliability, issue 8: what happens to a node when qoslane is killed, times
//! out, runs concurrently with itself, or meets a failing dependency. Every
//! test runs the real binary on a temp root (`util`) and checks the node
//! against an independent model, not against qoslane's own planner.
//!
//! - `crash_matrix`: SIGKILL at each transaction point of prologs, epilogs and
//!   syncs in several shared-node states → the next run (recover, health, an
//!   orphan Epilog, sync) restores exactly the pre-transaction state. Needs
//!   `--features fault-injection`.
//! - `slurm_timeout_kill_at_random_moments`: Slurm's PrologEpilogTimeout
//!   (SIGTERM, SIGKILL 10 ms later) at random moments → once any later run
//!   completes the node matches its job records exactly.
//! - `concurrency_soak`: randomised concurrent prolog/epilog/sync rounds with
//!   invariants after every round (and, with fault injection, crashes mixed in).
//! - `fault_*`: every external dependency failing in each way it can.
//!
//! Figures: run with `-- --nocapture` to see the tables docs/RELIABILITY.md
//! quotes. Knobs: `QOSLANE_SEED` (the random seed; printed by every
//! randomised test), `QOSLANE_SOAK_SECS` (time budget of the soak and of the
//! timeout harness each; default 20 and 12 — CI stays well under 60 s).

#![expect(clippy::unwrap_used, reason = "a failing test should stop loudly")]

use crate::util;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::util::{Mount, Node, RMEM, TOS, ok, stderr};

// ------------------------------------------------------------------ the model

const WMEM: &str = "/proc/sys/net/core/wmem_max";
const PATHS: [&str; 3] = [TOS, RMEM, WMEM];

/// The values before any job: the node's true baseline.
const INITIAL: [(&str, &str); 3] = [(TOS, "0"), (RMEM, "212992"), (WMEM, "212992")];

fn initial() -> BTreeMap<String, String> {
    INITIAL
        .iter()
        .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
        .collect()
}

/// One level of the test mapping; the mapping text is generated from these,
/// so the model and the file cannot disagree.
#[derive(Clone, Debug)]
struct Level {
    name: &'static str,
    qos: &'static [&'static str],
    sl: u8,
    fail_job: bool,
    settings: Vec<(&'static str, &'static str)>,
}

/// Five levels over three settings, overlapping so that on a shared node
/// each path can be owned by a different job. Variant 1 changes some values
/// (a mapping edit that `sync` must apply to running jobs).
fn levels(variant: u8) -> Vec<Level> {
    let v = |a: &'static str, b: &'static str| if variant == 0 { a } else { b };
    vec![
        Level {
            name: "mission-critical",
            qos: &["mission-critical"],
            sl: 3,
            fail_job: true,
            settings: vec![
                (TOS, "106"),
                (RMEM, "16777216"),
                (WMEM, v("16777216", "8388608")),
            ],
        },
        Level {
            name: "high",
            qos: &["high"],
            sl: 2,
            fail_job: false,
            settings: vec![(TOS, v("74", "90")), (RMEM, "8388608")],
        },
        Level {
            name: "normal",
            qos: &["normal"],
            sl: 0,
            fail_job: false,
            settings: vec![],
        },
        Level {
            name: "low",
            qos: &["low", "standby"],
            sl: 1,
            fail_job: false,
            settings: vec![(RMEM, "1048576"), (WMEM, v("4194304", "2097152"))],
        },
        Level {
            name: "bulk",
            qos: &["bulk"],
            sl: 4,
            fail_job: false,
            settings: vec![(TOS, v("32", "40"))],
        },
    ]
}

fn mapping_yaml(levels: &[Level]) -> String {
    let mut s =
        String::from("default_level: normal\nfabric_check: off\non_failure: continue\nlevels:\n");
    for l in levels {
        s.push_str(&format!(
            "  - name: {}\n    qos: [{}]\n    service_level: {}\n",
            l.name,
            l.qos.join(", "),
            l.sl
        ));
        if l.fail_job {
            s.push_str("    on_failure: fail_job\n");
        }
        if !l.settings.is_empty() {
            s.push_str("    node_settings:\n");
            for (p, v) in &l.settings {
                s.push_str(&format!("      - path: {p}\n        value: \"{v}\"\n"));
            }
        }
    }
    s
}

/// The level (index = rank) a QoS gets; unknown QoS → the default, `normal`.
fn rank_of(levels: &[Level], qos: &str) -> usize {
    levels
        .iter()
        .position(|l| l.qos.contains(&qos))
        .unwrap_or_else(|| levels.iter().position(|l| l.name == "normal").unwrap())
}

/// What an active job asks of the node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Want {
    rank: usize,
    settings: Vec<(String, String)>,
}

impl Want {
    fn of(levels: &[Level], qos: &str) -> Self {
        let rank = rank_of(levels, qos);
        Self {
            rank,
            settings: levels[rank]
                .settings
                .iter()
                .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }
}

/// The settings a set of active jobs must leave on the node: per path, the
/// value of the highest-priority job (lowest rank, then oldest job id) that
/// sets it, else the initial value. Written independently of `txn::desired`.
fn expected_settings(active: &BTreeMap<u32, Want>) -> BTreeMap<String, String> {
    let mut out = initial();
    for path in PATHS {
        let best = active
            .iter()
            .filter_map(|(job, w)| {
                w.settings
                    .iter()
                    .find(|(p, _)| p == path)
                    .map(|(_, v)| (w.rank, *job, v))
            })
            .min();
        if let Some((_, _, v)) = best {
            out.insert(path.to_owned(), v.clone());
        }
    }
    out
}

/// The baseline qoslane must remember: the initial value of every path an
/// active job sets, nothing else.
fn expected_baseline(active: &BTreeMap<u32, Want>) -> BTreeMap<String, String> {
    let init = initial();
    active
        .values()
        .flat_map(|w| w.settings.iter().map(|(p, _)| p.clone()))
        .map(|p| {
            let v = init[&p].clone();
            (p, v)
        })
        .collect()
}

/// The active set as the records on disk say (for runs whose fate is not
/// known, e.g. killed at a random moment).
fn active_from_records(n: &Node) -> BTreeMap<u32, Want> {
    n.snapshot(&PATHS)
        .records
        .values()
        .map(|r| {
            let job = u32::try_from(r["job_id"].as_u64().unwrap()).unwrap();
            let settings = r["settings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pv| {
                    (
                        pv[0].as_str().unwrap().to_owned(),
                        pv[1].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            let rank = usize::try_from(r["rank"].as_u64().unwrap()).unwrap();
            (job, Want { rank, settings })
        })
        .collect()
}

/// The node is consistent with `active`: settings, baseline, records; no
/// journal, no stray temp file, the lock free. Returns what is wrong.
fn inconsistencies(n: &Node, active: &BTreeMap<u32, Want>) -> Vec<String> {
    let mut bad = Vec::new();
    let snap = n.snapshot(&PATHS);
    let want = expected_settings(active);
    if snap.settings != want {
        bad.push(format!("settings {:?}, want {want:?}", snap.settings));
    }
    let base = expected_baseline(active);
    if snap.baseline != base {
        bad.push(format!("baseline {:?}, want {base:?}", snap.baseline));
    }
    let on_disk: BTreeSet<String> = snap.records.keys().cloned().collect();
    let model: BTreeSet<String> = active.keys().map(|j| format!("{j}.json")).collect();
    if on_disk != model {
        bad.push(format!("records {on_disk:?}, want {model:?}"));
    }
    if snap.journal {
        bad.push("a journal is pending".into());
    }
    let strays = n.stray_files();
    if !strays.is_empty() {
        bad.push(format!("stray files {strays:?}"));
    }
    if !lock_is_free(n) {
        bad.push("the node lock is held".into());
    }
    bad
}

fn lock_is_free(n: &Node) -> bool {
    use rustix::fs::{FlockOperation, flock};
    let Ok(f) = std::fs::File::open(n.path("/run/qoslane/lock")) else {
        return true;
    };
    let free = flock(&f, FlockOperation::NonBlockingLockExclusive).is_ok();
    let _ = flock(&f, FlockOperation::Unlock);
    free
}

fn reliability_node(variant: u8) -> Node {
    let n = Node::with_mapping(&mapping_yaml(&levels(variant)));
    for (p, v) in INITIAL {
        n.set(p, v);
    }
    n
}

/// A small, seedable generator (SplitMix64): the seed is printed so that a
/// failing run can be replayed with `QOSLANE_SEED`.
struct Rng(u64);

impl Rng {
    fn from_env(test: &str) -> Self {
        let seed = std::env::var("QOSLANE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{test}: seed {seed} (replay with QOSLANE_SEED={seed})");
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn qos(&mut self) -> &'static str {
        QOS[self.below(QOS.len() as u64) as usize]
    }
}

fn budget(default_secs: u64) -> Duration {
    Duration::from_secs(
        std::env::var("QOSLANE_SOAK_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default_secs),
    )
}

/// The QoS names jobs ask for: every level, an unknown one, and `(null)`
/// (accounting off) — the last two get the default level.
const QOS: [&str; 8] = [
    "mission-critical",
    "high",
    "normal",
    "low",
    "standby",
    "bulk",
    "scavenger",
    "(null)",
];

/// One qoslane run as Slurm or an admin would start it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Prolog(u32, &'static str),
    Epilog(u32),
    Sync,
    Recover,
    Health,
    Status,
}

impl Op {
    fn cmd(&self, n: &Node, extra: &[(&str, &str)]) -> std::process::Command {
        let mut env: Vec<(String, String)> = extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let args: &[&str] = match self {
            Op::Prolog(job, qos) => {
                env.push(("SLURM_JOB_ID".into(), job.to_string()));
                env.push(("SLURM_JOB_USER".into(), "alice".into()));
                env.push(("FAKE_QOS".into(), (*qos).to_owned()));
                &["prolog"]
            }
            Op::Epilog(job) => {
                env.push(("SLURM_JOB_ID".into(), job.to_string()));
                &["epilog"]
            }
            Op::Sync => &["sync"],
            Op::Recover => &["recover"],
            Op::Health => &["health"],
            Op::Status => &["status", "--json"],
        };
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut c = n.cmd(args, &env);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    }

    fn run(&self, n: &Node, extra: &[(&str, &str)]) -> Output {
        self.cmd(n, extra).output().unwrap()
    }

    fn event(&self) -> &'static str {
        match self {
            Op::Prolog(..) => "prolog",
            Op::Epilog(_) => "epilog",
            Op::Sync => "sync",
            Op::Recover => "recover",
            Op::Health => "health",
            Op::Status => "status",
        }
    }

    #[cfg_attr(
        not(feature = "fault-injection"),
        expect(dead_code, reason = "the crash matrix needs fault injection")
    )]
    fn short(&self) -> String {
        match self {
            Op::Prolog(j, q) => format!("prolog {j} {q}"),
            Op::Epilog(j) => format!("epilog {j}"),
            other => other.event().to_owned(),
        }
    }
}

fn killed(out: &Output) -> bool {
    out.status.signal().is_some()
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    )
}

// ------------------------------------------------------------ crash matrix

/// The points of the transaction where fault injection SIGKILLs (fault.rs).
#[cfg(feature = "fault-injection")]
const POINTS: [&str; 9] = [
    "locked",
    "journaled",
    "applied:0",
    "applied:1",
    "applied:2",
    "verified",
    "recorded",
    "node_state",
    "committed",
];

#[cfg(feature = "fault-injection")]
mod crash {
    use super::*;

    /// One row of the matrix: a node state, the run that gets killed, and
    /// what Slurm (or the admin) does afterwards to finish the story.
    pub struct Scenario {
        pub name: &'static str,
        pub setup: Vec<Op>,
        /// Mapping variant written after the setup (a sync scenario's edit).
        pub edit: Option<u8>,
        pub faulted: Op,
        /// Setting changes the transaction makes (from the model).
        pub changes: usize,
        /// Whether the run has a transaction at all (a journal).
        pub txn: bool,
        /// After the recovery: the runs that end every job (the node must
        /// be back on its initial values).
        pub story: Vec<Op>,
    }

    pub fn scenarios() -> Vec<Scenario> {
        use Op::*;
        vec![
            Scenario {
                name: "prolog mission-critical, idle node",
                setup: vec![],
                edit: None,
                faulted: Prolog(10, "mission-critical"),
                changes: 3,
                txn: true,
                story: vec![Epilog(10)],
            },
            Scenario {
                name: "prolog high, low running",
                setup: vec![Prolog(1, "low")],
                edit: None,
                faulted: Prolog(10, "high"),
                changes: 2,
                txn: true,
                story: vec![Epilog(10), Epilog(1)],
            },
            Scenario {
                name: "prolog mission-critical, low+bulk running",
                setup: vec![Prolog(1, "low"), Prolog(2, "bulk")],
                edit: None,
                faulted: Prolog(10, "mission-critical"),
                changes: 3,
                txn: true,
                story: vec![Epilog(2), Epilog(10), Epilog(1)],
            },
            Scenario {
                name: "prolog low, mission-critical running",
                setup: vec![Prolog(1, "mission-critical")],
                edit: None,
                faulted: Prolog(10, "low"),
                changes: 0,
                txn: true,
                story: vec![Epilog(1), Epilog(10)],
            },
            Scenario {
                name: "prolog normal (no settings), idle node",
                setup: vec![],
                edit: None,
                faulted: Prolog(10, "normal"),
                changes: 0,
                txn: true,
                story: vec![Epilog(10)],
            },
            Scenario {
                name: "prolog rerun, same job (no-op)",
                setup: vec![Prolog(10, "high")],
                edit: None,
                faulted: Prolog(10, "high"),
                changes: 0,
                txn: false,
                story: vec![Epilog(10)],
            },
            Scenario {
                name: "epilog mission-critical, last job",
                setup: vec![Prolog(10, "mission-critical")],
                edit: None,
                faulted: Epilog(10),
                changes: 3,
                txn: true,
                story: vec![Epilog(10)],
            },
            Scenario {
                name: "epilog mission-critical, low running",
                setup: vec![Prolog(1, "low"), Prolog(10, "mission-critical")],
                edit: None,
                faulted: Epilog(10),
                changes: 3,
                txn: true,
                story: vec![Epilog(10), Epilog(1)],
            },
            Scenario {
                name: "epilog low, mission-critical running",
                setup: vec![Prolog(1, "mission-critical"), Prolog(10, "low")],
                edit: None,
                faulted: Epilog(10),
                changes: 0,
                txn: true,
                story: vec![Epilog(10), Epilog(1)],
            },
            Scenario {
                name: "epilog high, bulk+low running",
                setup: vec![Prolog(1, "bulk"), Prolog(2, "low"), Prolog(10, "high")],
                edit: None,
                faulted: Epilog(10),
                changes: 2,
                txn: true,
                story: vec![Epilog(10), Epilog(1), Epilog(2)],
            },
            Scenario {
                name: "epilog, job never started (orphan)",
                setup: vec![Prolog(1, "high")],
                edit: None,
                faulted: Epilog(10),
                changes: 0,
                txn: false,
                story: vec![Epilog(1)],
            },
            Scenario {
                name: "sync, edited mapping, high+low running",
                setup: vec![Prolog(1, "high"), Prolog(2, "low")],
                edit: Some(1),
                faulted: Sync,
                changes: 2,
                txn: true,
                story: vec![Sync, Epilog(1), Epilog(2)],
            },
            Scenario {
                name: "sync, edited mapping, mission-critical+bulk",
                setup: vec![Prolog(1, "bulk"), Prolog(2, "mission-critical")],
                edit: Some(1),
                faulted: Sync,
                changes: 1,
                txn: true,
                story: vec![Sync, Epilog(2), Epilog(1)],
            },
            Scenario {
                name: "sync, unchanged mapping (no-op)",
                setup: vec![Prolog(1, "high")],
                edit: None,
                faulted: Sync,
                changes: 0,
                txn: false,
                story: vec![Epilog(1)],
            },
        ]
    }

    impl Scenario {
        pub fn prepare(&self) -> Node {
            let n = reliability_node(0);
            for op in &self.setup {
                let out = op.run(&n, &[]);
                assert!(
                    out.status.success(),
                    "{}: setup {op:?}: {}",
                    self.name,
                    show(&out)
                );
            }
            if let Some(v) = self.edit {
                n.write_mapping(&mapping_yaml(&levels(v)));
            }
            n
        }

        /// Whether a kill at `point` can happen in this run.
        pub fn reaches(&self, point: &str) -> bool {
            match point {
                "locked" => true,
                p => match p.strip_prefix("applied:") {
                    Some(i) => i.parse::<usize>().unwrap() < self.changes,
                    None => self.txn,
                },
            }
        }
    }

    /// The runs that may be the first after a crash, in turn: each must undo
    /// the journal before anything else.
    pub fn next_runs(scenario: &Scenario) -> Vec<Op> {
        let mut v = vec![Op::Recover, Op::Health, Op::Epilog(999)];
        if scenario.faulted != Op::Sync && scenario.edit.is_none() {
            v.push(Op::Sync);
        }
        v
    }
}

/// SIGKILL at every point × every scenario: the next run of anything restores
/// exactly the pre-transaction state (settings, records byte for byte as
/// JSON, baseline), audits one `recover` line when there was a journal, and
/// the rest of the story (Slurm's Epilog, a retried sync) ends on the
/// initial values. A kill after the commit keeps the whole transaction.
#[cfg(feature = "fault-injection")]
#[test]
fn crash_matrix() {
    let scenarios = crash::scenarios();
    let t0 = Instant::now();
    let rows: Vec<(String, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = scenarios
            .iter()
            .map(|sc| s.spawn(move || crash_row(sc)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let cells: usize = rows.iter().map(|(_, c)| c.len()).sum();
    let kills = rows
        .iter()
        .flat_map(|(_, c)| c)
        .filter(|c| !c.starts_with('·'))
        .count();
    let mut table = String::from("\n| scenario (setting changes) |");
    for p in POINTS {
        table.push_str(&format!(" {p} |"));
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(POINTS.len()));
    for (name, row) in &rows {
        table.push_str(&format!("\n| {name} |"));
        for c in row {
            table.push_str(&format!(" {c} |"));
        }
    }
    eprintln!(
        "{table}\n\ncrash matrix: {} scenarios x {} points = {cells} cells, {kills} kills, all \
         recovered as expected, in {:.1} s\nR = killed, pre-transaction state restored exactly \
         by the next run (named); C = killed after the commit, the completed transaction kept; \
         · = point not reached (nothing to do there), the run completed\n",
        rows.len(),
        POINTS.len(),
        t0.elapsed().as_secs_f64()
    );
}

#[cfg(feature = "fault-injection")]
fn crash_row(sc: &crash::Scenario) -> (String, Vec<String>) {
    // The expected post-transaction state, from an identical node without a
    // fault.
    let twin = sc.prepare();
    let out = sc.faulted.run(&twin, &[]);
    assert!(out.status.success(), "{}: twin: {}", sc.name, show(&out));
    let committed = twin.snapshot(&PATHS).timeless();
    let twin_changes = twin.last_audit(sc.faulted.event())["changes"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        twin_changes, sc.changes,
        "{}: the model's change count",
        sc.name
    );

    let runners = crash::next_runs(sc);
    let mut row = Vec::new();
    for (i, point) in POINTS.iter().enumerate() {
        let runner = &runners[i % runners.len()];
        let n = sc.prepare();
        let before = n.snapshot(&PATHS);
        let audit_before = n.audit().len();
        let out = sc.faulted.run(&n, &[("QOSLANE_FAULT", point)]);
        let ctx = format!(
            "{} / kill at {point} / next run {}",
            sc.name,
            runner.short()
        );
        if !sc.reaches(point) {
            assert!(
                out.status.success(),
                "{ctx}: should complete: {}",
                show(&out)
            );
            assert_eq!(n.snapshot(&PATHS).timeless(), committed, "{ctx}");
            row.push("·".to_owned());
            continue;
        }
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{ctx}: not killed: {}",
            show(&out)
        );
        // The killed run wrote no audit line of its own (a mapping_changed
        // line from before its transaction may be there).
        let own = |n: &Node| n.audit_events(sc.faulted.event()).len();
        assert_eq!(own(&n), own(&twin) - 1, "{ctx}: a killed run audited");
        let journaled = !matches!(*point, "locked" | "committed");
        assert_eq!(
            n.journal_exists(),
            journaled,
            "{ctx}: journal after the kill"
        );

        let out = runner.run(&n, &[]);
        assert!(!killed(&out), "{ctx}: {}", show(&out));
        let after = n.snapshot(&PATHS);
        if *point == "committed" {
            assert_eq!(
                after.timeless(),
                committed,
                "{ctx}: completed transaction kept"
            );
        } else {
            assert_eq!(
                after, before,
                "{ctx}: pre-transaction state restored exactly"
            );
        }
        assert!(n.stray_files().is_empty(), "{ctx}: {:?}", n.stray_files());
        let recovers: Vec<_> = n.audit()[audit_before..]
            .iter()
            .filter(|e| e["event"] == "recover")
            .cloned()
            .collect();
        assert_eq!(
            recovers.len(),
            usize::from(journaled || *runner == Op::Recover),
            "{ctx}: one recover line per undone journal: {recovers:?}"
        );
        if journaled {
            assert_eq!(recovers[0]["outcome"], "reverted", "{ctx}");
            assert_eq!(
                recovers[0]["changes"].as_array().unwrap().len(),
                sc.changes,
                "{ctx}: the recover line lists the undone changes"
            );
        }
        if *runner == Op::Health {
            // Health saw the pending journal before undoing it: unhealthy
            // this once, with the reason.
            assert_eq!(
                out.status.code(),
                Some(if journaled { 1 } else { 0 }),
                "{ctx}"
            );
        } else {
            ok(&out);
        }

        // The rest of the story ends every job: the node is on its initial
        // values, nothing left behind.
        for op in &sc.story {
            let out = op.run(&n, &[]);
            assert!(out.status.success(), "{ctx}: story {op:?}: {}", show(&out));
        }
        let bad = inconsistencies(&n, &BTreeMap::new());
        assert!(bad.is_empty(), "{ctx}: after the story: {bad:?}");
        row.push(format!(
            "{} {}",
            if *point == "committed" { "C" } else { "R" },
            runner.short()
        ));
    }
    (format!("{} ({})", sc.name, sc.changes), row)
}

// ------------------------------------------------- Slurm's timeout kill

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
    let window = (typical * 3 / 2).as_micros().max(1000) as u64;

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
                let i = rng.below(started.len() as u64) as usize;
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
            child.wait_with_output().unwrap()
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

// ------------------------------------------------------- concurrency soak

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
        // One round: distinct jobs, at most one sync.
        let k = 1 + rng.below(7) as usize;
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
                    next_job += 1;
                    Op::Prolog(next_job, rng.qos())
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
                        _ => Op::Epilog(1_000_000 + rng.below(1000) as u32),
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
        max_parallel = max_parallel.max(ops.len());
        let faults: Vec<Option<&'static str>> = ops
            .iter()
            .map(|op| {
                let faultable = matches!(op, Op::Prolog(..) | Op::Epilog(_) | Op::Sync);
                (cfg!(feature = "fault-injection") && faultable && rng.chance(8))
                    .then(|| *rng.pick(&POINTS_FOR_SOAK))
            })
            .collect();
        let children: Vec<_> = ops
            .iter()
            .zip(&faults)
            .map(|(op, f)| {
                let env: Vec<(&str, &str)> = f.iter().map(|f| ("QOSLANE_FAULT", *f)).collect();
                op.cmd(&n, &env).spawn().unwrap()
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
        let mut round_kills = 0;
        // Apply the round to the model. Runs of different jobs commute; a
        // sync re-plans every running job to the mapping in force; a run
        // killed before its commit changed nothing.
        let synced = ops
            .iter()
            .zip(&outs)
            .any(|(op, o)| *op == Op::Sync && !killed(o))
            || ops
                .iter()
                .zip(&faults)
                .zip(&outs)
                .any(|((op, f), o)| *op == Op::Sync && killed(o) && *f == Some("committed"));
        for ((op, f), out) in ops.iter().zip(&faults).zip(&outs) {
            *by_kind.entry(op.event()).or_default() += 1;
            runs += 1;
            let took_effect = if killed(out) {
                kills += 1;
                round_kills += 1;
                *f == Some("committed")
            } else {
                *completed.entry(op.event()).or_default() += 1;
                let expect_code = if *op == Op::Health { None } else { Some(0) };
                assert!(
                    expect_code.is_none() || out.status.code() == expect_code,
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
            for (j, w) in active.iter_mut() {
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

/// `qoslane status` (read-only, no lock) beside running Prologs disturbs
/// none of them. Regression: listing the records used to delete every temp
/// file in the jobs directory, a live Prolog's half-written record included;
/// its rename then failed and the Prolog rolled back.
#[test]
fn status_beside_running_prologs_disturbs_nothing() {
    let n = reliability_node(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut statuses = 0;
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut count = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = Op::Status.run(&n, &[]);
                count += 1;
            }
            count
        });
        for j in 1..=80 {
            let out = Op::Prolog(j, "low").run(&n, &[]);
            ok(&out);
            let a = n.last_audit("prolog");
            *outcomes
                .entry(a["outcome"].as_str().unwrap().to_owned())
                .or_default() += 1;
            ok(&Op::Epilog(j).run(&n, &[]));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        statuses = watcher.join().unwrap();
    });
    eprintln!("status beside prologs: {statuses} status runs, prolog outcomes {outcomes:?}");
    assert_eq!(outcomes.get("applied"), Some(&80), "{outcomes:?}");
    assert!(inconsistencies(&n, &BTreeMap::new()).is_empty());
}

// ------------------------------------------------------------ fault matrix
//
// Every external dependency failing in each way it can → the documented
// outcome, a clear message, nothing lost. docs/RELIABILITY.md has the table;
// each test below is a row (or a few).

/// Breaks something on a node.
type Spoil = fn(&Node);
/// Environment variables for a run.
type Env = Vec<(&'static str, String)>;
/// Breaks something on a node with a filesystem of its own (`None`: this
/// machine cannot mount; the case is skipped).
type SpoilMounted = fn(&Node) -> Option<Mount>;

/// The node as before the first job: initial values, no record, no journal.
fn assert_untouched(n: &Node, ctx: &str) {
    let bad = inconsistencies(n, &BTreeMap::new());
    assert!(bad.is_empty(), "{ctx}: {bad:?}");
}

/// The node holds exactly `jobs` (job, QoS) under mapping variant 0.
fn assert_holds(n: &Node, jobs: &[(u32, &str)], ctx: &str) {
    let lv = levels(0);
    let active = jobs.iter().map(|(j, q)| (*j, Want::of(&lv, q))).collect();
    let bad = inconsistencies(n, &active);
    assert!(bad.is_empty(), "{ctx}: {bad:?}");
}

fn audit_of(n: &Node, event: &str) -> serde_json::Value {
    n.last_audit(event)
}

fn error_of(n: &Node, event: &str) -> String {
    audit_of(n, event)["error"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// A Prolog failing before any change: the policy's exit (0 for `continue`,
/// 1 for mission-critical's `fail_job`), audited `failed` with `needle` in
/// the error, the node untouched, no SL exports for the job.
fn assert_prolog_refused(n: &Node, job: u32, qos: &'static str, needle: &str, ctx: &str) {
    let out = Op::Prolog(job, qos).run(n, &[]);
    let code = if qos == "mission-critical" { 1 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{ctx}: {}", show(&out));
    let a = audit_of(n, "prolog");
    assert_eq!(a["outcome"], "failed", "{ctx}: {a}");
    assert!(error_of(n, "prolog").contains(needle), "{ctx}: {a}");
    assert!(stderr(&out).contains(needle), "{ctx}: {}", stderr(&out));
    assert!(
        n.task_prolog(job, &[]).stdout.is_empty(),
        "{ctx}: exports for a refused job"
    );
}

// --- node settings files

#[test]
fn fault_setting_file_missing_or_not_a_file_or_a_symlink() {
    // Missing (a driver not loaded), a directory, a symlink (refused: a
    // setting is never written through a link; /dev/full included).
    let cases: [(&str, Spoil); 4] = [
        ("missing", |n| std::fs::remove_file(n.path(WMEM)).unwrap()),
        ("a directory", |n| {
            std::fs::remove_file(n.path(WMEM)).unwrap();
            std::fs::create_dir(n.path(WMEM)).unwrap();
        }),
        ("a symlink to a file", |n| {
            std::fs::write(n.root().join("elsewhere"), "212992\n").unwrap();
            std::fs::remove_file(n.path(WMEM)).unwrap();
            std::os::unix::fs::symlink(n.root().join("elsewhere"), n.path(WMEM)).unwrap();
        }),
        ("a symlink to /dev/full", |n| {
            std::fs::remove_file(n.path(WMEM)).unwrap();
            std::os::unix::fs::symlink("/dev/full", n.path(WMEM)).unwrap();
        }),
    ];
    for (what, break_it) in cases {
        for qos in ["low", "mission-critical"] {
            let n = reliability_node(0);
            break_it(&n);
            let ctx = format!("wmem_max {what}, {qos}");
            let out = Op::Prolog(1, qos).run(&n, &[]);
            let code = if qos == "mission-critical" { 1 } else { 0 };
            assert_eq!(out.status.code(), Some(code), "{ctx}: {}", show(&out));
            let a = audit_of(&n, "prolog");
            assert_eq!(a["outcome"], "failed", "{ctx}: {a}");
            assert!(error_of(&n, "prolog").contains("wmem_max"), "{ctx}: {a}");
            assert_eq!(n.get(TOS), "0", "{ctx}");
            assert_eq!(n.get(RMEM), "212992", "{ctx}");
            assert!(n.records().is_empty(), "{ctx}");
            assert!(!n.journal_exists(), "{ctx}");
            if what == "a symlink to a file" {
                assert_eq!(
                    std::fs::read_to_string(n.root().join("elsewhere")).unwrap(),
                    "212992\n",
                    "{ctx}: written through a symlink"
                );
            }
        }
    }
}

#[cfg(feature = "fault-injection")]
#[test]
fn fault_setting_write_eio_rolls_back_prolog_and_epilog() {
    // Prolog: rmem_max is written first, wmem_max fails with EIO.
    let n = reliability_node(0);
    let out = Op::Prolog(1, "low").run(&n, &[("QOSLANE_FAULT", "write-error:wmem_max")]);
    ok(&out);
    let a = audit_of(&n, "prolog");
    assert_eq!(a["outcome"], "rolled_back", "{a}");
    assert!(error_of(&n, "prolog").contains("Input/output error"), "{a}");
    assert_untouched(&n, "prolog EIO");
    // Epilog of a mission-critical job: wmem_max cannot be restored. The
    // epilog rolls back to the job's values, keeps its record, exits 1
    // (fail_job: Slurm drains the node); a later Epilog finishes the job.
    ok(&Op::Prolog(2, "mission-critical").run(&n, &[]));
    let out = Op::Epilog(2).run(&n, &[("QOSLANE_FAULT", "write-error:wmem_max")]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_eq!(audit_of(&n, "epilog")["outcome"], "rolled_back");
    assert_holds(&n, &[(2, "mission-critical")], "epilog EIO");
    ok(&Op::Epilog(2).run(&n, &[]));
    assert_untouched(&n, "epilog retried");
}

#[cfg(feature = "fault-injection")]
#[test]
fn fault_setting_reads_back_wrong_or_hangs() {
    // Verification fails: rolled back. This fault misreads every read-back,
    // the restore's too, so the restore cannot be proven: the journal stays
    // and the next run (which reads true values) finishes the rollback.
    let n = reliability_node(0);
    ok(&Op::Prolog(1, "high").run(&n, &[("QOSLANE_FAULT", "misread")]));
    assert_eq!(audit_of(&n, "prolog")["outcome"], "rolled_back");
    let err = error_of(&n, "prolog");
    assert!(
        err.contains("read back") && err.contains("journal kept"),
        "{err}"
    );
    assert_eq!(
        n.snapshot(&PATHS).settings,
        initial(),
        "the values are back"
    );
    ok(&Op::Recover.run(&n, &[]));
    assert_untouched(&n, "misread");
    // A hung driver during an Epilog: the run ends at its deadline and rolls
    // back (the hung write never landed, so nothing needs writing back); the
    // job keeps its level and record, the Epilog fails (mission-critical:
    // exit 1, Slurm drains), and the retried Epilog completes.
    ok(&Op::Prolog(2, "mission-critical").run(&n, &[]));
    let t = Instant::now();
    let out = Op::Epilog(2).run(
        &n,
        &[
            ("QOSLANE_FAULT", "hang-write"),
            ("QOSLANE_TIMEOUT_MS", "600"),
        ],
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_eq!(audit_of(&n, "epilog")["outcome"], "rolled_back");
    assert!(
        error_of(&n, "epilog").contains("deadline"),
        "{}",
        show(&out)
    );
    ok(&Op::Recover.run(&n, &[]));
    assert_holds(&n, &[(2, "mission-critical")], "after the failed epilog");
    ok(&Op::Epilog(2).run(&n, &[]));
    assert_untouched(&n, "epilog retried");
}

// --- the audit log

#[test]
fn fault_audit_log_unwritable_never_fails_a_run() {
    let cases: [(&str, SpoilMounted); 3] = [
        ("a directory", |n| {
            std::fs::create_dir_all(n.path("/var/log/qoslane/audit.jsonl")).unwrap();
            None
        }),
        ("a symlink", |n| {
            std::fs::create_dir_all(n.path("/var/log/qoslane")).unwrap();
            std::fs::write(n.root().join("elsewhere.log"), "").unwrap();
            std::os::unix::fs::symlink(
                n.root().join("elsewhere.log"),
                n.path("/var/log/qoslane/audit.jsonl"),
            )
            .unwrap();
            None
        }),
        ("on a full filesystem (ENOSPC)", |n| {
            let m = Mount::tmpfs(&n.path("/var/log/qoslane"), "size=16k,mode=0750")?;
            m.fill();
            Some(m)
        }),
    ];
    for (what, break_it) in cases {
        let n = reliability_node(0);
        let mount = break_it(&n);
        if what.contains("ENOSPC") && mount.is_none() {
            continue;
        }
        let out = Op::Prolog(1, "mission-critical").run(&n, &[]);
        ok(&out);
        assert!(
            stderr(&out).contains("audit: "),
            "audit log {what}: the failure is said on stderr (and the journal): {}",
            stderr(&out)
        );
        assert_holds(&n, &[(1, "mission-critical")], what);
        ok(&Op::Epilog(1).run(&n, &[]));
        assert_untouched(&n, what);
        if what == "a symlink" {
            assert_eq!(
                std::fs::read_to_string(n.root().join("elsewhere.log")).unwrap(),
                "",
                "written through a symlink"
            );
        }
        drop(mount);
    }
}

// --- state directories and files

#[test]
fn fault_run_dir_full_or_read_only() {
    // /run/qoslane full: the journal cannot be written; nothing changes.
    let n = reliability_node(0);
    let Some(m) = Mount::tmpfs(&n.path("/run/qoslane"), "size=16k,mode=0755") else {
        return;
    };
    m.fill();
    assert_prolog_refused(&n, 1, "low", "No space left on device", "run dir full");
    assert_prolog_refused(&n, 2, "mission-critical", "No space left", "run dir full");
    assert_eq!(n.get(RMEM), "212992");
    // Space again: the next job is served.
    std::fs::remove_file(m.path.join(".filler")).unwrap();
    ok(&Op::Prolog(3, "low").run(&n, &[]));
    assert_holds(&n, &[(3, "low")], "space again");
    ok(&Op::Epilog(3).run(&n, &[]));

    // /run/qoslane read-only: nothing can be locked or recorded.
    m.remount("ro");
    assert_prolog_refused(&n, 4, "high", "Read-only file system", "run dir read-only");
    m.remount("rw");
    ok(&Op::Prolog(5, "mission-critical").run(&n, &[]));
    // Read-only under a running job: its Epilog cannot undo anything. The
    // record and settings stay (nothing is half-done) and the Epilog follows
    // the job's level's policy: mission-critical fails, Slurm drains.
    m.remount("ro");
    let out = Op::Epilog(5).run(&n, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("Read-only file system"),
        "{}",
        stderr(&out)
    );
    m.remount("rw");
    assert_holds(&n, &[(5, "mission-critical")], "after the failed epilog");
    ok(&Op::Epilog(5).run(&n, &[]));
    assert_untouched(&n, "epilog retried");
    drop(m);
}

#[test]
fn fault_jobs_dir_full_after_settings_applied_rolls_back() {
    // The journal fits, the settings are applied, the record does not fit:
    // everything is rolled back.
    let n = reliability_node(0);
    std::fs::create_dir_all(n.path("/run/qoslane")).unwrap();
    let Some(m) = Mount::tmpfs(&n.path("/run/qoslane/jobs"), "size=16k,mode=0755") else {
        return;
    };
    m.fill();
    let out = Op::Prolog(1, "low").run(&n, &[]);
    ok(&out);
    let a = audit_of(&n, "prolog");
    assert_eq!(a["outcome"], "rolled_back", "{a}");
    assert!(error_of(&n, "prolog").contains("No space left"), "{a}");
    assert_eq!(a["changes"].as_array().unwrap().len(), 2, "{a}");
    let snap = n.snapshot(&PATHS);
    assert_eq!(snap.settings, initial());
    assert!(!snap.journal);
    std::fs::remove_file(m.path.join(".filler")).unwrap();
    assert_untouched(&n, "space again");
    drop(m);
}

#[test]
fn fault_lib_dir_full() {
    // /var/lib/qoslane full: a new mapping cannot become last-known-good and
    // the counters cannot be written. The job is still served.
    let n = reliability_node(0);
    let Some(m) = Mount::tmpfs(&n.path("/var/lib/qoslane"), "size=16k,mode=0755") else {
        return;
    };
    m.fill();
    let out = Op::Prolog(1, "high").run(&n, &[]);
    ok(&out);
    assert_eq!(
        audit_of(&n, "prolog")["outcome"],
        "applied",
        "{}",
        show(&out)
    );
    assert!(stderr(&out).contains("No space left"), "{}", stderr(&out));
    assert_holds(&n, &[(1, "high")], "lib dir full");
    ok(&Op::Epilog(1).run(&n, &[]));
    assert_untouched(&n, "lib dir full");
    drop(m);
}

#[test]
fn fault_state_directory_insecure_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let n = reliability_node(0);
    std::fs::create_dir_all(n.path("/run/qoslane")).unwrap();
    std::fs::set_permissions(
        n.path("/run/qoslane"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    assert_prolog_refused(&n, 1, "high", "writable by group or others", "run dir 0777");
    let out = Op::Health.run(&n, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("writable by group or others"));
    std::fs::set_permissions(
        n.path("/run/qoslane"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();

    // A symlink in place of the state directory.
    let n = reliability_node(0);
    std::fs::create_dir_all(n.path("/run")).unwrap();
    std::fs::create_dir_all(n.root().join("decoy")).unwrap();
    std::os::unix::fs::symlink(n.root().join("decoy"), n.path("/run/qoslane")).unwrap();
    assert_prolog_refused(&n, 1, "high", "is a symlink", "run dir symlink");
    assert!(
        std::fs::read_dir(n.root().join("decoy"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn fault_state_file_corrupt_or_foreign_stops_changes_and_health_says_so() {
    // State qoslane cannot trust (garbage, another owner, a symlink) stops
    // every change — acting on it could lose a baseline — and `health`
    // reports it, so the node drains until an admin looks.
    let cases: [(&str, Spoil); 4] = [
        ("a corrupt journal", |n| {
            std::fs::write(n.path("/run/qoslane/journal.json"), "{\"event\": \"prol").unwrap();
        }),
        ("a corrupt node.json", |n| {
            std::fs::write(n.path("/run/qoslane/node.json"), "garbage").unwrap();
        }),
        ("a corrupt job record", |n| {
            std::fs::write(n.path("/run/qoslane/jobs/77.json"), "{}").unwrap();
        }),
        ("a job record owned by a user", |n| {
            let p = n.path("/run/qoslane/jobs/77.json");
            std::fs::write(&p, "{}").unwrap();
            std::os::unix::fs::chown(&p, Some(1000), Some(1000)).unwrap();
        }),
    ];
    for (what, break_it) in cases {
        let n = reliability_node(0);
        ok(&Op::Prolog(1, "low").run(&n, &[]));
        break_it(&n);
        let out = Op::Prolog(2, "high").run(&n, &[]);
        ok(&out);
        let a = audit_of(&n, "prolog");
        assert_eq!(a["outcome"], "failed", "{what}: {a}");
        let err = error_of(&n, "prolog");
        assert!(err.contains("state "), "{what}: {err}");
        assert_eq!(n.get(TOS), "0", "{what}");
        assert_eq!(n.get(RMEM), "1048576", "{what}: job 1's value kept");
        let out = Op::Health.run(&n, &[]);
        assert_eq!(out.status.code(), Some(1), "{what}: health: {}", show(&out));
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(line.starts_with("qoslane: "), "{what}: {line}");
        assert!(
            line.contains("state "),
            "{what}: health names the state: {line}"
        );
    }
}

// --- the node lock

#[test]
fn fault_node_lock_held_past_the_deadline() {
    use rustix::fs::{FlockOperation, flock};
    let n = reliability_node(0);
    ok(&Op::Prolog(1, "mission-critical").run(&n, &[]));
    ok(&Op::Prolog(2, "low").run(&n, &[]));
    let f = std::fs::File::open(n.path("/run/qoslane/lock")).unwrap();
    flock(&f, FlockOperation::LockExclusive).unwrap();
    let fast = [("QOSLANE_TIMEOUT_MS", "300")];
    let out = Op::Prolog(3, "high").cmd(&n, &fast).output().unwrap();
    ok(&out);
    assert!(
        stderr(&out).contains("still held by another run"),
        "{}",
        show(&out)
    );
    // Epilogs cannot take the lock: the job keeps its record and level, and
    // the exit follows its level's policy (mission-critical: 1, drain).
    let out = Op::Epilog(1).cmd(&n, &fast).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let out = Op::Epilog(2).cmd(&n, &fast).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(audit_of(&n, "epilog")["outcome"], "failed");
    drop(f);
    assert_holds(
        &n,
        &[(1, "mission-critical"), (2, "low")],
        "nothing half-done",
    );
    ok(&Op::Epilog(1).run(&n, &[]));
    ok(&Op::Epilog(2).run(&n, &[]));
    assert_untouched(&n, "epilogs retried");
}

// --- scontrol

#[test]
fn fault_scontrol_missing_failing_hanging_flooding_or_garbage() {
    // Whatever scontrol does, the job gets the default level within the
    // deadline — with its node settings, even when scontrol took its whole
    // share of the time — and the audit says why.
    let text = mapping_yaml(&levels(0)).replace("default_level: normal", "default_level: low");
    let dir = tempfile::tempdir().unwrap();
    let not_exec = dir.path().join("scontrol");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let cases: Vec<(&str, Env, &str)> = vec![
        (
            "missing",
            vec![("QOSLANE_SCONTROL", "/nonexistent/scontrol".into())],
            "cannot run",
        ),
        (
            "not executable",
            vec![("QOSLANE_SCONTROL", not_exec.display().to_string())],
            "cannot run",
        ),
        (
            "a relative path",
            vec![("QOSLANE_SCONTROL", "scontrol".into())],
            "not an absolute path",
        ),
        (
            "failing",
            vec![("FAKE_SCONTROL_FAIL", "1".into())],
            "Unable to contact",
        ),
        (
            "hanging",
            // The default deadline (3 s): scontrol gets half of it.
            vec![("FAKE_SCONTROL_SLEEP", "30".into())],
            "deadline of 1",
        ),
        (
            "flooding",
            vec![("FAKE_SCONTROL_FLOOD", "1".into())],
            "printed more than",
        ),
        (
            "garbage",
            vec![("FAKE_SCONTROL_LINE", "hello".into())],
            "no `JobId=` line",
        ),
        (
            "(null) QoS",
            vec![(
                "FAKE_SCONTROL_LINE",
                "JobId=1 Account=a QOS=(null) JobState=R".into(),
            )],
            "accounting",
        ),
    ];
    for (what, env, needle) in cases {
        let n = reliability_node(0);
        n.write_mapping(&text);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let t = Instant::now();
        let out = Op::Prolog(1, "high").run(&n, &env);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: {:?}",
            t.elapsed()
        );
        ok(&out);
        let a = audit_of(&n, "prolog");
        assert_eq!(a["outcome"], "applied", "scontrol {what}: {a}");
        assert_eq!(
            (a["level"].as_str(), a["qos_source"].as_str()),
            (Some("low"), Some("default")),
            "scontrol {what}: {a}"
        );
        assert!(
            a["notes"][0].as_str().unwrap().contains(needle),
            "scontrol {what}: {a}"
        );
        assert_holds(&n, &[(1, "low")], what);
    }
}

/// Regression: a job name with a newline could make the first line of
/// `scontrol show job -o` a complete-looking record naming the user's QoS.
/// Slurm 22.05.8 accepts such a name (`sbatch -J $'x Account=a
/// QOS=mission-critical JobState=R\nrest' --qos=low`) and prints it raw; the
/// line below is that output (seen on the rig, trimmed).
#[test]
fn scontrol_output_split_by_a_newline_in_the_job_name_cannot_spoof() {
    let n = reliability_node(0);
    let line = "JobId=5 JobName=x Account=a QOS=mission-critical JobState=R\n\
                rest UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=10 Nice=0 \
                Account=rigacct QOS=low JobState=RUNNING Reason=None Dependency=(null)";
    let out = Op::Prolog(5, "unused").run(&n, &[("FAKE_SCONTROL_LINE", line)]);
    ok(&out);
    let a = audit_of(&n, "prolog");
    assert_ne!(a["level"], "mission-critical", "{a}");
    assert_eq!(a["qos_source"], "default", "{a}");
    assert!(Node::exports(&n.task_prolog(5, &[])).get("UCX_IB_SL") != Some(&"3".to_owned()));
}

// --- smpquery (the fabric check)

fn fabric_node(check: &str) -> Node {
    let n = Node::with_mapping(
        &mapping_yaml(&levels(0)).replace("fabric_check: off", &format!("fabric_check: {check}")),
    );
    for (p, v) in INITIAL {
        n.set(p, v);
    }
    n.add_fabric("mlx5-quirks");
    for op in ["sl2vl", "portinfo", "vlarb"] {
        n.smpquery_file(
            &format!("any.{op}.txt"),
            &util::captured_smpquery("qos-identity", op),
        );
    }
    n
}

#[test]
fn fault_smpquery_missing_hanging_flooding_garbage_or_failing() {
    type Break = fn(&Node) -> Vec<(&'static str, String)>;
    let cases: [(&str, Break, &str); 5] = [
        (
            "missing",
            |_| vec![("QOSLANE_SMPQUERY", "/nonexistent/smpquery".into())],
            "cannot run",
        ),
        (
            "hanging",
            |n| {
                // The default deadline (3 s): the probe gets half of it.
                n.smpquery_file("hang", "");
                vec![]
            },
            "deadline",
        ),
        (
            "flooding",
            |n| {
                n.smpquery_file("flood", "");
                vec![]
            },
            "printed more than",
        ),
        (
            "garbage",
            |n| {
                n.smpquery_file("any.sl2vl.txt", "ibwarn: something odd\n");
                vec![]
            },
            "found `ibwarn: something odd`",
        ),
        (
            "failing",
            |n| {
                n.smpquery_file("any.portinfo.rc", "1");
                n.smpquery_file("any.portinfo.stderr", "ibwarn: mad_rpc failed\n");
                vec![]
            },
            "mad_rpc failed",
        ),
    ];
    for (what, break_it, needle) in cases {
        // enforce: the level is refused before any change; the policy decides.
        let n = fabric_node("enforce");
        let mut env = break_it(&n);
        env.push(("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string()));
        env.sort_by_key(|(k, _)| *k != "QOSLANE_SMPQUERY"); // an explicit one wins below
        let env: Vec<(&str, &str)> = env.iter().rev().map(|(k, v)| (*k, v.as_str())).collect();
        let t = Instant::now();
        let out = Op::Prolog(1, "high").run(&n, &env);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: {:?}",
            t.elapsed()
        );
        ok(&out);
        let a = audit_of(&n, "prolog");
        assert_eq!(a["outcome"], "failed", "smpquery {what}, enforce: {a}");
        assert!(
            error_of(&n, "prolog").contains(needle),
            "smpquery {what}: {a}"
        );
        assert_untouched(&n, what);
        let out = Op::Prolog(2, "mission-critical").run(&n, &env);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{what}: fail_job: {}",
            show(&out)
        );
        // health: unhealthy, one line naming it.
        let out = Op::Health.run(&n, &env);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(needle),
            "{what}: {}",
            show(&out)
        );

        // warn: granted anyway, the problem noted — also when smpquery took
        // its whole share of the time.
        let n = fabric_node("warn");
        let mut env = break_it(&n);
        env.push(("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string()));
        env.sort_by_key(|(k, _)| *k != "QOSLANE_SMPQUERY");
        let env: Vec<(&str, &str)> = env.iter().rev().map(|(k, v)| (*k, v.as_str())).collect();
        let out = Op::Prolog(1, "high").run(&n, &env);
        ok(&out);
        let a = audit_of(&n, "prolog");
        assert_eq!(
            a["outcome"],
            "applied",
            "smpquery {what}, warn: {a}\n{}",
            show(&out)
        );
        assert!(
            a["notes"].to_string().contains(needle),
            "smpquery {what}, warn: {a}"
        );
        assert_holds(&n, &[(1, "high")], what);
    }
}

// --- the mapping

#[test]
fn fault_mapping_absent_invalid_huge_or_not_a_file() {
    type Break = fn(&Node);
    let cases: [(&str, Break, &str); 7] = [
        (
            "writable by others",
            |n| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(
                    n.path("/etc/qoslane/qos-network.yml"),
                    std::fs::Permissions::from_mode(0o666),
                )
                .unwrap();
            },
            "writable by group or others (mode 666); refusing to use this mapping",
        ),
        (
            "owned by a user",
            |n| {
                std::os::unix::fs::chown(n.path("/etc/qoslane/qos-network.yml"), Some(1000), None)
                    .unwrap();
            },
            "owned by uid 1000",
        ),
        (
            "absent",
            |n| std::fs::remove_file(n.path("/etc/qoslane/qos-network.yml")).unwrap(),
            "No such file",
        ),
        ("invalid", |n| n.write_mapping("levels: ["), "invalid YAML"),
        (
            "huge (2 MiB)",
            |n| {
                n.write_mapping(&format!(
                    "{}#{}\n",
                    mapping_yaml(&levels(0)),
                    "x".repeat(2 << 20)
                ))
            },
            "too large",
        ),
        (
            "a directory",
            |n| {
                std::fs::remove_file(n.path("/etc/qoslane/qos-network.yml")).unwrap();
                std::fs::create_dir(n.path("/etc/qoslane/qos-network.yml")).unwrap();
            },
            "qos-network.yml",
        ),
        (
            "not UTF-8",
            |n| {
                std::fs::write(
                    n.path("/etc/qoslane/qos-network.yml"),
                    b"default_level: \xff\n",
                )
                .unwrap();
            },
            "not UTF-8",
        ),
    ];
    for (what, break_it, needle) in cases {
        // Never seen a valid mapping: the node is left alone, the job runs on
        // the baseline, exit 0 whatever the level would have been.
        let n = reliability_node(0);
        break_it(&n);
        let out = Op::Prolog(1, "mission-critical").run(&n, &[]);
        assert_eq!(out.status.code(), Some(0), "mapping {what}: {}", show(&out));
        assert_eq!(audit_of(&n, "prolog")["outcome"], "failed");
        assert!(
            error_of(&n, "prolog").contains(needle),
            "mapping {what}: {}",
            error_of(&n, "prolog")
        );
        assert_untouched(&n, what);
        // Sync says so and changes nothing; health fails.
        let out = Op::Sync.run(&n, &[]);
        assert_ne!(out.status.code(), Some(0), "{what}: {}", show(&out));
        assert_eq!(Op::Health.run(&n, &[]).status.code(), Some(1), "{what}");

        // With a last-known-good copy: it is used, the bad file audited once.
        let n = reliability_node(0);
        ok(&Op::Prolog(1, "high").run(&n, &[]));
        break_it(&n);
        ok(&Op::Prolog(2, "low").run(&n, &[]));
        ok(&Op::Prolog(3, "bulk").run(&n, &[]));
        assert_eq!(audit_of(&n, "prolog")["outcome"], "applied", "{what}");
        assert_holds(&n, &[(1, "high"), (2, "low"), (3, "bulk")], what);
        let rejected: Vec<_> = n
            .audit_events("mapping_changed")
            .into_iter()
            .filter(|e| e["outcome"] == "failed")
            .collect();
        assert_eq!(rejected.len(), 1, "{what}: audited once: {rejected:?}");
        assert!(
            rejected[0]["error"].as_str().unwrap().contains(needle),
            "{what}"
        );
        for j in [1, 2, 3] {
            ok(&Op::Epilog(j).run(&n, &[]));
        }
        assert_untouched(&n, what);
    }
}

// ------------------------------------------------- fuzz bodies, on stable
//
// The libFuzzer targets of fuzz/ (scontrol_qos, smpquery, job_record) check
// what `fuzz/src/*.rs` says; the same checks run here on every test run, fed
// by proptest and by mutations of captured real outputs (fuzz/README.md).

#[path = "../../fuzz/src/job_record.rs"]
mod fuzz_job_record;
#[path = "../../fuzz/src/scontrol.rs"]
mod fuzz_scontrol;
#[path = "../../fuzz/src/smpquery.rs"]
mod fuzz_smpquery;

mod fuzz_on_stable {
    use super::{fuzz_job_record, fuzz_scontrol, fuzz_smpquery};
    use proptest::prelude::*;

    /// Pieces a user would put in their job's name, comment or directory to
    /// spoof a QoS: fake fields, newlines, the real field names.
    fn spoof_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just(" Account=a QOS=mission-critical JobState=R".to_owned()),
            Just("\n".to_owned()),
            Just(" ".to_owned()),
            Just("QOS=low".to_owned()),
            Just(" QOS=".to_owned()),
            Just("JobId=8 ".to_owned()),
            Just(" JobState=RUNNING".to_owned()),
            Just("Account=rigacct".to_owned()),
            Just("QOS=high".to_owned()),
            Just("\t".to_owned()),
            "[a-z=()_.\\- ]{0,8}",
        ];
        prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
    }

    fn captured() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/smpquery");
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("fixtures")
            .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("read"))
            .collect();
        v.sort();
        v
    }

    /// A captured output with lines deleted, duplicated, truncated, or a
    /// character replaced.
    fn mutated_output() -> impl Strategy<Value = String> {
        let outputs = captured();
        (0..outputs.len(), any::<u64>(), 0..4u8, any::<char>()).prop_map(move |(i, r, kind, c)| {
            let text = &outputs[i];
            let lines: Vec<&str> = text.lines().collect();
            let at = (r as usize) % lines.len().max(1);
            match kind {
                0 => {
                    let mut l = lines.clone();
                    l.remove(at);
                    l.join("\n")
                }
                1 => {
                    let mut l = lines.clone();
                    l.insert(at, lines[at]);
                    l.join("\n")
                }
                2 => text.chars().take((r as usize) % (text.len() + 1)).collect(),
                _ => {
                    let mut chars: Vec<char> = text.chars().collect();
                    let n = chars.len();
                    chars[(r as usize) % n] = c;
                    chars.into_iter().collect()
                }
            }
        })
    }

    fn record_json() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            Just("UCX_IB_SL".to_owned()),
            Just("QOSLANE_LEVEL".to_owned()),
            Just("NCCL_IB_TC".to_owned()),
            Just("LD_PRELOAD".to_owned()),
            "[A-Z_]{0,12}",
            any::<String>(),
        ];
        let value = prop_oneof![
            Just("3".to_owned()),
            Just("3\nexport LD_PRELOAD=/tmp/x.so".to_owned()),
            Just("".to_owned()),
            "[a-z0-9._\\- ;$`]{0,10}",
            any::<String>(),
        ];
        (prop::collection::vec((name, value), 0..6), 1..5u32).prop_map(|(exports, job)| {
            serde_json::json!({
                "job_id": job, "time": "t", "user": "alice", "qos": "high",
                "qos_source": "scontrol", "level": "high", "rank": 1,
                "service_level": 2, "virtual_lane": 2, "traffic_class": null,
                "settings": [], "exports": exports, "mapping_sha256": "x"
            })
            .to_string()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        #[test]
        fn scontrol_user_fields_never_spoof(n in spoof_text(), c in spoof_text(), w in spoof_text()) {
            fuzz_scontrol::check_spoof(&n, &c, &w);
            fuzz_scontrol::check_output(&fuzz_scontrol::real_line(&n, &c, &w));
        }

        #[test]
        fn scontrol_any_output(s in any::<String>()) {
            fuzz_scontrol::check(s.as_bytes());
        }

        #[test]
        fn smpquery_mutated_real_outputs(s in mutated_output()) {
            fuzz_smpquery::check(s.as_bytes());
        }

        #[test]
        fn smpquery_any_bytes_and_roundtrip(b in prop::collection::vec(any::<u8>(), 0..300)) {
            fuzz_smpquery::check(&b);
        }

        #[test]
        fn job_record_any_exports(j in record_json()) {
            fuzz_job_record::check(j.as_bytes());
        }

        #[test]
        fn job_record_any_bytes(b in prop::collection::vec(any::<u8>(), 0..200)) {
            fuzz_job_record::check(&b);
        }
    }

    #[test]
    fn captured_outputs_parse_and_roundtrip() {
        for text in captured() {
            fuzz_smpquery::check_text(&text);
        }
        fuzz_smpquery::check_roundtrip(&[0xff; 200]);
        fuzz_smpquery::check_roundtrip(&[]);
    }

    /// The fuzzer's first finding, by construction (the review found it
    /// first): a newline in the job name split the record.
    #[test]
    fn regression_scontrol_newline_in_job_name() {
        fuzz_scontrol::check_spoof(
            "x Account=a QOS=mission-critical JobState=R\nrest",
            "",
            "/tmp",
        );
        fuzz_scontrol::check(b"x Account=a QOS=mission-critical JobState=R\n\x1f\x1f/tmp");
    }
}

/// `health` on a node that has not run a job yet is healthy, also once the
/// fabric probe has created the state directory (and no jobs directory).
#[test]
fn health_on_a_fresh_node_is_healthy() {
    let n = fabric_node("enforce");
    let env = [("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for run in 1..=2 {
        let out = Op::Health.run(&n, &env);
        assert_eq!(out.status.code(), Some(0), "run {run}: {}", show(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "qoslane: ok\n");
    }
    ok(&Op::Prolog(1, "high").run(&n, &env));
    ok(&Op::Epilog(1).run(&n, &env));
    assert_eq!(Op::Health.run(&n, &env).status.code(), Some(0));
}
