//! The fabric audit's HTML page of a 1,008-HCA fat tree (56 leaves of 18
//! HCAs, 18 spines: bench/fabric_audit.sh's ft:56:18:18), built in memory
//! as the sweep would give it (4 levels; one dropped by a spine toward one
//! leaf, one starved toward one HCA; wait ticks on every port), rendered:
//! the time per page and, printed once, its size.
//!
//! `cargo bench -p qoslane --bench page`

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use qoslane::fabric::counters::pma::PortWait;
use qoslane::fabric::judge::lane::Lane;
use qoslane::fabric::read::parse::parse_topology;
use qoslane::fabric::sweep::page::{self, Page};
use qoslane::fabric::sweep::{InLane, LevelSweep, PortLanes, Sweep};
use qoslane::fabric::tables::{NodeType, Topology, VlRange};

const LEAVES: u32 = 56;
const HCAS: u32 = 18;
const SPINES: u32 = 18;

fn leaf_lid(l: u32) -> u32 {
    100 + l
}
fn spine_lid(s: u32) -> u32 {
    10 + s
}
fn hca_lid(l: u32, h: u32) -> u32 {
    1000 + l * HCAS + h
}

/// `ibnetdiscover -p` of the tree: every port of every node.
fn topology() -> Topology {
    let mut t = String::new();
    for l in 0..LEAVES {
        for h in 0..HCAS {
            let (hl, ll) = (hca_lid(l, h), leaf_lid(l));
            let _ = writeln!(
                t,
                "SW {ll} {p} 0x2{l:015x} 4x EDR - CA {hl} 1 0x1{hl:015x} ( 'leaf{l}' - 'node{hl} HCA-1' )\n\
                 CA {hl} 1 0x1{hl:015x} 4x EDR - SW {ll} {p} 0x2{l:015x} ( 'node{hl} HCA-1' - 'leaf{l}' )",
                p = h + 1
            );
        }
        for s in 0..SPINES {
            let (ll, sl) = (leaf_lid(l), spine_lid(s));
            let _ = writeln!(
                t,
                "SW {ll} {p} 0x2{l:015x} 4x EDR - SW {sl} {q} 0x3{s:015x} ( 'leaf{l}' - 'spine{s}' )\n\
                 SW {sl} {q} 0x3{s:015x} 4x EDR - SW {ll} {p} 0x2{l:015x} ( 'spine{s}' - 'leaf{l}' )",
                p = HCAS + s + 1,
                q = l + 1
            );
        }
    }
    parse_topology(&t).expect("the generated tree parses")
}

/// Every egress port of the tree for one level: carried on VL `vl`, but
/// `bad` (a port and its verdict).
fn ports(topo: &Topology, vl: u8, bad: Option<(u16, u32, Lane)>) -> Vec<PortLanes> {
    topo.ports
        .iter()
        .filter(|p| p.remote.is_some())
        .map(|p| {
            let lane = bad
                .filter(|b| (b.0, b.1) == (p.end.lid, p.end.port))
                .map_or(Lane::Carried, |b| b.2);
            PortLanes {
                kind: p.end.kind,
                guid: p.end.guid.clone(),
                name: p.end.name.clone(),
                lid: p.end.lid,
                port: p.end.port,
                oper_vls: VlRange::parse("VL0-7").expect("a range"),
                groups: vec![InLane {
                    vl: if lane == Lane::Dropped { 15 } else { vl },
                    lane,
                    weight: Some(if lane == Lane::Starved { 0 } else { 64 }),
                    in_ports: Vec::new(),
                }],
            }
        })
        .collect()
}

fn sweep() -> Sweep {
    let topology = topology();
    let level = |name: &str, sl: u8, bad| LevelSweep {
        level: name.into(),
        sl,
        virtual_lane: Some(sl),
        pairs: BTreeMap::new(),
        findings: Vec::new(),
        ports: ports(&topology, sl, bad),
    };
    let spine = u16::try_from(spine_lid(3)).expect("a lid");
    let leaf = u16::try_from(leaf_lid(40)).expect("a lid");
    Sweep {
        switches: usize::try_from(LEAVES + SPINES).expect("small"),
        hcas: usize::try_from(LEAVES * HCAS).expect("small"),
        ports_read: topology.ports.len(),
        not_routed: None,
        unread: Vec::new(),
        levels: vec![
            level("mission-critical", 3, Some((spine, 8, Lane::Dropped))),
            level("high", 2, Some((leaf, 5, Lane::Starved))),
            level("normal", 0, None),
            level("low", 1, None),
        ],
        duration_ms: 1,
        workers: 4,
        reader: "in-process",
        fallback: None,
        topology,
        xmit_wait: Vec::new(),
        wait_levels: Vec::new(),
        xmit_wait_unread: Vec::new(),
        deadlock: qoslane::fabric::sweep::routes::Routes::default(),
        sm_policy: qoslane::fabric::sweep::sm_classes::ClassCheck::default(),
        cost: qoslane::fabric::sweep::Cost::default(),
        wait_ports: Vec::new(),
    }
}

fn waits(topo: &Topology) -> Vec<PortWait> {
    topo.ports
        .iter()
        .filter(|p| p.remote.is_some())
        .map(|p| PortWait {
            kind: NodeType::Switch,
            name: p.end.name.clone(),
            lid: p.end.lid,
            port: p.end.port,
            ticks: (0..16u64)
                .map(|vl| Some(vl * 1000 + u64::from(p.end.port)))
                .collect(),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let s = sweep();
    let w = waits(&s.topology);
    let render = |waits: &[PortWait]| {
        page::render(&Page {
            sweep: &s,
            summary: "verdict: 2 of 4 levels fail: mission-critical (not carried), high (not carried)\n",
            mapping: "/etc/qoslane/qos-network.yml",
            mapping_sha256: "0",
            time: "2026-12-03T13:00:00Z",
            verdict: "not_carried",
            waits,
        })
    };
    eprintln!(
        "page of ft:{LEAVES}:{HCAS}:{SPINES}: {} bytes; with wait ticks {} bytes",
        render(&[]).len(),
        render(&w).len()
    );
    c.bench_function("page/ft:56:18:18", |b| b.iter(|| black_box(render(&[]))));
    c.bench_function("page/ft:56:18:18 with waits", |b| {
        b.iter(|| black_box(render(&w)));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
