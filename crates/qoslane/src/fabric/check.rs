//! The alignment check of one level on one port: does the level's SL land on
//! a VL the port serves, and on the VL the mapping names?
//!
//! `vl = sl2vl[SL]`; a problem when `vl == 15` (the management lane: the
//! packets are dropped), when `vl` is not among OperVLs' data VLs, or when
//! the level names a `virtual_lane` and `vl` differs; a warning when `vl`
//! has weight 0 in both VL arbitration tables (never scheduled).

use serde::{Deserialize, Serialize};

use super::probe::{PortTables, Sl2Vl, VlArbState};
use super::sysfs::PortId;
use crate::mapping::Level;

/// One level on one port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub level: String,
    pub service_level: u8,
    /// The VL the port's SL2VL table gives the SL.
    pub vl: u8,
    /// The mapping's `virtual_lane`, when it names one.
    pub want_vl: Option<u8>,
    pub aligned: bool,
    pub problem: Option<String>,
    pub warning: Option<String>,
}

pub fn check(port: &PortId, t: &PortTables, level: &Level) -> Verdict {
    let sl = level.service_level.get();
    let vl = t.sl2vl.vl(sl);
    let want_vl = level
        .virtual_lane
        .map(super::super::mapping::types::VirtualLane::get);
    let ops = t.oper_vls;
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
    let problem = if t.link_state != "Active" {
        Some(format!(
            "{port}: link state {} (PortInfo), not Active: SL {sl} carries no traffic",
            t.link_state
        ))
    } else if vl == Sl2Vl::VL15 {
        Some(format!(
            "{port}: SL {sl} -> VL 15, the management lane: SL {sl} packets are dropped; {want}"
        ))
    } else if !ops.contains(vl) {
        Some(format!(
            "{port}: SL {sl} -> VL {vl}, outside OperVLs {ops}: not operational; {want}"
        ))
    } else if want_vl.is_some_and(|w| w != vl) {
        Some(format!("{port}: SL {sl} -> VL {vl}, {want}"))
    } else {
        None
    };
    // With one data VL there is nothing to arbitrate.
    let warning = match &t.vlarb {
        _ if problem.is_some() || ops.data_vls() == 1 => None,
        VlArbState::Read(arb) if arb.weight(vl) == 0 => Some(format!(
            "{port}: SL {sl} -> VL {vl}, but VL {vl} has weight 0 in both VL arbitration \
             tables: it is never scheduled"
        )),
        VlArbState::Read(_) => None,
        VlArbState::Unavailable(why) => Some(format!(
            "{port}: VL arbitration tables not read ({why}): cannot tell whether VL {vl} is scheduled"
        )),
    };
    Verdict {
        level: level.name.clone(),
        service_level: sl,
        vl,
        want_vl,
        aligned: problem.is_none(),
        problem,
        warning,
    }
}
