//! Failing dependencies: every external dependency (node settings files, the
//! audit log, state directories and files, the node lock, scontrol, smpquery,
//! the mapping) failing in each way it can → the documented outcome, a clear
//! message, nothing lost. docs/RELIABILITY.md has the table; each `fault_*`
//! test is a row (or a few).

use super::*;

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
    // mission-critical's fail_job: refused, the node consistent (issue 23 item 4).
    let code = if qos == "mission-critical" {
        qoslane::exit_code::REFUSED
    } else {
        0
    };
    assert_eq!(out.status.code(), Some(code), "{ctx}: {}", show(&out));
    let a = audit_of(n, "prolog");
    assert_eq!(a["outcome"], "failed", "{ctx}: {a}");
    assert!(error_of(n, "prolog").contains(needle), "{ctx}: {a}");
    assert!(stderr(&out).contains(needle), "{ctx}: {}", stderr(&out));
    assert!(
        Node::exports(&n.task_prolog(job, &[])).is_empty(),
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
            // mission-critical's fail_job: refused, the node consistent (issue 23 item 4).
            let code = if qos == "mission-critical" {
                qoslane::exit_code::REFUSED
            } else {
                0
            };
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
    // A hung driver during an Epilog: the run's watchdog ends it at its
    // deadline (the thread in the write never comes back); the journal of
    // what it had begun stays, and the next run to take the lock rolls it
    // back. The job keeps its level and record, the Epilog fails
    // (mission-critical: exit 1, Slurm drains), and the retried Epilog
    // completes.
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
    let a = audit_of(&n, "epilog");
    assert_eq!(a["outcome"], "failed", "{a}");
    assert!(
        error_of(&n, "epilog").contains("deadline")
            && error_of(&n, "epilog").contains("ended by its watchdog"),
        "{}",
        show(&out)
    );
    assert!(a["notes"].to_string().contains("stays journaled"), "{a}");
    ok(&Op::Recover.run(&n, &[]));
    assert_eq!(audit_of(&n, "recover")["outcome"], "reverted");
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
    let Some(m) = Mount::tmpfs(&n.path("/run/qoslane"), "size=64k,mode=0755") else {
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
    let out = Op::Prolog(3, "high").cmd(&n, &fast).output_within();
    ok(&out);
    assert!(
        stderr(&out).contains("still held by another run"),
        "{}",
        show(&out)
    );
    // Epilogs cannot take the lock: the job keeps its record and level, and
    // the exit follows its level's policy (mission-critical: 1, drain).
    let out = Op::Epilog(1).cmd(&n, &fast).output_within();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let out = Op::Epilog(2).cmd(&n, &fast).output_within();
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

/// Suspected case (issue 24): a setting write stuck in uninterruptible sleep
/// keeps its process — and the node lock — alive past the watchdog, for
/// ever; health said "a transaction is in progress" and ok. Now health names
/// the holder from its journal (pid, event, job, since when): held past
/// 60 s a warning, past 10 min a drain, and the gauge
/// `qoslane_node_lock_held_seconds` says how long. The stuck writer here:
/// a killed Prolog's journal, aged, and the lock held by this test.
#[cfg(feature = "fault-injection")]
#[test]
fn fault_node_lock_held_far_past_any_deadline_is_reported_by_health() {
    use rustix::fs::{FlockOperation, flock};
    let n = crate::util::killed_mid_prolog();
    let journal = n.path("/run/qoslane/journal.json");
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&journal).unwrap()).unwrap();
    let pid = j["pid"].as_u64().unwrap();
    let f = std::fs::File::open(n.path("/run/qoslane/lock")).unwrap();
    flock(&f, FlockOperation::LockExclusive).unwrap();
    let started = |ago: u64| {
        qoslane::time::rfc3339_seconds(std::time::SystemTime::now() - Duration::from_secs(ago))
    };
    let gauge = |n: &crate::util::Node, name: &str| -> f64 {
        let text = n.textfile();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .parse()
            .unwrap()
    };

    // Stuck for 20 minutes: unhealthy, naming who and since when.
    j["started"] = started(1200).into();
    std::fs::write(&journal, j.to_string()).unwrap();
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!(
            "qoslane: the node lock is held by pid {pid} (prolog of job 1) since "
        )) && said.contains(": far past any run's deadline"),
        "{said}"
    );
    assert!(gauge(&n, "qoslane_node_lock_held_seconds") >= 1200.0);

    // Two minutes: a warning.
    j["started"] = started(120).into();
    std::fs::write(&journal, j.to_string()).unwrap();
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("qoslane: ok, 1 warning: the node lock is held by pid"),
        "{}",
        show(&out)
    );
    assert_eq!(gauge(&n, "qoslane_health_warnings"), 1.0);

    // A transaction of a moment ago is in progress: ok.
    j["started"] = started(0).into();
    std::fs::write(&journal, j.to_string()).unwrap();
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "qoslane: ok\n");

    // Released: the next run rolls the transaction back; the gauge is 0.
    drop(f);
    ok(&n.run(&["health"], &[]));
    assert_eq!(gauge(&n, "qoslane_node_lock_held_seconds"), 0.0);
    assert!(!journal.exists());
}

