//! SMP Gets in process, many at once: [`get_all`] keeps Gets in flight on
//! one [`Umad`] port — at most `window` to any one destination LID, the
//! destinations taken in turn, and at most [`IN_FLIGHT`] in all —, takes
//! every answer already come without waiting (one blocking receive only
//! when none has), matches each answer to its Get by transaction id,
//! retries a Get left unanswered, and gives up what is still unanswered at
//! the run's deadline. [`read_egress`] is the audit's read of
//! every egress port with it: PortInfo of every port, then the SL2VL rows
//! and VLArb blocks of the Active ones, each table once, into the same
//! [`EgressRead`] the `smpquery` path produces.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::read::mad::{self, Attr, AttrData, Get, MAD_SIZE, PmaData, Route, SmpData};
use crate::fabric::read::umad::Umad;
use crate::fabric::tables::{EgressPort, EgressRead, NodeType, VlArb, VlArbState};

mod turns;
use turns::Turns;

/// How long one Get waits for its answer before it is sent again.
pub const ANSWER_WAIT: Duration = Duration::from_secs(1);
/// How often a Get is sent before it is given up (as `smpquery`: 1 + 3).
pub const ATTEMPTS: u32 = 4;

/// One Get in flight.
struct Pending {
    index: usize,
    attempt: u32,
}

/// The Gets of one [`get_all`]: what is in flight, what came back (the
/// attribute data of the Gets' class, `D`).
struct Flight<'a, D> {
    gets: &'a [Get],
    results: Vec<Option<Result<D>>>,
    /// By the low half of the transaction id (the kernel owns the high half).
    pending: HashMap<u32, Pending>,
    /// The transaction ids in flight and when each was sent, in the order
    /// they were sent (an answered one is dropped when it reaches the
    /// front): the front's is the oldest Get in flight, the next due.
    sent: VecDeque<(u32, Instant)>,
    /// The first lane's Gets (those before `second`), taken in turn.
    turns: Turns,
    /// Where the second lane's Gets start (`gets.len()`: one lane), and how
    /// many of them are started and not finished.
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

/// Gets in flight at once on a port, whatever their destinations (the
/// window is per destination LID): enough to keep the other end busy
/// while this process waits to run on a loaded machine, within the
/// kernel's MAD send queue (`ib_mad`'s `send_queue_size`, 128) so none
/// waits in its overflow list.
pub const IN_FLIGHT: usize = 128;

impl<D: AttrData> Flight<'_, D> {
    fn fail(&self, index: usize, e: impl std::fmt::Display) -> Error {
        Error::Fabric(format!("{}: {e}", self.gets[index]))
    }

    /// Get `index`'s result: its destination has room again.
    fn finish(&mut self, index: usize, r: Result<D>) {
        self.results[index] = Some(r);
        if index < self.second {
            self.turns.done(index);
        } else {
            self.in_second -= 1;
        }
    }

    fn send(&mut self, umad: &mut Umad, index: usize, attempt: u32) {
        let tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
        let get = &self.gets[index];
        let wait_ms = i32::try_from(ANSWER_WAIT.as_millis()).unwrap_or(1000);
        let sent = mad::encode_get(get, u64::from(tid))
            .map_err(|e| e.to_string())
            .and_then(|m| umad.send(get.route.dlid(), get.route.class(), &m, wait_ms));
        match sent {
            Ok(()) => {
                SENT.fetch_add(1, Ordering::Relaxed);
                SENT_BY[kind_of(get.attr)].fetch_add(1, Ordering::Relaxed);
                self.pending.insert(tid, Pending { index, attempt });
                self.sent.push_back((tid, Instant::now()));
            }
            Err(e) => {
                let e = self.fail(index, e);
                self.finish(index, Err(e));
            }
        }
    }

    /// Unanswered: sent again, or given up after [`ATTEMPTS`].
    fn again(&mut self, umad: &mut Umad, p: Pending) {
        if p.attempt >= ATTEMPTS {
            let e = self.fail(
                p.index,
                format!(
                    "no answer ({ATTEMPTS} tries, {} ms each)",
                    ANSWER_WAIT.as_millis()
                ),
            );
            self.finish(p.index, Err(e));
        } else {
            self.send(umad, p.index, p.attempt + 1);
        }
    }

    /// A MAD received (`status`: the kernel's), matched to its Get by
    /// transaction id; one of no Get in flight (not ours, or a late answer
    /// to a Get sent again) is ignored. A request the kernel gave back
    /// unanswered is sent again.
    fn answered(&mut self, umad: &mut Umad, status: i32, mad: &[u8]) {
        let Some(t) = mad
            .get(12..16)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return;
        };
        let Some(p) = self.pending.remove(&t) else {
            return;
        };
        if status != 0 {
            return self.again(umad, p);
        }
        let get = &self.gets[p.index];
        let data = mad::decode_answer::<D>(mad).and_then(|a| {
            if a.attr_id == get.attr.id() && a.modifier == get.wire_modifier() {
                Ok(a.data)
            } else {
                Err(mad::MadError(format!(
                    "the answer is for attribute {:#06x} modifier {:#x}",
                    a.attr_id, a.modifier
                )))
            }
        });
        let r = data.map_err(|e| self.fail(p.index, e));
        self.finish(p.index, r);
    }

    /// The oldest Get in flight: its transaction id and when it was sent
    /// (the answered ones before it dropped).
    fn oldest(&mut self) -> Option<(u32, Instant)> {
        while let Some(&(t, at)) = self.sent.front() {
            if self.pending.contains_key(&t) {
                return Some((t, at));
            }
            self.sent.pop_front();
        }
        None
    }

    /// Gets unanswered for [`ANSWER_WAIT`]: again, or given up.
    fn expire(&mut self, umad: &mut Umad) {
        let now = Instant::now();
        while let Some((t, at)) = self.oldest() {
            if now.duration_since(at) < ANSWER_WAIT {
                break;
            }
            self.sent.pop_front();
            if let Some(p) = self.pending.remove(&t) {
                self.again(umad, p);
            }
        }
    }

    /// Every MAD already received, without waiting: how many, or the
    /// receive's error.
    fn drain(&mut self, umad: &mut Umad) -> std::result::Result<usize, String> {
        let mut n = 0;
        loop {
            let Some(got) = umad.recv(0)? else {
                return Ok(n);
            };
            n += 1;
            let (status, mad) = (got.status, copy_mad(got.mad));
            self.answered(umad, status, &mad);
        }
    }
}

