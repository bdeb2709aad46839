//! The fabric's topology in process: the walk `ibnetdiscover -p` makes
//! (libibnetdisc's), by directed-route SMP Gets through the in-process
//! reader's port — NodeInfo of the node at the end of each path, then its
//! NodeDescription and PortInfo (a switch: port 0 for its LID, then every
//! port; an HCA: the port reached), and NodeInfo one hop further out of
//! every switch port whose link is up but the one the walk came in by —
//! into the same [`Topology`] the parsed output gives, port for port and
//! in its order.
//!
//! libibnetdisc keeps one queue of Gets and handles each answer in the
//! order they were asked (an answer's handling queues the next Gets at
//! its end); a node is put first in its list when it is found, and `-p`
//! prints the nodes in that list's order, each one's ports from the last
//! down to 1. Here the queue is taken a generation at a time: every Get
//! queued so far is sent together (a window of them in flight:
//! `smp_batch::get_all`) and the answers are handled in the queue's order,
//! so the nodes are found in the order ibnetdiscover finds them when its
//! answers come back in the order asked (as the simulator's do; on real
//! fabrics answers from nearer nodes may overtake and ibnetdiscover's own
//! order varies from run to run). The Gets whose answers change nothing
//! printed (SwitchInfo; Mellanox's ExtendedPortInfo, which only delays the
//! next step of some QDR ports) are not sent; the delay is kept as a step
//! in the queue ([`Ask::Delay`]).
//!
//! What it does not do: a node-name-map or an `ibdiag.conf` setting
//! (`ibnetdiscover`'s; `fabric audit` runs the program when one is
//! there: `names_in_force`).

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::fabric::read::mad::{Attr, Get, Route, SmpData};
use crate::fabric::tables::{DiscoveredPort, LinkEnd, NodeType, Topology};

/// The longest directed route (hops), as libibnetdisc's path holds.
const MAX_HOPS: usize = 63;
/// PortInfo.PortPhysicalState LinkUp.
const LINK_UP: u8 = 5;
/// PortInfo.LinkSpeedActive 10 Gb/s per lane (QDR).
const SPEED_QDR: u8 = 4;

/// What ibnetdiscover would take from elsewhere than the fabric, under
/// `root`: a node-name-map at its default place (the names printed are the
/// map's) or a setting in `ibdiag.conf` (a port, a timeout, the M_Key, the
/// Mellanox ExtendedPortInfo turned off). `None`: nothing, the walk in
/// process gives what it prints.
pub fn names_in_force(root: &Path) -> Option<String> {
    let map = root.join("etc/rdma/ib-node-name-map");
    if map.exists() {
        return Some(format!("{} is there", map.display()));
    }
    let conf = root.join("etc/infiniband-diags/ibdiag.conf");
    let text = std::fs::read_to_string(&conf).unwrap_or_default();
    text.lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| format!("{} sets `{}`", conf.display(), l.trim()))
}

/// One step of the walk, in the queue: a Get and what its answer is for.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ask {
    /// The node at the end of `path`, reached from `from` (node, port);
    /// `None`: the start, this port's own node.
    NodeInfo {
        path: Vec<u8>,
        from: Option<(usize, u8)>,
    },
    NodeDesc {
        path: Vec<u8>,
        node: usize,
    },
    PortInfo {
        path: Vec<u8>,
        node: usize,
        port: u8,
    },
    /// ibnetdiscover's ExtendedPortInfo of a Mellanox QDR port: nothing
    /// sent, the port's next step one place later in the queue.
    Delay {
        path: Vec<u8>,
        node: usize,
        port: u8,
    },
}

impl Ask {
    /// The Get this step sends (none for a delay).
    fn get(&self) -> Option<Get> {
        let (path, attr, modifier) = match self {
            Self::NodeInfo { path, .. } => (path, Attr::NodeInfo, 0),
            Self::NodeDesc { path, .. } => (path, Attr::NodeDesc, 0),
            Self::PortInfo { path, port, .. } => (path, Attr::PortInfo, u32::from(*port)),
            Self::Delay { .. } => return None,
        };
        Some(Get {
            route: Route::Directed(path.clone()),
            attr,
            modifier,
        })
    }
}

