//! `qoslane sync`: what a configuration run calls after installing a new
//! mapping. Validate (an invalid file changes nothing), promote it to
//! last-known-good, re-probe the fabric for every level, and re-apply node
//! settings for the running jobs under the new mapping. Running jobs keep
//! their environment (their SL exports); new jobs get the new mapping.

use super::Ctx;
use super::hooks::{alignments, ports_still_active};
use super::session::Session;
use crate::audit::Outcome;
use crate::config::{self, Loaded};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code;
use crate::fabric::{self, ProbeMode};
use crate::log;
use crate::mapping::FabricCheck;
use crate::txn::RecordOp;

pub fn run(ctx: &Ctx) -> i32 {
    let mut s = Session::new(&ctx.paths, "sync", Deadline::after(ctx.timeout));
    match body(ctx, &mut s) {
        Ok((outcome, None)) => {
            s.finish(outcome, None);
            exit_code::OK
        }
        Ok((outcome, Some(problem))) => {
            // Applied, but some level cannot be granted on this fabric.
            let code = problem.exit_code();
            s.finish(outcome, Some(&problem));
            code
        }
        Err(e) => {
            let code = e.exit_code();
            let outcome = if s.rolled_back {
                Outcome::RolledBack
            } else {
                Outcome::Failed
            };
            s.finish(outcome, Some(&e));
            code
        }
    }
}

fn body(ctx: &Ctx, s: &mut Session<'_>) -> Result<(Outcome, Option<Error>)> {
    // Strict: sync is where an admin learns their file is wrong, so every
    // diagnostic is shown, not just the first.
    let (mapping, sha256, _) = config::read_valid(&ctx.paths, &ctx.paths.config).inspect_err(|e| {
        if matches!(e, Error::MappingInvalid { .. }) {
            let _ = super::validate::run(&ctx.paths.config, crate::cli::Format::Human);
        }
    })?;
    s.entry.mapping_sha256 = Some(sha256);
    let loaded: Loaded = config::load(&ctx.paths)?;

    let mut fabric_problem = None;
    let mut active_ports = Vec::new();
    if mapping.fabric_check != FabricCheck::Off {
        match fabric::assess(&ctx.paths, &mapping, &s.deadline, ProbeMode::Fresh) {
            Ok(report) => {
                s.fabric = Some(alignments(&report));
                active_ports = report.active_ports();
                let mut problems = Vec::new();
                for l in mapping.levels() {
                    problems.extend(
                        report
                            .problems(&l.name)
                            .into_iter()
                            .map(|p| format!("level `{}`: {p}", l.name)),
                    );
                }
                let fab: serde_json::Map<String, serde_json::Value> = mapping
                    .levels()
                    .iter()
                    .map(|l| (l.name.clone(), report.audit(&l.name)))
                    .collect();
                s.entry.fabric = serde_json::Value::Object(fab);
                if !problems.is_empty() {
                    let msg = problems.join("; ");
                    log::error(&format!("fabric: {msg}"));
                    if mapping.fabric_check == FabricCheck::Enforce {
                        fabric_problem = Some(Error::Fabric(msg));
                    } else {
                        s.entry.notes.push(format!("fabric (warn): {msg}"));
                    }
                }
            }
            Err(e) if mapping.fabric_check == FabricCheck::Enforce => fabric_problem = Some(e),
            Err(e) => s
                .entry
                .notes
                .push(format!("fabric check could not run: {e}")),
        }
    }

    s.promote(&loaded)?;
    let node = s.node()?;
    let records = node.store.records()?;
    let mut ops = Vec::new();
    for r in records.values() {
        let (level, _) = mapping.level_for_qos(r.qos.as_deref());
        let settings: Vec<(String, String)> = level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str().to_owned(), n.value.clone()))
            .collect();
        let rank = mapping.rank(&level.name).unwrap_or(usize::MAX);
        if settings != r.settings || rank != r.rank {
            let mut updated = r.clone();
            updated.settings = settings;
            updated.rank = rank;
            ops.push(RecordOp::Put(updated));
        }
    }
    let note = format!("{} running job(s), {} re-planned", records.len(), ops.len());
    let paths = &ctx.paths;
    let check = || ports_still_active(paths, &active_ports);
    let result = node.transact("sync", None, &ops, &check);
    s.entry.notes.push(note);
    match result {
        Ok(c) => {
            let outcome = if c.changes.is_empty() {
                Outcome::Unchanged
            } else {
                Outcome::Applied
            };
            s.entry.changes = c.changes;
            Ok((outcome, fabric_problem))
        }
        Err(f) => {
            s.entry.changes = f.changes;
            s.rolled_back = f.rolled_back;
            Err(match f.restore_error {
                Some(r) => {
                    Error::Internal(format!("{}; and the rollback failed too: {r}", f.error))
                }
                None => f.error,
            })
        }
    }
}
