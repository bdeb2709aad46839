//! `qoslane prolog` and `qoslane epilog`: grant and release a job's level.
//!
//! Prolog: job id → mapping → QoS (env, squeue, default) → grant (the level,
//! its fabric check and grant, assembled in `run::job_grant`) → transaction
//! (record + node settings) → report (audit, metrics: `Session::finish`).
//! Epilog: job id → lock → the job's record → transaction (remove record,
//! settings follow the remaining jobs) → audit → metrics.
//! Failures follow the level's `on_failure`: `continue` exits 0 (the job
//! runs on the baseline), `fail_job` refuses the job: exit 100 with the
//! reason on stdout and in the job's refusal marker (`run::notice`), for
//! hookrun's requeue or the TaskProlog.

use super::Ctx;
use crate::deadline::Deadline;
use crate::exit_code::ExitClass;
use crate::job::JobId;
use crate::job::qos;
use std::cell::OnceCell;

use crate::mapping::{Mapping, OnFailure};
use crate::report::{Event, Exit, Failure, Outcome, Report, RunResult};
use crate::run::session::{Session, committed, txn_failed};
use crate::run::{job_counters, job_grant, notice};
use crate::state::Store;
use crate::txn::RecordOp;

pub fn prolog(ctx: &Ctx) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Prolog, Deadline::after(ctx.timeout));
    let mut result = prolog_body(ctx, &mut s, Report::new(Event::Prolog));
    // The lock covers the transaction only: nothing that can hang (a
    // counter read) holds other jobs' hooks.
    s.release();
    job_counters::prolog(&ctx.paths, &s.deadline, &mut result);
    notice::leave(&ctx.paths, &result);
    s.finish(result)
}

pub fn epilog(ctx: &Ctx) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Epilog, Deadline::after(ctx.timeout));
    // The mapping in force, read once when first needed (the level's
    // policy, before and under the lock; the node's own traffic's SLs for
    // the evidence).
    let mapping: OnceCell<Option<Mapping>> = OnceCell::new();
    let mapping = || {
        mapping
            .get_or_init(|| crate::config::load(&ctx.paths).ok().map(|l| l.mapping))
            .as_ref()
    };
    let mut result = epilog_body(ctx, &mut s, Report::new(Event::Epilog), &mapping);
    s.release();
    let sm_traffic_sls = || mapping().map(Mapping::sm_traffic_sls).unwrap_or_default();
    job_counters::epilog(&ctx.paths, &s.deadline, &mut result, &sm_traffic_sls);
    s.finish(result)
}

/// Both hooks start the same way: the job id (a failure here leaves the node
/// as it is and the job on the baseline) and the user, into the report.
fn job_of(r: &mut Report) -> Result<JobId, crate::error::Error> {
    let job = JobId::from_env()?;
    r.job.job_id = Some(job);
    r.job.user = std::env::var("SLURM_JOB_USER").ok();
    Ok(job)
}

/// `?` for a report: a failure of this step fails the run under `policy`.
macro_rules! step {
    ($r:ident, $e:expr, $policy:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err($r.fail(e, Exit::ByPolicy($policy))),
        }
    };
}

fn prolog_body(ctx: &Ctx, s: &mut Session<'_>, mut r: Report) -> RunResult {
    // Before a mapping is known, a failure leaves the node as it is and the
    // job runs on the baseline.
    let job = step!(r, job_of(&mut r), OnFailure::Continue);
    if let Some(why) = job.kind().unmanaged() {
        r.notes.push(why.into());
        return Ok(r.with(Outcome::Unchanged));
    }
    s.arm(&r, Exit::ByPolicy(OnFailure::Continue));
    let mapping = match job_grant::mapping(s, &mut r) {
        Ok(m) => m,
        Err(e) => return Err(no_usable_mapping(ctx, s, r, job, e)),
    };
    let q = job_qos(ctx, s, job);
    job_grant::grant(s, r, &mapping, job, &q)?.transact(s)
}

