//! The alignment check of one level on one port: does the level's SL land on
//! a VL the port serves, and on the VL the mapping names?
//!
//! The rules are [`super::lane`]'s, the same for a switch port: a problem
//! when the SL lands on VL 15, outside OperVLs, on another VL than the level
//! names, or on a VL with weight 0 in both arbitration tables (starved); a
//! warning when the arbitration tables could not be read.

use serde::{Deserialize, Serialize};

use crate::fabric::judge::lane::{self, Egress, Lane};
use crate::fabric::tables::{PortId, PortTables, VlArbState};
use crate::mapping::Level;

/// One level on one port: what the lane rules found, and the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortLevel {
    pub level: String,
    pub service_level: u8,
    /// The VL the port's SL2VL table gives the SL.
    pub vl: u8,
    /// The mapping's `virtual_lane`, when it names one.
    pub want_vl: Option<u8>,
    pub aligned: bool,
    /// The verdict of the lane rules ([`super::lane`]).
    #[serde(default = "carried")]
    pub lane: Lane,
    pub problem: Option<String>,
    pub warning: Option<String>,
}

/// Cache entries written before the lane rules had no `lane`; they are
/// re-judged from their tables anyway.
fn carried() -> Lane {
    Lane::Carried
}

pub fn check(port: &PortId, t: &PortTables, level: &Level) -> PortLevel {
    check_sl(
        port,
        t,
        &level.name,
        level.service_level.get(),
        level
            .virtual_lane
            .map(crate::mapping::types::VirtualLane::get),
    )
}

/// [`check`] of an SL and the VL it should land on, as a job's record holds
/// them (the level it was granted, whatever the mapping says now).
pub fn check_sl(
    port: &PortId,
    t: &PortTables,
    level: &str,
    sl: u8,
    want_vl: Option<u8>,
) -> PortLevel {
    let ops = t.oper_vls;
    let egress = Egress {
        sl2vl: &t.sl2vl,
        oper_vls: ops,
        link_active: t.link_state == "Active",
        vlarb: &t.vlarb,
    };
    let (vl, lane) = lane::judge(&egress, sl, want_vl);
    let want = match want_vl {
        Some(w) if !ops.contains(w) => {
            format!(
                "want VL {w} (not operational: OperVLs {ops}, VLCap {})",
                t.vl_cap
            )
        }
        Some(w) => format!("want VL {w}"),
        None => format!("want a data VL of OperVLs {ops}"),
    };
    let problem = match lane {
        Lane::LinkDown => Some(format!(
            "{port}: link state {} (PortInfo), not Active: SL {sl} carries no traffic",
            t.link_state
        )),
        Lane::Dropped => Some(format!(
            "{port}: SL {sl} -> VL 15, the management lane: SL {sl} packets are dropped; {want}"
        )),
        Lane::NotOperational => Some(format!(
            "{port}: SL {sl} -> VL {vl}, outside OperVLs {ops}: not operational; {want}"
        )),
        Lane::OtherVl => Some(format!("{port}: SL {sl} -> VL {vl}, {want}")),
        Lane::Starved => Some(format!(
            "{port}: SL {sl} -> VL {vl}, but VL {vl} has weight 0 in both VL arbitration \
             tables: it is never scheduled (starved)"
        )),
        Lane::Carried | Lane::ArbitrationUnknown => None,
    };
    let warning = match &t.vlarb {
        VlArbState::Unavailable(why) if lane == Lane::ArbitrationUnknown => Some(format!(
            "{port}: VL arbitration tables not read ({why}): cannot tell whether VL {vl} is scheduled"
        )),
        _ => None,
    };
    PortLevel {
        level: level.to_owned(),
        service_level: sl,
        vl,
        want_vl,
        aligned: problem.is_none(),
        lane,
        problem,
        warning,
    }
}
