//! The first hop, READ: the SMP queries that read the switch this node's
//! HCA port is cabled to (judged by `judge.rs`): its SL2VL
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
//! 3 + NumPorts-1 + 2 × (Active ports) queries in three rounds (the
//! switch; its output ports' PortInfo; the tables of the Active ones), each
//! round's programs together ([`Smpquery::run_many`]: a window at once, on
//! this thread, no reader threads); the answers are parsed by `read/parse/`.
//!
//! In process ([`in_process`]: through libibumad, a window of Gets in
//! flight), the same tables into the same [`FirstHop`], each once: the
//! switch by directed route (NodeInfo, NodeDescription, port 0's PortInfo
//! for its LID), then its output ports by that LID with the audit's reader
//! ([`smp_batch::read_egress`]); and [`own_rows`], the SL2VL rows of this
//! node's in port alone (`health`'s runs between full readings:
//! `share.rs`). The readers (`read/programs.rs`, `read/in_process.rs`) call
//! these; nothing else does.
//!
//! `sync` and `health` read it; a Prolog does not (it reads only the node's
//! own ports, from the cache when it is fresh), unless a `fail_job` level
//! under `enforce` has no fresh reading recorded.

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::read::mad::{self, Attr, Get, Route};
use crate::fabric::read::parse::{
    ParseError, parse_lid, parse_nodedesc, parse_nodeinfo, parse_portinfo, parse_switch_sl2vl,
};
use crate::fabric::read::smp_batch;
use crate::fabric::read::smpquery::{Smpquery, vlarb_state};
use crate::fabric::read::umad::Umad;
use crate::fabric::tables::{EgressPort, FirstHop, NodeType, PortId, SwitchEgress, SwitchId};

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
    let asked: Vec<(Option<&PortId>, &[&str])> = queries.iter().map(|q| (Some(port), *q)).collect();
    let mut answers = smp.run_many(&asked, deadline).into_iter();
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
    let outs: Vec<String> = (1..=info.num_ports)
        .filter(|&p| p != in_port)
        .map(|p| p.to_string())
        .collect();
    // Round two: every output port's PortInfo.
    let infos: Vec<[&str; 4]> = outs.iter().map(|o| ["-D", "portinfo", "0,1", o]).collect();
    let asked: Vec<(Option<&PortId>, &[&str])> =
        infos.iter().map(|q| (Some(port), q.as_slice())).collect();
    let infos = smp.run_many(&asked, deadline);
    let mut unread = Vec::new();
    let mut active: Vec<(u32, &str, crate::fabric::tables::VlRange)> = Vec::new();
    for (o, pi) in outs.iter().zip(infos) {
        let out: u32 = o.parse().unwrap_or_default();
        let pi =
            pi.and_then(|pi| parse_portinfo(&pi).map_err(|e| parse(&format!("portinfo {o}"), e)));
        match pi {
            Ok(pi) if pi.link_state != "Active" => {}
            Ok(pi) => active.push((out, o, pi.oper_vls)),
            Err(e @ Error::Deadline { .. }) => return Err(e),
            Err(e) => unread.push((out, e.to_string())),
        }
    }
    // Round three: the Active ones' SL2VL and VLArb.
    let tables: Vec<[&str; 4]> = active
        .iter()
        .flat_map(|(_, o, _)| [["-D", "sl2vl", "0,1", *o], ["-D", "vlarb", "0,1", *o]])
        .collect();
    let asked: Vec<(Option<&PortId>, &[&str])> =
        tables.iter().map(|q| (Some(port), q.as_slice())).collect();
    let mut answers = smp.run_many(&asked, deadline).into_iter();
    let mut egress = Vec::new();
    for (out, o, oper_vls) in active {
        let (sl2vl, vlarb) = (
            answers
                .next()
                .unwrap_or_else(|| Err(Error::Internal("no answer".into()))),
            answers
                .next()
                .unwrap_or_else(|| Err(Error::Internal("no answer".into()))),
        );
        let read = sl2vl.and_then(|sl2vl| {
            let rows =
                parse_switch_sl2vl(&sl2vl, out).map_err(|e| parse(&format!("sl2vl {o}"), e))?;
            let sl2vl = rows
                .into_iter()
                .find(|(i, _)| *i == in_port)
                .map(|(_, t)| t)
                .ok_or_else(|| {
                    Error::Fabric(format!(
                        "{port}: first hop: smpquery sl2vl {o}: no row for in port {in_port}"
                    ))
                })?;
            Ok(SwitchEgress {
                out_port: out,
                sl2vl,
                oper_vls,
                vlarb: vlarb_state(vlarb)?,
            })
        });
        match read {
            Ok(e) => egress.push(e),
            Err(e @ Error::Deadline { .. }) => return Err(e),
            Err(e) => unread.push((out, e.to_string())),
        }
    }
    unread.sort_by_key(|(out, _)| *out);
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