/// A port found.
#[derive(Clone, Debug, Default)]
struct FoundPort {
    guid: u64,
    lid: u16,
    info: Option<SmpData>,
    remote: Option<(usize, u8)>,
}

/// A node found.
#[derive(Debug)]
struct FoundNode {
    kind: NodeType,
    /// NodeInfo.PortGUID as first read: a port's GUID until its own is.
    port_guid: u64,
    device: u16,
    vendor: u32,
    desc: String,
    /// Port 0's LID (a switch's).
    lid: u16,
    /// By number, 0 to NumPorts.
    ports: Vec<Option<FoundPort>>,
}

/// The walk's state: the nodes in the order found.
struct Walk {
    nodes: Vec<FoundNode>,
    by_guid: HashMap<u64, usize>,
    /// The node and port the walk started from.
    start: Option<(usize, u8)>,
    /// ibnetdiscover's default: Mellanox ExtendedPortInfo asked.
    mlx_epi: bool,
}

fn be16(d: &[u8]) -> u16 {
    u16::from_be_bytes([d[0], d[1]])
}

fn be64(d: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_be_bytes(b)
}

/// A NodeDescription as ibnetdiscover prints it: up to the first NUL,
/// every byte that is not printable ASCII a space.
fn clean_desc(d: &SmpData) -> String {
    d.iter()
        .take_while(|&&b| b != 0)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                char::from(b)
            } else {
                ' '
            }
        })
        .collect()
}

/// The Mellanox devices ibnetdiscover asks ExtendedPortInfo of.
fn mellanox_extended(device: u16, vendor: u32) -> bool {
    let bull = vendor == 0x119f;
    matches!(
        device,
        0xc738..=0xc73b | 0xc839 | 0xcb20 | 0xcf08 | 0xcf09 | 0xd2f0
    ) || (bull && matches!(device, 0x1b02 | 0x1b50 | 0x1ba0 | 0x1bd0..=0x1bd5 | 0x1bf0))
        || matches!(device, 0x1003..=0x101b | 0xa2d2)
        || (bull
            && matches!(
                device,
                0x1b33
                    | 0x1b73
                    | 0x1b40
                    | 0x1b41
                    | 0x1b60
                    | 0x1b61
                    | 0x1b83
                    | 0x1b93
                    | 0x1b94
                    | 0x1bb4
                    | 0x1bb5
                    | 0x1bc4..=0x1bc6
            ))
}

/// The extended link speed active of a port (`info`), its capabilities
/// from `cap` (a switch's port 0, else the port's own): 0 when none.
fn extended_speed(cap: &SmpData, info: &SmpData) -> u8 {
    let mask = u32::from_be_bytes([cap[20], cap[21], cap[22], cap[23]]);
    if mask & 0x4000 == 0 {
        return 0;
    }
    let ext = info[62] >> 4;
    let ext2 = if mask & 0x8000 != 0 && be16(&cap[60..62]) & 0x0800 != 0 {
        ((info[56] >> 5) & 3) << 5
    } else {
        0
    };
    if ext2 != 0 { ext2 } else { ext }
}

impl Walk {
    fn new(mlx_epi: bool) -> Self {
        Self {
            nodes: Vec::new(),
            by_guid: HashMap::new(),
            start: None,
            mlx_epi,
        }
    }

    fn port_mut(&mut self, node: usize, port: u8) -> Option<&mut Option<FoundPort>> {
        self.nodes.get_mut(node)?.ports.get_mut(usize::from(port))
    }

    /// One step's answer handled (`None`: a delay, nothing was sent); the
    /// steps it makes go to `next`, in order.
    fn take(&mut self, ask: Ask, got: Option<&SmpData>, next: &mut Vec<Ask>) -> Result<()> {
        match (ask, got) {
            (Ask::NodeInfo { path, from }, Some(d)) => self.node_info(path, from, d, next),
            (Ask::NodeDesc { node, .. }, Some(d)) => {
                self.nodes[node].desc = clean_desc(d);
                Ok(())
            }
            (Ask::PortInfo { path, node, port }, Some(d)) => {
                self.port_info(path, node, port, d, next);
                Ok(())
            }
            (Ask::Delay { path, node, port }, None) => {
                self.onward(path, node, port, next);
                Ok(())
            }
            (ask, _) => Err(Error::Internal(format!(
                "discovery: {ask:?} out of step with its answer"
            ))),
        }
    }

