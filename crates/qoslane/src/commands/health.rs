//! `qoslane health`: for Slurm's HealthCheckProgram (through hookrun). Ports
//! up, every level aligned on every port (a fresh probe: catches an SM that
//! re-swept with a new table), mapping valid, state sane, no pending
//! journal. Prints one line; exit 0 healthy, 1 not.

use std::io::Write;

use serde_json::json;

use super::Ctx;
use super::session::Session;
use crate::audit::Outcome;
use crate::config;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::exit_code::Verdict;
use crate::fabric::ProbeMode;
use crate::fabric::policy::{self, Scope};
use crate::report::{Event, Exit, Report};
use crate::state::{Store, fsutil};

pub fn run(ctx: &Ctx, as_json: bool) -> Verdict {
    let s = Session::new(&ctx.paths, Event::Health, Deadline::after(ctx.timeout));
    let mut r = Report::new(Event::Health);
    let mut checks: Vec<(&str, Result<String, String>)> = Vec::new();

    let loaded = config::read_valid(&ctx.paths, &ctx.paths.config);
    checks.push((
        "mapping",
        loaded
            .as_ref()
            .map(|(m, sha, _)| format!("valid, {} levels, sha256 {sha}", m.levels().len()))
            .map_err(|e| format!("{e}")),
    ));
    for dir in [&ctx.paths.run_dir, &ctx.paths.lib_dir] {
        if dir.exists() {
            checks.push((
                "state",
                fsutil::check_dir(&ctx.paths, dir)
                    .map(|()| format!("{} ok", dir.display()))
                    .map_err(|e| e.to_string()),
            ));
        }
    }
    // The state files must be readable and trusted: a corrupt or foreign
    // record, baseline or journal stops every change (qoslane will not act
    // on state it cannot trust), so the node must not take jobs.
    if ctx.paths.run_dir.is_dir() {
        let store = Store { paths: &ctx.paths };
        // The jobs directory appears with the first job (the fabric cache
        // may have created the run directory before).
        let records = if ctx.paths.jobs_dir().exists() {
            store.records().map(|r| r.len())
        } else {
            Ok(0)
        };
        checks.push((
            "state",
            records
                .and_then(|n| store.node_state().map(|_| n))
                .and_then(|n| store.journal().map(|_| n))
                .map(|n| format!("{n} job record(s), baseline and journal readable"))
                .map_err(|e| e.to_string()),
        ));
    }
    checks.push((
        "journal",
        if ctx.paths.journal().exists() {
            Err("an interrupted transaction is pending: run `qoslane recover`".into())
        } else {
            Ok("none pending".into())
        },
    ));
    if let Ok((m, _, _)) = &loaded {
        let mut fabric = policy::judge(&ctx.paths, m, &s.deadline, ProbeMode::Fresh, Scope::Every);
        checks.push(("fabric", fabric.health_line(m.levels().len())));
        // The verdict and alignment for audit and metrics; health's own
        // lines are its notes.
        fabric.notes.clear();
        r.take_fabric(&mut fabric);
    }

    let first_bad = checks.iter().find_map(|(_, r)| r.as_ref().err().cloned());
    let mut out = std::io::stdout().lock();
    if as_json {
        let v = json!({
            "healthy": first_bad.is_none(),
            "checks": checks.iter().map(|(name, r)| match r {
                Ok(m) => json!({"check": name, "ok": true, "detail": m}),
                Err(m) => json!({"check": name, "ok": false, "detail": m}),
            }).collect::<Vec<_>>(),
        });
        let _ = writeln!(out, "{v}");
    } else {
        let line = match &first_bad {
            None => "qoslane: ok".to_owned(),
            Some(m) => format!("qoslane: {}", m.replace('\n', " ")),
        };
        let _ = writeln!(out, "{line}");
    }
    r.notes = checks
        .iter()
        .map(|(n, r)| match r {
            Ok(m) => format!("{n}: ok: {m}"),
            Err(m) => format!("{n}: FAIL: {m}"),
        })
        .collect();
    s.finish(match first_bad {
        None => Ok(r.with(Outcome::Unchanged)),
        Some(m) => Err(r.fail(Error::Unhealthy(m), Exit::ByError)),
    })
}
