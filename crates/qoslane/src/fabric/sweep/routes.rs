//! The audit's deadlock check: every switch's linear forwarding table read
//! through the [`Reader`] (`Reader::forwarding`), the fabric as the sweep
//! read it (topology, SL2VL rows) put together for
//! [`deadlock::judge`], one verdict per level's SL; and whether the
//! fabric's SL2VL layout gives VLs per port pair (the signature of a
//! routing engine that assigns SLs or VLs per path, as Torus-2QoS's
//! datelines), said.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::deadline::Deadline;
use crate::fabric::judge::deadlock::{self, Fabric, Hca, Peer, Safety, Switch};
use crate::fabric::read::reader::Reader;
use crate::fabric::tables::{EgressPort, EgressRead, LinkEnd, NodeType, Topology};
use crate::mapping::{Mapping, PathSl};

/// One level's deadlock safety on the routes read.
#[derive(Clone, Debug, Serialize)]
pub struct LevelSafety {
    pub level: String,
    pub sl: u8,
    /// `None`: not judged (`Routes::unjudged` says why).
    pub safety: Option<Safety>,
    /// The level's `path_sl`: where a credit loop on its SL sends it on a
    /// fabric whose SM gives paths their own SLs.
    pub path_sl: PathSl,
}

impl LevelSafety {
    pub fn is_cycle(&self) -> bool {
        self.safety.as_ref().is_some_and(Safety::is_cycle)
    }

    pub fn words(&self) -> String {
        match &self.safety {
            Some(s) => format!("level {} (SL {}): {}", self.level, self.sl, s.words()),
            None => format!(
                "level {} (SL {}): deadlock safety not judged",
                self.level, self.sl
            ),
        }
    }
}

/// What the deadlock check found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Routes {
    pub levels: Vec<LevelSafety>,
    /// Why no level was judged, or some switches' tables not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unjudged: Vec<String>,
    /// Switches whose SL2VL rows differ by port pair for some SL: VLs
    /// change along a path by design (a routing engine's datelines or
    /// layers) or by a mistake the lane findings name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_pair_sl2vl: Vec<String>,
    /// The SLs the SA's path records give from a few sources to every
    /// HCA (SL → paths); more than one: the SM assigns SLs per path.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub path_sls: BTreeMap<u8, usize>,
    /// Why the path records were not asked, or some not answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_sls_unread: Option<String>,
    /// How long reading the forwarding tables took, and judging.
    pub read_ms: u64,
    pub judge_ms: u64,
    /// The verdicts were the last sweep's: its fabric (forwarding tables,
    /// SL2VL rows, cabling) and SLs the same (`fabric watch`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kept: bool,
}

impl Routes {
    /// A level whose routes close a credit loop on the SL it would run on
    /// (not one switched to each path record's SL).
    pub fn any_cycle(&self) -> bool {
        self.levels.iter().any(|l| self.refuses(l))
    }

    /// The level's pinned SL closes a credit loop and it runs on it: not
    /// granted (refused or on the baseline, per its `on_failure`).
    pub fn refuses(&self, l: &LevelSafety) -> bool {
        l.is_cycle() && !self.switched(l)
    }

    /// The level's pinned SL closes a credit loop, the SM gives paths
    /// their own SLs and the level says `path_sl: path_record`: it takes
    /// each path record's SL instead (its libraries told to ask for it).
    pub fn switched(&self, l: &LevelSafety) -> bool {
        l.is_cycle() && self.sl_per_path() && l.path_sl == PathSl::PathRecord
    }

    /// On a fabric whose SM gives paths their own SLs: what that means for
    /// the level — granted on its SL, deadlock-free on this routing, or
    /// switched to each path record's SL. `None` elsewhere, and for a
    /// level refused for its loop (its loop says it).
    pub fn path_note(&self, l: &LevelSafety) -> Option<String> {
        if !self.sl_per_path() {
            return None;
        }
        match &l.safety {
            Some(Safety::DeadlockFree { .. }) => Some(format!(
                "the SM routes by path SLs: SL {} of level {} is deadlock-free on this routing, \
                 granted on it",
                l.sl, l.level
            )),
            Some(s @ Safety::Cycle { .. }) if self.switched(l) => Some(format!(
                "the SM routes by path SLs; SL {} of level {}: {}; the level takes each path \
                 record's SL instead (path_sl: path_record: its libraries are told to ask the SM)",
                l.sl,
                l.level,
                s.words()
            )),
            _ => None,
        }
    }

    /// The SM gives paths their own SLs: its path records disagree.
    pub fn sl_per_path(&self) -> bool {
        self.path_sls.len() > 1
    }