/// The job's QoS and how it was learnt (`job::qos::resolve`, within the
/// run's deadline).
fn job_qos(ctx: &Ctx, s: &Session<'_>, job: JobId) -> qos::JobQos {
    let env_qos = std::env::var("SLURM_JOB_QOS").ok();
    qos::resolve(
        ctx.context.as_deref(),
        env_qos.as_deref(),
        job,
        &ctx.paths.squeue,
        &s.deadline,
    )
}

/// No usable mapping (the installed file invalid or absent, no
/// last-known-good copy): no level can be granted. The job's QoS is still
/// learnt, for the audit line; the installed file's `on_unknown_qos` (read
/// even from an invalid file) decides: `fail_job` refuses the job, else it
/// runs on the baseline, told.
fn no_usable_mapping(
    ctx: &Ctx,
    s: &Session<'_>,
    mut r: Report,
    job: JobId,
    e: crate::error::Error,
) -> Box<Failure> {
    let q = job_qos(ctx, s, job);
    r.job.qos = q.qos;
    r.job.qos_source = Some(q.source);
    r.job.qos_fallback = q.fallback;
    let policy = match crate::config::on_unknown_qos_of_installed(&ctx.paths) {
        crate::mapping::OnUnknownQos::FailJob => OnFailure::FailJob,
        crate::mapping::OnUnknownQos::DefaultLevel => OnFailure::Continue,
    };
    r.fail(e, Exit::ByPolicy(policy))
}

/// The `on_failure` of `level` under the mapping in force, if it still has
/// the level; `continue` otherwise.
fn level_policy(mapping: Option<&Mapping>, level: &str) -> OnFailure {
    mapping
        .and_then(|m| m.level(level).map(|lv| m.on_failure_for(lv)))
        .unwrap_or(OnFailure::Continue)
}

fn epilog_body<'m>(
    ctx: &Ctx,
    s: &mut Session<'_>,
    mut r: Report,
    mapping: &dyn Fn() -> Option<&'m Mapping>,
) -> RunResult {
    let job = step!(r, job_of(&mut r), OnFailure::Continue);
    s.arm(&r, Exit::ByPolicy(OnFailure::Continue));
    // The job's baseline notice or refusal, if its Prolog left one, goes
    // with it.
    let _ = crate::state::fsutil::remove(&ctx.paths, &ctx.paths.job_notice(job));
    let _ = crate::state::fsutil::remove(&ctx.paths, &ctx.paths.job_refusal(job));
    // The policy of the job's level decides the exit, also when the lock or
    // the state directory fails before anything is undone (the job's
    // settings then stay: an Epilog failure like any other). The record is
    // read without the lock for that: files are replaced atomically, and it
    // is read again under the lock below.
    let policy = Store { paths: &ctx.paths }
        .record(job)
        .ok()
        .flatten()
        .map_or(OnFailure::Continue, |rec| {
            level_policy(mapping(), &rec.level)
        });
    let node = step!(r, s.node(), policy);
    let Some(record) = step!(r, node.store.record(job), policy) else {
        r.notes.push(
            "no record for this job (its Prolog did not grant a level): nothing to undo".into(),
        );
        return Ok(r.with(Outcome::Unchanged));
    };
    let policy = level_policy(mapping(), &record.level);
    r.job.qos.clone_from(&record.qos);
    r.job.qos_source = Some(record.qos_source);
    r.job.level = Some(record.level.clone());
    r.job.service_level = Some(record.service_level);
    r.job.virtual_lane = record.virtual_lane;
    r.mapping_sha256 = Some(record.mapping_sha256.clone());
    s.arm(&r, Exit::ByPolicy(policy));
    let node = step!(r, s.node(), policy);
    let result = node.transact("epilog", Some(job), &[RecordOp::Remove(job)], &|| Ok(()));
    match result {
        Ok(c) => {
            let outcome = if c.changes.is_empty() {
                Outcome::Unchanged
            } else {
                Outcome::Reverted
            };
            committed(&mut r, c);
            Ok(r.with(outcome))
        }
        Err(f) => Err(txn_failed(r, *f, Exit::ByPolicy(policy))),
    }
}
