//! The whole-fabric sweep (`qoslane fabric audit`), for a control node (any
//! host with an HCA on the fabric): the topology (walked in process,
//! `read/discover.rs`, or `ibnetdiscover -p`),
//! then every connected egress port's tables read once by LID-routed SMP
//! queries under one deadline, by the [`Reader`] given (`Reader::egress`):
//!
//! - in process (`read/in_process.rs`): PortInfo of every port, then the
//!   SL2VL rows (every other data port as in port) and the VLArb blocks of
//!   the Active ones, a window of Gets in flight;
//! - by `smpquery` (`read/programs.rs`), a window of programs at once:
//!
//! ```text
//! smpquery portinfo LID PORT      Active? OperVLs          (every connected port)
//! smpquery sl2vl LID PORT         switch: one row per in port; HCA: its table
//! smpquery vlarb LID PORT         the egress's arbitration tables
//! ```
//!
//! Both give the same [`EgressRead`] per port, and the transmit wait of
//! every Active switch egress port (`Reader::xmit_wait`). Then every level of the
//! mapping is judged on every (in, out) pair of data ports of every switch
//! and on every HCA port, by the lane rules (`judge/lane.rs`): dropped
//! (VL 15), not operational (beyond OperVLs), starved (weight 0 in both
//! VLArb tables), or on another VL than the level names. Findings are
//! grouped per (level, node, out port, verdict), so a switch whose every row
//! is wrong is one line, not one per in port (`judge.rs`); `page/` draws
//! the result as one HTML page.

pub mod events;
pub mod judge;
pub mod page;
pub mod reach;
pub mod routes;
pub mod sm_classes;
pub mod verdict;

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use serde::Serialize;

use crate::deadline::Deadline;
use crate::fabric::counters::pma::PortWait;
use crate::fabric::counters::wait::{self, LevelWait, WaitPort};
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smp_batch;
use crate::fabric::read::smpquery::MAX_WINDOW;
use crate::fabric::tables::{EgressPort, EgressRead, NodeType, Topology};
use crate::mapping::Mapping;

pub use crate::fabric::read::topology::TOPOLOGY_MAX_OUTPUT;
pub use judge::{Finding, InLane, LevelSweep, PortLanes};

/// What the last sweep judged, kept for the next (`fabric watch`): per
/// port its reading and each level's groups, and the deadlock check's
/// fabric and verdicts. A sweep reuses a judgement only where its inputs
/// are the same, so its verdict is the one a fresh sweep would give.
#[derive(Debug, Default)]
pub struct Judged {
    lanes: judge::KeptLanes,
    routes: Option<routes::KeptRoutes>,
}

/// Workers by default: enough to hide each query's latency, few enough to
/// leave the switches' SMAs (and ibsim's 10 client slots) room. For the
/// program reader, programs at once; in process, [`window`]'s Gets.
pub const DEFAULT_WORKERS: usize = 4;

type Item = EgressPort;
type Read = EgressRead;

/// A port that could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct Unread {
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub error: String,
}

/// The port pairs no route takes, not read (the forwarding tables say so).
#[derive(Clone, Debug, Default, Serialize)]
pub struct NotRouted {
    pub pairs: u64,
    /// Switches with such pairs, and a few of them by name.
    pub switches: usize,
    pub examples: Vec<String>,
    pub why: &'static str,
    #[serde(skip)]
    last: Option<u16>,
}

impl NotRouted {
    const EXAMPLES: usize = 3;

    fn add(&mut self, at: &Item, pairs: usize) {
        self.pairs += pairs as u64;
        self.why = "no route from an HCA to the LID of another HCA enters and leaves a switch \
                    by these ports (the forwarding tables read first; on a fat tree, the up→up \
                    pairs of a leaf): the traffic of no job crosses them";
        // The ports come switch by switch (`egress_items`' order).
        if self.last != Some(at.lid) {
            self.last = Some(at.lid);
            self.switches += 1;
            if self.examples.len() < Self::EXAMPLES {
                self.examples.push(format!("{} (lid {})", at.name, at.lid));
            }
        }
    }
}

