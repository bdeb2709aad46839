//! The fabric check, from the admin's side: HCA ports discovered in sysfs
//! trees modelled on real ones (tests/fixtures/fabric/), checked against
//! smpquery output captured on the simulated fabric (tests/fixtures/smpquery/,
//! re-captured by `rigs/fabric_e2e.sh capture`), the cache, a misbehaving
//! smpquery, and (`rig_*`, in fabric/rig.rs) the simulated fabric itself.

#![expect(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use qoslane::deadline::Deadline;
use qoslane::error::Error;
use qoslane::fabric::read::parse;
use qoslane::fabric::{
    self, AssessOptions, Assessment, PortId, PortTables, ProbeMode, Reader, TablesSource,
    VlArbState,
};
use qoslane::mapping::{Mapping, validate_str};
use qoslane::paths::{Overrides, Paths};

mod deadlock;
mod discover;
mod names;
mod page;
mod page_view;
mod parsers;
mod path;
mod reader;
mod rig;
mod share;
mod sm_policy;
mod verdict;
mod wait;

// ---------------------------------------------------------------- helpers

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A node: a temp root holding a copy of a fixture tree, and a bin/ dir
/// where `smpquery` is a symlink to tests/fixtures/bin/fake-smpquery.
struct Node {
    dir: tempfile::TempDir,
    paths: Paths,
}

impl Node {
    fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(fixtures().join("bin/fake-smpquery"), bin.join("smpquery"))
            .unwrap();
        let paths = Paths::new(Overrides {
            root: Some(dir.path().join("root")),
            smpquery: Some(bin.join("smpquery")),
            ..Default::default()
        });
        fs::create_dir_all(&paths.root).unwrap();
        Self { dir, paths }
    }

    fn from_fixture(name: &str) -> Self {
        let n = Self::empty();
        copy_tree(&fixtures().join("fabric").join(name), &n.paths.root);
        n
    }

    fn port_file(&self, dev: &str, port: u32, file: &str) -> PathBuf {
        self.paths
            .sysfs_ib()
            .join(dev)
            .join("ports")
            .join(port.to_string())
            .join(file)
    }

    fn set(&self, dev: &str, port: u32, file: &str, value: &str) {
        fs::write(self.port_file(dev, port, file), format!("{value}\n")).unwrap();
    }

    /// A file beside the fake smpquery (see its header).
    fn fake(&self, name: &str, content: &str) {
        fs::write(self.dir.path().join("bin").join(name), content).unwrap();
    }

    /// The fake answers every port with a captured scenario.
    fn fake_scenario(&self, scenario: &str) {
        for op in ["sl2vl", "portinfo", "vlarb"] {
            self.fake(&format!("any.{op}.txt"), &captured(scenario, op));
        }
    }

    fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.dir.path().join("bin/calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn captured(scenario: &str, op: &str) -> String {
    let p = fixtures().join(format!("smpquery/{scenario}.{op}.txt"));
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The port tables smpquery printed on the simulated fabric for `scenario`.
fn tables(scenario: &str) -> PortTables {
    let info = parse::parse_portinfo(&captured(scenario, "portinfo")).unwrap();
    let vlarb_path = fixtures().join(format!("smpquery/{scenario}.vlarb.txt"));
    let vlarb = match fs::read_to_string(vlarb_path) {
        Ok(t) => VlArbState::Read(parse::parse_vlarb(&t).unwrap()),
        Err(_) => VlArbState::Unavailable("not captured".into()),
    };
    PortTables {
        sl2vl: parse::parse_sl2vl(&captured(scenario, "sl2vl")).unwrap(),
        oper_vls: info.oper_vls,
        vl_cap: info.vl_cap,
        link_state: info.link_state,
        vlarb,
    }
}

/// Four levels, SL n meant for VL n — what `qos_ca_sl2vl 0,1,2,3,…` gives.
const MAPPING: &str = "\
default_level: normal
fabric_check: enforce
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    virtual_lane: 3
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low, standby]
    service_level: 1
    virtual_lane: 1
";

fn mapping(src: &str) -> Mapping {
    let v = validate_str(src);
    v.mapping
        .unwrap_or_else(|| panic!("invalid test mapping: {:?}", v.diagnostics))
}

fn with_devices(devices: &str) -> Mapping {
    mapping(&MAPPING.replace(
        "fabric_check: enforce\n",
        &format!("fabric_check: enforce\ndevices: {devices}\n"),
    ))
}

/// A probe that answers from a table per port (or one for all) and records
/// what it was asked.
struct FakeProbe {
    answers: HashMap<String, PortTables>,
    default: Option<PortTables>,
    calls: Mutex<Vec<String>>,
}

impl FakeProbe {
    fn all(t: PortTables) -> Self {
        Self {
            answers: HashMap::new(),
            default: Some(t),
            calls: Mutex::new(Vec::new()),
        }
    }

    fn with(mut self, port: &str, t: PortTables) -> Self {
        self.answers.insert(port.to_owned(), t);
        self
    }

