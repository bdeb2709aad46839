//! The Subnet Manager's side of a mapping: the OpenSM QoS options that make
//! the fabric carry every level on its lane (`qoslane fabric sm-config`).
//! Pure: a mapping and the hardware's VLCap in, `opensm.conf` lines out, or
//! the reasons the fabric cannot do it.
//!
//! - **SL → VL**: each level's SL on its `virtual_lane` (a level without one
//!   gets its SL's number when that VL is free and within VLCap, else the
//!   lowest free VL); every SL no level uses goes to the lowest tier's VL,
//!   which is scheduled, never to VL 15. The same table for CA ports, switch
//!   external ports and switch port 0 (the SL stays on its VL hop by hop).
//! - **VL arbitration** in the mapping's order (highest first): the top
//!   `high_tiers` levels' VLs in the high-priority table, the rest in the
//!   low-priority table with weights that halve tier by tier; every data VL
//!   in use also appears in the low table, so nothing is starved when the
//!   high table's limit is spent.
//! - **`qos_high_limit`** below 255 (unlimited), so the high table cannot
//!   starve the low one forever.
//! - **`max_op_vls`**: the smallest OperVLs range holding every VL used.
//! - **`qos_policy_file`**, when a level declares `sm_traffic`: the policy
//!   `sm_policy.rs` writes (the SL of rdma_cm, IPoIB and storage traffic).
//!
//! Refused: a VL beyond VLCap, more levels without a `virtual_lane` than
//! free VLs, and one VL shared by a level in the high table and one in the
//! low table. (Two levels never share an SL: the mapping's validation
//! refuses it, at the line.)

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::fabric::tables::VlRange;
use crate::mapping::{Level, Mapping};

/// Weight of a VL in the high-priority table (64-byte units).
pub const HIGH_WEIGHT: u8 = 64;
/// Weight of the first low-priority tier; each next tier gets half, at
/// least [`MIN_WEIGHT`].
pub const LOW_TOP_WEIGHT: u8 = 128;
pub const MIN_WEIGHT: u8 = 8;
/// Weight in the low table of a VL that is served by the high table.
pub const HIGH_IN_LOW_WEIGHT: u8 = 16;
/// `qos_high_limit`: 4 KiB units the high table may send while low-priority
/// packets wait (255 would be unlimited).
pub const HIGH_LIMIT: u8 = 16;

/// How the SM config is made.
#[derive(Clone, Debug)]
pub struct Options {
    /// The data VLs the hardware has (PortInfo.VLCap), typically VL0-7.
    pub vl_cap: VlRange,
    /// How many of the top levels go into the high-priority table.
    pub high_tiers: usize,
    /// Where the SM host keeps the QoS policy (`qos_policy_file`), named in
    /// the options when a level declares `sm_traffic`.
    pub policy_file: String,
}

/// One level's place in the SM's tables: its SL, VL, arbitration table and
/// weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub level: String,
    pub sl: u8,
    pub vl: u8,
    /// The level named the VL (`virtual_lane`), or it was chosen here.
    pub named: bool,
    pub high: bool,
    pub weight: u8,
}

/// The generated configuration.
#[derive(Clone, Debug, Serialize)]
pub struct SmConfig {
    pub lanes: Vec<Placement>,
    pub sl2vl: [u8; 16],
    /// `max_op_vls` code (1=VL0 2=VL0-1 3=VL0-3 4=VL0-7 5=VL0-14).
    pub max_op_vls: u8,
    pub data_vls: u8,
    /// (VL, weight), in table order.
    pub vlarb_high: Vec<(u8, u8)>,
    pub vlarb_low: Vec<(u8, u8)>,
    pub high_limit: u8,
    /// The `opensm.conf` options, in file order: (key, value, comment).
    pub options: Vec<(String, String, String)>,
}

/// The SM configuration for `mapping`, or every reason it cannot be made.
pub fn generate(mapping: &Mapping, opts: &Options) -> Result<SmConfig, Vec<String>> {
    let levels = mapping.levels();
    let high_tiers = opts.high_tiers.min(levels.len().saturating_sub(1));
    let vl_of = place_vls(levels, opts.vl_cap, high_tiers)?;
    let lanes = weigh_lanes(levels, &vl_of, high_tiers);

    // SL2VL: unused SLs on the lowest tier's VL.
    let lowest = lanes.last().map_or(0, |l| l.vl);
    let mut sl2vl = [lowest; 16];
    for l in &lanes {
        sl2vl[usize::from(l.sl)] = l.vl;
    }
    let max_vl = sl2vl.iter().copied().max().unwrap_or(0);
    let max_op_vls = (1..=5u8)
        .find(|&c| VlRange::from_code(c).is_some_and(|r| r.contains(max_vl)))
        .unwrap_or(5);
    let data_vls = data_vls(max_op_vls);

    let (vlarb_high, vlarb_low) = arbitration_tables(&lanes);

    let mut options = options(mapping, &lanes, &sl2vl, max_op_vls, &vlarb_high, &vlarb_low);
    if super::sm_policy::wanted(mapping) {
        options.push((
            "qos_policy_file".into(),
            opts.policy_file.clone(),
            "the SL the SM answers path records with for each level's sm_traffic \
             (rdma_cm, IPoIB, storage): `qoslane fabric sm-config --qos-policy`"
                .into(),
        ));
    }
    Ok(SmConfig {
        lanes,
        sl2vl,
        max_op_vls,
        data_vls,
        vlarb_high,
        vlarb_low,
        high_limit: HIGH_LIMIT,
        options,
    })
}

