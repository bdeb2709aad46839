//! Deadlock safety of one level, pure: the channel dependency graph of its
//! SL on the routes the switches' forwarding tables actually give, proven
//! acyclic or one cycle named switch by switch.
//!
//! A channel is a switch egress port on one VL. Traffic to destination
//! LID `d` that enters switch `s` at in port `i` leaves at `lft[d]` on VL
//! `SL2VL[i][out][SL]`; it then waits for credits of the next channel while
//! holding the one it came on: an edge from each channel of a route to the
//! next. A cycle of such edges is a credit loop (Dally and Seitz): a
//! fabric-wide deadlock once each of its buffers fills. The forwarding
//! tables do not depend on the SL, so a level pinned to one SL takes every
//! route of the fabric on whatever VLs its SL maps to — on a fabric whose
//! routing engine breaks loops by giving paths their own SLs (LASH,
//! DFSSSP, Torus-2QoS), a pinned SL can close a loop the engine avoided.
//!
//! Only routes that are used: from every HCA to every other HCA's LID. Per
//! destination the routes form a tree, so a walk stops where it joins a
//! (switch, in port) already walked for that destination: the cost is the
//! fabric's switch ports per destination, not its pairs of HCAs. The
//! acyclicity proof is an iterative depth-first search (no recursion).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::fabric::tables::Sl2Vl;

/// A forwarding table entry with no port (`0xFF` on the wire).
pub const NO_PORT: u8 = 0xFF;

/// What a port is cabled to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Switch index into [`Fabric::switches`], and its port.
    Switch(usize, u32),
    /// HCA index into [`Fabric::hcas`].
    Hca(usize),
}

/// One switch as read: its cabling, forwarding table and SL2VL rows.
#[derive(Clone, Debug, Default)]
pub struct Switch {
    pub name: String,
    pub lid: u16,
    /// Port number → what it is cabled to.
    pub peers: HashMap<u32, Peer>,
    /// LID → out port ([`NO_PORT`]: none); LIDs past its end have none.
    pub lft: Vec<u8>,
    /// (in port, out port) → the row (switch in port 0 is not a data port).
    pub sl2vl: HashMap<(u32, u32), Sl2Vl>,
}

/// One HCA port: its LID, the switch port it is cabled to, its own SL2VL
/// table (the VL its traffic leaves on; `None`: not read).
#[derive(Clone, Debug)]
pub struct Hca {
    pub name: String,
    pub lid: u16,
    /// The switch index and port it is cabled to (`None`: to another HCA).
    pub switch: Option<(usize, u32)>,
    pub sl2vl: Option<Sl2Vl>,
}

/// The fabric as the deadlock check sees it.
#[derive(Clone, Debug, Default)]
pub struct Fabric {
    pub switches: Vec<Switch>,
    pub hcas: Vec<Hca>,
}

/// One channel of a cycle: a switch's egress port on a VL, and the switch
/// the port leads to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hop {
    pub switch: String,
    pub lid: u16,
    pub port: u32,
    pub vl: u8,
}

/// One SL's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Safety {
    /// No cycle among `channels` channels and `dependencies` edges.
    DeadlockFree {
        channels: usize,
        dependencies: usize,
        /// Hops whose SL2VL row was not read (not in the graph).
        unknown_rows: usize,
    },
    /// A credit loop: each hop waits on the next, the last on the first.
    Cycle { hops: Vec<Hop>, unknown_rows: usize },
}

impl Safety {
    pub fn is_cycle(&self) -> bool {
        matches!(self, Self::Cycle { .. })
    }

    /// `deadlock-free on this routing` or the cycle, switch by switch.
    pub fn words(&self) -> String {
        match self {
            Self::DeadlockFree {
                channels,
                dependencies,
                unknown_rows,
            } => {
                let mut s = format!(
                    "deadlock-free on this routing ({channels} channels, {dependencies} dependencies)"
                );
                if *unknown_rows > 0 {
                    s.push_str(&format!(
                        "; {unknown_rows} hops not judged (SL2VL row not read)"
                    ));
                }
                s
            }
            Self::Cycle { hops, .. } => cycle_words(hops),
        }
    }
}

/// `credit loop: switch A port 3 -> switch B port 2 -> ... -> switch A on VL 0`.
pub fn cycle_words(hops: &[Hop]) -> String {
    let mut vls: Vec<u8> = hops.iter().map(|h| h.vl).collect();
    vls.sort_unstable();
    vls.dedup();
    let vls: Vec<String> = vls.iter().map(u8::to_string).collect();
    let mut path: Vec<String> = hops
        .iter()
        .map(|h| format!("{} port {}", h.switch, h.port))
        .collect();
    if let Some(first) = hops.first() {
        path.push(first.switch.clone());
    }
    format!(
        "credit loop (deadlock risk): {} on VL {}",
        path.join(" -> "),
        vls.join(", ")
    )
}

/// The channel dependency graph of one SL: channel ids are
/// `base[switch] + port * 16 + vl`.
struct Graph {
    base: Vec<usize>,
    edges: Vec<Vec<u32>>,
    unknown_rows: usize,
}

