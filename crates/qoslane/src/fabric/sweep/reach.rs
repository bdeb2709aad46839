//! Which HCA ports a finding of the audit reaches, pure: from the topology
//! alone (`ibnetdiscover -p`), whose traffic takes the egress port a level
//! is not carried on.
//!
//! Each node gets a rank, its hops to the nearest HCA (an HCA 0, a leaf 1, a
//! spine 2): "down" is toward a lower rank, the side with the HCAs. An
//! egress port
//!
//! - of an HCA, or of a switch toward an HCA, reaches that HCA port;
//! - of a switch toward a switch of lower rank (down) reaches the HCAs of
//!   the far switch's down-subtree: the traffic toward them crosses it;
//! - toward a switch of the same or a higher rank (sideways, up) reaches the
//!   HCAs this switch's traffic comes from: behind the in ports the finding
//!   names that face down (an HCA, a lower switch), else this switch's whole
//!   down-subtree.
//!
//! On a fat tree (up/down routes) this is where the level's traffic goes;
//! on other topologies (a ring) it is the nearest HCAs, not every route:
//! only the forwarding tables would say that, and what they say is a pair
//! of nodes, not a node: Slurm places nodes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::fabric::tables::{DiscoveredPort, LinkEnd, NodeType, Topology};

/// An HCA port of the fabric, as the topology names it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HcaPort {
    /// The node description (`node3 HCA-1`).
    pub name: String,
    pub guid: String,
    pub port: u32,
}

impl HcaPort {
    fn of(end: &LinkEnd) -> Self {
        Self {
            name: end.name.clone(),
            guid: end.guid.clone(),
            port: end.port,
        }
    }
}

/// The topology as the reach rules see it: each node's rank and links.
#[derive(Debug)]
pub struct Reach<'a> {
    topo: &'a Topology,
    /// Node GUID → its ports, in discovery order (an index: every rule
    /// walks a node's ports, a fabric of thousands of them).
    ports: BTreeMap<&'a str, Vec<&'a DiscoveredPort>>,
    /// Node GUID → hops to the nearest HCA (unreachable nodes absent).
    rank: BTreeMap<&'a str, u32>,
}

impl<'a> Reach<'a> {
    pub fn new(topo: &'a Topology) -> Self {
        let mut ports: BTreeMap<&str, Vec<&DiscoveredPort>> = BTreeMap::new();
        for p in &topo.ports {
            ports.entry(p.end.guid.as_str()).or_default().push(p);
        }
        let mut rank: BTreeMap<&str, u32> = BTreeMap::new();
        let mut queue: VecDeque<&str> = VecDeque::new();
        for p in topo.connected(NodeType::Hca) {
            if rank.insert(p.end.guid.as_str(), 0).is_none() {
                queue.push_back(p.end.guid.as_str());
            }
        }
        while let Some(g) = queue.pop_front() {
            let next = rank[g] + 1;
            for p in ports.get(g).into_iter().flatten() {
                let Some(r) = &p.remote else { continue };
                if !rank.contains_key(r.guid.as_str()) {
                    rank.insert(r.guid.as_str(), next);
                    queue.push_back(r.guid.as_str());
                }
            }
        }
        Self { topo, ports, rank }
    }

    /// The node's rank (hops to the nearest HCA), if it reaches one.
    pub fn rank(&self, guid: &str) -> Option<u32> {
        self.rank.get(guid).copied()
    }

