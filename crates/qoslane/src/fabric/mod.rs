//! Is the fabric configured for the levels? For every selected HCA port:
//! discover it in sysfs, read its SL2VL table, OperVLs and VL arbitration
//! tables by `smpquery` or take them from the cache, and check every level
//! of the mapping. The result is an [`Assessment`].
//!
//! The node never changes the tables (the Subnet Manager owns them); it
//! refuses a level whose SL lands on VL15, outside OperVLs, or on another VL
//! than the mapping names. docs/fabric.md is the admin's version.
//!
//! The modules, in layers (each imports only the ones before it):
//!
//! - [`tables`]: what is read (SL2VL, OperVLs, VLArb, port and node info,
//!   the first hop as read, the topology); plain data;
//! - [`parse`]: every parser of `smpquery` and `ibnetdiscover -p` output
//!   and `perfquery` output (pure; all fuzzed); [`lane`]: the one set of
//!   lane rules; [`pma`]: the fabric's own counters and what two readings
//!   show;
//! - [`check`] (one level on one port), [`first_hop_judge`] (the lane rules
//!   on a first hop), [`sm_config`] (the SM's options): pure judgements;
//!   [`assessment`]: what an assessment found, [`FabricVerdict`];
//! - [`pool`], [`smpquery`] (the runner), [`perfquery`] (the node's ports'
//!   counters), [`sysfs`], [`cache`]: I/O;
//! - [`first_hop_read`] (the switch a port is cabled to, by directed route),
//!   [`probe`] (the node's own ports, the [`Probe`] trait), [`sweep`] (every
//!   egress port of the fabric);
//! - [`gather`]: an assessment of this node's ports ([`assess`]);
//! - [`policy`]: `fabric_check: enforce | warn | off`, judged once; commands
//!   read its [`policy::Judgement`].
//!
//! This file only declares and re-exports (no child imports from it).

pub mod counters;
pub mod first_hop;
pub mod gather;
pub mod judge;
pub mod read;
pub mod sweep;
pub mod tables;

pub use counters::{pma, wait};
pub use judge::{assessment, check, lane, sm_config};

/// The fabric policy as the commands call it: the pure judgement's types
/// (`judge/policy.rs`) and the entry points that gather, then judge
/// (`gather/policy.rs`).
pub mod policy {
    pub use super::gather::policy::{judge, judge_dry, judge_health, judge_level};
    pub use super::judge::policy::{Alignment, HopCount, Judgement, Scope};
}
pub use read::{cache, parse, perfquery, sysfs, umad};
pub use sweep::page;

pub use assessment::{
    Assessment, FabricVerdict, IbPort, LevelVerdict, PortVerdict, ProbeMode, SkippedPort,
    TablesSource,
};
pub use check::PortLevel;
pub use gather::{AssessOptions, assess, assess_with, discover, ports_not_active};
pub use read::in_process::InProcess;
pub use read::reader::Reader;
pub use read::smpquery::Smpquery;
pub use sysfs::LinkLayer;
pub use tables::{PortId, PortIdentity, PortTables, Sl2Vl, VlArb, VlArbEntry, VlArbState, VlRange};
