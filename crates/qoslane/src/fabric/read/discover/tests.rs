use super::*;
use crate::deadline::Deadline;
use crate::fabric::read::mad::SMP_DATA_SIZE;
use crate::fabric::read::parse::parse_topology;

/// A node of a fake fabric: its cables by port (1..), which answer
/// directed-route Gets as a switch's or HCA's SMA does.
#[derive(Clone)]
struct FakeNode {
    kind: u8,
    guid: u64,
    desc: &'static [u8],
    lid: u16,
    device: u16,
    /// By port number - 1: the far (node, port), or nothing cabled.
    cables: Vec<Option<(usize, u8)>>,
    /// By port number - 1: LinkSpeedActive (4: QDR).
    speed: Vec<u8>,
}

struct Fake {
    nodes: Vec<FakeNode>,
    /// The port of node 0 the walk sends from.
    start: u8,
    /// Gets left unanswered (by attribute and the node's index).
    deaf: Vec<(Attr, usize)>,
    sent: usize,
}

impl Fake {
    /// The node at the end of `path` and the port it was entered by.
    fn at(&self, path: &[u8]) -> Option<(usize, u8)> {
        let (mut node, mut port) = (0usize, self.start);
        for &out in path {
            let (n, p) = (*self.nodes[node]
                .cables
                .get(usize::from(out).checked_sub(1)?)?)?;
            (node, port) = (n, p);
        }
        Some((node, port))
    }

    fn port_guid(&self, node: usize, port: u8) -> u64 {
        let n = &self.nodes[node];
        if n.kind == 2 {
            n.guid
        } else {
            n.guid + u64::from(port)
        }
    }

    fn answer(&mut self, g: &Get) -> Result<SmpData> {
        self.sent += 1;
        let Route::Directed(path) = &g.route else {
            panic!("not a directed route: {g}");
        };
        let no = || Err(Error::Fabric(format!("{g}: no answer")));
        let Some((node, entered)) = self.at(path) else {
            return no();
        };
        if self.deaf.contains(&(g.attr, node)) {
            return no();
        }
        let n = &self.nodes[node];
        let mut d: SmpData = [0; SMP_DATA_SIZE];
        match g.attr {
            Attr::NodeInfo => {
                d[2] = n.kind;
                d[3] = u8::try_from(n.cables.len()).unwrap();
                d[12..20].copy_from_slice(&n.guid.to_be_bytes());
                d[20..28].copy_from_slice(&self.port_guid(node, entered).to_be_bytes());
                d[30..32].copy_from_slice(&n.device.to_be_bytes());
                d[36] = entered;
                d[37..40].copy_from_slice(&[0x00, 0x02, 0xc9]);
            }
            Attr::NodeDesc => d[..n.desc.len()].copy_from_slice(n.desc),
            Attr::PortInfo => {
                let p = u8::try_from(g.modifier).unwrap();
                let lid = if n.kind == 2 {
                    n.lid
                } else {
                    n.lid + u16::from(p) - 1
                };
                d[16..18].copy_from_slice(&lid.to_be_bytes());
                d[28] = entered;
                let up = p == 0 || n.cables[usize::from(p) - 1].is_some();
                d[32] = if up { 4 } else { 1 };
                d[33] = if up { LINK_UP << 4 } else { 2 << 4 };
                let speed = if p == 0 {
                    1
                } else {
                    n.speed[usize::from(p) - 1]
                };
                d[35] = speed << 4;
            }
            a => panic!("not asked by a walk: {a:?}"),
        }
        Ok(d)
    }

    fn walk(&mut self, mlx_epi: bool) -> Result<Topology> {
        walk(
            &mut |gets| gets.iter().map(|g| self.answer(g)).collect(),
            mlx_epi,
        )
    }
}

fn node(kind: u8, guid: u64, desc: &'static [u8], lid: u16, ports: usize) -> FakeNode {
    FakeNode {
        kind,
        guid,
        desc,
        lid,
        device: 0xb924,
        cables: vec![None; ports],
        speed: vec![1; ports],
    }
}