    fn calls(&self) -> Vec<String> {
        let mut c = self.calls.lock().unwrap().clone();
        c.sort();
        c
    }

    fn take_calls(&self) -> Vec<String> {
        let mut c = std::mem::take(&mut *self.calls.lock().unwrap());
        c.sort();
        c
    }
}

impl Reader for FakeProbe {
    fn probe(&self, port: &PortId, _: &Deadline) -> qoslane::error::Result<PortTables> {
        let key = port.to_string();
        self.calls.lock().unwrap().push(key.clone());
        self.answers
            .get(&key)
            .or(self.default.as_ref())
            .cloned()
            .ok_or_else(|| Error::Fabric(format!("{key}: no answer")))
    }
}

fn deadline() -> Deadline {
    Deadline::after(Duration::from_secs(10))
}

fn assess_fake(node: &Node, m: &Mapping, mode: ProbeMode, probe: &FakeProbe) -> Assessment {
    fabric::assess_with(
        &node.paths,
        m,
        &deadline(),
        mode,
        probe,
        &AssessOptions::default(),
    )
    .unwrap()
}

fn ports(list: &[PortId]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

fn ib_ports(r: &Assessment) -> Vec<String> {
    r.ib_ports.iter().map(|p| p.port.to_string()).collect()
}

const LEVELS: [&str; 4] = ["mission-critical", "high", "normal", "low"];

fn all_problems(r: &Assessment) -> Vec<String> {
    LEVELS.iter().flat_map(|l| r.problems(l)).collect()
}

fn all_warnings(r: &Assessment) -> Vec<String> {
    LEVELS.iter().flat_map(|l| r.warnings(l)).collect()
}

// ---------------------------------------------------------------- discovery

#[test]
fn dual_hca_node_checks_both_ib_ports_and_reports_the_down_and_roce_ones() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);

    assert_eq!(ib_ports(&r), ["mlx5_0/1", "mlx5_1/1"]);
    assert_eq!(probe.calls(), ["mlx5_0/1", "mlx5_1/1"]);
    assert_eq!(ports(&r.roce_ports), ["mlx5_3/1"]);
    assert_eq!(r.skipped.len(), 1);
    let down = &r.skipped[0];
    assert_eq!(down.port.to_string(), "mlx5_2/1");
    assert_eq!(
        (down.state.as_str(), down.phys_state.as_str()),
        ("1: DOWN", "2: Polling")
    );

    let p0 = &r.ib_ports[0];
    assert_eq!(p0.identity.node_guid, "0xb83fd20300a83e1c");
    assert_eq!((p0.identity.lid, p0.identity.sm_lid), (0x2a, 1));
    assert_eq!(p0.rate.as_deref(), Some("200 Gb/sec (4X HDR)"));

    assert_eq!(all_problems(&r), Vec::<String>::new());
    assert_eq!(all_warnings(&r), Vec::<String>::new());
    assert_eq!(
        r.first_problem().as_deref(),
        Some("mlx5_2/1: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 2: Polling)")
    );
    assert_eq!(
        r.active_ports(),
        [
            PortId::new("mlx5_0", 1),
            PortId::new("mlx5_1", 1),
            PortId::new("mlx5_3", 1)
        ]
    );
    let alignment = r.alignment();
    assert_eq!(alignment.len(), 8, "2 IB ports x 4 levels");
    assert!(alignment.iter().all(|(.., ok)| *ok));
    assert_eq!(
        alignment[0],
        ("mlx5_0".into(), 1, "mission-critical".into(), true)
    );
}

#[test]
fn devices_filter_selects_ports_and_names_entries_matching_nothing() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    let m = with_devices(r#"["mlx5_1", "mlx5_9/1"]"#);
    let r = assess_fake(&node, &m, ProbeMode::Fresh, &probe);
    assert_eq!(ib_ports(&r), ["mlx5_1/1"]);
    assert_eq!(probe.calls(), ["mlx5_1/1"]);
    assert!(r.roce_ports.is_empty() && r.skipped.is_empty());
    assert_eq!(ports(&r.unselected), ["mlx5_0/1", "mlx5_2/1", "mlx5_3/1"]);
    assert_eq!(r.problems("high"), Vec::<String>::new());
    assert_eq!(
        r.warnings("high"),
        ["devices entry `mlx5_9/1` matches no port of this node"]
    );
    // the down port is not selected: not this node's concern
    assert_eq!(r.first_problem(), None);
}

