//! Is the fabric configured for the levels? For every selected HCA port:
//! discover it in sysfs, read its SL2VL table, OperVLs and VL arbitration
//! tables (or take them from the cache), and check every level of the
//! mapping; `sync`, `health` and some Prologs also read the switch each port
//! is cabled to (the first hop); `qoslane fabric audit` reads every egress
//! port of the fabric. docs/fabric.md is the admin's version.
//!
//! The node never changes the tables (the Subnet Manager owns them); it
//! refuses a level whose SL lands on VL15, outside OperVLs, or on another VL
//! than the mapping names.
//!
//! The folders, by role (CONTRIBUTING's layer table has a row for each):
//!
//! - [`tables`]: what is read, as plain data;
//! - [`judge`]: judging, pure — the lane rules, one level on one port, the
//!   assessment's views, the fabric policy on what was gathered, the SM's
//!   options;
//! - [`counters`]: the fabric's own counters as data and judged;
//! - [`read`]: every read of the fabric, through one trait
//!   ([`Reader`]): by programs ([`Smpquery`]: smpquery, perfquery; several
//!   at once on the caller's thread) or in process ([`InProcess`]:
//!   libibumad, a window of Gets in flight); sysfs, the cache, the parsers;
//! - [`first_hop`]: the switch a port is cabled to — read, judged, and
//!   shared per leaf by `health`;
//! - [`sweep`]: the audit of every egress port and its HTML page;
//! - [`gather`]: an assessment of this node's ports ([`assess`]) and the
//!   policy's gather step; commands read its [`policy::Judgement`].
//!
//! This file only declares and re-exports (no child imports from it). The
//! module paths `fabric::{assessment, cache, check, lane, perfquery, pma,
//! sysfs}` are kept as re-exports for the commands that name them; `fabric::policy` is the
//! policy's two halves under the names the commands call.

pub mod counters;
pub mod first_hop;
pub mod gather;
pub mod judge;
pub mod read;
pub mod sweep;
pub mod tables;

pub use counters::pma;
pub use judge::{assessment, check, lane};
pub use read::{cache, perfquery, sysfs};

/// The fabric policy as the commands call it: the pure judgement's types
/// (`judge/policy.rs`) and the entry points that gather, then judge
/// (`gather/policy.rs`).
pub mod policy {
    pub use super::gather::policy::{judge, judge_dry, judge_health, judge_level};
    pub use super::judge::policy::{Alignment, HopCount, Judgement, Scope};
}

pub use assessment::{
    Assessment, FabricVerdict, IbPort, LevelVerdict, PortVerdict, ProbeMode, SkippedPort,
    TablesSource,
};
pub use gather::{AssessOptions, assess, assess_with, discover, ports_not_active};
pub use judge::check::PortLevel;
pub use read::in_process::InProcess;
pub use read::reader::Reader;
pub use read::smpquery::Smpquery;
pub use sysfs::LinkLayer;
pub use tables::{PortId, PortIdentity, PortTables, Sl2Vl, VlArb, VlArbEntry, VlArbState, VlRange};