/// A received MAD out of the port's buffer (the port is needed again to
/// send a retry while it is read).
fn copy_mad(mad: &[u8]) -> Mad {
    let mut m = Mad {
        bytes: [0; MAD_SIZE],
        len: mad.len().min(MAD_SIZE),
    };
    m.bytes[..m.len].copy_from_slice(&mad[..m.len]);
    m
}

/// A MAD on the stack: its bytes and length.
struct Mad {
    bytes: [u8; MAD_SIZE],
    len: usize,
}

impl std::ops::Deref for Mad {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The attribute data of each SMP (or SA) Get, in order, or why not. At
/// most `window` Gets are in flight to one destination LID at once (and
/// [`IN_FLIGHT`] in all); what is unanswered at the deadline is a deadline
/// error.
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
    let in_flight = IN_FLIGHT.max(window);
    let mut f = Flight {
        gets,
        results: gets.iter().map(|_| None).collect(),
        pending: HashMap::with_capacity(in_flight.min(gets.len())),
        sent: VecDeque::with_capacity(in_flight.min(gets.len())),
        turns: Turns::new(&gets[..second], window),
        second,
        in_second: 0,
    };
    let mut next2 = second;
    loop {
        // The first lane's Gets in turn, then the second lane's beside them
        // (its own window; what is in flight of it is `in_second`).
        while f.pending.len().saturating_sub(f.in_second) < in_flight {
            let Some(i) = f.turns.next() else { break };
            f.send(umad, i, 1);
        }
        while f.in_second < window2.max(1) && next2 < gets.len() {
            f.in_second += 1;
            f.send(umad, next2, 1);
            next2 += 1;
        }
        let Some((_, oldest)) = f.oldest() else {
            break;
        };
        if deadline.remaining().is_zero() {
            f.pending.clear();
            for (i, r) in f.results.iter_mut().enumerate() {
                if r.is_none() {
                    *r = Some(Err(deadline.passed(gets[i].to_string())));
                }
            }
            break;
        }
        // Every answer already come; when none has, one wait for the next
        // (until the oldest Get is due or the deadline).
        let received = match f.drain(umad) {
            Ok(0) => {
                let until = (oldest + ANSWER_WAIT).min(deadline.instant());
                let wait = until.saturating_duration_since(Instant::now()).as_millis();
                match umad.recv(i32::try_from(wait).unwrap_or(1000).max(1)) {
                    Ok(Some(got)) => {
                        let (status, mad) = (got.status, copy_mad(got.mad));
                        f.answered(umad, status, &mad);
                        Ok(())
                    }
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = received {
            let left: Vec<usize> = f.pending.drain().map(|(_, p)| p.index).collect();
            for i in left {
                let e = f.fail(i, &e);
                f.finish(i, Err(e));
            }
        }
        f.expire(umad);
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
