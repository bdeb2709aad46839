//! Validated mapping types. Every value here was checked by
//! [`super::validate`]; none of these types can be built with a wrong value.

use std::fmt;

pub use super::traffic::{SmTraffic, TrafficField};

/// An InfiniBand Service Level, 0..=15 (4 bits on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceLevel(u8);

/// A data Virtual Lane, 0..=14. VL15 is the management lane: an SL mapped to
/// it is dropped, so a mapping can never ask for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtualLane(u8);

/// A RoCE/GRH traffic class, 0..=255.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrafficClass(u8);

impl ServiceLevel {
    pub const MAX: u8 = 15;
    pub fn new(v: u64) -> Option<Self> {
        u8::try_from(v).ok().filter(|v| *v <= Self::MAX).map(Self)
    }
    pub fn get(self) -> u8 {
        self.0
    }
}

impl VirtualLane {
    pub const MAX: u8 = 14;
    pub fn new(v: u64) -> Option<Self> {
        u8::try_from(v).ok().filter(|v| *v <= Self::MAX).map(Self)
    }
    pub fn get(self) -> u8 {
        self.0
    }
}

impl TrafficClass {
    pub const MAX: u8 = 255;
    pub fn new(v: u64) -> Option<Self> {
        u8::try_from(v).ok().map(Self)
    }
    pub fn get(self) -> u8 {
        self.0
    }
}

macro_rules! display_inner {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}
display_inner!(ServiceLevel, VirtualLane, TrafficClass);

/// What to do when a level's fabric check fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FabricCheck {
    /// A misaligned port fails the prolog (rolled back, per `on_failure`).
    Enforce,
    /// A misaligned port is audited; the level is applied anyway.
    Warn,
    /// No probe is made.
    Off,
}

/// Where a level's SL comes from on a fabric whose SM gives paths their
/// own SLs, when its pinned SL closes a credit loop (`path_sl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSl {
    /// The level's `service_level`, or not granted.
    #[default]
    Pinned,
    /// The SL of each path's record, asked by the libraries that can.
    PathRecord,
}

impl PathSl {
    pub const NAMES: &[&str] = &["pinned", "path_record"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::PathRecord => "path_record",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pinned" => Some(Self::Pinned),
            "path_record" => Some(Self::PathRecord),
            _ => None,
        }
    }
}

/// What a failed prolog does to the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFailure {
    /// Roll back; the job runs on the baseline (no SL exports); exit 0.
    Continue,
    /// Roll back; the prolog exits non-zero so Slurm requeues the job.
    FailJob,
}

/// What a job whose QoS cannot be learnt (squeue slow, failed, or without
/// one QoS in its answer) gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnUnknownQos {
    /// The default level, as if no level listed its QoS; the job is told.
    DefaultLevel,
    /// Refused: the Prolog fails (Slurm requeues the job); the job is told.
    /// Also what a node with no usable mapping does.
    FailJob,
}

impl OnUnknownQos {
    pub const NAMES: &[&str] = &["default_level", "fail_job"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DefaultLevel => "default_level",
            Self::FailJob => "fail_job",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "default_level" => Some(Self::DefaultLevel),
            "fail_job" => Some(Self::FailJob),
            _ => None,
        }
    }
}

impl FabricCheck {
    pub const NAMES: &[&str] = &["enforce", "warn", "off"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Warn => "warn",
            Self::Off => "off",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "enforce" => Some(Self::Enforce),
            "warn" => Some(Self::Warn),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

impl OnFailure {
    pub const NAMES: &[&str] = &["continue", "fail_job"];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Continue => "continue",
            Self::FailJob => "fail_job",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "continue" => Some(Self::Continue),
            "fail_job" => Some(Self::FailJob),
            _ => None,
        }
    }
}

/// A `devices:` entry: an HCA, optionally one of its ports (`mlx5_0/1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSelector {
    pub device: String,
    pub port: Option<u32>,
}

impl DeviceSelector {
    pub fn matches(&self, device: &str, port: u32) -> bool {
        self.device == device && self.port.is_none_or(|p| p == port)
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}/{p}", self.device),
            None => f.write_str(&self.device),
        }
    }
}

/// An absolute, normalised path under `/sys/` or `/proc/sys/`, as written in
/// the mapping (not yet under the root prefix).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SettingPath(String);

impl SettingPath {
    /// The allowed trees. Anything else is refused: qoslane writes as root.
    pub const ALLOWED_PREFIXES: &[&str] = &["/sys/", "/proc/sys/"];

