//! The first hop: the switch this node's HCA port is cabled to. Its SL2VL
//! row for traffic coming in from this node (in = the switch port this node
//! is on), for every Active output port, with each output port's OperVLs and
//! VL arbitration tables: what the first switch does with each level's SL.
//!
//! Read by directed route from the local port (`-D … 0,1`), so it needs no
//! LID, no SA and works before the SM has assigned the switch one:
//!
//! ```text
//! smpquery -C mlx5_0 -P 1 -D nodeinfo 0,1       Switch? NumPorts, LocalPort (= in)
//! smpquery -C mlx5_0 -P 1 -D nodedesc 0,1       the switch's name
//! smpquery -C mlx5_0 -P 1 -D portinfo 0,1 0     the switch's LID
//! smpquery -C mlx5_0 -P 1 -D portinfo 0,1 OUT   per output port: Active? OperVLs
//! smpquery -C mlx5_0 -P 1 -D sl2vl 0,1 OUT      per Active output port
//! smpquery -C mlx5_0 -P 1 -D vlarb 0,1 OUT      per Active output port
//! ```
//!
//! 3 + NumPorts-1 + 2 × (Active ports) queries, in a bounded pool of
//! workers ([`super::pool`]). `sync` and `health` read it; a Prolog does not
//! (it reads only the node's own ports, from the cache when it is fresh).

use serde::{Deserialize, Serialize};

use super::lane::{self, Egress, Lane};
use super::pool;
use super::probe::{Sl2Vl, VlArbState, VlRange};
use super::smpquery::{self, NodeType, Smpquery};
use super::sysfs::PortId;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::mapping::Level;

/// Workers for one switch's output ports.
pub const WORKERS: usize = 4;

/// A switch, as messages name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchId {
    pub name: String,
    pub lid: u16,
    pub guid: String,
}

impl std::fmt::Display for SwitchId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "switch {} (lid {})", self.name, self.lid)
    }
}

/// One output port of the first switch, as read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchEgress {
    pub out_port: u32,
    /// The row for traffic entering at this node's switch port.
    pub sl2vl: Sl2Vl,
    pub oper_vls: VlRange,
    pub vlarb: VlArbState,
}

/// What was read of the first hop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstHop {
    Read {
        switch: SwitchId,
        /// The switch port this node's HCA port is cabled to.
        in_port: u32,
        /// Every Active output port but `in_port`.
        egress: Vec<SwitchEgress>,
        /// Output ports that could not be read: (port, why).
        unread: Vec<(u32, String)>,
    },
    /// The port is cabled to another HCA (back to back) or a router: no
    /// switch to check.
    NoSwitch { node_type: String },
    /// The switch could not be read at all.
    Unavailable { error: String },
}

/// One level on one group of output ports that share a verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopFinding {
    pub level: String,
    pub sl: u8,
    pub vl: u8,
    pub lane: Lane,
    /// The output ports' OperVLs (ports with other OperVLs are another
    /// finding).
    pub oper_vls: VlRange,
    pub out_ports: Vec<u32>,
}

/// Reads the first hop of `port`.
pub fn read(smp: &Smpquery, port: &PortId, deadline: &Deadline) -> FirstHop {
    match read_inner(smp, port, deadline) {
        Ok(hop) => hop,
        Err(e) => FirstHop::Unavailable {
            error: e.to_string(),
        },
    }
}

