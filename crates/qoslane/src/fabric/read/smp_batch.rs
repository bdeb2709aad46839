//! SMP Gets in process, many at once: [`get_all`] keeps a window of Gets in
//! flight on one [`Umad`] port, matches each answer to its Get by
//! transaction id, retries a Get left unanswered, and gives up what is still
//! unanswered at the run's deadline. [`read_egress`] is the audit's read of
//! every egress port with it: PortInfo of every port, then the SL2VL rows
//! and VLArb blocks of the Active ones, each table once, into the same
//! [`EgressRead`] the `smpquery` path produces.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::read::mad::{self, Attr, AttrData, Get, PmaData, Route, SmpData};
use crate::fabric::read::umad::{Received, Umad};
use crate::fabric::tables::{EgressPort, EgressRead, NodeType, VlArb, VlArbState};

/// How long one Get waits for its answer before it is sent again.
pub const ANSWER_WAIT: Duration = Duration::from_secs(1);
/// How often a Get is sent before it is given up (as `smpquery`: 1 + 3).
pub const ATTEMPTS: u32 = 4;

/// One Get in flight.
struct Pending {
    index: usize,
    sent: Instant,
    attempt: u32,
}

/// The Gets of one [`get_all`]: what is in flight, what came back (the
/// attribute data of the Gets' class, `D`).
struct Flight<'a, D> {
    umad: &'a mut Umad,
    gets: &'a [Get],
    results: Vec<Option<Result<D>>>,
    /// By the low half of the transaction id (the kernel owns the high half).
    pending: HashMap<u32, Pending>,
    /// Where the second lane's Gets start (`gets.len()`: one lane), and how
    /// many of them are in flight.
    second: usize,
    in_second: usize,
}

/// The low half of the next transaction id: unique across batches, so a
/// late answer to an earlier batch never matches a Get of this one.
static NEXT_TID: AtomicU32 = AtomicU32::new(1);

/// MADs (SMP and PMA Gets, first sends and retries) this process sent:
/// what `fabric watch` reports per re-audit (the difference around it).
static SENT: AtomicU64 = AtomicU64::new(0);

/// MADs sent by this process so far.
pub fn sent() -> u64 {
    SENT.load(Ordering::Relaxed)
}

/// The kinds of MAD [`sent_by_kind`] counts apart (the audit's cost by
/// table), in its order.
pub const KINDS: [&str; 6] = ["portinfo", "sl2vl", "vlarb", "lft", "pathrecord", "other"];

/// MADs sent so far per [`KINDS`] entry (first sends and retries).
static SENT_BY: [AtomicU64; KINDS.len()] = [const { AtomicU64::new(0) }; KINDS.len()];

/// The [`KINDS`] slot of an attribute.
fn kind_of(attr: Attr) -> usize {
    match attr {
        Attr::PortInfo => 0,
        Attr::SlToVl => 1,
        Attr::VlArbitration => 2,
        Attr::LinearForwarding => 3,
        Attr::PathRecord | Attr::PathRecordBy(_) => 4,
        _ => 5,
    }
}

/// MADs sent by this process so far, per [`KINDS`] entry.
pub fn sent_by_kind() -> [u64; KINDS.len()] {
    std::array::from_fn(|i| SENT_BY[i].load(Ordering::Relaxed))
}

