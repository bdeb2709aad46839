//! SMP Gets in process, many at once: [`get_all`] keeps a window of Gets in
//! flight on one [`Umad`] port, matches each answer to its Get by
//! transaction id, retries a Get left unanswered, and gives up what is still
//! unanswered at the run's deadline. [`read_egress`] is the audit's read of
//! every egress port with it: PortInfo of every port, then the SL2VL rows
//! and VLArb blocks of the Active ones, each table once, into the same
//! [`EgressRead`] the `smpquery` path produces.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::mad::{self, Attr, DATA_SIZE, Get, Route};
use super::tables::{EgressPort, EgressRead, NodeType, VlArb, VlArbState};
use super::umad::Umad;
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// How long one Get waits for its answer before it is sent again.
pub const ANSWER_WAIT: Duration = Duration::from_millis(1000);
/// How often a Get is sent before it is given up (as `smpquery`: 1 + 3).
pub const ATTEMPTS: u32 = 4;

/// One Get in flight.
struct Pending {
    index: usize,
    sent: Instant,
    attempt: u32,
}

/// The attribute data of each Get, in order, or why not. At most `window`
/// Gets are in flight at once.
pub fn get_all(
    umad: &mut Umad,
    gets: &[Get],
    window: usize,
    deadline: &Deadline,
) -> Vec<Result<[u8; DATA_SIZE]>> {
    let mut results: Vec<Option<Result<[u8; DATA_SIZE]>>> = gets.iter().map(|_| None).collect();
    let mut pending: HashMap<u32, Pending> = HashMap::new();
    let mut next = 0usize;
    let mut tid: u32 = std::process::id().rotate_left(16);
    let wait_ms = i32::try_from(ANSWER_WAIT.as_millis()).unwrap_or(1000);
    let mut send = |umad: &mut Umad, index: usize, attempt: u32, pending: &mut HashMap<u32, Pending>| {
        tid = tid.wrapping_add(1);
        let get = &gets[index];
        let sent = mad::encode_get(get, u64::from(tid))
            .map_err(|e| Error::Fabric(format!("{get}: {e}")))
            .and_then(|m| {
                umad.send(get.route.dlid(), matches!(get.route, Route::Directed(_)), &m, wait_ms)
                    .map_err(|e| Error::Fabric(format!("{get}: {e}")))
            });
        match sent {
            Ok(()) => {
                pending.insert(
                    tid,
                    Pending {
                        index,
                        sent: Instant::now(),
                        attempt,
                    },
                );
                None
            }
            Err(e) => Some(e),
        }
    };
    loop {
        while pending.len() < window.max(1) && next < gets.len() {
            if let Some(e) = send(umad, next, 1, &mut pending) {
                results[next] = Some(Err(e));
            }
            next += 1;
        }
        if pending.is_empty() {
            break;
        }
        let now = Instant::now();
        if deadline.remaining().is_zero() {
            for p in pending.values() {
                results[p.index] = Some(Err(deadline.passed(gets[p.index].to_string())));
            }
            for (i, r) in results.iter_mut().enumerate().skip(next) {
                *r = Some(Err(deadline.passed(gets[i].to_string())));
            }
            break;
        }
        let oldest = pending.values().map(|p| p.sent).min().unwrap_or(now);
        let until = (oldest + ANSWER_WAIT).min(deadline.instant());
        let wait = i32::try_from(until.saturating_duration_since(now).as_millis()).unwrap_or(1000);
        match umad.recv(wait) {
            Err(e) => {
                for p in pending.drain().map(|(_, p)| p) {
                    results[p.index] = Some(Err(Error::Fabric(format!("{}: {e}", gets[p.index]))));
                }
            }
            Ok(Some(got)) => {
                let Some(t) = got.mad.get(12..16).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]])) else {
                    continue;
                };
                // The kernel owns the TID's high half: match the low half.
                let Some(p) = pending.remove(&t) else { continue };
                if got.status == 0 {
                    let get = &gets[p.index];
                    results[p.index] = Some(
                        mad::decode_answer(&got.mad)
                            .and_then(|a| {
                                if a.attr_id == get.attr.id() && a.modifier == get.modifier {
                                    Ok(a.data)
                                } else {
                                    Err(mad::MadError(format!(
                                        "the answer is for attribute {:#06x} modifier {:#x}",
                                        a.attr_id, a.modifier
                                    )))
                                }
                            })
                            .map_err(|e| Error::Fabric(format!("{get}: {e}"))),
                    );
                } else {
                    // Unanswered within the kernel's timeout: the retry below.
                    pending.insert(t, Pending { sent: Instant::now() - ANSWER_WAIT, ..p });
                }
            }
            Ok(None) => {}
        }
        // Gets unanswered for ANSWER_WAIT: again, or given up.
        let now = Instant::now();
        let late: Vec<u32> = pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.sent) >= ANSWER_WAIT)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            let Some(p) = pending.remove(&t) else { continue };
            if p.attempt >= ATTEMPTS {
                results[p.index] = Some(Err(Error::Fabric(format!(
                    "{}: no answer ({ATTEMPTS} tries, {} ms each)",
                    gets[p.index],
                    ANSWER_WAIT.as_millis()
                ))));
            } else if let Some(e) = send(umad, p.index, p.attempt + 1, &mut pending) {
                results[p.index] = Some(Err(e));
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Internal("an SMP Get was never sent".into()))))
        .collect()
}

