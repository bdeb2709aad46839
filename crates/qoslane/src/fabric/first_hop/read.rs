//! The first hop, READ: the SMP queries that read the switch this node's
//! HCA port is cabled to (judged by `first_hop_judge.rs`): its SL2VL
//! row for traffic coming in from this node (in = the switch port this node
//! is on), for every Active output port, with each output port's OperVLs and
//! VL arbitration tables: what the first switch does with each level's SL.
//!
//! Read by directed route from the local port (`-D … 0,1`), so it needs no
//! LID, no SA and works before the SM has assigned the switch one:
//!
//! ```text
//! smpquery -C mlx5_0 -P 1 -D nodeinfo 0,1       Switch? NumPorts, LocalPort (= in)
//! smpquery -C mlx5_0 -P 1 -D nodedesc 0,1       the switch's name
//! smpquery -C mlx5_0 -P 1 -D portinfo 0,1 0     the switch's LID
//! smpquery -C mlx5_0 -P 1 -D portinfo 0,1 OUT   per output port: Active? OperVLs
//! smpquery -C mlx5_0 -P 1 -D sl2vl 0,1 OUT      per Active output port
//! smpquery -C mlx5_0 -P 1 -D vlarb 0,1 OUT      per Active output port
//! ```
//!
//! 3 + NumPorts-1 + 2 × (Active ports) queries, in a bounded pool of
//! workers ([`crate::fabric::pool`]); the answers are parsed by [`crate::fabric::read::parse`].
//! `sync` and `health` read it; a Prolog does not (it reads only the node's
//! own ports, from the cache when it is fresh).

use crate::fabric::read::parse::{
    ParseError, parse_lid, parse_nodedesc, parse_nodeinfo, parse_portinfo, parse_switch_sl2vl,
};
use crate::fabric::pool;
use crate::fabric::read::smpquery::{Smpquery, vlarb_state};
use crate::fabric::tables::{FirstHop, NodeType, PortId, SwitchEgress, SwitchId};
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// Workers for one switch's output ports.
pub const WORKERS: usize = 4;

/// Reads the first hop of `port`.
pub fn read(smp: &Smpquery, port: &PortId, deadline: &Deadline) -> FirstHop {
    match read_inner(smp, port, deadline) {
        Ok(hop) => hop,
        Err(e) => FirstHop::Unavailable {
            error: e.to_string(),
        },
    }
}

fn read_inner(smp: &Smpquery, port: &PortId, deadline: &Deadline) -> Result<FirstHop> {
    let parse = |what: &str, e: ParseError| {
        Error::Fabric(format!("{port}: first hop: smpquery {what}: {e}"))
    };
    let queries: [&[&str]; 3] = [
        &["-D", "nodeinfo", "0,1"],
        &["-D", "nodedesc", "0,1"],
        &["-D", "portinfo", "0,1", "0"],
    ];
    let mut answers =
        pool::map(&queries, 3, |args| smp.run(Some(port), args, deadline)).into_iter();
    let (Some(info), Some(desc), Some(port0)) = (answers.next(), answers.next(), answers.next())
    else {
        return Err(Error::Internal("first hop: answers out of step".into()));
    };
    let info = parse_nodeinfo(&info?).map_err(|e| parse("nodeinfo", e))?;
    if info.node_type != NodeType::Switch {
        return Ok(FirstHop::NoSwitch {
            node_type: info.node_type.smp_name().to_owned(),
        });
    }
    let name = parse_nodedesc(&desc?).map_err(|e| parse("nodedesc", e))?;
    let lid = parse_lid(&port0?).map_err(|e| parse("portinfo 0", e))?;
    let in_port = info.local_port;
    let outs: Vec<u32> = (1..=info.num_ports).filter(|&p| p != in_port).collect();
    let read_out = |&out: &u32| -> Result<Option<SwitchEgress>> {
        let o = out.to_string();
        let pi = smp.run(Some(port), &["-D", "portinfo", "0,1", &o], deadline)?;
        let pi = parse_portinfo(&pi).map_err(|e| parse(&format!("portinfo {o}"), e))?;
        if pi.link_state != "Active" {
            return Ok(None);
        }
        let sl2vl = smp.run(Some(port), &["-D", "sl2vl", "0,1", &o], deadline)?;
        let rows = parse_switch_sl2vl(&sl2vl, out).map_err(|e| parse(&format!("sl2vl {o}"), e))?;
        let sl2vl = rows
            .into_iter()
            .find(|(i, _)| *i == in_port)
            .map(|(_, t)| t)
            .ok_or_else(|| {
                Error::Fabric(format!(
                    "{port}: first hop: smpquery sl2vl {o}: no row for in port {in_port}"
                ))
            })?;
        let vlarb = vlarb_state(smp.run(Some(port), &["-D", "vlarb", "0,1", &o], deadline))?;
        Ok(Some(SwitchEgress {
            out_port: out,
            sl2vl,
            oper_vls: pi.oper_vls,
            vlarb,
        }))
    };
    let mut egress = Vec::new();
    let mut unread = Vec::new();
    for (out, r) in outs.iter().zip(pool::map(&outs, WORKERS, read_out)) {
        match r {
            Ok(Some(e)) => egress.push(e),
            Ok(None) => {}
            Err(e @ Error::Deadline { .. }) => return Err(e),
            Err(e) => unread.push((*out, e.to_string())),
        }
    }
    Ok(FirstHop::Read {
        switch: SwitchId {
            name,
            lid,
            guid: info.guid,
        },
        in_port,
        egress,
        unread,
    })
}
