//! `qoslane fabric audit` read both ways on the multi-switch simulated fabric:
//! by `smpquery` (a process per query) and in process (SMPs through
//! libibumad, qoslane under the simulator's preload as every umad tool of the
//! rig runs): the same report, finding for finding, on every scenario; and
//! what `--reader` does where in-process reads cannot start.

use crate::util::Within as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use super::MAPPING;
use super::path::{PathRig, audit, audit_command, write};
use super::rig::{SimNode, rig_wanted};

/// The audit in process: qoslane itself under libumad2sim.so, as node2.
pub(super) fn audit_in_process(rig: &PathRig, node: &SimNode, mapping_file: &Path) -> Output {
    audit_in_process_with(rig, node, mapping_file, &[])
}

/// [`audit_in_process`] with `extra` arguments.
pub(super) fn audit_in_process_with(
    rig: &PathRig,
    node: &SimNode,
    mapping_file: &Path,
    extra: &[&str],
) -> Output {
    audit_command(node, mapping_file)
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .env("SIM_HOST", "node2")
        // umad2sim keeps its emulated sysfs in the working directory.
        .current_dir(rig.dir.path())
        .args(["--format", "json", "--reader", "in-process"])
        .args(extra)
        .output_within()
}

/// The report less what differs by design (timing, reader, workers).
fn report(out: &Output) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let r = v["report"].as_object_mut().unwrap();
    // `cost`: timings, and MADs counted in process only.
    for k in ["duration_ms", "reader", "workers", "cost"] {
        r.remove(k);
    }
    // The deadlock check: both read every forwarding table (smpquery's
    // reader by ibroute) and judge the same; only the in-process reader
    // asks the SA for path records.
    let d = r["deadlock"].as_object_mut().unwrap();
    for k in ["read_ms", "judge_ms", "path_sls", "path_sls_unread"] {
        d.remove(k);
    }
    v
}

/// Audits both ways; asserts they agree (exit code and report) and returns
/// the in-process report.
pub(super) fn both_ways(rig: &PathRig, node: &SimNode, m: &Path) -> serde_json::Value {
    let by_smpquery = audit(node, m, &["--format", "json", "--reader", "smpquery"]);
    let in_process = audit_in_process(rig, node, m);
    let raw: serde_json::Value = serde_json::from_slice(&in_process.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&in_process.stderr)));
    assert_eq!(raw["report"]["reader"], "in-process");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&by_smpquery.stdout).unwrap()["report"]["reader"],
        "smpquery"
    );
    assert_eq!(by_smpquery.status.code(), in_process.status.code());
    let (a, b) = (report(&by_smpquery), report(&in_process));
    assert_eq!(a, b, "smpquery (left) and in process (right) differ");
    b
}

/// A rig started with `args`, node2 on it, and the test mapping's file.
fn started(args: &[&str]) -> (PathRig, SimNode, PathBuf) {
    let rig = PathRig::start(args);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    (rig, node, m)
}

