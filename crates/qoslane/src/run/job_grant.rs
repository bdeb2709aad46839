//! The Prolog's grant, assembled in one place: the mapping in force (a
//! changed one gated by the fabric, as `sync` decides), the level for the
//! job's QoS and its policy, the level's grant now ([`crate::grant::decide`]
//! from its own ports, the first hop and the node settings as
//! `sync`/`health` recorded them), the grant remembered in
//! `/run/qoslane/grants.json`, the mapping promoted under the node lock
//! (re-loaded when a rollout landed meanwhile) — and the job's record put
//! through the transaction. `commands/hooks.rs` reads job → [`mapping`] →
//! QoS → [`grant`] → [`JobGrant::transact`] → report.

use super::placement::Synced;
use super::session::{Session, committed, txn_failed};
use crate::config::Loaded;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::fabric::LinkLayer;
use crate::fabric::ProbeMode;
use crate::fabric::policy::{self, Scope};
use crate::grant::{Decision, Grant, GrantScope, MAX_RECORD_AGE_MS, ReadPort, Record, ScopeRead};
use crate::job::qos::{self, JobQos};
use crate::job::{JobId, exports};
use crate::libraries::PortLayers;
use crate::log;
use crate::mapping::types::{TrafficClass, VirtualLane};
use crate::mapping::{FabricCheck, Level, LevelMatch, Mapping, OnFailure, OnUnknownQos};
use crate::paths::Paths;
use crate::report::{Exit, Failure, Outcome, Payload, Report, RunResult};
use crate::state::JobRecord;
use crate::txn::RecordOp;

/// The mapping a Prolog grants from, and what a re-load under the lock
/// starts again from.
#[derive(Debug)]
pub struct GrantMapping {
    loaded: Loaded,
    /// The report before the mapping was read.
    base: Report,
    /// The fabric gate's deadline: half of what was left when the mapping
    /// was first read.
    gate: Deadline,
}

/// The mapping for this Prolog: a changed mapping is put in force only if
/// the fabric carries every level (as `sync` decides); else the previous
/// copy serves this job ([`Session::mapping_gated`]).
pub fn mapping(s: &mut Session<'_>, r: &mut Report) -> crate::error::Result<GrantMapping> {
    let base = r.clone();
    let gate = s.deadline.half();
    let loaded = gated(s, r, &gate)?;
    Ok(GrantMapping { loaded, base, gate })
}

fn gated(s: &mut Session<'_>, r: &mut Report, gate: &Deadline) -> crate::error::Result<Loaded> {
    let paths = s.paths;
    s.mapping_gated(r, |m| {
        policy::judge(paths, m, gate, ProbeMode::Cached, Scope::Every)
            .refusal
            .map(|e| e.to_string())
    })
}

/// What a Prolog grants its job under a mapping: the level, its policy
/// (armed), the fabric's judgement of it (a refusal fails the run) and the
/// record to put.
#[derive(Debug)]
pub struct JobGrant {
    r: Report,
    record: JobRecord,
    policy: OnFailure,
    fabric: policy::Judgement,
    /// The level's grant, recorded once the run holds the node lock.
    decided: Grant,
    /// The first hop, when this run read it.
    hop: Option<ScopeRead>,
    /// Whether the node's record (read once, by [`level_grant`]) already
    /// holds this decision for the level under this mapping.
    recorded: bool,
}

/// The job's grant under the mapping in force, held under the node lock:
/// decided, the mapping promoted (a rollout that landed while the run
/// waited for the lock is never undone: the run re-loads under the lock and
/// grants its job from the mapping in force; should even that change under
/// it — an admin's edit is not locked — it is used, not promoted), and the
/// grant remembered. A level that does not get its SL fails the run.
pub fn grant(
    s: &mut Session<'_>,
    r: Report,
    m: &GrantMapping,
    job: JobId,
    q: &JobQos,
) -> Result<JobGrant, Box<Failure>> {
    let mut g = decide(s, r, job, q, &m.loaded)?;
    if !promoted_or_noted(s, &m.loaded, &mut g)? {
        let mut r = m.base.clone();
        let loaded = match gated(s, &mut r, &m.gate) {
            Ok(l) => l,
            Err(e) => return Err(r.fail(e, Exit::ByPolicy(g.policy))),
        };
        let msg = format!(
            "the mapping changed while this run waited for the node lock; re-loaded \
             under it: sha256 {}",
            loaded.sha256
        );
        log::info(&msg);
        r.notes.push(msg);
        g = decide(s, r, job, q, &loaded)?;
        promoted_or_noted(s, &loaded, &mut g)?;
    }
    let hop = g.hop.take();
    remember(
        s,
        &g.record.mapping_sha256,
        &g.record.level,
        &g.decided,
        (hop, g.recorded),
        &mut g.r,
    );
    Ok(g)
}

