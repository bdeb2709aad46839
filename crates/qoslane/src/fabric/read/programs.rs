//! The program reader's [`Reader`] implementation: what [`Smpquery`] asks
//! and how the answers become tables. Every read is a set of programs run
//! together ([`Smpquery::run_many`], `exec::run_window`: a window of
//! them at once on the caller's thread), in as few rounds as the reads
//! depend on each other:
//!
//! ```text
//! the node's own ports    sl2vl, portinfo, vlarb of each (-D … 0)     one round
//! the first hop           first_hop/read.rs                          three rounds
//! egress ports (audit)    portinfo LID PORT of every port;           two rounds
//!                         then sl2vl LID [PORT], vlarb LID PORT of the Active ones
//! their transmit wait     by its `perfquery` (`perfquery.rs`)         rounds of a window
//! the topology            ibnetdiscover -p                            one program
//! ```

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::counters::pma::PortWait;
use crate::fabric::counters::wait::WaitPort;
use crate::fabric::first_hop::read as first_hop_read;
use crate::fabric::read::parse::{
    ParseError, parse_forwarding, parse_portinfo, parse_sl2vl, parse_switch_sl2vl,
};
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smpquery::{Smpquery, vlarb_state};
use crate::fabric::tables::{
    EgressPort, EgressRead, FirstHop, NodeType, PortId, PortTables, VlArbState,
};

/// The three queries of a port's own tables (directed route of length 0).
const PORT_QUERIES: [&[&str]; 3] = [
    &["-D", "sl2vl", "0"],
    &["-D", "portinfo", "0"],
    &["-D", "vlarb", "0"],
];