fn messages(v: &serde_json::Value) -> Vec<String> {
    v["report"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["findings"].as_array().unwrap().iter())
        .map(|f| f["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn reader_in_process_finds_what_smpquery_finds_on_every_scenario() {
    if !rig_wanted("reader_both_ways") {
        return;
    }
    // A dropping spine and a starving leaf.
    let (rig, node, m) = started(&["-m", "spine1:2:3:15", "-z", "leaf3:2:3"]);
    let v = both_ways(&rig, &node, &m);
    assert_eq!(v["report"]["ports_read"], 24);
    assert_eq!(
        messages(&v),
        [
            "level mission-critical: SL 3 -> VL 3 (starved: weight 0 in both VL arbitration \
             tables) at switch leaf3 (lid 7) every in port -> 2",
            "level mission-critical: SL 3 -> VL 15 (dropped: VL 15 is the management lane) \
             at switch spine1 (lid 2) every in port -> 2",
        ]
    );
    // Fewer OperVLs on one side of a link, and drift on one in port only.
    rig.lever("restart-sm", &[]);
    rig.lever("opervls", &["spine1", "2", "2"]);
    rig.lever("misalign", &["spine2", "1", "2", "15"]);
    let v = both_ways(&rig, &node, &m);
    let got = messages(&v);
    assert!(
        got.iter()
            .any(|l| l.contains("outside OperVLs VL0-1") && l.contains("spine1")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|l| l.contains("VL 15") && l.contains("spine2")),
        "{got:?}"
    );
    // A fresh SM rewrites the drift, and maps VL 3 into spine1 port 2's two
    // data VLs: another VL than the level names.
    rig.lever("restart-sm", &[]);
    let v = both_ways(&rig, &node, &m);
    assert_eq!(
        messages(&v)[0],
        "level mission-critical: SL 3 -> VL 1 (the level names VL 3) at switch spine1 (lid 2) \
         every in port -> 2"
    );
}

#[test]
fn reader_in_process_reads_a_generated_fat_tree_as_smpquery_does() {
    if !rig_wanted("reader_fat_tree") {
        return;
    }
    let (rig, node, m) = started(&["-t", "ft:4:3:2", "-m", "spine2:3:2:15"]);
    let v = both_ways(&rig, &node, &m);
    assert_eq!(v["report"]["ports_read"], 40);
    assert_eq!(v["verdict"], "not_carried");
}

#[test]
fn reader_auto_falls_back_to_smpquery_and_in_process_refuses_where_it_cannot_start() {
    if !rig_wanted("reader_fallback") {
        return;
    }
    let (rig, node, m) = started(&[]);
    // Every level carried, both ways.
    assert_eq!(both_ways(&rig, &node, &m)["verdict"], "carried");
    // Not under the simulator's preload, qoslane finds no umad device here.
    let out = audit(&node, &m, &["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["report"]["reader"], "smpquery");
    assert!(
        v["report"]["fallback"]
            .as_str()
            .is_some_and(|s| s.contains("SMPs")),
        "{v}"
    );
    let human = String::from_utf8(audit(&node, &m, &[]).stdout).unwrap();
    assert!(
        human.contains("reader: smpquery (in process unavailable: "),
        "{human}"
    );
    let out = audit(&node, &m, &["--reader", "in-process"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(err.contains("--reader in-process"), "{err}");
    // The variable chooses too.
    let out = audit_command(&node, &m)
        .env("QOSLANE_FABRIC_READER", "smpquery")
        .args(["--format", "json"])
        .output_within();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["report"]["reader"], "smpquery");
    assert!(v["report"].get("fallback").is_none(), "{v}");
}

/// A 4,032-HCA fat tree (112 leaves of 36 HCAs, 36 spines) prints 16,128
/// `ibnetdiscover -p` lines, 1.7 MB: past the 1 MiB every other tool's
/// output is held to. The topology is read whole.
#[test]
fn reader_topology_of_a_big_fabric_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for leaf in 0..112u32 {
        let sw = 0x20_0000 + u64::from(leaf);
        for p in 1..=36u32 {
            let n = leaf * 36 + p;
            let ca = 0x10_0000 + u64::from(n);
            text.push_str(&format!(
                "CA  {n:5}  1 {ca:#018x} 4x QDR - SW  {:5} {p:2} {sw:#018x} ( 'node{n} HCA-1' - 'leaf{leaf}' )\n",
                5000 + leaf
            ));
            text.push_str(&format!(
                "SW  {:5} {p:2} {sw:#018x} 4x QDR - CA  {n:5}  1 {ca:#018x} ( 'leaf{leaf}' - 'node{n} HCA-1' )\n",
                5000 + leaf
            ));
        }
        for s in 0..36u32 {
            let spine = 0x30_0000 + u64::from(s);
            text.push_str(&format!(
                "SW  {:5} {:2} {sw:#018x} 4x QDR - SW  {:5} {:3} {spine:#018x} ( 'leaf{leaf}' - 'spine{s}' )\n",
                5000 + leaf,
                37 + s,
                6000 + s,
                leaf + 1
            ));
            text.push_str(&format!(
                "SW  {:5} {:3} {spine:#018x} 4x QDR - SW  {:5} {:2} {sw:#018x} ( 'spine{s}' - 'leaf{leaf}' )\n",
                6000 + s,
                leaf + 1,
                5000 + leaf,
                37 + s
            ));
        }
    }
    assert!(text.len() > 1 << 20, "{} bytes", text.len());
    let data = dir.path().join("topology.txt");
    std::fs::write(&data, &text).unwrap();
    let tool = dir.path().join("ibnetdiscover");
    std::fs::write(&tool, format!("#!/bin/sh\nexec cat '{}'\n", data.display())).unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let deadline = qoslane::deadline::Deadline::after(std::time::Duration::from_secs(30));
    let topo = qoslane::fabric::read::topology::discover(&tool, None, &deadline)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(topo.ports.len(), 112 * 36 * 2 + 112 * 36 * 2);
    assert_eq!(topo.count(qoslane::fabric::tables::NodeType::Hca), 4032);
}
