//! The topology walked in process (`fabric/read/discover.rs`) against
//! `ibnetdiscover -p` on the same simulated fabric: the same ports, cables,
//! LIDs, GUIDs and names, in the same order. The walk runs in this test
//! binary started again under the rig's umad preload (as node2), its
//! [`walk_child`] half, which writes the `Topology` it walked as JSON.

use crate::util::Within as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::parse::parse_topology;
use super::path::PathRig;
use super::rig::rig_wanted;
use super::{Deadline, Reader, fs};

/// Where [`walk_child`] writes the topology it walked (set: it walks).
const WALK_TO: &str = "QOSLANE_TEST_WALK_TO";

/// `ibnetdiscover -p` parsed and the walk in process, on the rig started
/// with `args`, as JSON values.
fn both_ways(args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let rig = PathRig::start(args);
    let node = rig.node2();
    let out = Command::new(&node.paths.ibnetdiscover)
        .arg("-p")
        .output_within();
    assert!(
        out.status.success(),
        "ibnetdiscover -p: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = parse_topology(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let file = rig.dir.path().join("walked.json");
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fabric::discover::walk_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WALK_TO, &file)
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .env("SIM_HOST", "node2")
        // umad2sim keeps its emulated sysfs in the working directory.
        .current_dir(rig.dir.path())
        .output_within();
    assert!(
        child.status.success() && file.exists(),
        "the walk: {}\n{}",
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
    let walked = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    (serde_json::to_value(&printed).unwrap(), walked)
}

#[test]
fn the_walk_in_process_is_the_topology_ibnetdiscover_prints() {
    if !rig_wanted("walk_is_ibnetdiscover") {
        return;
    }
    // The two-level rig (5 switches, 6 HCAs) and a generated fat tree (8
    // leaves of 3 HCAs, 4 spines).
    for args in [&[][..], &["-t", "ft:8:3:4"][..]] {
        let (printed, walked) = both_ways(args);
        let ports = printed.pointer("/ports").and_then(|p| p.as_array());
        assert!(ports.is_some_and(|p| p.len() > 20), "{printed}");
        assert!(
            printed == walked,
            "{args:?}: ibnetdiscover -p\n{printed:#}\nwalked\n{walked:#}"
        );
    }
}

/// The walk half of the test above: in a run of this binary that
/// [`WALK_TO`] names a file for (under the rig's preload), the topology
/// walked in process, as JSON in that file; in any other run, nothing.
#[test]
fn walk_child() {
    let Some(to) = std::env::var_os(WALK_TO) else {
        return;
    };
    let reader = qoslane::fabric::InProcess::open(None, 16)
        .unwrap()
        .discovering();
    let topo = reader
        .topology(
            Path::new("/nonexistent/ibnetdiscover"),
            None,
            &Deadline::after(Duration::from_secs(60)),
        )
        .unwrap();
    fs::write(to, serde_json::to_string(&topo).unwrap()).unwrap();
}
