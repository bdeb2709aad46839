//! What an assessment of this node's ports found ([`Assessment`]), and the
//! views the rest of qoslane takes of it: problems and warnings per level
//! (prolog, sync), the audit log's `fabric` field ([`FabricVerdict`]), the
//! `qoslane_fabric_aligned` gauge, health's one line. Pure; gathered by
//! `gather.rs`.

use serde::{Deserialize, Serialize};

use crate::fabric::first_hop::judge::{JudgedHop, LevelLine};
use crate::fabric::judge::check::PortLevel;
use crate::fabric::judge::lane::Lane;
use crate::fabric::tables::{PortId, PortIdentity, PortTables};

/// Whether an assessment may use the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeMode {
    /// Job start: use a valid cache entry; probe only ports without one.
    Cached,
    /// `sync`, `health`: probe every port and refresh the cache.
    Fresh,
}

/// The fabric as this node's ports show it: every level checked on every
/// ACTIVE InfiniBand port (and its first hop, when read).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Assessment {
    pub mode: ProbeMode,
    /// When the assessment ran, ms since the Unix epoch.
    pub assessed_at_ms: u64,
    /// The mapping's levels, highest priority first: every one was checked
    /// on every IB port.
    pub levels: Vec<String>,
    /// ACTIVE InfiniBand ports, with their tables and one verdict per level.
    pub ib_ports: Vec<IbPort>,
    /// ACTIVE Ethernet (RoCE) ports: no SL2VL; priority comes from the
    /// traffic class. Not probed.
    pub roce_ports: Vec<PortId>,
    /// Selected ports that were not checked: not ACTIVE, or of a link layer
    /// that is neither InfiniBand nor Ethernet.
    pub skipped: Vec<SkippedPort>,
    /// Ports left out by the mapping's `devices:`.
    pub unselected: Vec<PortId>,
    /// `devices:` entries that match no port of this node.
    pub unmatched_devices: Vec<String>,
    /// What happened to the cache (ignored because corrupt, not written).
    pub notes: Vec<String>,
}

/// The fabric part of one run's report (the audit log's `fabric` field):
/// typed, so every command says the same things the same way.
#[derive(Debug, Clone, Default)]
pub enum FabricVerdict {
    /// This run did not look at the fabric (`null`).
    #[default]
    NotChecked,
    /// `fabric_check: off` (`{"check": "off"}`).
    Off,
    /// The assessment itself failed (`{"check": POLICY, "error": …}`).
    CouldNotRun { policy: &'static str, error: String },
    /// One level (a Prolog).
    Level(LevelVerdict),
    /// Every level of the mapping, by name (`sync`, `health`).
    Levels(std::collections::BTreeMap<String, LevelVerdict>),
}

impl Serialize for FabricVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::NotChecked => s.serialize_none(),
            Self::Off => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("check", "off")?;
                m.end()
            }
            Self::CouldNotRun { policy, error } => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("check", policy)?;
                m.serialize_entry("error", error)?;
                m.end()
            }
            Self::Level(v) => v.serialize(s),
            Self::Levels(map) => map.serialize(s),
        }
    }
}