impl JobGrant {
    /// The job's record put through the transaction (the job's level in
    /// force on the node), its ports checked still ACTIVE before commit
    /// when the transaction wrote a setting (`LockedNode::transact`).
    /// The same Prolog run twice changes nothing the second time.
    pub fn transact(self, s: &mut Session<'_>) -> RunResult {
        let Self {
            mut r,
            record,
            policy,
            fabric,
            ..
        } = self;
        let paths = s.paths;
        let node = match s.node() {
            Ok(n) => n,
            Err(e) => return Err(r.fail(e, Exit::ByPolicy(policy))),
        };
        let job = record.job_id;
        let existing = match node.store.record(job) {
            Ok(e) => e,
            Err(e) => return Err(r.fail(e, Exit::ByPolicy(policy))),
        };
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
}

/// [`Session::promote_or_note`] for a grant: `false` when `loaded` is no
/// longer the mapping in force (not promoted).
fn promoted_or_noted(
    s: &mut Session<'_>,
    loaded: &Loaded,
    g: &mut JobGrant,
) -> Result<bool, Box<Failure>> {
    match s.promote_or_note(loaded, &mut g.r) {
        Ok(fresh) => Ok(fresh),
        Err(e) => Err(g.r.clone().fail(e, Exit::ByPolicy(g.policy))),
    }
}

/// The job's level under `loaded` (its QoS's, else the default level) and
/// its grant now: into the report, the level's policy armed. A QoS that
/// could not be learnt under `on_unknown_qos: fail_job`, or a level that
/// does not get its SL, fails the run under the level's policy.
fn decide(
    s: &mut Session<'_>,
    mut r: Report,
    job: JobId,
    q: &JobQos,
    loaded: &Loaded,
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
    if q.fallback.is_some() && m.on_unknown_qos == OnUnknownQos::FailJob {
        let why = q.note.clone().unwrap_or_default();
        r.job.level = None;
        return Err(r.fail(
            Error::QosUnknown(format!("{why}; on_unknown_qos: fail_job refuses the job")),
            Exit::ByPolicy(OnFailure::FailJob),
        ));
    }
    if let Some(note) = &q.note {
        r.notes.push(format!("{}{note}", qos::UNKNOWN_NOTE));
        if let Payload::Prolog(p) = &mut r.payload {
            p.qos_unknown = Some(note.clone());
        }
    }
    r.job.service_level = Some(level.service_level.get());
    r.job.virtual_lane = level.virtual_lane.map(VirtualLane::get);
    s.arm(&r, Exit::ByPolicy(policy));

    // At most half of what is left: a hung SMP query must leave the
    // transaction (and, under `warn`, the grant) its time.
    let (mut fabric, decided, recorded) =
        level_grant(s.paths, m, &loaded.sha256, level, &s.deadline.half());
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
        tell_slurm(s, m, &loaded.sha256, &level.name, &decided, &mut r);
        return Err(r.fail(refusal, Exit::ByPolicy(policy)));
    }
    let ports = port_layers(s.paths, m, fabric.assessment.as_ref());
    let record = job_record(
        job,
        crate::time::now_rfc3339(),
        r.job.user.clone(),
        q,
        (m, level, ports, decided.path_record_sl),
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
) -> (policy::Judgement, Grant, bool) {
    let on_failure = m.on_failure_for(level);
    let must_read = m.fabric_check == FabricCheck::Enforce && on_failure == OnFailure::FailJob;
    let mut notes = Vec::new();
    let stored = crate::state::grants::load(paths).unwrap_or_else(|e| {
        notes.push(format!("the recorded grants were not used: {e}"));
        None
    });
    let now = crate::time::now_ms();
    let recorded = |ports: Option<&[ReadPort]>| {
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
    if m.fabric_check != FabricCheck::Off {
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
    g: &Grant,
    (first_hop, recorded): (Option<ScopeRead>, bool),
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
        .unwrap_or_else(|| Record {
            mapping_sha256: sha256.to_owned(),
            ..Record::default()
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

/// A refused `fail_job` level (placement on): Slurm stops placing the
/// level's jobs here now, not at the next `health` run — the node's active
/// features sent from its grants with this refusal in them
/// ([`super::placement`]). After the node lock is let go: only a transaction
/// holds it, and slurmctld may be slow. Best effort: what happened is a
/// note; the refusal stands either way.
fn tell_slurm(
    s: &mut Session<'_>,
    m: &Mapping,
    sha256: &str,
    level: &str,
    g: &Grant,
    r: &mut Report,
) {
    if s.paths.scontrol.is_none() || g.decision != Decision::Refused {
        return;
    }
    s.unlock();
    let mut rec = crate::state::grants::load(s.paths)
        .ok()
        .flatten()
        .filter(|rec| rec.mapping_sha256 == sha256)
        .unwrap_or_else(|| Record {
            mapping_sha256: sha256.to_owned(),
            ..Record::default()
        });
    rec.grants.insert(level.to_owned(), g.clone());
    match super::placement::sync(s.paths, m, &rec, &s.deadline.half(), true) {
        Synced::Sent { active, .. } => r.notes.push(format!(
            "placement: sent active features {} (level {level} refused here)",
            active.join(",")
        )),
        Synced::Failed { error, .. } => r.notes.push(format!(
            "placement: could not tell slurmctld that level {level} is not carried here: \
             {error}"
        )),
        Synced::Off | Synced::Unchanged { .. } => {}
    }
}

/// The link layers of the job's ports on this node: the ACTIVE ports the
/// mapping's `devices:` selects, as the assessment sorted them, else (no
/// assessment: `fabric_check: off`) as sysfs says. Ports that cannot be
/// read are none known: nothing is held back.
pub fn port_layers(
    paths: &Paths,
    m: &Mapping,
    assessment: Option<&crate::fabric::Assessment>,
) -> PortLayers {
    if let Some(a) = assessment {
        return PortLayers {
            infiniband: !a.ib_ports.is_empty(),
            roce: !a.roce_ports.is_empty(),
        };
    }
    let Ok(found) = crate::fabric::gather::discover(paths, m) else {
        return PortLayers::default();
    };
    let active = || found.ports.iter().filter(|p| p.active);
    PortLayers {
        infiniband: active().any(|p| p.link_layer == LinkLayer::InfiniBand),
        roce: active().any(|p| p.link_layer == LinkLayer::Ethernet),
    }
}

/// The record a Prolog puts for its job: the level's settings and exports
/// under the mapping in force, for the node's link layers.
fn job_record(
    job: JobId,
    time: String,
    user: Option<String>,
    q: &JobQos,
    (m, level, ports, path_record): (&Mapping, &Level, PortLayers, bool),
    mapping_sha256: &str,
) -> JobRecord {
    let exports = exports::for_level(level, &m.exports, ports, path_record);
    JobRecord {
        job_id: job,
        time,
        user,
        qos: q.qos.clone(),
        qos_source: q.source,
        level: level.name.clone(),
        rank: m.rank(&level.name).unwrap_or(usize::MAX),
        service_level: level.service_level.get(),
        virtual_lane: level.virtual_lane.map(VirtualLane::get),
        traffic_class: level.traffic_class.map(TrafficClass::get),
        settings: level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str().to_owned(), n.value.clone()))
            .collect(),
        exports: exports.set,
        unset: exports.unset,
        mapping_sha256: mapping_sha256.to_owned(),
    }
}