impl<D: AttrData> Flight<'_, D> {
    fn fail(&self, index: usize, e: impl std::fmt::Display) -> Error {
        Error::Fabric(format!("{}: {e}", self.gets[index]))
    }

    fn send(&mut self, index: usize, attempt: u32) {
        let tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
        let get = &self.gets[index];
        let wait_ms = i32::try_from(ANSWER_WAIT.as_millis()).unwrap_or(1000);
        let sent = mad::encode_get(get, u64::from(tid))
            .map_err(|e| e.to_string())
            .and_then(|m| {
                self.umad
                    .send(get.route.dlid(), get.route.class(), &m, wait_ms)
            });
        match sent {
            Ok(()) => {
                SENT.fetch_add(1, Ordering::Relaxed);
                SENT_BY[kind_of(get.attr)].fetch_add(1, Ordering::Relaxed);
                let p = Pending {
                    index,
                    sent: Instant::now(),
                    attempt,
                };
                self.in_second += usize::from(index >= self.second);
                self.pending.insert(tid, p);
            }
            Err(e) => self.results[index] = Some(Err(self.fail(index, e))),
        }
    }

    /// The Get in flight under transaction id `t`, no longer in flight.
    fn take(&mut self, t: u32) -> Option<Pending> {
        let p = self.pending.remove(&t)?;
        self.in_second -= usize::from(p.index >= self.second);
        Some(p)
    }

    /// Unanswered: sent again, or given up after [`ATTEMPTS`].
    fn again(&mut self, p: Pending) {
        if p.attempt >= ATTEMPTS {
            let e = self.fail(
                p.index,
                format!(
                    "no answer ({ATTEMPTS} tries, {} ms each)",
                    ANSWER_WAIT.as_millis()
                ),
            );
            self.results[p.index] = Some(Err(e));
        } else {
            self.send(p.index, p.attempt + 1);
        }
    }

    fn answered(&mut self, got: &Received) {
        let Some(t) = got
            .mad
            .get(12..16)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return;
        };
        // Not ours, or a late answer to a Get sent again: ignored.
        let Some(p) = self.take(t) else {
            return;
        };
        if got.status != 0 {
            // The kernel gave the request back unanswered.
            return self.again(p);
        }
        let get = &self.gets[p.index];
        let data = mad::decode_answer::<D>(&got.mad).and_then(|a| {
            if a.attr_id == get.attr.id() && a.modifier == get.wire_modifier() {
                Ok(a.data)
            } else {
                Err(mad::MadError(format!(
                    "the answer is for attribute {:#06x} modifier {:#x}",
                    a.attr_id, a.modifier
                )))
            }
        });
        self.results[p.index] = Some(data.map_err(|e| self.fail(p.index, e)));
    }

    /// Gets unanswered for [`ANSWER_WAIT`]: again, or given up.
    fn expire(&mut self) {
        let now = Instant::now();
        let late: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.sent) >= ANSWER_WAIT)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(p) = self.take(t) {
                self.again(p);
            }
        }
    }

    /// When the next Get in flight is due.
    fn due(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.sent + ANSWER_WAIT).min()
    }
}

/// The attribute data of each SMP (or SA) Get, in order, or why not. At
/// most `window` Gets are in flight at once; what is unanswered at the
/// deadline is a deadline error.
pub fn get_all(
    umad: &mut Umad,
    gets: &[Get],
    window: usize,
    deadline: &Deadline,
) -> Vec<Result<SmpData>> {
    get_all_of(umad, gets, (window, gets.len(), 0), deadline)
}

/// [`get_all`] of PMA Gets: each answer's whole 192-byte data area.
pub fn get_all_pma(
    umad: &mut Umad,
    gets: &[Get],
    window: usize,
    deadline: &Deadline,
) -> Vec<Result<PmaData>> {
    get_all_of(umad, gets, (window, gets.len(), 0), deadline)
}

/// `gets` in two lanes of one flight: those before `second` at most
/// `window` in flight, those from it at most `window2` beside them (the
/// SA's path records during the egress read: a slow SA answer holds no
/// slot of the SMPs).
fn get_all_of<D: AttrData>(
    umad: &mut Umad,
    gets: &[Get],
    (window, second, window2): (usize, usize, usize),
    deadline: &Deadline,
) -> Vec<Result<D>> {
    let mut f = Flight {
        umad,
        gets,
        results: gets.iter().map(|_| None).collect(),
        pending: HashMap::new(),
        second,
        in_second: 0,
    };
    let mut next = 0usize;
    let mut next2 = second;
    loop {
        while f.pending.len() - f.in_second < window.max(1) && next < second {
            f.send(next, 1);
            next += 1;
        }
        while f.in_second < window2.max(1) && next2 < gets.len() {
            f.send(next2, 1);
            next2 += 1;
        }
        let Some(due) = f.due() else { break };
        if deadline.remaining().is_zero() {
            let left = f
                .pending
                .drain()
                .map(|(_, p)| p.index)
                .chain(next..second)
                .chain(next2..gets.len());
            for i in left.collect::<Vec<_>>() {
                f.results[i] = Some(Err(deadline.passed(gets[i].to_string())));
            }
            break;
        }
        let until = due.min(deadline.instant());
        let wait = until.saturating_duration_since(Instant::now()).as_millis();
        match f.umad.recv(i32::try_from(wait).unwrap_or(1000)) {
            Err(e) => {
                f.in_second = 0;
                for p in f.pending.drain().map(|(_, p)| p).collect::<Vec<_>>() {
                    f.results[p.index] = Some(Err(f.fail(p.index, &e)));
                }
            }
            Ok(Some(got)) => f.answered(&got),
            Ok(None) => {}
        }
        f.expire();
    }
    f.results
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
    read_egress_beside(umad, ports, ins, window, (&[], 1), deadline).0
}

