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

use std::collections::HashMap;

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hca {
    pub name: String,
    pub lid: u16,
    /// The switch index and port it is cabled to (`None`: to another HCA).
    pub switch: Option<(usize, u32)>,
    pub sl2vl: Option<Sl2Vl>,
}

/// The fabric as the deadlock check sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

/// A hop whose SL2VL row was not read (in a label table).
const UNKNOWN: u8 = 0xFF;

/// The fabric in dense arrays, compiled once for every SL judged: per
/// switch its ports (`ports`: the highest port cabled or with a row, plus
/// one), what each port is cabled to (`peer`, flat by `pbase`), and its
/// SL2VL rows as one flat table by `hbase[switch] + in * ports + out`.
struct Dense<'a> {
    f: &'a Fabric,
    ports: Vec<usize>,
    /// Per switch, its first port's index in `peer` (and the walk's
    /// states, one per (switch, in port)); the total last.
    pbase: Vec<usize>,
    /// (switch, port) → the switch it leads to and that switch's port
    /// (`u32::MAX`: not a switch).
    peer: Vec<(u32, u32)>,
    /// Per switch, its first (in, out) pair's index in `rows`; the total
    /// last.
    hbase: Vec<usize>,
    rows: Vec<Option<Sl2Vl>>,
    /// Per switch, its first channel: `base[switch] + port * 16 + vl`.
    base: Vec<usize>,
    /// Every switch link is read the same from both ends: the (switch, in
    /// port) a route arrives at names the channel it came on, so an edge
    /// is known by the hop it ends on and the VL it came on.
    symmetric: bool,
}

impl<'a> Dense<'a> {
    fn new(f: &'a Fabric) -> Self {
        let n = f.switches.len();
        let ports: Vec<usize> = f
            .switches
            .iter()
            .map(|s| {
                let peers = s.peers.keys().copied();
                let rows = s.sl2vl.keys().flat_map(|&(i, o)| [i, o]);
                peers.chain(rows).max().map_or(0, |p| p as usize + 1)
            })
            .collect();
        let prefix = |each: &dyn Fn(usize) -> usize| {
            let mut v = Vec::with_capacity(n + 1);
            let mut at = 0usize;
            for s in 0..n {
                v.push(at);
                at += each(s);
            }
            v.push(at);
            v
        };
        let pbase = prefix(&|s| ports[s]);
        let hbase = prefix(&|s| ports[s] * ports[s]);
        let base = prefix(&|s| ports[s] * 16);
        let mut peer = vec![(u32::MAX, 0); pbase[n]];
        let mut rows = vec![None; hbase[n]];
        for (s, sw) in f.switches.iter().enumerate() {
            for (&p, what) in &sw.peers {
                if let Peer::Switch(next, port) = *what
                    && next < n
                {
                    peer[pbase[s] + p as usize] = (u32::try_from(next).unwrap_or(u32::MAX), port);
                }
            }
            for (&(i, o), row) in &sw.sl2vl {
                rows[hbase[s] + i as usize * ports[s] + o as usize] = Some(*row);
            }
        }
        let symmetric = (0..n).all(|s| {
            (0..ports[s]).all(|p| {
                let (t, q) = peer[pbase[s] + p];
                let back = (u32::try_from(s).ok(), u32::try_from(p).ok());
                t == u32::MAX || {
                    let (t, q) = (t as usize, q as usize);
                    q < ports[t] && {
                        let (bt, bq) = peer[pbase[t] + q];
                        (Some(bt), Some(bq)) == back
                    }
                }
            })
        });
        Self {
            f,
            ports,
            pbase,
            peer,
            hbase,
            rows,
            base,
            symmetric,
        }
    }

    /// The VL each hop gives `sl` ([`UNKNOWN`]: the row not read), flat
    /// as `rows`; and per HCA whether its own table drops `sl`.
    fn labels(&self, sl: u8) -> (Vec<u8>, Vec<bool>) {
        let labels = self
            .rows
            .iter()
            .map(|r| r.map_or(UNKNOWN, |t| t.vl(sl)))
            .collect();
        let dropped = self
            .f
            .hcas
            .iter()
            .map(|h| h.sl2vl.is_some_and(|t| t.vl(sl) == Sl2Vl::VL15))
            .collect();
        (labels, dropped)
    }

