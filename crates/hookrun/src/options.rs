//! The global flags: one optional override per configuration key, shared by
//! every subcommand, and the words they share with the configuration's other
//! sources (`HOOKRUN_*` variables, `hookrun.conf`): the [`OnFailure`] policy and
//! the duration syntax. The command line (`cli.rs`) flattens [`Options`] into
//! itself and the configuration (`config.rs`) resolves them: both import this
//! module, neither imports the other.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// What a failed required Prolog hook does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnFailure {
    /// Exit non-zero: Slurm requeues and holds a batch job (cancels an
    /// interactive one) and drains the node with "Prolog error".
    Drain,
    /// Run `scontrol requeuehold $SLURM_JOB_ID` and exit 0 so the node stays in
    /// service; if that fails, exit non-zero (drain) after all.
    Requeue,
}

impl OnFailure {
    pub fn name(self) -> &'static str {
        match self {
            OnFailure::Drain => "drain",
            OnFailure::Requeue => "requeue",
        }
    }

    /// The policy named in a variable or `hookrun.conf`.
    pub fn parse(text: &str) -> Result<OnFailure, String> {
        match text {
            "drain" => Ok(OnFailure::Drain),
            "requeue" => Ok(OnFailure::Requeue),
            other => Err(format!(
                "invalid policy {other:?}; expected `drain` or `requeue`"
            )),
        }
    }
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
