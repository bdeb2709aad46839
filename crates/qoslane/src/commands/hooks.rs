//! `qoslane prolog` and `qoslane epilog`: grant and release a job's level.
//!
//! Prolog: job id → mapping → QoS (env, squeue, default) → level → fabric
//! check → lock → transaction (record + node settings) → audit → metrics.
//! Epilog: job id → lock → the job's record → transaction (remove record,
//! settings follow the remaining jobs) → audit → metrics.
//! Failures follow the level's `on_failure`: `continue` exits 0 (the job
//! runs on the baseline), `fail_job` exits 1 (Slurm requeues the job).

use super::Ctx;
use super::session::{Session, committed, txn_failed};
use crate::deadline::Deadline;
use crate::exit_code::ExitClass;
use crate::fabric::ProbeMode;
use crate::fabric::policy::{self, Scope};
use crate::job::qos;
use crate::job::{JobId, exports};
use crate::log;
use crate::mapping::{Level, LevelMatch, Mapping, OnFailure};
use crate::paths::Paths;
use crate::report::{Event, Exit, Failure, Outcome, Report, RunResult};
use crate::state::{JobRecord, Store};
use crate::txn::RecordOp;

pub fn prolog(ctx: &Ctx) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Prolog, Deadline::after(ctx.timeout));
    let mut result = prolog_body(ctx, &mut s, Report::new(Event::Prolog));
    super::job_counters::prolog(&ctx.paths, &s.deadline, &mut result);
    match &result {
        Err(f) if f.exit == Exit::ByPolicy(OnFailure::Continue) => {
            leave_notice(&ctx.paths, &f.report, Some(&f.error));
        }
        Ok(r) if r.job.qos_fallback.is_some() => leave_notice(&ctx.paths, r, None),
        _ => {}
    }
    s.finish(result)
}

/// One line for the TaskProlog to print to the job (Slurm's `print`
/// protocol line), so its user learns why: a job whose level was refused
/// under `continue` runs on the baseline (`refused`), or a job whose QoS
/// could not be learnt runs at the default level. Best effort: the job runs
/// either way.
fn leave_notice(paths: &Paths, report: &Report, refused: Option<&crate::error::Error>) {
    let Some(job) = report.job.job_id else {
        return;
    };
    let Some(line) = notice(report, refused) else {
        return;
    };
    // Only into a state directory qoslane trusts (never through a symlink).
    if crate::state::fsutil::ensure_dir(paths, &paths.run_dir).is_ok()
        && crate::state::fsutil::ensure_dir(paths, &paths.notices_dir()).is_ok()
    {
        let _ = crate::state::fsutil::atomic_write(
            paths,
            &paths.job_notice(job),
            line.as_bytes(),
            crate::state::PUBLIC,
        );
    }
}

/// The notice's text: what was (not) granted, and why, from the report.
fn notice(report: &Report, refused: Option<&crate::error::Error>) -> Option<String> {
    let one_line = |s: String| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(200)
            .collect()
    };
    let qos = report
        .job
        .qos
        .as_deref()
        .map_or_else(|| "QoS unknown".to_owned(), |q| format!("QoS {q}"));
    let fallback = report
        .notes
        .iter()
        .find_map(|n| n.strip_prefix(qos::UNKNOWN_NOTE))
        .map(|why| one_line(why.to_owned()));
    Some(match (refused, &report.job.level) {
        (Some(e), Some(level)) => format!(
            "qoslane: {qos}: level {level} was not granted ({}); the job runs without its SL",
            one_line(e.to_string())
        ),
        (Some(e), None) => format!(
            "qoslane: {qos}: no level was granted ({}); the job runs without an SL",
            one_line(e.to_string())
        ),
        (None, Some(level)) => format!(
            "qoslane: QoS unknown ({}): the job runs at the default level {level}",
            fallback?
        ),
        (None, None) => return None,
    })
}

