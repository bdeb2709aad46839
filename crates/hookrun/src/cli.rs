//! Command-line syntax (clap): the subcommands, help texts and `generate`. The
//! global flags are [`Options`] (`options.rs`); what they mean (precedence,
//! defaults, validation) is decided in `config.rs`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::options::Options;
use crate::phase::Phase;

const LONG_ABOUT: &str = "\
Runs the executables of a hook directory in ascending file-name order, each \
under a deadline inside an overall budget, for Slurm's Prolog, Epilog, \
TaskProlog and HealthCheckProgram.

With no subcommand the phase comes from SLURM_SCRIPT_CONTEXT (prolog_slurmd, \
epilog_slurmd, prolog_task); with neither, hookrun runs `health`, because Slurm \
starts HealthCheckProgram with no arguments and no context variable.";

const AFTER_LONG_HELP: &str = "\
Environment (a flag wins over its variable, a variable over hookrun.conf):
  HOOKRUN_ROOT, HOOKRUN_HOOK_DIR, HOOKRUN_CONFIG, HOOKRUN_ON_FAILURE,
  HOOKRUN_BUDGET, HOOKRUN_HOOK_TIMEOUT, HOOKRUN_KILL_GRACE, HOOKRUN_SCONTROL,
  HOOKRUN_SCONTROL_TIMEOUT, HOOKRUN_TEXTFILE_DIR
The task-prolog ignores every HOOKRUN_* variable: a TaskProlog runs with the
job user's environment. Slurm starts Prolog/Epilog with its own environment,
so in production configure hookrun through <hook-dir>/hookrun.conf.

Hooks: <root>/etc/slurm/{prolog.d,epilog.d,task-prolog.d,health.d}/; a name
ending in `.optional` marks an optional hook, every other hook is required.
A Prolog hook exiting 100 refuses the job, the node being fine: hookrun
sets the job's AdminComment to the hook's first line, requeues it (scontrol
requeue: pending again, not held) and exits 0, whatever on_failure says; a
job it cannot requeue (srun, salloc) is left to the hook's TaskProlog, and
the node is never drained for a refusal; any other failure of a required Prolog hook drains the node
with the reason 'hookrun: prolog HOOK: CAUSE' (on_failure = drain), and a
failed required Epilog hook with 'hookrun: epilog HOOK: CAUSE': a passing
health check resumes a node hookrun drained. A reason is one line of at most
200 bytes, cut after a whole word and ended with '…'.
Exit codes (one table with qoslane's): 0 ok (or the job refused, or held),
1 required hook failed / unhealthy, 2 hookrun.conf invalid or untrusted,
3 on_failure = requeue's hold failed (node drains), 4 hooks could not be run, 64 usage,
128+N stopped by signal N.
See hookrun(8) and /usr/share/doc/qoslane/hookrun.md.";

/// Slurm Prolog/Epilog/TaskProlog/HealthCheck hook runner.
#[derive(Debug, Parser)]
#[command(
    name = "hookrun",
    version = nodeio::build::VERSION,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub options: Options,
}

/// The command line as parsed, helped and documented: [`Cli`] with each
/// global flag said once (`manpage::globals_once`), as qoslane's.
pub fn command() -> clap::Command {
    manpage::globals_once(<Cli as clap::CommandFactory>::command())
}

/// Parses the process's arguments with [`command`].
///
/// # Errors
/// clap's, for a bad command line, `--help` and `--version`.
pub fn parse() -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
}

