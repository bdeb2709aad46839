//! Settings that survive the kernel: before-values are saved as what can be
//! written back (a choice list's selection, a multi-value file's values), and
//! a setting whose file vanished (a configfs entry removed by a driver reload
//! or an HCA reset) is `gone`, never a reason to fail another job, another
//! level, an Epilog or `recover`.

#[cfg(feature = "fault-injection")]
use rustix::io::Errno;

#[cfg(feature = "fault-injection")]
use crate::util::killed_mid_prolog;
use crate::util::{BASE_RMEM, Node, RMEM, TOS, ok, stderr};

const SCHED: &str = "/sys/block/nvme0n1/queue/scheduler";
const TCP_RMEM: &str = "/proc/sys/net/ipv4/tcp_rmem";

fn kinds_mapping() -> String {
    crate::util::MAPPING.replace(
        "  - name: normal\n",
        "  - name: io\n    qos: [io]\n    service_level: 4\n    virtual_lane: 4\n    node_settings:\n      - path: /sys/block/nvme0n1/queue/scheduler\n        value: mq-deadline\n      - path: /proc/sys/net/ipv4/tcp_rmem\n        value: \"8192 262144 8388608\"\n  - name: normal\n",
    )
}

/// Regression: a choice-list file (`[none] mq-deadline`) was saved as the
/// text read and written back as such, which the kernel refuses (EINVAL):
/// the Epilog "restored" nothing. The selection is saved and written back;
/// a multi-value file is written back as its values, single-spaced.
#[test]
fn choice_list_and_multi_value_settings_are_restored_as_the_kernel_takes_them() {
    let n = Node::with_mapping(&kinds_mapping());
    n.set(SCHED, "[none] mq-deadline");
    n.set(TCP_RMEM, "4096\t131072\t6291456");
    ok(&n.prolog(1, "io"));
    assert_eq!(n.get(SCHED), "mq-deadline");
    let prolog = n.last_audit("prolog");
    let before: Vec<&str> = prolog["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["before"].as_str().unwrap())
        .collect();
    assert!(
        before.contains(&"none"),
        "saved as the selection: {before:?}"
    );
    assert!(before.contains(&"4096 131072 6291456"), "{before:?}");
    ok(&n.epilog(1));
    assert_eq!(n.get(SCHED), "none", "the kernel takes only a choice");
    assert_eq!(n.get(TCP_RMEM), "4096 131072 6291456");
    assert_eq!(n.last_audit("epilog")["outcome"], "reverted");
}

/// Regression: when a file a job holds disappeared, every other level's
/// Prolog failed (even one with no settings) with `open setting … No such
/// file`, the job's Epilog failed (and drained the node) and its record
/// stayed for ever.
#[test]
fn a_vanished_setting_file_is_gone_and_blocks_nothing() {
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    assert_eq!(n.get(TOS), "106");
    std::fs::remove_file(n.path(TOS)).unwrap();

    for (job, qos) in [(2, "normal"), (3, "low")] {
        let out = n.prolog(job, qos);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            n.last_audit("prolog")["outcome"],
            "applied",
            "{qos}: {}",
            stderr(&out)
        );
        if job == 2 {
            // The first run to meet it says so, once.
            let p = n.last_audit("prolog");
            assert_eq!(p["settings_gone"][0], TOS, "{p}");
        }
    }
    // mission-critical's own setting is gone: that level cannot be granted.
    let out = n.prolog(4, "mission-critical");
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "fail_job: {}",
        stderr(&out)
    );

    for job in [2, 3] {
        ok(&n.epilog(job));
    }
    let out = n.epilog(1);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(n.last_audit("epilog")["outcome"], "reverted");
    assert!(
        n.records().is_empty(),
        "every record removed: {:?}",
        n.records()
    );
    assert_eq!(n.get(RMEM), BASE_RMEM);
    let m = n.run(&["metrics"], &[]);
    let text = String::from_utf8_lossy(&m.stdout);
    assert!(
        text.contains(r#"qoslane_settings_gone_total{event="prolog"} 1"#),
        "{text}"
    );
}

