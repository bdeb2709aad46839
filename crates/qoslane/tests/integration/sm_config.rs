//! `qoslane fabric sm-config`: the OpenSM QoS options generated from a
//! mapping, as golden text (insta snapshots in tests/snapshots/), and each
//! refusal of what the hardware cannot do. On the simulated fabric, the
//! generated options are started with a real OpenSM and proven by
//! `qoslane fabric audit` (fabric/rig.rs).
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::Within as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::BIN;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sm_config(mapping: &Path, extra: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .env_clear()
        .env("QOSLANE_NO_JOURNAL", "1")
        .args(["fabric", "sm-config", "--mapping"])
        .arg(mapping)
        .args(extra)
        .output_within()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn golden(name: &str, mapping: &Path, extra: &[&str]) {
    let out = sm_config(mapping, extra);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The header names the file; keep the snapshot free of temp paths.
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replace(&mapping.display().to_string(), "MAPPING")
        .lines()
        .map(|l| {
            // The example's comments may change; its tables are the golden part.
            if l.starts_with("# mapping sha256 ") {
                "# mapping sha256 SHA256"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_snapshot!(format!("sm_config__{name}"), text));
}

const TWO_TIERS_NO_VL: &str = "default_level: bulk\nlevels:\n  - name: express\n    qos: [express]\n    \
service_level: 5\n  - name: bulk\n    qos: [bulk]\n    service_level: 0\n";

const SHARED_VL: &str = "default_level: c\nlevels:\n  - name: a\n    qos: [a]\n    service_level: 4\n    \
virtual_lane: 2\n  - name: b\n    qos: [b]\n    service_level: 3\n    virtual_lane: 1\n  - name: c\n    \
qos: [c]\n    service_level: 2\n    virtual_lane: 1\n";

#[test]
fn golden_the_example_mapping() {
    golden(
        "example",
        &manifest().join("../../examples/qos-network.yml"),
        &[],
    );
}

#[test]
fn golden_one_level() {
    golden(
        "minimal",
        &manifest().join("tests/mappings/good/minimal.yml"),
        &[],
    );
}

#[test]
fn golden_levels_without_virtual_lane_get_their_sl_number() {
    let dir = tempfile::tempdir().unwrap();
    golden(
        "two-tiers-no-vl",
        &write(&dir, "m.yml", TWO_TIERS_NO_VL),
        &[],
    );
}

#[test]
fn golden_two_low_levels_sharing_a_vl_and_two_high_tiers() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", SHARED_VL);
    golden("shared-vl", &m, &[]);
    golden(
        "example-two-high",
        &manifest().join("../../examples/qos-network.yml"),
        &["--high-tiers", "2"],
    );
}

#[test]
fn json_gives_the_options_for_the_playbook() {
    let out = sm_config(
        &manifest().join("../../examples/qos-network.yml"),
        &["--format", "json"],
    );
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["options"]["qos_ca_sl2vl"],
        "0,1,2,3,1,1,1,1,1,1,1,1,1,1,1,1"
    );
    assert_eq!(v["options"]["qos_swe_vlarb_high"], "3:64");
    assert_eq!(v["options"]["max_op_vls"], "3");
    assert_eq!(v["lanes"][0]["level"], "mission-critical");
    assert_eq!(v["lanes"][0]["high"], true);
}

fn refused(text: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = sm_config(&write(&dir, "m.yml", text), extra);
    assert_eq!(out.status.code(), Some(1), "refused with exit 1");
    assert!(out.stdout.is_empty(), "nothing printed on a refusal");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn refuses_a_vl_beyond_the_hardware_vlcap() {
    let example =
        std::fs::read_to_string(manifest().join("../../examples/qos-network.yml")).unwrap();
    let e = refused(&example, &["--vl-cap", "VL0-1"]);
    assert!(
        e.contains("level mission-critical names VL 3, but the hardware's VLCap is VL0-1 (2 data VLs: VL 0..=1)"),
        "{e}"
    );
    assert!(
        e.contains("level high names VL 2"),
        "every problem at once: {e}"
    );
}

#[test]
fn one_sl_on_two_vls_is_refused_by_validation_at_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        &dir,
        "m.yml",
        "default_level: b\nlevels:\n  - name: a\n    qos: [a]\n    service_level: 3\n    virtual_lane: 3\n  \
         - name: b\n    qos: [b]\n    service_level: 3\n    virtual_lane: 4\n",
    );
    let out = sm_config(&m, &[]);
    assert_eq!(out.status.code(), Some(2), "an invalid mapping");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("m.yml:9:20: service_level 3 is used by levels `a` and `b`"),
        "{e}"
    );
    // One severity per line: never `qoslane: error: m.yml:9:20: error: …`.
    assert!(
        e.lines().any(|l| l.starts_with("qoslane: error: ")
            && l.contains("m.yml:9:20: service_level 3")),
        "{e}"
    );
    assert!(
        !e.lines().any(|l| l.matches("error:").count() > 1),
        "a doubled error: {e}"
    );
}

