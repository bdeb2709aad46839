//! What a phase's result means for the job and the node: a Prolog hook's
//! refusal requeues the job with the reason in its `AdminComment` (or, when
//! it cannot be requeued, leaves it to the hook's TaskProlog) and never
//! drains the node, a failed Prolog or Epilog drains the node
//! with hookrun's own reason before exiting non-zero (so a later passing
//! health check resumes it), a health run drains or resumes ([`health`]).

use crate::config::{Config, ENV_JOB_ID, EnvSnapshot};
use crate::exit::ExitClass;
use crate::health;
use crate::log::{self, Priority};
use crate::options::OnFailure;
use crate::phase::Phase;
use crate::reason;
use crate::runner::{self, Fate, HookResult, PhaseReport};
use crate::slurm::Scontrol;

/// What the hooks' results mean for the job and the node.
pub fn decide(
    report: &PhaseReport,
    config: &Config,
    env: &EnvSnapshot,
    scontrol: &Scontrol<'_>,
) -> ExitClass {
    let phase = report.phase;
    let name = phase.name();
    if let Some(signal) = report.interrupted {
        log::phase(
            Priority::Warning,
            name,
            &format!(
                "stopped by {}: the running hook's process group was killed",
                runner::signal_name(signal)
            ),
        );
        return ExitClass::Interrupted(signal);
    }
    if phase == Phase::Health {
        return health::act(report, scontrol, &health::node_name(env), config);
    }
    let Some(failure) = report.required_failures().next() else {
        return ExitClass::Success;
    };
    let failed = format!("required hook {} {}", failure.name, failure.fate.verb());
    match phase {
        Phase::Prolog => {
            // Every scontrol call of the decision shares one scontrol_timeout.
            let prolog = Prolog {
                failure,
                failed: &failed,
                env,
                config,
                scontrol: scontrol.sharing_one_timeout(),
            };
            match (failure.fate, config.on_failure) {
                (Fate::Refused, _) => prolog.refuse(),
                (_, OnFailure::Drain) => prolog.fail(ExitClass::RequiredHookFailed),
                (_, OnFailure::Requeue) => {
                    prolog.hold_job("on_failure=requeue", ExitClass::Requeued)
                }
            }
        }
        Phase::Epilog => epilog_fails(failure, &failed, env, scontrol, config),
        Phase::TaskProlog | Phase::Health => {
            log::phase(
                Priority::Error,
                name,
                &format!(
                    "{failed}: exiting non-zero; Slurm fails this task (the node is not drained)"
                ),
            );
            ExitClass::RequiredHookFailed
        }
    }
}

/// A required Epilog hook failed (a setting it could not restore): the node
/// is drained with hookrun's reason naming the hook and its cause, then
/// hookrun exits non-zero. slurmctld keeps a drained node's reason when the
/// Epilog's status arrives; without hookrun's drain the reason is Slurm's
/// bare "Epilog error", which a passing health check never resumes (not
/// hookrun's drain) — so a node whose setting was restored since (qoslane's
/// health releases the job's record) stayed out of service.
fn epilog_fails(
    failure: &HookResult,
    failed: &str,
    env: &EnvSnapshot,
    scontrol: &Scontrol<'_>,
    config: &Config,
) -> ExitClass {
    let name = Phase::Epilog.name();
    let node = health::node_name(env);
    let reason = health::drain_reason(Phase::Epilog, failure);
    // An admin's drain stays as it is (a passing check must not resume it).
    let drained = if health::drain(scontrol, &node, &reason, name, config) {
        "Slurm keeps the node's drain reason; a passing `hookrun health` resumes a node hookrun drained"
    } else {
        "Slurm drains the node (\"Epilog error\")"
    };
    log::phase(
        Priority::Error,
        name,
        &format!("{failed}: exiting non-zero; {drained}"),
    );
    ExitClass::RequiredHookFailed
}

/// A Prolog whose required hook did not succeed: what becomes of the job
/// and the node.
struct Prolog<'r> {
    failure: &'r HookResult,
    /// `required hook NAME failed` (or `refused the job`, `timed out`…).
    failed: &'r str,
    env: &'r EnvSnapshot,
    config: &'r Config,
    scontrol: Scontrol<'r>,
}