/// What the sweep found.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub switches: usize,
    pub hcas: usize,
    /// Egress ports read (connected switch ports and HCA ports).
    pub ports_read: usize,
    /// The (in, out) pairs of Active switch ports whose SL2VL rows were
    /// not read nor judged: no route takes them (`routes::routed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_routed: Option<NotRouted>,
    pub unread: Vec<Unread>,
    pub levels: Vec<LevelSweep>,
    pub duration_ms: u64,
    pub workers: usize,
    /// `smpquery` or `in-process`.
    pub reader: &'static str,
    /// Why the in-process reader was not used (when it was asked for by
    /// default and could not start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The topology read: the links the page draws.
    #[serde(skip)]
    pub topology: Topology,
    /// PortVLXmitWait of every Active switch egress port (`fabric::wait`).
    pub xmit_wait: Vec<PortWait>,
    /// Per level, where its lane waited most.
    pub wait_levels: Vec<LevelWait>,
    /// Per level, its deadlock safety on the routes the switches'
    /// forwarding tables give (`routes.rs`).
    pub deadlock: routes::Routes,
    /// The SA's path records for each level's `sm_traffic`
    /// (`sm_classes.rs`).
    pub sm_policy: sm_classes::ClassCheck,
    /// Where the time and the MADs went.
    pub cost: Cost,
    /// Why some ports' wait counters were not read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub xmit_wait_unread: Vec<String>,
    /// The ports whose wait is read, with their SL2VL (for [`wait::peaks`]).
    #[serde(skip)]
    pub wait_ports: Vec<WaitPort>,
}

impl Sweep {
    /// Some level is dropped, starved or misrouted somewhere.
    pub fn any_problem(&self) -> bool {
        self.levels.iter().any(|l| !l.carried())
            || self.deadlock.any_cycle()
            || self.sm_policy.any_mismatch()
    }

    /// The level fails somewhere: not carried on a port pair, its routes
    /// close a credit loop, or the SA answers a class of its `sm_traffic`
    /// with another SL.
    pub fn level_fails(&self, level: &LevelSweep) -> bool {
        !self.level_faults(level).is_empty()
    }

    /// Why the level fails, in the verdict line's words (none: it
    /// passes). A class the SM puts on another SL is not "not carried":
    /// the level's own traffic may be carried everywhere.
    pub fn level_faults(&self, level: &LevelSweep) -> Vec<&'static str> {
        let mut faults = Vec::new();
        if !level.carried() {
            faults.push("not carried");
        }
        if self.cycle(&level.level) {
            faults.push("a credit loop");
        }
        if self.sm_policy.mismatch(&level.level) {
            faults.push("the SM's QoS policy differs");
        }
        faults
    }

    /// The level's routes close a credit loop on its SL.
    /// (Not a level switched to each path record's SL: `routes::Routes::switched`.)
    pub fn cycle(&self, level: &str) -> bool {
        self.deadlock
            .levels
            .iter()
            .any(|l| l.level == level && self.deadlock.refuses(l))
    }
}

/// Where an audit's time and MADs went (the bench's breakdown; timings,
/// so never compared between runs).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cost {
    /// The topology read (the command's, before the sweep): walked in
    /// process, or `ibnetdiscover -p` and its parsing.
    pub topology_ms: u64,
    /// How: `in-process` or `ibnetdiscover` (empty: not said).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub topology_from: &'static str,
    /// The pairs the routes take, from the forwarding tables read.
    pub routed_ms: u64,
    /// Every egress port's tables read (and the deadlock check's path
    /// records, sent beside them).
    pub egress_ms: u64,
    /// Every level judged on every port pair read (the lane rules).
    pub judge_ms: u64,
    /// Egress ports whose levels were judged again (the rest: their
    /// reading and in ports as the last sweep's, its judgements kept:
    /// `fabric watch`'s re-audits).
    pub ports_judged: usize,
    /// The SM-policy check and the transmit wait (the deadlock check's
    /// parts are `deadlock.read_ms` and `judge_ms`; its path records are
    /// sent beside the egress read, their time inside `egress_ms`).
    pub sm_policy_ms: u64,
    pub wait_ms: u64,
    /// MADs this process sent during the sweep by kind (in process; the
    /// program reader's are its programs', not counted), retries included.
    pub mads: BTreeMap<&'static str, u64>,
}