    /// The notes on the routing engine: path records that disagree, an
    /// SL2VL layout by port pair.
    pub fn routing_notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.sl_per_path() {
            let sls: Vec<String> = self
                .path_sls
                .iter()
                .map(|(sl, n)| format!("SL {sl} on {n}"))
                .collect();
            v.push(format!(
                "the SM assigns SLs per path (its path records: {}): a routing engine such as \
                 LASH, DFSSSP or Torus-2QoS; a level pinned to one SL takes every route on its \
                 own VLs, safe only where its graph is acyclic",
                sls.join(", ")
            ));
        }
        v.extend(self.routing_note());
        v
    }

    /// The note on the SL2VL layout, when it varies by port pair.
    pub fn routing_note(&self) -> Option<String> {
        (!self.per_pair_sl2vl.is_empty()).then(|| {
            format!(
                "SL2VL differs by port pair on {} switches ({}): VLs are assigned per hop \
                 (a routing engine with SLs or VLs per path, e.g. Torus-2QoS, or a mistake); \
                 a level pinned to one SL is safe only where its graph is acyclic",
                self.per_pair_sl2vl.len(),
                self.per_pair_sl2vl
                    .iter()
                    .take(4)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// The last check's fabric, its SLs and their verdicts: the next check
/// on the same fabric and SLs takes them (the check is pure).
#[derive(Debug)]
pub struct KeptRoutes {
    fabric: Fabric,
    sls: Vec<u8>,
    safeties: Vec<Safety>,
}

/// The forwarding tables as read, before the egress ports: the fabric's
/// cabling with every switch's table ([`Fabric`], no SL2VL rows yet), how
/// long they took and what was not read.
#[derive(Debug)]
pub struct Forwarding {
    pub fabric: Fabric,
    /// Every switch's table was read (the routes are known).
    pub read_all: bool,
    unjudged: Vec<String>,
    read_ms: u64,
    /// Switch LID → its index in `fabric.switches`.
    by_lid: HashMap<u16, usize>,
}

/// Reads every switch's forwarding table (LIDs up to the highest of the
/// topology) into the fabric's cabling.
pub fn forwarding(topo: &Topology, reader: &dyn Reader, deadline: &Deadline) -> Forwarding {
    let started = std::time::Instant::now();
    let mut fabric = fabric(topo, &[]);
    let top = fabric
        .hcas
        .iter()
        .map(|h| h.lid)
        .chain(fabric.switches.iter().map(|s| s.lid))
        .max()
        .unwrap_or(0);
    let lids: Vec<u16> = fabric.switches.iter().map(|s| s.lid).collect();
    let mut unjudged = Vec::new();
    let tables = reader.forwarding(&lids, top, deadline);
    let mut read_all = true;
    for (s, t) in fabric.switches.iter_mut().zip(tables) {
        match t {
            Ok(lft) => s.lft = lft,
            Err(e) => {
                read_all = false;
                unjudged.push(format!("switch {} (lid {}): {e}", s.name, s.lid));
            }
        }
    }
    let by_lid = fabric
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.lid, i))
        .collect();
    Forwarding {
        read_all: read_all && !fabric.switches.is_empty(),
        fabric,
        unjudged,
        read_ms: millis(started),
        by_lid,
    }
}

/// The (in port, out port) pairs of each switch that some route from an
/// HCA to another HCA's LID takes, by the forwarding tables read: the
/// pairs whose SL2VL rows the audit reads and judges (a pair no route
/// takes carries no job's traffic: on a fat tree, a leaf's up→up pairs).
/// Every hop the deadlock check can walk is one of them (its walk is this
/// one, stopped earlier where an SL is dropped).
#[derive(Debug)]
pub struct Routed {
    /// Per switch (by index), the pairs taken: `in * width + out`, each
    /// switch's ports `0..width`.
    pairs: Vec<Vec<bool>>,
    width: Vec<usize>,
    by_lid: HashMap<u16, usize>,
}

impl Routed {
    /// Of `ins`, the in ports some route takes to `out` on the switch of
    /// LID `lid` (a switch not in the tables: every one of them).
    pub fn ins(&self, lid: u16, out: u32, ins: &[u32]) -> Vec<u32> {
        match self.by_lid.get(&lid) {
            Some(&s) => ins
                .iter()
                .copied()
                .filter(|&i| self.taken(s, i, out))
                .collect(),
            None => ins.to_vec(),
        }
    }

    fn taken(&self, s: usize, i: u32, o: u32) -> bool {
        let w = self.width[s];
        let (i, o) = (i as usize, o as usize);
        i < w && o < w && self.pairs[s][i * w + o]
    }
}

/// The pairs the routes take ([`Routed`]), walked destination by
/// destination (the routes to one LID form a tree: a walk stops where it
/// joins one already walked toward it).
pub fn routed(f: &Forwarding) -> Routed {
    let fabric = &f.fabric;
    // Each switch's ports 0..width (its cabled ports and the HCAs' ports on
    // it); a (switch, in port) is `base[s] + in` in `walked`.
    let mut width: Vec<usize> = fabric
        .switches
        .iter()
        .map(|s| s.peers.keys().max().map_or(1, |&p| p as usize + 1))
        .collect();
    for h in &fabric.hcas {
        if let Some((s, p)) = h.switch {
            width[s] = width[s].max(p as usize + 1);
        }
    }
    let mut base = Vec::with_capacity(width.len());
    let mut states = 0usize;
    for w in &width {
        base.push(states);
        states += w;
    }
    // What each (switch, port) is cabled to when a switch: `base[s] + port`
    // (dense: this walk takes ~2 hops per source and destination, 16 M on
    // the 4,032-HCA tree, and a `HashMap` lookup each was most of its time).
    let mut next: Vec<Option<(usize, u32)>> = vec![None; states];
    for (s, sw) in fabric.switches.iter().enumerate() {
        for (&port, peer) in &sw.peers {
            if let (Peer::Switch(n, p), true) = (peer, (port as usize) < width[s]) {
                next[base[s] + port as usize] = Some((*n, *p));
            }
        }
    }
    let mut pairs: Vec<Vec<bool>> = width.iter().map(|w| vec![false; w * w]).collect();
    // The destination (its number + 1) each state was last walked toward.
    let mut walked: Vec<usize> = vec![0; states];
    for (stamp, dst) in fabric.hcas.iter().enumerate().map(|(i, d)| (i + 1, d)) {
        for src in &fabric.hcas {
            if src.lid == dst.lid {
                continue;
            }
            let Some((mut sw, mut in_port)) = src.switch else {
                continue;
            };
            // Every (switch, in port) at most once per destination: a
            // forwarding loop ends too.
            loop {
                let w = width[sw];
                let state = base[sw] + in_port as usize;
                if in_port as usize >= w || walked[state] == stamp {
                    break;
                }
                walked[state] = stamp;
                let s = &fabric.switches[sw];
                let out = s
                    .lft
                    .get(usize::from(dst.lid))
                    .copied()
                    .unwrap_or(deadlock::NO_PORT);
                if out == deadlock::NO_PORT || u32::from(out) == in_port || out == 0 {
                    break;
                }
                if usize::from(out) >= w {
                    break;
                }
                pairs[sw][in_port as usize * w + usize::from(out)] = true;
                match next[base[sw] + usize::from(out)] {
                    Some((n, port)) => (sw, in_port) = (n, port),
                    None => break,
                }
            }
        }
    }
    Routed {
        pairs,
        width,
        by_lid: f.by_lid.clone(),
    }
}

/// Judges every level's SL on the forwarding tables read and the SL2VL
/// rows of the egress ports read.
pub fn check(
    topo: &Topology,
    lft: Forwarding,
    ok: &[(&EgressPort, EgressRead)],
    paths: Vec<crate::error::Result<u8>>,
    mapping: &Mapping,
    kept: &mut Option<KeptRoutes>,
) -> Routes {
    let Forwarding {
        mut fabric,
        read_all,
        mut unjudged,
        read_ms,
        ..
    } = lft;
    add_rows(&mut fabric, &numbering(topo), ok);
    let started = std::time::Instant::now();
    let judged = read_all;
    // One verdict per distinct SL, the SLs whose VLs renumber alike
    // sharing one graph (`deadlock::judge_all`).
    let mut sls: Vec<u8> = mapping
        .levels()
        .iter()
        .map(|l| l.service_level.get())
        .collect();
    sls.sort_unstable();
    sls.dedup();
    let before = kept
        .take()
        .filter(|k| judged && k.sls == sls && k.fabric == fabric);
    let was_kept = before.is_some();
    let safeties = match before {
        Some(k) => k.safeties,
        None if judged => deadlock::judge_all(&fabric, &sls),
        None => Vec::new(),
    };
    let by_sl: HashMap<u8, Safety> = sls.iter().copied().zip(safeties.iter().cloned()).collect();
    let levels = mapping
        .levels()
        .iter()
        .map(|level| {
            let sl = level.service_level.get();
            LevelSafety {
                level: level.name.clone(),
                sl,
                safety: by_sl.get(&sl).cloned(),
                path_sl: level.path_sl,
            }
        })
        .collect();
    if !unjudged.is_empty() {
        unjudged.truncate(4);
        unjudged.insert(0, "not every forwarding table was read".into());
    }
    let judge_ms = millis(started);
    let (path_sls, path_sls_unread) = path_sls(paths);
    let per_pair_sl2vl = per_pair(&fabric);
    if judged {
        *kept = Some(KeptRoutes {
            fabric,
            sls,
            safeties,
        });
    }
    Routes {
        levels,
        unjudged,
        per_pair_sl2vl,
        path_sls,
        path_sls_unread,
        read_ms,
        judge_ms,
        kept: was_kept,
    }
}

fn millis(t: std::time::Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Where each node of the topology sits in a [`Fabric`]: switches by GUID,
/// cabled HCA ports by (GUID, port), numbered in the order of the
/// topology's ports, with the end that named each first.
struct Numbering<'t> {
    switch_of: HashMap<&'t str, usize>,
    hca_of: HashMap<(&'t str, u32), usize>,
    switches: Vec<&'t LinkEnd>,
    hcas: Vec<&'t LinkEnd>,
}

fn numbering(topo: &Topology) -> Numbering<'_> {
    let mut n = Numbering {
        switch_of: HashMap::new(),
        hca_of: HashMap::new(),
        switches: Vec::new(),
        hcas: Vec::new(),
    };
    for p in &topo.ports {
        let e = &p.end;
        match e.kind {
            NodeType::Switch => {
                n.switch_of.entry(e.guid.as_str()).or_insert_with(|| {
                    n.switches.push(e);
                    n.switches.len() - 1
                });
            }
            NodeType::Hca if p.remote.is_some() => {
                n.hca_of
                    .entry((e.guid.as_str(), e.port))
                    .or_insert_with(|| {
                        n.hcas.push(e);
                        n.hcas.len() - 1
                    });
            }
            _ => {}
        }
    }
    n
}

/// The fabric from the topology and the SL2VL rows read (forwarding tables
/// empty).
pub fn fabric(topo: &Topology, ok: &[(&EgressPort, EgressRead)]) -> Fabric {
    let num = numbering(topo);
    let (switch_of, hca_of) = (&num.switch_of, &num.hca_of);
    let mut f = Fabric {
        switches: num
            .switches
            .iter()
            .map(|e| Switch {
                name: e.name.clone(),
                lid: e.lid,
                ..Switch::default()
            })
            .collect(),
        hcas: num
            .hcas
            .iter()
            .map(|e| Hca {
                name: e.name.clone(),
                lid: e.lid,
                switch: None,
                sl2vl: None,
            })
            .collect(),
    };
    for p in &topo.ports {
        let (e, Some(r)) = (&p.end, &p.remote) else {
            continue;
        };
        let peer = match r.kind {
            NodeType::Switch => switch_of
                .get(r.guid.as_str())
                .map(|&i| Peer::Switch(i, r.port)),
            NodeType::Hca => hca_of
                .get(&(r.guid.as_str(), r.port))
                .map(|&i| Peer::Hca(i)),
            NodeType::Router => None,
        };
        match (e.kind, peer) {
            (NodeType::Switch, Some(peer)) => {
                let s = switch_of[e.guid.as_str()];
                f.switches[s].peers.insert(e.port, peer);
            }
            (NodeType::Hca, Some(Peer::Switch(s, port))) => {
                if let Some(&h) = hca_of.get(&(e.guid.as_str(), e.port)) {
                    f.hcas[h].switch = Some((s, port));
                }
            }
            _ => {}
        }
    }
    add_rows(&mut f, &num, ok);
    f
}

/// The SL2VL rows of the egress ports read, into the fabric numbered by
/// `num`.
fn add_rows(f: &mut Fabric, num: &Numbering<'_>, ok: &[(&EgressPort, EgressRead)]) {
    let (switch_of, hca_of) = (&num.switch_of, &num.hca_of);
    for (item, read) in ok {
        if !read.active {
            continue;
        }
        match item.kind {
            NodeType::Switch => {
                if let Some(&s) = switch_of.get(item.guid.as_str()) {
                    for (in_port, row) in &read.rows {
                        f.switches[s].sl2vl.insert((*in_port, item.port), *row);
                    }
                }
            }
            NodeType::Hca => {
                if let Some(&h) = hca_of.get(&(item.guid.as_str(), item.port)) {
                    f.hcas[h].sl2vl = read.rows.first().map(|(_, t)| *t);
                }
            }
            NodeType::Router => {}
        }
    }
}

/// Switches whose SL2VL rows are not all alike.
fn per_pair(f: &Fabric) -> Vec<String> {
    f.switches
        .iter()
        .filter(|s| {
            let mut rows = s.sl2vl.values();
            rows.next()
                .is_some_and(|first| rows.any(|r| r.as_array() != first.as_array()))
        })
        .map(|s| format!("{} (lid {})", s.name, s.lid))
        .collect()
}

mod paths;

pub use paths::path_pairs;
use paths::path_sls;

#[cfg(test)]
mod tests;
