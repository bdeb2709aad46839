//! What a health run does to the node: drain it when a required check fails,
//! resume it when every check passes and the drain was hookrun's own — never a
//! node an admin (or Slurm, "Prolog error") drained. A passing check asks
//! slurmctld about the node only when a drain of hookrun's may be in place
//! ([`drained`]: kept on the node): no request otherwise.

use std::io::Write;

use crate::config::{Config, ENV_NODENAME, EnvSnapshot};
use crate::drained::{self, Known};
use crate::exit::ExitClass;
use crate::log::{self, Priority};
use crate::phase::Phase;
use crate::reason;
use crate::runner::{Fate, HookResult, PhaseReport};
use crate::slurm::{NodeState, REASON_PREFIX, Scontrol};

/// The reason hookrun drains a node with for `failure`, a required hook of
/// `phase`: `hookrun: 10-ib: port mlx5_0/1 is DOWN` (health), `hookrun:
/// prolog 60-scratch: scratch not mounted` (the Prolog) — one line,
/// printable, within [`reason::MAX_REASON`] bytes, cut after a whole word
/// with `…` ([`reason::fit`]); [`REASON_PREFIX`] marks it as hookrun's to
/// resume.
pub fn drain_reason(phase: Phase, failure: &HookResult) -> String {
    let what = match (&failure.fate, &failure.first_line) {
        (Fate::Failed | Fate::Refused, Some(line)) => line.clone(),
        (Fate::Failed, None) => failure.detail.clone(),
        (fate, _) => format!("{}: {}", fate.label(), failure.detail),
    };
    let text = match phase {
        Phase::Health => format!("{REASON_PREFIX} {}: {what}", failure.name),
        _ => format!("{REASON_PREFIX} {} {}: {what}", phase.name(), failure.name),
    };
    reason::fit(&text)
}

/// The node name Slurm knows this node by: `SLURMD_NODENAME` (set by slurmd
/// for its hooks), else the short host name.
pub fn node_name(env: &EnvSnapshot) -> String {
    if let Ok(Some(name)) = env.text(ENV_NODENAME) {
        return name.to_owned();
    }
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy();
    host.split('.').next().unwrap_or_default().to_owned()
}

/// Drains or resumes the node according to `report`, returns the exit class.
pub fn act(
    report: &PhaseReport,
    scontrol: &Scontrol<'_>,
    node: &str,
    config: &Config,
) -> ExitClass {
    let phase = report.phase.name();
    if let Some(failure) = report.required_failures().next() {
        unhealthy(
            scontrol,
            node,
            &drain_reason(report.phase, failure),
            phase,
            config,
        )
    } else {
        resume_if_ours(scontrol, node, phase, config);
        ExitClass::Success
    }
}

/// Keeps on the node whether a drain of hookrun's may be in place
/// ([`drained::record`]); a record that fails is logged (the next passing
/// check then asks slurmctld).
pub fn remember(config: &Config, drained: bool, phase: &str) {
    if let Err(error) = drained::record(&config.root, &config.state_dir, drained) {
        log::phase(
            Priority::Warning,
            phase,
            &format!("{error}; the next passing health check asks slurmctld about the node"),
        );
    }
}

/// A configuration the node must not run jobs with (`hookrun.conf` the
/// TaskProlog cannot read): no check runs — a passing one would resume the
/// node — and the node is drained with `problem` as its reason.
pub fn refuse(
    scontrol: &Scontrol<'_>,
    node: &str,
    problem: &str,
    phase: &str,
    config: &Config,
) -> ExitClass {
    log::phase(Priority::Error, phase, problem);
    let reason = reason::fit(&format!("{REASON_PREFIX} {problem}"));
    unhealthy(scontrol, node, &reason, phase, config)
}

/// Says `reason` on stdout and drains the node with it.
fn unhealthy(
    scontrol: &Scontrol<'_>,
    node: &str,
    reason: &str,
    phase: &str,
    config: &Config,
) -> ExitClass {
    // slurmd logs a failed health check's stdout ("health_check failed:
    // rc:1 output:…"): give it the one line that says why.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{reason}").and_then(|()| out.flush());
    drop(out);
    let _ = drain(scontrol, node, reason, phase, config);
    ExitClass::Unhealthy
}

