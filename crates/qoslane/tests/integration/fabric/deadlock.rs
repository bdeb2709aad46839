//! Deadlock safety per level on the real OpenSM (rigs/fabric_path_rig.sh):
//! the audit reads every switch's forwarding table in process and proves
//! each level's channel dependency graph acyclic, or names its credit loop
//! switch by switch (`fabric/judge/deadlock.rs`, `fabric/sweep/routes.rs`).
//!
//! - a fat tree routed by ftree, then by updn: every level deadlock-free;
//! - a ring of five switches (rigs/net.ring5) routed by minhop: shortest
//!   paths go two hops either way, a loop on every level's VL, named and
//!   failed; LASH, which gives paths their own SLs (its layers), leaves the
//!   same loop to a level pinned to one SL; updn (a root given) breaks it;
//!   the rig's `misalign` lever moves one switch's hop of a level to
//!   another VL: the loop is followed across both VLs.
//!
//! Why no lever makes a loop on a tree: an SL2VL change only splits or
//! merges channels, and a loop among (port, VL) channels projects onto a
//! loop among the links the routes use; up/down routes have none. A loop
//! that an SL2VL change closes needs a dateline first (Torus-2QoS's
//! per-port-pair rows), which the lever (every in port of an out port)
//! cannot set: the unit tests cover it with recorded tables.

use std::path::Path;

use serde_json::Value;

use crate::util::Within as _;

use super::MAPPING;
use super::path::{PathRig, write};
use super::reader::audit_in_process;
use super::rig::{repo, rig_wanted};

/// The audit in process as JSON, and its exit code.
fn audit(rig: &PathRig, m: &Path) -> (Value, Option<i32>) {
    let node = rig.node2_as("ibsim0");
    let out = audit_in_process(rig, &node, m);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

/// Each level's deadlock verdict word (`deadlock_free`, `cycle`).
fn verdicts(v: &Value) -> Vec<String> {
    v["report"]["deadlock"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l["safety"]["verdict"]
                .as_str()
                .unwrap_or("unjudged")
                .to_owned()
        })
        .collect()
}