pub fn epilog(ctx: &Ctx) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Epilog, Deadline::after(ctx.timeout));
    let mut result = epilog_body(ctx, &mut s, Report::new(Event::Epilog));
    super::job_counters::epilog(&ctx.paths, &s.deadline, &mut result);
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
    let base = r.clone();
    // A changed mapping is put in force only if the fabric carries every
    // level (as `sync` decides); else the previous copy serves this job.
    let gate_deadline = s.deadline.half();
    let paths = &ctx.paths;
    let gate = |m: &crate::mapping::Mapping| {
        policy::judge(paths, m, &gate_deadline, ProbeMode::Cached, Scope::Every)
            .refusal
            .map(|e| e.to_string())
    };
    let loaded = match s.mapping_gated(&mut r, gate) {
        Ok(l) => l,
        Err(e) => return Err(no_usable_mapping(ctx, s, r, job, e)),
    };

    let q = job_qos(ctx, s, job);
    let mut g = grant(ctx, s, r, job, &q, &loaded)?;
    // Under the lock: the mapping read at the start is promoted only if it
    // is still the one in force. A rollout that landed meanwhile (a new
    // file, a `sync`) is never undone: the run re-loads under the lock and
    // grants its job from the mapping in force; should even that change
    // under it (an admin's edit is not locked), it is used, not promoted.
    if !promoted_or_noted(s, &loaded, &mut g)? {
        let mut r = base;
        let loaded = step!(r, s.mapping_gated(&mut r, gate), g.policy);
        let msg = format!(
            "the mapping changed while this run waited for the node lock; re-loaded \
             under it: sha256 {}",
            loaded.sha256
        );
        log::info(&msg);
        r.notes.push(msg);
        g = grant(ctx, s, r, job, &q, &loaded)?;
        promoted_or_noted(s, &loaded, &mut g)?;
    }
    let JobGrant {
        mut r,
        record,
        policy,
        fabric,
        decided,
        hop,
        recorded,
    } = g;
    remember(
        s,
        &record.mapping_sha256,
        &record.level,
        &decided,
        (hop, recorded),
        &mut r,
    );
    let node = step!(r, s.node(), policy);
    // The same Prolog run twice changes nothing the second time.
    let existing = step!(r, node.store.record(job), policy);
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
    let check = || fabric.ports_still_active(paths);
    match node.transact("prolog", Some(job), &[RecordOp::Put(record)], &check) {
        Ok(c) => {
            let outcome = if c.changes.is_empty() && rerun {
                Outcome::Unchanged
            } else {
                Outcome::Applied
            };
            committed(&mut r, c);
            Ok(r.with(outcome))
        }
        Err(f) => Err(txn_failed(r, *f, Exit::ByPolicy(policy))),
    }
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

/// What a Prolog grants its job under a mapping: the level, its policy
/// (armed), the fabric's judgement of it (a refusal fails the run) and the
/// record to put.
struct JobGrant {
    r: Report,
    record: JobRecord,
    policy: OnFailure,
    fabric: policy::Judgement,
    /// The level's grant, recorded once the run holds the node lock.
    decided: crate::grant::Grant,
    /// The first hop, when this run read it.
    hop: Option<crate::grant::ScopeRead>,
    /// Whether the node's record (read once, by [`level_grant`]) already
    /// holds this decision for the level under this mapping.
    recorded: bool,
}

/// [`Session::promote_or_note`] for a grant: `false` when `loaded` is no
/// longer the mapping in force (not promoted).
fn promoted_or_noted(
    s: &mut Session<'_>,
    loaded: &crate::config::Loaded,
    g: &mut JobGrant,
) -> Result<bool, Box<Failure>> {
    match s.promote_or_note(loaded, &mut g.r) {
        Ok(fresh) => Ok(fresh),
        Err(e) => Err(g.r.clone().fail(e, Exit::ByPolicy(g.policy))),
    }
}