    /// The far end of a node's port, if it is cabled.
    pub fn remote(&self, guid: &str, port: u32) -> Option<&'a LinkEnd> {
        self.port(guid, port).and_then(|p| p.remote.as_ref())
    }

    /// A node's port, as discovered.
    fn port(&self, guid: &str, port: u32) -> Option<&'a DiscoveredPort> {
        self.ports
            .get(guid)?
            .iter()
            .find(|p| p.end.port == port)
            .copied()
    }

    /// The HCA ports a finding on `port` of node `guid` (a switch or an
    /// HCA) reaches, for the traffic entering by `in_ports` (empty: every
    /// in port); sorted, each once.
    pub fn of_egress(
        &self,
        kind: NodeType,
        guid: &str,
        port: u32,
        in_ports: &[u32],
    ) -> Vec<HcaPort> {
        let mut out = BTreeSet::new();
        if kind == NodeType::Hca {
            if let Some(p) = self.port(guid, port) {
                out.insert(HcaPort::of(&p.end));
            }
            return out.into_iter().collect();
        }
        let Some(far) = self.remote(guid, port) else {
            return Vec::new();
        };
        match far.kind {
            NodeType::Hca => {
                out.insert(HcaPort::of(far));
            }
            _ if self.is_down(guid, &far.guid) => self.below(&far.guid, &mut out),
            _ => {
                // Up or sideways: the traffic this switch sends on.
                let mut from_ins = false;
                for &i in in_ports {
                    match self.remote(guid, i) {
                        Some(e) if e.kind == NodeType::Hca => {
                            out.insert(HcaPort::of(e));
                            from_ins = true;
                        }
                        Some(e) if self.is_down(guid, &e.guid) => {
                            self.below(&e.guid, &mut out);
                            from_ins = true;
                        }
                        _ => {}
                    }
                }
                if !from_ins {
                    self.below(guid, &mut out);
                }
            }
        }
        out.into_iter().collect()
    }

    /// `to` is a lower rank than `from`.
    fn is_down(&self, from: &str, to: &str) -> bool {
        matches!((self.rank(from), self.rank(to)), (Some(a), Some(b)) if b < a)
    }

    /// Every HCA port of `guid`'s down-subtree: reached by steps to a lower
    /// rank only (an HCA cabled to it, and each lower switch's).
    fn below(&self, guid: &str, out: &mut BTreeSet<HcaPort>) {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack = vec![guid];
        while let Some(g) = stack.pop() {
            if !seen.insert(g) {
                continue;
            }
            for p in self.ports.get(g).into_iter().flatten() {
                match &p.remote {
                    Some(r) if r.kind == NodeType::Hca => {
                        out.insert(HcaPort::of(r));
                    }
                    Some(r) if self.is_down(g, &r.guid) => stack.push(r.guid.as_str()),
                    _ => {}
                }
            }
        }
    }

    /// Every HCA port of the topology, sorted.
    pub fn hcas(&self) -> Vec<HcaPort> {
        let set: BTreeSet<HcaPort> = self
            .topo
            .connected(NodeType::Hca)
            .map(|p| HcaPort::of(&p.end))
            .collect();
        set.into_iter().collect()
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A node of a net file: its kind, name and `(port, peer, peer port)`.
    type NetNode = (NodeType, String, Vec<(u32, String, u32)>);

    /// A topology from ibsim's net format (`rigs/net.*`): `Switch N "name"`
    /// or `Hca N "name"`, then `[port] "peer"[port]` lines. GUIDs are made
    /// from the order of the nodes (switches `0x2…`, HCAs `0x1…`).
    ///
    /// # Panics
    ///
    /// On a line it cannot read (a test's fixture).
    pub fn from_net(text: &str) -> Topology {
        let mut nodes: Vec<NetNode> = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            let quoted = |s: &str| s.split('"').nth(1).unwrap_or("").to_owned();
            if let Some(rest) = line.strip_prefix("Switch") {
                nodes.push((NodeType::Switch, quoted(rest), Vec::new()));
            } else if let Some(rest) = line.strip_prefix("Hca") {
                nodes.push((NodeType::Hca, quoted(rest), Vec::new()));
            } else if let Some(rest) = line.strip_prefix('[') {
                let (port, rest) = rest.split_once(']').unwrap();
                let peer = quoted(rest);
                let far: u32 = rest
                    .rsplit('[')
                    .next()
                    .unwrap()
                    .trim_end_matches(']')
                    .parse()
                    .unwrap();
                nodes
                    .last_mut()
                    .unwrap()
                    .2
                    .push((port.parse().unwrap(), peer, far));
            }
        }
        // Cabled once is cabled both ways (net files list HCAs' links on
        // the switch side only, sometimes).
        let mut links: Vec<(String, u32, String, u32)> = Vec::new();
        for (_, name, ports) in &nodes {
            for (p, peer, far) in ports {
                links.push((name.clone(), *p, peer.clone(), *far));
                links.push((peer.clone(), *far, name.clone(), *p));
            }
        }
        links.sort();
        links.dedup();
        let mut names: Vec<(NodeType, String)> =
            nodes.iter().map(|(k, n, _)| (*k, n.clone())).collect();
        for (_, _, peer, _) in &links {
            if !names.iter().any(|(_, n)| n == peer) {
                names.push((NodeType::Hca, peer.clone()));
            }
        }
        let end = |name: &str, port: u32| {
            let i = names.iter().position(|(_, n)| n == name).unwrap();
            let kind = names[i].0;
            let base = if kind == NodeType::Switch {
                0x20_0000
            } else {
                0x10_0000
            };
            LinkEnd {
                kind,
                lid: u16::try_from(i + 1).unwrap(),
                port,
                guid: format!("0x{:016x}", base + i),
                name: if kind == NodeType::Hca {
                    format!("{name} HCA-1")
                } else {
                    name.to_owned()
                },
            }
        };
        Topology {
            ports: links
                .iter()
                .map(|(a, p, b, q)| DiscoveredPort {
                    end: end(a, *p),
                    remote: Some(end(b, *q)),
                })
                .collect(),
        }
    }

    /// `rigs/NAME` as a topology.
    ///
    /// # Panics
    ///
    /// When the file cannot be read.
    pub fn rig(name: &str) -> Topology {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../rigs")
            .join(name);
        from_net(&std::fs::read_to_string(file).unwrap())
    }

    fn guid_of(t: &Topology, name: &str) -> String {
        t.ports
            .iter()
            .find(|p| p.end.name == name)
            .unwrap()
            .end
            .guid
            .clone()
    }

    fn names(v: &[HcaPort]) -> Vec<&str> {
        v.iter().map(|h| h.name.as_str()).collect()
    }

    #[test]
    fn ranks_count_hops_to_the_nearest_hca() {
        let t = rig("net.2level");
        let r = Reach::new(&t);
        assert_eq!(r.rank(&guid_of(&t, "node1 HCA-1")), Some(0));
        assert_eq!(r.rank(&guid_of(&t, "leaf2")), Some(1));
        assert_eq!(r.rank(&guid_of(&t, "spine1")), Some(2));
    }

    #[test]
    fn a_spine_toward_a_leaf_reaches_that_leafs_hcas_only() {
        let t = rig("net.2level");
        let r = Reach::new(&t);
        let spine1 = guid_of(&t, "spine1");
        // spine1 port 2 is cabled to leaf2.
        let got = r.of_egress(NodeType::Switch, &spine1, 2, &[]);
        assert_eq!(names(&got), ["node3 HCA-1", "node4 HCA-1"]);
        // From one in port only: still the traffic toward leaf2.
        let got = r.of_egress(NodeType::Switch, &spine1, 2, &[1]);
        assert_eq!(names(&got), ["node3 HCA-1", "node4 HCA-1"]);
    }

    #[test]
    fn a_leaf_uplink_reaches_the_leafs_hcas_and_a_leaf_port_its_hca() {
        let t = rig("net.2level");
        let r = Reach::new(&t);
        let leaf3 = guid_of(&t, "leaf3");
        // leaf3 port 3 goes up to spine1: every in port, then from node5 only.
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &leaf3, 3, &[])),
            ["node5 HCA-1", "node6 HCA-1"]
        );
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &leaf3, 3, &[1])),
            ["node5 HCA-1"]
        );
        // From the other spine only (transit, not a route up/down takes):
        // the leaf's own HCAs.
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &leaf3, 3, &[4])),
            ["node5 HCA-1", "node6 HCA-1"]
        );
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &leaf3, 2, &[])),
            ["node6 HCA-1"]
        );
        let node6 = guid_of(&t, "node6 HCA-1");
        let own = r.of_egress(NodeType::Hca, &node6, 1, &[]);
        assert_eq!((names(&own), own[0].port), (vec!["node6 HCA-1"], 1));
        assert_eq!(r.hcas().len(), 6);
    }

    #[test]
    fn on_a_ring_a_sideways_egress_reaches_the_switchs_own_hca() {
        let t = rig("net.ring5");
        let r = Reach::new(&t);
        let sw1 = guid_of(&t, "sw1");
        assert_eq!(r.rank(&sw1), Some(1));
        // sw1 port 2 goes clockwise to sw2: the traffic of node1 (and of
        // the transit from sw5, which only the routes would name).
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &sw1, 2, &[])),
            ["node1 HCA-1"]
        );
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &sw1, 2, &[3])),
            ["node1 HCA-1"]
        );
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &sw1, 1, &[])),
            ["node1 HCA-1"]
        );
        assert!(
            r.of_egress(NodeType::Switch, &sw1, 9, &[]).is_empty(),
            "not cabled"
        );
    }

    #[test]
    fn the_captured_two_level_topology_reaches_the_same_hcas() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/ibnetdiscover/2level.p.txt"),
        )
        .unwrap();
        let t = crate::fabric::read::parse::topology::parse_topology(&text).unwrap();
        let r = Reach::new(&t);
        let spine = t
            .ports
            .iter()
            .find(|p| p.end.name == "spine1")
            .unwrap()
            .end
            .guid
            .clone();
        let toward_leaf2 = t
            .ports
            .iter()
            .find(|p| p.end.guid == spine && p.remote.as_ref().is_some_and(|e| e.name == "leaf2"))
            .unwrap()
            .end
            .port;
        assert_eq!(
            names(&r.of_egress(NodeType::Switch, &spine, toward_leaf2, &[])),
            ["node3 HCA-1", "node4 HCA-1"]
        );
    }
}
