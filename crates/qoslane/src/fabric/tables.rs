//! What is read from the fabric: the types every parser (`parse.rs`)
//! produces and the lane rules, the probe, the first hop, the sweep and the
//! assessment consume. Plain data, no I/O; the bottom of `fabric/`.
//!
//! - a port of this node: [`PortId`], [`PortIdentity`] (sysfs), its
//!   [`PortTables`]: the SL2VL table ([`Sl2Vl`]), OperVLs/VLCap
//!   ([`VlRange`]), the VL arbitration tables ([`VlArb`], [`VlArbState`]);
//! - what a query of another node gives: [`PortInfoVls`], [`NodeInfo`]
//!   ([`NodeType`]);
//! - the first hop as read ([`FirstHop`]: [`SwitchId`], [`SwitchEgress`]);
//! - the fabric's topology from `ibnetdiscover -p` ([`Topology`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// An HCA port by its kernel name: `mlx5_0/1`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortId {
    pub device: String,
    pub port: u32,
}

impl PortId {
    pub fn new(device: impl Into<String>, port: u32) -> Self {
        Self {
            device: device.into(),
            port,
        }
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.device, self.port)
    }
}

/// What identifies an IB port's SM-programmed tables: a new node GUID (HCA
/// swapped), LID (port re-assigned) or SM LID (another SM took over) means
/// the tables may have changed. Keys the fabric cache.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortIdentity {
    /// `0x`-prefixed, 16 hex digits.
    pub node_guid: String,
    pub lid: u16,
    pub sm_lid: u16,
}

/// The port's own tables, as the SM programmed them (never the SM's
/// configuration: OpenSM folds configured VLs into OperVLs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortTables {
    pub sl2vl: Sl2Vl,
    /// PortInfo.OperVLs: the data VLs in use.
    pub oper_vls: VlRange,
    /// PortInfo.VLCap: the data VLs the port could use.
    pub vl_cap: VlRange,
    /// PortInfo.LinkState as smpquery prints it (`Active`).
    pub link_state: String,
    pub vlarb: VlArbState,
}

/// A PortInfo OperVLs/VLCap value: 1=VL0, 2=VL0-1, 3=VL0-3, 4=VL0-7, 5=VL0-14.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlRange(u8);

impl VlRange {
    const NAMES: [&'static str; 5] = ["VL0", "VL0-1", "VL0-3", "VL0-7", "VL0-14"];
    const DATA_VLS: [u8; 5] = [1, 2, 4, 8, 15];

    /// From the 4-bit field value; 0 ("no change") and 6..=15 are not ranges.
    pub fn from_code(code: u8) -> Option<Self> {
        (1..=5).contains(&code).then_some(Self(code))
    }

    /// From smpquery's rendering (`VL0-7`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .and_then(|i| u8::try_from(i + 1).ok().map(Self))
    }

    pub fn code(self) -> u8 {
        self.0
    }

    /// How many data VLs the range holds: VL0..data_vls()-1.
    pub fn data_vls(self) -> u8 {
        Self::DATA_VLS[usize::from(self.0 - 1)]
    }

    pub fn contains(self, vl: u8) -> bool {
        vl < self.data_vls()
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[usize::from(self.0 - 1)]
    }
}

impl fmt::Display for VlRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for VlRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for VlRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("`{s}` is not VL0, VL0-1, VL0-3, VL0-7 or VL0-14"))
        })
    }
}

/// A port's SLtoVLMappingTable: the VL (0..=15) of each SL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sl2Vl([u8; 16]);

impl Sl2Vl {
    /// The management lane: an SL mapped here is dropped.
    pub const VL15: u8 = 15;

    pub fn new(table: [u8; 16]) -> Option<Self> {
        table.iter().all(|&vl| vl <= 15).then_some(Self(table))
    }

    pub fn vl(&self, sl: u8) -> u8 {
        self.0[usize::from(sl & 0xf)]
    }

    pub fn as_array(&self) -> &[u8; 16] {
        &self.0
    }
}

/// A JSON array of 16 VLs.
impl Serialize for Sl2Vl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.as_slice().serialize(s)
    }
}

/// Only 16 entries, each 0..=15 (a cache file is not trusted to be ours).
impl<'de> Deserialize<'de> for Sl2Vl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Vec::<u8>::deserialize(d)?;
        let len = v.len();
        let table: [u8; 16] = v.try_into().map_err(|_| {
            serde::de::Error::custom(format!("an SL2VL table has 16 entries, not {len}"))
        })?;
        Self::new(table).ok_or_else(|| serde::de::Error::custom("an SL2VL entry is above 15"))
    }
}

/// One VL arbitration table entry: serve `vl` for `weight` 64-byte units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VlArbEntry {
    pub vl: u8,
    pub weight: u8,
}

/// The port's low- and high-priority VL arbitration tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VlArb {
    pub low: Vec<VlArbEntry>,
    pub high: Vec<VlArbEntry>,
}

impl VlArb {
    /// The VL's total weight over both tables; 0 means it is never scheduled.
    pub fn weight(&self, vl: u8) -> u32 {
        self.low
            .iter()
            .chain(&self.high)
            .filter(|e| e.vl == vl)
            .map(|e| u32::from(e.weight))
            .sum()
    }
}

/// The arbitration tables only feed a warning, so failing to read them is
/// recorded (and warned about), not fatal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VlArbState {
    Read(VlArb),
    Unavailable(String),
}

/// The PortInfo fields the check needs (`smpquery portinfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfoVls {
    pub local_port: u32,
    pub link_state: String,
    pub vl_cap: VlRange,
    pub oper_vls: VlRange,
    pub vlarb_high_cap: u8,
    pub vlarb_low_cap: u8,
}