/// Issue 39: a node lock held with no journal (an admin's `flock`, a run
/// wedged before its journal) stopped every job start while `health` said
/// `ok` and `qoslane_node_lock_held_seconds` read 0. Now health says so (a
/// warning), remembers when it first saw it held (`lock-seen.json`, health's
/// own), the gauge says how long, and past 10 min the node drains — as a
/// stuck journal does. Free again: the file is gone and the gauge is 0.
#[test]
fn a_node_lock_held_without_a_journal_is_seen_by_health() {
    use rustix::fs::{FlockOperation, flock};
    let n = reliability_node(0);
    ok(&Op::Prolog(1, "low").run(&n, &[]));
    let f = std::fs::File::open(n.path("/run/qoslane/lock")).unwrap();
    flock(&f, FlockOperation::LockExclusive).unwrap();
    let gauge = |n: &crate::util::Node, name: &str| -> f64 {
        let text = n.textfile();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .parse()
            .unwrap()
    };
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.starts_with("qoslane: ok, 1 warning: the node lock is held outside a transaction"),
        "{said}"
    );
    let seen = n.path("/run/qoslane/lock-seen.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(s["by"], "health");

    // Seen held for 20 minutes: unhealthy, the gauge says how long.
    s["since"] =
        qoslane::time::rfc3339_seconds(std::time::SystemTime::now() - Duration::from_secs(1200))
            .into();
    std::fs::write(&seen, s.to_string()).unwrap();
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.starts_with("qoslane: the node lock is held outside a transaction")
            && said.contains("since "),
        "{said}"
    );
    assert!(gauge(&n, "qoslane_node_lock_held_seconds") >= 1200.0);

    // Free: no file, the gauge is 0.
    drop(f);
    ok(&n.run(&["health"], &[]));
    assert!(!seen.exists());
    assert_eq!(gauge(&n, "qoslane_node_lock_held_seconds"), 0.0);
    ok(&Op::Epilog(1).run(&n, &[]));
}

// --- scontrol