/// The first hop read in full in process: the tables [`read`] reads
/// reads by smpquery, into the same [`FirstHop`], each once — the switch by
/// directed route (NodeInfo, NodeDescription, port 0's PortInfo for its
/// LID), then its output ports by that LID with the audit's reader
/// ([`smp_batch::read_egress`]: PortInfo, and for an Active port the SL2VL
/// row of this node's in port and the VLArb blocks its caps name). An error
/// when the switch has no LID yet (the caller reads by smpquery).
pub fn in_process(umad: &mut Umad, window: usize, deadline: &Deadline) -> Result<FirstHop> {
    let route = Route::Directed(vec![1]);
    let gets: Vec<Get> = [Attr::NodeInfo, Attr::NodeDesc, Attr::PortInfo]
        .into_iter()
        .map(|attr| Get {
            route: route.clone(),
            attr,
            modifier: 0,
        })
        .collect();
    let mut answers = smp_batch::get_all(umad, &gets, window, deadline).into_iter();
    let mut next = || {
        answers
            .next()
            .unwrap_or_else(|| Err(Error::Internal("an SMP answer is missing".into())))
    };
    let (info, desc, port0) = (next()?, next()?, next()?);
    let info = mad::node_info(&info).map_err(|e| Error::Fabric(format!("first hop: {e}")))?;
    if info.node_type != NodeType::Switch {
        return Ok(FirstHop::NoSwitch {
            node_type: info.node_type.smp_name().to_owned(),
        });
    }
    let lid = mad::port_lid(&port0);
    if lid == 0 {
        return Err(Error::Fabric("first hop: the switch has no LID yet".into()));
    }
    let switch = SwitchId {
        name: mad::node_desc(&desc),
        lid,
        guid: info.guid,
    };
    let in_port = info.local_port;
    let outs: Vec<u32> = (1..=info.num_ports).filter(|&p| p != in_port).collect();
    let ports: Vec<EgressPort> = outs
        .iter()
        .map(|&port| EgressPort {
            kind: NodeType::Switch,
            guid: switch.guid.clone(),
            name: switch.name.clone(),
            lid,
            port,
        })
        .collect();
    let ins = vec![vec![in_port]; outs.len()];
    let mut egress = Vec::new();
    let mut unread = Vec::new();
    for (&out, read) in outs
        .iter()
        .zip(smp_batch::read_egress(umad, &ports, &ins, window, deadline))
    {
        match read {
            Ok(e) if !e.active => {}
            Ok(e) => match e.rows.into_iter().find(|(i, _)| *i == in_port) {
                Some((_, sl2vl)) => egress.push(SwitchEgress {
                    out_port: out,
                    sl2vl,
                    oper_vls: e.oper_vls,
                    vlarb: e.vlarb,
                }),
                None => unread.push((out, format!("no SL2VL row for in port {in_port}"))),
            },
            Err(e @ Error::Deadline { .. }) => return Err(e),
            Err(e) => unread.push((out, e.to_string())),
        }
    }
    Ok(FirstHop::Read {
        switch,
        in_port,
        egress,
        unread,
    })
}

/// The first hop as `carried` read it, with the SL2VL row of this node's in
/// port on each of its output ports read again now; an error when the
/// switch or the in port is not the one carried, or a row cannot be read.
pub fn own_rows(
    umad: &mut Umad,
    carried: &FirstHop,
    window: usize,
    deadline: &Deadline,
) -> Result<FirstHop> {
    let FirstHop::Read {
        switch,
        in_port,
        egress,
        unread,
    } = carried
    else {
        return Err(Error::Internal("no full first-hop reading carried".into()));
    };
    // `-D … 0,1` as the full reading: out of this port, to its neighbour.
    let route = Route::Directed(vec![1]);
    let gets: Vec<Get> = std::iter::once(Get {
        route: route.clone(),
        attr: Attr::NodeInfo,
        modifier: 0,
    })
    .chain(egress.iter().map(|e| Get {
        route: route.clone(),
        attr: Attr::SlToVl,
        modifier: mad::sl2vl_modifier(*in_port, e.out_port),
    }))
    .collect();
    let mut answers = smp_batch::get_all(umad, &gets, window, deadline).into_iter();
    let info = answers
        .next()
        .ok_or_else(|| Error::Internal("no NodeInfo answer".into()))??;
    let info = mad::node_info(&info).map_err(|e| Error::Fabric(e.to_string()))?;
    if info.node_type != NodeType::Switch || info.guid != switch.guid || info.local_port != *in_port
    {
        return Err(Error::Fabric(format!(
            "first hop is now {} {} port {}, not {} port {in_port}",
            info.node_type.smp_name(),
            info.guid,
            info.local_port,
            switch.guid
        )));
    }
    let mut now = Vec::with_capacity(egress.len());
    for (e, row) in egress.iter().zip(answers) {
        let mut e = e.clone();
        e.sl2vl = mad::sl2vl(&row?);
        now.push(e);
    }
    Ok(FirstHop::Read {
        switch: switch.clone(),
        in_port: *in_port,
        egress: now,
        unread: unread.clone(),
    })
}
