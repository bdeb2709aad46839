//! `qoslane health`'s output, from the model alone: the JSON form, or the
//! first line Slurm shows (hookrun's drain reason) and one line per check
//! that is not ok.

use std::fmt::Write as _;

use super::model::NodeHealth;
use crate::report::health::CheckStatus;

pub fn json(h: &NodeHealth) -> String {
    serde_json::to_string(h).unwrap_or_default()
}

pub fn human(h: &NodeHealth) -> String {
    let first = match (h.drain(), h.warnings) {
        (Some(d), _) => format!("qoslane: {}", one_line(&d.detail)),
        (None, 0) => "qoslane: ok".to_owned(),
        (None, n) => format!(
            "qoslane: ok, {n} warning{}: {}",
            if n == 1 { "" } else { "s" },
            h.checks
                .iter()
                .find(|c| c.status == CheckStatus::Warn)
                .map(|c| one_line(&c.detail))
                .unwrap_or_default()
        ),
    };
    let mut out = format!("{first}\n");
    for c in h.checks.iter().filter(|c| c.is_problem()) {
        let _ = writeln!(
            out,
            "qoslane: {}: {}: {}",
            c.status.as_str(),
            c.name,
            one_line(&c.detail)
        );
    }
    out
}

fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}
