//! The in-process reader: SMP and PMA Gets through libibumad ([`Umad`]),
//! at most a window of them in flight to any one destination LID (and
//! `smp_batch::IN_FLIGHT` in all) under one deadline ([`smp_batch`]), on
//! the caller's thread. It reads by LID (the audit's
//! egress ports and their transmit wait, clearing it on request), by
//! directed route (the first hop, in full or its own rows:
//! `first_hop/read.rs`) and, opened on one of the node's own ports with its
//! LID ([`InProcess::own`]), that port's counters (per-SL data, per-VL
//! wait: [`Reader::port_counters`], a PMA Get each); the node's own ports'
//! tables are the program reader's.

use std::cell::RefCell;
use std::path::Path;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::counters::pma::{Kind, PortWait, Reading};
use crate::fabric::counters::wait::{self, WaitPort};
use crate::fabric::first_hop::read as first_hop_read;
use crate::fabric::read::discover;
use crate::fabric::read::mad::{self, Attr, Get, PathKey, PmaData, Route};
use crate::fabric::read::reader::Reader;
use crate::fabric::read::umad::Umad;
use crate::fabric::read::{smp_batch, topology};
use crate::fabric::tables::{EgressPort, EgressRead, FirstHop, PortId, Topology};

/// A port opened for Gets, and how many may be in flight at once to one
/// destination LID.
#[derive(Debug)]
pub struct InProcess {
    umad: RefCell<Umad>,
    window: usize,
    /// The node's own port opened and its LID ([`InProcess::own`]): whose
    /// counters [`Reader::port_counters`] reads.
    own: Option<(PortId, u16)>,
    /// The topology walked in process ([`InProcess::discovering`]), not
    /// by `ibnetdiscover`.
    discovers: bool,
}

impl InProcess {
    /// Opens `via` (the default port when `None`) for SMPs (the agents of
    /// both SMP classes registered; the GMPs' at their first Get); why not,
    /// when it cannot (no libibumad, no umad device, not root).
    pub fn open(via: Option<&PortId>, window: usize) -> std::result::Result<Self, String> {
        Self::open_for(via, window, &[mad::CLASS_LID_ROUTED, mad::CLASS_DIRECTED])
    }

    fn open_for(
        via: Option<&PortId>,
        window: usize,
        classes: &[u8],
    ) -> std::result::Result<Self, String> {
        Ok(Self {
            umad: RefCell::new(Umad::open(via, classes)?),
            window: window.max(1),
            own: None,
            discovers: false,
        })
    }

    /// Opens the node's own `port`, whose LID is `lid`, for its counters
    /// (PMA Gets to its own LID, PortSelect its number; the PMA's agent
    /// the only one registered); why not, as [`InProcess::open`].
    pub fn own(port: &PortId, lid: u16) -> std::result::Result<Self, String> {
        Ok(Self::open_for(Some(port), Kind::ALL.len(), &[mad::CLASS_PERF])?.counting(port, lid))
    }

    /// This opening (of the node's own `port`, whose LID is `lid`) made the
    /// reader of that port's counters too: a run that opened the port for
    /// its first hop reads its counters through it.
    #[must_use]
    pub fn counting(mut self, port: &PortId, lid: u16) -> Self {
        self.own = Some((port.clone(), lid));
        self.window = self.window.max(Kind::ALL.len());
        self
    }

    /// This reader walks the topology itself (`discover.rs`: what
    /// `ibnetdiscover -p` prints, by directed-route Gets through this
    /// port), when nothing ibnetdiscover reads besides the fabric is in
    /// force (`discover::names_in_force`, the caller's to ask).
    #[must_use]
    pub fn discovering(mut self) -> Self {
        self.discovers = true;
        self
    }

    /// How many Gets are in flight at once to one destination LID.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The SM's LID from the first source's PortInfo (MasterSMLID), then
    /// one SA PathRecord Get per (source LID, destination LID, attribute):
    /// the SL of each answer.
    fn path_records(&self, asks: &[(u16, u16, Attr)], deadline: &Deadline) -> Vec<Result<u8>> {
        let gets = match self.path_gets(asks, deadline) {
            Ok(gets) => gets,
            Err(e) => return asks.iter().map(|_| Err(Error::Fabric(e.clone()))).collect(),
        };
        let answers = smp_batch::get_all(&mut self.umad.borrow_mut(), &gets, self.window, deadline);
        path_record_sls(answers)
    }

