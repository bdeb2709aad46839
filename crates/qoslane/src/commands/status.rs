//! `qoslane status`: what the node looks like now. Read-only, no lock.

use std::io::Write;

use serde_json::json;

use super::Ctx;
use crate::config;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::Verdict;
use crate::settings;
use crate::state::Store;

const AUDIT_TAIL: usize = 5;

pub fn run(ctx: &Ctx, as_json: bool) -> Result<Verdict> {
    let paths = &ctx.paths;
    let deadline = Deadline::after(ctx.timeout);
    let store = Store::open(paths)?;
    let records = store.records()?;
    let node = store.node_state()?;
    let journal = store.journal()?;
    let config_sha = config::read_text(&paths.config)
        .ok()
        .map(|t| config::sha256_hex(t.as_bytes()));
    let config_valid = config::read_valid(paths, &paths.config)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let lkg = config::last_known_good_sha(paths);
    let mut settings_rows = Vec::new();
    let wants = crate::txn::desired(&records, &node.baseline);
    for (path, want) in &wants {
        let current = settings::read(paths, path, &deadline).unwrap_or_else(|e| format!("<{e}>"));
        let wanted = match want {
            crate::txn::Want::Set(v) | crate::txn::Want::Restore(v) => v.clone(),
        };
        settings_rows.push(json!({
            "path": path,
            "baseline": node.baseline.get(path),
            "current": current,
            "wanted": wanted,
            "in_sync": settings::same_value(&wanted, &current),
        }));
    }
    let tail = audit_tail(&paths.audit_log, AUDIT_TAIL);
    let jobs: Vec<_> = records
        .values()
        .map(|r| json!({"job_id": r.job_id, "user": r.user, "qos": r.qos, "qos_source": r.qos_source, "level": r.level, "service_level": r.service_level, "virtual_lane": r.virtual_lane, "since": r.time}))
        .collect();
    let v = json!({
        "jobs": jobs,
        "settings": settings_rows,
        "mapping": {"path": paths.config, "sha256": config_sha, "valid": config_valid.is_ok(), "error": config_valid.err(), "last_known_good_sha256": lkg},
        "pending_journal": journal.as_ref().map(|j| json!({"event": j.event, "job_id": j.job_id, "pid": j.pid, "started": j.started})),
        "last_audit": tail,
    });
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::io("write output", "<stdout>")(e);
    if as_json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?
        )
        .map_err(w)?;
        return Ok(Verdict::Ok);
    }
    writeln!(
        out,
        "mapping   {} ({})",
        paths.config.display(),
        match &v["mapping"]["error"] {
            serde_json::Value::String(e) => format!("INVALID: {e}"),
            _ => format!("valid, sha256 {}", config_sha.as_deref().unwrap_or("?")),
        }
    )
    .map_err(w)?;
    writeln!(
        out,
        "last-known-good sha256 {}",
        lkg.as_deref().unwrap_or("none")
    )
    .map_err(w)?;
    writeln!(out, "jobs      {}", records.len()).map_err(w)?;
    for r in records.values() {
        writeln!(
            out,
            "  job {:<8} level {:<18} SL {:<2} qos {} ({:?}) since {}",
            r.job_id,
            r.level,
            r.service_level,
            r.qos.as_deref().unwrap_or("-"),
            r.qos_source,
            r.time
        )
        .map_err(w)?;
    }
    writeln!(out, "settings  {}", settings_rows.len()).map_err(w)?;
    for row in &settings_rows {
        writeln!(
            out,
            "  {}  current {}  wanted {}  baseline {}{}",
            row["path"].as_str().unwrap_or(""),
            row["current"],
            row["wanted"],
            row["baseline"],
            if row["in_sync"] == true {
                ""
            } else {
                "  OUT OF SYNC"
            }
        )
        .map_err(w)?;
    }
    match &journal {
        Some(j) => writeln!(
            out,
            "journal   PENDING: interrupted {} (pid {}) — run `qoslane recover`",
            j.event, j.pid
        ),
        None => writeln!(out, "journal   none"),
    }
    .map_err(w)?;
    writeln!(
        out,
        "audit     {} (last {})",
        paths.audit_log.display(),
        tail.len()
    )
    .map_err(w)?;
    for line in &tail {
        writeln!(out, "  {line}").map_err(w)?;
    }
    Ok(Verdict::Ok)
}

/// The last `n` lines of the audit log, parsed (unparsable lines verbatim).
fn audit_tail(path: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|_| serde_json::Value::String((*l).to_owned()))
        })
        .collect()
}
