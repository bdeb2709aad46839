//! `health`'s first hop at a bounded cost per leaf. Every node under a leaf
//! reads that leaf, and most of what it reads (each output port's PortInfo
//! and VL arbitration tables, the switch's name and LID) is the same for all
//! of them; only the SL2VL row of the node's own in port is its own. So a
//! `health` run reads in process, through libibumad, only what is its own —
//! NodeInfo (still the same switch, the same in port?) and the SL2VL row
//! (in = this node's switch port, out) of each output port the last full
//! reading found Active: 1 + Active ports SMP Gets — and takes the rest from
//! its own last full reading ([`Carried`], `/run/qoslane/first-hop.json`).
//! A full reading — in process too (`read.rs`' `in_process`: each table
//! once, 3 + (ports − 1) + 3 × Active ports Gets), else by smpquery — is
//! taken once per [`FULL_READ_PERIOD_MS`], at a point of that period fixed by the port's
//! GUID ([`full_read_due`]), so the nodes of a leaf take theirs at different
//! times; and at once whenever the carried one does not stand for the port
//! (none, another port identity, another switch or in port, a row that
//! could not be read). Where the port cannot be opened in process (no
//! libibumad, no umad device, not root) every run reads in full by
//! smpquery, as `sync`.
//!
//! The rows are what a drift behind the SM's back changes (a switch's SL2VL
//! written by SMP Set, a reset switch's power-on table): they are read on
//! every run. What is carried is at most one period and one health interval
//! old; the grant record says so (its first-hop time is the full reading's),
//! and the Prolog trusts it for [`crate::grant::MAX_RECORD_AGE_MS`].
//!
//! Where the port opens in process, each run also reads the transmit wait
//! of the switch port toward this node (its in port): one PMA Get, how long
//! each VL had data for this node and could not send it
//! ([`Scheduled::take_waits`]; `health`'s `qoslane_xmit_wait_ticks_total`).
//!
//! [`Scheduled`] is `health`'s [`Reader`]: the own ports and a full reading
//! by the smpquery reader, the rows, full readings and the wait by the
//! in-process one ([`InProcess`]), each read through the reader trait. The
//! ports it opened stay open for the run's counters
//! ([`Scheduled::take_opened`]): each port opened once per run.

use std::cell::RefCell;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::counters::pma::PortWait;
use crate::fabric::counters::wait::WaitPort;
use crate::fabric::read::in_process::InProcess;
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smpquery::Smpquery;
use crate::fabric::tables::{FirstHop, NodeType, PortId, PortIdentity, PortTables};
use crate::paths::Paths;
use crate::state::fsutil;

/// How often a node reads its first hop in full: with a health interval of
/// at most 300 s (what the probe cache needs anyway), a carried reading is
/// under 240 + 300 s old, inside the grant record's 600 s.
pub const FULL_READ_PERIOD_MS: u64 = 240_000;

/// SMP Gets in flight at once for one first hop.
const WINDOW: usize = 16;

/// Bumped when the layout changes; another version is read in full again.
const VERSION: u32 = 1;

/// A port's last full reading of its first hop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Carried {
    pub port: PortId,
    pub identity: PortIdentity,
    /// When it was read: milliseconds since the Unix epoch.
    pub read_at_ms: u64,
    /// As read (`FirstHop::Read`).
    pub hop: FirstHop,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CarryFile {
    version: u32,
    ports: Vec<Carried>,
}

/// Whether a port whose last full reading was at `read_at_ms` reads in full
/// now: when that reading is a period old, or when the point of the period
/// its `guid` fixes has passed since. Each port reads in full once per
/// period, the ports of a leaf spread over it.
pub fn full_read_due(guid: &str, read_at_ms: u64, now_ms: u64) -> bool {
    let p = FULL_READ_PERIOD_MS;
    if now_ms < read_at_ms || now_ms - read_at_ms >= p {
        return true;
    }
    // FNV-1a of the GUID: the same point on every run, any GUID alike.
    let phase = guid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) % p;
    let slot = |t: u64| (t + p - phase) / p;
    slot(now_ms) != slot(read_at_ms)
}

