//! One audit line as read back ([`LoggedEntry`]): the writer's
//! [`super::Entry`] field for field, its notes typed ([`Note`]: a health
//! check, or words), so the views read fields, never marker strings.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::job::qos::QosSource;
use crate::report::health::HealthCheck;
use crate::state::Change;

/// One audit line as read back: the writer's [`super::Entry`] field for
/// field (docs/admin-guide.md §7), so a field renamed on one side fails the
/// round-trip test below. `time`, `event` and `outcome` are required (every
/// line ever written has them); the rest default when absent. `event` and
/// `outcome` are kept as written: a log outlives the binary that reads it,
/// and `qoslane log` shows a word it does not know rather than drop the
/// line. `fabric` is the verdict's JSON as written (its shape depends on
/// the run: `null`, one level, every level).
#[derive(Clone, Debug, Deserialize)]
pub struct LoggedEntry {
    pub time: String,
    #[serde(default)]
    pub node: String,
    pub event: String,
    #[serde(default)]
    pub job_id: Option<u64>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub qos: Option<String>,
    #[serde(default)]
    pub qos_source: Option<QosSource>,
    #[serde(default)]
    pub level: Option<String>,
    #[serde(default)]
    pub service_level: Option<u8>,
    #[serde(default)]
    pub virtual_lane: Option<u8>,
    #[serde(default)]
    pub changes: Vec<Change>,
    #[serde(default)]
    pub fabric: Value,
    pub outcome: String,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub duration_ms: f64,
    #[serde(default)]
    pub mapping_sha256: Option<String>,
    #[serde(default)]
    pub settings_gone: Vec<String>,
    #[serde(default)]
    pub notes: Vec<Note>,
    /// An Epilog's counter evidence as written (`null` when none).
    #[serde(default)]
    pub evidence: Value,
}

impl LoggedEntry {
    /// The fabric verdict's problems (a one-level verdict has them).
    pub fn fabric_problems(&self) -> impl Iterator<Item = &str> {
        self.fabric["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }
}

/// One note of an audit line as read: a health check (its written form,
/// [`HealthCheck::from_note`]) or words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    Check(HealthCheck),
    Text(String),
}

impl Note {
    pub fn of(note: String) -> Self {
        HealthCheck::from_note(&note).map_or(Self::Text(note), Self::Check)
    }

    /// The health check this note is, if it is one.
    pub fn check(&self) -> Option<&HealthCheck> {
        match self {
            Self::Check(c) => Some(c),
            Self::Text(_) => None,
        }
    }

    /// A health check that warned or failed.
    pub fn is_problem(&self) -> bool {
        self.check().is_some_and(HealthCheck::is_problem)
    }
}

impl<'de> Deserialize<'de> for Note {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::of)
    }
}

/// As written.
impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Check(c) => f.write_str(&c.note()),
            Self::Text(t) => f.write_str(t),
        }
    }
}

/// A note as read equals the note as written.
impl PartialEq<String> for Note {
    fn eq(&self, other: &String) -> bool {
        match self {
            Self::Check(c) => c.note() == *other,
            Self::Text(t) => t == other,
        }
    }
}
