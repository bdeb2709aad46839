//! What a run was ([`Event`]), as the audit log and the metrics name it.

use serde::Serialize;

/// What a run was, as the audit log and the metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Prolog,
    Epilog,
    Sync,
    Recover,
    Health,
    /// A new mapping became last-known-good, or one was rejected.
    MappingChanged,
}

impl Event {
    /// Every event, as `qoslane log --event` offers them.
    pub const ALL: &[Event] = &[
        Self::Prolog,
        Self::Epilog,
        Self::Sync,
        Self::Recover,
        Self::Health,
        Self::MappingChanged,
    ];

    /// Events that always have metric series, so rates and alerts see zeros.
    pub const COUNTED: &[Event] = &[
        Self::Prolog,
        Self::Epilog,
        Self::Sync,
        Self::Recover,
        Self::Health,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prolog => "prolog",
            Self::Epilog => "epilog",
            Self::Sync => "sync",
            Self::Recover => "recover",
            Self::Health => "health",
            Self::MappingChanged => "mapping_changed",
        }
    }
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