#[test]
fn devices_filter_with_a_port_number() {
    let node = Node::from_fixture("mlx4-vpi");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(
        &node,
        &with_devices(r#"["mlx4_0/2"]"#),
        ProbeMode::Fresh,
        &probe,
    );
    assert!(r.ib_ports.is_empty());
    assert_eq!(ports(&r.roce_ports), ["mlx4_0/2"]);
    assert_eq!(ports(&r.unselected), ["mlx4_0/1"]);
}

#[test]
fn mlx4_vpi_card_has_an_ib_port_and_a_roce_port() {
    // port 1's link_layer carries a trailing blank line, as seen on real trees
    let node = Node::from_fixture("mlx4-vpi");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(ib_ports(&r), ["mlx4_0/1"]);
    assert_eq!(ports(&r.roce_ports), ["mlx4_0/2"]);
    assert_eq!(r.ib_ports[0].identity.node_guid, "0x0002c90300440320");
    assert_eq!(r.ib_ports[0].identity.lid, 4);
    assert_eq!(r.first_problem(), None);
}

#[test]
fn mlx5_quirks_phys_state_active_and_guid_without_newline() {
    let node = Node::from_fixture("mlx5-quirks");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(ib_ports(&r), ["mlx5_0/1"]);
    assert_eq!(r.ib_ports[0].identity.node_guid, "0x0a7fbc1245efd23b");
    assert_eq!(r.first_problem(), None);
}

#[test]
fn hfi1_port_is_checked_like_any_ib_port() {
    let node = Node::from_fixture("hfi1");
    let probe = FakeProbe::all(tables("qos-reversed"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(ib_ports(&r), ["hfi1_0/1"]);
    assert_eq!(
        r.problems("mission-critical"),
        ["hfi1_0/1: SL 3 -> VL 4, want VL 3"]
    );
}

#[test]
fn roce_only_node_has_no_sl2vl_to_check() {
    let node = Node::from_fixture("roce-only");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert!(probe.calls().is_empty(), "RoCE ports are not probed");
    assert_eq!(ports(&r.roce_ports), ["mlx5_0/1", "mlx5_1/1"]);
    assert_eq!(r.problems("high"), Vec::<String>::new());
    assert_eq!(
        r.warnings("high"),
        [
            "no active InfiniBand port: SL2VL not checked; RoCE port(s) mlx5_0/1, mlx5_1/1 \
          take the level's traffic_class"
        ]
    );
    assert!(r.alignment().is_empty());
    assert_eq!(r.first_problem(), None);
}

#[test]
fn node_without_hca_cannot_prove_any_level() {
    let node = Node::empty();
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    let want = "no active InfiniBand or RoCE port to carry the level \
                (no RDMA device in /sys/class/infiniband)";
    for l in LEVELS {
        assert_eq!(r.problems(l), [want]);
    }
    assert_eq!(
        r.first_problem().unwrap(),
        format!("level mission-critical: {want}")
    );
    assert!(r.active_ports().is_empty());
}

#[test]
fn node_with_every_port_down_says_which_and_how() {
    let node = Node::from_fixture("dual-hca");
    for d in ["mlx5_0", "mlx5_1", "mlx5_3"] {
        node.set(d, 1, "state", "1: DOWN");
        node.set(d, 1, "phys_state", "3: Disabled");
    }
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert!(probe.calls().is_empty());
    assert_eq!(
        r.problems("low"),
        ["no active InfiniBand or RoCE port to carry the level (\
          mlx5_0/1: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 3: Disabled); \
          mlx5_1/1: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 3: Disabled); \
          mlx5_2/1: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 2: Polling); \
          mlx5_3/1: not ACTIVE (Ethernet port, state 1: DOWN, phys_state 3: Disabled))"]
    );
}

#[test]
fn devices_selecting_nothing_is_a_problem_not_a_pass() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(
        &node,
        &with_devices(r#"["mlx5_7"]"#),
        ProbeMode::Fresh,
        &probe,
    );
    assert_eq!(
        r.problems("normal"),
        [
            "no active InfiniBand or RoCE port to carry the level (devices: selects none of \
          mlx5_0/1, mlx5_1/1, mlx5_2/1, mlx5_3/1)"
        ]
    );
}

#[test]
fn real_sysfs_layout_with_symlinked_devices() {
    // /sys/class/infiniband/<dev> is a symlink into /sys/devices/...
    let node = Node::from_fixture("dual-hca");
    let class = node.paths.sysfs_ib();
    let devices = node
        .paths
        .root
        .join("sys/devices/pci0000:00/0000:00:02.0/0000:3b:00.0/infiniband");
    fs::create_dir_all(&devices).unwrap();
    for d in ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] {
        fs::rename(class.join(d), devices.join(d)).unwrap();
        std::os::unix::fs::symlink(
            format!("../../devices/pci0000:00/0000:00:02.0/0000:3b:00.0/infiniband/{d}"),
            class.join(d),
        )
        .unwrap();
    }
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(ib_ports(&r), ["mlx5_0/1", "mlx5_1/1"]);
}

fn assess_err(node: &Node) -> String {
    let probe = FakeProbe::all(tables("qos-identity"));
    fabric::assess_with(
        &node.paths,
        &mapping(MAPPING),
        &deadline(),
        ProbeMode::Fresh,
        &probe,
        &AssessOptions::default(),
    )
    .unwrap_err()
    .to_string()
}

#[test]
fn sysfs_parse_errors_name_the_file_and_quote_the_content() {
    let node = Node::from_fixture("dual-hca");
    node.set("mlx5_1", 1, "state", "ACTIVE");
    assert_eq!(
        assess_err(&node),
        "fabric check: parse /sys/class/infiniband/mlx5_1/ports/1/state: expected `N: NAME`, \
         found \"ACTIVE\""
    );

    let node = Node::from_fixture("dual-hca");
    node.set("mlx5_0", 1, "lid", "42");
    assert_eq!(
        assess_err(&node),
        "fabric check: parse /sys/class/infiniband/mlx5_0/ports/1/lid: expected a hex LID like \
         `0x4`, found \"42\""
    );

    let node = Node::from_fixture("dual-hca");
    fs::write(
        node.paths.sysfs_ib().join("mlx5_0/node_guid"),
        "0xb83fd20300a83e1c\n",
    )
    .unwrap();
    assert_eq!(
        assess_err(&node),
        "fabric check: parse /sys/class/infiniband/mlx5_0/node_guid: expected \
         `xxxx:xxxx:xxxx:xxxx`, found \"0xb83fd20300a83e1c\""
    );

    let node = Node::from_fixture("dual-hca");
    fs::create_dir(node.paths.sysfs_ib().join("mlx5_0/ports/one")).unwrap();
    assert_eq!(
        assess_err(&node),
        "fabric check: /sys/class/infiniband/mlx5_0/ports: `one` is not a port number"
    );

    let node = Node::from_fixture("dual-hca");
    fs::remove_file(node.port_file("mlx5_1", 1, "sm_lid")).unwrap();
    let e = assess_err(&node);
    assert!(
        e.starts_with("read ") && e.contains("/root/sys/class/infiniband/mlx5_1/ports/1/sm_lid: "),
        "{e}"
    );
}

#[test]
fn ports_not_active_reads_sysfs_only() {
    let node = Node::from_fixture("dual-hca");
    let ask: Vec<PortId> = ["mlx5_0", "mlx5_2", "mlx5_7"]
        .iter()
        .map(|d| PortId::new(*d, 1))
        .collect();
    assert_eq!(
        fabric::ports_not_active(&node.paths, &ask).unwrap(),
        [
            "mlx5_2/1: state 1: DOWN, not 4: ACTIVE",
            "mlx5_7/1: port is gone (no /sys/class/infiniband/mlx5_7/ports/1/state)",
        ]
    );
    node.set("mlx5_0", 1, "state", "3: ARMED");
    assert_eq!(
        fabric::ports_not_active(&node.paths, &ask[..1]).unwrap(),
        ["mlx5_0/1: state 3: ARMED, not 4: ACTIVE"]
    );
    assert!(
        fabric::ports_not_active(&node.paths, &[])
            .unwrap()
            .is_empty()
    );
}

/// Regression (issue 24): after an HCA reset or a driver reload the kernel
/// answers ENODEV (ENXIO for a device node without its driver) for a port's
/// attributes, not ENOENT; only ENOENT counted as "the port is gone", so
/// every fabric read (the Prolog's check, `health`, `sync`) failed with
/// "No such device". "Gone" is now the settings' one definition
/// (`nodeio::Absence`): the port is gone, said, and nothing fails for it.
#[test]
fn a_port_whose_device_vanished_is_gone_not_an_error() {
    for errno in [rustix::io::Errno::NODEV, rustix::io::Errno::NXIO] {
        for file in ["state", "link_layer", "lid"] {
            let ctx = format!("{errno:?} on {file}");
            let node = Node::from_fixture("dual-hca");
            if !crate::util::dead_device(&node.port_file("mlx5_0", 1, file), errno) {
                return;
            }
            let m = mapping(MAPPING);
            let found = fabric::discover(&node.paths, &m).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let ports: Vec<String> = found.ports.iter().map(|p| p.id.to_string()).collect();
            assert!(!ports.contains(&"mlx5_0/1".to_owned()), "{ctx}: {ports:?}");
            assert!(ports.contains(&"mlx5_1/1".to_owned()), "{ctx}: {ports:?}");
            if file == "state" {
                assert_eq!(
                    fabric::ports_not_active(&node.paths, &[PortId::new("mlx5_0", 1)])
                        .unwrap_or_else(|e| panic!("{ctx}: {e}")),
                    ["mlx5_0/1: port is gone (its device is: \
                      /sys/class/infiniband/mlx5_0/ports/1/state answers ENODEV or ENXIO)"],
                    "{ctx}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- the check

/// The mission-critical level (SL 3, VL 3) on one port with `scenario`'s
/// tables, as captured on the simulated fabric.
fn check_one(scenario: &str, m: &Mapping) -> Assessment {
    let node = Node::from_fixture("mlx5-quirks");
    let probe = FakeProbe::all(tables(scenario));
    assess_fake(&node, m, ProbeMode::Fresh, &probe)
}

#[test]
fn aligned_table_passes_every_level() {
    let r = check_one("qos-identity", &mapping(MAPPING));
    assert_eq!(all_problems(&r), Vec::<String>::new());
    assert_eq!(all_warnings(&r), Vec::<String>::new());
    let v = &r.ib_ports[0].verdicts[0];
    assert_eq!(
        (v.service_level, v.vl, v.want_vl, v.aligned),
        (3, 3, Some(3), true)
    );
}

#[test]
fn table_differing_from_the_mapping_names_both_vls() {
    // the rig's default qos_ca_sl2vl 7,6,5,4,3,2,1,0,...
    let r = check_one("qos-reversed", &mapping(MAPPING));
    assert_eq!(
        r.problems("mission-critical"),
        ["mlx5_0/1: SL 3 -> VL 4, want VL 3"]
    );
    assert_eq!(r.problems("normal"), ["mlx5_0/1: SL 0 -> VL 7, want VL 0"]);
    assert_eq!(
        r.first_problem().as_deref(),
        Some("level mission-critical: mlx5_0/1: SL 3 -> VL 4, want VL 3")
    );
    assert!(r.alignment().iter().all(|(.., ok)| !ok));
}

#[test]
fn sl_on_vl15_is_dropped() {
    let r = check_one("qos-vl15", &mapping(MAPPING));
    assert_eq!(
        r.problems("mission-critical"),
        ["mlx5_0/1: SL 3 -> VL 15, the management lane: SL 3 packets are dropped; want VL 3"]
    );
    assert_eq!(r.problems("high"), Vec::<String>::new());
    // without a virtual_lane in the mapping, VL15 still fails
    let m = mapping(&MAPPING.replace("    virtual_lane: 3\n", ""));
    let r = check_one("qos-vl15", &m);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 15, the management lane: SL 3 packets are dropped; \
          want a data VL of OperVLs VL0-7"
        ]
    );
}

#[test]
fn vl_outside_opervls_fails() {
    // OperVLs lowered to VL0-1 after OpenSM programmed SL n -> VL n
    let r = check_one("opervls-lowered", &mapping(MAPPING));
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 3, outside OperVLs VL0-1: not operational; \
          want VL 3 (not operational: OperVLs VL0-1, VLCap VL0-7)"
        ]
    );
    assert_eq!(r.problems("low"), Vec::<String>::new());

    // OpenSM's own default (qos FALSE) leaves SL 8-14 on VL 8-14 with VL0-7
    let m = mapping(&MAPPING.replace("service_level: 3\n    virtual_lane: 3", "service_level: 12"));
    let r = check_one("qos-off", &m);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 12 -> VL 12, outside OperVLs VL0-7: not operational; \
          want a data VL of OperVLs VL0-7"
        ]
    );
}

#[test]
fn max_op_vls_folds_the_table_and_the_message_says_why() {
    // max_op_vls 2: OpenSM folds VL 3 to VL 1 (vl &= mask)
    let r = check_one("qos-max-op-vls-2", &mapping(MAPPING));
    assert_eq!(
        r.problems("mission-critical"),
        ["mlx5_0/1: SL 3 -> VL 1, want VL 3 (not operational: OperVLs VL0-1, VLCap VL0-7)"]
    );
    assert_eq!(r.problems("low"), Vec::<String>::new());
}

#[test]
fn vl_without_arbitration_weight_is_starved() {
    // A level whose VL is never scheduled is as lost as a dropped one: a
    // problem (stage 1 only warned), by the same rule as on a switch port.
    let r = check_one("qos-vl3-no-weight", &mapping(MAPPING));
    assert_eq!(
        all_problems(&r),
        [
            "mlx5_0/1: SL 3 -> VL 3, but VL 3 has weight 0 in both VL arbitration tables: \
          it is never scheduled (starved)"
        ]
    );
    assert_eq!(r.warnings("mission-critical"), Vec::<String>::new());
    assert_eq!(r.problems("high"), Vec::<String>::new());
}

#[test]
fn one_data_vl_needs_no_arbitration() {
    let m = mapping(
        "default_level: only\nlevels:\n  - name: only\n    qos: [normal]\n    service_level: 5\n",
    );
    let r = check_one("qos-max-op-vls-1", &m);
    assert_eq!(r.problems("only"), Vec::<String>::new());
    assert_eq!(r.warnings("only"), Vec::<String>::new());
    assert_eq!(r.ib_ports[0].verdicts[0].vl, 0);
}

#[test]
fn unknown_level_is_a_problem_not_a_silent_pass() {
    let r = check_one("qos-identity", &mapping(MAPPING));
    assert_eq!(r.problems("gold"), ["level `gold` was not assessed"]);
}

#[test]
fn audit_field_is_small_and_says_what_was_found() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-reversed")).with("mlx5_1/1", tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    let mut a = serde_json::to_value(r.level_verdict("mission-critical")).unwrap();
    for p in a["ports"].as_array_mut().unwrap() {
        p["age_ms"] = 0.into(); // timing varies
    }
    assert_eq!(
        a,
        serde_json::json!({
            "mode": "fresh",
            "ports": [
                {"port": "mlx5_0/1", "sl": 3, "vl": 4, "want_vl": 3, "oper_vls": "VL0-7",
                 "aligned": false, "source": "probe", "age_ms": 0},
                {"port": "mlx5_1/1", "sl": 3, "vl": 3, "want_vl": 3, "oper_vls": "VL0-7",
                 "aligned": true, "source": "probe", "age_ms": 0},
            ],
            "problems": ["mlx5_0/1: SL 3 -> VL 4, want VL 3"],
            "roce": ["mlx5_3/1"],
            "skipped": ["mlx5_2/1: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 2: Polling)"],
        })
    );
    assert!(serde_json::to_string(&a).unwrap().len() < 1000);
}