/// h1 (the walk's own HCA) – leaf1 (4 ports, 4 down) – h2; leaf1 –
/// spine – leaf2 (3 ports, 3 down) – h3.
fn two_leaves() -> Fake {
    let mut nodes = vec![
        node(1, 0xa100, b"h1 HCA-1", 10, 1),
        node(2, 0x5100, b"leaf1", 2, 4),
        node(1, 0xa200, b"h2 HCA-1", 11, 1),
        node(2, 0x5300, b"spine", 1, 2),
        node(2, 0x5200, b"leaf2", 3, 3),
        node(1, 0xa300, b"h3 HCA-1", 12, 1),
    ];
    let mut cable = |a: (usize, u8), b: (usize, u8)| {
        nodes[a.0].cables[usize::from(a.1) - 1] = Some(b);
        nodes[b.0].cables[usize::from(b.1) - 1] = Some(a);
    };
    cable((0, 1), (1, 1));
    cable((1, 2), (2, 1));
    cable((1, 3), (3, 1));
    cable((3, 2), (4, 1));
    cable((4, 2), (5, 1));
    Fake {
        nodes,
        start: 1,
        deaf: Vec::new(),
        sent: 0,
    }
}

/// What `ibnetdiscover -p` prints of [`two_leaves`] (its answers in the
/// order asked): the nodes last found first, ports from the last down.
const TWO_LEAVES: &str = "\
CA    12  1 0x000000000000a301 1x SDR - SW     3  2 0x0000000000005200 ( 'h3 HCA-1' - 'leaf2' )
SW     3  3 0x0000000000005200 1x SDR                                    'leaf2'
SW     3  2 0x0000000000005200 1x SDR - CA    12  1 0x000000000000a301 ( 'leaf2' - 'h3 HCA-1' )
SW     3  1 0x0000000000005200 1x SDR - SW     1  2 0x0000000000005300 ( 'leaf2' - 'spine' )
SW     1  2 0x0000000000005300 1x SDR - SW     3  1 0x0000000000005200 ( 'spine' - 'leaf2' )
SW     1  1 0x0000000000005300 1x SDR - SW     2  3 0x0000000000005100 ( 'spine' - 'leaf1' )
CA    11  1 0x000000000000a201 1x SDR - SW     2  2 0x0000000000005100 ( 'h2 HCA-1' - 'leaf1' )
SW     2  4 0x0000000000005100 1x SDR                                    'leaf1'
SW     2  3 0x0000000000005100 1x SDR - SW     1  1 0x0000000000005300 ( 'leaf1' - 'spine' )
SW     2  2 0x0000000000005100 1x SDR - CA    11  1 0x000000000000a201 ( 'leaf1' - 'h2 HCA-1' )
SW     2  1 0x0000000000005100 1x SDR - CA    10  1 0x000000000000a101 ( 'leaf1' - 'h1 HCA-1' )
CA    10  1 0x000000000000a101 1x SDR - SW     2  1 0x0000000000005100 ( 'h1 HCA-1' - 'leaf1' )
";

#[test]
fn the_walk_gives_what_ibnetdiscover_prints_port_for_port_and_in_its_order() {
    let mut fake = two_leaves();
    let walked = fake.walk(true).unwrap();
    let printed = parse_topology(TWO_LEAVES).unwrap();
    assert_eq!(walked.ports, printed.ports);
    // NodeInfo, NodeDescription and PortInfo, none twice but the NodeInfo
    // of a node reached again: 6 nodes, 3 switches' ports 0 and 9 ports,
    // 3 HCAs' ports.
    assert_eq!(fake.sent, 6 * 2 + 3 + 9 + 3);
}

#[test]
fn a_node_reached_twice_is_one_node_with_both_ports_cabled() {
    // A second cable from leaf2 back to h1's other port: h1 is reached
    // again and its port 2 found on the same node; every switch once.
    let mut fake = two_leaves();
    fake.nodes[0].cables.push(None);
    fake.nodes[0].speed.push(1);
    fake.nodes[4].cables[2] = Some((0, 2));
    fake.nodes[0].cables[1] = Some((4, 3));
    let t = fake.walk(true).unwrap();
    assert_eq!(t.count(NodeType::Switch), 3);
    let h1: Vec<(u32, Option<(u16, u32)>)> = t
        .ports
        .iter()
        .filter(|p| p.end.name == "h1 HCA-1")
        .map(|p| (p.end.port, p.remote.as_ref().map(|r| (r.lid, r.port))))
        .collect();
    assert_eq!(h1, [(2, Some((3, 3))), (1, Some((2, 1)))]);
    let leaf2_3 = t
        .ports
        .iter()
        .find(|p| p.end.name == "leaf2" && p.end.port == 3)
        .unwrap();
    let far = leaf2_3.remote.as_ref().unwrap();
    assert_eq!((far.guid.as_str(), far.lid), ("0x000000000000a102", 11));
    // Every cable seen from both ends.
    for p in &t.ports {
        if let Some(r) = &p.remote {
            let back = t
                .ports
                .iter()
                .find(|q| q.end.guid == r.guid && q.end.port == r.port)
                .unwrap();
            assert_eq!(back.remote.as_ref().unwrap(), &p.end);
        }
    }
}

