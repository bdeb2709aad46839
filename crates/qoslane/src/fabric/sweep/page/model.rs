//! The page's data, as the script draws it: every node with its tier of the
//! tree (HCAs 0, the switches they hang from 1, each switch above one more
//! than the nearest below), every cable once, and per level what each end of
//! each cable does with the level's SL — taken from the sweep's decided
//! [`PortLanes`], never judged here — with the wait ticks of the level's VL
//! at that end when the fabric's wait counters were read.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::fabric::counters::pma::PortWait;
use crate::fabric::judge::lane::Lane;
use crate::fabric::sweep::reach::Reach;
use crate::fabric::sweep::{InLane, PortLanes, Sweep};
use crate::fabric::tables::{NodeType, Topology};

/// What an end of a cable shows for one level: the worst verdict of its
/// groups, or `unread` when its egress port was not read.
pub const UNREAD: &str = "unread";

/// The states a cable end can show, most serious first (the legend's order).
pub const STATES: [&str; 8] = [
    "link_down",
    "dropped",
    "not_operational",
    "starved",
    "other_vl",
    UNREAD,
    "arbitration_unknown",
    "carried",
];

#[derive(Debug, Serialize)]
pub struct PageModel {
    pub nodes: Vec<DrawnNode>,
    pub links: Vec<Cable>,
    pub levels: Vec<LevelView>,
    /// Whether any wait ticks were given (the "colour by wait" choice).
    pub waits: bool,
}

#[derive(Debug, Serialize)]
pub struct DrawnNode {
    pub kind: &'static str,
    pub name: String,
    pub guid: String,
    pub lid: u16,
    pub tier: u32,
    /// An HCA's switch (the first it is cabled to): its group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf: Option<usize>,
}

/// A cable: node `a` port `ap` to node `b` port `bp`.
#[derive(Debug, Serialize)]
pub struct Cable {
    pub a: usize,
    pub ap: u32,
    pub b: usize,
    pub bp: u32,
}

#[derive(Debug, Serialize)]
pub struct LevelView {
    pub name: String,
    pub sl: u8,
    pub vl: Option<u8>,
    pub carried: bool,
    /// Per link (same order as `links`): the egress at `a` (toward `b`),
    /// then the egress at `b`.
    pub ends: Vec<[CableEnd; 2]>,
}

/// One egress port of a cable, for one level.
#[derive(Debug, Serialize)]
pub struct CableEnd {
    /// The state shown: one of [`STATES`].
    pub s: &'static str,
    /// Its groups: (VL, verdict, VL arbitration weight, in ports — empty
    /// when the port has one group).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub g: Vec<(u8, &'static str, Option<u32>, Vec<u32>)>,
    /// Wait ticks of the VLs the level lands on here (the most of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub w: Option<u64>,
    /// When the end fails the level (a state worse than `unread`): the
    /// HCAs whose traffic of the level takes it (indices into `nodes`,
    /// each once), as [`Reach::of_egress`] says for its failing groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub r: Vec<usize>,
}

/// How serious a state is: its place in [`STATES`] (lower: worse).
pub fn rank(state: &str) -> usize {
    STATES
        .iter()
        .position(|s| *s == state)
        .unwrap_or(STATES.len())
}

