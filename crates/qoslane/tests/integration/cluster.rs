//! `qoslane cluster` (issue 34, item 5): the parsers on what real Slurm
//! printed (`tests/fixtures/slurm/VERSION/`: `scontrol show node -o` and
//! squeue's pending jobs in the view's format, captured by
//! `tests/e2e/placement.sh` with `QOSLANE_CAPTURE_DIR` after a refusal,
//! with `cluster.txt`, what the release binary printed there right after),
//! and the binary against the
//! stand-in `tests/fixtures/bin/slurm-answer` answering those outputs: what
//! it asks, its human and JSON forms, its exit status, an unreachable
//! controller named, as a user that is not root. On real Slurm:
//! tests/e2e/placement.sh.
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use qoslane::commands::cluster;

use crate::util::{self, BIN, Within};

/// The versions whose outputs were captured.
const CAPTURED: &[&str] = &["22.05"];

fn captured(version: &str, file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/slurm")
        .join(version)
        .join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A stand-in named `name` in `dir` answering `out` (or failing with `err`).
fn answer(dir: &Path, name: &str, out: &str, err: Option<&str>) -> PathBuf {
    let link = dir.join(name);
    std::os::unix::fs::symlink(util::fixture_bin("slurm-answer"), &link).unwrap();
    std::fs::write(dir.join(format!("{name}.out")), out).unwrap();
    if let Some(e) = err {
        std::fs::write(dir.join(format!("{name}.err")), e).unwrap();
    }
    link
}

fn calls(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.calls"))).unwrap_or_default()
}

/// `qoslane cluster ARGS` with the stand-ins of `dir`, nothing of the
/// caller's environment, under an empty root.
fn cluster(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("QOSLANE_ROOT", dir.join("root"))
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_SCONTROL", dir.join("scontrol"))
        .env("QOSLANE_SQUEUE", dir.join("squeue"))
        .arg("cluster")
        .args(args);
    c
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_parsers_read_what_real_slurm_printed() {
    for v in CAPTURED {
        let nodes = cluster::nodes(&captured(v, "scontrol-show-node.txt")).unwrap();
        let jobs = cluster::jobs(&captured(v, "squeue.txt")).unwrap();
        let view = cluster::view(&nodes, &jobs);
        let mc = view
            .levels
            .iter()
            .find(|l| l.level == "mission-critical")
            .unwrap();
        assert!(
            mc.carried_on.is_empty() && mc.carried_nowhere,
            "{v}: {mc:?}"
        );
        assert_eq!(mc.not_carried_on.len(), 1, "{v}: the rig's one node");
        let refused = &view.turned_away[0];
        assert!(
            refused
                .admin_comment
                .starts_with("qoslane: level mission-critical (QoS mission-critical) refused on "),
            "{v}: {refused:?}"
        );
        assert_eq!(refused.node.as_ref(), Some(&mc.not_carried_on[0]));
        assert_eq!(
            view.waiting[0].job, refused.job,
            "{v}: it waits for the level"
        );
        // A held job of another level: Slurm prints `(null)` for its empty fields.
        let held = jobs.iter().find(|j| j.reason == "JobHeldUser").unwrap();
        assert_eq!(
            (held.admin_comment.as_deref(), held.features.as_str()),
            (None, "")
        );
        assert_eq!(
            (
                view.pending_jobs,
                view.turned_away.len(),
                view.waiting.len()
            ),
            (2, 1, 1)
        );
    }
}

#[test]
fn the_view_says_who_carries_what_and_which_jobs_wait_and_asks_only_twice() {
    let v = CAPTURED[0];
    let dir = tempfile::tempdir().unwrap();
    answer(
        dir.path(),
        "scontrol",
        &captured(v, "scontrol-show-node.txt"),
        None,
    );
    answer(dir.path(), "squeue", &captured(v, "squeue.txt"), None);
    let out = cluster(dir.path(), &[]).output_within();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a level carried nowhere: {}",
        stdout(&out)
    );
    assert_eq!(
        stdout(&out),
        captured(v, "cluster.txt"),
        "the human form, as the release binary printed it on the rig from the same answers"
    );
    assert_eq!(calls(dir.path(), "scontrol"), "show node -o\n");
    assert_eq!(
        calls(dir.path(), "squeue"),
        format!("-h -a -t PD -O {}\n", cluster::SQUEUE_FORMAT)
    );
    let out = cluster(dir.path(), &["--format", "json"]).output_within();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["schema"], 1);
    assert_eq!(json["levels"][0]["carried_nowhere"], true);

    // The level carried again (its feature active): exit 0, no job waits for it.
    let nodes = captured(v, "scontrol-show-node.txt").replace(
        "ActiveFeatures=qoslane,rackA",
        "ActiveFeatures=qoslane,qoslane_mission-critical,rackA",
    );
    std::fs::write(dir.path().join("scontrol.out"), nodes).unwrap();
    let out = cluster(dir.path(), &[]).output_within();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("● qoslane cluster: 1 node, 1 level placed"),
        "{text}"
    );
    assert!(
        text.contains("mission-critical  1 of 1 nodes (1 in service): "),
        "{text}"
    );
    assert!(
        !text.contains("waiting for a level carried nowhere"),
        "{text}"
    );
}

