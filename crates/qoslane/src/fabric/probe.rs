//! What a probe reads from one HCA port, and the [`Probe`] trait that reads
//! it. Today the reader is the `smpquery` program ([`super::smpquery`]); a
//! native SMP implementation (umad) can replace it behind the same trait.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::sysfs::PortId;
use crate::deadline::Deadline;
use crate::error::Result;

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

    /// The switch the port is cabled to ([`super::first_hop`]).
    fn first_hop(&self, port: &PortId, _deadline: &Deadline) -> super::first_hop::FirstHop {
        super::first_hop::FirstHop::Unavailable {
            error: format!("{port}: this probe cannot read switches"),
        }
    }
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<u8>", into = "Vec<u8>")]
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

impl TryFrom<Vec<u8>> for Sl2Vl {
    type Error = String;
    fn try_from(v: Vec<u8>) -> Result<Self, String> {
        let len = v.len();
        let table: [u8; 16] = v
            .try_into()
            .map_err(|_| format!("an SL2VL table has 16 entries, not {len}"))?;
        Self::new(table).ok_or_else(|| "an SL2VL entry is above 15".to_owned())
    }
}

impl From<Sl2Vl> for Vec<u8> {
    fn from(t: Sl2Vl) -> Self {
        t.0.to_vec()
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
