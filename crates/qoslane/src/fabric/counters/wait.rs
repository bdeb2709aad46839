//! The fabric's transmit wait, for `qoslane fabric audit`: the egress ports
//! whose PortVLXmitWait is read ([`WaitPort`]; the reader reads them:
//! `Reader::xmit_wait`, a PMA Get each in process or `perfquery`) and, per
//! level, the port where its lane waited most ([`peaks`]). Pure.
//!
//! A wait tick is a unit of time (the port's own, device-specific) during
//! which the port had data to send on that VL and could not: no credit
//! from the other end, or the arbiter served another VL. The counters are
//! 16 bits and saturate: a saturated one is said, never ranked as a count.

use serde::Serialize;

use crate::error::Result;
use crate::fabric::counters::pma::{Kind, PortWait};
use crate::fabric::tables::{NodeType, Sl2Vl};

/// An egress port to read: who it is, and the VL each SL leaves on there.
#[derive(Clone, Debug)]
pub struct WaitPort {
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub sl2vl: Option<Sl2Vl>,
}

impl WaitPort {
    /// The port with no tick read.
    pub fn unread(&self) -> PortWait {
        PortWait {
            kind: self.kind,
            name: self.name.clone(),
            lid: self.lid,
            port: self.port,
            ticks: vec![None; 16],
        }
    }

    /// The port with its ticks, as read.
    pub fn read(&self, ticks: [u64; 16]) -> PortWait {
        PortWait {
            ticks: ticks.into_iter().map(Some).collect(),
            ..self.unread()
        }
    }
}

/// The ports of `waits` whose counters were read.
pub fn read_ports<'a>(ports: &'a [WaitPort], waits: &[PortWait]) -> Vec<&'a WaitPort> {
    ports
        .iter()
        .zip(waits)
        .filter(|(_, w)| w.ticks.iter().any(Option::is_some))
        .map(|(p, _)| p)
        .collect()
}

/// The ports whose clear failed, each with why.
pub fn failures<T>(read: &[&WaitPort], results: Vec<Result<T>>) -> Vec<String> {
    read.iter()
        .zip(results)
        .filter_map(|(p, r)| {
            r.err()
                .map(|e| format!("{} {}: {e}", p.kind.as_str(), p.name))
        })
        .collect()
}

/// Where one level's lane waited most in the audit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LevelWait {
    pub level: String,
    pub sl: u8,
    /// The egress port whose level's VL waited most (none waited: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub most: Option<WaitAt>,
    /// Egress ports where the level's VL counter is saturated (how long it
    /// waited is unknown there).
    pub saturated: Vec<WaitAt>,
}

/// A level's VL at one egress port, and its ticks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaitAt {
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub vl: u8,
    pub ticks: u64,
}

impl WaitAt {
    pub fn words(&self) -> String {
        format!(
            "{} {} (lid {}) port {} VL {}: {} ticks",
            self.kind.as_str(),
            self.name,
            self.lid,
            self.port,
            self.vl,
            self.ticks
        )
    }
}

/// Each level of `mapping` as [`peaks`] takes it: name, SL, and the VL the
/// mapping names for it.
pub fn levels_of(mapping: &crate::mapping::Mapping) -> Vec<(String, u8, Option<u8>)> {
    mapping
        .levels()
        .iter()
        .map(|l| {
            (
                l.name.clone(),
                l.service_level.get(),
                l.virtual_lane.map(crate::mapping::types::VirtualLane::get),
            )
        })
        .collect()
}

/// Per level (name, SL): the port where the VL its SL leaves on waited
/// most; `sl2vl` of each port says that VL (a port without one: its
/// `fixed` VL when the mapping names one, else not ranked).
pub fn peaks(
    levels: &[(String, u8, Option<u8>)],
    ports: &[WaitPort],
    waits: &[PortWait],
) -> Vec<LevelWait> {
    let top = Kind::VlXmitWait.saturated_at();
    levels
        .iter()
        .map(|(level, sl, fixed)| {
            let mut most: Option<WaitAt> = None;
            let mut saturated = Vec::new();
            for (p, w) in ports.iter().zip(waits) {
                let Some(vl) = p.sl2vl.map(|t| t.vl(*sl)).or(*fixed) else {
                    continue;
                };
                let Some(Some(ticks)) = w.ticks.get(usize::from(vl)).copied() else {
                    continue;
                };
                let at = WaitAt {
                    kind: w.kind,
                    name: w.name.clone(),
                    lid: w.lid,
                    port: w.port,
                    vl,
                    ticks,
                };
                if ticks >= top {
                    saturated.push(at);
                } else if ticks > 0 && most.as_ref().is_none_or(|m| ticks > m.ticks) {
                    most = Some(at);
                }
            }
            LevelWait {
                level: level.clone(),
                sl: *sl,
                most,
                saturated,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: &str, n: u32, vl_of_sl3: u8) -> WaitPort {
        let mut t = [0u8; 16];
        t[3] = vl_of_sl3;
        WaitPort {
            kind: NodeType::Switch,
            name: name.into(),
            lid: 4,
            port: n,
            sl2vl: Sl2Vl::new(t),
        }
    }

    #[test]
    fn a_level_waits_most_where_its_own_vl_waited_most() {
        let ports = [
            port("leaf1", 1, 3),
            port("leaf1", 2, 3),
            port("leaf1", 3, 5),
        ];
        let mut a = [0u64; 16];
        a[3] = 100;
        let mut b = [0u64; 16];
        b[3] = 500;
        b[0] = 9000;
        let mut c = [0u64; 16];
        c[3] = 60000;
        c[5] = 0xffff;
        let waits = [ports[0].read(a), ports[1].read(b), ports[2].read(c)];
        let p = peaks(
            &[("mc".into(), 3, Some(3)), ("n".into(), 0, None)],
            &ports,
            &waits,
        );
        let most = p[0].most.as_ref().unwrap();
        assert_eq!(
            (most.port, most.vl, most.ticks),
            (2, 3, 500),
            "VL 3 of port 3 is not SL 3's"
        );
        assert_eq!(
            p[0].saturated.len(),
            1,
            "port 3's VL 5 is SL 3's there: saturated"
        );
        assert_eq!(p[0].saturated[0].port, 3);
        assert_eq!(p[1].most.as_ref().unwrap().ticks, 9000);
        assert_eq!(most.words(), "switch leaf1 (lid 4) port 2 VL 3: 500 ticks");
    }
}
