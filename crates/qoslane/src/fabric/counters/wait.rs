//! The fabric's transmit wait, for `qoslane fabric audit`: PortVLXmitWait of
//! every switch egress port the sweep visits, read in process (a PMA Get
//! per port through [`smp_batch::get_all`], in the audit's window) or by
//! `perfquery` (one per port, in the audit's worker pool), and, per level,
//! the port where its lane waited most.
//!
//! A wait tick is a unit of time (the port's own, device-specific) during
//! which the port had data to send on that VL and could not: no credit
//! from the other end, or the arbiter served another VL. The counters are
//! 16 bits and saturate: a saturated one is said, never ranked as a count.

use std::path::Path;

use serde::Serialize;

use crate::fabric::read::mad::{self, Attr, Get, Route};
use crate::fabric::read::parse::parse_perfquery;
use crate::fabric::counters::pma::{Kind, PortWait};
use crate::fabric::pool;
use crate::fabric::read::smp_batch;
use crate::fabric::tables::{NodeType, PortId, Sl2Vl};
use crate::fabric::read::umad::Umad;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;

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
    fn unread(&self) -> PortWait {
        PortWait {
            kind: self.kind,
            name: self.name.clone(),
            lid: self.lid,
            port: self.port,
            ticks: vec![None; 16],
        }
    }

    fn read(&self, ticks: [u64; 16]) -> PortWait {
        PortWait {
            ticks: ticks.into_iter().map(Some).collect(),
            ..self.unread()
        }
    }
}

/// The ports of `waits` whose counters were read.
fn read_ports<'a>(ports: &'a [WaitPort], waits: &[PortWait]) -> Vec<&'a WaitPort> {
    ports
        .iter()
        .zip(waits)
        .filter(|(_, w)| w.ticks.iter().any(Option::is_some))
        .map(|(p, _)| p)
        .collect()
}

/// The ports whose clear failed, each with why.
fn failures<T>(read: &[&WaitPort], results: Vec<Result<T>>) -> Vec<String> {
    read.iter()
        .zip(results)
        .filter_map(|(p, r)| {
            r.err()
                .map(|e| format!("{} {}: {e}", p.kind.as_str(), p.name))
        })
        .collect()
}

/// Clears the wait counters of every port of `waits` that was read (a PMA
/// Set each, `window` in flight); what could not be cleared, said.
pub fn clear_in_process(
    umad: &mut Umad,
    ports: &[WaitPort],
    waits: &[PortWait],
    window: usize,
    deadline: &Deadline,
) -> Vec<String> {
    let read = read_ports(ports, waits);
    let sets: Vec<Get> = read
        .iter()
        .map(|p| Get {
            route: Route::Perf(p.lid),
            attr: Attr::VlXmitWaitClear,
            modifier: p.port,
        })
        .collect();
    failures(&read, smp_batch::get_all(umad, &sets, window, deadline))
}

/// Clears them with `perfquery --vlxmitcounters -R LID PORT`, `workers`
/// at once.
pub fn clear_perfquery(
    program: &Path,
    via: Option<&PortId>,
    ports: &[WaitPort],
    waits: &[PortWait],
    workers: usize,
    deadline: &Deadline,
) -> Vec<String> {
    let read = read_ports(ports, waits);
    let results = pool::map(&read, workers, |p| {
        run_perfquery(program, via, p, &["-R"], deadline).map(|_| ())
    });
    failures(&read, results)
}

/// `perfquery [-C DEV -P PORT] --vlxmitcounters EXTRA… LID PORT`.
fn run_perfquery(
    program: &Path,
    via: Option<&PortId>,
    p: &WaitPort,
    extra: &[&str],
    deadline: &Deadline,
) -> Result<String> {
    let (lid, port) = (p.lid.to_string(), p.port.to_string());
    let dev_port = via.map(|v| v.port.to_string());
    let mut args: Vec<&str> = Vec::new();
    if let (Some(v), Some(n)) = (via, dev_port.as_deref()) {
        args.extend(["-C", v.device.as_str(), "-P", n]);
    }
    args.push(Kind::VlXmitWait.flag());
    args.extend_from_slice(extra);
    args.extend([lid.as_str(), port.as_str()]);
    let out = exec::run(program, &args, deadline)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads every port in process: one PMA Get each, `window` in flight.
/// A port that did not answer is all `None`; the errors are returned
/// beside (port, why).
pub fn read_in_process(
    umad: &mut Umad,
    ports: &[WaitPort],
    window: usize,
    deadline: &Deadline,
) -> (Vec<PortWait>, Vec<String>) {
    let gets: Vec<Get> = ports
        .iter()
        .map(|p| Get {
            route: Route::Perf(p.lid),
            attr: Attr::VlXmitWait,
            modifier: p.port,
        })
        .collect();
    let mut errors = Vec::new();
    let waits = ports
        .iter()
        .zip(smp_batch::get_all(umad, &gets, window, deadline))
        .map(|(p, r)| match r {
            Ok(d) => {
                let (select, ticks) = mad::vl_xmit_wait(&d);
                if u32::from(select) == p.port {
                    p.read(ticks)
                } else {
                    errors.push(format!(
                        "{} {} port {}: the answer is for port {select}",
                        p.kind.as_str(),
                        p.name,
                        p.port
                    ));
                    p.unread()
                }
            }
            Err(e) => {
                errors.push(format!("{} {}: {e}", p.kind.as_str(), p.name));
                p.unread()
            }
        })
        .collect();
    (waits, errors)
}

/// Reads every port with `perfquery --vlxmitcounters LID PORT`, `workers`
/// at once.
pub fn read_perfquery(
    program: &Path,
    via: Option<&PortId>,
    ports: &[WaitPort],
    workers: usize,
    deadline: &Deadline,
) -> (Vec<PortWait>, Vec<String>) {
    let kind = Kind::VlXmitWait;
    let got = pool::map(ports, workers, |p| -> Result<[u64; 16]> {
        let text = run_perfquery(program, via, p, &[], deadline)?;
        parse_perfquery(&text, kind.attribute(), kind.prefix()).map_err(|e| {
            Error::Fabric(format!(
                "perfquery {} {} {}: {e}",
                kind.flag(),
                p.lid,
                p.port
            ))
        })
    });
    let mut errors = Vec::new();
    let waits = ports
        .iter()
        .zip(got)
        .map(|(p, r)| match r {
            Ok(t) => p.read(t),
            Err(e) => {
                errors.push(format!("{} {}: {e}", p.kind.as_str(), p.name));
                p.unread()
            }
        })
        .collect();
    (waits, errors)
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
