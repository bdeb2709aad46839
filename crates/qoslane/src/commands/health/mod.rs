//! `qoslane health`: for Slurm's HealthCheckProgram (through hookrun).
//!
//! Each check ends `ok`, `warn` or `drain`. Only what means the node cannot
//! serve jobs safely drains it (exit 1): an interrupted transaction that
//! cannot be rolled back, state qoslane cannot trust or a state directory it
//! cannot use, a port that should be ACTIVE and is not (one `devices:`
//! lists, or the last one: with `devices: []` a down port beside an ACTIVE
//! one carries nothing and is a note), no usable mapping at all (invalid or
//! absent, and no last-known-good copy: no level can be granted). An
//! invalid mapping (the last-known-good copy is in force) or a level that
//! is not granted is a warning (exit 0): the Prolog refuses that level per
//! its `on_failure`, other jobs keep running. Each level's grant is decided
//! once ([`crate::grant`]: own ports, first hop, node settings), recorded in
//! `/run/qoslane/grants.json` for the Prologs, `status`, `explain` and the
//! metrics, and its words are the grant's. The first line says the
//! verdict — for a drain, the reason Slurm shows; every problem follows on
//! its own line with its fix.
//!
//! Four steps, as `status`: [`gather`] reads and does what a health run
//! does to the node on the way (rolls back, releases stale records, records
//! the grants), [`judge`] decides each check (pure), [`model`] is what it
//! found (the JSON form), [`render`] words it. The report carries the
//! checks typed (`report::payload::HealthRun`); the audit line writes each
//! as a note and `status` and `log` read them back typed.

mod gather;
mod judge;
mod model;
mod render;

use std::io::Write;

use super::Ctx;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::exit_code::ExitClass;
use crate::report::{Event, Exit, Outcome, Payload, Report};
use crate::run::session::Session;

pub fn run(ctx: &Ctx, as_json: bool) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Health, Deadline::after(ctx.timeout));
    let mut r = Report::new(Event::Health);
    if let Some(e) = needs_root(&ctx.paths) {
        return s.finish(Err(r.fail(e, Exit::ByError)));
    }
    let facts = gather::gather(&mut s, &mut r);
    let health = judge::judge(&facts);
    let text = if as_json {
        render::json(&health) + "\n"
    } else {
        render::human(&health)
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    let mut first_hop_wait = Vec::new();
    let mut opened = Vec::new();
    if let Some(mut f) = facts.fabric {
        // The verdict and alignment for audit and metrics; health's own
        // lines are its checks.
        f.judgement.notes.clear();
        r.take_fabric(&mut f.judgement);
        first_hop_wait = f.first_hop_wait;
        opened = f.opened;
    }
    let drain = health.drain().map(|d| d.detail.clone());
    // The node's own ports' counters, every run, the node lock given back
    // (`gather` let it go): the live wait, a lone job's off-level bytes;
    // through the ports the first hop's read opened (each opened once).
    s.release();
    let counters = crate::run::job_counters::live(&ctx.paths, &s.deadline, opened);
    if let Payload::Health(h) = &mut r.payload {
        h.counters = counters;
        h.checks = health.checks;
        h.lock_held_seconds = Some(facts.lock.held_seconds());
        h.first_hop_wait = first_hop_wait;
    }
    s.finish(match drain {
        None if r.changes.is_empty() => Ok(r.with(Outcome::Unchanged)),
        None => Ok(r.with(Outcome::Reverted)),
        Some(m) => Err(r.fail(Error::Unhealthy(m), Exit::ByError)),
    })
}

/// Run by another user than root on root's state, health can neither take
/// the node lock nor read the state: every check would be a drain that is
/// not real. It fails as `sync` and `recover` do there (the state's error,
/// exit 74), saying why, and judges nothing.
fn needs_root(paths: &crate::paths::Paths) -> Option<Error> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid();
    if me.is_root() {
        return None;
    }
    [&paths.run_dir, &paths.lib_dir]
        .into_iter()
        .find(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.uid() == 0))
        .map(|dir| Error::State {
            path: dir.clone(),
            detail: format!(
                "is root's: `qoslane health` needs root (as uid {} it can neither take the node \
                 lock nor read the state; nothing judged)",
                me.as_raw()
            ),
        })
}