#[test]
fn report_round_trips_through_json() {
    let r = check_one("qos-vl3-no-weight", &mapping(MAPPING));
    let back: Assessment = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(
        back.warnings("mission-critical"),
        r.warnings("mission-critical")
    );
    assert_eq!(back.ib_ports[0].tables, r.ib_ports[0].tables);
}

// ---------------------------------------------------------------- the cache

fn opts(max_age: Duration) -> AssessOptions {
    AssessOptions {
        max_cache_age: max_age,
        ..AssessOptions::default()
    }
}

fn assess_opts(node: &Node, mode: ProbeMode, probe: &FakeProbe, o: &AssessOptions) -> Assessment {
    fabric::assess_with(&node.paths, &mapping(MAPPING), &deadline(), mode, probe, o).unwrap()
}

fn sources(r: &Assessment) -> Vec<TablesSource> {
    r.ib_ports.iter().map(|p| p.source.clone()).collect()
}

#[test]
fn job_start_with_a_fresh_cache_does_not_probe() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(sources(&r), [TablesSource::Probe, TablesSource::Probe]);
    assert_eq!(probe.take_calls().len(), 2);
    assert!(node.paths.fabric_cache().is_file());

    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert!(probe.calls().is_empty(), "{:?}", probe.calls());
    assert_eq!(sources(&r), [TablesSource::Cache, TablesSource::Cache]);
    assert_eq!(all_problems(&r), Vec::<String>::new());
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn cached_assess_runs_no_smpquery_and_reports_its_cost() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    let m = mapping(MAPPING);
    assess_fake(&node, &m, ProbeMode::Fresh, &probe);
    probe.take_calls();
    let times: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            let r = fabric::assess(&node.paths, &m, &deadline(), ProbeMode::Cached).unwrap();
            let e = t.elapsed();
            assert_eq!(sources(&r), [TablesSource::Cache, TablesSource::Cache]);
            e
        })
        .collect();
    let median = |mut t: Vec<Duration>| {
        t.sort();
        t[t.len() / 2]
    };
    // sysfs alone, the part no cache can save
    let sysfs: Vec<Duration> = (0..200)
        .map(|_| {
            let t = Instant::now();
            fabric::discover(&node.paths, &m).unwrap();
            t.elapsed()
        })
        .collect();
    eprintln!(
        "cached assess, 4 ports in sysfs (2 IB): median {:?}; reading sysfs alone: median {:?}",
        median(times),
        median(sysfs)
    );
    // the fake smpquery was never run: the cache served both IB ports.
    // (No bound on the time here: speed is measured, not asserted.)
    assert!(node.calls().is_empty(), "{:?}", node.calls());
}

