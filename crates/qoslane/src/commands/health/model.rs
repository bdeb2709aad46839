//! What `qoslane health` found, as one value: `--format json` is this,
//! serialised — `{"checks": [{"check", "detail", "ok", "status"}, …],
//! "healthy", "warnings"}` (keys in this order; `ok` is false only for a
//! `drain`; `status` is `ok`, `warn` or `drain`); the human form and the
//! audit line's notes are rendered from it. Made only by [`super::judge`].

use serde::{Serialize, Serializer};

use crate::report::health::{CheckStatus, HealthCheck};

#[derive(Debug, Serialize)]
pub struct NodeHealth {
    /// Every check, in the order they are listed.
    #[serde(serialize_with = "rows")]
    pub checks: Vec<HealthCheck>,
    /// No check drains the node.
    pub healthy: bool,
    /// Checks that warned.
    pub warnings: usize,
}

impl NodeHealth {
    pub fn of(checks: Vec<HealthCheck>) -> Self {
        Self {
            healthy: !checks.iter().any(|c| c.status == CheckStatus::Drain),
            warnings: checks
                .iter()
                .filter(|c| c.status == CheckStatus::Warn)
                .count(),
            checks,
        }
    }

    /// The first check that drains the node: its detail is the reason.
    pub fn drain(&self) -> Option<&HealthCheck> {
        self.checks.iter().find(|c| c.status == CheckStatus::Drain)
    }
}

/// One check in the JSON form.
#[derive(Serialize)]
struct Row<'a> {
    check: &'a str,
    detail: &'a str,
    ok: bool,
    status: CheckStatus,
}

fn rows<S: Serializer>(checks: &[HealthCheck], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(checks.iter().map(|c| Row {
        check: &c.name,
        detail: &c.detail,
        ok: c.status != CheckStatus::Drain,
        status: c.status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON form, key for key, as `health --format json` has written it.
    #[test]
    fn the_json_form_keeps_its_keys_and_order() {
        let h = NodeHealth::of(vec![
            HealthCheck::new("mapping", CheckStatus::Warn, "w"),
            HealthCheck::new("journal", CheckStatus::Drain, "d"),
        ]);
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"{"checks":[{"check":"mapping","detail":"w","ok":true,"status":"warn"},{"check":"journal","detail":"d","ok":false,"status":"drain"}],"healthy":false,"warnings":1}"#
        );
    }
}
