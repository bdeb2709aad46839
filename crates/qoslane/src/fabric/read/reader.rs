//! The one reader trait: every read of the fabric goes through a
//! [`Reader`] — the node's own ports (an assessment), the switch each is
//! cabled to (the first hop), every egress port by LID and its transmit
//! wait (the audit). Its implementations:
//!
//! - [`Smpquery`] (`programs.rs`) and [`Perfquery`] (`perfquery.rs`, the
//!   counters; the smpquery reader's too when it has one): one program per
//!   query, several at once through `exec::run_many` on the caller's
//!   thread;
//! - [`InProcess`] (`in_process.rs`): SMP and PMA Gets through libibumad,
//!   a window of them in flight (`smp_batch.rs`);
//! - `health`'s [`Scheduled`], which takes the first hop from both
//!   (`first_hop/share.rs`); tests put a fake behind it.
//!
//! A reader that cannot read something says so (the defaults below): the
//! in-process reader does not read the node's own ports' tables, and reads
//! their counters only opened on one of them (`InProcess::own`:
//! `own_counters.rs`); the smpquery reader reads no counters without
//! `perfquery`.
//!
//! Per own port, three queries on the local port (`-D … 0`: directed route
//! of length 0), together, so a probe costs one query's latency (10–15 ms
//! each on the simulated fabric):
//!
//! ```text
//! smpquery -C mlx5_0 -P 1 -D sl2vl 0      SL2VL table          (the check)
//! smpquery -C mlx5_0 -P 1 -D portinfo 0   OperVLs, VLCap, ...  (the check)
//! smpquery -C mlx5_0 -P 1 -D vlarb 0      VL arbitration       (a warning)
//! ```
//!
//! [`Smpquery`]: crate::fabric::read::smpquery::Smpquery
//! [`Perfquery`]: crate::fabric::read::perfquery::Perfquery
//! [`InProcess`]: crate::fabric::read::in_process::InProcess
//! [`Scheduled`]: crate::fabric::first_hop::share::Scheduled

use std::path::Path;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::counters::pma::{Kind, PortWait, Reading};
use crate::fabric::counters::wait::WaitPort;
use crate::fabric::read::mad::PathKey;
use crate::fabric::read::topology;
use crate::fabric::tables::{
    EgressPort, EgressRead, FirstHop, PortId, PortIdentity, PortTables, Topology,
};