#[test]
fn identity_change_invalidates_that_port_only() {
    for (file, value) in [("lid", "0x2f"), ("sm_lid", "0x7")] {
        let node = Node::from_fixture("dual-hca");
        let probe = FakeProbe::all(tables("qos-identity"));
        assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
        probe.take_calls();
        node.set("mlx5_1", 1, file, value);
        let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
        assert_eq!(probe.take_calls(), ["mlx5_1/1"], "after a new {file}");
        assert_eq!(sources(&r), [TablesSource::Cache, TablesSource::Probe]);
        // and the cache now holds the new identity
        assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
        assert!(probe.take_calls().is_empty());
    }
    // an HCA swapped for another: new node GUID
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    probe.take_calls();
    fs::write(
        node.paths.sysfs_ib().join("mlx5_0/node_guid"),
        "b83f:d203:00a8:ffff\n",
    )
    .unwrap();
    assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert_eq!(probe.take_calls(), ["mlx5_0/1"]);
}

#[test]
fn old_entries_are_probed_again() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    probe.take_calls();
    // max age 0: nothing in the cache is young enough
    assess_opts(&node, ProbeMode::Cached, &probe, &opts(Duration::ZERO));
    assert_eq!(probe.take_calls().len(), 2);
    // an entry probed 301 s ago, with the default 300 s
    let path = node.paths.fabric_cache();
    let mut cache: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    let at = cache["ports"][0]["probed_at_ms"].as_u64().unwrap();
    cache["ports"][0]["probed_at_ms"] = (at - 301_000).into();
    fs::write(&path, serde_json::to_vec(&cache).unwrap()).unwrap();
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert_eq!(probe.take_calls(), ["mlx5_0/1"]);
    assert_eq!(sources(&r), [TablesSource::Probe, TablesSource::Cache]);
    // an entry from the future (the clock went back): age unknown, re-probe
    let mut cache: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    cache["ports"][1]["probed_at_ms"] = (at + 3_600_000).into();
    fs::write(&path, serde_json::to_vec(&cache).unwrap()).unwrap();
    assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert_eq!(probe.take_calls(), ["mlx5_1/1"]);
}