fn grant(
    ctx: &Ctx,
    s: &mut Session<'_>,
    mut r: Report,
    job: JobId,
    q: &qos::JobQos,
    loaded: &crate::config::Loaded,
) -> Result<JobGrant, Box<Failure>> {
    let m = &loaded.mapping;
    let (level, how) = m.level_for_qos(q.qos.as_deref());
    if how == LevelMatch::Default && q.qos.is_some() {
        r.notes.push(format!(
            "no level lists QoS `{}`: default_level",
            q.qos.as_deref().unwrap_or("")
        ));
    }
    let policy = m.on_failure_for(level);
    r.job.qos.clone_from(&q.qos);
    r.job.qos_source = Some(q.source);
    r.job.qos_fallback = q.fallback;
    r.job.level = Some(level.name.clone());
    if q.fallback.is_some() && m.on_unknown_qos == crate::mapping::OnUnknownQos::FailJob {
        let why = q.note.clone().unwrap_or_default();
        r.job.level = None;
        return Err(r.fail(
            crate::error::Error::QosUnknown(format!(
                "{why}; on_unknown_qos: fail_job refuses the job"
            )),
            Exit::ByPolicy(OnFailure::FailJob),
        ));
    }
    if let Some(note) = &q.note {
        r.notes.push(format!("{}{note}", qos::UNKNOWN_NOTE));
    }
    r.job.service_level = Some(level.service_level.get());
    r.job.virtual_lane = level
        .virtual_lane
        .map(super::super::mapping::types::VirtualLane::get);
    s.arm(&r, Exit::ByPolicy(policy));

    // At most half of what is left: a hung SMP query must leave the
    // transaction (and, under `warn`, the grant) its time.
    let (mut fabric, decided, recorded) =
        level_grant(&ctx.paths, m, &loaded.sha256, level, &s.deadline.half());
    r.take_fabric(&mut fabric);
    r.notes.extend(decided.notes.iter().cloned());
    r.notes.extend(decided.warnings.iter().cloned());
    if !decided.decision.gets_its_sl() {
        let refusal = decided.refusal(fabric.refusal.take());
        remember(
            s,
            &loaded.sha256,
            &level.name,
            &decided,
            (fabric.first_hop_read(m), recorded),
            &mut r,
        );
        return Err(r.fail(refusal, Exit::ByPolicy(policy)));
    }
    let record = job_record(
        job,
        crate::time::now_rfc3339(),
        r.job.user.clone(),
        q,
        m,
        level,
        &loaded.sha256,
    );
    Ok(JobGrant {
        r,
        record,
        policy,
        hop: fabric.first_hop_read(m),
        fabric,
        decided,
        recorded,
    })
}

/// The level's grant now ([`crate::grant::decide`]): its own ports (the
/// cached probe), the first hop and the node settings as `sync`/`health`
/// recorded them when fresh. A `fail_job` level under `enforce` with no
/// fresh first-hop reading of these ports reads the first hop itself;
/// for another level the missing reading is a note.
fn level_grant(
    paths: &Paths,
    m: &Mapping,
    sha256: &str,
    level: &Level,
    deadline: &Deadline,
) -> (policy::Judgement, crate::grant::Grant, bool) {
    use crate::grant::{GrantScope, MAX_RECORD_AGE_MS, Record};
    let on_failure = m.on_failure_for(level);
    let must_read =
        m.fabric_check == crate::mapping::FabricCheck::Enforce && on_failure == OnFailure::FailJob;
    let mut notes = Vec::new();
    let stored = crate::state::grants::load(paths).unwrap_or_else(|e| {
        notes.push(format!("the recorded grants were not used: {e}"));
        None
    });
    let now = crate::time::now_ms();
    let recorded = |ports: Option<&[crate::grant::ReadPort]>| {
        Record::recorded(
            stored.as_ref(),
            sha256,
            &level.name,
            ports,
            now,
            MAX_RECORD_AGE_MS,
        )
    };
    let ahead = recorded(None);
    let mut j = policy::judge_level(
        paths,
        m,
        deadline,
        &level.name,
        must_read && ahead.first_hop_missing,
    );
    let mut got = recorded(Some(&j.ports()));
    if must_read && got.first_hop_missing && !ahead.first_hop_missing && j.assessment.is_some() {
        // The recorded reading was of other ports: read it now.
        j = policy::judge_level(paths, m, deadline, &level.name, true);
        got = recorded(Some(&j.ports()));
    }
    let read_here = j
        .assessment
        .as_ref()
        .is_some_and(crate::fabric::Assessment::read_first_hop);
    let mut evidence = j.evidence(&level.name);
    evidence.extend(
        got.evidence
            .into_iter()
            .filter(|e| !(read_here && e.scope == GrantScope::FirstHop)),
    );
    if m.fabric_check != crate::mapping::FabricCheck::Off {
        if read_here {
            notes.push(format!(
                "first hop read by this Prolog ({})",
                got.notes.join("; ")
            ));
        } else {
            notes.extend(got.notes);
        }
    }
    let mut g = crate::grant::decide(m.fabric_check, on_failure, &evidence);
    notes.append(&mut g.notes);
    g.notes = notes;
    let recorded = stored.as_ref().is_some_and(|rec| {
        rec.mapping_sha256 == sha256
            && rec.grants.get(&level.name).map(|x| x.decision) == Some(g.decision)
    });
    (j, g, recorded)
}