/// Drains `node` with `reason` — unless someone else drained it (their reason
/// stays) or hookrun already did with the same reason (its time stays). When
/// the state cannot be read the node is drained anyway: a sick node must not
/// take jobs. Whether the node is drained now (by this call or before it).
/// A drain hookrun asks for (or finds its own) is remembered on the node
/// first ([`remember`]), so that a passing check resumes it.
pub fn drain(
    scontrol: &Scontrol<'_>,
    node: &str,
    reason: &str,
    phase: &str,
    config: &Config,
) -> bool {
    match scontrol.show_node(node) {
        Ok(state) if state.is_drained() && !state.drained_by_hookrun() => {
            log::phase(
                Priority::Warning,
                phase,
                &format!(
                    "unhealthy ({reason}); node {node} is already drained by someone else ({}), leaving it",
                    describe(&state)
                ),
            );
            return true;
        }
        Ok(state) if state.drained_by_hookrun() && state.reason.as_deref() == Some(reason) => {
            remember(config, true, phase);
            log::phase(
                Priority::Warning,
                phase,
                &format!("unhealthy; node {node} is already drained with this reason ({reason})"),
            );
            return true;
        }
        Ok(_) => {}
        Err(error) => log::phase(
            Priority::Warning,
            phase,
            &format!("could not read the state of node {node} ({error}); draining anyway"),
        ),
    }
    remember(config, true, phase);
    match scontrol.drain(node, reason) {
        Ok(()) => {
            log::phase(
                Priority::Error,
                phase,
                &format!("unhealthy: drained node {node}: {reason}"),
            );
            true
        }
        Err(error) => {
            log::phase(
                Priority::Error,
                phase,
                &format!("unhealthy ({reason}), but draining node {node} failed: {error}"),
            );
            false
        }
    }
}

/// Resumes `node` if, and only if, it is drained with a hookrun reason. Asks
/// slurmctld (`scontrol show node`) only when a drain of hookrun's may be in
/// place ([`drained::read`] not `in-service`), and records what it found: no
/// drain of hookrun's (any more) is `in-service`, and the next passing checks
/// ask nothing.
fn resume_if_ours(scontrol: &Scontrol<'_>, node: &str, phase: &str, config: &Config) {
    if drained::read(&config.root, &config.state_dir) == Known::InService {
        return;
    }
    match scontrol.show_node(node) {
        Ok(state) if state.drained_by_hookrun() => match scontrol.resume(node) {
            Ok(()) => {
                remember(config, false, phase);
                log::phase(
                    Priority::Info,
                    phase,
                    &format!("healthy: resumed node {node} ({})", describe(&state)),
                );
            }
            Err(error) => log::phase(
                Priority::Warning,
                phase,
                &format!("healthy, but resuming node {node} failed: {error}"),
            ),
        },
        Ok(state) if state.is_drained() => {
            remember(config, false, phase);
            log::phase(
                Priority::Info,
                phase,
                &format!(
                    "healthy; node {node} stays drained: not drained by hookrun ({})",
                    describe(&state)
                ),
            );
        }
        Ok(_) => remember(config, false, phase),
        Err(error) => log::phase(
            Priority::Warning,
            phase,
            &format!("healthy; could not read the state of node {node} ({error}), not resuming"),
        ),
    }
}

fn describe(state: &NodeState) -> String {
    match &state.reason {
        Some(reason) => format!("State={} Reason={reason}", state.state),
        None => format!("State={}", state.state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(fate: Fate, first_line: Option<&str>, detail: &str) -> HookResult {
        HookResult {
            name: "10-ib".to_owned(),
            required: true,
            fate,
            elapsed: None,
            detail: detail.to_owned(),
            first_line: first_line.map(str::to_owned),
        }
    }

    #[test]
    fn reason_uses_the_first_output_line() {
        let reason = drain_reason(
            Phase::Health,
            &failure(Fate::Failed, Some("port mlx5_0/1 DOWN"), "exit status 1"),
        );
        assert_eq!(reason, "hookrun: 10-ib: port mlx5_0/1 DOWN");
    }

    #[test]
    fn reason_falls_back_to_the_status() {
        let reason = drain_reason(Phase::Health, &failure(Fate::Failed, None, "exit status 1"));
        assert_eq!(reason, "hookrun: 10-ib: exit status 1");
        let reason = drain_reason(
            Phase::Health,
            &failure(
                Fate::Timeout,
                Some("checking"),
                "deadline of 10s (hook_timeout) reached; process group killed",
            ),
        );
        assert!(
            reason.starts_with("hookrun: 10-ib: timeout: deadline of 10s"),
            "{reason}"
        );
    }

    #[test]
    fn reason_is_one_bounded_line() {
        let long = format!("tab\there {}", "x".repeat(500));
        let reason = drain_reason(Phase::Health, &failure(Fate::Failed, Some(&long), ""));
        assert!(reason.len() <= reason::MAX_REASON);
        assert!(!reason.contains('\t'));
    }

    #[test]
    fn node_name_prefers_slurmd_nodename() {
        let env = EnvSnapshot::from_vars([("SLURMD_NODENAME", "c42")]);
        assert_eq!(node_name(&env), "c42");
        let short = node_name(&EnvSnapshot::default());
        assert!(!short.is_empty() && !short.contains('.'), "{short}");
    }
}