impl Graph {
    fn new(f: &Fabric) -> Self {
        let mut base = Vec::with_capacity(f.switches.len() + 1);
        let mut n = 0usize;
        for s in &f.switches {
            base.push(n);
            let ports = s.peers.keys().max().map_or(0, |&p| p as usize + 1);
            n += ports * 16;
        }
        base.push(n);
        Self {
            base,
            edges: vec![Vec::new(); n],
            unknown_rows: 0,
        }
    }

    fn id(&self, switch: usize, port: u32, vl: u8) -> u32 {
        u32::try_from(self.base[switch] + port as usize * 16 + usize::from(vl)).unwrap_or(u32::MAX)
    }

    fn hop(&self, f: &Fabric, id: u32) -> Hop {
        let id = id as usize;
        let s = self.base.partition_point(|&b| b <= id) - 1;
        let off = id - self.base[s];
        let sw = &f.switches[s];
        Hop {
            switch: sw.name.clone(),
            lid: sw.lid,
            port: u32::try_from(off / 16).unwrap_or(u32::MAX),
            vl: u8::try_from(off % 16).unwrap_or(u8::MAX),
        }
    }
}

/// The verdict for `sl`: every route from every HCA to every other HCA.
pub fn judge(f: &Fabric, sl: u8) -> Safety {
    let g = build(f, sl);
    let channels = g.edges.iter().filter(|e| !e.is_empty()).count();
    match find_cycle(&g.edges) {
        Some(ids) => Safety::Cycle {
            hops: ids.into_iter().map(|i| g.hop(f, i)).collect(),
            unknown_rows: g.unknown_rows,
        },
        None => Safety::DeadlockFree {
            channels,
            dependencies: g.edges.iter().map(Vec::len).sum(),
            unknown_rows: g.unknown_rows,
        },
    }
}

/// The channel dependency graph of `sl` on the routes in use.
fn build(f: &Fabric, sl: u8) -> Graph {
    let mut g = Graph::new(f);
    let mut edges: HashSet<(u32, u32)> = HashSet::new();
    // (switch, in port) already walked toward the current destination:
    // the destination's number + 1, by `base / 16 + port`.
    let mut walked: Vec<usize> = vec![0; g.base.last().map_or(0, |n| n / 16)];
    for (stamp, dst) in f.hcas.iter().enumerate().map(|(i, d)| (i + 1, d)) {
        for src in &f.hcas {
            if src.lid == dst.lid {
                continue;
            }
            let Some((mut sw, mut in_port)) = src.switch else {
                continue;
            };
            if src.sl2vl.is_some_and(|t| t.vl(sl) == Sl2Vl::VL15) {
                continue;
            }
            let mut prev: Option<u32> = None;
            // A forwarding loop cannot go on forever: at most every
            // (switch, in port) once.
            for _ in 0..=f.switches.len() * 2 + 2 {
                let s = &f.switches[sw];
                let out = s.lft.get(usize::from(dst.lid)).copied().unwrap_or(NO_PORT);
                if out == NO_PORT || u32::from(out) == in_port || out == 0 {
                    break;
                }
                let out = u32::from(out);
                let Some(row) = s.sl2vl.get(&(in_port, out)) else {
                    g.unknown_rows += 1;
                    break;
                };
                let vl = row.vl(sl);
                if vl == Sl2Vl::VL15 {
                    break;
                }
                let ch = g.id(sw, out, vl);
                if let Some(p) = prev {
                    edges.insert((p, ch));
                }
                let state = g.base[sw] / 16 + in_port as usize;
                match walked.get_mut(state) {
                    Some(w) if *w == stamp => break,
                    Some(w) => *w = stamp,
                    None => break,
                }
                match s.peers.get(&out) {
                    Some(Peer::Switch(next, port)) => {
                        prev = Some(ch);
                        (sw, in_port) = (*next, *port);
                    }
                    _ => break,
                }
            }
        }
    }
    for (a, b) in edges {
        g.edges[a as usize].push(b);
    }
    // A deterministic search order: the same loop named on every run.
    for e in &mut g.edges {
        e.sort_unstable();
    }
    g
}

/// One cycle of the graph, in order, or `None`: an iterative depth-first
/// search (white/grey/black), the grey path kept as an explicit stack.
fn find_cycle(edges: &[Vec<u32>]) -> Option<Vec<u32>> {
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let mut colour = vec![WHITE; edges.len()];
    // (vertex, next edge index)
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for root in 0..edges.len() {
        if colour[root] != WHITE || edges[root].is_empty() {
            continue;
        }
        stack.push((u32::try_from(root).ok()?, 0));
        colour[root] = GREY;
        while let Some(top) = stack.last_mut() {
            let v = top.0 as usize;
            if let Some(&w) = edges[v].get(top.1) {
                top.1 += 1;
                match colour[w as usize] {
                    WHITE => {
                        colour[w as usize] = GREY;
                        stack.push((w, 0));
                    }
                    GREY => {
                        let from = stack.iter().position(|&(u, _)| u == w)?;
                        return Some(stack[from..].iter().map(|&(u, _)| u).collect());
                    }
                    _ => {}
                }
            } else {
                colour[v] = BLACK;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
