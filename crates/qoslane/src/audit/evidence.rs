//! A job's counter evidence as its Epilog recorded it in the audit line,
//! read back for the views (`explain`, `status`): the newest of a level
//! ([`recent`]) and one in words ([`evidence_lines`]: what was written,
//! rendered; nothing judged again).

use super::read::LoggedEntry;
use crate::paths::Paths;
use crate::report::Event;

/// How much of the audit log's end `explain` reads for a level's counters.
const RECENT_BYTES: u64 = 256 * 1024;
const RECENT_ENTRIES: usize = 500;

/// The newest Epilog of `level` whose audit line carries counter evidence
/// (the end of the audit log), as written.
pub fn recent(paths: &Paths, level: &str) -> Option<LoggedEntry> {
    super::read::tail(paths, RECENT_BYTES, RECENT_ENTRIES)
        .entries
        .into_iter()
        .rev()
        .map(|l| l.entry)
        .find(|e| {
            e.event == Event::Epilog && e.level.as_deref() == Some(level) && !e.evidence.is_null()
        })
}

/// A recorded evidence, in words: one line per port (what the Epilog
/// wrote, rendered; nothing judged again).
pub fn evidence_lines(evidence: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let seen = |v: &Value, what: &str, unit: &str| -> String {
        match v {
            Value::String(word) => format!("{what} {word}"),
            Value::Object(o) => match o.get("moved").and_then(Value::as_object) {
                Some(m) if m.is_empty() => format!("{what} nothing"),
                Some(m) => {
                    let each: Vec<String> = m
                        .iter()
                        .map(|(k, n)| match n {
                            Value::String(word) => format!("{k}: {word}"),
                            n => format!("{k}: {n}{unit}"),
                        })
                        .collect();
                    format!("{what} {}", each.join(", "))
                }
                None => format!(
                    "{what} unread ({})",
                    o.get("unread").unwrap_or(&Value::Null)
                ),
            },
            _ => format!("{what} not read"),
        }
    };
    let mut lines = vec![format!(
        "{}{}",
        if evidence["alone"] == true {
            "alone on the node"
        } else {
            "shared the node (counters not the job's alone)"
        },
        evidence["off_level_bytes"]
            .as_u64()
            .map_or_else(String::new, |n| format!("; {n} bytes off its SL"))
    )];
    for p in evidence["ports"].as_array().into_iter().flatten() {
        lines.push(format!(
            "{}/{}: {}; {}; {}",
            p["device"].as_str().unwrap_or("?"),
            p["port"],
            seen(&p["sent_bytes_per_sl"], "sent per SL", " B"),
            seen(&p["received_bytes_per_sl"], "received per SL", " B"),
            seen(&p["xmit_wait_ticks_per_vl"], "waited per VL", " ticks"),
        ));
    }
    lines
}