fn read_inner(smp: &Smpquery, port: &PortId, deadline: &Deadline) -> Result<FirstHop> {
    let parse = |what: &str, e: smpquery::ParseError| {
        Error::Fabric(format!("{port}: first hop: smpquery {what}: {e}"))
    };
    let queries: [&[&str]; 3] = [
        &["-D", "nodeinfo", "0,1"],
        &["-D", "nodedesc", "0,1"],
        &["-D", "portinfo", "0,1", "0"],
    ];
    let mut answers =
        pool::map(&queries, 3, |args| smp.run(Some(port), args, deadline)).into_iter();
    let (Some(info), Some(desc), Some(port0)) = (answers.next(), answers.next(), answers.next())
    else {
        return Err(Error::Internal("first hop: answers out of step".into()));
    };
    let info = smpquery::parse_nodeinfo(&info?).map_err(|e| parse("nodeinfo", e))?;
    if info.node_type != NodeType::Switch {
        return Ok(FirstHop::NoSwitch {
            node_type: info.node_type.to_string(),
        });
    }
    let name = smpquery::parse_nodedesc(&desc?).map_err(|e| parse("nodedesc", e))?;
    let lid = smpquery::parse_lid(&port0?).map_err(|e| parse("portinfo 0", e))?;
    let in_port = info.local_port;
    let outs: Vec<u32> = (1..=info.num_ports).filter(|&p| p != in_port).collect();
    let read_out = |&out: &u32| -> Result<Option<SwitchEgress>> {
        let o = out.to_string();
        let pi = smp.run(Some(port), &["-D", "portinfo", "0,1", &o], deadline)?;
        let pi = smpquery::parse_portinfo(&pi).map_err(|e| parse(&format!("portinfo {o}"), e))?;
        if pi.link_state != "Active" {
            return Ok(None);
        }
        let sl2vl = smp.run(Some(port), &["-D", "sl2vl", "0,1", &o], deadline)?;
        let rows = smpquery::parse_switch_sl2vl(&sl2vl, out)
            .map_err(|e| parse(&format!("sl2vl {o}"), e))?;
        let sl2vl = rows
            .into_iter()
            .find(|(i, _)| *i == in_port)
            .map(|(_, t)| t)
            .ok_or_else(|| {
                Error::Fabric(format!(
                    "{port}: first hop: smpquery sl2vl {o}: no row for in port {in_port}"
                ))
            })?;
        let vlarb =
            smpquery::vlarb_state(smp.run(Some(port), &["-D", "vlarb", "0,1", &o], deadline))?;
        Ok(Some(SwitchEgress {
            out_port: out,
            sl2vl,
            oper_vls: pi.oper_vls,
            vlarb,
        }))
    };
    let mut egress = Vec::new();
    let mut unread = Vec::new();
    for (out, r) in outs.iter().zip(pool::map(&outs, WORKERS, read_out)) {
        match r {
            Ok(Some(e)) => egress.push(e),
            Ok(None) => {}
            Err(e @ Error::Deadline { .. }) => return Err(e),
            Err(e) => unread.push((*out, e.to_string())),
        }
    }
    Ok(FirstHop::Read {
        switch: SwitchId {
            name,
            lid,
            guid: info.guid,
        },
        in_port,
        egress,
        unread,
    })
}

impl FirstHop {
    /// The level on every output port, grouped by verdict (ports ascending).
    pub fn findings(&self, level: &Level) -> Vec<HopFinding> {
        let Self::Read { egress, .. } = self else {
            return Vec::new();
        };
        let sl = level.service_level.get();
        let want = level
            .virtual_lane
            .map(crate::mapping::types::VirtualLane::get);
        let mut out: Vec<HopFinding> = Vec::new();
        for e in egress {
            let (vl, lane) = lane::judge(
                &Egress {
                    sl2vl: &e.sl2vl,
                    oper_vls: e.oper_vls,
                    link_active: true,
                    vlarb: &e.vlarb,
                },
                sl,
                want,
            );
            match out
                .iter_mut()
                .find(|f| f.vl == vl && f.lane == lane && f.oper_vls == e.oper_vls)
            {
                Some(f) => f.out_ports.push(e.out_port),
                None => out.push(HopFinding {
                    level: level.name.clone(),
                    sl,
                    vl,
                    lane,
                    oper_vls: e.oper_vls,
                    out_ports: vec![e.out_port],
                }),
            }
        }
        out
    }

    /// One line per problem of the level, naming switch and ports:
    /// `mlx5_0/1 first hop: SL 4 -> VL 15 (dropped: …) at switch leaf1 (lid 4) port 2 -> 7,8`.
    pub fn problems(&self, port: &PortId, level: &Level) -> Vec<String> {
        let Self::Read {
            switch, in_port, ..
        } = self
        else {
            return Vec::new();
        };
        let want = level
            .virtual_lane
            .map(crate::mapping::types::VirtualLane::get);
        self.findings(level)
            .into_iter()
            .filter(|f| f.lane.is_problem())
            .map(|f| {
                format!(
                    "{port} first hop: {} at {switch} port {in_port} -> {}",
                    lane::short(f.sl, f.vl, f.lane, want, f.oper_vls),
                    lane::join_ports(&f.out_ports)
                )
            })
            .collect()
    }

    /// What could not be checked, one line each (warnings, never refusals:
    /// the node's own port is the gate; the first hop adds to it).
    pub fn warnings(&self, port: &PortId, level: &Level) -> Vec<String> {
        match self {
            Self::Read {
                switch,
                in_port,
                unread,
                ..
            } => {
                let mut w: Vec<String> = unread
                    .iter()
                    .map(|(out, why)| {
                        format!("{port} first hop: {switch} port {out} not read: {why}")
                    })
                    .collect();
                w.extend(
                    self.findings(level)
                        .into_iter()
                        .filter(|f| f.lane == Lane::ArbitrationUnknown)
                        .map(|f| {
                            format!(
                                "{port} first hop: {switch} port {in_port} -> {}: VL arbitration \
                                 tables not read: cannot tell whether VL {} is scheduled",
                                lane::join_ports(&f.out_ports),
                                f.vl
                            )
                        }),
                );
                w
            }
            Self::NoSwitch { .. } => Vec::new(),
            Self::Unavailable { error } => vec![format!("{port} first hop not read: {error}")],
        }
    }
}

/// A line that belongs to one level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelLine {
    pub level: String,
    pub line: String,
}