fn ms_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Reads every egress port of `topo` and judges every level of `mapping`.
/// `workers` is what the report says the reader was given (`--workers`).
pub fn sweep(
    topo: &Topology,
    reader: &dyn Reader,
    mapping: &Mapping,
    workers: usize,
    deadline: &Deadline,
) -> Sweep {
    sweep_again(
        topo,
        reader,
        mapping,
        workers,
        deadline,
        &mut Judged::default(),
    )
}

/// [`sweep`], reusing what `kept` holds of the last sweep where the
/// inputs are the same, and keeping this one's there.
pub fn sweep_again(
    topo: &Topology,
    reader: &dyn Reader,
    mapping: &Mapping,
    workers: usize,
    deadline: &Deadline,
    kept: &mut Judged,
) -> Sweep {
    let started = Instant::now();
    let mads_before = smp_batch::sent_by_kind();
    let items = egress_items(topo);
    let ins = in_ports(&judge::DataPorts::of(topo), &items);
    // The forwarding tables first: the rows read are those of the pairs
    // some route takes (all of them when a table could not be read).
    let lft = routes::forwarding(topo, reader, deadline);
    let t = Instant::now();
    let taken = taken(&lft, &items, &ins);
    let routed_ms = ms_since(t);
    // The deadlock check's path records do not depend on the read: sent
    // beside it (in process; one after the other by the program reader).
    let pairs = routes::path_pairs(&lft.fabric);
    let t = Instant::now();
    let (reads, paths) = reader.egress_and_paths(&items, &taken, &pairs, deadline);
    let mut cost = Cost {
        egress_ms: ms_since(t),
        routed_ms,
        ..Cost::default()
    };
    let mut unread = Vec::new();
    let mut ok: Vec<(&Item, Read)> = Vec::new();
    let mut not_routed = NotRouted::default();
    // The in ports judged of each port read (an HCA port: its one table).
    let mut ok_ins: Vec<&[u32]> = Vec::new();
    for (((item, r), in_ports), all) in items.iter().zip(reads).zip(&taken).zip(&ins) {
        match r {
            Ok(r) => {
                if r.active && all.len() > in_ports.len() {
                    not_routed.add(item, all.len() - in_ports.len());
                }
                ok.push((item, r));
                ok_ins.push(if item.kind == NodeType::Switch {
                    in_ports
                } else {
                    &[0]
                });
            }
            Err(e) => unread.push(Unread {
                kind: item.kind,
                name: item.name.clone(),
                lid: item.lid,
                port: item.port,
                error: e.to_string(),
            }),
        }
    }
    // What is left is judged on the tables in memory while the reader
    // (this thread's: it is not shared) asks the SA's policy and the wait
    // counters: the lanes and the deadlock check each on a thread of their
    // own, every verdict the same as one after the other.
    let Judged {
        lanes: kept_lanes,
        routes: kept_routes,
    } = kept;
    let (judged, deadlock, asked) = std::thread::scope(|scope| {
        let lanes = scope.spawn(|| {
            let t = Instant::now();
            let judged = judge::sweep_levels(&ok, &ok_ins, mapping.levels(), kept_lanes);
            (judged, ms_since(t))
        });
        let deadlock = scope.spawn(|| routes::check(topo, lft, &ok, paths, mapping, kept_routes));
        let asked = ask(topo, reader, mapping, deadline, &ok, &mut cost);
        let judged = lanes
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let deadlock = deadlock
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (judged, deadlock, asked)
    });
    let ((levels, ports_judged), judge_ms) = judged;
    let Asked {
        sm_policy,
        wait_ports,
        xmit_wait,
        xmit_wait_unread,
        wait_levels,
    } = asked;
    cost.judge_ms = judge_ms;
    cost.ports_judged = ports_judged;
    let mads_after = smp_batch::sent_by_kind();
    cost.mads = smp_batch::KINDS
        .iter()
        .zip(mads_before.iter().zip(mads_after))
        .map(|(k, (b, a))| (*k, a - b))
        .collect();
    Sweep {
        switches: topo.count(NodeType::Switch),
        hcas: topo.count(NodeType::Hca),
        ports_read: ok.len(),
        not_routed: (not_routed.pairs > 0).then_some(not_routed),
        unread,
        levels,
        duration_ms: ms_since(started),
        workers: workers.clamp(1, MAX_WINDOW),
        reader: reader.name(),
        fallback: None,
        topology: topo.clone(),
        xmit_wait,
        wait_levels,
        xmit_wait_unread,
        deadlock,
        sm_policy,
        cost,
        wait_ports,
    }
}