/// The kind of a node: NodeInfo.NodeType of an SMP answer, the first
/// column of `ibnetdiscover -p` (`SW`, `CA`, `RT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeType {
    Switch,
    /// A channel adapter (an HCA).
    Hca,
    Router,
}

impl NodeType {
    /// As messages name it: `switch`, `HCA`, `router`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Switch => "switch",
            Self::Hca => "HCA",
            Self::Router => "router",
        }
    }

    /// As `smpquery nodeinfo` prints it: `Switch`, `Channel Adapter`, `Router`.
    pub fn smp_name(self) -> &'static str {
        match self {
            Self::Switch => "Switch",
            Self::Hca => "Channel Adapter",
            Self::Router => "Router",
        }
    }
}

/// The NodeInfo fields a path check needs (`smpquery nodeinfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub node_type: NodeType,
    pub num_ports: u32,
    /// The port the SMP entered the node through.
    pub local_port: u32,
    pub guid: String,
}

/// A switch, as messages name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchId {
    pub name: String,
    pub lid: u16,
    pub guid: String,
}

impl fmt::Display for SwitchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "switch {} (lid {})", self.name, self.lid)
    }
}

/// One output port of the first switch, as read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchEgress {
    pub out_port: u32,
    /// The row for traffic entering at this node's switch port.
    pub sl2vl: Sl2Vl,
    pub oper_vls: VlRange,
    pub vlarb: VlArbState,
}

/// What was read of the first hop: the switch a port of this node is cabled
/// to (read by `first_hop/read.rs`, judged by `first_hop/judge.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstHop {
    Read {
        switch: SwitchId,
        /// The switch port this node's HCA port is cabled to.
        in_port: u32,
        /// Every Active output port but `in_port`.
        egress: Vec<SwitchEgress>,
        /// Output ports that could not be read: (port, why).
        unread: Vec<(u32, String)>,
    },
    /// The port is cabled to another HCA (back to back) or a router: no
    /// switch to check.
    NoSwitch { node_type: String },
    /// The switch could not be read at all.
    Unavailable { error: String },
}

/// One egress port of the fabric, as the audit reads it.
#[derive(Clone, Debug)]
pub struct EgressPort {
    pub kind: NodeType,
    pub guid: String,
    pub name: String,
    pub lid: u16,
    pub port: u32,
}

/// One egress port as read (by `smpquery` or in process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressRead {
    pub active: bool,
    pub oper_vls: VlRange,
    /// (in port, table): one row for an HCA port (in 0).
    pub rows: Vec<(u32, Sl2Vl)>,
    pub vlarb: VlArbState,
}

/// One end of a link: a port of a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LinkEnd {
    pub kind: NodeType,
    pub lid: u16,
    pub port: u32,
    pub guid: String,
    pub name: String,
}

/// One port as `ibnetdiscover -p` discovered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiscoveredPort {
    pub end: LinkEnd,
    /// The other end of the cable; `None`: nothing is connected.
    pub remote: Option<LinkEnd>,
}

/// Every port of the fabric, in discovery order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Topology {
    pub ports: Vec<DiscoveredPort>,
}

impl Topology {
    /// Connected ports of `kind`.
    pub fn connected(&self, kind: NodeType) -> impl Iterator<Item = &DiscoveredPort> {
        self.ports
            .iter()
            .filter(move |p| p.end.kind == kind && p.remote.is_some())
    }

    /// Nodes of `kind`, counted by GUID.
    pub fn count(&self, kind: NodeType) -> usize {
        let mut guids: Vec<&str> = self
            .ports
            .iter()
            .filter(|p| p.end.kind == kind)
            .map(|p| p.end.guid.as_str())
            .collect();
        guids.sort_unstable();
        guids.dedup();
        guids.len()
    }

    /// The connected ports of the switch with GUID `guid`.
    pub fn data_ports(&self, guid: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .ports
            .iter()
            .filter(|p| p.end.guid == guid && p.remote.is_some())
            .map(|p| p.end.port)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vl_ranges_count_data_vls() {
        let counts: Vec<(&str, u8)> = (1..=5)
            .map(|c| VlRange::from_code(c).unwrap())
            .map(|r| (r.as_str(), r.data_vls()))
            .collect();
        assert_eq!(
            counts,
            [
                ("VL0", 1),
                ("VL0-1", 2),
                ("VL0-3", 4),
                ("VL0-7", 8),
                ("VL0-14", 15)
            ]
        );
        assert_eq!(VlRange::from_code(0), None, "0 is `no change`");
        assert_eq!(VlRange::from_code(6), None);
        assert_eq!(VlRange::parse("VL0-7").map(VlRange::code), Some(4));
        assert_eq!(VlRange::parse("?(6)"), None);
        let r = VlRange::parse("VL0-3").unwrap();
        assert!(r.contains(3) && !r.contains(4));
    }

    #[test]
    fn tables_deserialize_only_valid_values() {
        let t: Sl2Vl = serde_json::from_str("[0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,15]").unwrap();
        assert_eq!(t.vl(15), Sl2Vl::VL15);
        assert!(serde_json::from_str::<Sl2Vl>("[0,1,2]").is_err());
        assert!(serde_json::from_str::<Sl2Vl>("[0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,16]").is_err());
        assert!(serde_json::from_str::<VlRange>("\"VL0-5\"").is_err());
        assert_eq!(
            serde_json::to_string(&VlRange::from_code(5)).unwrap(),
            "\"VL0-14\""
        );
    }
}