#[test]
fn fresh_always_probes_and_refreshes_the_cache() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    probe.take_calls();
    // the SM re-swept with another table: identity unchanged
    let drifted = FakeProbe::all(tables("qos-reversed"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &drifted);
    assert!(drifted.take_calls().is_empty());
    assert_eq!(
        all_problems(&r),
        Vec::<String>::new(),
        "the cache is trusted for its age"
    );
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &drifted);
    assert_eq!(drifted.take_calls().len(), 2);
    assert_eq!(r.problems("mission-critical").len(), 2);
    // ...and the next job start sees the drift from the refreshed cache
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
    assert!(probe.take_calls().is_empty());
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 4, want VL 3",
            "mlx5_1/1: SL 3 -> VL 4, want VL 3"
        ]
    );
}

#[test]
fn corrupt_cache_is_ignored_and_rewritten() {
    for garbage in [
        "{not json",
        "{\"version\": 99, \"ports\": []}",
        "",
        "[1,2,3]",
    ] {
        let node = Node::from_fixture("dual-hca");
        fs::create_dir_all(&node.paths.run_dir).unwrap();
        fs::write(node.paths.fabric_cache(), garbage).unwrap();
        let probe = FakeProbe::all(tables("qos-identity"));
        let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
        assert_eq!(probe.take_calls().len(), 2, "{garbage:?}");
        assert_eq!(all_problems(&r), Vec::<String>::new());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(
            r.notes[0].starts_with("fabric cache /run/qoslane/fabric.json ignored: "),
            "{:?}",
            r.notes
        );
        assert!(serde_json::to_value(r.level_verdict("high")).unwrap()["notes"].is_array());
        // rewritten: the next run uses it
        let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Cached, &probe);
        assert!(probe.take_calls().is_empty(), "{garbage:?}");
        assert!(r.notes.is_empty());
    }
}