/// Regression: with an interrupted transaction whose setting then vanished,
/// `recover` (and every later run) failed with exit 74 for ever.
#[cfg(feature = "fault-injection")]
#[test]
fn recover_makes_progress_when_a_journaled_setting_vanished() {
    let n = killed_mid_prolog();
    assert!(n.journal_exists());
    std::fs::remove_file(n.path(TOS)).unwrap();
    let out = n.run(&["recover"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!n.journal_exists(), "the journal is done with");
    let r = n.last_audit("recover");
    assert_eq!(r["outcome"], "reverted");
    assert!(
        r["settings_gone"].as_array().is_some_and(|g| !g.is_empty()),
        "{r}"
    );
    ok(&n.prolog(2, "low"));
}

/// Regression (issue 24, defect 5): after an HCA reset or a driver reload an
/// admin-made configfs group stays and its `default_roce_tos` answers ENODEV
/// (a device node of a vanished driver, ENXIO): only ENOENT counted as gone,
/// so every later Prolog, the holding job's Epilog (exit 1: drain) and
/// `recover` failed. A real device node answering each errno stands in for
/// the setting: the Prolog, the Epilog and `recover` succeed and say it is
/// gone.
#[cfg(feature = "fault-injection")]
#[test]
fn a_setting_whose_device_vanished_is_gone_and_blocks_nothing() {
    for errno in [Errno::NODEV, Errno::NXIO] {
        let ctx = format!("{errno:?}");
        let n = Node::new();
        ok(&n.prolog(1, "mission-critical"));
        if !n.replace_with_dead_device(TOS, errno) {
            return;
        }
        let out = n.prolog(2, "normal");
        assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
        let p = n.last_audit("prolog");
        assert_eq!(p["outcome"], "applied", "{ctx}: {p}");
        assert_eq!(p["settings_gone"][0], TOS, "{ctx}: {p}");
        let out = n.epilog(1);
        assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
        assert_eq!(n.last_audit("epilog")["outcome"], "reverted", "{ctx}");
        ok(&n.epilog(2));
        assert!(n.records().is_empty(), "{ctx}: {:?}", n.records());
        assert_eq!(n.get(RMEM), BASE_RMEM, "{ctx}");

        // An interrupted transaction whose setting's device then vanished.
        let n = killed_mid_prolog();
        assert!(n.replace_with_dead_device(TOS, errno), "{ctx}");
        let out = n.run(&["recover"], &[]);
        assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
        assert!(!n.journal_exists(), "{ctx}: the journal is done with");
        let r = n.last_audit("recover");
        assert_eq!(r["outcome"], "reverted", "{ctx}: {r}");
        assert_eq!(r["settings_gone"][0], TOS, "{ctx}: {r}");
        ok(&n.prolog(2, "low"));
    }
}

/// Regression: a record left by a killed Epilog was never noticed — the job
/// gone, its settings in force for ever, health "ok". health compares the
/// records with the jobs Slurm has on the node (`squeue -w NODE -o %A`) and
/// releases the others through the transaction; with no answer it removes
/// nothing.
#[test]
fn health_releases_records_of_jobs_no_longer_on_the_node() {
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    ok(&n.prolog(2, "low"));
    // No answer from Slurm: nothing is removed.
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(n.records().len(), 2);
    // Job 1's Epilog was killed; Slurm has only job 2 here.
    let out = n.run(
        &["health"],
        &[("FAKE_SQUEUE_NODE_JOBS", "2"), ("SLURMD_NODENAME", "n1")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(n.records(), ["2.json"], "job 1's record released");
    assert_eq!(
        n.get(TOS),
        crate::util::BASE_TOS,
        "mission-critical's setting restored"
    );
    assert_eq!(n.get(RMEM), "1048576", "low's setting stays");
    let h = n.last_audit("health");
    assert_eq!(h["outcome"], "reverted", "{h}");
    assert!(
        h["notes"]
            .to_string()
            .contains("job(s) 1: Slurm no longer has them on node n1"),
        "{h}"
    );
    // Every job gone: the baseline.
    let out = n.run(
        &["health"],
        &[("FAKE_SQUEUE_NODE_JOBS", ""), ("SLURMD_NODENAME", "n1")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(n.records().is_empty());
    assert_eq!(n.get(RMEM), BASE_RMEM);
}

/// Regression (issue 39): `qoslane log --job N` did not show that health
/// had released job N's level: its line has no `job_id` (it is no job's
/// run). The line names the jobs it released (`released_jobs`), and
/// `--job` keeps it.
#[test]
fn log_job_shows_healths_release_of_the_job() {
    let stdout = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    ok(&n.prolog(2, "low"));
    ok(&n.run(
        &["health"],
        &[("FAKE_SQUEUE_NODE_JOBS", "2"), ("SLURMD_NODENAME", "n1")],
    ));
    let h = n.last_audit("health");
    assert_eq!(h["job_id"], serde_json::Value::Null, "{h}");
    assert_eq!(h["released_jobs"], serde_json::json!([1]), "{h}");
    let out = n.run(&["log", "--job", "1", "--json"], &[]);
    ok(&out);
    let events: Vec<String> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].to_string())
        .collect();
    // (Job 1's Prolog put the first mapping in force: its line too.)
    assert_eq!(
        events,
        ["\"mapping_changed\"", "\"prolog\"", "\"health\""],
        "{}",
        stdout(&out)
    );
    let out = n.run(&["log", "--job", "1"], &[]);
    assert!(
        stdout(&out).contains("released the level of job(s) 1"),
        "{}",
        stdout(&out)
    );
    // Job 2's log has no line of job 1's release.
    let out = n.run(&["log", "--job", "2", "--json"], &[]);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
}

/// Regression (issue 39): health held the node lock across `squeue -w`
/// (seconds on a busy controller) and its fabric reads, so every Prolog on
/// the node queued behind it. It reads first and takes the lock again only
/// for the release transaction: the stand-in squeue answers only when the
/// lock is free.
#[test]
fn health_asks_slurm_without_the_node_lock() {
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    ok(&n.prolog(2, "low"));
    let lock = n.path("/run/qoslane/lock");
    let out = n.run(
        &["health"],
        &[
            ("FAKE_SQUEUE_NODE_JOBS", "2"),
            ("FAKE_SQUEUE_FREE_LOCK", lock.to_str().unwrap()),
            ("SLURMD_NODENAME", "n1"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(n.records(), ["2.json"], "job 1's record released");
    assert_eq!(n.get(TOS), crate::util::BASE_TOS);
}

/// Regression (issue 24, defect 4): squeue ran with its caller's
/// environment and reads `SQUEUE_USERS`, `SQUEUE_STATES`, `SLURM_CONF`… as
/// options: `SQUEUE_USERS=$USER qoslane health` emptied the node's job list
/// and health released every running job's level. The fake squeue filters
/// as the real one does; squeue now gets a fixed environment, nothing of
/// the caller's.
#[test]
fn squeue_options_in_the_callers_environment_do_not_reach_squeue() {
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    let held = n.settings();
    let out = n.run(
        &["health"],
        &[
            ("FAKE_SQUEUE_NODE_JOBS", "1"),
            ("SLURMD_NODENAME", "n1"),
            ("SQUEUE_USERS", "nobody"),
            ("SQUEUE_STATES", "PENDING"),
            ("SLURM_CONF", "/nonexistent/slurm.conf"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(n.records(), ["1.json"], "the running job keeps its record");
    assert_eq!(n.settings(), held, "and its level's settings");
    let calls = n.squeue_calls();
    assert!(calls.contains("-h -w n1 -o %A"), "{calls}");
    assert!(
        !calls.contains(" +"),
        "squeue was given the caller's variables: {calls}"
    );
}

/// The crash matrix with a vanishing setting: a Prolog killed at every
/// transaction point, then the setting's file vanishes (driver reload), then
/// each kind of next run. The node always makes progress: the journal is
/// done with, no record is left for the killed job, later jobs are served.
#[cfg(feature = "fault-injection")]
#[test]
fn a_crash_at_every_point_then_a_vanished_setting_never_strands_the_node() {
    let points = [
        "locked",
        "journaled",
        "applied:0",
        "applied:1",
        "verified",
        "recorded",
        "node_state",
        "committed",
    ];
    let next_runs: [&[&str]; 3] = [&["recover"], &["health"], &["sync"]];
    for point in points {
        for next in next_runs {
            let ctx = format!("killed at {point}, then {next:?}");
            let n = Node::new();
            let out = n.run(
                &["prolog"],
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("FAKE_QOS", "mission-critical"),
                    ("QOSLANE_FAULT", point),
                ],
            );
            assert_ne!(out.status.code(), Some(0), "{ctx}: killed");
            std::fs::remove_file(n.path(TOS)).unwrap();
            let out = n.run(next, &[]);
            assert_eq!(out.status.code(), Some(0), "{ctx}: {}", stderr(&out));
            assert!(!n.journal_exists(), "{ctx}: the journal is done with");
            // Whatever the killed run left, the next jobs are served and the
            // node ends on its baseline for the settings that remain.
            ok(&n.prolog(2, "low"));
            ok(&n.epilog(2));
            ok(&n.epilog(1));
            assert!(n.records().is_empty(), "{ctx}: {:?}", n.records());
            assert_eq!(n.get(RMEM), BASE_RMEM, "{ctx}");
        }
    }
}
