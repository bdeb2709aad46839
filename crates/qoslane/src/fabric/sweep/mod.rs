//! The whole-fabric sweep (`qoslane fabric audit`), for a control node (any
//! host with an HCA on the fabric): the topology from `ibnetdiscover -p`,
//! then every connected egress port's tables read once by LID-routed SMP
//! queries under one deadline, by one of two [`Reader`]s:
//!
//! - in process ([`crate::fabric::read::smp_batch`] on a [`Umad`] port): PortInfo of every
//!   port, then the SL2VL rows (every other data port as in port) and the
//!   VLArb blocks of the Active ones, a window of Gets in flight;
//! - by `smpquery`, in a bounded pool of workers, the answers parsed by
//!   [`crate::fabric::read::parse`]:
//!
//! ```text
//! smpquery portinfo LID PORT      Active? OperVLs          (every connected port)
//! smpquery sl2vl LID PORT         switch: one row per in port; HCA: its table
//! smpquery vlarb LID PORT         the egress's arbitration tables
//! ```
//!
//! Both give the same [`EgressRead`] per port. Then every level of the
//! mapping is judged on every (in, out) pair of data ports of every switch
//! and on every HCA port, by the lane rules ([`crate::fabric::judge::lane`]): dropped
//! (VL 15), not operational (beyond OperVLs), starved (weight 0 in both
//! VLArb tables), or on another VL than the level names. Findings are
//! grouped per (level, node, out port, verdict), so a switch whose every row
//! is wrong is one line, not one per in port.

pub mod page;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::fabric::judge::lane::{self, Egress, Lane};
use crate::fabric::read::parse::{ParseError, parse_portinfo, parse_sl2vl, parse_switch_sl2vl, parse_topology};
use crate::fabric::counters::pma::PortWait;
use crate::fabric::pool;
use crate::fabric::read::smp_batch;
use crate::fabric::read::smpquery::{Smpquery, vlarb_state};
use crate::fabric::tables::{EgressPort, EgressRead, NodeType, PortId, Topology, VlArbState, VlRange};
use crate::fabric::read::umad::Umad;
use crate::fabric::counters::wait::{self, LevelWait, WaitPort};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;
use crate::mapping::{Level, Mapping};

/// Workers by default: enough to hide each query's latency, few enough to
/// leave the switches' SMAs (and ibsim's 10 client slots) room.
pub const DEFAULT_WORKERS: usize = 4;

type Item = EgressPort;
type Read = EgressRead;

/// How the egress ports are read: one `smpquery` per query, or SMPs sent
/// in process ([`smp_batch`], through libibumad).
#[derive(Debug)]
pub enum Reader {
    Smpquery(Smpquery),
    InProcess(Umad),
}

impl Reader {
    /// As the report names it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Smpquery(_) => "smpquery",
            Self::InProcess(_) => "in-process",
        }
    }
}

/// A port that could not be read.
#[derive(Clone, Debug, Serialize)]
pub struct Unread {
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub error: String,
}

/// One level's verdict on a group of in ports of one egress port.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub lane: Lane,
    pub sl: u8,
    pub vl: u8,
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub oper_vls: VlRange,
    /// The verdict holds for every data in port of each out port.
    pub every_in: bool,
    /// The in ports (switch, when not `every_in`).
    pub in_ports: Vec<u32>,
    pub out_ports: Vec<u32>,
    pub message: String,
}

impl Finding {
    fn render(&self, level: &str, want: Option<u8>) -> String {
        let what = if self.lane == Lane::LinkDown {
            "link not Active".to_owned()
        } else {
            lane::short(self.sl, self.vl, self.lane, want, self.oper_vls)
        };
        let at = match (self.kind, self.every_in) {
            (NodeType::Switch, true) => format!(
                "at switch {} (lid {}) every in port -> {}",
                self.name,
                self.lid,
                lane::join_ports(&self.out_ports)
            ),
            (NodeType::Switch, false) if !self.in_ports.is_empty() => format!(
                "at switch {} (lid {}) port {} -> {}",
                self.name,
                self.lid,
                lane::join_ports(&self.in_ports),
                lane::join_ports(&self.out_ports)
            ),
            (kind, _) => format!(
                "at {} {} (lid {}) port {}",
                kind.as_str(),
                self.name,
                self.lid,
                lane::join_ports(&self.out_ports)
            ),
        };
        format!("level {level}: {what} {at}")
    }
}

