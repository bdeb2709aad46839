//! `qoslane sync`: what a configuration run calls after installing a new
//! mapping. A mapping takes effect as a transaction: it is validated (an
//! invalid file changes nothing), every level is checked on the fabric (a
//! fresh probe), and only when every level passes under the policy is it put
//! in force — promoted to last-known-good, the running jobs' node settings
//! re-applied under it. Otherwise the previous copy stays in force, the
//! refusal is recorded (so the Prologs agree, `status` and `health` say why)
//! and sync exits 1. The mapping already in force is never refused (nor
//! recorded as rejected): a level of it the node no longer carries is said.
//! One verdict per outcome: the mapping put in force, or in force as it was,
//! or not put in force; and sync exits 1 whenever a level of the mapping in
//! force is not granted (refused, or on the baseline), as the level table
//! says. Running jobs keep their environment (their SL exports); new jobs
//! get the mapping in force. `--dry-run` says all this, changes nothing.

use std::io::Write;

use super::Ctx;
use crate::config::{self, Loaded};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::exit_code::ExitClass;
use crate::fabric::ProbeMode;
use crate::fabric::policy::{self, Scope};
use crate::log;
use crate::mapping::Mapping;
use crate::mapping::diagnostic::render_all;
use crate::paths::Paths;
use crate::report::{Event, Exit, Outcome, Report, RunResult};
use crate::run::session::{Session, committed, txn_failed};
use crate::state::{JobRecord, Store};
use crate::txn::RecordOp;

pub fn run(ctx: &Ctx, dry_run: bool) -> ExitClass {
    if dry_run {
        return dry(ctx);
    }
    let mut s = Session::new(&ctx.paths, Event::Sync, Deadline::after(ctx.timeout));
    let result = body(ctx, &mut s, Report::new(Event::Sync));
    s.finish(result)
}

/// Strict: sync is where an admin learns their file is wrong, so every
/// diagnostic is shown, not just the first.
fn read_strict(paths: &Paths) -> Result<(Mapping, String, String), Error> {
    config::read_valid(paths, &paths.config).inspect_err(|e| {
        if matches!(e, Error::MappingInvalid { .. })
            && let Ok(text) = config::read_text(&paths.config)
        {
            let name = paths.config.display().to_string();
            let v = crate::mapping::validate_str(&text);
            eprint!("{}", render_all(&v.diagnostics, &name, &text));
        }
    })
}

/// The running jobs' records re-planned under `mapping` (their level's
/// settings and rank as the mapping has them now).
fn replanned(
    mapping: &Mapping,
    records: &std::collections::BTreeMap<crate::job::JobId, JobRecord>,
) -> Vec<RecordOp> {
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
    ops
}

/// What stays in force when a mapping is refused.
fn previous(paths: &Paths) -> String {
    config::last_known_good_sha(paths).map_or_else(
        || "there is no previous copy: its levels are refused one by one".to_owned(),
        |p| format!("sha256 {p} stays in force"),
    )
}