/// One level's fabric verdict.
#[derive(Debug, Clone, Serialize)]
pub struct LevelVerdict {
    pub mode: ProbeMode,
    pub ports: Vec<PortVerdict>,
    pub problems: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roce: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What one IB port showed for a level.
#[derive(Debug, Clone, Serialize)]
pub struct PortVerdict {
    pub port: String,
    pub sl: u8,
    pub vl: u8,
    pub want_vl: Option<u8>,
    pub oper_vls: String,
    pub aligned: bool,
    pub source: TablesSource,
    pub age_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TablesSource {
    /// Probed by this assessment.
    Probe,
    /// Taken from the fabric cache.
    Cache,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IbPort {
    pub port: PortId,
    pub identity: PortIdentity,
    pub rate: Option<String>,
    pub source: TablesSource,
    pub probed_at_ms: u64,
    pub tables: PortTables,
    /// In the mapping's level order.
    pub verdicts: Vec<PortLevel>,
    /// The switch the port is cabled to, when this assessment read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_hop: Option<JudgedHop>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkippedPort {
    pub port: PortId,
    pub link_layer: String,
    pub state: String,
    pub phys_state: String,
    pub active: bool,
    /// Selected by a non-empty `devices:`: the admin said it carries the
    /// levels, so when it is not ACTIVE every level fails.
    #[serde(default)]
    pub listed: bool,
}

impl SkippedPort {
    fn describe(&self) -> String {
        if self.active {
            format!(
                "{}: link layer {}, neither InfiniBand nor Ethernet",
                self.port, self.link_layer
            )
        } else {
            format!(
                "{}: not ACTIVE ({} port, state {}, phys_state {})",
                self.port, self.link_layer, self.state, self.phys_state
            )
        }
    }
}

impl Assessment {
    /// Problems (misalignments) for one level, as one-line messages; empty =
    /// aligned on every IB port (and its first hop, when read).
    pub fn problems(&self, level: &str) -> Vec<String> {
        let mut out = self.own_problems(level);
        if self.levels.iter().any(|l| l == level) {
            out.extend(self.hop_problems(level));
        }
        out
    }

    /// The problems of the node's own ports for one level.
    ///
    /// With no ACTIVE port at all (no HCA, all down, none selected) the level
    /// cannot be shown to reach its VL: that is a problem. With RoCE ports
    /// only, there is no SL2VL to check: no problem (see [`Self::warnings`]).
    pub fn own_problems(&self, level: &str) -> Vec<String> {
        if !self.levels.iter().any(|l| l == level) {
            return vec![format!("level `{level}` was not assessed")];
        }
        if self.no_active_port() {
            return vec![self.no_port()];
        }
        let mut out: Vec<String> = self
            .verdicts(level)
            .filter_map(|(_, v)| v.problem.clone())
            .collect();
        out.extend(self.listed_down().map(SkippedPort::describe));
        out
    }

    /// The ports `devices:` lists that are not ACTIVE: each fails every
    /// level, beside ACTIVE ports too (the admin guide's condition table).
    fn listed_down(&self) -> impl Iterator<Item = &SkippedPort> {
        self.skipped.iter().filter(|s| s.listed && !s.active)
    }

    /// The first hops' problems for one level (empty when none was read).
    pub fn hop_problems(&self, level: &str) -> Vec<String> {
        self.first_hop_lines(level, |a| &a.problems).collect()
    }

    /// The first hops' warnings for one level.
    pub fn hop_warnings(&self, level: &str) -> Vec<String> {
        self.first_hop_lines(level, |a| &a.warnings).collect()
    }

    /// When the oldest table of the first hops was read: the assessment's
    /// time, or earlier when some were carried from an earlier run.
    pub fn first_hop_at_ms(&self) -> u64 {
        self.ib_ports
            .iter()
            .filter_map(|p| p.first_hop.as_ref()?.read_at_ms)
            .fold(self.assessed_at_ms, u64::min)
    }

    /// Whether this assessment read the first hop of every IB port.
    pub fn read_first_hop(&self) -> bool {
        !self.ib_ports.is_empty() && self.ib_ports.iter().all(|p| p.first_hop.is_some())
    }

    /// Whether no selected port is ACTIVE: every level lost its carrier.
    pub fn no_active_port(&self) -> bool {
        self.ib_ports.is_empty() && self.roce_ports.is_empty()
    }

    /// The first hops' lines of one level (problems or warnings).
    fn first_hop_lines<'a>(
        &'a self,
        level: &'a str,
        which: impl Fn(&JudgedHop) -> &Vec<LevelLine> + 'a,
    ) -> impl Iterator<Item = String> + 'a {
        self.ib_ports
            .iter()
            .filter_map(|p| p.first_hop.as_ref())
            .flat_map(move |a| which(a).iter())
            .filter(move |l| l.level == level)
            .map(|l| l.line.clone())
    }

    /// First-hop output ports by (level, verdict), over every IB port: the
    /// `qoslane_first_hop_ports` gauge. `None` when no first hop was read.
    pub fn first_hop_counts(&self) -> Option<Vec<(String, String, u64)>> {
        let hops: Vec<&JudgedHop> = self
            .ib_ports
            .iter()
            .filter_map(|p| p.first_hop.as_ref())
            .collect();
        if hops.is_empty() {
            return None;
        }
        let mut counts: std::collections::BTreeMap<(String, String), u64> =
            std::collections::BTreeMap::new();
        for level in &self.levels {
            for lane in Lane::ALL {
                counts.insert((level.clone(), lane.as_str().to_owned()), 0);
            }
            counts.insert((level.clone(), "unread".to_owned()), 0);
        }
        for a in hops {
            for f in &a.findings {
                *counts
                    .entry((f.level.clone(), f.lane.as_str().to_owned()))
                    .or_default() += u64::try_from(f.out_ports.len()).unwrap_or(u64::MAX);
            }
            let unread = a.unread_ports();
            for level in &self.levels {
                *counts
                    .entry((level.clone(), "unread".to_owned()))
                    .or_default() += unread;
            }
        }
        Some(counts.into_iter().map(|((l, v), n)| (l, v, n)).collect())
    }