    fn node_info(
        &mut self,
        path: Vec<u8>,
        from: Option<(usize, u8)>,
        d: &SmpData,
        next: &mut Vec<Ask>,
    ) -> Result<()> {
        let kind = match d[2] {
            1 => NodeType::Hca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            n => {
                return Err(Error::Fabric(format!(
                    "discovery: the node at directed route {path:?} is of type {n}"
                )));
            }
        };
        let guid = be64(&d[12..20]);
        let port_guid = be64(&d[20..28]);
        let local = d[36];
        let (node, new) = if let Some(&n) = self.by_guid.get(&guid) {
            (n, false)
        } else {
            let n = self.nodes.len();
            self.nodes.push(FoundNode {
                kind,
                port_guid,
                device: be16(&d[30..32]),
                vendor: u32::from_be_bytes([0, d[37], d[38], d[39]]),
                desc: String::new(),
                lid: 0,
                ports: vec![None; usize::from(d[3]) + 1],
            });
            self.by_guid.insert(guid, n);
            (n, true)
        };
        let Some(slot) = self.port_mut(node, local) else {
            // A LocalPortNum past NumPorts: nothing to hang it on.
            return Ok(());
        };
        slot.get_or_insert_with(FoundPort::default).guid = port_guid;
        match from {
            None => self.start = Some((node, local)),
            Some((far, far_port)) => {
                if self.port_mut(far, far_port).is_none_or(|p| p.is_none()) {
                    return Err(Error::Internal(format!(
                        "discovery: no port {far_port} on the node it came from"
                    )));
                }
                self.link((node, local), (far, far_port));
            }
        }
        let switch = self.nodes[node].kind == NodeType::Switch;
        if new {
            next.push(Ask::NodeDesc {
                path: path.clone(),
                node,
            });
            if switch {
                next.push(Ask::PortInfo {
                    path: path.clone(),
                    node,
                    port: 0,
                });
            }
        }
        if !switch {
            next.push(Ask::PortInfo {
                path,
                node,
                port: local,
            });
        }
        Ok(())
    }

    /// Cables `a` to `b`, each first taken off whatever it was cabled to.
    fn link(&mut self, a: (usize, u8), b: (usize, u8)) {
        for end in [a, b] {
            let old = self
                .port_mut(end.0, end.1)
                .and_then(|p| p.as_ref())
                .and_then(|p| p.remote);
            if let Some((n, p)) = old
                && let Some(Some(far)) = self.port_mut(n, p)
            {
                far.remote = None;
            }
        }
        if let Some(Some(p)) = self.port_mut(a.0, a.1) {
            p.remote = Some(b);
        }
        if let Some(Some(p)) = self.port_mut(b.0, b.1) {
            p.remote = Some(a);
        }
    }

    fn port_info(
        &mut self,
        path: Vec<u8>,
        node: usize,
        port: u8,
        d: &SmpData,
        next: &mut Vec<Ask>,
    ) {
        let port_guid = self.nodes[node].port_guid;
        let Some(slot) = self.port_mut(node, port) else {
            return;
        };
        let p = slot.get_or_insert_with(|| FoundPort {
            guid: port_guid,
            ..FoundPort::default()
        });
        p.info = Some(*d);
        p.lid = be16(&d[16..18]);
        let lid = p.lid;
        let n = &mut self.nodes[node];
        if port == 0 {
            // A switch's port 0: its LID, then every port's PortInfo
            // (libibnetdisc's `recv_port0_info`).
            n.lid = lid;
            let ports = u8::try_from(n.ports.len() - 1).unwrap_or(u8::MAX);
            next.extend((1..=ports).map(|port| Ask::PortInfo {
                path: path.clone(),
                node,
                port,
            }));
            return;
        }
        if self.mlx_epi && mellanox_extended(n.device, n.vendor) {
            let cap = match n.kind {
                NodeType::Switch => n.ports[0].as_ref().and_then(|p| p.info),
                _ => Some(*d),
            };
            let speed = cap.map_or(0, |c| extended_speed(&c, d));
            if d[33] >> 4 == LINK_UP && d[35] >> 4 == SPEED_QDR && speed == 0 {
                next.push(Ask::Delay { path, node, port });
                return;
            }
        }
        self.onward(path, node, port, next);
    }

