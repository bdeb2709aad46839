//! `qoslane sync`: what a configuration run calls after installing a new
//! mapping. Validate (an invalid file changes nothing), promote it to
//! last-known-good, re-probe the fabric for every level, and re-apply node
//! settings for the running jobs under the new mapping. Running jobs keep
//! their environment (their SL exports); new jobs get the new mapping.

use super::Ctx;
use super::session::Session;
use crate::audit::Outcome;
use crate::config::{self, Loaded};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::exit_code::Verdict;
use crate::fabric::ProbeMode;
use crate::fabric::policy::{self, Scope};
use crate::log;
use crate::mapping::diagnostic::render_all;
use crate::report::{Event, Exit, Failure, Report};
use crate::txn::RecordOp;

pub fn run(ctx: &Ctx) -> Verdict {
    let mut s = Session::new(&ctx.paths, Event::Sync, Deadline::after(ctx.timeout));
    let result = body(ctx, &mut s, Report::new(Event::Sync));
    s.finish(result)
}

fn body(ctx: &Ctx, s: &mut Session<'_>, mut r: Report) -> Result<Report, Box<Failure>> {
    macro_rules! step {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Err(r.fail(e, Exit::ByError)),
            }
        };
    }
    // Strict: sync is where an admin learns their file is wrong, so every
    // diagnostic is shown, not just the first.
    let (mapping, sha256, _) = step!(
        config::read_valid(&ctx.paths, &ctx.paths.config).inspect_err(|e| {
            if matches!(e, Error::MappingInvalid { .. })
                && let Ok(text) = config::read_text(&ctx.paths.config)
            {
                let name = ctx.paths.config.display().to_string();
                let v = crate::mapping::validate_str(&text);
                eprint!("{}", render_all(&v.diagnostics, &name, &text));
            }
        })
    );
    r.mapping_sha256 = Some(sha256);
    let loaded: Loaded = step!(config::load(&ctx.paths));

    let mut fabric = policy::judge(
        &ctx.paths,
        &mapping,
        &s.deadline,
        ProbeMode::Fresh,
        Scope::Every,
    );
    r.take_fabric(&mut fabric);
    if let Some(e) = &fabric.refusal {
        log::error(&format!("fabric: {e}"));
    }

    step!(s.promote(&loaded, None));
    let node = step!(s.node());
    let records = step!(node.store.records());
    let mut ops = Vec::new();
    for rec in records.values() {
        let (level, _) = mapping.level_for_qos(rec.qos.as_deref());
        let settings: Vec<(String, String)> = level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str().to_owned(), n.value.clone()))
            .collect();
        let rank = mapping.rank(&level.name).unwrap_or(usize::MAX);
        if settings != rec.settings || rank != rec.rank {
            let mut updated = rec.clone();
            updated.settings = settings;
            updated.rank = rank;
            ops.push(RecordOp::Put(updated));
        }
    }
    let note = format!("{} running job(s), {} re-planned", records.len(), ops.len());
    let paths = &ctx.paths;
    let check = || fabric.ports_still_active(paths);
    let result = node.transact("sync", None, &ops, &check);
    r.notes.push(note);
    match result {
        Ok(c) => {
            let outcome = if c.changes.is_empty() {
                Outcome::Unchanged
            } else {
                Outcome::Applied
            };
            r.changes = c.changes;
            r.gone(c.gone);
            let r = r.with(outcome);
            match fabric.refusal {
                // Applied, but some level cannot be granted on this fabric.
                Some(problem) => Err(Box::new(Failure {
                    report: r,
                    error: problem,
                    exit: Exit::ByError,
                })),
                None => Ok(r),
            }
        }
        Err(f) => {
            r.changes.clone_from(&f.changes);
            r.rolled_back = f.rolled_back;
            r.gone(f.gone.clone());
            Err(r.fail(f.into_error(), Exit::ByError))
        }
    }
}