/// The [`Reader`] of a `health` run: the own ports by `smpquery`, the first
/// hop shared as the module says. [`Scheduled::store`] keeps what it read
/// in full for the next run.
#[derive(Debug)]
pub struct Scheduled<'a> {
    smp: &'a Smpquery,
    now_ms: u64,
    carried: Mutex<Vec<Carried>>,
    /// Whether a full reading (or its absence) changed what is carried.
    changed: std::sync::atomic::AtomicBool,
    /// The transmit wait of each first hop's port toward this node.
    waits: Mutex<Vec<PortWait>>,
    /// The node's ports opened in process this run, kept open for the
    /// run's counters.
    opened: RefCell<Vec<(PortId, InProcess)>>,
}

impl<'a> Scheduled<'a> {
    /// With the carried readings of `paths` (none when they cannot be read:
    /// the first hop is then read in full).
    pub fn new(smp: &'a Smpquery, paths: &Paths) -> Self {
        let carried = fsutil::read_trusted(paths, &paths.first_hop_reading())
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_slice::<CarryFile>(&t).ok())
            .filter(|f| f.version == VERSION)
            .map(|f| f.ports)
            .unwrap_or_default();
        Self {
            smp,
            now_ms: crate::time::now_ms(),
            carried: Mutex::new(carried),
            changed: std::sync::atomic::AtomicBool::new(false),
            waits: Mutex::new(Vec::new()),
            opened: RefCell::new(Vec::new()),
        }
    }

    /// The node's ports this run opened in process, still open: the
    /// counters read through them (`own_counters::read`) rather than
    /// opening each port a second time.
    pub fn take_opened(&self) -> Vec<(PortId, InProcess)> {
        std::mem::take(&mut *self.opened.borrow_mut())
    }

    /// The transmit wait this run read at each first hop's port toward
    /// this node (switch name, LID, in port; all 16 VLs), those that answered.
    pub fn take_waits(&self) -> Vec<PortWait> {
        std::mem::take(
            &mut *self
                .waits
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// One PMA Get: PortVLXmitWait of the switch port that sends to this
    /// node. A switch that does not answer it is left out (nothing to count).
    fn read_wait(&self, in_process: &InProcess, hop: &FirstHop, deadline: &Deadline) {
        let FirstHop::Read {
            switch, in_port, ..
        } = hop
        else {
            return;
        };
        let port = WaitPort {
            kind: NodeType::Switch,
            name: switch.name.clone(),
            lid: switch.lid,
            port: *in_port,
            sl2vl: None,
        };
        let (read, _unanswered) = in_process.xmit_wait(std::slice::from_ref(&port), deadline);
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(read.into_iter().filter(|w| w.values().is_some()));
    }

    /// Writes the readings for the next run (`/run/qoslane/first-hop.json`)
    /// when this run read any in full.
    pub fn store(self, paths: &Paths) -> Result<()> {
        if !self.changed.into_inner() {
            return Ok(());
        }
        let ports = self
            .carried
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        fsutil::ensure_dir(paths, &paths.run_dir)?;
        let mut body = serde_json::to_vec(&CarryFile {
            version: VERSION,
            ports,
        })
        .map_err(|e| Error::Internal(format!("serialize first-hop readings: {e}")))?;
        body.push(b'\n');
        let _visible = fsutil::atomic_replace(
            paths,
            &paths.first_hop_reading(),
            &body,
            crate::state::PUBLIC,
        )?;
        Ok(())
    }

    fn carried_for(&self, port: &PortId, identity: &PortIdentity) -> Option<Carried> {
        self.carried
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|c| c.port == *port && c.identity == *identity)
            .cloned()
    }

    fn keep(&self, port: &PortId, fresh: Option<Carried>) {
        let mut all = self
            .carried
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.retain(|c| c.port != *port);
        all.extend(fresh);
        self.changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Reader for Scheduled<'_> {
    fn name(&self) -> &'static str {
        self.smp.name()
    }

    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables> {
        self.smp.probe(port, deadline)
    }

    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        self.smp.probe_many(ports, deadline)
    }

    fn first_hop(&self, port: &PortId, deadline: &Deadline) -> FirstHop {
        self.smp.first_hop(port, deadline)
    }

    fn first_hop_at(
        &self,
        port: &PortId,
        identity: &PortIdentity,
        deadline: &Deadline,
    ) -> (FirstHop, Option<u64>) {
        let taken = {
            let mut opened = self.opened.borrow_mut();
            opened
                .iter()
                .position(|(p, _)| p == port)
                .map(|i| opened.swap_remove(i).1)
        };
        let in_process = taken.or_else(|| InProcess::open(Some(port), WINDOW).ok());
        let (hop, at) = self.hop_at(in_process.as_ref(), port, identity, deadline);
        if let Some(in_process) = in_process {
            self.read_wait(&in_process, &hop, deadline);
            self.opened.borrow_mut().push((port.clone(), in_process));
        }
        (hop, at)
    }
}