    /// The SA Gets of [`InProcess::path_records`] (the SM's LID read
    /// first), or why not.
    fn path_gets(
        &self,
        asks: &[(u16, u16, Attr)],
        deadline: &Deadline,
    ) -> std::result::Result<Vec<Get>, String> {
        let Some(&(first, _, _)) = asks.first() else {
            return Ok(Vec::new());
        };
        let info = Get {
            route: Route::Lid(first),
            attr: Attr::PortInfo,
            modifier: 0,
        };
        let mut umad = self.umad.borrow_mut();
        let sm = match smp_batch::get_all(&mut umad, &[info], 1, deadline).pop() {
            Some(Ok(d)) => u16::from_be_bytes([d[18], d[19]]),
            Some(Err(e)) => return Err(format!("the SM's LID: {e}")),
            None => return Ok(Vec::new()),
        };
        Ok(asks
            .iter()
            .map(|&(s, d, attr)| Get {
                route: Route::Sa(sm),
                attr,
                modifier: (u32::from(s) << 16) | u32::from(d),
            })
            .collect())
    }
}

/// SA Gets in flight beside the egress read: few, so the SM's answers
/// are spread over the read (on the simulated fabric the SM shares the
/// cores with the simulator, which answers every SMP; a window of 16 made
/// the read slower by more than the records took after it).
pub const PATHS_BESIDE: usize = 2;

/// The SL of each path record answer.
fn path_record_sls(answers: Vec<Result<mad::SmpData>>) -> Vec<Result<u8>> {
    answers
        .into_iter()
        .map(|r| r.map(|d| mad::path_record_sl(&d)))
        .collect()
}

