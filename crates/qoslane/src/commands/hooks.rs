//! `qoslane prolog` and `qoslane epilog`: grant and release a job's level.
//!
//! Prolog: job id → mapping → QoS (env, scontrol, default) → level → fabric
//! check → lock → transaction (record + node settings) → audit → metrics.
//! Epilog: job id → lock → the job's record → transaction (remove record,
//! settings follow the remaining jobs) → audit → metrics.
//! Failures follow the level's `on_failure`: `continue` exits 0 (the job
//! runs on the baseline), `fail_job` exits 1 (Slurm requeues the job).

use super::Ctx;
use super::session::Session;
use crate::audit::Outcome;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code;
use crate::fabric::{self, ProbeMode};
use crate::job::qos;
use crate::job::{JobId, exports};
use crate::mapping::{FabricCheck, LevelMatch, OnFailure};
use crate::metrics::Alignment;
use crate::paths::Paths;
use crate::state::{JobRecord, Store};
use crate::txn::{Failed, RecordOp};

/// How a hook run failed: the error, and the policy that decides the exit.
struct HookFailure {
    error: Error,
    outcome: Outcome,
    policy: OnFailure,
}

impl HookFailure {
    fn before_changes(error: Error, policy: OnFailure) -> Self {
        Self {
            error,
            outcome: Outcome::Failed,
            policy,
        }
    }
}

fn from_txn(f: Failed, policy: OnFailure, s: &mut Session<'_>) -> HookFailure {
    s.entry.changes = f.changes;
    s.rolled_back = f.rolled_back;
    let error = match f.restore_error {
        Some(r) => Error::Internal(format!(
            "{}; and the rollback failed too: {r} (journal kept for the next run)",
            f.error
        )),
        None => f.error,
    };
    HookFailure {
        error,
        outcome: if f.rolled_back {
            Outcome::RolledBack
        } else {
            Outcome::Failed
        },
        policy,
    }
}

fn exit_for(policy: OnFailure) -> i32 {
    match policy {
        OnFailure::Continue => exit_code::OK,
        OnFailure::FailJob => exit_code::FAILED,
    }
}

pub fn prolog(ctx: &Ctx) -> i32 {
    run_hook(ctx, "prolog", prolog_body)
}

pub fn epilog(ctx: &Ctx) -> i32 {
    run_hook(ctx, "epilog", epilog_body)
}

/// One hook run: the body, then the audit line and metrics, and the exit
/// code of the policy that applies.
fn run_hook(
    ctx: &Ctx,
    event: &'static str,
    body: fn(&Ctx, &mut Session<'_>) -> Result<Outcome, HookFailure>,
) -> i32 {
    let mut s = Session::new(&ctx.paths, event, Deadline::after(ctx.timeout));
    match body(ctx, &mut s) {
        Ok(outcome) => {
            s.finish(outcome, None);
            exit_code::OK
        }
        Err(f) => {
            s.finish(f.outcome, Some(&f.error));
            exit_for(f.policy)
        }
    }
}

/// Both hooks start the same way: the job id (a failure here leaves the node
/// as it is and the job on the baseline) and the user, into the audit entry.
fn job_of(s: &mut Session<'_>) -> Result<JobId, HookFailure> {
    let job = JobId::from_env().map_err(|e| HookFailure::before_changes(e, OnFailure::Continue))?;
    s.entry.job_id = Some(job);
    s.entry.user = std::env::var("SLURM_JOB_USER").ok();
    Ok(job)
}

fn prolog_body(ctx: &Ctx, s: &mut Session<'_>) -> Result<Outcome, HookFailure> {
    // Before a mapping is known, a failure leaves the node as it is and the
    // job runs on the baseline.
    let early = |e| HookFailure::before_changes(e, OnFailure::Continue);
    let job = job_of(s)?;
    let loaded = s.mapping().map_err(early)?;
    let m = &loaded.mapping;

    let env_qos = std::env::var("SLURM_JOB_QOS").ok();
    let q = qos::resolve(
        ctx.context.as_deref(),
        env_qos.as_deref(),
        job,
        &ctx.paths.scontrol,
        &s.deadline,
    );
    if let Some(note) = &q.note {
        s.entry
            .notes
            .push(format!("QoS unknown, default level used: {note}"));
    }
    let (level, how) = m.level_for_qos(q.qos.as_deref());
    if how == LevelMatch::Default && q.qos.is_some() {
        s.entry.notes.push(format!(
            "no level lists QoS `{}`: default_level",
            q.qos.as_deref().unwrap_or("")
        ));
    }
    let policy = m.on_failure_for(level);
    s.entry.qos = q.qos.clone();
    s.entry.qos_source = Some(q.source);
    s.entry.level = Some(level.name.clone());
    s.entry.service_level = Some(level.service_level.get());
    s.entry.virtual_lane = level.virtual_lane.map(|v| v.get());

    let active_ports = check_fabric(&ctx.paths, s, m, &level.name)
        .map_err(|e| HookFailure::before_changes(e, policy))?;

    let record = JobRecord {
        job_id: job,
        time: crate::audit::now_rfc3339(),
        user: s.entry.user.clone(),
        qos: q.qos.clone(),
        qos_source: q.source,
        level: level.name.clone(),
        rank: m.rank(&level.name).unwrap_or(usize::MAX),
        service_level: level.service_level.get(),
        virtual_lane: level.virtual_lane.map(|v| v.get()),
        traffic_class: level.traffic_class.map(|t| t.get()),
        settings: level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str().to_owned(), n.value.clone()))
            .collect(),
        exports: exports::for_level(level)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        mapping_sha256: loaded.sha256.clone(),
    };

    s.promote_or_note(&loaded)
        .map_err(|e| HookFailure::before_changes(e, policy))?;
    let node = s
        .node()
        .map_err(|e| HookFailure::before_changes(e, policy))?;
    // The same Prolog run twice changes nothing the second time.
    let existing = node
        .store
        .record(job)
        .map_err(|e| HookFailure::before_changes(e, policy))?;
    let rerun = existing.as_ref().is_some_and(|old| {
        JobRecord {
            time: old.time.clone(),
            ..record.clone()
        } == *old
    });
    let record = match existing {
        Some(old) if rerun => old,
        _ => record,
    };
    let paths = &ctx.paths;
    let check = || ports_still_active(paths, &active_ports);
    match node.transact("prolog", Some(job), &[RecordOp::Put(record)], &check) {
        Ok(c) => {
            let outcome = if c.changes.is_empty() && rerun {
                Outcome::Unchanged
            } else {
                Outcome::Applied
            };
            s.entry.changes = c.changes;
            Ok(outcome)
        }
        Err(f) => Err(from_txn(*f, policy, s)),
    }
}

