//! A mapping takes effect as a transaction: a new mapping is put in force
//! (and becomes last-known-good) only when it is valid and every level
//! passes the fabric check under the policy; otherwise the previous copy
//! stays in force — for `sync` and for the first Prolog to see the change
//! alike — and `sync --dry-run` says what would happen.

use crate::util::{self, Node, ok, stderr};

const LKG: &str = "/var/lib/qoslane/last-known-good.yml";

fn fabric_node() -> Node {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_hca("qos-identity");
    n
}

fn env(n: &Node) -> Vec<(&'static str, String)> {
    vec![("QOSLANE_SMPQUERY", n.fake_smpquery().display().to_string())]
}

fn run(n: &Node, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    let e = env(n);
    let mut all: Vec<(&str, &str)> = e.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    n.run(args, &all)
}

/// `high` on VL 5, which the SM (identity SL2VL) does not give SL 2.
fn misaligned() -> String {
    util::MAPPING
        .replace("fabric_check: off", "fabric_check: enforce")
        .replace(
            "service_level: 2\n    virtual_lane: 2",
            "service_level: 2\n    virtual_lane: 5",
        )
}

/// Regression (issue 39, item 8): `sync` contradicted itself. After an edit
/// that changes no node setting it said `unchanged: nothing changed`; with
/// the mapping in force refused by a fabric drift it said both "in force"
/// and "not put in force" (the same hash, recorded as rejected). One verdict
/// per outcome, and the exit status follows the levels.
#[test]
fn sync_says_one_verdict_per_outcome() {
    let n = fabric_node();
    ok(&run(&n, &["sync"], &[]));
    // An edit that changes no node setting (an exported traffic class).
    n.write_mapping(
        &util::MAPPING
            .replace("fabric_check: off", "fabric_check: enforce")
            .replace("traffic_class: 106", "traffic_class: 104"),
    );
    let out = run(&n, &["sync"], &[]);
    ok(&out);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.starts_with("sync: applied: mapping sha256 ")
            && said.contains(" put in force (replacing sha256 ")
            && said.contains("no node setting changed")
            && !said.contains("unchanged"),
        "{said}"
    );
    assert_eq!(n.last_audit("sync")["outcome"], "applied");
    let in_force = n.get(LKG);

    // The fabric drifts: the mapping in force no longer passes the gate.
    n.answer_smpquery("qos-vl15");
    let out = run(&n, &["sync"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let a = n.last_audit("sync");
    let notes = a["notes"].to_string();
    assert!(!notes.contains("not put in force"), "{a}");
    assert!(
        !n.path("/var/lib/qoslane/rejected.json").exists(),
        "the mapping in force is not recorded as rejected"
    );
    assert_eq!(n.get(LKG), in_force);
    let err = a["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("stays in force") && err.contains("not granted"),
        "{a}"
    );
}

/// Regression: `sync` printed `now last-known-good`, then failed with the
/// fabric problem — and the new mapping was in force: `high` jobs then ran
/// with no SL exports.
#[test]
fn sync_keeps_the_previous_mapping_when_a_level_fails_the_fabric() {
    let n = fabric_node();
    ok(&run(&n, &["sync"], &[]));
    let good = n.get(LKG);
    n.write_mapping(&misaligned());

    let out = run(&n, &["sync", "--dry-run"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("would NOT put it in force"), "{said}");
    assert!(said.contains("SL 2 -> VL 2, want VL 5"), "{said}");
    assert_eq!(n.get(LKG), good, "a dry run changes nothing");

    let out = run(&n, &["sync"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("now last-known-good"),
        "{}",
        stderr(&out)
    );
    assert_eq!(n.get(LKG), good, "the previous copy stays in force");
    let a = n.last_audit("sync");
    assert!(a["notes"].to_string().contains("not put in force"), "{a}");

    // The Prologs agree: a high job gets the level of the copy in force.
    let out = run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "1"), ("FAKE_QOS", "high")],
    );
    ok(&out);
    assert_eq!(
        n.last_audit("prolog")["outcome"],
        "applied",
        "{}",
        stderr(&out)
    );
    assert_eq!(
        Node::exports(&n.task_prolog(1, &[]))
            .get("UCX_IB_SL")
            .map(String::as_str),
        Some("2")
    );
    // And health says why, without draining.
    let out = run(&n, &["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not put in force"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The first Prolog to see a changed mapping judges it as `sync` would.
#[test]
fn a_prolog_that_first_sees_a_refused_mapping_keeps_the_previous_one() {
    let n = fabric_node();
    ok(&run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "1"), ("FAKE_QOS", "low")],
    ));
    let good = n.get(LKG);
    n.write_mapping(&misaligned());
    let out = run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "2"), ("FAKE_QOS", "high")],
    );
    ok(&out);
    assert_eq!(n.get(LKG), good, "not promoted");
    let p = n.last_audit("prolog");
    assert_eq!(p["outcome"], "applied", "served by the previous copy: {p}");
    assert!(p["notes"].to_string().contains("not put in force"), "{p}");
    // A valid mapping the fabric carries is put in force by the next run.
    n.write_mapping(
        &util::MAPPING
            .replace("fabric_check: off", "fabric_check: enforce")
            .replace("value: \"74\"", "value: \"75\""),
    );
    ok(&run(&n, &["sync"], &[]));
    assert_ne!(n.get(LKG), good);
}