impl Reader for Smpquery {
    fn name(&self) -> &'static str {
        "smpquery"
    }

    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables> {
        self.probe_many(&[port], deadline)
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no probe result".into())))
    }

    /// Every port's three queries together, all at once: a probe of the
    /// node's ports costs one query's latency, on this thread.
    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        let queries: Vec<(Option<&PortId>, &[&str])> = ports
            .iter()
            .flat_map(|p| PORT_QUERIES.iter().map(move |q| (Some(*p), *q)))
            .collect();
        let mut answers = self.run_all(&queries, deadline).into_iter();
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
        first_hop_read::read(self, port, deadline)
    }

    fn egress(
        &self,
        ports: &[EgressPort],
        _ins: &[Vec<u32>],
        deadline: &Deadline,
    ) -> Vec<Result<EgressRead>> {
        read_egress(self, ports, deadline)
    }

    /// `ibroute LID` per switch, a window at once (from the port the
    /// queries leave by); none without an `ibroute` (`QOSLANE_IBROUTE`).
    fn forwarding(&self, switches: &[u16], top: u16, deadline: &Deadline) -> Vec<Result<Vec<u8>>> {
        let Some(program) = self.ibroute_program() else {
            return switches
                .iter()
                .map(|_| {
                    Err(Error::Fabric(
                        "the smpquery reader reads forwarding tables with ibroute: none \
                         configured (QOSLANE_IBROUTE)"
                            .into(),
                    ))
                })
                .collect();
        };
        let via_port = self.via_port().map(|v| v.port.to_string());
        let lids: Vec<String> = switches.iter().map(u16::to_string).collect();
        let argvs: Vec<Vec<&str>> = lids
            .iter()
            .map(|lid| {
                let mut argv = Vec::with_capacity(5);
                if let (Some(v), Some(p)) = (self.via_port(), via_port.as_deref()) {
                    argv.extend(["-C", v.device.as_str(), "-P", p]);
                }
                argv.push(lid.as_str());
                argv
            })
            .collect();
        let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
        crate::exec::run_window(program, &refs, self.window(), deadline)
            .into_iter()
            .zip(&lids)
            .map(|(r, lid)| {
                let out = r?;
                let text = String::from_utf8(out.stdout)
                    .map_err(|_| Error::Fabric(format!("ibroute {lid}: output is not UTF-8")))?;
                let pairs = parse_forwarding(&text)
                    .map_err(|e| Error::Fabric(format!("ibroute {lid}: {e}")))?;
                Ok(forwarding_table(&pairs, top))
            })
            .collect()
    }

    /// By its `perfquery`, when it has one.
    fn xmit_wait(&self, ports: &[WaitPort], deadline: &Deadline) -> (Vec<PortWait>, Vec<String>) {
        match self.counters() {
            Some(perfquery) => perfquery.xmit_wait(ports, deadline),
            None => (Vec::new(), Vec::new()),
        }
    }

    fn clear_xmit_wait(
        &self,
        ports: &[WaitPort],
        waits: &[PortWait],
        deadline: &Deadline,
    ) -> Vec<String> {
        self.counters()
            .map(|perfquery| perfquery.clear_xmit_wait(ports, waits, deadline))
            .unwrap_or_default()
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

/// Every egress port by LID: the PortInfo of each in one round, then the
/// SL2VL (a switch: one row per in port; an HCA port: its table) and the
/// VLArb of the Active ones in a second.
fn read_egress(
    smp: &Smpquery,
    ports: &[EgressPort],
    deadline: &Deadline,
) -> Vec<Result<EgressRead>> {
    let via = smp.via_port();
    let ids: Vec<(String, String)> = ports
        .iter()
        .map(|p| (p.lid.to_string(), p.port.to_string()))
        .collect();
    let infos: Vec<(Option<&PortId>, [&str; 3])> = ids
        .iter()
        .map(|(lid, port)| (via, ["portinfo", lid.as_str(), port.as_str()]))
        .collect();
    let infos: Vec<(Option<&PortId>, &[&str])> =
        infos.iter().map(|(v, a)| (*v, a.as_slice())).collect();
    let infos = smp.run_many(&infos, deadline);
    // Round two: the tables of every Active port.
    let mut tables: Vec<(Option<&PortId>, Vec<&str>)> = Vec::new();
    let plans: Vec<Result<(Option<usize>, EgressRead)>> = ports
        .iter()
        .zip(&ids)
        .zip(infos)
        .map(|((item, (lid, port)), info)| {
            let pi = parse_portinfo(&info?).map_err(|e| in_egress(item, "portinfo", &e))?;
            let read = EgressRead {
                active: pi.link_state == "Active",
                oper_vls: pi.oper_vls,
                rows: Vec::new(),
                vlarb: VlArbState::Unavailable("link not Active".into()),
            };
            if !read.active {
                return Ok((None, read));
            }
            let at = tables.len();
            tables.push((
                via,
                if item.kind == NodeType::Switch {
                    vec!["sl2vl", lid, port]
                } else {
                    // An HCA port has its own LID: its one table.
                    vec!["sl2vl", lid]
                },
            ));
            tables.push((via, vec!["vlarb", lid, port]));
            Ok((Some(at), read))
        })
        .collect();
    let asked: Vec<(Option<&PortId>, &[&str])> =
        tables.iter().map(|(v, a)| (*v, a.as_slice())).collect();
    let mut answers: Vec<Option<Result<String>>> = smp
        .run_many(&asked, deadline)
        .into_iter()
        .map(Some)
        .collect();
    let mut take = |i: usize| {
        answers
            .get_mut(i)
            .and_then(Option::take)
            .unwrap_or_else(|| Err(Error::Internal("smpquery answers out of step".into())))
    };
    ports
        .iter()
        .zip(plans)
        .map(|(item, plan)| {
            let (at, mut read) = plan?;
            let Some(at) = at else { return Ok(read) };
            let (sl2vl, vlarb) = (take(at), take(at + 1));
            let t = sl2vl?;
            read.rows = if item.kind == NodeType::Switch {
                parse_switch_sl2vl(&t, item.port).map_err(|e| in_egress(item, "sl2vl", &e))?
            } else {
                vec![(
                    0,
                    parse_sl2vl(&t).map_err(|e| in_egress(item, "sl2vl", &e))?,
                )]
            };
            read.vlarb = vlarb_state(vlarb)?;
            Ok(read)
        })
        .collect()
}

/// A parse error of an egress port's answer, the port named.
fn in_egress(item: &EgressPort, what: &str, e: &ParseError) -> Error {
    Error::Fabric(format!(
        "smpquery {what} {} {} ({} {}): {e}",
        item.lid,
        item.port,
        item.kind.as_str(),
        item.name
    ))
}

/// The table as the deadlock check takes it: LIDs `0..=top`, each its out
/// port, `0xFF` where `ibroute` listed none.
fn forwarding_table(pairs: &[(u16, u8)], top: u16) -> Vec<u8> {
    let mut lft = vec![0xFF; usize::from(top) + 1];
    for &(lid, port) in pairs {
        if let Some(slot) = lft.get_mut(usize::from(lid)) {
            *slot = port;
        }
    }
    lft
}