/// [`read_egress`] with `beside` (SA Gets: the path records, which do
/// not depend on it) in flight during its longest phase, at most
/// `beside_window` of them beside its own: each port's reading, and each of
/// `beside`'s answers in order.
pub fn read_egress_beside(
    umad: &mut Umad,
    ports: &[EgressPort],
    ins: &[Vec<u32>],
    window: usize,
    (beside, beside_window): (&[Get], usize),
    deadline: &Deadline,
) -> (Vec<Result<EgressRead>>, Vec<Result<SmpData>>) {
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
    let plans: Vec<Result<Plan>> = ports
        .iter()
        .zip(infos)
        .zip(ins)
        .map(|((p, info), in_ports)| plan(p, in_ports, &info?, &mut gets))
        .collect();
    let own = gets.len();
    gets.extend_from_slice(beside);
    let mut answers = get_all_of(umad, &gets, (window, own, beside_window), deadline).into_iter();
    let read = plans
        .into_iter()
        .map(|plan| assemble(plan?, &mut answers))
        .collect();
    (read, answers.collect())
}

/// What to read of a port after its PortInfo; the Gets go to `gets`.
fn plan(p: &EgressPort, in_ports: &[u32], info: &SmpData, gets: &mut Vec<Get>) -> Result<Plan> {
    let pi = mad::port_info(info).map_err(|e| {
        Error::Fabric(format!(
            "SMP portinfo {} {} ({} {}): {e}",
            p.lid,
            p.port,
            p.kind.as_str(),
            p.name
        ))
    })?;
    if pi.link_state != "Active" {
        return Ok(Plan {
            active: false,
            oper_vls: pi.oper_vls,
            rows: Vec::new(),
            caps: (0, 0),
        });
    }
    let switch = p.kind == NodeType::Switch;
    let rows: Vec<u32> = if switch { in_ports.to_vec() } else { vec![0] };
    for &i in &rows {
        gets.push(Get {
            route: Route::Lid(p.lid),
            attr: Attr::SlToVl,
            // An HCA port has one table (modifier 0).
            modifier: if switch {
                mad::sl2vl_modifier(i, p.port)
            } else {
                0
            },
        });
    }
    for (blocks, cap) in [
        (mad::VLARB_LOW, pi.vlarb_low_cap),
        (mad::VLARB_HIGH, pi.vlarb_high_cap),
    ] {
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
    Ok(Plan {
        active: true,
        oper_vls: pi.oper_vls,
        rows,
        caps: (pi.vlarb_low_cap, pi.vlarb_high_cap),
    })
}

/// A port as read, from its share of phase two's answers (taken in the
/// order [`plan`] asked).
fn assemble(plan: Plan, answers: &mut impl Iterator<Item = Result<SmpData>>) -> Result<EgressRead> {
    let mut rows = Vec::with_capacity(plan.rows.len());
    let mut failed = None;
    for i in &plan.rows {
        match answers
            .next()
            .unwrap_or_else(|| Err(Error::Internal("an SL2VL answer is missing".into())))
        {
            Ok(d) => rows.push((*i, mad::sl2vl(&d))),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let vlarb = if plan.active {
        vlarb(answers, plan.caps)
    } else {
        Ok(VlArbState::Unavailable("link not Active".into()))
    };
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(EgressRead {
        active: plan.active,
        oper_vls: plan.oper_vls,
        rows,
        vlarb: vlarb?,
    })
}

/// What phase two asks of one port.
struct Plan {
    active: bool,
    oper_vls: crate::fabric::tables::VlRange,
    rows: Vec<u32>,
    caps: (u8, u8),
}

/// The VLArb tables from a port's blocks, as the `smpquery` path keeps them:
/// a failed block is recorded (`Unavailable`), a deadline gives up the port.
fn vlarb(
    answers: &mut impl Iterator<Item = Result<SmpData>>,
    (low, high): (u8, u8),
) -> Result<VlArbState> {
    let mut out = VlArb::default();
    let mut problem: Option<Error> = None;
    for (cap, table) in [(low, &mut out.low), (high, &mut out.high)] {
        let cap = usize::from(cap);
        for k in 0..2 {
            if cap <= 32 * k {
                continue;
            }
            match answers
                .next()
                .unwrap_or_else(|| Err(Error::Internal("a VLArb answer is missing".into())))
            {
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