/// Regression: the fabric cache (up to 300 s) hid an SM change from the
/// Prolog: after OpenSM moved a level's SL to another VL, a `fail_job` job of
/// that level was still granted. A `fail_job` level relies only on a probe
/// younger than `fail_job_max_probe_age` (default 15 s; 0 here: always
/// probe); other levels keep the cache.
#[test]
fn a_fail_job_level_never_relies_on_an_old_probe() {
    let n = fabric_node();
    n.write_mapping(&format!(
        "fail_job_max_probe_age: 0\n{}",
        util::MAPPING.replace("fabric_check: off", "fabric_check: enforce")
    ));
    ok(&run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "1"), ("FAKE_QOS", "mission-critical")],
    ));
    ok(&run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "2"), ("FAKE_QOS", "high")],
    ));
    for id in ["1", "2"] {
        ok(&n.run(&["epilog"], &[("SLURM_JOB_ID", id)]));
    }
    // The SM re-sweeps with another table; no port identity changes.
    n.answer_smpquery("qos-reversed");
    let out = run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "3"), ("FAKE_QOS", "mission-critical")],
    );
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "fail_job refused at once: {}",
        stderr(&out)
    );
    let out = run(
        &n,
        &["prolog"],
        &[("SLURM_JOB_ID", "4"), ("FAKE_QOS", "high")],
    );
    ok(&out);
    let p = n.last_audit("prolog");
    assert_eq!(
        p["fabric"]["ports"][0]["source"], "cache",
        "a continue level keeps the cache: {p}"
    );
}

/// Regression (issue 24, defect 7): a Prolog read the mapping at its start
/// and promoted it to last-known-good under the node lock much later; a
/// rollout in between (a new file installed, `qoslane sync` done) was undone:
/// the old text promoted back, a change back to it audited, the job granted
/// the old settings. The Prolog is held between its reading and its
/// promotion (`QOSLANE_FAULT=hold:promote:DIR`) while the rollout lands.
#[cfg(feature = "fault-injection")]
#[test]
fn a_prolog_that_read_the_mapping_before_a_sync_never_undoes_it() {
    let n = Node::new();
    ok(&n.run(&["sync"], &[]));
    let old = n.get(LKG);
    let mut prolog = held(
        &n,
        &[
            ("SLURM_JOB_ID", "7"),
            ("FAKE_QOS", "high"),
            ("SLURM_JOB_USER", "alice"),
        ],
        "prolog",
    );
    // The rollout: a new mapping installed and put in force.
    n.write_mapping(&util::MAPPING.replace("value: \"74\"", "value: \"75\""));
    ok(&n.run(&["sync"], &[]));
    let new = n.get(LKG);
    assert_ne!(new, old);
    let synced = n.last_audit("sync")["mapping_sha256"].clone();
    let changes_before = n.audit_events("mapping_changed").len();

    let status = prolog.go();
    assert!(status.success(), "{status}");
    assert_eq!(n.get(LKG), new, "last-known-good stays the new text");
    assert_eq!(
        n.audit_events("mapping_changed").len(),
        changes_before,
        "no change back to the old text audited: {:?}",
        n.audit_events("mapping_changed")
    );
    let p = n.last_audit("prolog");
    assert_eq!(p["outcome"], "applied", "{p}");
    assert_eq!(
        p["mapping_sha256"], synced,
        "the job's level comes from the mapping in force: {p}"
    );
    assert_eq!(n.get(util::TOS), "75", "the new mapping's setting: {p}");
    // The next job too.
    ok(&n.prolog(8, "high"));
    assert_eq!(n.last_audit("prolog")["mapping_sha256"], synced);
}

/// Two rollouts at once: a `sync` that judged a mapping while another one
/// was put in force fails and changes nothing (it never puts its older text
/// back); last-known-good stays what the other `sync` promoted.
#[cfg(feature = "fault-injection")]
#[test]
fn a_sync_overtaken_by_another_rollout_puts_nothing_back() {
    let n = Node::new();
    ok(&n.run(&["sync"], &[]));
    let mut first = held(&n, &[], "sync");
    n.write_mapping(&util::MAPPING.replace("value: \"74\"", "value: \"75\""));
    ok(&n.run(&["sync"], &[]));
    let new = n.get(LKG);
    let status = first.go();
    assert_eq!(status.code(), Some(74), "{status}");
    assert_eq!(n.get(LKG), new);
    let s = n.last_audit("sync");
    assert!(
        s["error"]
            .to_string()
            .contains("changed while this sync ran"),
        "{s}"
    );
}

/// A run of `cmd` held at its promotion (`QOSLANE_FAULT=hold:promote:DIR`),
/// returned once it holds, with a deadline long enough to wait.
#[cfg(feature = "fault-injection")]
fn held(n: &Node, env: &[(&str, &str)], cmd: &str) -> Held {
    let dir = n.path(&format!("/hold-{cmd}"));
    std::fs::create_dir_all(&dir).expect("the hold directory");
    let fault = format!("hold:promote:{}", dir.display());
    let mut all = vec![
        ("QOSLANE_TIMEOUT_MS", "60000"),
        ("QOSLANE_FAULT", fault.as_str()),
    ];
    all.extend_from_slice(env);
    let mut proc = util::Proc::spawn(
        "a held run",
        n.cmd(&[cmd], &all)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    let since = std::time::Instant::now();
    while !dir.join("held").exists() {
        assert!(proc.exited().is_none(), "{cmd} ended before its hold");
        assert!(since.elapsed().as_secs() < 60, "{cmd} never held");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Held { proc, dir }
}

#[cfg(feature = "fault-injection")]
struct Held {
    proc: util::Proc,
    dir: std::path::PathBuf,
}

#[cfg(feature = "fault-injection")]
impl Held {
    /// Lets the run go on; its exit status.
    fn go(&mut self) -> std::process::ExitStatus {
        std::fs::write(self.dir.join("go"), b"").expect("the go file");
        let since = std::time::Instant::now();
        loop {
            if let Some(s) = self.proc.exited() {
                return s;
            }
            assert!(since.elapsed().as_secs() < 120, "the held run never ended");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}
