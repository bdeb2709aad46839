//! The program: parse, resolve settings, run a phase, decide what its result
//! means for the job and the node, count it, and pick the exit code.

use std::time::{Duration, Instant};

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::discover;
use crate::exit::{self, Verdict};
use crate::health;
use crate::list;
use crate::log::{self, Priority};
use crate::metrics;
use crate::phase::Phase;
use crate::runner::{self, Limits, PhaseReport};
use crate::settings::{ENV_JOB_ID, ENV_SCRIPT_CONTEXT, EnvSnapshot, OnFailure, Settings};
use crate::signals::Signals;
use crate::slurm::{REASON_PREFIX, Scontrol};

/// After a termination signal hookrun has milliseconds before Slurm's SIGKILL:
/// try the metrics lock only briefly.
const INTERRUPTED_LOCK_WAIT: Duration = Duration::from_millis(50);

/// What the command line and `SLURM_SCRIPT_CONTEXT` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Run(Phase),
    List(Option<Phase>),
}

/// Entry point of the binary; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version come through here too (exit 0).
            let _ = error.print();
            return error.exit_code();
        }
    };
    run(&cli, &EnvSnapshot::from_process())
}

/// Runs a parsed command line against an environment snapshot.
pub fn run(cli: &Cli, env: &EnvSnapshot) -> i32 {
    if let Some(Command::Generate { what }) = &cli.command {
        return generate(what);
    }
    let action = match action(cli.command.clone(), env) {
        Ok(action) => action,
        Err(message) => {
            log::phase(Priority::Error, "error", &message);
            return exit::USAGE;
        }
    };
    // The TaskProlog runs with the job user's environment: not a source of
    // configuration.
    let trust_env = action != Action::Run(Phase::TaskProlog);
    let settings = match Settings::resolve(&cli.options, env, trust_env) {
        Ok(settings) => settings,
        Err(error) => {
            log::phase(Priority::Error, "error", &error.to_string());
            return exit::USAGE;
        }
    };
    match action {
        Action::List(only) => list::print(&settings, only),
        Action::Run(phase) => run_phase(phase, &settings, env).exit_code(),
    }
}

/// An explicit subcommand wins; else `SLURM_SCRIPT_CONTEXT`; else `health`
/// (Slurm runs HealthCheckProgram with no arguments and no context).
pub fn action(command: Option<Command>, env: &EnvSnapshot) -> Result<Action, String> {
    Ok(match command {
        Some(Command::Prolog) => Action::Run(Phase::Prolog),
        Some(Command::Epilog) => Action::Run(Phase::Epilog),
        Some(Command::TaskProlog) => Action::Run(Phase::TaskProlog),
        Some(Command::Health) => Action::Run(Phase::Health),
        Some(Command::List { phase }) => Action::List(phase),
        Some(Command::Generate { .. }) => {
            return Err("`generate` writes files; it runs no hooks".into());
        }
        None => match env.text(ENV_SCRIPT_CONTEXT).map_err(|e| e.to_string())? {
            None => Action::Run(Phase::Health),
            Some(context) => Action::Run(Phase::from_script_context(context).ok_or_else(|| {
                format!(
                    "{ENV_SCRIPT_CONTEXT}={context} is not a hook hookrun runs; use it as Prolog=, \
                     Epilog=, TaskProlog= or HealthCheckProgram=, or name the phase \
                     (hookrun prolog|epilog|task-prolog|health)"
                )
            })?),
        },
    })
}

/// The pages' date: `SOURCE_DATE_EPOCH` when the build sets it (packaging/
/// build.sh does: reproducible packages), else today. clap_mangen drops an
/// empty date from `.TH`, which shifts the source and manual into the wrong
/// places of the page's header and footer.
fn man_date() -> String {
    let when = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or_else(std::time::SystemTime::now, |secs| {
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)
        });
    humantime::format_rfc3339(when).to_string()[..10].to_owned()
}

/// `hookrun(8)` (section 8: it lives in /usr/sbin): the clap page with its
/// environment and exit codes (the long help's epilogue), plus FILES.
fn man_page(cmd: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    const FILES: &str = "\
.SH FILES
.TP
.B /etc/slurm/{prolog.d,epilog.d,task\\-prolog.d,health.d}/
The hooks of each phase, run in ascending file\\-name order.
.TP
.B /etc/slurm/hookrun.conf
Site settings (key = value lines; see /usr/share/doc/qoslane/hookrun.md).
Read only when owned by root and not writable by group or others.
.TP
.B /var/lib/hookrun/
The metric counters (metrics.json).
.TP
.B /var/lib/prometheus/node\\-exporter/hookrun.prom
The metrics, for node_exporter's textfile collector.
.SH \"SEE ALSO\"
.BR hookrun.conf (5),
.BR qoslane (8),
.BR slurm.conf (5),
.B /usr/share/doc/qoslane/hookrun.md
";
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let man = clap_mangen::Man::new(cmd)
        .section("8")
        .date(man_date())
        .source(format!("hookrun {}", env!("CARGO_PKG_VERSION")))
        .manual("System Administration");
    let mut roff = Vec::new();
    man.render_title(&mut roff)?;
    man.render_name_section(&mut roff)?;
    man.render_synopsis_section(&mut roff)?;
    man.render_description_section(&mut roff)?;
    man.render_options_section(&mut roff)?;
    man.render_subcommands_section(&mut roff)?;
    man.render_extra_section(&mut roff)?;
    roff.extend_from_slice(FILES.as_bytes());
    man.render_version_section(&mut roff)?;
    std::fs::write(dir.join(man.get_filename()), roff)?;
    let (name, conf) = crate::conf_man::page();
    std::fs::write(dir.join(name), conf)
}