/// The longest a Prolog waits for the node lock only to record its grant.
const RECORD_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// A Prolog's grant into the node's record, under the node lock, when it
/// differs from what is recorded for its level (a probe saw what the last
/// `health` did not) or it read the first hop itself. Best effort: a
/// failure is a note.
fn remember(
    s: &mut Session<'_>,
    sha256: &str,
    level: &str,
    g: &crate::grant::Grant,
    (first_hop, recorded): (Option<crate::grant::ScopeRead>, bool),
    r: &mut Report,
) {
    let paths = s.paths;
    // Whether the record already says so was read once, by `level_grant`.
    if recorded && first_hop.is_none() {
        return;
    }
    // A refusal does not queue behind another run for long: the record is
    // a view, the refusal stands without it.
    if let Err(e) = s.node_within(RECORD_LOCK_WAIT) {
        r.notes.push(format!("the grant was not recorded: {e}"));
        return;
    }
    let mut rec = crate::state::grants::load(paths)
        .ok()
        .flatten()
        .filter(|rec| rec.mapping_sha256 == sha256)
        .unwrap_or_else(|| crate::grant::Record {
            mapping_sha256: sha256.to_owned(),
            ..crate::grant::Record::default()
        });
    "prolog".clone_into(&mut rec.by);
    rec.time = crate::time::now_rfc3339();
    if first_hop.is_some() {
        rec.first_hop = first_hop;
    }
    let mut mine = g.clone();
    mine.notes.clear();
    rec.grants.insert(level.to_owned(), mine);
    if let Err(e) = crate::state::grants::store(paths, &rec) {
        r.notes.push(format!("the grant was not recorded: {e}"));
    }
}

/// The record a Prolog puts for its job: the level's settings and exports
/// under the mapping in force.
fn job_record(
    job: JobId,
    time: String,
    user: Option<String>,
    q: &qos::JobQos,
    m: &Mapping,
    level: &Level,
    mapping_sha256: &str,
) -> JobRecord {
    JobRecord {
        job_id: job,
        time,
        user,
        qos: q.qos.clone(),
        qos_source: q.source,
        level: level.name.clone(),
        rank: m.rank(&level.name).unwrap_or(usize::MAX),
        service_level: level.service_level.get(),
        virtual_lane: level
            .virtual_lane
            .map(super::super::mapping::types::VirtualLane::get),
        traffic_class: level
            .traffic_class
            .map(super::super::mapping::types::TrafficClass::get),
        settings: level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str().to_owned(), n.value.clone()))
            .collect(),
        exports: exports::for_level(level)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        mapping_sha256: mapping_sha256.to_owned(),
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

fn epilog_body(ctx: &Ctx, s: &mut Session<'_>, mut r: Report) -> RunResult {
    let job = step!(r, job_of(&mut r), OnFailure::Continue);
    s.arm(&r, Exit::ByPolicy(OnFailure::Continue));
    // The job's baseline notice, if its Prolog left one, goes with it.
    let _ = crate::state::fsutil::remove(&ctx.paths, &ctx.paths.job_notice(job));
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
            level_policy(&ctx.paths, &rec.level)
        });
    let node = step!(r, s.node(), policy);
    let Some(record) = step!(r, node.store.record(job), policy) else {
        r.notes.push(
            "no record for this job (its Prolog did not grant a level): nothing to undo".into(),
        );
        return Ok(r.with(Outcome::Unchanged));
    };
    let policy = level_policy(&ctx.paths, &record.level);
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