/// A hook's command line needs no parser: no argument (Slurm starts
/// `Prolog=`, `Epilog=`, `TaskProlog=` and `HealthCheckProgram=` so) or
/// only the phase's word. For these clap's command tree (a quarter of a
/// hook run's instructions) is not built; `None`: anything else (options
/// included), for clap. The tests below check that clap reads these lines
/// the same way, as qoslane's `hook_line`.
pub fn hook_line(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<Cli> {
    let command = match (args.next(), args.next()) {
        (None, _) => None,
        (Some(word), None) => Some(match word.to_str()? {
            "prolog" => Command::Prolog,
            "epilog" => Command::Epilog,
            "task-prolog" => Command::TaskProlog,
            "health" => Command::Health,
            _ => return None,
        }),
        (Some(_), Some(_)) => return None,
    };
    Some(Cli {
        command,
        options: Options::default(),
    })
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run prolog.d/ (Slurm `Prolog=`); stops at the first failed required hook.
    #[command(
        after_help = "Exit status: 0 every required hook passed, or a hook refused the job (requeued, or left to the TaskProlog), or the job requeued and held (on_failure = requeue), 1 a required hook failed (the node drains), 3 the requeue-hold of on_failure = requeue failed (the node drains), 2 hookrun.conf invalid or others may write it, 4 the hooks could not be run, 64 usage, 128+N stopped by signal N"
    )]
    Prolog,
    /// Run epilog.d/ (Slurm `Epilog=`); runs every hook even after a failure.
    #[command(
        after_help = "Exit status: 0 every required hook passed, 1 a required hook failed (the node drains), 2 hookrun.conf invalid or others may write it, 4 the hooks could not be run, 64 usage, 128+N stopped by signal N"
    )]
    Epilog,
    /// Run task-prolog.d/ (Slurm `TaskProlog=`); passes the export/unset/print
    /// protocol lines through to stdout.
    #[command(
        after_help = "Exit status: 0 every required hook passed, 1 a required hook failed (the task fails), 2 hookrun.conf invalid or others may write it, 4 the hooks could not be run, 64 usage, 128+N stopped by signal N"
    )]
    TaskProlog,
    /// Run health.d/ (Slurm `HealthCheckProgram=`); drains the node on failure and
    /// resumes it when hookrun drained it.
    #[command(
        after_help = "Exit status: 0 healthy, 1 unhealthy (the node drained), 2 hookrun.conf invalid or others may write it, 4 the hooks could not be run, 64 usage, 128+N stopped by signal N"
    )]
    Health,
    /// Print what each phase would run, in order, with required/optional.
    #[command(
        after_help = "Exit status: 0 listed, 2 hookrun.conf invalid or others may write it, 4 a phase directory or hookrun.conf unusable, 64 usage, 141 the reader went away"
    )]
    List {
        /// Only this phase.
        #[arg(value_enum)]
        phase: Option<Phase>,
    },
    /// Write the man page or shell completions (for packaging).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
}

/// What `hookrun generate` writes, from these same definitions.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Generate {
    /// Man pages into DIR.
    Man { dir: PathBuf },
    /// Completions for SHELL into DIR.
    Completions {
        shell: clap_complete::Shell,
        dir: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_after_the_subcommand() {
        let cli = Cli::try_parse_from(["hookrun", "prolog", "--budget", "3s", "--root", "/tmp/r"])
            .expect("valid command line");
        assert_eq!(cli.command, Some(Command::Prolog));
        assert_eq!(cli.options.budget, Some(Duration::from_secs(3)));
        assert_eq!(cli.options.root, Some(PathBuf::from("/tmp/r")));
    }

    #[test]
    fn list_takes_an_optional_phase() {
        let cli = Cli::try_parse_from(["hookrun", "list", "task-prolog"]).expect("valid");
        assert_eq!(
            cli.command,
            Some(Command::List {
                phase: Some(Phase::TaskProlog)
            })
        );
    }

    #[test]
    fn bad_duration_is_a_usage_error() {
        // clap's error, which `app::main` turns into exit 64 (usage).
        let error = Cli::try_parse_from(["hookrun", "--budget", "soon"]).expect_err("invalid");
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(error.use_stderr());
    }

    /// What the fast path reads is what clap reads, for every line it
    /// takes; every other line is left to clap.
    #[test]
    fn a_hook_line_is_read_as_clap_reads_it() {
        let line = |args: &[&str]| hook_line(args.iter().map(std::ffi::OsString::from));
        for args in [
            &[][..],
            &["prolog"],
            &["epilog"],
            &["task-prolog"],
            &["health"],
        ] {
            let fast = line(args).expect("a hook line");
            let clap = Cli::try_parse_from(std::iter::once("hookrun").chain(args.iter().copied()))
                .expect("clap parses it");
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{args:?}");
        }
        for args in [
            &["prolog", "--root", "/x"][..],
            &["--root", "/x"],
            &["list"],
            &["--help"],
            &["prolog", "--help"],
            &["Prolog"],
        ] {
            assert!(line(args).is_none(), "{args:?} must go to clap");
        }
    }
}
