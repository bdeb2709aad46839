//! Command-line syntax (clap). Meaning (precedence, defaults, validation) is
//! decided in [`crate::settings`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::phase::Phase;
use crate::settings::OnFailure;

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
Exit codes: 0 ok, 1 required hook failed / unhealthy, 2 usage, 3 requeue-hold
failed (node drains), 4 hooks could not be run, 128+N stopped by signal N.
See hookrun(8) and /usr/share/doc/qoslane/hookrun.md.";

/// Slurm Prolog/Epilog/TaskProlog/HealthCheck hook runner.
#[derive(Debug, Parser)]
#[command(
    name = "hookrun",
    version,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub options: Options,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Run prolog.d/ (Slurm `Prolog=`); stops at the first failed required hook.
    Prolog,
    /// Run epilog.d/ (Slurm `Epilog=`); runs every hook even after a failure.
    Epilog,
    /// Run task-prolog.d/ (Slurm `TaskProlog=`); passes the export/unset/print
    /// protocol lines through to stdout.
    TaskProlog,
    /// Run health.d/ (Slurm `HealthCheckProgram=`); drains the node on failure and
    /// resumes it when hookrun drained it.
    Health,
    /// Print what each phase would run, in order, with required/optional.
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

/// Options shared by every subcommand. All optional here: unset means "look at
/// the environment, then hookrun.conf, then the default".
#[derive(Debug, Clone, Default, Args)]
pub struct Options {
    /// Root prefix for every default path [env: HOOKRUN_ROOT] [default: /]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help = "Hook base directory holding prolog.d/ … and hookrun.conf, used as given \
                [env: HOOKRUN_HOOK_DIR] [default: <root>/etc/slurm]"
    )]
    pub hook_dir: Option<PathBuf>,

    #[arg(
        long,
        global = true,
        value_name = "FILE",
        help = "Configuration file, used as given [env: HOOKRUN_CONFIG] \
                [default: <hook-dir>/hookrun.conf]"
    )]
    pub config: Option<PathBuf>,

    /// What a failed required Prolog hook does [env: HOOKRUN_ON_FAILURE]
    /// [default: drain]
    #[arg(long, global = true, value_enum, value_name = "POLICY")]
    pub on_failure: Option<OnFailure>,

    /// Time for all hooks of one run, e.g. 20s [env: HOOKRUN_BUDGET] [default: 20s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub budget: Option<Duration>,

    /// Time for one hook [env: HOOKRUN_HOOK_TIMEOUT] [default: 10s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub hook_timeout: Option<Duration>,

    /// Wait between SIGTERM and SIGKILL for an overdue hook
    /// [env: HOOKRUN_KILL_GRACE] [default: 500ms]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub kill_grace: Option<Duration>,

    /// Absolute path of scontrol, run without a shell
    /// [env: HOOKRUN_SCONTROL] [default: /usr/bin/scontrol]
    #[arg(long, global = true, value_name = "PATH")]
    pub scontrol: Option<PathBuf>,

    /// Deadline for each scontrol call
    /// [env: HOOKRUN_SCONTROL_TIMEOUT] [default: 5s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    pub scontrol_timeout: Option<Duration>,

    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help = "node_exporter textfile directory, used as given [env: HOOKRUN_TEXTFILE_DIR] \
                [default: <root>/var/lib/prometheus/node-exporter]"
    )]
    pub textfile_dir: Option<PathBuf>,
}

/// Parses a human duration such as `20s`, `500ms`, `1m 30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|error| format!("invalid duration {text:?} ({error}); write e.g. 20s or 500ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
        let error = Cli::try_parse_from(["hookrun", "--budget", "soon"]).expect_err("invalid");
        assert_eq!(error.exit_code(), 2);
    }
}