/// One level, fabric-wide.
#[derive(Clone, Debug, Serialize)]
pub struct LevelSweep {
    pub level: String,
    pub sl: u8,
    pub virtual_lane: Option<u8>,
    /// Port pairs (switch in→out, or an HCA port) by verdict.
    pub pairs: BTreeMap<Lane, u64>,
    /// Every verdict but `carried`, grouped.
    pub findings: Vec<Finding>,
    /// Every egress port read, with what the level gets there (carried
    /// too): the per-port facts the page draws (`fabric::page`).
    #[serde(skip)]
    pub ports: Vec<PortLanes>,
}

/// What one level gets on one egress port that was read: the VL and verdict
/// of each group of in ports (an HCA port: one group, in port 0; a port not
/// Active: one `link_down` group without in ports).
#[derive(Clone, Debug)]
pub struct PortLanes {
    pub kind: NodeType,
    pub guid: String,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub oper_vls: VlRange,
    pub groups: Vec<InLane>,
}

/// One group of in ports of an egress port, as judged for one level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InLane {
    pub vl: u8,
    pub lane: Lane,
    /// The VL's weight in the egress's arbitration tables (both summed);
    /// `None` when they were not read.
    pub weight: Option<u32>,
    pub in_ports: Vec<u32>,
}

impl LevelSweep {
    pub fn problems(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.lane.is_problem())
    }

    pub fn carried(&self) -> bool {
        self.problems().next().is_none()
    }
}

/// What the sweep found.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    pub switches: usize,
    pub hcas: usize,
    /// Egress ports read (connected switch ports and HCA ports).
    pub ports_read: usize,
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
    /// What `ibnetdiscover -p` found: the links the page draws.
    #[serde(skip)]
    pub topology: Topology,
    /// PortVLXmitWait of every Active switch egress port (`fabric::wait`).
    pub xmit_wait: Vec<PortWait>,
    /// Per level, where its lane waited most.
    pub wait_levels: Vec<LevelWait>,
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
    }
}

/// The most of `ibnetdiscover -p` read: a line per port, ~110 bytes; a
/// 4,032-HCA fat tree prints 1.7 MB, this holds ~500,000 ports.
pub const TOPOLOGY_MAX_OUTPUT: u64 = 64 << 20;

/// Runs `ibnetdiscover -p` (through `via` when given) and parses it.
pub fn discover(
    ibnetdiscover: &Path,
    via: Option<&PortId>,
    deadline: &Deadline,
) -> Result<Topology> {
    let p = via.map(|v| v.port.to_string());
    let mut args: Vec<&str> = Vec::new();
    if let (Some(v), Some(p)) = (via, p.as_deref()) {
        args.extend(["-C", v.device.as_str(), "-P", p]);
    }
    args.push("-p");
    let out = exec::run_capped(ibnetdiscover, &args, TOPOLOGY_MAX_OUTPUT, deadline)?;
    let text = String::from_utf8(out.stdout)
        .map_err(|_| Error::Fabric("ibnetdiscover -p: output is not UTF-8".into()))?;
    parse_topology(&text).map_err(|e| Error::Fabric(format!("ibnetdiscover -p: {e}")))
}