    fn hop(&self, id: u32) -> Hop {
        let id = id as usize;
        let s = self.base.partition_point(|&b| b <= id) - 1;
        let off = id - self.base[s];
        let sw = &self.f.switches[s];
        Hop {
            switch: sw.name.clone(),
            lid: sw.lid,
            port: u32::try_from(off / 16).unwrap_or(u32::MAX),
            vl: u8::try_from(off % 16).unwrap_or(u8::MAX),
        }
    }
}

/// A label table with its VLs renumbered in order (the lowest VL used
/// becomes 0, the next 1, …; VL 15 and [`UNKNOWN`] kept), and the VLs by
/// their new number. Two SLs whose tables renumber alike have the same
/// graph, channel for channel, in the same order (the renumbering keeps
/// the order of channel ids, hence the search's): judged once, each names
/// the loop with its own VLs.
fn renumbered(labels: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut used = [false; 16];
    for &l in labels {
        if l < Sl2Vl::VL15 {
            used[usize::from(l)] = true;
        }
    }
    let vls: Vec<u8> = (0..Sl2Vl::VL15).filter(|&v| used[usize::from(v)]).collect();
    let mut to = [0u8; 16];
    for (n, &v) in vls.iter().enumerate() {
        to[usize::from(v)] = u8::try_from(n).unwrap_or(u8::MAX);
    }
    let labels = labels
        .iter()
        .map(|&l| {
            if l < Sl2Vl::VL15 {
                to[usize::from(l)]
            } else {
                l
            }
        })
        .collect();
    (labels, vls)
}

/// The channel dependency graph of one label table, as adjacency lists
/// in one array (`to[start[c]..start[c + 1]]`, each sorted).
struct Graph {
    start: Vec<usize>,
    to: Vec<u32>,
    unknown_rows: usize,
}