fn body(ctx: &Ctx, s: &mut Session<'_>, mut r: Report) -> RunResult {
    macro_rules! step {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Err(r.fail(e, Exit::ByError)),
            }
        };
    }
    let paths = &ctx.paths;
    let (mapping, sha256, _) = step!(read_strict(paths));
    r.mapping_sha256 = Some(sha256.clone());

    // The gate: every level on the fabric, fresh, under the policy.
    let mut fabric = policy::judge(paths, &mapping, &s.deadline, ProbeMode::Fresh, Scope::Every);
    // The grants of the judged mapping, recorded when it is (or goes) in
    // force: the Prologs take the first hop and the settings from them.
    let settings = crate::settings::check_levels(paths, &mapping, &s.deadline);
    let path = crate::fabric::gather::verdict::fabric_path(
        paths,
        &mapping,
        &sha256,
        &fabric.ports(),
        &s.deadline,
    );
    let record = crate::grant::Record {
        mapping_sha256: sha256.clone(),
        by: "sync".to_owned(),
        time: crate::time::now_rfc3339(),
        first_hop: fabric.first_hop_read(&mapping),
        grants: fabric.grants(&mapping, Some(&settings), path.as_ref()),
        settings: Some(settings),
        fabric_path: path,
    };
    // Already in force (last-known-good): the gate cannot refuse what is in
    // force, only say which of its levels the node no longer carries.
    let previous_sha = config::last_known_good_sha(paths);
    let already = previous_sha.as_deref() == Some(sha256.as_str());
    let in_force = fabric.refusal.is_none() || already;
    if in_force && let Err(e) = crate::state::grants::store(paths, &record) {
        r.notes.push(format!("the grants were not recorded: {e}"));
    }
    // Said, whatever the gate decides: a level whose jobs would roll back
    // (a setting that cannot be written) or be refused.
    for (l, g) in &record.grants {
        if g.decision != crate::grant::Decision::Granted {
            let line = format!("level {l}: {}", g.summary());
            log::warn(&line);
            r.notes.push(line);
        }
    }
    r.take_fabric(&mut fabric);
    if let Some(refusal) = fabric.refusal.take().filter(|_| !already) {
        let why = refusal.to_string();
        if let Err(e) = config::reject(paths, &sha256, &why) {
            r.notes
                .push(format!("the refusal could not be recorded: {e}"));
        }
        let msg = format!(
            "mapping sha256 {sha256} not put in force; {}",
            previous(paths)
        );
        log::error(&format!("{msg}: {why}"));
        r.notes.push(msg);
        return Err(r.fail(refusal, Exit::ByError));
    }
    if let Err(e) = config::clear_rejected(paths) {
        r.notes
            .push(format!("an old refusal could not be removed: {e}"));
    }
    let loaded: Loaded = step!(config::load(paths));

    crate::fault::hold("promote");
    let promotion = step!(s.promote(&loaded, None));
    if promotion == config::Promotion::Stale {
        // Another rollout was put in force while this one was judged: it
        // stays; this sync changed nothing and says so.
        return Err(r.fail(
            Error::state(
                &paths.config,
                format!(
                    "changed while this sync ran (it judged sha256 {}); nothing put in force, \
                     run sync again",
                    loaded.sha256
                ),
            ),
            Exit::ByError,
        ));
    }
    let node = step!(s.node());
    let records = step!(node.store.records());
    let ops = replanned(&mapping, &records);
    let note = format!("{} running job(s), {} re-planned", records.len(), ops.len());
    r.notes.push(note.clone());
    let check = || fabric.ports_still_active(paths);
    let result = node.transact("sync", None, &ops, &check);
    match result {
        Ok(c) => {
            committed(&mut r, c);
            let judged = format!("its {} levels judged; {note}", mapping.levels().len());
            finished(r, &promotion, &record, &sha256, &judged)
        }
        Err(f) => Err(txn_failed(r, *f, Exit::ByError)),
    }
}

/// The run's one verdict once its transaction committed: the line it says,
/// or a failure when a level of the mapping in force is not granted.
fn finished(
    r: Report,
    promotion: &config::Promotion,
    record: &crate::grant::Record,
    sha256: &str,
    judged: &str,
) -> RunResult {
    let put = matches!(promotion, config::Promotion::Promoted(_));
    let outcome = if r.changes.is_empty() && !put {
        Outcome::Unchanged
    } else {
        Outcome::Applied
    };
    let mut r = r.with(outcome);
    let verdict = verdict(sha256, promotion);
    if let Some(e) = not_granted(record, &verdict) {
        return Err(r.fail(e, Exit::ByError));
    }
    r.said = Some(if put {
        let did = match r.changes.len() {
            0 => "no node setting changed".to_owned(),
            n => format!("{n} node setting(s) changed"),
        };
        format!("sync: applied: {verdict}; {did}; {judged}")
    } else {
        r.summary_line(&format!("{verdict}, {judged}"))
    });
    Ok(r)
}

/// What became of the judged mapping: `mapping sha256 X in force` (it was
/// already), or `… put in force (replacing sha256 Y)`.
fn verdict(sha256: &str, promotion: &config::Promotion) -> String {
    let short = &sha256[..12];
    match promotion {
        config::Promotion::Promoted(Some(old)) => format!(
            "mapping sha256 {short} put in force (replacing sha256 {})",
            &old[..old.len().min(12)]
        ),
        config::Promotion::Promoted(None) => {
            format!("mapping sha256 {short} put in force (the first copy this node keeps)")
        }
        _ => format!("mapping sha256 {short} in force"),
    }
}