/// Each level's VL and whether the level named it: levels that name a VL
/// first, then the others take what is free; every reason it cannot be done.
fn place_vls(
    levels: &[Level],
    vl_cap: VlRange,
    high_tiers: usize,
) -> Result<Vec<(u8, bool)>, Vec<String>> {
    let cap = vl_cap.data_vls();
    let mut problems = Vec::new();

    let mut vl_of: Vec<Option<(u8, bool)>> = vec![None; levels.len()];
    for (i, l) in levels.iter().enumerate() {
        if let Some(v) = l.virtual_lane {
            let v = v.get();
            if v >= cap {
                problems.push(format!(
                    "level {} names VL {v}, but the hardware's VLCap is {} ({cap} data VLs: \
                     VL 0..={}); use a lower virtual_lane or --vl-cap if the HCAs and switches \
                     have more",
                    l.name,
                    vl_cap,
                    cap - 1
                ));
            }
            vl_of[i] = Some((v, true));
        }
    }
    let taken = |vl_of: &[Option<(u8, bool)>], v: u8| vl_of.iter().flatten().any(|(x, _)| *x == v);
    for (i, l) in levels.iter().enumerate() {
        if vl_of[i].is_some() {
            continue;
        }
        let sl = l.service_level.get();
        let chosen = (sl < cap && !taken(&vl_of, sl))
            .then_some(sl)
            .or_else(|| (0..cap).find(|&v| !taken(&vl_of, v)));
        match chosen {
            Some(v) => vl_of[i] = Some((v, false)),
            None => problems.push(format!(
                "level {} names no virtual_lane and every one of the {cap} data VLs of {} is \
                 taken by another level",
                l.name, vl_cap
            )),
        }
    }
    // One VL, one arbitration table.
    for (i, a) in levels.iter().enumerate() {
        for (j, b) in levels.iter().enumerate().skip(i + 1) {
            if let (Some((va, _)), Some((vb, _))) = (vl_of[i], vl_of[j])
                && va == vb
                && (i < high_tiers) != (j < high_tiers)
            {
                problems.push(format!(
                    "levels {} (high-priority table) and {} (low-priority table) share VL \
                     {va}: a VL is in one arbitration class; give them different \
                     virtual_lanes or change --high-tiers",
                    a.name, b.name
                ));
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(vl_of.into_iter().flatten().collect())
}

/// The lanes with their weights, in the mapping's order: the high tiers
/// share one weight, each low tier half the one above, a VL shared with a
/// higher level served by that level's entry.
fn weigh_lanes(levels: &[Level], vl_of: &[(u8, bool)], high_tiers: usize) -> Vec<Placement> {
    let mut lanes = Vec::new();
    let mut low_rank = 0u32;
    for (i, (l, &(vl, named))) in levels.iter().zip(vl_of).enumerate() {
        let high = i < high_tiers;
        let first_on_vl = vl_of[..i].iter().all(|(v, _)| *v != vl);
        let weight = if high {
            HIGH_WEIGHT
        } else if first_on_vl {
            let w = LOW_TOP_WEIGHT
                .checked_shr(low_rank)
                .unwrap_or(0)
                .max(MIN_WEIGHT);
            low_rank += 1;
            w
        } else {
            // Shares the VL of a higher level: served by that entry.
            lanes
                .iter()
                .find(|x: &&Placement| x.vl == vl)
                .map_or(MIN_WEIGHT, |x| x.weight)
        };
        lanes.push(Placement {
            level: l.name.clone(),
            sl: l.service_level.get(),
            vl,
            named,
            high,
            weight,
        });
    }
    lanes
}

/// A VL arbitration table: (VL, weight), in table order.
type VlArbTable = Vec<(u8, u8)>;

/// The high and low VL arbitration tables: each VL once in its class's table,
/// the high VLs also in the low one.
fn arbitration_tables(lanes: &[Placement]) -> (VlArbTable, VlArbTable) {
    let mut vlarb_high: Vec<(u8, u8)> = Vec::new();
    let mut vlarb_low: Vec<(u8, u8)> = Vec::new();
    for l in lanes {
        if l.high {
            if !vlarb_high.iter().any(|(v, _)| *v == l.vl) {
                vlarb_high.push((l.vl, l.weight));
            }
        } else if !vlarb_low.iter().any(|(v, _)| *v == l.vl) {
            vlarb_low.push((l.vl, l.weight));
        }
    }
    // High VLs also in the low table (never starved once the limit is
    // spent), after the low tiers.
    for &(v, _) in &vlarb_high.clone() {
        if !vlarb_low.iter().any(|(x, _)| *x == v) {
            vlarb_low.push((v, HIGH_IN_LOW_WEIGHT));
        }
    }
    if vlarb_high.is_empty() {
        // An empty high table would be "0:0"; OpenSM wants an entry.
        vlarb_high.push((lanes.first().map_or(0, |l| l.vl), 0));
    }
    (vlarb_high, vlarb_low)
}

fn data_vls(max_op_vls: u8) -> u8 {
    VlRange::from_code(max_op_vls).map_or(15, VlRange::data_vls)
}

fn options(
    mapping: &Mapping,
    lanes: &[Placement],
    sl2vl: &[u8; 16],
    max_op_vls: u8,
    high: &[(u8, u8)],
    low: &[(u8, u8)],
) -> Vec<(String, String, String)> {
    let sl2vl_s = sl2vl
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let arb = |t: &[(u8, u8)]| {
        t.iter()
            .map(|(v, w)| format!("{v}:{w}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let by_vl = |t: &[(u8, u8)]| {
        t.iter()
            .map(|(v, w)| {
                let names: Vec<&str> = lanes
                    .iter()
                    .filter(|l| l.vl == *v)
                    .map(|l| l.level.as_str())
                    .collect();
                format!("VL {v} w{w}: {}", names.join("+"))
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let levels_sl: String = lanes
        .iter()
        .map(|l| format!("{} SL {}->VL {}", l.level, l.sl, l.vl))
        .collect::<Vec<_>>()
        .join(", ");
    let unused = format!(
        "SLs no level uses -> VL {} ({}, the lowest tier)",
        lanes.last().map_or(0, |l| l.vl),
        mapping
            .levels()
            .last()
            .map_or("", |l: &Level| l.name.as_str())
    );
    let mut o: Vec<(String, String, String)> = vec![
        (
            "qos".into(),
            "TRUE".into(),
            "the SM programs the tables below".into(),
        ),
        (
            "max_op_vls".into(),
            max_op_vls.to_string(),
            format!(
                "OperVLs {} holds every VL used",
                VlRange::from_code(max_op_vls).map_or("?", VlRange::as_str)
            ),
        ),
    ];
    for (prefix, what) in [
        ("qos", "every port type (default)"),
        ("qos_ca", "HCA ports"),
        ("qos_swe", "switch external ports"),
        ("qos_sw0", "switch port 0"),
    ] {
        o.push((
            format!("{prefix}_max_vls"),
            data_vls(max_op_vls).to_string(),
            format!("{what}: the data VLs in use"),
        ));
        o.push((
            format!("{prefix}_high_limit"),
            HIGH_LIMIT.to_string(),
            format!("{what}: high table sends at most {HIGH_LIMIT} x 4 KiB while low waits"),
        ));
        o.push((
            format!("{prefix}_vlarb_high"),
            arb(high),
            format!("{what}: high priority: {}", by_vl(high)),
        ));
        o.push((
            format!("{prefix}_vlarb_low"),
            arb(low),
            format!("{what}: low priority: {}", by_vl(low)),
        ));
        o.push((
            format!("{prefix}_sl2vl"),
            sl2vl_s.clone(),
            format!("{what}: {levels_sl}; {unused}"),
        ));
    }
    o
}

impl SmConfig {
    /// The `opensm.conf` fragment: a header, then each option after the
    /// comment that says which levels it serves.
    pub fn to_conf(&self, source: &str, sha256: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# OpenSM QoS for the qoslane mapping {source}");
        let _ = writeln!(s, "# mapping sha256 {sha256}");
        let _ = writeln!(
            s,
            "# generated by `qoslane fabric sm-config`; check the fabric after the SM applied it:"
        );
        let _ = writeln!(s, "#   qoslane fabric audit");
        let _ = writeln!(s, "# levels, highest first:");
        for l in &self.lanes {
            let _ = writeln!(
                s,
                "#   {:<20} SL {:>2} -> VL {:>2}  {} table, weight {}{}",
                l.level,
                l.sl,
                l.vl,
                if l.high { "high" } else { "low " },
                l.weight,
                if l.named {
                    ""
                } else {
                    " (VL chosen: no virtual_lane)"
                }
            );
        }
        for (k, v, c) in &self.options {
            let _ = writeln!(s, "\n# {c}\n{k} {v}");
        }
        s
    }

    /// The options as a JSON object (for the Omnia playbook to apply).
    pub fn options_json(&self) -> serde_json::Value {
        let m: BTreeMap<&str, &str> = self
            .options
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        serde_json::json!(m)
    }
}
