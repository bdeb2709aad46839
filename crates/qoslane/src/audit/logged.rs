//! One audit line as read back ([`LoggedEntry`]): the writer's
//! [`super::Entry`] field for field, its notes typed ([`Note`]: a health
//! check, or words), so the views read fields, never marker strings; and
//! which lines a reader keeps ([`Filter`]).

use std::time::SystemTime;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::job::qos::QosSource;
use crate::report::health::HealthCheck;
use crate::report::{Event, Outcome};
use crate::state::Change;
use crate::time::parse_rfc3339;

/// One audit line as read back: the writer's [`super::Entry`] field for
/// field (docs/admin-guide.md §7), so a field renamed on one side fails the
/// round-trip test below. `time`, `event` and `outcome` are required (every
/// line ever written has them); the rest default when absent. `event` and
/// `outcome` are kept as written: a log outlives the binary that reads it,
/// and `qoslane log` shows a word it does not know rather than drop the
/// line: [`Logged::Unknown`]. `fabric` is the verdict's JSON as written (its shape depends on
/// the run: `null`, one level, every level).
#[derive(Clone, Debug, Deserialize)]
pub struct LoggedEntry {
    pub time: String,
    #[serde(default)]
    pub node: String,
    pub event: Logged<Event>,
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
    pub outcome: Logged<Outcome>,
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
    /// The jobs whose level this run released, not being theirs (health).
    #[serde(default)]
    pub released_jobs: Vec<u64>,
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

/// Which entries to keep; `None`/empty matches everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub job: Option<u64>,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    pub outcomes: Vec<String>,
    pub events: Vec<String>,
    pub qos: Option<String>,
}

impl Filter {
    pub fn matches(&self, e: &LoggedEntry) -> bool {
        // A job's lines: its own runs', and a release of its level by a
        // run that is not its (health, the job gone).
        if let Some(job) = self.job
            && e.job_id != Some(job)
            && !e.released_jobs.contains(&job)
        {
            return false;
        }
        if !self.outcomes.is_empty() && !self.outcomes.iter().any(|o| e.outcome == o.as_str()) {
            return false;
        }
        if !self.events.is_empty() && !self.events.iter().any(|v| e.event == v.as_str()) {
            return false;
        }
        if self.qos.is_some() && e.qos != self.qos {
            return false;
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = parse_rfc3339(&e.time) else {
                return false;
            };
            if self.since.is_some_and(|since| t < since) || self.until.is_some_and(|u| t > u) {
                return false;
            }
        }
        true
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
            Self::Check(c) => f.pad(&c.note()),
            Self::Text(t) => f.pad(t),
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

/// A word of the audit line's vocabulary (`event`, `outcome`) as read: one
/// this binary knows, or one a newer binary wrote — shown as written, never
/// judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logged<T> {
    Known(T),
    Unknown(String),
}

/// A closed set of words, each written as [`Word::as_str`] says.
pub trait Word: Copy + PartialEq + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
}

impl Word for Event {
    const ALL: &'static [Self] = Event::ALL;
    fn as_str(self) -> &'static str {
        Event::as_str(self)
    }
}

impl Word for Outcome {
    const ALL: &'static [Self] = Outcome::ALL;
    fn as_str(self) -> &'static str {
        Outcome::as_str(self)
    }
}

impl<T: Word> Logged<T> {
    /// The word as written.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(w) => w.as_str(),
            Self::Unknown(s) => s,
        }
    }

    /// The word, if this binary knows it.
    pub fn known(&self) -> Option<T> {
        match self {
            Self::Known(w) => Some(*w),
            Self::Unknown(_) => None,
        }
    }
}

impl<T: Word> From<String> for Logged<T> {
    fn from(s: String) -> Self {
        T::ALL
            .iter()
            .find(|w| w.as_str() == s)
            .map_or(Self::Unknown(s), |w| Self::Known(*w))
    }
}

impl<'de, T: Word> Deserialize<'de> for Logged<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self::from)
    }
}

/// As written (padded as asked: `log` lays it out in a column).
impl<T: Word> std::fmt::Display for Logged<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl<T: Word> PartialEq<T> for Logged<T> {
    fn eq(&self, other: &T) -> bool {
        self.known() == Some(*other)
    }
}

/// The word as written equals `other`.
impl<T: Word> PartialEq<&str> for Logged<T> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line a newer binary wrote, with an event and an outcome this one
    /// does not know, is read (not skipped): the words kept as written,
    /// never taken for a known one; its notes typed.
    #[test]
    fn words_a_newer_binary_wrote_are_read_as_unknown() {
        let e: LoggedEntry = serde_json::from_str(
            r#"{"time":"t","event":"drain_check","outcome":"deferred",
                "notes":["level: WARN: level high: x","first hop read: y"]}"#,
        )
        .unwrap();
        assert_eq!(e.event, Logged::Unknown("drain_check".into()));
        assert_eq!(e.outcome, Logged::Unknown("deferred".into()));
        assert_eq!(format!("[{:<12}]", e.outcome), "[deferred    ]");
        assert!(e.event != Event::Health && e.outcome.known().is_none());
        assert!(e.notes[0].is_problem() && !e.notes[1].is_problem());
        assert_eq!(e.notes[1], "first hop read: y".to_owned());
        let known: LoggedEntry =
            serde_json::from_str(r#"{"time":"t","event":"health","outcome":"rolled_back"}"#)
                .unwrap();
        assert_eq!(
            (known.event, known.outcome),
            (
                Logged::Known(Event::Health),
                Logged::Known(Outcome::RolledBack)
            )
        );
    }
}