#[test]
fn a_mellanox_qdr_port_is_a_step_later_as_ibnetdiscover_asks_its_extended_port_info() {
    // leaf1 a SwitchX whose port to h2 is QDR (ibnetdiscover asks its
    // ExtendedPortInfo first) and its port to the spine SDR: the spine is
    // found before h2, and printed after it.
    let mut fake = two_leaves();
    fake.nodes[1].device = 0xc738;
    fake.nodes[1].speed[1] = 4;
    let t = fake.walk(true).unwrap();
    let order: Vec<&str> = t.ports.iter().map(|p| p.end.name.as_str()).collect();
    let first = |name| order.iter().position(|n| *n == name).unwrap();
    assert!(first("h2 HCA-1") < first("spine"), "{order:?}");
    // Without it (`MLX_EPI=false`), the order of TWO_LEAVES.
    let mut fake = two_leaves();
    fake.nodes[1].device = 0xc738;
    fake.nodes[1].speed[1] = 4;
    let plain = fake.walk(false).unwrap();
    assert_eq!(plain.ports, parse_topology(TWO_LEAVES).unwrap().ports);
    // The same cables either way, and nothing more was sent for it.
    let mut a = t.ports.clone();
    let mut b = plain.ports.clone();
    let key = |p: &DiscoveredPort| (p.end.guid.clone(), p.end.port);
    a.sort_by_key(key);
    b.sort_by_key(key);
    assert_eq!(a, b);
}

#[test]
fn unanswered_gets_leave_out_what_ibnetdiscover_leaves_out() {
    // The spine's NodeDescription unanswered: an empty name; h3's NodeInfo
    // unanswered: leaf2's port 2 printed as not connected, h3 not at all.
    let mut fake = two_leaves();
    fake.deaf = vec![(Attr::NodeDesc, 3), (Attr::NodeInfo, 5)];
    let t = fake.walk(true).unwrap();
    assert!(t.ports.iter().all(|p| p.end.name != "h3 HCA-1"));
    let leaf2_2 = t
        .ports
        .iter()
        .find(|p| p.end.name == "leaf2" && p.end.port == 2)
        .unwrap();
    assert_eq!(leaf2_2.remote, None);
    assert!(
        t.ports
            .iter()
            .any(|p| p.end.name.is_empty() && p.end.lid == 1)
    );
    // The walk's own node silent: no topology.
    let mut fake = two_leaves();
    fake.deaf = vec![(Attr::NodeInfo, 0)];
    assert!(fake.walk(true).is_err());
}

#[test]
fn the_deadline_ends_the_walk() {
    let late = || Deadline::after(std::time::Duration::ZERO).passed("SMP Get".to_owned());
    let mut calls = 0;
    let r = walk(
        &mut |gets: &[Get]| {
            calls += 1;
            gets.iter().map(|_| Err(late())).collect()
        },
        true,
    );
    assert!(matches!(r, Err(Error::Deadline { .. })), "{r:?}");
    assert_eq!(calls, 1);
}

#[test]
fn a_description_is_cleaned_as_ibnetdiscover_prints_it() {
    let mut d: SmpData = [0; SMP_DATA_SIZE];
    d[..11].copy_from_slice(b" sw\t1 \xc3\xa9 x\x7f");
    assert_eq!(clean_desc(&d), " sw 1    x ");
    let full: SmpData = [b'a'; SMP_DATA_SIZE];
    assert_eq!(clean_desc(&full).len(), 64);
}

#[test]
fn names_in_force_are_a_node_name_map_or_an_ibdiag_setting() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(names_in_force(root.path()), None);
    let conf = root.path().join("etc/infiniband-diags");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("ibdiag.conf"), "# a comment\n\n#MLX_EPI=false\n").unwrap();
    assert_eq!(names_in_force(root.path()), None);
    std::fs::write(conf.join("ibdiag.conf"), "# a comment\nMLX_EPI=false\n").unwrap();
    assert!(
        names_in_force(root.path())
            .unwrap()
            .contains("MLX_EPI=false")
    );
    std::fs::write(conf.join("ibdiag.conf"), "").unwrap();
    let rdma = root.path().join("etc/rdma");
    std::fs::create_dir_all(&rdma).unwrap();
    std::fs::write(rdma.join("ib-node-name-map"), "0x1 \"x\"\n").unwrap();
    assert!(
        names_in_force(root.path())
            .unwrap()
            .contains("ib-node-name-map")
    );
}