/// Reads the fabric: what an assessment, the first hop and the audit ask.
pub trait Reader {
    /// As a report names it (`smpquery`, `in-process`).
    fn name(&self) -> &'static str {
        "reader"
    }

    /// The fabric's topology (the audit's map of switches, HCAs and cables):
    /// `ibnetdiscover -p` at `ibnetdiscover`, through `via` when given; every
    /// reader takes it from that one program.
    fn topology(
        &self,
        ibnetdiscover: &Path,
        via: Option<&PortId>,
        deadline: &Deadline,
    ) -> Result<Topology> {
        topology::discover(ibnetdiscover, via, deadline)
    }

    /// One of the node's own ports: its SL→VL table, its PortInfo VL fields
    /// and its VL arbitration tables.
    fn probe(&self, port: &PortId, _deadline: &Deadline) -> Result<PortTables> {
        Err(Error::Fabric(format!(
            "{port}: the {} reader does not read the node's own ports",
            self.name()
        )))
    }

    /// [`Reader::probe`] of several ports (in order); a reader that can ask
    /// them all at once does (smpquery: every query of every port in one
    /// wait).
    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        ports.iter().map(|p| self.probe(p, deadline)).collect()
    }

    /// The switch the port is cabled to (`first_hop/read.rs`).
    fn first_hop(&self, port: &PortId, _deadline: &Deadline) -> FirstHop {
        FirstHop::Unavailable {
            error: format!("{port}: this probe cannot read switches"),
        }
    }

    /// [`Reader::first_hop`], with why it could not be read as an error (a
    /// caller that falls back to another reader tells a deadline from the
    /// rest).
    fn read_first_hop(&self, port: &PortId, _deadline: &Deadline) -> Result<FirstHop> {
        Err(Error::Fabric(format!(
            "{port}: the {} reader cannot read switches",
            self.name()
        )))
    }

    /// [`Reader::first_hop`] of the port with this identity, and when its
    /// oldest table was read if not now (`health`'s shared first hop:
    /// `first_hop/share.rs`).
    fn first_hop_at(
        &self,
        port: &PortId,
        _identity: &PortIdentity,
        deadline: &Deadline,
    ) -> (FirstHop, Option<u64>) {
        (self.first_hop(port, deadline), None)
    }

    /// The first hop as `carried` read it, with the SL2VL row of this
    /// node's in port on each output port read again now; an error when
    /// the switch or the in port is not the one carried, a row cannot be
    /// read, or this reader does not read rows alone.
    fn first_hop_rows(&self, _carried: &FirstHop, _deadline: &Deadline) -> Result<FirstHop> {
        Err(Error::Internal(format!(
            "the {} reader does not read a first hop's rows alone",
            self.name()
        )))
    }

    /// Every egress port by LID (the audit): PortInfo, and for an Active
    /// one its SL2VL rows (`ins[i]`: the in ports of `ports[i]`, a switch's
    /// data ports but the egress; an HCA port has one table) and VLArb.
    fn egress(
        &self,
        ports: &[EgressPort],
        _ins: &[Vec<u32>],
        _deadline: &Deadline,
    ) -> Vec<Result<EgressRead>> {
        ports
            .iter()
            .map(|_| {
                Err(Error::Fabric(format!(
                    "the {} reader does not read ports by LID",
                    self.name()
                )))
            })
            .collect()
    }

    /// [`Reader::egress`] and [`Reader::path_sls`] of `pairs` (which do
    /// not depend on it); a reader that can ask both at once does (in
    /// process: the path records in flight beside the egress read).
    fn egress_and_paths(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        pairs: &[(u16, u16)],
        deadline: &Deadline,
    ) -> (Vec<Result<EgressRead>>, Vec<Result<u8>>) {
        let read = self.egress(ports, ins, deadline);
        (read, self.path_sls(pairs, deadline))
    }

    /// The linear forwarding table of each switch (by LID), LIDs
    /// `0..=top`: the out port of each (`0xFF`: none). The deadlock
    /// check's routes (`judge/deadlock.rs`).
    fn forwarding(
        &self,
        switches: &[u16],
        _top: u16,
        _deadline: &Deadline,
    ) -> Vec<Result<Vec<u8>>> {
        switches
            .iter()
            .map(|_| {
                Err(Error::Fabric(format!(
                    "the {} reader does not read forwarding tables",
                    self.name()
                )))
            })
            .collect()
    }

    /// The SL the SA's path record gives each (source LID, destination
    /// LID) pair, in order (a routing engine that assigns SLs per path:
    /// they differ).
    fn path_sls(&self, pairs: &[(u16, u16)], _deadline: &Deadline) -> Vec<Result<u8>> {
        pairs
            .iter()
            .map(|_| {
                Err(Error::Fabric(format!(
                    "the {} reader does not query path records",
                    self.name()
                )))
            })
            .collect()
    }

    /// The SL the SA's path record gives each (source LID, destination
    /// LID) query carrying a field an SM's QoS policy matches (a level's
    /// `sm_traffic`: `fabric/sweep/sm_classes.rs`), in order.
    fn class_sls(&self, queries: &[(u16, u16, PathKey)], _deadline: &Deadline) -> Vec<Result<u8>> {
        queries
            .iter()
            .map(|_| {
                Err(Error::Fabric(format!(
                    "the {} reader does not query path records",
                    self.name()
                )))
            })
            .collect()
    }

    /// PortVLXmitWait of each port, in order (a port that did not answer:
    /// all `None`), and why some were not read. A reader without counters
    /// reads none: both empty.
    fn xmit_wait(&self, _ports: &[WaitPort], _deadline: &Deadline) -> (Vec<PortWait>, Vec<String>) {
        (Vec::new(), Vec::new())
    }

    /// Clears the wait counters of every port of `waits` that was read;
    /// what could not be cleared, said.
    fn clear_xmit_wait(
        &self,
        _ports: &[WaitPort],
        _waits: &[PortWait],
        _deadline: &Deadline,
    ) -> Vec<String> {
        Vec::new()
    }

    /// The node's own ports' counters: each (port, attribute), in order —
    /// its values, `Unsupported` when the port does not serve it, or why
    /// it was not read.
    fn port_counters(&self, asks: &[(&PortId, Kind)], _deadline: &Deadline) -> Vec<Reading> {
        asks.iter()
            .map(|_| {
                Reading::Unread(format!(
                    "the {} reader does not read the node's ports' counters",
                    self.name()
                ))
            })
            .collect()
    }
}
