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
        Some(1),
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