#[test]
fn an_unreachable_controller_is_an_error_naming_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let unreachable =
        "slurm_load_node error: Unable to contact slurm controller (connect failure)\n";
    answer(dir.path(), "scontrol", "", Some(unreachable));
    answer(dir.path(), "squeue", "", None);
    let out = cluster(dir.path(), &[]).output_within();
    assert_eq!(out.status.code(), Some(69));
    let err = util::stderr(&out);
    assert!(
        err.contains("`scontrol show node -o`: exit status: 1 (slurm_load_node error: Unable to contact slurm controller (connect failure))"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no view from half an answer");
    assert_eq!(
        calls(dir.path(), "squeue"),
        "",
        "squeue not asked after scontrol failed"
    );

    // scontrol answers, squeue does not.
    let dir = tempfile::tempdir().unwrap();
    answer(
        dir.path(),
        "scontrol",
        &captured(CAPTURED[0], "scontrol-show-node.txt"),
        None,
    );
    answer(
        dir.path(),
        "squeue",
        "",
        Some("slurm_load_jobs error: Socket timed out on send/recv operation\n"),
    );
    let out = cluster(dir.path(), &[]).output_within();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        util::stderr(&out).contains("`squeue -h -a -t PD -O "),
        "{}",
        util::stderr(&out)
    );

    // Something else than Slurm's answer (the wrong program).
    let dir = tempfile::tempdir().unwrap();
    answer(dir.path(), "scontrol", "Usage: something else\n", None);
    answer(dir.path(), "squeue", "", None);
    let out = cluster(dir.path(), &[]).output_within();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        util::stderr(&out)
            .contains("no node's line (NodeName=…) in what it printed: \"Usage: something else\""),
        "{}",
        util::stderr(&out)
    );
}

#[test]
fn a_user_that_is_not_root_sees_the_same_and_nothing_is_written() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run as another user");
        return;
    }
    if !util::reachable_by_others() {
        return;
    }
    let v = CAPTURED[0];
    let dir = tempfile::tempdir().unwrap();
    answer(
        dir.path(),
        "scontrol",
        &captured(v, "scontrol-show-node.txt"),
        None,
    );
    answer(dir.path(), "squeue", &captured(v, "squeue.txt"), None);
    use std::os::unix::fs::PermissionsExt;
    // nobody may read the answers and append to the calls; the root stays empty
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = cluster(dir.path(), &[])
        .uid(65534)
        .gid(65534)
        .output_within();
    assert_eq!(out.status.code(), Some(1), "{}", util::stderr(&out));
    assert_eq!(stdout(&out), captured(v, "cluster.txt"));
    assert!(
        !dir.path().join("root").exists(),
        "nothing created under the root"
    );
}