#[test]
fn refuses_a_vl_in_both_arbitration_tables() {
    let e = refused(SHARED_VL, &["--high-tiers", "2"]);
    assert!(
        e.contains("levels b (high-priority table) and c (low-priority table) share VL 1"),
        "{e}"
    );
}

#[test]
fn refuses_more_levels_than_free_vls() {
    let e = refused(TWO_TIERS_NO_VL, &["--vl-cap", "VL0"]);
    assert!(
        e.contains(
            "level bulk names no virtual_lane and every one of the 1 data VLs of VL0 is taken"
        ),
        "{e}"
    );
}

#[test]
fn a_bad_vl_cap_is_a_usage_error() {
    let out = sm_config(
        &manifest().join("tests/mappings/good/minimal.yml"),
        &["--vl-cap", "VL0-5"],
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--vl-cap `VL0-5`"));
}

/// Every kind of `sm_traffic`, on levels whose SLs differ from the default
/// level's, so that each rule is seen to move its traffic.
pub const SM_TRAFFIC: &str = "default_level: bulk\nlevels:\n  - name: gold.rt\n    qos: [gold]\n    \
service_level: 3\n    virtual_lane: 3\n    sm_traffic: [\"qos-class 106\", \"service-id 0x10603db\", \"pkey 0x8001\"]\n  \
- name: storage-io\n    qos: [storage]\n    service_level: 2\n    virtual_lane: 2\n    \
sm_traffic: [ipoib, rds, \"qos-class 7-9\", \"service-id 0x1064e51\", \"srp target-port-guid 0x2c9030000abcd\"]\n  \
- name: bulk\n    qos: [bulk]\n    service_level: 0\n    virtual_lane: 0\n";

#[test]
fn golden_the_qos_policy_of_every_kind_of_sm_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", SM_TRAFFIC);
    golden("qos-policy-every-kind", &m, &["--qos-policy"]);
    golden(
        "qos-policy-example",
        &manifest().join("../../examples/qos-network.yml"),
        &["--qos-policy"],
    );
    // The options name the file, where the admin says it is.
    golden(
        "every-kind-options",
        &m,
        &["--qos-policy-file", "/etc/opensm/site-qos-policy.conf"],
    );
}

#[test]
fn json_has_the_policy_beside_the_options_and_none_without_sm_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", SM_TRAFFIC);
    let out = sm_config(&m, &["--format", "json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["options"]["qos_policy_file"],
        "/etc/opensm/qos-policy.conf"
    );
    assert_eq!(v["qos_policy_file"], "/etc/opensm/qos-policy.conf");
    let policy = v["qos_policy"].as_str().unwrap();
    assert!(
        policy.contains("    rds : 2 # level storage-io\n"),
        "{policy}"
    );

    let out = sm_config(&m, &["--qos-policy", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let classes = v["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 8);
    assert_eq!(classes[0]["level"], "gold.rt");
    assert_eq!(classes[0]["sl"], 3);
    assert_eq!(classes[0]["field"], "qos-class");
    assert_eq!(classes[0]["value"], 106);

    let minimal = manifest().join("tests/mappings/good/minimal.yml");
    let out = sm_config(&minimal, &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["qos_policy"].is_null() && v["options"].get("qos_policy_file").is_none());
    let out = sm_config(&minimal, &["--qos-policy"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("declares no sm_traffic"));
}

#[test]
fn a_policy_file_path_that_is_no_opensm_value_is_a_usage_error() {
    for bad in ["qos-policy.conf", "/etc/opensm/my policy.conf"] {
        let out = sm_config(
            &manifest().join("tests/mappings/good/minimal.yml"),
            &["--qos-policy-file", bad],
        );
        assert_eq!(out.status.code(), Some(64), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--qos-policy-file"));
    }
}

#[test]
fn a_policy_line_that_contradicts_the_mapping_is_refused_by_validate_at_the_line() {
    // IPoIB's partition given to a second level: the SM could answer only one.
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        &dir,
        "m.yml",
        &SM_TRAFFIC.replace("\"pkey 0x8001\"", "\"pkey 0xffff\""),
    );
    let out = sm_config(&m, &[]);
    assert_eq!(out.status.code(), Some(2), "an invalid mapping");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("m.yml:12:18: sm_traffic `ipoib` of level `storage-io` overlaps `pkey 0xffff` of level `gold.rt`"),
        "{e}"
    );
}