/// The first level's loop as (switch, port, vl) hops.
fn first_loop(v: &Value) -> Vec<(String, u64, u64)> {
    v["report"]["deadlock"]["levels"][0]["safety"]["hops"]
        .as_array()
        .unwrap_or_else(|| panic!("no loop: {v:#}"))
        .iter()
        .map(|h| {
            (
                h["switch"].as_str().unwrap().to_owned(),
                h["port"].as_u64().unwrap(),
                h["vl"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The loop's switches, sorted, and whether every hop leaves by `port`.
fn loop_switches(hops: &[(String, u64, u64)], port: u64) -> Vec<String> {
    assert!(hops.iter().all(|h| h.1 == port), "{hops:?}");
    let mut s: Vec<String> = hops.iter().map(|h| h.0.clone()).collect();
    s.sort();
    s
}

#[test]
fn deadlock_a_fat_tree_routed_by_ftree_or_updn_is_free_on_every_level() {
    if !rig_wanted("deadlock_fat_tree") {
        return;
    }
    let rig = PathRig::start(&["-t", "ft:4:3:2", "-o", "routing_engine=ftree"]);
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    for engine in ["ftree", "updn"] {
        if engine != "ftree" {
            rig.lever("reconf", &["routing_engine", engine]);
            rig.lever("restart-sm", &[]);
        }
        let (v, code) = audit(&rig, &m);
        assert_eq!(code, Some(0), "{engine}: {v:#}");
        let d = &v["report"]["deadlock"];
        assert!(d["unjudged"].is_null(), "{engine}: {d:#}");
        let all = verdicts(&v);
        assert!(!all.is_empty());
        assert!(all.iter().all(|w| w == "deadlock_free"), "{engine}: {d:#}");
        // The leaves' up and the spines' down ports carry dependencies.
        let deps = d["levels"][0]["safety"]["dependencies"].as_u64().unwrap();
        assert!(deps > 0, "{d:#}");
        // One SL on every path.
        assert_eq!(
            d["path_sls"].as_object().unwrap().len(),
            1,
            "{engine}: {d:#}"
        );
    }
    sl_assigning_engines_on_the_fat_tree(&rig, &m);
}

/// DFSSSP gives the fat tree's paths their own SLs (its path records
/// disagree): recognised, and since up/down routes cannot loop, every level
/// is granted on its SL with a note that the SM routes by path SLs. LASH
/// needs one layer on a tree: every path on SL 0, nothing to recognise and
/// nothing at risk.
fn sl_assigning_engines_on_the_fat_tree(rig: &PathRig, m: &Path) {
    rig.lever("reconf", &["routing_engine", "dfsssp"]);
    rig.lever("restart-sm", &[]);
    let (v, code) = audit(rig, m);
    let d = &v["report"]["deadlock"];
    assert_eq!(code, Some(0), "{d:#}");
    assert!(d["path_sls"].as_object().unwrap().len() > 1, "{d:#}");
    assert!(verdicts(&v).iter().all(|w| w == "deadlock_free"), "{d:#}");
    let human = String::from_utf8(human_audit(rig, m)).unwrap();
    assert!(
        human.contains("routing: the SM assigns SLs per path")
            && human.contains(
                "  note: the SM routes by path SLs: SL 3 of level mission-critical is \
                 deadlock-free on this routing, granted on it"
            )
            && human.contains("verdict: every level carried on every data port"),
        "{human}"
    );
    rig.lever("reconf", &["routing_engine", "lash"]);
    rig.lever("restart-sm", &[]);
    let (v, code) = audit(rig, m);
    let d = &v["report"]["deadlock"];
    assert_eq!(code, Some(0), "{d:#}");
    assert_eq!(d["path_sls"].as_object().unwrap().len(), 1, "{d:#}");
    assert!(verdicts(&v).iter().all(|w| w == "deadlock_free"), "{d:#}");
}

#[test]
fn deadlock_a_ring_routed_by_minhop_or_lash_names_its_loop_and_updn_breaks_it() {
    if !rig_wanted("deadlock_ring") {
        return;
    }
    let net = repo().join("rigs/net.ring5");
    let rig = PathRig::start(&["-t", net.to_str().unwrap(), "-o", "routing_engine=minhop"]);
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let five: Vec<String> = (1..=5).map(|s| format!("sw{s}")).collect();

    // minhop: every level loops, clockwise (port 2) or the other way (3).
    let (v, code) = audit(&rig, &m);
    assert_eq!(code, Some(1), "{v:#}");
    assert!(verdicts(&v).iter().all(|w| w == "cycle"), "{v:#}");
    let hops = first_loop(&v);
    let port = hops[0].1;
    assert!(port == 2 || port == 3, "{hops:?}");
    assert_eq!(loop_switches(&hops, port), five);
    let human = std::str::from_utf8(&human_audit(&rig, &m))
        .unwrap()
        .to_owned();
    assert!(
        human.contains("deadlock: FAIL level ")
            && human.contains("credit loop (deadlock risk): sw"),
        "{human}"
    );
    assert!(human.contains("verdict: "), "{human}");
    // minhop: the SA gives every path one SL.
    let sls = v["report"]["deadlock"]["path_sls"].as_object().unwrap();
    assert_eq!(sls.len(), 1, "{sls:?}");
    assert!(!human.contains("assigns SLs per path"), "{human}");

    // LASH: its paths get their own SLs, a level pinned to one SL keeps
    // every route on its one VL: the same loop.
    rig.lever("reconf", &["routing_engine", "lash"]);
    rig.lever("restart-sm", &[]);
    let (v, code) = audit(&rig, &m);
    assert_eq!(code, Some(1), "{v:#}");
    assert!(verdicts(&v).iter().all(|w| w == "cycle"), "{v:#}");
    // Recognised: the SA's path records give more than one SL.
    let sls = v["report"]["deadlock"]["path_sls"].as_object().unwrap();
    assert!(sls.len() > 1, "{sls:?}");
    let human = String::from_utf8(human_audit(&rig, &m)).unwrap();
    assert!(
        human.contains("routing: the SM assigns SLs per path (its path records: SL 0 on"),
        "{human}"
    );
    lash_switches_a_path_record_level(&rig);

    // One switch's hop of the first level moved to another VL: the loop
    // goes on across both (an SL2VL change is followed hop by hop).
    let sl = v["report"]["deadlock"]["levels"][0]["sl"].as_u64().unwrap();
    let hops = first_loop(&v);
    let (sw, port) = (hops[0].0.clone(), hops[0].1);
    let vl = hops[0].2;
    let other = if vl == 7 { 6 } else { 7 };
    rig.lever(
        "misalign",
        &[&sw, &port.to_string(), &sl.to_string(), &other.to_string()],
    );
    let (v, _) = audit(&rig, &m);
    let hops = first_loop(&v);
    assert_eq!(loop_switches(&hops, port), five);
    let moved: Vec<&(String, u64, u64)> = hops.iter().filter(|h| h.2 == other).collect();
    assert_eq!(moved.len(), 1, "{hops:?}");
    assert_eq!(moved[0].0, sw, "{hops:?}");

    // DFSSSP on the ring: recognised too; a pinned SL takes every route.
    rig.lever("restart-sm", &[]);
    rig.lever("reconf", &["routing_engine", "dfsssp"]);
    rig.lever("restart-sm", &[]);
    let (v, code) = audit(&rig, &m);
    assert_eq!(code, Some(1), "{v:#}");
    assert!(
        v["report"]["deadlock"]["path_sls"]
            .as_object()
            .unwrap()
            .len()
            > 1,
        "{v:#}"
    );
    assert!(verdicts(&v).iter().all(|w| w == "cycle"), "{v:#}");

    // updn from a root: up/down routes, no loop on any level.
    let roots = rig.dir.path().join("roots");
    let guid = std::fs::read_to_string(rig.var("RIG_NODES"))
        .unwrap()
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .find(|c| c[0] == "sw1")
        .map(|c| c[3].to_owned())
        .unwrap();
    std::fs::write(&roots, format!("{guid}\n")).unwrap();
    rig.lever(
        "reconf",
        &[
            "routing_engine",
            "updn",
            "root_guid_file",
            roots.to_str().unwrap(),
        ],
    );
    rig.lever("restart-sm", &[]);
    let (v, _) = audit(&rig, &m);
    assert!(
        verdicts(&v).iter().all(|w| w == "deadlock_free"),
        "{:#}",
        v["report"]["deadlock"]
    );
}

/// On LASH's ring, what the loop means for each level: a pinned one is
/// refused for it; mission-critical with `path_sl: path_record` is switched
/// to each path record's SL, its loop in a note, in the audit and in the
/// verdict file the nodes read.
fn lash_switches_a_path_record_level(rig: &PathRig) {
    let switched = write(
        rig.dir.path(),
        "m-path.yml",
        &MAPPING.replacen(
            "    virtual_lane: 3\n",
            "    virtual_lane: 3\n    path_sl: path_record\n",
            1,
        ),
    );
    let verdict_file = rig.dir.path().join("verdict.json");
    let node = rig.node2_as("ibsim0");
    let out = super::reader::audit_in_process_with(
        rig,
        &node,
        &switched,
        &["--verdict", verdict_file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "the pinned levels still loop");
    let vf: Value = serde_json::from_str(&std::fs::read_to_string(&verdict_file).unwrap()).unwrap();
    let levels = vf["levels"].as_array().unwrap();
    assert_eq!(levels[0]["level"], "mission-critical");
    assert_eq!(levels[0]["path_record_sl"], true, "{vf:#}");
    assert!(levels[0]["credit_loop"].is_null(), "{vf:#}");
    let note = levels[0]["path_note"].as_str().unwrap();
    assert!(
        note.contains("SL 3 of level mission-critical: credit loop (deadlock risk): sw")
            && note.contains("path_sl: path_record"),
        "{note}"
    );
    for l in &levels[1..] {
        assert!(l["credit_loop"].as_str().is_some(), "{l:#}");
        assert!(l["path_record_sl"].is_null(), "{l:#}");
    }
    let human = String::from_utf8(human_audit(rig, &switched)).unwrap();
    assert!(
        human.contains("deadlock: level mission-critical (SL 3): credit loop")
            && human.contains("  note: the SM routes by path SLs; SL 3 of level mission-critical")
            && human.contains("deadlock: FAIL level high (SL 2): credit loop"),
        "{human}"
    );
    assert!(!human.contains("not carried: mission-critical"), "{human}");
}

/// Torus-2QoS on the 4x4 torus `rigs/net.torus4`: OpenSM routes it (its
/// torus-2QoS.conf names t00's links, written from the rig's GUIDs), its
/// path records carry several SLs and its SL2VL rows differ by port pair
/// (the datelines): recognised both ways; each level's SL stays
/// deadlock-free across the datelines, granted with the path-SL note.
#[test]
fn deadlock_torus_2qos_is_recognised_and_its_datelines_keep_each_level_free() {
    if !rig_wanted("deadlock_torus") {
        return;
    }
    let net = repo().join("rigs/net.torus4");
    let rig = PathRig::start(&["-t", net.to_str().unwrap(), "-o", "routing_engine=minhop"]);
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let nodes = std::fs::read_to_string(rig.var("RIG_NODES")).unwrap();
    let guid = |name: &str| {
        nodes
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|c| c[0] == name)
            .map_or_else(|| panic!("no {name}"), |c| c[3].to_owned())
    };
    let conf = write(
        rig.dir.path(),
        "torus-2QoS.conf",
        &format!(
            "torus 4 4 1\nxp_link {0} {1}\nxm_link {0} {2}\nyp_link {0} {3}\nym_link {0} {4}\n",
            guid("t00"),
            guid("t10"),
            guid("t30"),
            guid("t01"),
            guid("t03")
        ),
    );
    rig.lever(
        "reconf",
        &[
            "routing_engine",
            "torus-2QoS",
            "torus_config",
            conf.to_str().unwrap(),
        ],
    );
    rig.lever("restart-sm", &[]);
    let log = std::fs::read_to_string(std::path::Path::new(rig.var("RIG_WORK")).join("opensm.log"))
        .unwrap();
    assert!(
        log.contains("torus-2QoS tables configured on all switches"),
        "OpenSM did not route by torus-2QoS"
    );
    let (v, _) = audit(&rig, &m);
    let d = &v["report"]["deadlock"];
    assert!(d["path_sls"].as_object().unwrap().len() > 1, "{d:#}");
    assert_eq!(d["per_pair_sl2vl"].as_array().unwrap().len(), 16, "{d:#}");
    assert!(verdicts(&v).iter().all(|w| w == "deadlock_free"), "{d:#}");
    let human = String::from_utf8(human_audit(&rig, &m)).unwrap();
    assert!(
        human.contains("routing: SL2VL differs by port pair on 16 switches")
            && human.contains(
                "  note: the SM routes by path SLs: SL 3 of level mission-critical is \
                 deadlock-free on this routing, granted on it"
            ),
        "{human}"
    );
}

/// The human text of the in-process audit.
fn human_audit(rig: &PathRig, m: &Path) -> Vec<u8> {
    let node = rig.node2_as("ibsim0");
    super::path::audit_command(&node, m)
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .env("SIM_HOST", "node2")
        .current_dir(rig.dir.path())
        .args(["--reader", "in-process"])
        .output_within()
        .stdout
}
