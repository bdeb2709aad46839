//! The levels placement places and their node features: every level whose
//! policy is `fail_job`, with `qoslane_<level>`, and the feature every node
//! keeps active. Below the rest of `slurm_config/`, which all use it.

use crate::mapping::{Mapping, OnFailure};

/// The feature every node keeps active: what a job's constraint becomes when
/// its QoS changes to one without a level feature (Slurm reads an empty value
/// set from Lua as "no change").
pub const ANY_NODE_FEATURE: &str = "qoslane";
/// A level's node feature is this prefix and its name.
pub const FEATURE_PREFIX: &str = "qoslane_";
/// One level placed: its feature and the QoS names that take it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlacedLevel {
    pub level: String,
    pub feature: String,
    pub qos: Vec<String>,
}

/// A level's node feature.
pub fn feature_of(level: &str) -> String {
    format!("{FEATURE_PREFIX}{level}")
}

/// The levels placed: every level whose policy is `fail_job`, in the
/// mapping's order, with its feature and QoS names (as Slurm stores them: in
/// lower case).
pub fn placed_levels(mapping: &Mapping) -> Vec<PlacedLevel> {
    mapping
        .levels()
        .iter()
        .filter(|l| mapping.on_failure_for(l) == OnFailure::FailJob)
        .map(|l| PlacedLevel {
            level: l.name.clone(),
            feature: feature_of(&l.name),
            qos: l.qos.iter().map(|q| q.to_ascii_lowercase()).collect(),
        })
        .collect()
}