/// The exit follows the level table: a mapping in force with a level whose
/// jobs would not get their SL (refused, or run on the baseline: a setting
/// that cannot be written, a first hop that drifted) is a failed sync, said
/// once — what is in force, then each such level. `None` when every level
/// is granted (with warnings or not).
fn not_granted(record: &crate::grant::Record, verdict: &str) -> Option<Error> {
    let missing: Vec<(&String, &crate::grant::Grant)> = record
        .grants
        .iter()
        .filter(|(_, g)| !g.decision.gets_its_sl())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let stays = match verdict.strip_suffix(" in force") {
        Some(mapping) => format!("{mapping} stays in force"),
        None => verdict.to_owned(),
    };
    let levels: Vec<String> = missing
        .iter()
        .map(|(l, g)| format!("level {l}: {}", g.summary()))
        .collect();
    let text = format!(
        "{stays}, but {} level(s) not granted on this node: {}",
        missing.len(),
        levels.join("; ")
    );
    let settings_only = missing.iter().all(|(_, g)| {
        g.reasons
            .iter()
            .all(|r| r.scope == crate::grant::GrantScope::Settings)
    });
    Some(if settings_only {
        Error::Settings(text)
    } else {
        Error::Fabric(text)
    })
}

/// `sync --dry-run`: validation, the fabric gate, whether the mapping would
/// be put in force, and the settings that would change — read-only: no
/// lock, no audit line, no metrics, nothing written (the fabric cache
/// excepted: the probe is real).
fn dry(ctx: &Ctx) -> ExitClass {
    let paths = &ctx.paths;
    let deadline = Deadline::after(ctx.timeout);
    let mut out = std::io::stdout().lock();
    let (mapping, sha256, _) = match read_strict(paths) {
        Ok(v) => v,
        Err(e) => {
            let _ = writeln!(out, "sync --dry-run: {e}\nwould change nothing");
            return e.exit_class();
        }
    };
    let _ = writeln!(
        out,
        "mapping {}: valid, {} levels, sha256 {sha256}",
        paths.config.display(),
        mapping.levels().len()
    );
    let fabric = policy::judge(paths, &mapping, &deadline, ProbeMode::Fresh, Scope::Every);
    for n in &fabric.notes {
        let _ = writeln!(out, "{n}");
    }
    if let Some(refusal) = &fabric.refusal {
        // What is in force cannot be refused, only found not carried.
        let _ = if config::last_known_good_sha(paths).as_deref() == Some(sha256.as_str()) {
            writeln!(
                out,
                "fabric: {refusal}\nalready in force (last-known-good): it stays in force, \
                 the levels above are not granted; would change nothing"
            )
        } else {
            writeln!(
                out,
                "fabric: {refusal}\nwould NOT put it in force ({}); would change nothing",
                previous(paths)
            )
        };
        return ExitClass::Failed;
    }
    let _ = writeln!(
        out,
        "fabric: {}",
        if fabric.assessment.is_some() {
            "every level passes"
        } else {
            "not checked (fabric_check off)"
        }
    );
    let _ = match config::last_known_good_sha(paths) {
        Some(p) if p == sha256 => writeln!(out, "already in force (last-known-good)"),
        Some(p) => writeln!(
            out,
            "would put it in force (last-known-good, replacing sha256 {p})"
        ),
        None => writeln!(
            out,
            "would put it in force (the first mapping this node keeps)"
        ),
    };
    let store = Store { paths };
    let records = if paths.jobs_dir().exists() {
        store.records().unwrap_or_default()
    } else {
        std::collections::BTreeMap::default()
    };
    let ops = replanned(&mapping, &records);
    let _ = writeln!(
        out,
        "{} running job(s), {} would be re-planned",
        records.len(),
        ops.len()
    );
    match crate::txn::preview(paths, &ops, &deadline) {
        Ok(changes) if changes.is_empty() => {
            let _ = writeln!(out, "no node setting would change");
        }
        Ok(changes) => {
            for c in changes {
                let _ = writeln!(out, "would set {}: {} -> {}", c.path, c.before, c.after);
            }
        }
        Err(e) => {
            let _ = writeln!(out, "the settings could not be previewed: {e}");
            return e.exit_class();
        }
    }
    ExitClass::Ok
}
