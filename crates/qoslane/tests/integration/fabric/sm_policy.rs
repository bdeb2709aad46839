//! `qoslane fabric sm-config`'s QoS policy on the real OpenSM of the
//! multi-switch rig (rigs/fabric_path_rig.sh): the generated options name
//! the generated qos-policy.conf (`qos_policy_file`), OpenSM loads it
//! without an error, and the SA answers a path record query carrying each
//! declared class (QoS class, service ID, PKey; `saquery`, rigs/saquery-sim)
//! with the level's SL, and any other query with the default level's.
//! A PKey the policy names must be a partition of the SM: without one,
//! OpenSM logs ERR AC14, keeps the rest of the policy, and the SA has no
//! path with that PKey at all.

use crate::util::Within as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use qoslane::fabric::read::parse::parse_path_record_sl;

use super::path::{PathRig, write};
use super::rig::{read, repo, rig_wanted};
use crate::sm_config::SM_TRAFFIC;
use crate::util::BIN;

/// `qoslane fabric sm-config --config MAPPING ARGS`'s stdout.
fn sm_config(mapping: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .env_clear()
        .env("QOSLANE_NO_JOURNAL", "1")
        .args(["fabric", "sm-config", "--config"])
        .arg(mapping)
        .args(args)
        .output_within();
    assert!(
        out.status.success(),
        "sm-config {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The options and the policy for `mapping`, written into `dir`; the
/// options' path and the declared classes.
fn generate(dir: &Path, mapping: &Path) -> (PathBuf, Vec<serde_json::Value>) {
    let policy = dir.join("qos-policy.conf");
    std::fs::write(&policy, sm_config(mapping, &["--qos-policy"])).unwrap();
    let options = write(
        dir,
        "opensm-qos.conf",
        &sm_config(mapping, &["--qos-policy-file", policy.to_str().unwrap()]),
    );
    let json: serde_json::Value =
        serde_json::from_str(&sm_config(mapping, &["--qos-policy", "--format", "json"])).unwrap();
    (options, json["classes"].as_array().unwrap().clone())
}

/// The SL of the path record node2 gets for node3 when its query carries
/// `query` (saquery's flags); none when the SA has no such path.
fn path_sl(rig: &PathRig, query: &[&str]) -> Option<u8> {
    let lid = |name: &str| {
        read(Path::new(rig.var("RIG_NODES")))
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|c| c[0] == name)
            .unwrap_or_else(|| panic!("no {name} in nodes.tsv"))[2]
            .to_owned()
    };
    let mut c = Command::new(repo().join("rigs/saquery-sim"));
    for k in ["IBSIM_SOCKNAME", "RIG_UMAD2SIM", "RIG_WORK"] {
        c.env(k, rig.var(k));
    }
    let out = c
        .env("SIM_HOST", "node2")
        .arg("-p")
        .args(query)
        .arg("--src-to-dst")
        .arg(format!("{}:{}", lid("node2"), lid("node3")))
        .output_within();
    let text = String::from_utf8_lossy(&out.stdout);
    // No path: saquery prints no record (and exits 0).
    if !text.contains("PathRecord dump:") {
        return None;
    }
    Some(parse_path_record_sl(&text).unwrap_or_else(|e| panic!("saquery {query:?}: {e}\n{text}")))
}

/// saquery's flags for a declared class (a PKey with its membership bit).
fn query(class: &serde_json::Value) -> Option<[String; 2]> {
    let v = class["value"].as_u64().unwrap();
    Some(match class["field"].as_str().unwrap() {
        "qos-class" => ["--qos_class".into(), v.to_string()],
        "service-id" => ["--service_id".into(), format!("{v:#x}")],
        "pkey" => ["--pkey".into(), format!("{:#06x}", v | 0x8000)],
        // A target GUID: no port of the rig has it.
        _ => return None,
    })
}

fn qos_errors(rig: &PathRig) -> Vec<String> {
    read(&Path::new(rig.var("RIG_WORK")).join("opensm.log"))
        .lines()
        .filter(|l| l.contains("ERR") && l.to_ascii_lowercase().contains("qos"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn rig_the_generated_policy_is_loaded_by_opensm_and_each_class_gets_its_level_sl() {
    if !rig_wanted("rig_the_generated_policy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mapping = write(dir.path(), "m.yml", SM_TRAFFIC);
    let (options, classes) = generate(dir.path(), &mapping);
    let partitions = write(
        dir.path(),
        "partitions.conf",
        "Default=0x7fff, ipoib : ALL=full ;\nstorage=0x8001 : ALL=full ;\n",
    );
    let rig = PathRig::start(&[
        "-c",
        options.to_str().unwrap(),
        "-o",
        &format!("partition_config_file={}", partitions.display()),
    ]);
    let log = read(&Path::new(rig.var("RIG_WORK")).join("opensm.log"));
    let policy = dir.path().join("qos-policy.conf");
    assert!(
        log.contains(&format!("Loading QoS policy file ({})", policy.display())),
        "OpenSM did not load the policy the options name:\n{log}"
    );
    assert_eq!(qos_errors(&rig), Vec::<String>::new());
    let mut asked = 0;
    for class in &classes {
        let Some(q) = query(class) else { continue };
        let got = path_sl(&rig, &[&q[0], &q[1]]);
        assert_eq!(
            got.map(u64::from),
            class["sl"].as_u64(),
            "{} of level {}: the SA answered SL {got:?}",
            class["traffic"],
            class["level"]
        );
        asked += 1;
    }
    assert_eq!(asked, 7, "every class but the SRP target asked");
    // Anything else: the default level's SL (bulk, SL 0), not a level's.
    assert_eq!(path_sl(&rig, &["--service_id", "0x1234"]), Some(0));
    assert_eq!(path_sl(&rig, &["--qos_class", "5"]), Some(0));
}

#[test]
fn rig_a_pkey_without_a_partition_is_refused_by_opensm() {
    if !rig_wanted("rig_a_pkey_without_a_partition") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mapping = write(dir.path(), "m.yml", SM_TRAFFIC);
    let (options, _) = generate(dir.path(), &mapping);
    let rig = PathRig::start(&["-c", options.to_str().unwrap()]);
    let errors = qos_errors(&rig);
    assert!(
        errors
            .iter()
            .any(|l| l.contains("AC14") && l.contains("partition doesn't exist")),
        "{errors:?}"
    );
    // The rest of the policy holds; the PKey has no path at all.
    assert_eq!(path_sl(&rig, &["--qos_class", "106"]), Some(3));
    assert_eq!(path_sl(&rig, &["--service_id", "0x10603db"]), Some(3));
    assert_eq!(path_sl(&rig, &["--pkey", "0x8001"]), None);
}

/// What the Omnia role does on a mapping change: the policy file rewritten
/// in place, OpenSM sent SIGHUP. The heavy sweep reads the policy again.
#[test]
fn rig_a_rewritten_policy_is_read_again_on_sighup() {
    if !rig_wanted("rig_a_rewritten_policy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mapping = write(dir.path(), "m.yml", SM_TRAFFIC);
    let (options, _) = generate(dir.path(), &mapping);
    let rig = PathRig::start(&["-c", options.to_str().unwrap()]);
    assert_eq!(path_sl(&rig, &["--qos_class", "106"]), Some(3));
    // gold.rt moves to SL 4; the same file, rewritten.
    let moved = write(
        dir.path(),
        "m2.yml",
        &SM_TRAFFIC.replace(
            "service_level: 3\n    virtual_lane: 3",
            "service_level: 4\n    virtual_lane: 4",
        ),
    );
    let policy = dir.path().join("qos-policy.conf");
    std::fs::write(&policy, sm_config(&moved, &["--qos-policy"])).unwrap();
    rig.lever("reconf", &["qos_policy_file", policy.to_str().unwrap()]);
    assert_eq!(path_sl(&rig, &["--qos_class", "106"]), Some(4));
    assert_eq!(path_sl(&rig, &["--service_id", "0x10603db"]), Some(4));
}

/// The audit's own check of the policy (`fabric/sweep/sm_classes.rs`): in
/// process, an SA path record query per declared class carrying it; the
/// generated policy passes, a line edited by hand (a class moved to
/// another SL) is a finding on its level, named, and fails the audit.
#[test]
fn rig_the_audit_checks_each_class_against_the_sa_and_names_a_hand_edited_line() {
    if !rig_wanted("rig_the_audit_checks_each_class") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mapping = write(dir.path(), "m.yml", SM_TRAFFIC);
    let (options, _) = generate(dir.path(), &mapping);
    let partitions = write(
        dir.path(),
        "partitions.conf",
        "Default=0x7fff, ipoib : ALL=full ;\nstorage=0x8001 : ALL=full ;\n",
    );
    let rig = PathRig::start(&[
        "-c",
        options.to_str().unwrap(),
        "-o",
        &format!("partition_config_file={}", partitions.display()),
    ]);
    let node = rig.node2_as("ibsim0");
    let audit = |extra: &[&str]| super::reader::audit_in_process_with(&rig, &node, &mapping, extra);
    let verdicts = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["report"]["sm_policy"]["classes"]
            .as_array()
            .unwrap_or_else(|| panic!("{v:#}"))
            .iter()
            .map(|c| {
                (
                    c["traffic"].as_str().unwrap().to_owned(),
                    c["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let out = audit(&[]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let all = verdicts(&v);
    assert_eq!(all.len(), 8, "{all:?}");
    for (traffic, verdict) in &all {
        let want = if traffic.starts_with("srp") {
            "not_asked"
        } else {
            "ok"
        };
        assert_eq!(verdict, want, "{traffic}: {:#}", v["report"]["sm_policy"]);
    }
    assert_eq!(out.status.code(), Some(0), "{:#}", v["report"]);

    // gold.rt's storage service ID moved to SL 0 by hand, read again.
    let policy = dir.path().join("qos-policy.conf");
    let text = read(&policy);
    let edited = text.replace("service-id 0x10603db : 3", "service-id 0x10603db : 0");
    assert_ne!(edited, text);
    std::fs::write(&policy, edited).unwrap();
    rig.lever("reconf", &["qos_policy_file", policy.to_str().unwrap()]);
    let out = audit(&[]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bad: Vec<(String, String)> = verdicts(&v)
        .into_iter()
        .filter(|(_, w)| w != "ok" && w != "not_asked")
        .collect();
    assert_eq!(
        bad,
        [("service-id 0x10603db".to_owned(), "mismatch".to_owned())]
    );
    let human = super::path::audit_command(&node, &mapping)
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .env("SIM_HOST", "node2")
        .current_dir(rig.dir.path())
        .args(["--reader", "in-process"])
        .output_within();
    let human = String::from_utf8(human.stdout).unwrap();
    assert!(
        human.contains(
            "sm policy: FAIL level gold.rt (SL 3): service-id 0x10603db: the SA answers its \
             path record with SL 0, not the level's 3"
        ),
        "{human}"
    );
    // The level's own traffic is carried on every port pair: the verdict says what fails
    // (the SM's policy), never "not carried".
    assert!(
        human.contains("verdict: 1 of 3 levels fail: gold.rt (the SM's QoS policy differs)"),
        "{human}"
    );
}