#[test]
fn fault_squeue_missing_failing_hanging_flooding_or_garbage() {
    // Whatever squeue does, the job gets the default level within the
    // deadline — with its node settings, even when squeue took its whole
    // share of the time — and the audit says why.
    let text = mapping_yaml(&levels(0)).replace("default_level: normal", "default_level: low");
    // A committed file of mode 0644 (a script written here would race with
    // other tests' forks: ETXTBSY).
    let not_exec =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/not-executable");
    let cases: Vec<(&str, Env, &str)> = vec![
        (
            "missing",
            vec![("QOSLANE_SQUEUE", "/nonexistent/squeue".into())],
            "cannot run",
        ),
        (
            "not executable",
            vec![("QOSLANE_SQUEUE", not_exec.display().to_string())],
            "cannot run",
        ),
        (
            "a relative path",
            vec![("QOSLANE_SQUEUE", "squeue".into())],
            "not an absolute path",
        ),
        (
            "failing",
            vec![("FAKE_SQUEUE_FAIL", "1".into())],
            "Unable to contact",
        ),
        (
            "hanging",
            // The default deadline (3 s): squeue gets half of it.
            vec![("FAKE_SQUEUE_SLEEP", "30".into())],
            "deadline of 1",
        ),
        (
            "flooding",
            vec![("FAKE_SQUEUE_FLOOD", "1".into())],
            "printed more than",
        ),
        (
            "garbage",
            vec![("FAKE_SQUEUE_LINE", "hello world".into())],
            "not a QoS name",
        ),
        (
            "components that disagree",
            vec![("FAKE_SQUEUE_LINE", "low\\nmission-critical".into())],
            "disagree",
        ),
        (
            "(null) QoS",
            vec![("FAKE_SQUEUE_LINE", "(null)".into())],
            "accounting",
        ),
        (
            "no output",
            vec![("FAKE_SQUEUE_LINE", " ".into())],
            "no output",
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
        assert_eq!(a["outcome"], "applied", "squeue {what}: {a}");
        assert_eq!(
            (a["level"].as_str(), a["qos_source"].as_str()),
            (Some("low"), Some("default")),
            "squeue {what}: {a}"
        );
        assert!(
            a["notes"][0].as_str().unwrap().contains(needle),
            "squeue {what}: {a}"
        );
        assert_holds(&n, &[(1, "low")], what);
    }
}

// --- smpquery (the fabric check)

fn fabric_node(check: &str) -> Node {
    let n = Node::with_mapping(
        &mapping_yaml(&levels(0))
            .replace("fabric_check: enforce", &format!("fabric_check: {check}")),
    );
    for (p, v) in INITIAL {
        n.set(p, v);
    }
    n.add_hca("qos-identity");
    n
}

/// Breaks smpquery on a node; the environment the runs then need.
type BreakSmpquery = fn(&Node) -> Vec<(&'static str, String)>;

/// Each way smpquery fails: (what, how to break it, what the error says).
fn smpquery_breakages() -> [(&'static str, BreakSmpquery, &'static str); 5] {
    [
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
    ]
}

/// The environment of a run on `n` with smpquery broken by `break_it`: the
/// node's fake smpquery, unless the case names its own (which then wins).
fn broken_smpquery_env(n: &Node, break_it: BreakSmpquery) -> Vec<(&'static str, String)> {
    let mut env = break_it(n);
    env.push(("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string()));
    env.sort_by_key(|(k, _)| *k != "QOSLANE_SMPQUERY"); // an explicit one wins below
    env.reverse();
    env
}

#[test]
fn fault_smpquery_missing_hanging_flooding_garbage_or_failing() {
    for (what, break_it, needle) in smpquery_breakages() {
        // enforce: the level is refused before any change; the policy decides.
        let n = fabric_node("enforce");
        let env = broken_smpquery_env(&n, break_it);
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
        assert_eq!(a["outcome"], "failed", "smpquery {what}, enforce: {a}");
        assert!(
            error_of(&n, "prolog").contains(needle),
            "smpquery {what}: {a}"
        );
        assert_untouched(&n, what);
        let out = Op::Prolog(2, "mission-critical").run(&n, &env);
        assert_eq!(
            out.status.code(),
            Some(qoslane::exit_code::REFUSED),
            "{what}: fail_job: {}",
            show(&out)
        );
        // health: a warning naming it, not a drain — the node serves the
        // other levels' jobs (docs/admin-guide.md §9, health).
        let out = Op::Health.run(&n, &env);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with("qoslane: ok, "),
            "{what}: {}",
            show(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(needle),
            "{what}: {}",
            show(&out)
        );

        // warn: granted anyway, the problem noted — also when smpquery took
        // its whole share of the time.
        let n = fabric_node("warn");
        let env = broken_smpquery_env(&n, break_it);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
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

/// Breaks the installed mapping on a node.
type BreakMapping = fn(&Node);

/// Each way the mapping file is unusable: (what, how to break it, what the
/// error says).
fn mapping_breakages() -> [(&'static str, BreakMapping, &'static str); 7] {
    [
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
                ));
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
    ]
}

#[test]
fn fault_mapping_absent_invalid_huge_or_not_a_file() {
    for (what, break_it, needle) in mapping_breakages() {
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
        // Sync says so and changes nothing. Health drains: with no usable
        // mapping at all no level can be granted (issue 23: it said ok).
        let out = Op::Sync.run(&n, &[]);
        assert_ne!(out.status.code(), Some(0), "{what}: {}", show(&out));
        let out = Op::Health.run(&n, &[]);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("drain: mapping: no usable mapping: "),
            "{what}: {}",
            show(&out)
        );

        // With a last-known-good copy: it is used, the bad file audited once.
        let n = reliability_node(0);
        ok(&Op::Prolog(1, "high").run(&n, &[]));
        break_it(&n);
        ok(&Op::Prolog(2, "low").run(&n, &[]));
        ok(&Op::Prolog(3, "bulk").run(&n, &[]));
        assert_eq!(audit_of(&n, "prolog")["outcome"], "applied", "{what}");
        assert_holds(&n, &[(1, "high"), (2, "low"), (3, "bulk")], what);
        // Health warns and does not drain (regression: one typo drained
        // every node).
        let out = Op::Health.run(&n, &[]);
        assert_eq!(out.status.code(), Some(0), "{what}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("warn: mapping: "),
            "{what}: {}",
            show(&out)
        );
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