/// The model of `sweep` (its topology and per-level ports) with `waits`.
pub fn build(sweep: &Sweep, waits: &[PortWait]) -> PageModel {
    let topo = &sweep.topology;
    let (nodes, index) = nodes(topo);
    let links = links(topo, &index);
    let wait_at: HashMap<(u16, u32), &PortWait> =
        waits.iter().map(|w| ((w.lid, w.port), w)).collect();
    // Each cable end's (LID, port): a switch's ports share its LID, each
    // HCA port has its own.
    let lid_of: HashMap<(&str, u32), u16> = topo
        .ports
        .iter()
        .map(|p| ((p.end.guid.as_str(), p.end.port), p.end.lid))
        .collect();
    let ends: Vec<[(u16, u32); 2]> = links
        .iter()
        .map(|l| {
            let at = |n: usize, port: u32| {
                let lid = lid_of.get(&(nodes[n].guid.as_str(), port)).copied();
                (lid.unwrap_or(nodes[n].lid), port)
            };
            [at(l.a, l.ap), at(l.b, l.bp)]
        })
        .collect();
    let reach = Reach::new(topo);
    let levels = sweep
        .levels
        .iter()
        .map(|level| {
            let read: HashMap<(u16, u32), &PortLanes> =
                level.ports.iter().map(|p| ((p.lid, p.port), p)).collect();
            let view = |at: (u16, u32)| {
                let p = read.get(&at).copied();
                let mut e = end(p, &wait_at, at);
                if let Some(p) = p.filter(|_| fails(e.s)) {
                    e.r = reached(&reach, p, &index);
                }
                e
            };
            LevelView {
                name: level.level.clone(),
                sl: level.sl,
                vl: level.virtual_lane,
                carried: level.carried(),
                ends: ends.iter().map(|&[a, b]| [view(a), view(b)]).collect(),
            }
        })
        .collect();
    PageModel {
        nodes,
        links,
        levels,
        waits: !waits.is_empty(),
    }
}

/// A state that fails the level (worse than `unread`).
pub fn fails(state: &str) -> bool {
    rank(state) < rank(UNREAD)
}

/// The HCAs (node indices, each once) the failing groups of `p` reach:
/// their in ports, or every in port when one of them names none.
fn reached(reach: &Reach<'_>, p: &PortLanes, index: &HashMap<String, usize>) -> Vec<usize> {
    let failing: Vec<&InLane> = p.groups.iter().filter(|g| fails(g.lane.as_str())).collect();
    let in_ports: Vec<u32> = if failing.iter().any(|g| g.in_ports.is_empty()) {
        Vec::new()
    } else {
        failing.iter().flat_map(|g| g.in_ports.clone()).collect()
    };
    let mut v: Vec<usize> = reach
        .of_egress(p.kind, &p.guid, p.port, &in_ports)
        .iter()
        .filter_map(|h| index.get(&h.guid).copied())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn end(p: Option<&PortLanes>, waits: &HashMap<(u16, u32), &PortWait>, at: (u16, u32)) -> CableEnd {
    let Some(p) = p else {
        return CableEnd {
            s: UNREAD,
            g: Vec::new(),
            w: None,
            r: Vec::new(),
        };
    };
    let s = p
        .groups
        .iter()
        .map(|g| g.lane.as_str())
        .min_by_key(|s| rank(s))
        .unwrap_or(UNREAD);
    let one = p.groups.len() == 1;
    let g = p
        .groups
        .iter()
        .map(
            |InLane {
                 vl,
                 lane,
                 weight,
                 in_ports,
             }| {
                (
                    *vl,
                    lane.as_str(),
                    *weight,
                    if one { Vec::new() } else { in_ports.clone() },
                )
            },
        )
        .collect();
    let w = waits.get(&at).and_then(|w| {
        p.groups
            .iter()
            .filter(|g| g.lane != Lane::LinkDown)
            .filter_map(|g| w.ticks.get(usize::from(g.vl)).copied().flatten())
            .max()
    });
    CableEnd {
        s,
        g,
        w,
        r: Vec::new(),
    }
}

fn kind_word(k: NodeType) -> &'static str {
    match k {
        NodeType::Switch => "switch",
        NodeType::Hca => "hca",
        NodeType::Router => "router",
    }
}

