//! The probe of this node's HCA ports: the [`Probe`] trait (what an
//! assessment reads of a port, and of the switch it is cabled to) and its
//! implementation by `smpquery` ([`Smpquery`]). A native SMP reader (umad)
//! can replace it behind the same trait; tests put a fake behind it.
//!
//! Per port, three queries on the local port (`-D … 0`: directed route of
//! length 0), concurrently, so a probe costs one query's latency (10–15 ms
//! each on the simulated fabric):
//!
//! ```text
//! smpquery -C mlx5_0 -P 1 -D sl2vl 0      SL2VL table          (the check)
//! smpquery -C mlx5_0 -P 1 -D portinfo 0   OperVLs, VLCap, ...  (the check)
//! smpquery -C mlx5_0 -P 1 -D vlarb 0      VL arbitration       (a warning)
//! ```

use crate::fabric::first_hop;
use crate::fabric::read::parse::{ParseError, parse_portinfo, parse_sl2vl};
use crate::fabric::read::smpquery::{Smpquery, vlarb_state};
use crate::fabric::tables::{FirstHop, PortId, PortIdentity, PortTables};
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// Reads one port's SL→VL table, its PortInfo VL fields and its VL
/// arbitration tables. Called concurrently for several ports.
pub trait Probe: Sync {
    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables>;

    /// [`Probe::probe`] of several ports (in order); a probe that can ask
    /// them all at once does (smpquery: every query of every port in one
    /// wait).
    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        ports.iter().map(|p| self.probe(p, deadline)).collect()
    }

    /// The switch the port is cabled to ([`first_hop_read`]).
    fn first_hop(&self, port: &PortId, _deadline: &Deadline) -> FirstHop {
        FirstHop::Unavailable {
            error: format!("{port}: this probe cannot read switches"),
        }
    }

    /// [`Probe::first_hop`] of the port with this identity, and when its
    /// oldest table was read if not now (`health`'s shared first hop:
    /// `first_hop_share.rs`).
    fn first_hop_at(
        &self,
        port: &PortId,
        _identity: &PortIdentity,
        deadline: &Deadline,
    ) -> (FirstHop, Option<u64>) {
        (self.first_hop(port, deadline), None)
    }
}

/// The three queries of a port's own tables (directed route of length 0).
const PORT_QUERIES: [&[&str]; 3] = [
    &["-D", "sl2vl", "0"],
    &["-D", "portinfo", "0"],
    &["-D", "vlarb", "0"],
];

impl Probe for Smpquery {
    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables> {
        self.probe_many(&[port], deadline)
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no probe result".into())))
    }

    /// Every port's three queries at once: a probe of any number of ports
    /// costs one query's latency, on this thread.
    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        let queries: Vec<(Option<&PortId>, &[&str])> = ports
            .iter()
            .flat_map(|p| PORT_QUERIES.iter().map(move |q| (Some(*p), *q)))
            .collect();
        let mut answers = self.run_many(&queries, deadline).into_iter();
        ports
            .iter()
            .map(|port| {
                let mut next = || {
                    answers.next().unwrap_or_else(|| {
                        Err(Error::Internal("smpquery answers out of step".into()))
                    })
                };
                let (sl2vl, portinfo, vlarb) = (next(), next(), next());
                tables_of(port, sl2vl, portinfo, vlarb)
            })
            .collect()
    }

    fn first_hop(&self, port: &PortId, deadline: &Deadline) -> FirstHop {
        first_hop::read::read(self, port, deadline)
    }
}

/// A port's tables from its three answers (sl2vl, portinfo, vlarb).
fn tables_of(
    port: &PortId,
    sl2vl: Result<String>,
    portinfo: Result<String>,
    vlarb: Result<String>,
) -> Result<PortTables> {
    let in_port = |op: &'static str| {
        move |e: ParseError| Error::Fabric(format!("{port}: smpquery {op}: {e}"))
    };
    let sl2vl = parse_sl2vl(&sl2vl?).map_err(in_port("sl2vl"))?;
    let info = parse_portinfo(&portinfo?).map_err(in_port("portinfo"))?;
    if info.local_port != port.port {
        return Err(Error::Fabric(format!(
            "{port}: smpquery portinfo answered for port {}, not port {}",
            info.local_port, port.port
        )));
    }
    let vlarb = vlarb_state(vlarb)?;
    Ok(PortTables {
        sl2vl,
        oper_vls: info.oper_vls,
        vl_cap: info.vl_cap,
        link_state: info.link_state,
        vlarb,
    })
}