    /// After a port's PortInfo: NodeInfo of what is cabled to it, when its
    /// link is up and the walk did not come in by it (a switch), or it is
    /// the port the walk started from.
    fn onward(&mut self, path: Vec<u8>, node: usize, port: u8, next: &mut Vec<Ask>) {
        let Some(Some(info)) = self.nodes[node]
            .ports
            .get(usize::from(port))
            .map(|p| p.as_ref().and_then(|p| p.info))
        else {
            return;
        };
        let switch = self.nodes[node].kind == NodeType::Switch;
        let start = self.start == Some((node, port));
        if port == 0 || info[33] >> 4 != LINK_UP || !((switch && port != info[28]) || start) {
            return;
        }
        let from = Some((node, port));
        if !switch && start && path.len() > 1 {
            // Back one hop (libibnetdisc's `retract_dpath`).
            let mut back = path;
            back.pop();
            next.push(Ask::NodeInfo { path: back, from });
        } else if path.len() < MAX_HOPS {
            let mut out = path;
            out.push(port);
            next.push(Ask::NodeInfo { path: out, from });
        }
    }

    /// The ports as `ibnetdiscover -p` prints them: the nodes last found
    /// first, each one's ports from the last down to 1.
    fn topology(&self) -> Topology {
        let end = |n: usize, p: u8| -> LinkEnd {
            let node = &self.nodes[n];
            let port = node.ports[usize::from(p)].as_ref();
            LinkEnd {
                kind: node.kind,
                lid: match node.kind {
                    NodeType::Switch => node.lid,
                    _ => port.map_or(0, |p| p.lid),
                },
                port: u32::from(p),
                guid: format!("{:#018x}", port.map_or(0, |p| p.guid)),
                name: node.desc.clone(),
            }
        };
        let mut ports = Vec::new();
        for (n, node) in self.nodes.iter().enumerate().rev() {
            for (p, port) in node.ports.iter().enumerate().skip(1).rev() {
                let (Some(port), Ok(p)) = (port, u8::try_from(p)) else {
                    continue;
                };
                ports.push(DiscoveredPort {
                    end: end(n, p),
                    remote: port.remote.map(|(rn, rp)| end(rn, rp)),
                });
            }
        }
        Topology { ports }
    }
}

/// The answers to a generation's Gets, in order.
pub type Answers = Vec<Result<SmpData>>;

/// Walks the fabric from the port `ask` sends through: `ask` sends each
/// generation's Gets and gives back their answers in order (a Get not
/// answered is left out of the walk, as ibnetdiscover leaves it; past the
/// deadline, the walk fails). `mlx_epi`: as ibnetdiscover by default
/// (`ibdiag.conf`'s `MLX_EPI`), Mellanox QDR ports a step later.
pub fn walk(ask: &mut dyn FnMut(&[Get]) -> Answers, mlx_epi: bool) -> Result<Topology> {
    let mut w = Walk::new(mlx_epi);
    let mut queue = vec![Ask::NodeInfo {
        path: Vec::new(),
        from: None,
    }];
    while !queue.is_empty() {
        let gets: Vec<Get> = queue.iter().filter_map(Ask::get).collect();
        let mut answers = ask(&gets).into_iter();
        let mut next = Vec::new();
        for step in queue {
            let got = if step.get().is_some() {
                match answers.next() {
                    Some(Ok(d)) => Some(d),
                    Some(Err(e @ Error::Deadline { .. })) => return Err(e),
                    // Unanswered: nothing follows from it.
                    Some(Err(_)) => continue,
                    None => {
                        return Err(Error::Internal("discovery: fewer answers than Gets".into()));
                    }
                }
            } else {
                None
            };
            w.take(step, got.as_ref(), &mut next)?;
        }
        queue = next;
    }
    if w.start.is_none() {
        return Err(Error::Fabric(
            "discovery: the port's own node did not answer".into(),
        ));
    }
    Ok(w.topology())
}

#[cfg(test)]
mod tests;