#[test]
fn unwritable_cache_is_noted_not_fatal() {
    let node = Node::from_fixture("dual-hca");
    fs::create_dir_all(node.paths.run_dir.parent().unwrap()).unwrap();
    fs::write(&node.paths.run_dir, "a file where the run dir should be").unwrap();
    let probe = FakeProbe::all(tables("qos-identity"));
    let r = assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    assert_eq!(all_problems(&r), Vec::<String>::new());
    assert_eq!(r.notes.len(), 1);
    assert!(
        r.notes[0].starts_with("fabric cache not written: "),
        "{:?}",
        r.notes
    );
}

#[test]
fn cache_write_leaves_no_temp_files() {
    let node = Node::from_fixture("dual-hca");
    let probe = FakeProbe::all(tables("qos-identity"));
    for _ in 0..3 {
        assess_fake(&node, &mapping(MAPPING), ProbeMode::Fresh, &probe);
    }
    let names: Vec<String> = fs::read_dir(&node.paths.run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["fabric.json"]);
}

// ---------------------------------------------------------------- smpquery

fn assess_smpquery(
    node: &Node,
    d: &Deadline,
    o: &AssessOptions,
) -> qoslane::error::Result<Assessment> {
    let probe = fabric::Smpquery::new(&node.paths.smpquery);
    fabric::assess_with(
        &node.paths,
        &mapping(MAPPING),
        d,
        ProbeMode::Fresh,
        &probe,
        o,
    )
}

#[test]
fn smpquery_is_asked_three_questions_per_port() {
    let node = Node::from_fixture("dual-hca");
    node.fake_scenario("qos-identity");
    let r = fabric::assess(
        &node.paths,
        &mapping(MAPPING),
        &deadline(),
        ProbeMode::Fresh,
    )
    .unwrap();
    assert_eq!(all_problems(&r), Vec::<String>::new());
    let mut calls = node.calls();
    calls.sort();
    assert_eq!(
        calls,
        [
            "-C mlx5_0 -P 1 -D portinfo 0",
            "-C mlx5_0 -P 1 -D sl2vl 0",
            "-C mlx5_0 -P 1 -D vlarb 0",
            "-C mlx5_1 -P 1 -D portinfo 0",
            "-C mlx5_1 -P 1 -D sl2vl 0",
            "-C mlx5_1 -P 1 -D vlarb 0",
        ]
    );
    assert_eq!(r.ib_ports[0].tables, tables("qos-identity"));
}