    pub fn warnings(&self, level: &str) -> Vec<String> {
        let mut out = self.own_warnings(level);
        out.extend(self.hop_warnings(level));
        out
    }

    /// The warnings of the node's own ports for one level.
    pub fn own_warnings(&self, level: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .verdicts(level)
            .filter_map(|(_, v)| v.warning.clone())
            .collect();
        if self.ib_ports.is_empty() && !self.roce_ports.is_empty() {
            out.push(format!(
                "no active InfiniBand port: SL2VL not checked; RoCE port(s) {} take the \
                 level's traffic_class",
                join(&self.roce_ports)
            ));
        }
        out.extend(
            self.unmatched_devices
                .iter()
                .map(|d| format!("devices entry `{d}` matches no port of this node")),
        );
        out
    }

    /// What was checked and found for one level: the audit log's `fabric`.
    pub fn level_verdict(&self, level: &str) -> LevelVerdict {
        LevelVerdict {
            mode: self.mode,
            ports: self
                .verdicts(level)
                .map(|(p, v)| PortVerdict {
                    port: p.port.to_string(),
                    sl: v.service_level,
                    vl: v.vl,
                    want_vl: v.want_vl,
                    oper_vls: p.tables.oper_vls.as_str().to_owned(),
                    aligned: v.aligned,
                    source: p.source.clone(),
                    age_ms: self.assessed_at_ms.saturating_sub(p.probed_at_ms),
                })
                .collect(),
            problems: self.problems(level),
            warnings: self.warnings(level),
            roce: self.roce_ports.iter().map(ToString::to_string).collect(),
            skipped: self.skipped.iter().map(SkippedPort::describe).collect(),
            notes: self.notes.clone(),
        }
    }

    /// For metrics: (device, port, level, aligned) for every checked pair.
    pub fn alignment(&self) -> Vec<(String, u32, String, bool)> {
        self.ib_ports
            .iter()
            .flat_map(|p| {
                p.verdicts.iter().map(|v| {
                    (
                        p.port.device.clone(),
                        p.port.port,
                        v.level.clone(),
                        v.aligned,
                    )
                })
            })
            .collect()
    }

    /// For health: the first problem of any level (highest priority first),
    /// else the first selected port that is not ACTIVE, as one line.
    pub fn first_problem(&self) -> Option<String> {
        self.levels
            .iter()
            .find_map(|l| {
                self.problems(l)
                    .into_iter()
                    .next()
                    .map(|p| format!("level {l}: {p}"))
            })
            .or_else(|| {
                self.skipped
                    .iter()
                    .find(|s| !s.active)
                    .map(SkippedPort::describe)
            })
    }

    /// (device, port) of the ports that were ACTIVE (InfiniBand and RoCE), to
    /// verify after applying settings.
    pub fn active_ports(&self) -> Vec<PortId> {
        self.ib_ports
            .iter()
            .map(|p| &p.port)
            .chain(&self.roce_ports)
            .cloned()
            .collect()
    }

    fn verdicts<'a>(&'a self, level: &'a str) -> impl Iterator<Item = (&'a IbPort, &'a PortLevel)> {
        self.ib_ports.iter().flat_map(move |p| {
            p.verdicts
                .iter()
                .filter(move |v| v.level == level)
                .map(move |v| (p, v))
        })
    }

    fn no_port(&self) -> String {
        let why = if !self.skipped.is_empty() {
            self.skipped
                .iter()
                .map(SkippedPort::describe)
                .collect::<Vec<_>>()
                .join("; ")
        } else if !self.unselected.is_empty() {
            format!("devices: selects none of {}", join(&self.unselected))
        } else {
            "no RDMA device in /sys/class/infiniband".to_owned()
        };
        format!("no active InfiniBand or RoCE port to carry the level ({why})")
    }
}

fn join(ports: &[PortId]) -> String {
    ports
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