/// Reads every egress port of `topo` and judges every level of `mapping`.
pub fn sweep(
    topo: &Topology,
    reader: &mut Reader,
    via: Option<&PortId>,
    mapping: &Mapping,
    workers: usize,
    deadline: &Deadline,
) -> Sweep {
    let started = std::time::Instant::now();
    let items = egress_items(topo);
    let reads = match reader {
        Reader::Smpquery(smp) => pool::map(&items, workers, |item| read(smp, via, item, deadline)),
        Reader::InProcess(umad) => {
            let ins: Vec<Vec<u32>> = items
                .iter()
                .map(|i| match i.kind {
                    NodeType::Switch => topo
                        .data_ports(&i.guid)
                        .into_iter()
                        .filter(|&p| p != i.port)
                        .collect(),
                    _ => Vec::new(),
                })
                .collect();
            smp_batch::read_egress(umad, &items, &ins, window(workers), deadline)
        }
    };
    let mut unread = Vec::new();
    let mut ok: Vec<(&Item, Read)> = Vec::new();
    for (item, r) in items.iter().zip(reads) {
        match r {
            Ok(r) => ok.push((item, r)),
            Err(e) => unread.push(Unread {
                kind: item.kind,
                name: item.name.clone(),
                lid: item.lid,
                port: item.port,
                error: e.to_string(),
            }),
        }
    }
    let levels = mapping
        .levels()
        .iter()
        .map(|level| sweep_level(topo, &ok, level))
        .collect();
    let wait_ports = wait_ports(&ok);
    let (xmit_wait, xmit_wait_unread) = match reader {
        Reader::InProcess(umad) => {
            wait::read_in_process(umad, &wait_ports, window(workers), deadline)
        }
        // `fabric audit` reads them by perfquery when it has one.
        Reader::Smpquery(_) => (Vec::new(), Vec::new()),
    };
    let wait_levels = wait::peaks(&wait::levels_of(mapping), &wait_ports, &xmit_wait);
    Sweep {
        switches: topo.count(NodeType::Switch),
        hcas: topo.count(NodeType::Hca),
        ports_read: ok.len(),
        unread,
        levels,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        workers: workers.clamp(1, pool::MAX_WORKERS),
        reader: reader.name(),
        fallback: None,
        topology: topo.clone(),
        xmit_wait,
        wait_levels,
        xmit_wait_unread,
        wait_ports,
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

/// SMPs in flight in process for `--workers N`: what N smpquery workers
/// would keep in flight per query, times the queries a port needs.
pub fn window(workers: usize) -> usize {
    workers.clamp(1, pool::MAX_WORKERS) * WINDOW_PER_WORKER
}

/// In-process SMPs in flight per `--workers`.
pub const WINDOW_PER_WORKER: usize = 4;

/// The egress ports to read: every connected port's far end (switches, then
/// HCAs), each once, ordered by kind, name and port.
fn egress_items(topo: &Topology) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for p in topo
        .connected(NodeType::Switch)
        .chain(topo.connected(NodeType::Hca))
    {
        let e = &p.end;
        if items
            .iter()
            .any(|i| i.guid == e.guid && i.port == e.port && i.lid == e.lid)
        {
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

/// One level judged on every port that was read: the count of each lane
/// and the findings, one line per problem.
fn sweep_level(topo: &Topology, ok: &[(&Item, Read)], level: &Level) -> LevelSweep {
    let sl = level.service_level.get();
    let want = level
        .virtual_lane
        .map(crate::mapping::types::VirtualLane::get);
    let mut pairs: BTreeMap<Lane, u64> = BTreeMap::new();
    let mut findings: Vec<Finding> = Vec::new();
    let mut ports: Vec<PortLanes> = Vec::with_capacity(ok.len());
    for (item, r) in ok {
        let mut at = PortLanes {
            kind: item.kind,
            guid: item.guid.clone(),
            name: item.name.clone(),
            lid: item.lid,
            port: item.port,
            oper_vls: r.oper_vls,
            groups: Vec::new(),
        };
        if !r.active {
            at.groups.push(InLane {
                vl: 0,
                lane: Lane::LinkDown,
                weight: None,
                in_ports: Vec::new(),
            });
            ports.push(at);
            // Cabled (the topology says so) but not Active: no
            // level crosses it.
            *pairs.entry(Lane::LinkDown).or_default() += 1;
            findings.push(Finding {
                lane: Lane::LinkDown,
                sl,
                vl: 0,
                kind: item.kind,
                name: item.name.clone(),
                lid: item.lid,
                oper_vls: r.oper_vls,
                every_in: false,
                in_ports: Vec::new(),
                out_ports: vec![item.port],
                message: String::new(),
            });
            continue;
        }
        let groups = judge_port(topo, item, r, sl, want, &mut pairs);
        at.groups = groups
            .iter()
            .map(|(vl, lane, ins)| InLane {
                vl: *vl,
                lane: *lane,
                weight: match &r.vlarb {
                    VlArbState::Read(arb) => Some(arb.weight(*vl)),
                    VlArbState::Unavailable(_) => None,
                },
                in_ports: ins.clone(),
            })
            .collect();
        ports.push(at);
        add_findings(topo, item, r, sl, groups, &mut findings);
    }
    for f in &mut findings {
        f.message = f.render(&level.name, want);
    }
    LevelSweep {
        level: level.name.clone(),
        sl,
        virtual_lane: want,
        pairs,
        findings,
        ports,
    }
}

/// The in ports of an egress port grouped by the (VL, lane) the level gets
/// from each; every in port is counted in `pairs`.
fn judge_port(
    topo: &Topology,
    item: &Item,
    r: &Read,
    sl: u8,
    want: Option<u8>,
    pairs: &mut BTreeMap<Lane, u64>,
) -> Vec<(u8, Lane, Vec<u32>)> {
    let ins: Vec<u32> = match item.kind {
        NodeType::Switch => topo
            .data_ports(&item.guid)
            .into_iter()
            .filter(|&i| i != item.port)
            .collect(),
        _ => vec![0],
    };
    let mut groups: Vec<(u8, Lane, Vec<u32>)> = Vec::new();
    for i in ins {
        let Some((_, row)) = r.rows.iter().find(|(n, _)| *n == i) else {
            continue;
        };
        let (vl, lane) = lane::judge(
            &Egress {
                sl2vl: row,
                oper_vls: r.oper_vls,
                link_active: true,
                vlarb: &r.vlarb,
            },
            sl,
            want,
        );
        *pairs.entry(lane).or_default() += 1;
        match groups.iter_mut().find(|g| g.0 == vl && g.1 == lane) {
            Some(g) => g.2.push(i),
            None => groups.push((vl, lane, vec![i])),
        }
    }
    groups
}

/// A finding per group that is not carried; a group of every in port joins
/// the same verdict on the switch's other out ports (one line per switch).
fn add_findings(
    topo: &Topology,
    item: &Item,
    r: &Read,
    sl: u8,
    groups: Vec<(u8, Lane, Vec<u32>)>,
    findings: &mut Vec<Finding>,
) {
    let data_ins = match item.kind {
        NodeType::Switch => topo.data_ports(&item.guid).len().saturating_sub(1),
        _ => 1,
    };
    for (vl, lane, in_ports) in groups {
        if lane == Lane::Carried {
            continue;
        }
        // Every in port alike: merge with the same verdict on
        // the switch's other out ports (one line per switch).
        let every_in = item.kind == NodeType::Switch && in_ports.len() == data_ins;
        if every_in
            && let Some(f) = findings
                .iter_mut()
                .find(|f| f.every_in && f.lid == item.lid && f.vl == vl && f.lane == lane)
        {
            f.out_ports.push(item.port);
            continue;
        }
        findings.push(Finding {
            lane,
            sl,
            vl,
            kind: item.kind,
            name: item.name.clone(),
            lid: item.lid,
            oper_vls: r.oper_vls,
            every_in,
            in_ports: if item.kind == NodeType::Switch && !every_in {
                in_ports
            } else {
                Vec::new()
            },
            out_ports: vec![item.port],
            message: String::new(),
        });
    }
}

fn read(smp: &Smpquery, via: Option<&PortId>, item: &Item, deadline: &Deadline) -> Result<Read> {
    let (lid, port) = (item.lid.to_string(), item.port.to_string());
    let parse = |what: &str, e: ParseError| {
        Error::Fabric(format!(
            "smpquery {what} {lid} {port} ({} {}): {e}",
            item.kind.as_str(),
            item.name
        ))
    };
    let pi = smp.run(via, &["portinfo", &lid, &port], deadline)?;
    let pi = parse_portinfo(&pi).map_err(|e| parse("portinfo", e))?;
    if pi.link_state != "Active" {
        return Ok(Read {
            active: false,
            oper_vls: pi.oper_vls,
            rows: Vec::new(),
            vlarb: VlArbState::Unavailable("link not Active".into()),
        });
    }
    let rows = if item.kind == NodeType::Switch {
        let t = smp.run(via, &["sl2vl", &lid, &port], deadline)?;
        parse_switch_sl2vl(&t, item.port).map_err(|e| parse("sl2vl", e))?
    } else {
        // An HCA port has its own LID: its one table.
        let t = smp.run(via, &["sl2vl", &lid], deadline)?;
        vec![(0, parse_sl2vl(&t).map_err(|e| parse("sl2vl", e))?)]
    };
    let vlarb = vlarb_state(smp.run(via, &["vlarb", &lid, &port], deadline))?;
    Ok(Read {
        active: true,
        oper_vls: pi.oper_vls,
        rows,
        vlarb,
    })
}