/// What the reader asks after the read, beside the judging: the SA's
/// policy and the wait counters.
struct Asked {
    sm_policy: sm_classes::ClassCheck,
    wait_ports: Vec<WaitPort>,
    xmit_wait: Vec<PortWait>,
    xmit_wait_unread: Vec<String>,
    wait_levels: Vec<LevelWait>,
}

fn ask(
    topo: &Topology,
    reader: &dyn Reader,
    mapping: &Mapping,
    deadline: &Deadline,
    ok: &[(&Item, Read)],
    cost: &mut Cost,
) -> Asked {
    let t = Instant::now();
    let sm_policy = sm_classes::check(topo, reader, mapping, deadline);
    cost.sm_policy_ms = ms_since(t);
    let t = Instant::now();
    let wait_ports = wait_ports(ok);
    // The program reader reads them by perfquery when it has one.
    let (xmit_wait, xmit_wait_unread) = reader.xmit_wait(&wait_ports, deadline);
    let wait_levels = wait::peaks(&wait::levels_of(mapping), &wait_ports, &xmit_wait);
    cost.wait_ms = ms_since(t);
    Asked {
        sm_policy,
        wait_ports,
        xmit_wait,
        xmit_wait_unread,
        wait_levels,
    }
}

/// Every Active switch egress port that was read, with the SL2VL row of
/// its first in port (the VL a level's SL leaves on there).
fn wait_ports(ok: &[(&Item, Read)]) -> Vec<WaitPort> {
    ok.iter()
        .filter(|(i, r)| i.kind == NodeType::Switch && r.active)
        .map(|(i, r)| WaitPort {
            kind: i.kind,
            name: i.name.clone(),
            lid: i.lid,
            port: i.port,
            sl2vl: r.rows.first().map(|(_, t)| *t),
        })
        .collect()
}

/// SMPs in flight in process to one destination LID for `--workers N`:
/// what N smpquery workers would keep in flight per query, times the
/// queries a port needs (the LIDs are taken in turn, at most
/// `smp_batch::IN_FLIGHT` in all).
pub fn window(workers: usize) -> usize {
    workers.clamp(1, MAX_WINDOW) * WINDOW_PER_WORKER
}

/// In-process SMPs in flight to one LID per `--workers`.
pub const WINDOW_PER_WORKER: usize = 4;

/// The in ports of each egress port: a switch's data ports but the egress
/// (an HCA port's one table: none).
fn in_ports(data: &judge::DataPorts<'_>, items: &[Item]) -> Vec<Vec<u32>> {
    items
        .iter()
        .map(|i| match i.kind {
            NodeType::Switch => data.ins(&i.guid, i.port),
            _ => Vec::new(),
        })
        .collect()
}

/// Of each egress port's in ports, those some route takes to it by the
/// forwarding tables read (every one when a table was not read).
fn taken(lft: &routes::Forwarding, items: &[Item], ins: &[Vec<u32>]) -> Vec<Vec<u32>> {
    if !lft.read_all {
        return ins.to_vec();
    }
    let r = routes::routed(lft);
    items
        .iter()
        .zip(ins)
        .map(|(i, all)| match i.kind {
            NodeType::Switch => r.ins(i.lid, i.port, all),
            _ => Vec::new(),
        })
        .collect()
}

/// The egress ports to read: every connected port's far end (switches, then
/// HCAs), each once, ordered by kind, name and port.
fn egress_items(topo: &Topology) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    let mut seen: HashSet<(&str, u32, u16)> = HashSet::new();
    for p in topo
        .connected(NodeType::Switch)
        .chain(topo.connected(NodeType::Hca))
    {
        let e = &p.end;
        if !seen.insert((e.guid.as_str(), e.port, e.lid)) {
            continue;
        }
        items.push(Item {
            kind: e.kind,
            guid: e.guid.clone(),
            name: e.name.clone(),
            lid: e.lid,
            port: e.port,
        });
    }
    items.sort_by(|a, b| (a.kind, &a.name, a.port).cmp(&(b.kind, &b.name, b.port)));
    items
}

#[cfg(test)]
mod tests;