/// Every node once, ordered by tier (top first) then by name, numbers
/// compared as numbers (`leaf2` before `leaf10`); its index by GUID.
fn nodes(topo: &Topology) -> (Vec<DrawnNode>, HashMap<String, usize>) {
    let mut seen: BTreeMap<&str, (NodeType, &str, u16)> = BTreeMap::new();
    for p in &topo.ports {
        seen.entry(p.end.guid.as_str())
            .or_insert((p.end.kind, p.end.name.as_str(), p.end.lid));
    }
    let tiers = tiers(topo);
    let mut v: Vec<(u32, &str, &str, NodeType, u16)> = seen
        .iter()
        .map(|(guid, (kind, name, lid))| {
            (
                tiers.get(guid).copied().unwrap_or(0),
                *name,
                *guid,
                *kind,
                *lid,
            )
        })
        .collect();
    v.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| natural(a.1, b.1))
            .then_with(|| a.2.cmp(b.2))
    });
    let index: HashMap<String, usize> = v
        .iter()
        .enumerate()
        .map(|(i, n)| (n.2.to_owned(), i))
        .collect();
    let nodes = v
        .iter()
        .map(|&(tier, name, guid, kind, lid)| DrawnNode {
            kind: kind_word(kind),
            name: name.to_owned(),
            guid: guid.to_owned(),
            lid,
            tier,
            leaf: (kind == NodeType::Hca)
                .then(|| {
                    topo.ports
                        .iter()
                        .filter(|p| p.end.guid == guid)
                        .find_map(|p| p.remote.as_ref())
                        .and_then(|r| index.get(&r.guid).copied())
                })
                .flatten(),
        })
        .collect();
    (nodes, index)
}

/// Each node's tier: HCAs 0; a switch cabled to an HCA 1; every other switch
/// one more than its nearest lower neighbour (breadth first); a switch that
/// reaches no HCA one above the highest.
fn tiers(topo: &Topology) -> HashMap<&str, u32> {
    let mut tier: HashMap<&str, u32> = HashMap::new();
    let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut queue: VecDeque<&str> = VecDeque::new();
    for p in &topo.ports {
        if p.end.kind == NodeType::Hca {
            tier.insert(p.end.guid.as_str(), 0);
        }
        let Some(r) = &p.remote else { continue };
        if p.end.kind != NodeType::Hca && r.kind != NodeType::Hca {
            next.entry(p.end.guid.as_str())
                .or_default()
                .push(r.guid.as_str());
        }
        if p.end.kind != NodeType::Hca
            && r.kind == NodeType::Hca
            && !tier.contains_key(p.end.guid.as_str())
        {
            tier.insert(p.end.guid.as_str(), 1);
            queue.push_back(p.end.guid.as_str());
        }
    }
    while let Some(g) = queue.pop_front() {
        let t = tier[g];
        for n in next.get(g).into_iter().flatten() {
            if !tier.contains_key(n) {
                tier.insert(n, t + 1);
                queue.push_back(n);
            }
        }
    }
    let top = tier.values().copied().max().unwrap_or(0) + 1;
    for p in &topo.ports {
        tier.entry(p.end.guid.as_str()).or_insert(top);
    }
    tier
}

/// Every cable once, in the nodes' order of its first end.
fn links(topo: &Topology, index: &HashMap<String, usize>) -> Vec<Cable> {
    let mut v: Vec<Cable> = Vec::new();
    let mut seen: std::collections::HashSet<(usize, u32, usize, u32)> =
        std::collections::HashSet::new();
    for p in &topo.ports {
        let Some(r) = &p.remote else { continue };
        let (Some(&a), Some(&b)) = (index.get(&p.end.guid), index.get(&r.guid)) else {
            continue;
        };
        let key = if (a, p.end.port) <= (b, r.port) {
            (a, p.end.port, b, r.port)
        } else {
            (b, r.port, a, p.end.port)
        };
        if seen.insert(key) {
            v.push(Cable {
                a: key.0,
                ap: key.1,
                b: key.2,
                bp: key.3,
            });
        }
    }
    v.sort_by_key(|l| (l.a, l.ap, l.b, l.bp));
    v
}

/// Names compared with their runs of digits as numbers.
pub fn natural(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (dx, dy) = (&x[..n], &y[..m]);
                let strip = |d: &[u8]| -> usize { d.iter().take_while(|&&c| c == b'0').count() };
                let (sx, sy) = (&dx[strip(dx)..], &dy[strip(dy)..]);
                let o = sx.len().cmp(&sy.len()).then_with(|| sx.cmp(sy));
                if o != Ordering::Equal {
                    return o;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}