impl Graph {
    fn out(&self, c: usize) -> &[u32] {
        &self.to[self.start[c]..self.start[c + 1]]
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// From adjacency lists (each sorted).
    #[cfg(test)]
    fn of_lists(lists: &[Vec<u32>], unknown_rows: usize) -> Self {
        let mut start = vec![0usize];
        let mut to = Vec::new();
        for l in lists {
            to.extend_from_slice(l);
            start.push(to.len());
        }
        Self {
            start,
            to,
            unknown_rows,
        }
    }

    /// From (channel, next channel) pairs, in any order, repeats allowed.
    fn of_pairs(channels: usize, mut pairs: Vec<u64>, unknown_rows: usize) -> Self {
        pairs.sort_unstable();
        pairs.dedup();
        let mut start = vec![0usize; channels + 1];
        for &p in &pairs {
            start[(p >> 32) as usize + 1] += 1;
        }
        for c in 0..channels {
            start[c + 1] += start[c];
        }
        // Sorted by (from, to): each list is in order, a deterministic
        // search — the same loop named on every run.
        let to = pairs.iter().map(|&p| (p & 0xFFFF_FFFF) as u32).collect();
        Self {
            start,
            to,
            unknown_rows,
        }
    }
}

/// The verdict for `sl`: every route from every HCA to every other HCA.
pub fn judge(f: &Fabric, sl: u8) -> Safety {
    let d = Dense::new(f);
    let (labels, dropped) = d.labels(sl);
    let g = build(&d, &labels, &dropped);
    verdict(&d, &g, |vl| vl)
}

/// What a graph is built from: a label table renumbered, and the HCAs
/// whose own table drops the SL.
type Shape = (Vec<u8>, Vec<bool>);

/// The verdicts for each of `sls` (in their order, repeats judged once):
/// the fabric compiled once, and one graph for all the SLs whose label
/// tables renumber alike (an SL on the same VL at every hop is the link
/// graph, whichever VL: SLs on uniform VLs share it), each loop named with
/// its SL's VLs. The same verdicts as [`judge`] of each.
pub fn judge_all(f: &Fabric, sls: &[u8]) -> Vec<Safety> {
    let d = Dense::new(f);
    let mut graphs: Vec<(Shape, Graph)> = Vec::new();
    sls.iter()
        .map(|&sl| {
            let (labels, dropped) = d.labels(sl);
            let (labels, vls) = renumbered(&labels);
            let key = (labels, dropped);
            let i = graphs
                .iter()
                .position(|(k, _)| *k == key)
                .unwrap_or_else(|| {
                    let g = build(&d, &key.0, &key.1);
                    graphs.push((key, g));
                    graphs.len() - 1
                });
            verdict(&d, &graphs[i].1, |n| {
                vls.get(usize::from(n)).copied().unwrap_or(n)
            })
        })
        .collect()
}

/// The graph's verdict, each hop's VL given by `vl` of its number.
fn verdict(d: &Dense, g: &Graph, vl: impl Fn(u8) -> u8) -> Safety {
    match find_cycle(g) {
        Some(ids) => Safety::Cycle {
            hops: ids
                .into_iter()
                .map(|i| {
                    let mut h = d.hop(i);
                    h.vl = vl(h.vl);
                    h
                })
                .collect(),
            unknown_rows: g.unknown_rows,
        },
        None => Safety::DeadlockFree {
            channels: (0..g.len()).filter(|&c| !g.out(c).is_empty()).count(),
            dependencies: g.to.len(),
            unknown_rows: g.unknown_rows,
        },
    }
}

/// The channel dependency graph of a label table on the routes in use.
fn build(d: &Dense, labels: &[u8], dropped: &[bool]) -> Graph {
    let f = d.f;
    let channels = *d.base.last().unwrap_or(&0);
    let mut pairs: Vec<u64> = Vec::new();
    let mut unknown_rows = 0usize;
    // An edge is known by the hop it ends on and the VL it came on (on a
    // symmetric fabric): a bit each, so each edge is kept once.
    let mut seen = vec![0u64; (d.hbase.last().unwrap_or(&0) * 16).div_ceil(64)];
    // (switch, in port) already walked toward the current destination:
    // the destination's number + 1.
    let mut walked: Vec<usize> = vec![0; *d.pbase.last().unwrap_or(&0)];
    for (stamp, dst) in f.hcas.iter().enumerate().map(|(i, d)| (i + 1, d)) {
        let to = usize::from(dst.lid);
        for (src, gone) in f.hcas.iter().zip(dropped) {
            if src.lid == dst.lid || *gone {
                continue;
            }
            let Some((mut sw, in_port)) = src.switch else {
                continue;
            };
            let mut in_port = in_port as usize;
            // (channel, its VL) the route came on
            let mut prev: Option<(u32, u8)> = None;
            // A forwarding loop cannot go on forever: at most every
            // (switch, in port) once.
            for _ in 0..=f.switches.len() * 2 + 2 {
                let out = f.switches[sw].lft.get(to).copied().unwrap_or(NO_PORT);
                if out == NO_PORT || usize::from(out) == in_port || out == 0 {
                    break;
                }
                let (out, ports) = (usize::from(out), d.ports[sw]);
                let hop = d.hbase[sw] + in_port * ports + out;
                let vl = if out < ports && in_port < ports {
                    labels[hop]
                } else {
                    UNKNOWN
                };
                if vl == UNKNOWN {
                    unknown_rows += 1;
                    break;
                }
                if vl == Sl2Vl::VL15 {
                    break;
                }
                let ch = u32::try_from(d.base[sw] + out * 16 + usize::from(vl)).unwrap_or(u32::MAX);
                if let Some((p, pvl)) = prev {
                    let bit = hop * 16 + usize::from(pvl);
                    let (word, mask) = (bit / 64, 1u64 << (bit % 64));
                    if !d.symmetric || seen[word] & mask == 0 {
                        seen[word] |= mask;
                        pairs.push((u64::from(p) << 32) | u64::from(ch));
                    }
                }
                match walked.get_mut(d.pbase[sw] + in_port) {
                    Some(w) if *w == stamp => break,
                    Some(w) => *w = stamp,
                    None => break,
                }
                match d.peer[d.pbase[sw] + out] {
                    (next, port) if next != u32::MAX => {
                        prev = Some((ch, vl));
                        (sw, in_port) = (next as usize, port as usize);
                    }
                    _ => break,
                }
            }
        }
    }
    Graph::of_pairs(channels, pairs, unknown_rows)
}

/// One cycle of the graph, in order, or `None`: an iterative depth-first
/// search (white/grey/black), the grey path kept as an explicit stack.
fn find_cycle(g: &Graph) -> Option<Vec<u32>> {
    const WHITE: u8 = 0;
    const GREY: u8 = 1;
    const BLACK: u8 = 2;
    let mut colour = vec![WHITE; g.len()];
    // (vertex, next edge index)
    let mut stack: Vec<(u32, usize)> = Vec::new();
    for root in 0..g.len() {
        if colour[root] != WHITE || g.out(root).is_empty() {
            continue;
        }
        stack.push((u32::try_from(root).ok()?, 0));
        colour[root] = GREY;
        while let Some(top) = stack.last_mut() {
            let v = top.0 as usize;
            if let Some(&w) = g.out(v).get(top.1) {
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
