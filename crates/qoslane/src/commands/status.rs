//! `qoslane status`: what the node looks like now, the way `systemctl
//! status` reads: what is in force, which jobs hold which level and SL since
//! when, the settings, the last fabric probe, the last problems. `--json`
//! gives the same for machines. Read-only: no lock, and it creates nothing
//! (a node where no job ran yet has no state directories; that reads as
//! empty).

use std::fmt::Write as _;
use std::io::Write;

use serde_json::json;

use super::Ctx;
use crate::config;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::Verdict;
use crate::settings;
use crate::state::Store;

/// Audit lines read from the end of the log (bounded: the log may be big).
const AUDIT_TAIL: usize = 200;
/// Problems shown.
const PROBLEMS: usize = 5;

pub fn run(ctx: &Ctx, as_json: bool) -> Result<Verdict> {
    let paths = &ctx.paths;
    let deadline = Deadline::after(ctx.timeout);
    let store = Store::read_only(paths);
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
    let rejected = config::rejected(paths);
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
    let problems: Vec<&serde_json::Value> = tail
        .iter()
        .filter(|e| matches!(e["outcome"].as_str(), Some("failed" | "rolled_back")))
        .rev()
        .take(PROBLEMS)
        .collect();
    let (cache, cache_note) = crate::fabric::cache::load(paths);
    let now_ms = crate::fabric::cache::now_ms();
    let fabric: Vec<_> = cache
        .iter()
        .map(|e| {
            json!({
                "port": e.port.to_string(),
                "age_s": now_ms.saturating_sub(e.probed_at_ms) / 1000,
                "sl2vl": e.tables.sl2vl,
                "oper_vls": e.tables.oper_vls,
                "link_state": e.tables.link_state,
            })
        })
        .collect();
    let jobs: Vec<_> = records
        .values()
        .map(|r| {
            json!({"job_id": r.job_id, "user": r.user, "qos": r.qos, "qos_source": r.qos_source,
                   "level": r.level, "service_level": r.service_level,
                   "virtual_lane": r.virtual_lane, "since": r.time})
        })
        .collect();
    let in_force = lkg.clone().or_else(|| config_sha.clone());
    let v = json!({
        "jobs": jobs,
        "settings": settings_rows,
        "mapping": {
            "path": paths.config,
            "sha256": config_sha,
            "valid": config_valid.is_ok(),
            "error": config_valid.as_ref().err(),
            "last_known_good_sha256": lkg,
            "in_force_sha256": in_force,
            "rejected": rejected.as_ref().map(|r| json!({"sha256": r.sha256, "why": r.why, "time": r.time})),
        },
        "fabric": {"ports": fabric, "cache_note": cache_note},
        "pending_journal": journal.as_ref().map(|j| json!({"event": j.event, "job_id": j.job_id, "pid": j.pid, "started": j.started})),
        "last_problems": problems,
    });
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::io("write output", "<stdout>")(e);
    if as_json {
        let text = serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?;
        writeln!(out, "{text}").map_err(w)?;
        return Ok(Verdict::Ok);
    }

    let short = |s: &str| s.chars().take(12).collect::<String>();
    let mut s = String::new();
    let attention = journal.is_some()
        || config_valid.is_err()
        || rejected.is_some()
        || settings_rows.iter().any(|r| r["in_sync"] != true);
    let _ = writeln!(
        s,
        "{} qoslane: {} job{} holding a level; mapping in force {}{}",
        if attention { "×" } else { "●" },
        records.len(),
        if records.len() == 1 { "" } else { "s" },
        in_force.as_deref().map_or_else(|| "none".to_owned(), short),
        if attention { " (needs attention)" } else { "" }
    );
    let file_state = match &config_valid {
        Ok(()) => format!(
            "valid, sha256 {}",
            config_sha.as_deref().map_or_else(|| "?".to_owned(), short)
        ),
        Err(e) => format!("INVALID: {e}"),
    };
    let _ = writeln!(s, "    Mapping: {} ({file_state})", paths.config.display());
    match (&lkg, &config_sha) {
        (Some(l), Some(c)) if l == c => {
            let _ = writeln!(s, "   In force: the file (last known good)");
        }
        (Some(l), _) => {
            let _ = writeln!(
                s,
                "   In force: last known good sha256 {} (not the file: run `qoslane sync`)",
                short(l)
            );
        }
        (None, _) => {
            let _ = writeln!(
                s,
                "   In force: the file (no job or sync has promoted it yet)"
            );
        }
    }
    if let Some(r) = &rejected {
        let _ = writeln!(
            s,
            "   Rejected: sha256 {} at {}: {}",
            short(&r.sha256),
            r.time,
            r.why
        );
    }
    if records.is_empty() {
        let _ = writeln!(s, "       Jobs: none");
    } else {
        let _ = writeln!(s, "       Jobs:");
        let _ = writeln!(
            s,
            "             {:<10} {:<18} {:>2} {:>2}  {:<26} SINCE",
            "JOB", "LEVEL", "SL", "VL", "QOS (FROM)"
        );
        for r in records.values() {
            let qos = format!("{} ({})", r.qos.as_deref().unwrap_or("-"), r.qos_source);
            let vl = r
                .virtual_lane
                .map_or_else(|| "-".to_owned(), |v| v.to_string());
            let _ = writeln!(
                s,
                "             {:<10} {:<18} {:>2} {:>2}  {:<26} {}",
                r.job_id.to_string(),
                r.level,
                r.service_level,
                vl,
                qos,
                r.time
            );
        }
    }
    if settings_rows.is_empty() {
        let _ = writeln!(s, "   Settings: none changed (baseline)");
    } else {
        let _ = writeln!(s, "   Settings:");
        for row in &settings_rows {
            let plain = |k: &str| match &row[k] {
                serde_json::Value::String(t) => t.clone(),
                serde_json::Value::Null => "-".to_owned(),
                other => other.to_string(),
            };
            let _ = writeln!(
                s,
                "             {}: now {}, wanted {}, baseline {}{}",
                plain("path"),
                plain("current"),
                plain("wanted"),
                plain("baseline"),
                if row["in_sync"] == true {
                    ""
                } else {
                    "  OUT OF SYNC (run `qoslane health`)"
                }
            );
        }
    }
    if cache.is_empty() {
        let _ = writeln!(
            s,
            "     Fabric: no probe cached{}",
            cache_note.map_or_else(String::new, |n| format!(" ({n})"))
        );
    } else {
        for e in &cache {
            let age = now_ms.saturating_sub(e.probed_at_ms) / 1000;
            let _ = writeln!(
                s,
                "     Fabric: {} probed {age} s ago: link {}, OperVLs {}, SL2VL {}",
                e.port,
                e.tables.link_state,
                e.tables.oper_vls,
                e.tables
                    .sl2vl
                    .as_array()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
    }
    match &journal {
        Some(j) => {
            let _ = writeln!(
                s,
                "    Journal: PENDING: an interrupted {} (pid {}) — run `qoslane recover`",
                j.event, j.pid
            );
        }
        None => {
            let _ = writeln!(s, "    Journal: clean");
        }
    }
    if problems.is_empty() {
        let _ = writeln!(
            s,
            "   Problems: none in the last {} audit lines ({})",
            tail.len(),
            paths.audit_log.display()
        );
    } else {
        let _ = writeln!(
            s,
            "   Problems (newest first, {}):",
            paths.audit_log.display()
        );
        for e in &problems {
            let text = |k: &str| e[k].as_str().unwrap_or("-").to_owned();
            let job = e["job_id"]
                .as_u64()
                .map_or_else(|| "-".to_owned(), |j| j.to_string());
            let _ = writeln!(
                s,
                "             {} {} job {} qos {}: {}: {}",
                text("time"),
                text("event"),
                job,
                text("qos"),
                text("outcome"),
                text("error")
            );
        }
    }
    out.write_all(s.as_bytes()).map_err(w)?;
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
