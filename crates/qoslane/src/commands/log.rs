//! `qoslane log`: the audit log read back ([`crate::audit::read`]): which
//! jobs got which level and SL, and why. Read-only.

use std::fmt::Write as _;
use std::io::Write;

use serde_json::Value;

use super::Ctx;
use crate::audit::read::{self, Filter};
use crate::cli::LogArgs;
use crate::error::{Error, Result};
use crate::exit_code::Verdict;

pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<Verdict> {
    let now = std::time::SystemTime::now();
    let time = |flag: &str, v: &Option<String>| -> Result<Option<std::time::SystemTime>> {
        v.as_deref()
            .map(|s| {
                read::parse_time(s, now).ok_or_else(|| {
                    Error::Usage(format!(
                        "{flag} `{s}`: want RFC 3339 (2026-12-01T10:00:00Z) or a duration ago (2h, 3d)"
                    ))
                })
            })
            .transpose()
    };
    let filter = Filter {
        job: args.job,
        since: time("--since", &args.since)?,
        until: time("--until", &args.until)?,
        outcomes: args.outcome.clone(),
        events: args.event.clone(),
        qos: args.qos.clone(),
    };
    let found = read::read(&ctx.paths.audit_log, &filter, args.limit);
    for p in &found.problems {
        crate::log::warn(&format!("log: {p}"));
    }
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::io("write output", "<stdout>")(e);
    if args.json {
        for e in &found.entries {
            writeln!(out, "{e}").map_err(w)?;
        }
    } else {
        out.write_all(human(&found).as_bytes()).map_err(w)?;
    }
    Ok(Verdict::Ok)
}

/// One row per entry; the last column says why (the error, else the first
/// note or fabric problem).
fn human(found: &read::Found) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:<15} {:>8} {:<26} {:<18} {:>2} {:>2} {:<11} WHY",
        "TIME", "EVENT", "JOB", "QOS (FROM)", "LEVEL", "SL", "VL", "OUTCOME"
    );
    for e in &found.entries {
        let t = |k: &str| e[k].as_str().unwrap_or("-").to_owned();
        let n = |k: &str| {
            e[k].as_u64()
                .map_or_else(|| "-".to_owned(), |v| v.to_string())
        };
        let qos = match (e["qos"].as_str(), e["qos_source"].as_str()) {
            (Some(q), Some(src)) => format!("{q} ({src})"),
            (Some(q), None) => q.to_owned(),
            _ => "-".to_owned(),
        };
        let why = e["error"]
            .as_str()
            .map(ToOwned::to_owned)
            .or_else(|| first_str(&e["notes"]))
            .or_else(|| first_str(&e["fabric"]["problems"]))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{:<24} {:<15} {:>8} {:<26} {:<18} {:>2} {:>2} {:<11} {why}",
            t("time"),
            t("event"),
            n("job_id"),
            qos,
            t("level"),
            n("service_level"),
            n("virtual_lane"),
            t("outcome")
        );
    }
    if found.matched > found.entries.len() {
        let _ = writeln!(
            s,
            "({} older matching entries not shown: --limit)",
            found.matched - found.entries.len()
        );
    }
    s
}

fn first_str(v: &Value) -> Option<String> {
    v.as_array()?.first()?.as_str().map(ToOwned::to_owned)
}
