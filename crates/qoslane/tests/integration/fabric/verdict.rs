//! The fabric verdict on the multi-switch rig (issue 34, item 4): `qoslane
//! fabric audit --verdict FILE` names exactly the HCAs under the leaf a
//! spine drops a level toward, and the audit after the repair names none;
//! on a ring routed by minhop, every level's credit loop reaches every
//! node. What a node makes of the file: `fabric_verdict.rs`.

use super::MAPPING;
use super::path::{PathRig, audit, write};
use super::reader::audit_in_process_with;
use super::rig::{read, repo, rig_wanted};

/// Per level of the verdict, the node descriptions that lose it.
fn lost(v: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let who = l["lost"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["node"].as_str().unwrap().to_owned())
                .collect();
            (l["level"].as_str().unwrap().to_owned(), who)
        })
        .collect()
}

#[test]
fn path_verdict_names_the_hcas_under_the_leaf_a_spine_drops_toward() {
    if !rig_wanted("path_verdict") {
        return;
    }
    // spine1 port 2 (toward leaf2: node3, node4) drops SL 3.
    let rig = PathRig::start(&["-m", "spine1:2:3:15"]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let file = rig.dir.path().join("verdict.json");
    let out = audit(
        &node,
        &m,
        &["--format", "json", "--verdict", file.to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["mapping_sha256"], report["mapping_sha256"]);
    assert_eq!(v["hcas"].as_array().unwrap().len(), 6, "{v:#}");
    let mut want = vec![(
        "mission-critical".to_owned(),
        vec!["node3 HCA-1".to_owned(), "node4 HCA-1".to_owned()],
    )];
    for l in ["high", "normal", "low"] {
        want.push((l.to_owned(), Vec::new()));
    }
    let mut got = lost(&v);
    for (_, who) in &mut got {
        who.sort();
    }
    assert_eq!(got, want, "{v:#}");
    let mc = &v["levels"][0];
    for p in mc["lost"].as_array().unwrap() {
        assert_eq!(
            p["lines"],
            serde_json::json!([
                "fabric path: spine1 port 2 -> leaf2: SL 3 -> VL 15 (dropped: VL 15 is the management lane)"
            ]),
            "{p}"
        );
    }
    for l in v["levels"].as_array().unwrap() {
        assert_eq!(l["unread"], serde_json::json!([]), "{l}");
    }

    // Repaired (a fresh SM rewrites every table): the next verdict names none.
    rig.lever("restart-sm", &[]);
    let out = audit(&node, &m, &["--verdict", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert!(lost(&v).iter().all(|(_, who)| who.is_empty()), "{v:#}");
}

#[test]
fn path_verdict_carries_a_rings_credit_loop_to_every_hca() {
    if !rig_wanted("path_verdict_ring") {
        return;
    }
    let net = repo().join("rigs/net.ring5");
    let rig = PathRig::start(&["-t", net.to_str().unwrap(), "-o", "routing_engine=minhop"]);
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let file = rig.dir.path().join("verdict.json");
    // The deadlock check reads the forwarding tables in process.
    let node = rig.node2_as("ibsim0");
    let out = audit_in_process_with(&rig, &node, &m, &["--verdict", file.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&read(&file)).unwrap();
    assert_eq!(v["hcas"].as_array().unwrap().len(), 5, "{v:#}");
    for l in v["levels"].as_array().unwrap() {
        let cycle = l["credit_loop"].as_str().unwrap_or_else(|| panic!("{l}"));
        assert!(cycle.starts_with("credit loop"), "{cycle}");
        // The lanes themselves are carried: no node loses by a port.
        assert_eq!(l["lost"], serde_json::json!([]), "{l}");
    }
}
