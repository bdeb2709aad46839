//! `qoslane log`: the audit log read back ([`crate::audit::read`]): which
//! jobs got which level and SL, and why. Read-only: it opens the log's
//! files as trusted reads and writes nothing.
//!
//! Exit 0 when the log was read (even if nothing matched, as `journalctl`);
//! 64 for a bad filter; 66 when there is no audit log to read at all.
//! Times are shown in the local zone (`--utc`: as written); `--follow`
//! goes on with what is appended ([`crate::audit::follow`]).

use std::fmt::Write as _;
use std::io::Write;

use super::Ctx;
use crate::audit::read::{self, Filter, LoggedEntry};
use crate::cli::LogArgs;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;

pub fn run(ctx: &Ctx, args: &LogArgs) -> Result<ExitClass> {
    let now = std::time::SystemTime::now();
    let tz = crate::time::zone(args.utc);
    let time = |flag: &str, v: &Option<String>| -> Result<Option<std::time::SystemTime>> {
        v.as_deref()
            .map(|s| {
                crate::time::parse_time_in(s, now, &tz).ok_or_else(|| {
                    Error::Usage(format!(
                        "{flag} `{s}`: want RFC 3339 (2026-12-01T10:00:00Z, \
                         2026-12-01T11:00:00+01:00), a local date and time (2026-12-01 10:00) \
                         or date, today, yesterday, or relative (90m, 2h, 3d, -1h, \"2 hours ago\")"
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
    let found = read::read(&ctx.paths, &filter, args.limit);
    for p in &found.problems {
        crate::log::warn(&format!("log: {p}"));
    }
    if found.skipped > 0 {
        crate::log::warn(&format!(
            "log: {} (not audit entries: torn or foreign lines; every other line was read)",
            found.skipped_summary("line")
        ));
    }
    let unreadable = match std::fs::symlink_metadata(&ctx.paths.audit_log) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::PermissionDenied,
    };
    if found.files == 0 && unreadable {
        // There, but not read: never "no audit log".
        crate::log::error(&format!(
            "log: the audit log {} is not readable as uid {} (needs root, or a group that may \
             read it)",
            ctx.paths.audit_log.display(),
            rustix::process::geteuid().as_raw()
        ));
        return Ok(ExitClass::NoInput);
    }
    if found.files == 0 {
        crate::log::error(&format!(
            "log: no audit log to read at {} (no run has been audited on this node, or \
             QOSLANE_AUDIT_LOG names another file)",
            ctx.paths.audit_log.display()
        ));
        return Ok(ExitClass::NoInput);
    }
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    let width = found
        .entries
        .iter()
        .map(|l| crate::time::local(&l.entry.time, &tz).len())
        .max()
        .unwrap_or(0)
        .max(24);
    if args.as_json() {
        for l in &found.entries {
            writeln!(out, "{}", l.raw).map_err(w)?;
        }
    } else {
        out.write_all(human(&found, &tz, width).as_bytes())
            .map_err(w)?;
    }
    if !args.follow {
        return Ok(ExitClass::Ok);
    }
    out.flush().map_err(w)?;
    let json = args.as_json();
    let e = crate::audit::follow::follow(&ctx.paths, &filter, found.live, &mut |l| {
        if json {
            writeln!(out, "{}", l.raw)?;
        } else {
            out.write_all(row(&l.entry, &tz, width).as_bytes())?;
        }
        out.flush()
    });
    Err(w(e))
}

/// One row per entry, the time in `tz` (its column `width` wide); the last
/// column says why (the error, else the first note, fabric problem or
/// setting found gone).
fn human(found: &read::Found, tz: &jiff::tz::TimeZone, width: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<width$} {:<15} {:>8} {:<26} {:<18} {:>2} {:>2} {:<11} WHY",
        "TIME", "EVENT", "JOB", "QOS (FROM)", "LEVEL", "SL", "VL", "OUTCOME"
    );
    for l in &found.entries {
        s += &row(&l.entry, tz, width);
    }
    if found.entries.is_empty() {
        let _ = writeln!(s, "-- no matching entries --");
    }
    if found.matched > found.entries.len() {
        let _ = writeln!(
            s,
            "-- {} older matching entries not shown (--limit N, 0 for all) --",
            found.matched - found.entries.len()
        );
    }
    s
}

/// One entry's row of [`human`]'s table.
fn row(e: &LoggedEntry, tz: &jiff::tz::TimeZone, width: usize) -> String {
    let t = |v: Option<&str>| v.unwrap_or("-").to_owned();
    let n = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let qos = match (&e.qos, e.qos_source) {
        (Some(q), Some(src)) => format!("{q} ({src})"),
        (Some(q), None) => q.clone(),
        _ => "-".to_owned(),
    };
    format!(
        "{:<width$} {:<15} {:>8} {:<26} {:<18} {:>2} {:>2} {:<11} {}\n",
        crate::time::local(&e.time, tz),
        e.event,
        n(e.job_id),
        qos,
        t(e.level.as_deref()),
        n(e.service_level.map(u64::from)),
        n(e.virtual_lane.map(u64::from)),
        e.outcome,
        why(e)
    )
}

/// Why an entry ended as it did, in one line: the error; else the first
/// warning (a health check's), note, fabric problem or vanished setting;
/// else the changes made.
fn why(e: &LoggedEntry) -> String {
    if let Some(err) = &e.error {
        return err.clone();
    }
    if let Some(w) = e
        .notes
        .iter()
        .find(|n| n.is_problem())
        .or(e.notes.first())
        .map(ToString::to_string)
        .or_else(|| e.fabric_problems().next().map(ToOwned::to_owned))
        .or_else(|| {
            e.settings_gone
                .first()
                .map(|p| format!("{p}: the setting's file is gone"))
        })
    {
        return w;
    }
    let changes: Vec<String> = e
        .changes
        .iter()
        .filter_map(|c| {
            Some(format!(
                "{} {} -> {}",
                c.path.rsplit('/').next()?,
                c.before,
                c.after
            ))
        })
        .collect();
    changes.join(", ")
}