/// A first hop as read, and judged for every level of the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assessed {
    pub hop: FirstHop,
    /// Every level on every output port, grouped by verdict.
    pub findings: Vec<HopFinding>,
    pub problems: Vec<LevelLine>,
    pub warnings: Vec<LevelLine>,
}

impl Assessed {
    pub fn of(port: &PortId, hop: FirstHop, levels: &[Level]) -> Self {
        let mut a = Self {
            findings: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            hop,
        };
        for level in levels {
            let lines = |v: Vec<String>| {
                v.into_iter().map(|line| LevelLine {
                    level: level.name.clone(),
                    line,
                })
            };
            a.findings.extend(a.hop.findings(level));
            a.problems.extend(lines(a.hop.problems(port, level)));
            a.warnings.extend(lines(a.hop.warnings(port, level)));
        }
        a
    }

    /// Output ports that could not be read (all of them when the switch
    /// could not be read: counted as 1).
    pub fn unread_ports(&self) -> u64 {
        match &self.hop {
            FirstHop::Read { unread, .. } => u64::try_from(unread.len()).unwrap_or(u64::MAX),
            FirstHop::NoSwitch { .. } => 0,
            FirstHop::Unavailable { .. } => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::probe::{VlArb, VlArbEntry};

    fn levels() -> Vec<Level> {
        let v = crate::mapping::validate_str(
            "default_level: low\nlevels:\n  - name: gold\n    qos: [gold]\n    service_level: 3\n    \
             virtual_lane: 3\n  - name: low\n    qos: [low]\n    service_level: 0\n",
        );
        v.mapping.expect("valid").levels().to_vec()
    }

    fn egress(out: u32, sl3: u8, w3: u8) -> SwitchEgress {
        let mut t = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7];
        t[3] = sl3;
        SwitchEgress {
            out_port: out,
            sl2vl: Sl2Vl::new(t).unwrap(),
            oper_vls: VlRange::parse("VL0-7").unwrap(),
            vlarb: VlArbState::Read(VlArb {
                low: (0..8)
                    .map(|vl| VlArbEntry {
                        vl,
                        weight: if vl == 3 { w3 } else { 64 },
                    })
                    .collect(),
                high: vec![VlArbEntry { vl: 0, weight: 4 }],
            }),
        }
    }

    fn hop() -> FirstHop {
        FirstHop::Read {
            switch: SwitchId {
                name: "leaf1".into(),
                lid: 4,
                guid: "0x0000000000200002".into(),
            },
            in_port: 2,
            egress: vec![
                egress(1, 3, 64),
                egress(7, 15, 64),
                egress(8, 15, 64),
                egress(3, 3, 0),
            ],
            unread: vec![(5, "timeout".into())],
        }
    }

    #[test]
    fn problems_name_level_switch_and_ports_grouped_by_verdict() {
        let port = PortId {
            device: "mlx5_0".into(),
            port: 1,
        };
        let a = Assessed::of(&port, hop(), &levels());
        let gold: Vec<&str> = a
            .problems
            .iter()
            .filter(|l| l.level == "gold")
            .map(|l| l.line.as_str())
            .collect();
        assert_eq!(
            gold,
            [
                "mlx5_0/1 first hop: SL 3 -> VL 15 (dropped: VL 15 is the management lane) at \
                 switch leaf1 (lid 4) port 2 -> 7,8",
                "mlx5_0/1 first hop: SL 3 -> VL 3 (starved: weight 0 in both VL arbitration \
                 tables) at switch leaf1 (lid 4) port 2 -> 3",
            ]
        );
        assert!(
            a.problems.iter().all(|l| l.level == "gold"),
            "low is carried"
        );
        assert_eq!(
            a.warnings
                .iter()
                .filter(|l| l.level == "low")
                .map(|l| l.line.as_str())
                .collect::<Vec<_>>(),
            ["mlx5_0/1 first hop: switch leaf1 (lid 4) port 5 not read: timeout"]
        );
        assert_eq!(a.unread_ports(), 1);
        let carried: usize = a
            .findings
            .iter()
            .filter(|f| f.level == "low" && f.lane == Lane::Carried)
            .map(|f| f.out_ports.len())
            .sum();
        assert_eq!(carried, 4);
    }

    #[test]
    fn no_switch_is_not_a_problem_and_unreadable_is_a_warning() {
        let port = PortId {
            device: "mlx5_0".into(),
            port: 1,
        };
        let back_to_back = Assessed::of(
            &port,
            FirstHop::NoSwitch {
                node_type: "Channel Adapter".into(),
            },
            &levels(),
        );
        assert!(back_to_back.problems.is_empty() && back_to_back.warnings.is_empty());
        let gone = Assessed::of(
            &port,
            FirstHop::Unavailable {
                error: "smpquery: timeout".into(),
            },
            &levels(),
        );
        assert!(gone.problems.is_empty());
        assert_eq!(gone.warnings.len(), 2, "one per level");
    }
}
