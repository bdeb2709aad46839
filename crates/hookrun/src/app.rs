//! The program: parse, resolve the configuration, run a phase, decide what its
//! result means for the job and the node, count it, and pick the exit code.
//! The man pages it writes for `generate man` are [`crate::manual`]'s.

use std::time::{Duration, Instant};

use crate::builtin::BuiltIn;
use crate::child::Entry;
use crate::cli::{Cli, Command, Generate};
use crate::config::{Config, ENV_JOB_ID, ENV_NODENAME, ENV_SCRIPT_CONTEXT, EnvSnapshot};
use crate::decide;
use crate::discover;
use crate::exit::{self, ExitClass};
use crate::health;
use crate::list;
use crate::log::{self, Priority};
use crate::manual;
use crate::metrics;
use crate::phase::Phase;
use crate::runner::{self, Limits, PhaseReport};
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
    /// A bare `hookrun` typed on a terminal: what would run and how it
    /// went last time, instead of a health check that can drain the node.
    Show,
}

/// Whether hookrun was typed by hand: stdin and stdout are terminals. Slurm
/// starts every hook with neither.
pub fn on_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Entry point of the binary; returns the exit code.
pub fn main() -> i32 {
    main_with(None)
}

/// Entry point of a binary that embeds hookrun and has a hook of its own
/// (qoslane's, run under the name `hookrun`): a hook file that is the
/// running binary runs `built_in` in a fork, without exec
/// ([`crate::builtin`]); every other hook as [`main`] runs it.
pub fn main_with(built_in: Option<Entry>) -> i32 {
    let fast = crate::cli::hook_line(std::env::args_os().skip(1));
    let cli = match fast.map_or_else(crate::cli::parse, Ok) {
        Ok(cli) => cli,
        Err(error) => {
            // --help and --version come through here too (exit 0); a bad
            // command line is a usage error, 64 as in qoslane (clap's own
            // code is 2, which both programs keep for a bad configuration
            // file).
            let _ = error.print();
            return if error.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    run_with(&cli, &EnvSnapshot::from_process(), built_in)
}

/// Runs a parsed command line against an environment snapshot.
pub fn run(cli: &Cli, env: &EnvSnapshot) -> i32 {
    run_with(cli, env, None)
}

/// [`run`], with the running binary's own hook ([`main_with`]).
pub fn run_with(cli: &Cli, env: &EnvSnapshot, built_in: Option<Entry>) -> i32 {
    if let Some(Command::Generate { what }) = &cli.command {
        return generate(what);
    }
    let action = match action(cli.command.clone(), env, on_terminal()) {
        Ok(action) => action,
        Err(message) => {
            log::phase(Priority::Error, "error", &message);
            return exit::USAGE;
        }
    };
    // The TaskProlog runs with the job user's environment: not a source of
    // configuration.
    let trust_env = action != Action::Run(Phase::TaskProlog);
    let config = match Config::resolve(&cli.options, env, trust_env) {
        Ok(config) => config,
        Err(error) => {
            log::phase(Priority::Error, "error", &error.to_string());
            return error.exit_class().exit_code();
        }
    };
    match action {
        Action::List(only) => list::print(&config, only),
        Action::Show => {
            log::phase(
                Priority::Info,
                "list",
                "no subcommand, no Slurm context, on a terminal: showing what would run (as \
                 `hookrun list`), running nothing; `hookrun health` runs the health check",
            );
            list::print(&config, None)
        }
        Action::Run(phase) => {
            let built_in = built_in.and_then(BuiltIn::of_running_binary);
            run_phase(phase, &config, env, built_in.as_ref()).exit_code()
        }
    }
}

/// An explicit subcommand wins; else `SLURM_SCRIPT_CONTEXT`; else `health`
/// (Slurm runs HealthCheckProgram with no arguments and no context) — unless
/// typed by hand (`terminal`: stdin and stdout are terminals) with nothing
/// of Slurm's in the environment (no `SLURMD_NODENAME`, which slurmd gives
/// the health check, nor `SLURM_JOB_ID`): then [`Action::Show`].
pub fn action(
    command: Option<Command>,
    env: &EnvSnapshot,
    terminal: bool,
) -> Result<Action, String> {
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
            None if terminal
                && env.get(ENV_NODENAME).is_none()
                && env.get(ENV_JOB_ID).is_none() =>
            {
                Action::Show
            }
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

/// `hookrun generate man DIR` / `completions SHELL DIR`: the man pages
/// ([`manual`]) and completions come from the same clap definitions as the
/// parser.
fn generate(what: &Generate) -> i32 {
    let dir = match what {
        Generate::Man { dir } | Generate::Completions { dir, .. } => dir,
    };
    let result = std::fs::create_dir_all(dir).and_then(|()| match what {
        Generate::Man { .. } => manual::pages()?
            .into_iter()
            .try_for_each(|(name, roff)| std::fs::write(dir.join(name), roff)),
        Generate::Completions { shell, .. } => {
            clap_complete::generate_to(*shell, &mut crate::cli::command(), "hookrun", dir).map(drop)
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

fn run_phase(
    phase: Phase,
    config: &Config,
    env: &EnvSnapshot,
    built_in: Option<&BuiltIn>,
) -> ExitClass {
    let started = Instant::now();
    let name = phase.name();
    // The TaskProlog's SLURM_JOB_ID comes from the user's environment: not a
    // fact to stamp on journal records.
    let job_id = match phase {
        Phase::TaskProlog => None,
        _ => env.text(ENV_JOB_ID).ok().flatten(),
    };
    log::init(&config.root, job_id);
    // Logging waits for nothing past the phase's budget and the kill grace.
    nodeio::log::set_deadline(started + config.budget + config.kill_grace);
    let signals = match Signals::install() {
        Ok(signals) => signals,
        Err(error) => {
            log::phase(
                Priority::Error,
                name,
                &format!("failed to set up the stop signals (signalfd): {error}"),
            );
            return ExitClass::SetupFailed;
        }
    };
    warn_about_signals(&signals, name);
    warn_about_config(config, name);
    let scontrol = Scontrol {
        path: &config.scontrol,
        timeout: config.scontrol_timeout,
        kill_grace: config.kill_grace,
        signals: &signals,
        phase: name,
        end: None,
    };
    if phase == Phase::Health
        && let Some(problem) = config.task_prolog_problem()
    {
        // The node would run every task with settings the admin did not
        // write: out of service, with the reason on the node, until fixed.
        return health::refuse(&scontrol, &health::node_name(env), &problem, name, config);
    }

    let dir = config.phase_dir(phase);
    let listing = match discover::scan(&config.root, &dir) {
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
                let _ = health::drain(&scontrol, &health::node_name(env), &reason, name, config);
            }
            return ExitClass::SetupFailed;
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
        budget_end: started + config.budget,
        budget: config.budget,
        hook_timeout: config.hook_timeout,
        kill_grace: config.kill_grace,
    };
    let report = runner::run_phase(phase, &listing.hooks, limits, &signals, built_in);
    let class = decide::decide(&report, config, env, &scontrol);
    let summary_priority = match class {
        ExitClass::Success => Priority::Info,
        _ => Priority::Warning,
    };
    log::phase(
        summary_priority,
        name,
        &format!(
            "{} in {}; exit {}",
            report.summary(),
            log::duration(started.elapsed()),
            class.exit_code()
        ),
    );
    count(&report, config, class);
    class
}

/// A signal mask hookrun was started with: worth a line, as whoever started
/// it may have blocked what Slurm stops it with (the stop signals stay
/// blocked, read from their descriptor; the rest is cleared).
fn warn_about_signals(signals: &Signals, name: &str) {
    if signals.were_blocked.is_empty() {
        return;
    }
    let names: Vec<String> = signals
        .were_blocked
        .iter()
        .map(|&n| format!("{} ({n})", runner::signal_name(n)))
        .collect();
    log::phase(
        Priority::Warning,
        name,
        &format!(
            "started with signals blocked: {} (its stop signals read all the same, the rest cleared; its hooks start with none blocked)",
            names.join(", ")
        ),
    );
}

/// What the TaskProlog, running as the job's user, left out of its
/// configuration: the user's `HOOKRUN_*` variables, a `hookrun.conf` it
/// cannot read.
fn warn_about_config(config: &Config, name: &str) {
    if !config.ignored_env.is_empty() {
        log::phase(
            Priority::Warning,
            name,
            &format!(
                "ignoring {} (a TaskProlog runs with the job user's environment)",
                config.ignored_env.join(", ")
            ),
        );
    }
    if let Some(why) = &config.unreadable {
        log::phase(
            Priority::Warning,
            name,
            &format!(
                "{why}: running with the built-in defaults (the TaskProlog runs as the job's user; `hookrun health` drains the node until the file is readable by every user)"
            ),
        );
    }
}

/// Adds the run to the metrics. Never changes the exit class.
fn count(report: &PhaseReport, config: &Config, class: ExitClass) {
    if report.results.is_empty() {
        return;
    }
    let records: Vec<metrics::Record<'_>> = report
        .results
        .iter()
        .map(|result| metrics::Record {
            phase: report.phase.name(),
            hook: &result.name,
            fate: result.fate,
            elapsed: result.elapsed,
            dropped: report.dropped(&result.name),
        })
        .collect();
    let paths = metrics::Paths {
        root: config.root.clone(),
        state_dir: config.state_dir.clone(),
        textfile_dir: config.textfile_dir.clone(),
    };
    let lock_wait = match class {
        ExitClass::Interrupted(_) => INTERRUPTED_LOCK_WAIT,
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
            action(Some(Command::Epilog), &env, true),
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
            assert_eq!(action(None, &env, false), Ok(Action::Run(phase)));
            assert_eq!(action(None, &env, true), Ok(Action::Run(phase)));
        }
    }

    #[test]
    fn no_context_no_subcommand_is_health() {
        assert_eq!(
            action(None, &env(&[]), false),
            Ok(Action::Run(Phase::Health))
        );
    }

    /// Issue 25: a bare `hookrun` typed by hand ran a health check that can
    /// drain the node. On a terminal with nothing of Slurm's it shows
    /// instead; slurmd's call (no terminal, `SLURMD_NODENAME`) runs health.
    #[test]
    fn bare_on_a_terminal_shows_instead_of_acting() {
        assert_eq!(action(None, &env(&[]), true), Ok(Action::Show));
        for slurm in [ENV_NODENAME, ENV_JOB_ID] {
            assert_eq!(
                action(None, &env(&[(slurm, "c1")]), true),
                Ok(Action::Run(Phase::Health)),
                "{slurm}"
            );
        }
        assert_eq!(
            action(Some(Command::Health), &env(&[]), true),
            Ok(Action::Run(Phase::Health))
        );
    }

    #[test]
    fn unknown_context_is_a_usage_error() {
        let env = env(&[(ENV_SCRIPT_CONTEXT, "epilog_task")]);
        let error = action(None, &env, false).expect_err("not served");
        assert!(
            error.contains("SLURM_SCRIPT_CONTEXT=epilog_task"),
            "{error}"
        );
    }
}