impl Scheduled<'_> {
    /// [`Reader::first_hop_at`]'s tables: the own rows on the carried reading
    /// when it stands, else a full reading (kept for the next run).
    fn hop_at(
        &self,
        in_process: Option<&InProcess>,
        port: &PortId,
        identity: &PortIdentity,
        deadline: &Deadline,
    ) -> (FirstHop, Option<u64>) {
        if let Some(reader) = in_process
            && let Some(c) = self.carried_for(port, identity)
            && !full_read_due(&identity.node_guid, c.read_at_ms, self.now_ms)
            && let Ok(hop) = reader.first_hop_rows(&c.hop, deadline)
        {
            return (hop, Some(c.read_at_ms));
        }
        // In full: in process, else (no umad, a switch without a LID yet)
        // by smpquery.
        let hop = match in_process.map(|r| r.read_first_hop(port, deadline)) {
            Some(Ok(hop)) => hop,
            Some(Err(e @ Error::Deadline { .. })) => FirstHop::Unavailable {
                error: format!("{port}: first hop: {e}"),
            },
            Some(Err(_)) | None => self.smp.first_hop(port, deadline),
        };
        // Kept for the next run's rows, which need the port in process.
        if in_process.is_some() {
            let fresh = matches!(hop, FirstHop::Read { .. }).then(|| Carried {
                port: port.clone(),
                identity: identity.clone(),
                read_at_ms: self.now_ms,
                hop: hop.clone(),
            });
            self.keep(port, fresh);
        }
        (hop, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUID: &str = "0x0002c90300440320";

    #[test]
    fn a_reading_a_period_old_or_from_the_future_is_read_again() {
        let t = 1_800_000_000_000;
        assert!(full_read_due(GUID, t, t + FULL_READ_PERIOD_MS));
        assert!(full_read_due(GUID, t, t - 1), "clock stepped back");
        assert!(!full_read_due(GUID, t, t), "just read");
    }

    /// Health every `interval_s` on many ports: each reads in full once per
    /// period (never a reading older than a period and an interval), and
    /// the full readings of the ports are spread over the period.
    #[test]
    fn each_port_reads_in_full_once_per_period_spread_over_it() {
        let interval = 120_000;
        let start = 1_800_000_000_000_u64;
        let guids: Vec<String> = (0..200)
            .map(|i| format!("0x0002c903004403{i:02x}"))
            .collect();
        let runs = 100;
        let mut per_run = vec![0_u32; runs];
        for g in &guids {
            let mut read_at = start;
            let mut fulls = 0;
            for (k, slot) in per_run.iter_mut().enumerate().skip(1) {
                let now = start + interval * u64::try_from(k).unwrap();
                if full_read_due(g, read_at, now) {
                    assert!(now - read_at <= FULL_READ_PERIOD_MS + interval);
                    read_at = now;
                    fulls += 1;
                    *slot += 1;
                } else {
                    assert!(now - read_at < FULL_READ_PERIOD_MS);
                }
            }
            // 99 runs of 120 s: 49.5 periods of 240 s.
            assert!((49..=50).contains(&fulls), "{g}: {fulls} full readings");
        }
        // 200 ports, half of them per 120 s run: no run far from 100.
        for (k, n) in per_run.iter().enumerate().skip(2) {
            assert!((60..=140).contains(n), "run {k}: {n} of 200 read in full");
        }
    }
}
