//! Reliability, issue 8: what happens to a node when qoslane is killed, times
//! out, runs concurrently with itself, or meets a failing dependency. Every
//! test runs the real binary on a temp root (`util`) and checks the node
//! against an independent model (this file), not against qoslane's own
//! planner. One module per concern:
//!
//! - `crash_matrix`: SIGKILL at each transaction point of prologs, epilogs and
//!   syncs in several shared-node states → the next run (recover, health, an
//!   orphan Epilog, sync) restores exactly the pre-transaction state. Needs
//!   `--features fault-injection`.
//! - `timeouts`: Slurm's PrologEpilogTimeout (SIGTERM, SIGKILL 10 ms later) at
//!   random moments → once any later run completes the node matches its job
//!   records exactly (`slurm_timeout_kill_at_random_moments`).
//! - `soak`: randomised concurrent prolog/epilog/sync rounds with invariants
//!   after every round (and, with fault injection, crashes mixed in)
//!   (`concurrency_soak`).
//! - `shared_node`: read-only runs beside other jobs' Prologs.
//! - `dependencies`: every external dependency failing in each way it can
//!   (`fault_*`).
//! - `fuzz_on_stable`: the fuzz targets' checks, fed by proptest.
//!
//! Figures: run with `-- --nocapture` to see the tables docs/RELIABILITY.md
//! quotes. Knobs: `QOSLANE_SEED` (the random seed; printed by every
//! randomised test), `QOSLANE_SOAK_SECS` (time budget of the soak and of the
//! timeout harness each; default 20 and 12 — CI stays well under 60 s).

#![expect(clippy::unwrap_used, reason = "a failing test should stop loudly")]

use crate::util::Within as _;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::util::{Mount, Node, RMEM, Snapshot, TOS, ok, stderr};

#[cfg(feature = "fault-injection")]
mod crash_matrix;
mod dependencies;
mod fuzz_on_stable;
mod shared_node;
mod soak;
mod timeouts;

// ------------------------------------------------------------------ the model

const WMEM: &str = "/proc/sys/net/core/wmem_max";
/// A choice-list setting: the kernel brackets the selection and takes only a
/// choice back (its before-value is saved as `none`).
const SCHED: &str = "/sys/block/nvme0n1/queue/scheduler";
const PATHS: [&str; 4] = [TOS, RMEM, WMEM, SCHED];

/// The values before any job: the node's true baseline.
const INITIAL: [(&str, &str); 4] = [
    (TOS, "0"),
    (RMEM, "212992"),
    (WMEM, "212992"),
    (SCHED, "[none] mq-deadline"),
];

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
            settings: vec![(TOS, v("32", "40")), (SCHED, "mq-deadline")],
        },
    ]
}

fn mapping_yaml(levels: &[Level]) -> String {
    let mut s = String::from(
        "default_level: normal\nfabric_check: enforce\non_failure: continue\nlevels:\n",
    );
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
    if as_written(&snap.settings) != as_written(&want) {
        bad.push(format!("settings {:?}, want {want:?}", snap.settings));
    }
    let base = expected_baseline(active);
    if as_written(&snap.baseline) != as_written(&base) {
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
    bad.extend(claims_disagree(n, &snap));
    let strays = n.stray_files();
    if !strays.is_empty() {
        bad.push(format!("stray files {strays:?}"));
    }
    if !lock_is_free(n) {
        bad.push("the node lock is held".into());
    }
    bad
}

/// The node state's claims (what the planner reads instead of the records)
/// must be the records' own level, rank and settings, one per record.
fn claims_disagree(n: &Node, snap: &Snapshot) -> Vec<String> {
    let mut bad = Vec::new();
    // node.json keeps them grouped: [{"level", "rank", "settings", "jobs"}]
    let groups = std::fs::read_to_string(n.path("/run/qoslane/node.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("claims").cloned())
        .unwrap_or(serde_json::Value::Null);
    let mut claims = BTreeMap::new();
    for g in groups.as_array().into_iter().flatten() {
        let claim =
            serde_json::json!({"level": g["level"], "rank": g["rank"], "settings": g["settings"]});
        for job in g["jobs"].as_array().into_iter().flatten() {
            if claims.insert(job.to_string(), claim.clone()).is_some() {
                bad.push(format!("job {job} is in two claims"));
            }
        }
    }
    for (name, r) in &snap.records {
        let job = name.trim_end_matches(".json");
        let want =
            serde_json::json!({"level": r["level"], "rank": r["rank"], "settings": r["settings"]});
        match claims.get(job) {
            Some(c) if *c == want => {}
            other => bad.push(format!(
                "job {job}'s claim is {other:?}, its record says {want}"
            )),
        }
    }
    for job in claims.keys() {
        if !snap.records.contains_key(&format!("{job}.json")) {
            bad.push(format!("a claim of job {job}, which has no record"));
        }
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

/// A node for the reliability stories: the levels above, the fabric checked
/// (`enforce`) on a fixture HCA through the fake smpquery, so every run goes
/// through the fabric cache as a job start does.
fn reliability_node(variant: u8) -> Node {
    let n = Node::with_mapping(&mapping_yaml(&levels(variant)));
    for (p, v) in INITIAL {
        n.set(p, v);
    }
    n.add_hca("qos-identity");
    n
}

/// Values compared as the kernel would show them after a write: a choice
/// list by its selection (a plain fixture file holds what was written).
fn as_written(m: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (k.clone(), qoslane::settings::writable(v)))
        .collect()
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
                    .as_nanos()
                    .try_into()
                    .unwrap_or(u64::MAX)
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

    /// An index below `len`.
    fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).expect("below len fits usize")
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    fn qos(&mut self) -> &'static str {
        QOS[self.index(QOS.len())]
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
        self.cmd(n, extra).output_within()
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
