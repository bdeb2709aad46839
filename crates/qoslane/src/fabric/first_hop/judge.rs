//! The first hop, JUDGE: the lane rules ([`lane`]) applied to what was read
//! of the switch a port of this node is cabled to (a [`FirstHop`], read by
//! `read.rs`). Pure: every level on every
//! Active output port, grouped by verdict; the problems and warnings name the
//! switch and its ports.

use serde::{Deserialize, Serialize};

use crate::fabric::judge::lane::{self, Egress, Lane};
use crate::fabric::tables::{FirstHop, PortId, VlRange};
use crate::mapping::Level;

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

/// The level on every output port, grouped by verdict (ports ascending).
pub fn findings(hop: &FirstHop, level: &Level) -> Vec<HopFinding> {
    let FirstHop::Read { egress, .. } = hop else {
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
pub fn problems(hop: &FirstHop, port: &PortId, level: &Level) -> Vec<String> {
    let FirstHop::Read {
        switch, in_port, ..
    } = hop
    else {
        return Vec::new();
    };
    let want = level
        .virtual_lane
        .map(crate::mapping::types::VirtualLane::get);
    findings(hop, level)
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
pub fn warnings(hop: &FirstHop, port: &PortId, level: &Level) -> Vec<String> {
    match hop {
        FirstHop::Read {
            switch,
            in_port,
            unread,
            ..
        } => {
            let mut w: Vec<String> = unread
                .iter()
                .map(|(out, why)| format!("{port} first hop: {switch} port {out} not read: {why}"))
                .collect();
            w.extend(
                findings(hop, level)
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
        FirstHop::NoSwitch { .. } => Vec::new(),
        FirstHop::Unavailable { error } => vec![format!("{port} first hop not read: {error}")],
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
pub struct JudgedHop {
    pub hop: FirstHop,
    /// Every level on every output port, grouped by verdict.
    pub findings: Vec<HopFinding>,
    pub problems: Vec<LevelLine>,
    pub warnings: Vec<LevelLine>,
    /// When the oldest of its tables was read, if not by this run
    /// (`health`'s shared first hop carries some from an earlier one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at_ms: Option<u64>,
}

impl JudgedHop {
    pub fn of(port: &PortId, hop: FirstHop, levels: &[Level]) -> Self {
        let mut a = Self {
            findings: Vec::new(),
            problems: Vec::new(),
            warnings: Vec::new(),
            read_at_ms: None,
            hop,
        };
        for level in levels {
            let lines = |v: Vec<String>| {
                v.into_iter().map(|line| LevelLine {
                    level: level.name.clone(),
                    line,
                })
            };
            a.findings.extend(findings(&a.hop, level));
            a.problems.extend(lines(problems(&a.hop, port, level)));
            a.warnings.extend(lines(warnings(&a.hop, port, level)));
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
    use crate::fabric::tables::{Sl2Vl, SwitchEgress, SwitchId, VlArb, VlArbEntry, VlArbState};

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
        let a = JudgedHop::of(&port, hop(), &levels());
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
        let back_to_back = JudgedHop::of(
            &port,
            FirstHop::NoSwitch {
                node_type: "Channel Adapter".into(),
            },
            &levels(),
        );
        assert!(back_to_back.problems.is_empty() && back_to_back.warnings.is_empty());
        let gone = JudgedHop::of(
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