/// Reads every egress port: `ins[i]` are the in ports whose SL2VL rows to
/// read for `ports[i]` (a switch's data ports but the egress; ignored for
/// an HCA port, which has one table).
pub fn read_egress(
    umad: &mut Umad,
    ports: &[EgressPort],
    ins: &[Vec<u32>],
    window: usize,
    deadline: &Deadline,
) -> Vec<Result<EgressRead>> {
    let port_info: Vec<Get> = ports
        .iter()
        .map(|p| Get {
            route: Route::Lid(p.lid),
            attr: Attr::PortInfo,
            modifier: p.port,
        })
        .collect();
    let infos = get_all(umad, &port_info, window, deadline);
    // Phase two: the tables of every Active port, in one batch.
    let mut gets: Vec<Get> = Vec::new();
    let mut plans: Vec<Result<Plan>> = Vec::new();
    for ((p, info), in_ports) in ports.iter().zip(infos).zip(ins) {
        plans.push(info.and_then(|d| {
            let pi = mad::port_info(&d).map_err(|e| {
                Error::Fabric(format!("SMP portinfo {} {} ({} {}): {e}", p.lid, p.port, p.kind.as_str(), p.name))
            })?;
            let active = pi.link_state == "Active";
            if active {
                let rows: Vec<u32> = if p.kind == NodeType::Switch { in_ports.clone() } else { vec![0] };
                for &i in &rows {
                    gets.push(Get {
                        route: Route::Lid(p.lid),
                        attr: Attr::SlToVl,
                        modifier: if p.kind == NodeType::Switch { mad::sl2vl_modifier(i, p.port) } else { 0 },
                    });
                }
                for (blocks, cap) in [(mad::VLARB_LOW, pi.vlarb_low_cap), (mad::VLARB_HIGH, pi.vlarb_high_cap)] {
                    for (k, block) in blocks.into_iter().enumerate() {
                        if usize::from(cap) > 32 * k {
                            gets.push(Get {
                                route: Route::Lid(p.lid),
                                attr: Attr::VlArbitration,
                                modifier: mad::vlarb_modifier(block, p.port),
                            });
                        }
                    }
                }
                return Ok(Plan { active, oper_vls: pi.oper_vls, rows, caps: (pi.vlarb_low_cap, pi.vlarb_high_cap)});
            }
            Ok(Plan { active, oper_vls: pi.oper_vls, rows: Vec::new(), caps: (0, 0) })
        }));
    }
    let mut answers = get_all(umad, &gets, window, deadline).into_iter();
    plans
        .into_iter()
        .map(|plan| {
            let plan = plan?;
            let mut rows = Vec::with_capacity(plan.rows.len());
            let mut failed = None;
            for i in &plan.rows {
                match answers.next().unwrap_or_else(|| Err(Error::Internal("an SL2VL answer is missing".into()))) {
                    Ok(d) => rows.push((*i, mad::sl2vl(&d))),
                    Err(e) => failed = failed.or(Some(e)),
                }
            }
            let vlarb = if plan.active { vlarb(&mut answers, plan.caps) } else { Ok(VlArbState::Unavailable("link not Active".into())) };
            if let Some(e) = failed {
                return Err(e);
            }
            Ok(EgressRead { active: plan.active, oper_vls: plan.oper_vls, rows, vlarb: vlarb? })
        })
        .collect()
}

/// What phase two asks of one port.
struct Plan {
    active: bool,
    oper_vls: super::tables::VlRange,
    rows: Vec<u32>,
    caps: (u8, u8),
}

/// The VLArb tables from a port's blocks, as the `smpquery` path keeps them:
/// a failed block is recorded (`Unavailable`), a deadline gives up the port.
fn vlarb(answers: &mut impl Iterator<Item = Result<[u8; DATA_SIZE]>>, (low, high): (u8, u8)) -> Result<VlArbState> {
    let mut out = VlArb::default();
    let mut problem: Option<Error> = None;
    for (cap, table) in [(low, &mut out.low), (high, &mut out.high)] {
        let cap = usize::from(cap);
        for k in 0..2 {
            if cap <= 32 * k {
                continue;
            }
            match answers.next().unwrap_or_else(|| Err(Error::Internal("a VLArb answer is missing".into()))) {
                Ok(d) => table.extend(mad::vlarb_block(&d, cap - 32 * k)),
                Err(e) => problem = problem.or(Some(e)),
            }
        }
    }
    match problem {
        Some(e @ Error::Deadline { .. }) => Err(e),
        Some(e) => Ok(VlArbState::Unavailable(e.to_string())),
        None => Ok(VlArbState::Read(out)),
    }
}