impl Reader for InProcess {
    fn name(&self) -> &'static str {
        "in-process"
    }

    /// Walked in process when [`InProcess::discovering`]; else
    /// `ibnetdiscover -p`, as every reader.
    fn topology(
        &self,
        ibnetdiscover: &Path,
        via: Option<&PortId>,
        deadline: &Deadline,
    ) -> Result<Topology> {
        if !self.discovers {
            return topology::discover(ibnetdiscover, via, deadline);
        }
        let mut umad = self.umad.borrow_mut();
        let window = self.window;
        discover::walk(
            &mut |gets| smp_batch::get_all(&mut umad, gets, window, deadline),
            true,
        )
    }

    /// In full (`first_hop/read.rs`'s `in_process`, from the port opened);
    /// an error when the switch has no LID yet (the caller reads by
    /// smpquery).
    fn read_first_hop(&self, _port: &PortId, deadline: &Deadline) -> Result<FirstHop> {
        first_hop_read::in_process(&mut self.umad.borrow_mut(), self.window, deadline)
    }

    fn first_hop(&self, port: &PortId, deadline: &Deadline) -> FirstHop {
        self.read_first_hop(port, deadline)
            .unwrap_or_else(|e| FirstHop::Unavailable {
                error: format!("{port}: first hop: {e}"),
            })
    }

    fn first_hop_rows(&self, carried: &FirstHop, deadline: &Deadline) -> Result<FirstHop> {
        first_hop_read::own_rows(&mut self.umad.borrow_mut(), carried, self.window, deadline)
    }

    fn egress(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        deadline: &Deadline,
    ) -> Vec<Result<EgressRead>> {
        smp_batch::read_egress(
            &mut self.umad.borrow_mut(),
            ports,
            ins,
            self.window,
            deadline,
        )
    }

    /// The path records' Gets in flight beside the egress read's, at most
    /// [`PATHS_BESIDE`] of them.
    fn egress_and_paths(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        pairs: &[(u16, u16)],
        deadline: &Deadline,
    ) -> (Vec<Result<EgressRead>>, Vec<Result<u8>>) {
        let asks: Vec<(u16, u16, Attr)> = pairs
            .iter()
            .map(|&(s, d)| (s, d, Attr::PathRecord))
            .collect();
        let (gets, failed) = match self.path_gets(&asks, deadline) {
            Ok(gets) => (gets, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let (read, answers) = smp_batch::read_egress_beside(
            &mut self.umad.borrow_mut(),
            ports,
            ins,
            self.window,
            (&gets, PATHS_BESIDE),
            deadline,
        );
        let sls = match failed {
            Some(e) => asks.iter().map(|_| Err(Error::Fabric(e.clone()))).collect(),
            None => path_record_sls(answers),
        };
        (read, sls)
    }

    /// One SMP Get per block of 64 LIDs per switch.
    fn forwarding(&self, switches: &[u16], top: u16, deadline: &Deadline) -> Vec<Result<Vec<u8>>> {
        let blocks = u32::from(top) / 64 + 1;
        let gets: Vec<Get> = switches
            .iter()
            .flat_map(|&lid| {
                (0..blocks).map(move |b| Get {
                    route: Route::Lid(lid),
                    attr: Attr::LinearForwarding,
                    modifier: b,
                })
            })
            .collect();
        let mut answers =
            smp_batch::get_all(&mut self.umad.borrow_mut(), &gets, self.window, deadline)
                .into_iter();
        switches
            .iter()
            .map(|_| {
                let mut lft = Vec::with_capacity(blocks as usize * 64);
                let mut error = None;
                for a in answers.by_ref().take(blocks as usize) {
                    match a {
                        Ok(d) => lft.extend_from_slice(&d),
                        Err(e) => error = error.or(Some(e)),
                    }
                }
                if let Some(e) = error {
                    return Err(e);
                }
                lft.truncate(usize::from(top) + 1);
                Ok(lft)
            })
            .collect()
    }

    /// One SA PathRecord Get per pair ([`InProcess::path_records`]).
    fn path_sls(&self, pairs: &[(u16, u16)], deadline: &Deadline) -> Vec<Result<u8>> {
        let asks: Vec<(u16, u16, Attr)> = pairs
            .iter()
            .map(|&(s, d)| (s, d, Attr::PathRecord))
            .collect();
        self.path_records(&asks, deadline)
    }

    /// One SA PathRecord Get per query, each carrying its key.
    fn class_sls(&self, queries: &[(u16, u16, PathKey)], deadline: &Deadline) -> Vec<Result<u8>> {
        let asks: Vec<(u16, u16, Attr)> = queries
            .iter()
            .map(|&(s, d, k)| (s, d, Attr::PathRecordBy(k)))
            .collect();
        self.path_records(&asks, deadline)
    }

    /// One PMA Get per (port, attribute) of the port opened
    /// ([`InProcess::own`]); another port is not read. An attribute the
    /// port's agent does not serve while it answers another one of the same
    /// Gets (a MAD status, or no answer: the simulator's for per-SL data)
    /// is `Unsupported`; unanswered at the deadline, `Unread`.
    fn port_counters(&self, asks: &[(&PortId, Kind)], deadline: &Deadline) -> Vec<Reading> {
        let Some((own, lid)) = &self.own else {
            return asks
                .iter()
                .map(|_| Reading::Unread("no port of this node opened in process".into()))
                .collect();
        };
        let mine: Vec<(usize, Kind)> = asks
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| *p == own)
            .map(|(i, (_, k))| (i, *k))
            .collect();
        let gets: Vec<Get> = mine
            .iter()
            .map(|(_, kind)| Get {
                route: Route::Perf(*lid),
                attr: attr_of(*kind),
                modifier: own.port,
            })
            .collect();
        let answers = if *lid == 0 {
            gets.iter()
                .map(|_| Err(Error::Fabric(format!("{own}: no LID yet"))))
                .collect()
        } else {
            smp_batch::get_all_pma(&mut self.umad.borrow_mut(), &gets, self.window, deadline)
        };
        let answered = answers.iter().any(Result::is_ok);
        let mut out: Vec<Reading> = asks
            .iter()
            .map(|(p, _)| Reading::Unread(format!("{p}: not the port opened in process ({own})")))
            .collect();
        for ((i, kind), got) in mine.into_iter().zip(answers) {
            out[i] = reading_of(kind, own.port, got, answered);
        }
        out
    }

    /// One PMA Get per port.
    fn xmit_wait(&self, ports: &[WaitPort], deadline: &Deadline) -> (Vec<PortWait>, Vec<String>) {
        let gets: Vec<Get> = ports
            .iter()
            .map(|p| Get {
                route: Route::Perf(p.lid),
                attr: Attr::VlXmitWait,
                modifier: p.port,
            })
            .collect();
        let answers =
            smp_batch::get_all_pma(&mut self.umad.borrow_mut(), &gets, self.window, deadline);
        let mut errors = Vec::new();
        let waits = ports
            .iter()
            .zip(answers)
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

    /// A PMA Set per port that was read.
    fn clear_xmit_wait(
        &self,
        ports: &[WaitPort],
        waits: &[PortWait],
        deadline: &Deadline,
    ) -> Vec<String> {
        let read = wait::read_ports(ports, waits);
        let sets: Vec<Get> = read
            .iter()
            .map(|p| Get {
                route: Route::Perf(p.lid),
                attr: Attr::VlXmitWaitClear,
                modifier: p.port,
            })
            .collect();
        let results =
            smp_batch::get_all_pma(&mut self.umad.borrow_mut(), &sets, self.window, deadline);
        wait::failures(&read, results)
    }
}

/// The PMA attribute of a counter kind.
fn attr_of(kind: Kind) -> Attr {
    match kind {
        Kind::XmitDataSl => Attr::XmitDataSl,
        Kind::RcvDataSl => Attr::RcvDataSl,
        Kind::VlXmitWait => Attr::VlXmitWait,
    }
}

/// One own-port answer as a reading: its sixteen counters when it is for
/// `port`; a failure other than the deadline is `Unsupported` when the
/// port's agent `answered` another Get of the same read (it serves the
/// class, not this attribute), else why it was not read.
pub fn reading_of(kind: Kind, port: u32, got: Result<PmaData>, answered: bool) -> Reading {
    match got {
        Ok(d) => {
            let (select, values) = match kind {
                Kind::VlXmitWait => mad::vl_xmit_wait(&d),
                Kind::XmitDataSl | Kind::RcvDataSl => mad::data_per_sl(&d),
            };
            if u32::from(select) == port {
                Reading::Values(values)
            } else {
                Reading::Unread(format!(
                    "{}: the answer is for port {select}, not {port}",
                    kind.attribute()
                ))
            }
        }
        Err(e @ Error::Deadline { .. }) => Reading::Unread(e.to_string()),
        Err(_) if answered => Reading::Unsupported,
        Err(e) => Reading::Unread(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(select: u8, sl3: u32) -> PmaData {
        let mut d = [0u8; mad::PMA_DATA_SIZE];
        d[1] = select;
        d[16..20].copy_from_slice(&sl3.to_be_bytes());
        PmaData(d)
    }

    /// An own port's answers: counters for its port; an attribute its agent
    /// does not serve, while it answered another, is unsupported (no error);
    /// nothing answered, or the deadline, is unread.
    #[test]
    fn an_attribute_the_port_does_not_serve_is_unsupported_not_an_error() {
        let mut want = [0u64; 16];
        want[3] = 700;
        assert_eq!(
            reading_of(Kind::XmitDataSl, 1, Ok(answer(1, 700)), true),
            Reading::Values(want)
        );
        assert!(matches!(
            reading_of(Kind::XmitDataSl, 2, Ok(answer(1, 700)), true),
            Reading::Unread(w) if w.contains("for port 1, not 2")
        ));
        let refused = || Err(Error::Fabric("MAD status 0x000c".into()));
        assert_eq!(
            reading_of(Kind::RcvDataSl, 1, refused(), true),
            Reading::Unsupported
        );
        assert!(matches!(
            reading_of(Kind::RcvDataSl, 1, refused(), false),
            Reading::Unread(_)
        ));
        let late = Deadline::after(std::time::Duration::ZERO).passed("PMA Get".to_owned());
        assert!(matches!(
            reading_of(Kind::RcvDataSl, 1, Err(late), true),
            Reading::Unread(_)
        ));
    }
}
