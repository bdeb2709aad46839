//! The sweep's judging, pure: every level of the mapping on every egress
//! port that was read, by the lane rules ([`lane`]) — the count of each
//! lane, the findings grouped per (level, node, out port, verdict), and per
//! port what the level gets there ([`PortLanes`], what the page draws).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::fabric::judge::lane::{self, Egress, Lane};
use crate::fabric::tables::{EgressPort, EgressRead, NodeType, Topology, VlArbState, VlRange};
use crate::mapping::Level;

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

/// The connected ports of every node of a topology, by GUID: what
/// [`Topology::data_ports`] says of each, gathered in one pass (asking it
/// per port is a pass over the whole topology each: quadratic in the
/// fabric).
#[derive(Debug, Default)]
pub struct DataPorts<'t>(HashMap<&'t str, Vec<u32>>);

impl<'t> DataPorts<'t> {
    pub fn of(topo: &'t Topology) -> Self {
        let mut by: HashMap<&str, Vec<u32>> = HashMap::new();
        for p in topo.ports.iter().filter(|p| p.remote.is_some()) {
            by.entry(p.end.guid.as_str()).or_default().push(p.end.port);
        }
        for v in by.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        Self(by)
    }

    /// The connected ports of the node `guid` (none: not in the topology).
    pub fn of_node(&self, guid: &str) -> &[u32] {
        self.0.get(guid).map_or(&[], Vec::as_slice)
    }

    /// A switch egress port's data in ports: its node's other connected
    /// ports.
    pub fn ins(&self, guid: &str, out: u32) -> Vec<u32> {
        self.of_node(guid)
            .iter()
            .copied()
            .filter(|&p| p != out)
            .collect()
    }
}

/// One level's groups on one egress port: (VL, lane, in ports).
type Groups = Vec<(u8, Lane, Vec<u32>)>;

/// A port as the sweep keys it: GUID, port, LID.
type PortKey = (String, u32, u16);

/// The last sweep's judgements per port, for the next to reuse where a
/// port's reading and in ports are the same (`fabric watch`'s re-audits:
/// the lane rules are pure, so the same reading gives the same groups).
/// One reading per port of the fabric, and per level (SL, VL) its groups.
#[derive(Debug, Default)]
pub struct KeptLanes {
    reads: HashMap<PortKey, (EgressRead, Vec<u32>)>,
    groups: HashMap<(u8, Option<u8>), HashMap<PortKey, Groups>>,
}

fn port_key(item: &EgressPort) -> PortKey {
    (item.guid.clone(), item.port, item.lid)
}

/// Every level judged on every port that was read: per port whose
/// reading and in ports are the ones `kept` holds, the level's groups
/// taken from it; `kept` then holds this sweep's. Returns the levels
/// and how many ports were judged again.
pub fn sweep_levels(
    ok: &[(&EgressPort, EgressRead)],
    ins: &[&[u32]],
    levels: &[Level],
    kept: &mut KeptLanes,
) -> (Vec<LevelSweep>, usize) {
    let before = std::mem::take(kept);
    let same: Vec<bool> = ok
        .iter()
        .zip(ins)
        .map(|((item, r), ins)| {
            before
                .reads
                .get(&port_key(item))
                .is_some_and(|(read, i)| read == r && i.as_slice() == *ins)
        })
        .collect();
    let judged = same.iter().filter(|s| !**s).count();
    let swept = levels
        .iter()
        .map(|level| {
            let key = level_key(level);
            let (sweep, groups) = sweep_level(ok, ins, level, &same, before.groups.get(&key));
            kept.groups.insert(key, groups);
            sweep
        })
        .collect();
    kept.reads = ok
        .iter()
        .zip(ins)
        .map(|((item, r), ins)| (port_key(item), (r.clone(), ins.to_vec())))
        .collect();
    (swept, judged)
}

fn level_key(level: &Level) -> (u8, Option<u8>) {
    (
        level.service_level.get(),
        level
            .virtual_lane
            .map(crate::mapping::types::VirtualLane::get),
    )
}

/// One level judged on every port that was read (`ins[i]`: the in ports
/// of `ok[i]` judged, a switch's data ports but the egress that some route
/// takes; an HCA port's, `[0]`): the count of each lane and the findings,
/// one line per problem; a port whose `same` is true
/// takes its groups from `before` (when it holds them); the groups of
/// every Active port, for the next sweep.
fn sweep_level(
    ok: &[(&EgressPort, EgressRead)],
    ins: &[&[u32]],
    level: &Level,
    same: &[bool],
    before: Option<&HashMap<PortKey, Groups>>,
) -> (LevelSweep, HashMap<PortKey, Groups>) {
    let (sl, want) = level_key(level);
    let mut kept: HashMap<PortKey, Groups> = HashMap::with_capacity(ok.len());
    let mut pairs: BTreeMap<Lane, u64> = BTreeMap::new();
    let mut findings: Vec<Finding> = Vec::new();
    let mut ports: Vec<PortLanes> = Vec::with_capacity(ok.len());
    for (((item, r), same), &in_ports) in ok.iter().zip(same).zip(ins) {
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
        let key = port_key(item);
        let groups = match before.filter(|_| *same).and_then(|b| b.get(&key)) {
            Some(g) => {
                for (_, lane, ins) in g {
                    *pairs.entry(*lane).or_default() +=
                        u64::try_from(ins.len()).unwrap_or(u64::MAX);
                }
                g.clone()
            }
            None => judge_port(in_ports, r, sl, want, &mut pairs),
        };
        kept.insert(key, groups.clone());
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
        add_findings(item, in_ports.len(), r, sl, groups, &mut findings);
    }
    for f in &mut findings {
        f.message = f.render(&level.name, want);
    }
    let sweep = LevelSweep {
        level: level.name.clone(),
        sl,
        virtual_lane: want,
        pairs,
        findings,
        ports,
    };
    (sweep, kept)
}

/// The in ports of an egress port grouped by the (VL, lane) the level gets
/// from each; every in port is counted in `pairs`.
fn judge_port(
    ins: &[u32],
    r: &EgressRead,
    sl: u8,
    want: Option<u8>,
    pairs: &mut BTreeMap<Lane, u64>,
) -> Vec<(u8, Lane, Vec<u32>)> {
    let mut groups: Vec<(u8, Lane, Vec<u32>)> = Vec::new();
    for (k, &i) in ins.iter().enumerate() {
        // The rows come in the order asked (both readers): the k-th is
        // in port i's, else it is looked for.
        let row = match r.rows.get(k) {
            Some((n, row)) if *n == i => row,
            _ => match r.rows.iter().find(|(n, _)| *n == i) {
                Some((_, row)) => row,
                None => continue,
            },
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
    item: &EgressPort,
    data_ins: usize,
    r: &EgressRead,
    sl: u8,
    groups: Vec<(u8, Lane, Vec<u32>)>,
    findings: &mut Vec<Finding>,
) {
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