#[test]
fn smpquery_hanging_fails_within_the_deadline() {
    let node = Node::from_fixture("mlx5-quirks");
    node.fake("hang", "");
    let t = Instant::now();
    let e = assess_smpquery(
        &node,
        &Deadline::after(Duration::from_millis(700)),
        &AssessOptions::default(),
    )
    .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, Error::Deadline { .. }), "{e}");
    assert!(e.to_string().contains(" -C mlx5_0 -P 1 -D "), "{e}");
    assert!(e.to_string().ends_with("deadline of 700 ms passed"), "{e}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");

    // the probe's own bound, well inside a long run deadline
    let t = Instant::now();
    let o = AssessOptions {
        probe_timeout: Duration::from_millis(300),
        ..AssessOptions::default()
    };
    let e = assess_smpquery(&node, &Deadline::after(Duration::from_secs(60)), &o).unwrap_err();
    assert!(e.to_string().ends_with("deadline of 300 ms passed"), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1100),
        "took {:?}",
        t.elapsed()
    );
}

#[test]
fn smpquery_garbage_is_an_error_quoting_the_line() {
    let node = Node::from_fixture("mlx5-quirks");
    node.fake_scenario("qos-identity");
    node.fake("any.sl2vl.txt", "ibwarn: something odd\n");
    let e = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "fabric check: mlx5_0/1: smpquery sl2vl: line 1: expected `# SL2VL table: …`, \
         found `ibwarn: something odd`"
    );
    let node = Node::from_fixture("mlx5-quirks");
    node.fake_scenario("qos-identity");
    node.fake(
        "any.portinfo.txt",
        &captured("qos-identity", "portinfo").replace(
            "OperVLs:.........................VL0-7",
            "OperVLs:.........................?(6)",
        ),
    );
    let e = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("fabric check: mlx5_0/1: smpquery portinfo: line ")
            && e.to_string().ends_with(
                ": expected OperVLs VL0, VL0-1, VL0-3, VL0-7 or VL0-14, \
                 found `OperVLs:.........................?(6)`"
            ),
        "{e}"
    );
}

#[test]
fn smpquery_failing_names_the_query_and_its_message() {
    let node = Node::from_fixture("mlx5-quirks");
    node.fake_scenario("qos-identity");
    // what the real tool printed for a port the CA does not have
    let stderr = captured("no-such-port", "stderr");
    node.fake("any.sl2vl.stderr", stderr.lines().next().unwrap());
    node.fake("any.sl2vl.rc", "255");
    node.fake("any.sl2vl.txt", "");
    let e = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Program { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("bin/smpquery: -C mlx5_0 -P 1 -D sl2vl 0: exit status: 255 (ibwarn: ["),
        "{msg}"
    );
    assert!(
        msg.ends_with("mad_rpc_open_port: can't open UMAD port (ibsim0:2))"),
        "{msg}"
    );
}

#[test]
fn smpquery_missing_is_an_error() {
    let node = Node::from_fixture("mlx5-quirks");
    fs::remove_file(&node.paths.smpquery).unwrap();
    let e = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Program { .. }), "{e}");
    assert!(e.to_string().contains("cannot run"), "{e}");
}

#[test]
fn vlarb_failure_is_a_warning_not_an_error() {
    let node = Node::from_fixture("mlx5-quirks");
    node.fake_scenario("qos-identity");
    node.fake("any.vlarb.txt", "");
    node.fake(
        "any.vlarb.stderr",
        "smpquery: iberror: failed: operation vlarb: vl arb query failed",
    );
    node.fake("any.vlarb.rc", "255");
    let r = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap();
    assert_eq!(all_problems(&r), Vec::<String>::new());
    let w = r.warnings("high");
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with("mlx5_0/1: VL arbitration tables not read ("),
        "{w:?}"
    );
    assert!(
        w[0].ends_with("vl arb query failed)): cannot tell whether VL 2 is scheduled"),
        "{w:?}"
    );
}

#[test]
fn smpquery_answering_for_another_port_is_refused() {
    let node = Node::from_fixture("mlx4-vpi");
    node.fake_scenario("qos-identity"); // LocalPort 1
    node.set("mlx4_0", 2, "link_layer", "InfiniBand");
    node.set("mlx4_0", 2, "lid", "0x5");
    node.set("mlx4_0", 2, "sm_lid", "0x1");
    let e = assess_smpquery(&node, &deadline(), &AssessOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "fabric check: mlx4_0/2: smpquery portinfo answered for port 1, not port 2"
    );
}

#[test]
fn every_captured_output_parses() {
    let mut n = 0;
    for e in fs::read_dir(fixtures().join("smpquery")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&p).unwrap();
        let ok = if name.ends_with(".sl2vl.txt") {
            parse::parse_sl2vl(&text).map(drop)
        } else if name.ends_with(".portinfo.txt") {
            parse::parse_portinfo(&text).map(drop)
        } else if name.ends_with(".vlarb.txt") {
            parse::parse_vlarb(&text).map(drop)
        } else {
            continue;
        };
        ok.unwrap_or_else(|e| panic!("{name}: {e}"));
        n += 1;
    }
    assert!(n >= 20, "{n} captures");
}
