//! A health run whose fabric read is slow (RELIABILITY: "a passed deadline
//! refused a level"): the node-settings check a passed deadline leaves
//! is unread — a warning, as `grant::decide` treats an unread settings
//! scope under every policy — never "cannot be written", which refused a
//! `fail_job` level on a slow node (its feature withdrawn, grants flapping);
//! and the placement send keeps a share of the run's budget the reads
//! cannot take, so slurmctld still hears the node's levels.
//!
//! The slow read: the stand-in smpquery hangs (`hang`: sleep 30), so the
//! first-hop read runs to the run's deadline (the default 3 s).
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::{self, Node};

const NODE: &str = "n7";

/// `fabric_check: warn` (a fabric read that runs out is a warning, so the
/// settings scope alone decides), one HCA whose SMP queries hang.
fn slow_fabric_node() -> Node {
    let n = Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: warn"));
    n.add_hca("qos-identity");
    n.smpquery_file("hang", "");
    n
}

fn grant(n: &Node, level: &str) -> serde_json::Value {
    let record: serde_json::Value =
        serde_json::from_str(&n.read("/run/qoslane/grants.json")).unwrap();
    record["grants"][level].clone()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_deadline_passed_before_the_settings_check_is_unread_not_a_refusal() {
    let n = slow_fabric_node();
    let smpquery = n.fake_smpquery().display().to_string();
    let out = n.run(
        &["health"],
        &[
            ("QOSLANE_SMPQUERY", smpquery.as_str()),
            ("SLURMD_NODENAME", NODE),
        ],
    );
    let text = stdout(&out);
    let mc = grant(&n, "mission-critical");
    assert_eq!(
        mc["decision"], "granted_with_warnings",
        "a passed deadline refuses no level: {mc:#}\n{text}"
    );
    let warnings = mc["warnings"].to_string();
    assert!(
        warnings.contains("node settings could not be checked") && warnings.contains("deadline"),
        "said as unread: {warnings}"
    );
    assert!(
        !text.contains("cannot be written") && !mc.to_string().contains("cannot be written"),
        "never 'cannot be written': {text}"
    );
    // The recorded scope says unread too (what a Prolog takes from it).
    let record: serde_json::Value =
        serde_json::from_str(&n.read("/run/qoslane/grants.json")).unwrap();
    let s = &record["settings"]["levels"]["mission-critical"];
    assert!(
        s["problems"].as_array().is_none_or(Vec::is_empty) && s["unread"].is_string(),
        "{s:#}"
    );
}

#[test]
fn a_slow_fabric_read_leaves_the_placement_send_its_share() {
    let n = slow_fabric_node();
    let smpquery = n.fake_smpquery().display().to_string();
    let scontrol = n.fake_scontrol(&[]).display().to_string();
    let out = n.run(
        &["health"],
        &[
            ("QOSLANE_SMPQUERY", smpquery.as_str()),
            ("QOSLANE_SCONTROL", scontrol.as_str()),
            ("SLURMD_NODENAME", NODE),
        ],
    );
    let text = stdout(&out);
    assert_eq!(
        n.scontrol_calls(),
        [
            format!("show node -o {NODE}"),
            format!("update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical"),
        ],
        "the first send since boot, after a fabric read that ran out: {text}"
    );
    assert!(
        n.last_audit("health")["notes"]
            .to_string()
            .contains("placement: ok: sent active features qoslane,qoslane_mission-critical"),
        "{}",
        n.last_audit("health")["notes"]
    );
}
