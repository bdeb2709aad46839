//! `health`'s first hop shared per leaf (`fabric/first_hop/share.rs`) on
//! the multi-switch simulated fabric: qoslane runs under the rig's umad
//! preload (as the in-process audit does), node2 (leaf1 port 2) with its HCA
//! named `ibsim0`, the name the preload gives it. A full reading is in
//! process, and the same as the smpquery one `sync` makes; the runs between
//! read the node's own SL2VL rows and carry the rest.

use crate::util::Within as _;
use std::fs;
use std::process::{Command, Output};

use std::time::Duration;

use qoslane::deadline::Deadline;
use qoslane::fabric::first_hop::read as first_hop_read;
use qoslane::fabric::first_hop::share::full_read_due;
use qoslane::fabric::tables::FirstHop;
use qoslane::fabric::{PortId, Smpquery};

use super::path::{PathRig, install_fail_job_mapping, run_bin, text};
use super::rig::{SimNode, rig_wanted};
use crate::util::BIN;

/// `qoslane health` on `node`, reading SMPs in process through the rig's
/// preload (which writes its fake sysfs into the working directory).
fn health(rig: &PathRig, node: &SimNode, scratch: &std::path::Path) -> Output {
    Command::new(BIN)
        .env_clear()
        .current_dir(scratch)
        .env("QOSLANE_ROOT", &node.paths.root)
        .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_TIMEOUT_MS", "30000")
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("SIM_HOST", "node2")
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .arg("health")
        .output_within()
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// One health run's reading: (carried full reading's time, whether this run
/// read the first hop in full, the grant record's first-hop time, the
/// record's first-hop findings per level, what health said).
struct Run {
    read_at_ms: u64,
    full: bool,
    record_at_ms: u64,
    levels: serde_json::Value,
    said: String,
}

fn run(rig: &PathRig, node: &SimNode, scratch: &std::path::Path) -> Run {
    let before = fs::read(node.paths.first_hop_reading())
        .ok()
        .and_then(|t| serde_json::from_slice::<serde_json::Value>(&t).ok())
        .and_then(|v| v["ports"][0]["read_at_ms"].as_u64());
    let asked = node.calls_log().matches(" 0,1").count();
    let out = health(rig, node, scratch);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let carried = json(&node.paths.first_hop_reading());
    let ports = carried["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "{carried}");
    let record = json(&node.paths.run_dir.join("grants.json"));
    let read_at_ms = ports[0]["read_at_ms"].as_u64().unwrap();
    // The switch is never asked by smpquery: the port opens in process.
    assert_eq!(node.calls_log().matches(" 0,1").count(), asked, "{said}");
    Run {
        read_at_ms,
        full: before != Some(read_at_ms),
        record_at_ms: record["first_hop"]["at_ms"].as_u64().unwrap(),
        levels: record["first_hop"]["levels"].clone(),
        said,
    }
}

/// A run that reads only the node's own rows: the schedule makes at most
/// one full reading in a row seconds apart (a period point passed), so a
/// second run is one.
fn rows_only(rig: &PathRig, node: &SimNode, scratch: &std::path::Path) -> Run {
    let r = run(rig, node, scratch);
    if !r.full {
        return r;
    }
    let r = run(rig, node, scratch);
    assert!(!r.full, "two full readings seconds apart");
    r
}

#[test]
fn share_health_reads_its_own_rows_every_run_and_the_leaf_s_tables_once_per_period() {
    if !rig_wanted("share") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2_as("ibsim0");
    let scratch = tempfile::tempdir().unwrap();
    install_fail_job_mapping(&node);

    // The first run has nothing carried: a full reading, kept.
    let first = run(&rig, &node, scratch.path());
    assert!(first.full, "{}", first.said);
    // Read in process, it is what smpquery reads (as `sync` reads it).
    let carried: FirstHop =
        serde_json::from_value(json(&node.paths.first_hop_reading())["ports"][0]["hop"].clone())
            .unwrap();
    let by_smpquery = first_hop_read::read(
        &Smpquery::new(&node.paths.smpquery),
        &PortId::new("ibsim0", 1),
        &Deadline::after(Duration::from_secs(30)),
    );
    assert!(matches!(carried, FirstHop::Read { .. }), "{carried:?}");
    assert_eq!(carried, by_smpquery);
    assert!(
        first.record_at_ms.abs_diff(first.read_at_ms) < 5_000,
        "read by this run"
    );
    // The next ones read the rows in process (no smpquery of the switch)
    // and find what the full reading found; the record says how old the
    // carried part is.
    let second = rows_only(&rig, &node, scratch.path());
    assert_eq!(second.levels, first.levels);
    assert_eq!(second.record_at_ms, second.read_at_ms);
    let guid = json(&node.paths.first_hop_reading())["ports"][0]["identity"]["node_guid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!full_read_due(&guid, second.read_at_ms, second.read_at_ms));

    // leaf1 drops SL 3 toward spine1: a row of this node's, seen at once.
    rig.lever("misalign", &["leaf1", "3", "3", "15"]);
    let dropped = "mlx5_0/1 first hop: SL 3 -> VL 15";
    let dropped = dropped.replace("mlx5_0", "ibsim0");
    let r = rows_only(&rig, &node, scratch.path());
    assert!(
        r.said.contains("level mission-critical: ")
            && r.said.contains(&dropped)
            && r.said
                .contains("its jobs are refused and requeued (on_failure: fail_job)"),
        "{}",
        r.said
    );
    rig.lever("misalign", &["leaf1", "3", "3", "3"]);
    let r = rows_only(&rig, &node, scratch.path());
    assert!(!r.said.contains(&dropped), "{}", r.said);
    assert_eq!(r.levels, first.levels, "repaired: as at first");

    // VL 3 starved toward spine2: an arbitration table, the leaf's and not
    // this node's. The rows-only runs carry the full reading's table until
    // the port's next full reading, which sees it.
    rig.lever("zero-weight", &["leaf1", "4", "3"]);
    let starved = "SL 3 -> VL 3 (starved";
    let r = rows_only(&rig, &node, scratch.path());
    assert!(!r.said.contains(starved), "{}", r.said);
    fs::remove_file(node.paths.first_hop_reading()).unwrap();
    let r = run(&rig, &node, scratch.path());
    assert!(r.full, "{}", r.said);
    assert!(
        r.said.contains(starved) && r.said.contains("at switch leaf1 (lid 4) port 2 -> 4"),
        "{}",
        r.said
    );
}

/// Each in-process `health` run also reads the transmit wait of the first
/// hop's port toward this node (leaf1 port 2 for node2): one PMA Get, its
/// change between runs counted as the node's own ports' are, under the
/// switch's name.
#[test]
fn share_health_counts_the_wait_of_the_first_hop_s_port_toward_the_node() {
    if !rig_wanted("share_wait") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2_as("ibsim0");
    let scratch = tempfile::tempdir().unwrap();
    install_fail_job_mapping(&node);
    // In force (its levels name the VLs of the metric's `level` label).
    let synced = run_bin(&node, &["sync"], &[]);
    assert!(synced.status.success(), "{}", text(&synced));
    let set_wait = |vl: u8, ticks: u32| {
        rig.lever(
            "console",
            &[&format!(
                "PerformanceSet \"leaf1\"[2] PortVLXmitWaitCounters.PortVLXmitWaitCounters{vl}={ticks}"
            )],
        );
    };
    let sample = |vl: u8, level: &str| -> Option<u64> {
        let prom = fs::read_to_string(node.paths.textfile()).unwrap();
        let want = format!(
            "qoslane_xmit_wait_ticks_total{{device=\"leaf1\",port=\"2\",vl=\"{vl}\",level=\"{level}\"}} "
        );
        prom.lines()
            .find_map(|l| l.strip_prefix(want.as_str()))
            .map(|v| v.parse().unwrap())
    };
    // The first reading is where counting starts: 500 ticks before it are
    // nobody's.
    set_wait(2, 500);
    let first = run(&rig, &node, scratch.path());
    assert_eq!(
        sample(2, "high"),
        Some(0),
        "{}\n{}",
        first.said,
        fs::read_to_string(node.paths.textfile()).unwrap()
    );
    // high's VL 2 waits 300 ticks more toward node2, mission-critical's VL 3
    // 40: both counted; a port of the leaf that is not node2's is not read.
    set_wait(2, 800);
    set_wait(3, 40);
    rig.lever(
        "console",
        &["PerformanceSet \"leaf1\"[3] PortVLXmitWaitCounters.PortVLXmitWaitCounters1=999"],
    );
    let second = run(&rig, &node, scratch.path());
    assert_eq!(sample(2, "high"), Some(300), "{}", second.said);
    assert_eq!(sample(3, "mission-critical"), Some(40));
    assert_eq!(sample(1, "low"), Some(0), "leaf1 port 3 is not node2's");
    // Cleared behind qoslane's back (another tool's reset): nothing added.
    set_wait(2, 0);
    run(&rig, &node, scratch.path());
    assert_eq!(sample(2, "high"), Some(300));
}
