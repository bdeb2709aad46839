//! A health check as a run reports it: its name, how it ended (`ok`,
//! `warn`, `drain`) and its detail. `qoslane health` makes them; its audit
//! line carries each as one note in the written form [`HealthCheck::note`]
//! (`NAME: ok: DETAIL`, `NAME: WARN: DETAIL`, `NAME: FAIL: DETAIL`: the
//! audit line's format, docs/admin-guide.md §7), and the audit reader takes
//! them back with [`HealthCheck::from_note`], so `status` and `log` read
//! typed checks. The written form is made and parsed here only.

use serde::Serialize;

/// How a check ended: only `drain` means the node cannot serve jobs safely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Ok,
    Warn,
    Drain,
}

impl CheckStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Drain => "drain",
        }
    }

    /// The word of the written form.
    fn mark(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "WARN",
            Self::Drain => "FAIL",
        }
    }
}

/// One check of a health run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    /// What was checked (`mapping`, `state`, `journal`, `records`,
    /// `grants`, `port`, `level`).
    pub name: String,
    pub status: CheckStatus,
    pub detail: String,
}

impl HealthCheck {
    pub fn new(name: &str, status: CheckStatus, detail: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            status,
            detail: detail.into(),
        }
    }

    /// A warning or a failure: what `status` and `log` show first.
    pub fn is_problem(&self) -> bool {
        self.status != CheckStatus::Ok
    }

    /// The written form, one audit note.
    pub fn note(&self) -> String {
        format!("{}: {}: {}", self.name, self.status.mark(), self.detail)
    }

    /// A note in the written form, as a check; `None` for any other note
    /// (a check's name is one lowercase word).
    pub fn from_note(note: &str) -> Option<Self> {
        let (name, rest) = note.split_once(": ")?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            return None;
        }
        let (mark, detail) = rest.split_once(": ")?;
        let status = [CheckStatus::Ok, CheckStatus::Warn, CheckStatus::Drain]
            .into_iter()
            .find(|s| s.mark() == mark)?;
        Some(Self::new(name, status, detail))
    }
}

impl std::fmt::Display for HealthCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(&self.note())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_reads_back_from_its_note_and_no_other_note_is_one() {
        for status in [CheckStatus::Ok, CheckStatus::Warn, CheckStatus::Drain] {
            let c = HealthCheck::new("level", status, "level high: fabric (warn): x: y");
            assert_eq!(HealthCheck::from_note(&c.note()), Some(c));
        }
        assert_eq!(
            HealthCheck::new("journal", CheckStatus::Drain, "d").note(),
            "journal: FAIL: d"
        );
        for other in [
            "released the level of job(s) 1: Slurm no longer has them: x",
            "mlx5_0/1: SL 3 -> VL 15: dropped",
            "counters: not read: x",
            "QoS unknown, default level used: squeue timed out",
            "level: warn: lowercase is not the written form",
        ] {
            assert_eq!(HealthCheck::from_note(other), None, "{other}");
        }
    }
}