/// `hookrun generate man DIR` / `completions SHELL DIR`: the man page and
/// completions come from the same clap definitions as the parser.
fn generate(what: &crate::cli::Generate) -> i32 {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let dir = match what {
        crate::cli::Generate::Man { dir } | crate::cli::Generate::Completions { dir, .. } => dir,
    };
    let result = std::fs::create_dir_all(dir).and_then(|()| match what {
        crate::cli::Generate::Man { .. } => man_page(cmd, dir),
        crate::cli::Generate::Completions { shell, .. } => {
            clap_complete::generate_to(*shell, &mut cmd, "hookrun", dir).map(drop)
        }
    });
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            log::phase(
                Priority::Error,
                "error",
                &format!("generate into {}: {e}", dir.display()),
            );
            exit::USAGE
        }
    }
}

fn run_phase(phase: Phase, settings: &Settings, env: &EnvSnapshot) -> Verdict {
    let started = Instant::now();
    let name = phase.name();
    // The TaskProlog's SLURM_JOB_ID comes from the user's environment: not a
    // fact to stamp on journal records.
    let job_id = match phase {
        Phase::TaskProlog => None,
        _ => env.text(ENV_JOB_ID).ok().flatten(),
    };
    log::init(&settings.root, job_id);
    // Logging waits for nothing past the phase's budget and the kill grace.
    nodeio::log::set_deadline(started + settings.budget + settings.kill_grace);
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            log::phase(
                Priority::Error,
                name,
                &format!("failed to install signal handlers: {error}"),
            );
            return Verdict::SetupFailed;
        }
    };
    if !settings.ignored_env.is_empty() {
        log::phase(
            Priority::Warning,
            name,
            &format!(
                "ignoring {} (a TaskProlog runs with the job user's environment)",
                settings.ignored_env.join(", ")
            ),
        );
    }
    let scontrol = Scontrol {
        path: &settings.scontrol,
        timeout: settings.scontrol_timeout,
        kill_grace: settings.kill_grace,
        signals: &signals,
        phase: name,
    };

    let dir = settings.phase_dir(phase);
    let listing = match discover::scan(&settings.root, &dir) {
        Ok(listing) => listing,
        Err(error) => {
            log::phase(Priority::Error, name, &error.to_string());
            if phase == Phase::Health {
                // slurmd only logs HealthCheckProgram's exit status: a health check
                // that cannot run must say so on the node itself.
                let reason = format!(
                    "{REASON_PREFIX} {}: cannot read the health checks",
                    dir.display()
                );
                health::drain(&scontrol, &health::node_name(env), &reason, name);
            }
            return Verdict::SetupFailed;
        }
    };
    if !listing.exists {
        log::phase(
            Priority::Info,
            name,
            &format!("{} does not exist: nothing to run", dir.display()),
        );
    }
    for (entry, why) in listing
        .ignored
        .iter()
        .filter(|(_, why)| why.is_suspicious())
    {
        log::hook(Priority::Warning, name, entry, &format!("ignored: {why}"));
    }

    let limits = Limits {
        budget_end: started + settings.budget,
        budget: settings.budget,
        hook_timeout: settings.hook_timeout,
        kill_grace: settings.kill_grace,
    };
    let report = runner::run_phase(phase, &listing.hooks, limits, &signals);
    let verdict = decide(&report, settings, env, &scontrol);
    let summary_priority = match verdict {
        Verdict::Success => Priority::Info,
        _ => Priority::Warning,
    };
    log::phase(
        summary_priority,
        name,
        &format!(
            "{} in {}; exit {}",
            report.summary(),
            log::duration(started.elapsed()),
            verdict.exit_code()
        ),
    );
    count(&report, settings, verdict);
    verdict
}

