//! The one set of rules for "does this SL travel on the lane it should?" on
//! one egress port, the node's own HCA port or a switch port alike:
//!
//! - the link must be Active;
//! - `vl == 15` is the management lane: the packets are **dropped**;
//! - `vl` outside the port's OperVLs is **not operational** (dropped too);
//! - a level that names a `virtual_lane` must land on that VL;
//! - a VL with weight 0 in both VL arbitration tables is never scheduled:
//!   the level is **starved** (with one data VL there is nothing to
//!   arbitrate).
//!
//! [`judge`] gives a [`Lane`]; every check (own port, first hop, fabric
//! sweep) renders and counts the same verdicts.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fabric::tables::{Sl2Vl, VlArbState, VlRange};

/// What one egress port does with one level's SL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// On the intended VL, operational and scheduled.
    Carried,
    /// The link is not Active.
    LinkDown,
    /// SL → VL 15.
    Dropped,
    /// SL → a VL outside OperVLs.
    NotOperational,
    /// On a usable VL, but not the one the level names.
    OtherVl,
    /// On a VL with weight 0 in both arbitration tables.
    Starved,
    /// Carried as far as SL2VL and OperVLs tell; the arbitration tables
    /// could not be read.
    ArbitrationUnknown,
}

impl Lane {
    /// Every verdict, in the order reports and metrics list them.
    pub const ALL: [Self; 7] = [
        Self::Carried,
        Self::LinkDown,
        Self::Dropped,
        Self::NotOperational,
        Self::OtherVl,
        Self::Starved,
        Self::ArbitrationUnknown,
    ];

    /// The level's traffic is lost or stalled here: a problem the fabric
    /// policy refuses under `enforce`.
    pub fn is_problem(self) -> bool {
        !matches!(self, Self::Carried | Self::ArbitrationUnknown)
    }

    /// The metrics label and the JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Carried => "carried",
            Self::LinkDown => "link_down",
            Self::Dropped => "dropped",
            Self::NotOperational => "not_operational",
            Self::OtherVl => "other_vl",
            Self::Starved => "starved",
            Self::ArbitrationUnknown => "arbitration_unknown",
        }
    }
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One egress port's tables, as far as the rules need them.
#[derive(Clone, Copy, Debug)]
pub struct Egress<'a> {
    pub sl2vl: &'a Sl2Vl,
    pub oper_vls: VlRange,
    pub link_active: bool,
    pub vlarb: &'a VlArbState,
}

/// The VL the SL lands on, and the verdict.
pub fn judge(e: &Egress<'_>, sl: u8, want_vl: Option<u8>) -> (u8, Lane) {
    let vl = e.sl2vl.vl(sl);
    let lane = if !e.link_active {
        Lane::LinkDown
    } else if vl == Sl2Vl::VL15 {
        Lane::Dropped
    } else if !e.oper_vls.contains(vl) {
        Lane::NotOperational
    } else if want_vl.is_some_and(|w| w != vl) {
        Lane::OtherVl
    } else if e.oper_vls.data_vls() == 1 {
        Lane::Carried
    } else {
        match e.vlarb {
            VlArbState::Read(arb) if arb.weight(vl) == 0 => Lane::Starved,
            VlArbState::Read(_) => Lane::Carried,
            VlArbState::Unavailable(_) => Lane::ArbitrationUnknown,
        }
    };
    (vl, lane)
}

/// The short form used in messages: `SL 4 -> VL 15 (dropped)`.
pub fn short(sl: u8, vl: u8, lane: Lane, want_vl: Option<u8>, oper_vls: VlRange) -> String {
    let why = match lane {
        Lane::Carried => "carried".to_owned(),
        Lane::LinkDown => "link not Active".to_owned(),
        Lane::Dropped => "dropped: VL 15 is the management lane".to_owned(),
        Lane::NotOperational => format!("dropped: outside OperVLs {oper_vls}"),
        Lane::OtherVl => format!(
            "the level names VL {}",
            want_vl.map_or_else(|| "?".to_owned(), |w| w.to_string())
        ),
        Lane::Starved => "starved: weight 0 in both VL arbitration tables".to_owned(),
        Lane::ArbitrationUnknown => "VL arbitration tables not read".to_owned(),
    };
    format!("SL {sl} -> VL {vl} ({why})")
}

/// Port numbers as messages list them: `1,2,7`.
pub fn join_ports(ports: &[u32]) -> String {
    ports
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::tables::{VlArb, VlArbEntry};

    fn arb(weights: &[(u8, u8)]) -> VlArbState {
        VlArbState::Read(VlArb {
            low: weights
                .iter()
                .map(|&(vl, weight)| VlArbEntry { vl, weight })
                .collect(),
            high: vec![VlArbEntry { vl: 0, weight: 4 }],
        })
    }

    fn table(sl3: u8) -> Sl2Vl {
        let mut t = [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7];
        t[3] = sl3;
        Sl2Vl::new(t).unwrap()
    }

    #[test]
    fn every_rule_in_its_order() {
        let all = arb(&[(0, 64), (1, 64), (2, 64), (3, 64)]);
        let no3 = arb(&[(0, 64), (1, 64), (2, 64), (3, 0)]);
        let unread = VlArbState::Unavailable("timeout".into());
        let r8 = VlRange::parse("VL0-7").unwrap();
        let r2 = VlRange::parse("VL0-1").unwrap();
        let r1 = VlRange::parse("VL0").unwrap();
        let cases = [
            // (sl3 -> vl, oper, active, arb, want, expected)
            (3, r8, true, &all, None, Lane::Carried),
            (3, r8, false, &all, None, Lane::LinkDown),
            (15, r8, true, &all, Some(3), Lane::Dropped),
            (3, r2, true, &all, Some(3), Lane::NotOperational),
            (2, r8, true, &all, Some(3), Lane::OtherVl),
            (3, r8, true, &no3, Some(3), Lane::Starved),
            (3, r8, true, &unread, None, Lane::ArbitrationUnknown),
            // one data VL: nothing to arbitrate, weight 0 is no problem
            (0, r1, true, &no3, None, Lane::Carried),
        ];
        for (vl, oper, active, vlarb, want, expected) in cases {
            let t = table(vl);
            let e = Egress {
                sl2vl: &t,
                oper_vls: oper,
                link_active: active,
                vlarb,
            };
            assert_eq!(judge(&e, 3, want), (vl, expected), "{vl} {oper} {want:?}");
        }
    }

    #[test]
    fn problems_are_what_loses_or_stalls_traffic() {
        let problems: Vec<Lane> = Lane::ALL.into_iter().filter(|l| l.is_problem()).collect();
        assert_eq!(
            problems,
            [
                Lane::LinkDown,
                Lane::Dropped,
                Lane::NotOperational,
                Lane::OtherVl,
                Lane::Starved
            ]
        );
    }
}
