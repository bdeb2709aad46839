//! The in-process reader: SMP and PMA Gets through libibumad ([`Umad`]),
//! at most a window of them in flight under one deadline
//! ([`smp_batch`]), on the caller's thread. It reads by LID (the audit's
//! egress ports and their transmit wait, clearing it on request) and by
//! directed route (the first hop, in full or its own rows:
//! `first_hop/read.rs`); the node's own ports are the program reader's.

use std::cell::RefCell;

use crate::deadline::Deadline;
use crate::error::Result;
use crate::fabric::counters::pma::PortWait;
use crate::fabric::counters::wait::{self, WaitPort};
use crate::fabric::first_hop::read as first_hop_read;
use crate::fabric::read::mad::{self, Attr, Get, Route};
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smp_batch;
use crate::fabric::read::umad::Umad;
use crate::fabric::tables::{EgressPort, EgressRead, FirstHop, PortId};

/// A port opened for Gets, and how many may be in flight at once.
#[derive(Debug)]
pub struct InProcess {
    umad: RefCell<Umad>,
    window: usize,
}

impl InProcess {
    /// Opens `via` (the default port when `None`); why not, when it cannot
    /// (no libibumad, no umad device, not root).
    pub fn open(via: Option<&PortId>, window: usize) -> std::result::Result<Self, String> {
        Ok(Self {
            umad: RefCell::new(Umad::open(via)?),
            window: window.max(1),
        })
    }

    /// How many Gets are in flight at once.
    pub fn window(&self) -> usize {
        self.window
    }
}

impl Reader for InProcess {
    fn name(&self) -> &'static str {
        "in-process"
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

    /// The SM's LID from the first source's PortInfo (MasterSMLID), then
    /// one SA PathRecord Get per pair.
    fn path_sls(&self, pairs: &[(u16, u16)], deadline: &Deadline) -> Vec<Result<u8>> {
        let Some(&(first, _)) = pairs.first() else {
            return Vec::new();
        };
        let info = Get {
            route: Route::Lid(first),
            attr: Attr::PortInfo,
            modifier: 0,
        };
        let mut umad = self.umad.borrow_mut();
        let sm = match smp_batch::get_all(&mut umad, &[info], 1, deadline).pop() {
            Some(Ok(d)) => u16::from_be_bytes([d[18], d[19]]),
            Some(Err(e)) => {
                let e = e.to_string();
                return pairs
                    .iter()
                    .map(|_| Err(crate::error::Error::Fabric(format!("the SM's LID: {e}"))))
                    .collect();
            }
            None => return Vec::new(),
        };
        let gets: Vec<Get> = pairs
            .iter()
            .map(|&(s, d)| Get {
                route: Route::Sa(sm),
                attr: Attr::PathRecord,
                modifier: (u32::from(s) << 16) | u32::from(d),
            })
            .collect();
        smp_batch::get_all(&mut umad, &gets, self.window, deadline)
            .into_iter()
            .map(|r| r.map(|d| mad::path_record_sl(&d)))
            .collect()
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
        let answers = smp_batch::get_all(&mut self.umad.borrow_mut(), &gets, self.window, deadline);
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
        let results = smp_batch::get_all(&mut self.umad.borrow_mut(), &sets, self.window, deadline);
        wait::failures(&read, results)
    }
}