/// What the hooks' results mean for the job and the node.
fn decide(
    report: &PhaseReport,
    settings: &Settings,
    env: &EnvSnapshot,
    scontrol: &Scontrol<'_>,
) -> Verdict {
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
        return Verdict::Interrupted(signal);
    }
    let failed = report
        .required_failures()
        .next()
        .map(|failure| format!("required hook {} {}", failure.name, failure.outcome.verb()));
    match (phase, failed) {
        (Phase::Health, _) => health::act(report, scontrol, &health::node_name(env)),
        (_, None) => Verdict::Success,
        (Phase::Prolog, Some(failed)) => match settings.on_failure {
            OnFailure::Drain => {
                log::phase(
                    Priority::Error,
                    name,
                    &format!(
                        "{failed}: exiting non-zero; Slurm drains the node (\"Prolog error\") and requeues-and-holds a batch job"
                    ),
                );
                Verdict::RequiredHookFailed
            }
            OnFailure::Requeue => requeue(&failed, env, scontrol),
        },
        (Phase::Epilog, Some(failed)) => {
            log::phase(
                Priority::Error,
                name,
                &format!("{failed}: exiting non-zero; Slurm drains the node (\"Epilog error\")"),
            );
            Verdict::RequiredHookFailed
        }
        (Phase::TaskProlog, Some(failed)) => {
            log::phase(
                Priority::Error,
                name,
                &format!(
                    "{failed}: exiting non-zero; Slurm fails this task (the node is not drained)"
                ),
            );
            Verdict::RequiredHookFailed
        }
    }
}

/// Policy `requeue`: hold the job, keep the node.
fn requeue(failed: &str, env: &EnvSnapshot, scontrol: &Scontrol<'_>) -> Verdict {
    let name = Phase::Prolog.name();
    let job_id = match env.text(ENV_JOB_ID) {
        Ok(Some(id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => id,
        Ok(Some(id)) => {
            log::phase(
                Priority::Error,
                name,
                &format!(
                    "{failed}; on_failure=requeue but {ENV_JOB_ID}={id:?} is not a job id: exiting non-zero, the node drains"
                ),
            );
            return Verdict::RequeueFailed;
        }
        _ => {
            log::phase(
                Priority::Error,
                name,
                &format!(
                    "{failed}; on_failure=requeue but {ENV_JOB_ID} is not set: exiting non-zero, the node drains"
                ),
            );
            return Verdict::RequeueFailed;
        }
    };
    match scontrol.requeue_hold(job_id) {
        Ok(()) => {
            log::phase(
                Priority::Warning,
                name,
                &format!(
                    "{failed}: job {job_id} requeued and held; exiting 0 so the node stays in service (release it with `scontrol release {job_id}`)"
                ),
            );
            Verdict::Requeued
        }
        Err(error) => {
            log::phase(
                Priority::Error,
                name,
                &format!(
                    "{failed}; requeue-hold of job {job_id} failed ({error}): exiting non-zero, the node drains"
                ),
            );
            Verdict::RequeueFailed
        }
    }
}

/// Adds the run to the metrics. Never changes the verdict.
fn count(report: &PhaseReport, settings: &Settings, verdict: Verdict) {
    if report.results.is_empty() {
        return;
    }
    let records: Vec<metrics::Record<'_>> = report
        .results
        .iter()
        .map(|result| metrics::Record {
            phase: report.phase.name(),
            hook: &result.name,
            outcome: result.outcome,
            elapsed: result.elapsed,
            dropped: report.dropped(&result.name),
        })
        .collect();
    let paths = metrics::Paths {
        root: settings.root.clone(),
        state_dir: settings.state_dir.clone(),
        textfile_dir: settings.textfile_dir.clone(),
    };
    let lock_wait = match verdict {
        Verdict::Interrupted(_) => INTERRUPTED_LOCK_WAIT,
        _ => metrics::LOCK_WAIT,
    };
    let name = report.phase.name();
    match metrics::record(&paths, &records, lock_wait) {
        Ok(notes) => {
            for note in notes {
                log::phase(Priority::Warning, name, &note);
            }
        }
        // The TaskProlog runs as the job user, who cannot (and must not) write
        // root's metrics: not worth a line in every task's output.
        Err(error)
            if report.phase == Phase::TaskProlog
                && error.error.kind() == std::io::ErrorKind::PermissionDenied => {}
        Err(error) => log::phase(
            Priority::Warning,
            name,
            &format!("metrics not updated: {error}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> EnvSnapshot {
        EnvSnapshot::from_vars(vars.iter().map(|(k, v)| (*k, *v)))
    }

    #[test]
    fn subcommand_wins_over_context() {
        let env = env(&[(ENV_SCRIPT_CONTEXT, "prolog_slurmd")]);
        assert_eq!(
            action(Some(Command::Epilog), &env),
            Ok(Action::Run(Phase::Epilog))
        );
    }

    #[test]
    fn context_picks_the_phase() {
        for (context, phase) in [
            ("prolog_slurmd", Phase::Prolog),
            ("epilog_slurmd", Phase::Epilog),
            ("prolog_task", Phase::TaskProlog),
        ] {
            let env = env(&[(ENV_SCRIPT_CONTEXT, context)]);
            assert_eq!(action(None, &env), Ok(Action::Run(phase)));
        }
    }

    #[test]
    fn no_context_no_subcommand_is_health() {
        assert_eq!(action(None, &env(&[])), Ok(Action::Run(Phase::Health)));
    }

    #[test]
    fn unknown_context_is_a_usage_error() {
        let env = env(&[(ENV_SCRIPT_CONTEXT, "epilog_task")]);
        let error = action(None, &env).expect_err("not served");
        assert!(
            error.contains("SLURM_SCRIPT_CONTEXT=epilog_task"),
            "{error}"
        );
    }
}