    /// Checks the path; the error is a message fragment for a diagnostic.
    pub fn new(s: &str) -> Result<Self, String> {
        if !s.starts_with('/') {
            return Err(format!("path `{s}` is not absolute"));
        }
        if s.contains('\0') {
            return Err("path contains a NUL byte".into());
        }
        if s.contains("//") {
            return Err(format!("path `{s}` is not normalised (`//`)"));
        }
        if s.ends_with('/') {
            return Err(format!("path `{s}` ends with `/`: it must name a file"));
        }
        if s.split('/').any(|c| c == ".." || c == ".") {
            return Err(format!(
                "path `{s}` is not normalised (`.` or `..` component)"
            ));
        }
        if !Self::ALLOWED_PREFIXES.iter().any(|p| s.starts_with(p)) {
            return Err(format!("path `{s}` is outside /sys/ and /proc/sys/"));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path relative to `/`, for joining under a root prefix.
    pub fn relative(&self) -> &str {
        &self.0[1..]
    }
}

impl fmt::Display for SettingPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One node setting a level asks for: write `value` to `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSetting {
    pub path: SettingPath,
    /// One line, no NUL.
    pub value: String,
}

/// A priority level. Levels are ordered from highest priority (index 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    pub name: String,
    pub qos: Vec<String>,
    pub service_level: ServiceLevel,
    pub virtual_lane: Option<VirtualLane>,
    pub traffic_class: Option<TrafficClass>,
    pub on_failure: Option<OnFailure>,
    /// On a fabric whose SM gives paths their own SLs, where a credit loop
    /// on its pinned SL sends the level (`path_sl`).
    pub path_sl: PathSl,
    pub node_settings: Vec<NodeSetting>,
    /// The traffic the Subnet Manager must answer with this level's SL
    /// beyond the job's own (`sm_traffic`): no two levels share any of it.
    pub sm_traffic: Vec<SmTraffic>,
}

/// A variable a site adds to the exports (`exports.add`): a library
/// qoslane's table does not list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteExport {
    pub variable: String,
    pub carries: crate::libraries::Carries,
    pub layers: crate::libraries::Layers,
}

/// The site's edits of the export table (`exports:`): entries added, and
/// the table's entries dropped by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportsEdit {
    pub add: Vec<SiteExport>,
    pub drop: Vec<String>,
}

/// A validated mapping file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Index into `levels` of the level for unlisted QoS names.
    default_level: usize,
    pub fabric_check: FabricCheck,
    pub on_failure: OnFailure,
    pub devices: Vec<DeviceSelector>,
    /// The oldest fabric probe (cache entry) a `fail_job` level's Prolog
    /// may rely on: an SM change cannot stay hidden from those jobs longer.
    pub fail_job_max_probe_age: std::time::Duration,
    /// What a job whose QoS cannot be learnt gets.
    pub on_unknown_qos: OnUnknownQos,
    /// The site's edits of the export table.
    pub exports: ExportsEdit,
    /// Highest priority first.
    levels: Vec<Level>,
}

/// How a QoS name found its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelMatch {
    /// A level lists the QoS.
    Listed,
    /// No level lists it: the default level.
    Default,
}

impl Mapping {
    /// Built only by the validator, which has checked that `default_level`
    /// indexes `levels` and that `levels` is non-empty.
    pub(super) fn new_validated(
        default_level: usize,
        fabric_check: FabricCheck,
        on_failure: OnFailure,
        devices: Vec<DeviceSelector>,
        levels: Vec<Level>,
    ) -> Self {
        debug_assert!(default_level < levels.len());
        Self {
            default_level,
            fabric_check,
            on_failure,
            devices,
            fail_job_max_probe_age: Self::DEFAULT_FAIL_JOB_MAX_PROBE_AGE,
            on_unknown_qos: OnUnknownQos::DefaultLevel,
            exports: ExportsEdit::default(),
            levels,
        }
    }

    /// `fail_job_max_probe_age` when the mapping does not say.
    pub const DEFAULT_FAIL_JOB_MAX_PROBE_AGE: std::time::Duration =
        std::time::Duration::from_secs(15);
    /// The most it may be: the cache's own bound for every level.
    pub const MAX_FAIL_JOB_MAX_PROBE_AGE: std::time::Duration = std::time::Duration::from_secs(300);

    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    pub fn default_level(&self) -> &Level {
        &self.levels[self.default_level]
    }

    /// The level's rank: 0 is the highest priority.
    pub fn rank(&self, name: &str) -> Option<usize> {
        self.levels.iter().position(|l| l.name == name)
    }

    pub fn level(&self, name: &str) -> Option<&Level> {
        self.levels.iter().find(|l| l.name == name)
    }

    /// The level a job of QoS `qos` gets. Slurm stores QoS names in lower case,
    /// so the comparison ignores ASCII case.
    pub fn level_for_qos(&self, qos: Option<&str>) -> (&Level, LevelMatch) {
        if let Some(q) = qos {
            for l in &self.levels {
                if l.qos.iter().any(|n| n.eq_ignore_ascii_case(q)) {
                    return (l, LevelMatch::Listed);
                }
            }
        }
        (self.default_level(), LevelMatch::Default)
    }

    /// The failure policy in force for `level`.
    pub fn on_failure_for(&self, level: &Level) -> OnFailure {
        level.on_failure.unwrap_or(self.on_failure)
    }

    /// The SLs the mapping gives the node's own traffic, not a job's
    /// (IPoIB, storage): each level's that declares `sm_traffic` and then
    /// the default level's, which the SM's policy (`fabric sm-config
    /// --qos-policy`) gives every other path record query. Empty when no
    /// level declares `sm_traffic`: the mapping then says nothing of where
    /// that traffic goes, and every SL but a job's is off its level.
    pub fn sm_traffic_sls(&self) -> std::collections::BTreeSet<u8> {
        let declared: std::collections::BTreeSet<u8> = self
            .levels()
            .iter()
            .filter(|l| !l.sm_traffic.is_empty())
            .map(|l| l.service_level.get())
            .collect();
        if declared.is_empty() {
            return declared;
        }
        let mut sls = declared;
        sls.insert(self.default_level().service_level.get());
        sls
    }
}
