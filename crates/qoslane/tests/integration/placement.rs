//! The node's placement sync (issue 34): `health` keeps the node's qoslane
//! features active in slurmctld as its grants say, through the committed
//! stand-in `tests/fixtures/bin/scontrol` — nothing sent while nothing
//! changed, one update on a change, the first run after boot and a refresh
//! reading the node's own features first, a failure a warning that the next
//! run retries, never a call under the node lock, nothing at all with
//! placement off. On real Slurm: tests/e2e/placement.sh.
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::{self, Node};

const NODE: &str = "n7";

fn health(n: &Node, fake: &[(&str, &str)]) -> std::process::Output {
    let scontrol = n.fake_scontrol(fake).display().to_string();
    n.run(
        &["health"],
        &[
            ("QOSLANE_SCONTROL", scontrol.as_str()),
            ("SLURMD_NODENAME", NODE),
        ],
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// mission-critical (util::MAPPING's `fail_job` level) loses its grant:
/// its node setting cannot be written.
fn break_mission_critical(n: &Node) {
    std::fs::remove_file(n.path(util::RMEM)).unwrap();
    std::fs::create_dir(n.path(util::RMEM)).unwrap();
}

fn repair_mission_critical(n: &Node) {
    std::fs::remove_dir(n.path(util::RMEM)).unwrap();
    n.set(util::RMEM, util::BASE_RMEM);
}

fn notes(n: &Node) -> String {
    n.last_audit("health")["notes"].to_string()
}

fn sent(n: &Node) -> serde_json::Value {
    serde_json::from_str(&n.read("/run/qoslane/placement.json")).unwrap()
}

#[test]
fn health_sends_the_features_on_the_first_run_and_a_change_only() {
    let n = Node::new();
    let rack = [("FAKE_SCONTROL_FEATURES", "rackA,ib")];
    let out = health(&n, &rack);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    // The first run after boot: the node's own features read, then one update.
    assert_eq!(
        n.scontrol_calls(),
        [
            format!("show node -o {NODE}"),
            format!(
                "update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical,rackA,ib"
            ),
        ]
    );
    assert!(
        notes(&n).contains(
            "placement: ok: sent active features qoslane,qoslane_mission-critical,rackA,ib (first since boot)"
        ),
        "{}",
        notes(&n)
    );
    assert_eq!(sent(&n)["site"], serde_json::json!(["rackA", "ib"]));

    // Unchanged: nothing sent.
    let out = health(&n, &rack);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(n.scontrol_calls().len(), 2, "0 calls when unchanged");
    assert!(
        notes(&n).contains(
            "placement: ok: active features qoslane,qoslane_mission-critical,rackA,ib (sent before)"
        ),
        "{}",
        notes(&n)
    );

    // The level lost: one update, the node's own features kept from the record.
    break_mission_critical(&n);
    let out = health(&n, &rack);
    assert_eq!(out.status.code(), Some(0), "a warning, not a drain");
    let calls = n.scontrol_calls();
    assert_eq!(
        calls[2..],
        [format!(
            "update NodeName={NODE} ActiveFeatures=qoslane,rackA,ib"
        )],
        "1 call on a change"
    );
    assert!(notes(&n).contains("(changed)"), "{}", notes(&n));
    health(&n, &rack);
    assert_eq!(n.scontrol_calls().len(), 3, "0 calls when unchanged");

    // Granted again: the feature back, one call.
    repair_mission_critical(&n);
    health(&n, &rack);
    assert_eq!(
        n.scontrol_calls()[3..],
        [format!(
            "update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical,rackA,ib"
        )]
    );
    assert!(
        n.scontrol_calls().iter().all(|c| !c.ends_with("LOCKED")),
        "never under the node lock: {:?}",
        n.scontrol_calls()
    );
}

/// The node's own features changed in slurm.conf (an admin removed one and
/// reconfigured) after the node's last send: a change of its grant sent
/// with the features of its record is refused by slurmctld (`Active features
/// not subset of available features`); the send reads them again and sends
/// once more, so that the node is not refused at every run until a reboot.
#[test]
fn a_send_refused_for_a_feature_no_longer_available_reads_the_nodes_features_again() {
    let n = Node::new();
    let out = health(&n, &[("FAKE_SCONTROL_FEATURES", "rackA,ib")]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(sent(&n)["site"], serde_json::json!(["rackA", "ib"]));
    // slurm.conf without `ib`, reconfigured; then the level is lost.
    let rack = [("FAKE_SCONTROL_FEATURES", "rackA")];
    break_mission_critical(&n);
    let out = health(&n, &rack);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        n.scontrol_calls()[2..],
        [
            format!("update NodeName={NODE} ActiveFeatures=qoslane,rackA,ib"),
            format!("show node -o {NODE}"),
            format!("update NodeName={NODE} ActiveFeatures=qoslane,rackA"),
        ],
        "refused, the features read again, sent"
    );
    assert_eq!(sent(&n)["site"], serde_json::json!(["rackA"]));
    assert!(notes(&n).contains("(changed)"), "{}", notes(&n));
    // Healed: the level back, one call.
    repair_mission_critical(&n);
    health(&n, &rack);
    assert_eq!(
        n.scontrol_calls()[5..],
        [format!(
            "update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical,rackA"
        )]
    );
}

#[test]
fn a_failed_send_is_a_warning_and_the_next_run_sends_again() {
    let n = Node::new();
    let out = health(&n, &[("FAKE_SCONTROL_FAIL", "1")]);
    assert_eq!(out.status.code(), Some(0), "the node stays in service");
    let text = stdout(&out);
    assert!(
        text.contains("placement: could not tell slurmctld this node's levels (first since boot)")
            && text.contains("Unable to contact slurm controller"),
        "{text}"
    );
    assert!(
        !n.path("/run/qoslane/placement.json").exists(),
        "not recorded: not sent"
    );
    assert_eq!(n.scontrol_calls().len(), 1);
    let out = health(&n, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        n.scontrol_calls()[1..],
        [
            format!("show node -o {NODE}"),
            format!("update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical"),
        ],
        "retried"
    );
    assert!(n.path("/run/qoslane/placement.json").exists());
}

/// scontrol that never answers (slurmctld hung, or a network that drops):
/// health ends within its deadline, exits 0 (hookrun does not drain the
/// node), says so in a warning naming scontrol, records nothing; the next
/// run sends.
#[test]
fn a_hung_scontrol_is_a_warning_within_the_deadline_and_the_next_run_sends() {
    let n = Node::new();
    let scontrol = n
        .fake_scontrol(&[("FAKE_SCONTROL_HANG", "1")])
        .display()
        .to_string();
    let out = n.run(
        &["health"],
        &[
            ("QOSLANE_SCONTROL", scontrol.as_str()),
            ("SLURMD_NODENAME", NODE),
            ("QOSLANE_TIMEOUT_MS", "1500"),
        ],
    );
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the node stays in service: {text}{}",
        util::stderr(&out)
    );
    assert!(
        text.contains("placement: could not tell slurmctld this node's levels (first since boot)")
            && text.contains(&format!(
                "scontrol show node -o {NODE}: deadline of 1500 ms passed"
            ))
            && text.contains("the next health run sends again"),
        "{text}"
    );
    assert!(
        notes(&n).contains("placement: WARN"),
        "the audit line says it: {}",
        notes(&n)
    );
    assert!(
        !n.path("/run/qoslane/placement.json").exists(),
        "not recorded"
    );
    let out = health(&n, &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        n.scontrol_calls()[1..],
        [
            format!("show node -o {NODE}"),
            format!("update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical"),
        ],
        "retried"
    );
}

#[test]
fn an_old_send_is_refreshed_and_another_node_name_sends() {
    let n = Node::new();
    health(&n, &[]);
    assert_eq!(n.scontrol_calls().len(), 2);
    // Sent 31 minutes ago: a reconfigure may have reset it since.
    let mut s = sent(&n);
    s["at_unix"] = serde_json::json!(s["at_unix"].as_u64().unwrap() - 31 * 60);
    n.write(
        "/run/qoslane/placement.json",
        &serde_json::to_string(&s).unwrap(),
    );
    health(&n, &[]);
    assert!(notes(&n).contains("(refresh)"), "{}", notes(&n));
    assert_eq!(n.scontrol_calls().len(), 4, "read again and sent");
    health(&n, &[]);
    assert_eq!(n.scontrol_calls().len(), 4, "then nothing");
    let mut s = sent(&n);
    s["node"] = serde_json::json!("other");
    n.write(
        "/run/qoslane/placement.json",
        &serde_json::to_string(&s).unwrap(),
    );
    health(&n, &[]);
    assert_eq!(
        n.scontrol_calls().len(),
        6,
        "a record of another name: sent"
    );
}

#[test]
fn placement_off_sends_nothing_and_says_nothing() {
    let n = Node::new();
    n.fake_scontrol(&[]);
    let out = n.run(&["health"], &[("SLURMD_NODENAME", NODE)]);
    assert_eq!(out.status.code(), Some(0));
    assert!(n.scontrol_calls().is_empty());
    assert!(!stdout(&out).contains("placement"), "{}", stdout(&out));
    assert!(!n.path("/run/qoslane/placement.json").exists());
}

/// A Prolog that refuses its `fail_job` level (its probe saw SL 3 dropped,
/// which the last health run did not) sends the node's features without the
/// level at once, after the lock; its job is refused as before.
#[test]
fn a_refusing_prolog_takes_the_level_off_at_once() {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_hca("qos-identity");
    let smpquery = n.fake_smpquery().display().to_string();
    let scontrol = n.fake_scontrol(&[]).display().to_string();
    let env = [
        ("QOSLANE_SMPQUERY", smpquery.as_str()),
        ("QOSLANE_SCONTROL", scontrol.as_str()),
        ("SLURMD_NODENAME", NODE),
    ];
    let out = n.run(&["health"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(n.scontrol_calls().len(), 2);
    // The SM drops SL 3 (mission-critical's): the next Prolog probes again.
    n.answer_smpquery("qos-vl15");
    let _ = std::fs::remove_file(n.path("/run/qoslane/fabric.json"));
    let mut prolog_env = env.to_vec();
    prolog_env.extend([
        ("SLURM_JOB_ID", "5"),
        ("FAKE_QOS", "mission-critical"),
        ("SLURM_JOB_USER", "alice"),
    ]);
    let out = n.run(&["prolog"], &prolog_env);
    assert_eq!(
        out.status.code(),
        Some(100),
        "refused: {}",
        util::stderr(&out)
    );
    assert_eq!(
        n.scontrol_calls()[2..],
        [format!("update NodeName={NODE} ActiveFeatures=qoslane")],
        "one update, without the level"
    );
    assert!(
        n.last_audit("prolog")["notes"].to_string().contains(
            "placement: sent active features qoslane (level mission-critical refused here)"
        ),
        "{}",
        n.last_audit("prolog")["notes"]
    );
    // health agrees (the level is still not carried): nothing more sent.
    n.run(&["health"], &env);
    assert_eq!(n.scontrol_calls().len(), 3, "{:?}", n.scontrol_calls());
    // slurmctld gave the node all its features back (`scontrol reconfigure`,
    // a restart without -R), which the node cannot see: another job of the
    // level lands here and is refused. Its Prolog sends the node's set again
    // (its own features read first: slurm.conf may have changed), though the
    // record says it was sent: else every such job is refused here until
    // the refresh.
    prolog_env[3] = ("SLURM_JOB_ID", "6");
    let out = n.run(&["prolog"], &prolog_env);
    assert_eq!(out.status.code(), Some(100), "{}", util::stderr(&out));
    assert_eq!(
        n.scontrol_calls()[3..],
        [
            format!("show node -o {NODE}"),
            format!("update NodeName={NODE} ActiveFeatures=qoslane"),
        ],
        "sent again"
    );
    assert!(
        n.last_audit("prolog")["notes"].to_string().contains(
            "placement: sent active features qoslane (level mission-critical refused here)"
        ),
        "{}",
        n.last_audit("prolog")["notes"]
    );
    n.run(&["health"], &env);
    assert_eq!(n.scontrol_calls().len(), 5, "{:?}", n.scontrol_calls());
    assert!(
        n.scontrol_calls().iter().all(|c| !c.ends_with("LOCKED")),
        "never under the node lock: {:?}",
        n.scontrol_calls()
    );
}