/// The fabric check of a level, per `fabric_check`. Returns the ports that
/// were ACTIVE, to verify after applying settings.
fn check_fabric(
    paths: &Paths,
    s: &mut Session<'_>,
    m: &crate::mapping::Mapping,
    level: &str,
) -> Result<Vec<(String, u32)>> {
    if m.fabric_check == FabricCheck::Off {
        s.entry.fabric = serde_json::json!({"check": "off"});
        return Ok(Vec::new());
    }
    // At most half of what is left: a hung SMP query must leave the
    // transaction (and, under `warn`, the grant) its time.
    let report = match fabric::assess(paths, m, &s.deadline.half(), ProbeMode::Cached) {
        Ok(r) => r,
        Err(e) if m.fabric_check == FabricCheck::Warn => {
            s.entry
                .notes
                .push(format!("fabric check could not run: {e}"));
            s.entry.fabric = serde_json::json!({"check": "warn", "error": e.to_string()});
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    s.entry.fabric = report.audit(level);
    s.fabric = Some(alignments(&report));
    for w in report.warnings(level) {
        s.entry.notes.push(format!("fabric: {w}"));
    }
    let problems = report.problems(level);
    if !problems.is_empty() {
        match m.fabric_check {
            FabricCheck::Enforce => return Err(Error::Fabric(problems.join("; "))),
            _ => s
                .entry
                .notes
                .extend(problems.into_iter().map(|p| format!("fabric (warn): {p}"))),
        }
    }
    Ok(report.active_ports())
}

pub fn alignments(report: &fabric::FabricReport) -> Vec<Alignment> {
    report
        .alignment()
        .into_iter()
        .map(|(device, port, level, aligned)| Alignment {
            device,
            port,
            level,
            aligned,
        })
        .collect()
}

/// After applying settings: the ports that were ACTIVE still are.
pub fn ports_still_active(paths: &Paths, ports: &[(String, u32)]) -> Result<()> {
    if ports.is_empty() {
        return Ok(());
    }
    let down = fabric::ports_not_active(paths, ports)?;
    if down.is_empty() {
        Ok(())
    } else {
        Err(Error::Fabric(format!(
            "port(s) no longer ACTIVE after applying settings: {}",
            down.join(", ")
        )))
    }
}

/// The `on_failure` of `level` under the mapping in force, if it still has
/// the level; `continue` otherwise.
fn level_policy(paths: &Paths, level: &str) -> OnFailure {
    crate::config::load(paths)
        .ok()
        .and_then(|l| {
            l.mapping
                .level(level)
                .map(|lv| l.mapping.on_failure_for(lv))
        })
        .unwrap_or(OnFailure::Continue)
}

fn epilog_body(ctx: &Ctx, s: &mut Session<'_>) -> Result<Outcome, HookFailure> {
    let job = job_of(s)?;
    // The policy of the job's level decides the exit, also when the lock or
    // the state directory fails before anything is undone (the job's
    // settings then stay: an Epilog failure like any other). The record is
    // read without the lock for that: files are replaced atomically, and it
    // is read again under the lock below.
    let policy = Store { paths: &ctx.paths }
        .record(job)
        .ok()
        .flatten()
        .map_or(OnFailure::Continue, |r| level_policy(&ctx.paths, &r.level));
    let early = |e| HookFailure::before_changes(e, policy);
    let node = s.node().map_err(early)?;
    let Some(record) = node.store.record(job).map_err(early)? else {
        s.entry.notes.push(
            "no record for this job (its Prolog did not grant a level): nothing to undo".into(),
        );
        return Ok(Outcome::Unchanged);
    };
    let policy = level_policy(&ctx.paths, &record.level);
    let node = s.node().map_err(early)?;
    let result = node.transact("epilog", Some(job), &[RecordOp::Remove(job)], &|| Ok(()));
    s.entry.qos = record.qos.clone();
    s.entry.qos_source = Some(record.qos_source);
    s.entry.level = Some(record.level.clone());
    s.entry.service_level = Some(record.service_level);
    s.entry.virtual_lane = record.virtual_lane;
    s.entry.mapping_sha256 = Some(record.mapping_sha256.clone());
    match result {
        Ok(c) if c.changes.is_empty() => Ok(Outcome::Unchanged),
        Ok(c) => {
            s.entry.changes = c.changes;
            Ok(Outcome::Reverted)
        }
        Err(f) => Err(from_txn(*f, policy, s)),
    }
}