impl Prolog<'_> {
    /// Hold the job, keep the node — policy `requeue` answers a hook's
    /// failure ([`ExitClass::Requeued`]; a refusal is [`Prolog::refuse`]'s);
    /// if the job cannot be held, the Prolog fails after all.
    fn hold_job(&self, why: &str, held: ExitClass) -> ExitClass {
        match self.hold(why) {
            Some(job_id) => {
                log::phase(
                    Priority::Warning,
                    Phase::Prolog.name(),
                    &format!(
                        "{}: job {job_id} requeued and held; exiting 0, the node stays in service (release it with `scontrol release {job_id}`)",
                        self.failed
                    ),
                );
                held
            }
            None => self.fail(ExitClass::RequeueFailed),
        }
    }

    /// `scontrol requeuehold $SLURM_JOB_ID`: the job id when it worked, else
    /// `None`, having said why.
    fn hold(&self, why: &str) -> Option<&str> {
        let name = Phase::Prolog.name();
        let failed = self.failed;
        let problem = match self.job_id() {
            Ok(id) => match self.scontrol.requeue_hold(id) {
                Ok(()) => return Some(id),
                Err(error) => format!("requeue-hold of job {id} failed ({error})"),
            },
            Err(problem) => problem,
        };
        log::phase(
            Priority::Error,
            name,
            &format!("{failed}; {why} but {problem}: the Prolog fails, the node drains"),
        );
        None
    }

    /// `SLURM_JOB_ID`, when it is a job id; else what is wrong with it.
    fn job_id(&self) -> Result<&str, String> {
        match self.env.text(ENV_JOB_ID) {
            Ok(Some(id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => Ok(id),
            Ok(Some(id)) => Err(format!("{ENV_JOB_ID}={id:?} is not a job id")),
            _ => Err(format!("{ENV_JOB_ID} is not set")),
        }
    }

    /// A hook refused the job ("refuse this job, the node is fine"): never a
    /// drain, whatever happens. The job's `AdminComment` gets the reason
    /// (the hook's first line: what its owner reads in `scontrol show job`;
    /// the job's own `Comment` stays the user's), then `scontrol requeue`:
    /// a batch job pends again, **not held**, and Slurm starts it where it
    /// can ([`ExitClass::Refused`]). A job that cannot be requeued — an
    /// srun's or salloc's ("Only batch jobs are accepted"), scontrol
    /// unreachable, no job id — is left to the refusing hook's TaskProlog,
    /// which fails the job's tasks with the reason (qoslane's does: the
    /// Prolog left it a marker) ([`ExitClass::RefusedInPlace`]). hookrun
    /// exits 0 either way: the node stays in service.
    fn refuse(&self) -> ExitClass {
        let name = Phase::Prolog.name();
        let failed = self.failed;
        let left = "exiting 0, the node stays in service; the refusing hook's TaskProlog fails \
                    the job's tasks with the reason (qoslane's does)";
        let id = match self.job_id() {
            Ok(id) => id,
            Err(problem) => {
                log::phase(
                    Priority::Error,
                    name,
                    &format!("{failed}, but {problem}: nothing to requeue; {left}"),
                );
                return ExitClass::RefusedInPlace;
            }
        };
        let why = refusal_reason(self.failure);
        let told = match self.scontrol.set_admin_comment(id, &why) {
            Ok(()) => format!("its AdminComment says why ({why})"),
            Err(error) => format!("its AdminComment was not set ({error}); the reason: {why}"),
        };
        match self.scontrol.requeue(id) {
            Ok(()) => {
                log::phase(
                    Priority::Warning,
                    name,
                    &format!(
                        "{failed}: job {id} requeued, pending (not held: Slurm starts it where it can); {told}; exiting 0, the node stays in service"
                    ),
                );
                ExitClass::Refused
            }
            Err(error) => {
                log::phase(
                    Priority::Warning,
                    name,
                    &format!("{failed}: job {id} not requeued ({error}); {told}; {left}"),
                );
                ExitClass::RefusedInPlace
            }
        }
    }

    /// The Prolog fails: the node is drained with a reason naming the hook
    /// and its cause (slurmctld keeps a drained node's reason when the
    /// Prolog's non-zero status arrives; without it the reason is Slurm's
    /// bare "Prolog error"), then hookrun exits non-zero.
    fn fail(&self, class: ExitClass) -> ExitClass {
        let name = Phase::Prolog.name();
        let node = health::node_name(self.env);
        let reason = health::drain_reason(Phase::Prolog, self.failure);
        // remembered first, so that a passing health check resumes it
        health::remember(self.config, true, name);
        let drained = match self.scontrol.drain(&node, &reason) {
            Ok(()) => format!("drained node {node}: {reason}"),
            Err(error) => format!(
                "draining node {node} with a reason failed ({error}); Slurm drains the node (\"Prolog error\")"
            ),
        };
        log::phase(
            Priority::Error,
            name,
            &format!(
                "{}: exiting non-zero; {drained}; Slurm requeues-and-holds a batch job",
                self.failed
            ),
        );
        class
    }
}

/// What a refused job is told (its `AdminComment`): the refusing hook's
/// first line — qoslane prints `qoslane: …` first on stdout — else that
/// the hook refused it; one printable line, cut as a drain reason is
/// ([`reason::fit`]).
pub fn refusal_reason(failure: &HookResult) -> String {
    match &failure.first_line {
        Some(line) if !line.trim().is_empty() => reason::fit(line),
        _ => reason::fit(&format!(
            "{} prolog {} refused the job",
            crate::slurm::REASON_PREFIX,
            failure.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(first_line: Option<&str>) -> HookResult {
        HookResult {
            name: "10-qoslane".to_owned(),
            required: true,
            fate: Fate::Refused,
            elapsed: None,
            detail: String::new(),
            first_line: first_line.map(str::to_owned),
        }
    }

    #[test]
    fn a_refusal_reason_is_the_hooks_first_line_else_says_which_hook() {
        assert_eq!(
            refusal_reason(&refusal(Some("qoslane: level mc not carried\ton n3"))),
            "qoslane: level mc not carried on n3"
        );
        assert_eq!(
            refusal_reason(&refusal(None)),
            "hookrun: prolog 10-qoslane refused the job"
        );
        let long = "x ".repeat(300);
        assert!(refusal_reason(&refusal(Some(&long))).len() <= reason::MAX_REASON);
    }
}
