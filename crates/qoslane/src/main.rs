//! `qoslane`: parse the command line, build the run's context, dispatch.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use qoslane::cli::{Cli, Command, Generate};
use qoslane::commands::{self, Ctx};
use qoslane::error::Error;
use qoslane::exit_code;
use qoslane::paths::{Overrides, Paths};

/// What `SLURM_SCRIPT_CONTEXT` selects when no subcommand is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hook {
    Prolog,
    Epilog,
    TaskProlog,
}

fn hook_for_context(ctx: Option<&str>) -> Option<Hook> {
    match ctx? {
        "prolog_slurmd" => Some(Hook::Prolog),
        "epilog_slurmd" => Some(Hook::Epilog),
        "prolog_task" => Some(Hook::TaskProlog),
        _ => None,
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit_code::USAGE as u8
            } else {
                0
            });
        }
    };
    let context = std::env::var("SLURM_SCRIPT_CONTEXT").ok();
    let hook = match &cli.command {
        Some(Command::Prolog) => Some(Hook::Prolog),
        Some(Command::Epilog) => Some(Hook::Epilog),
        Some(Command::TaskProlog) => Some(Hook::TaskProlog),
        Some(_) => None,
        None => match hook_for_context(context.as_deref()) {
            Some(h) => Some(h),
            None => {
                eprintln!(
                    "qoslane: no subcommand and SLURM_SCRIPT_CONTEXT is {}; see `qoslane --help`",
                    context
                        .as_deref()
                        .map_or("unset".into(), |c| format!("`{c}`"))
                );
                return ExitCode::from(exit_code::USAGE as u8);
            }
        },
    };

    // The TaskProlog's environment is the user's: only the command line counts.
    let trust_env = hook != Some(Hook::TaskProlog);
    let env = |name| if trust_env { env_path(name) } else { None };
    let paths = Paths::new(Overrides {
        root: cli.root.clone().or_else(|| env("QOSLANE_ROOT")),
        config: cli.config.clone().or_else(|| env("QOSLANE_CONFIG")),
        audit_log: env("QOSLANE_AUDIT_LOG"),
        textfile_dir: env("QOSLANE_TEXTFILE_DIR"),
        smpquery: env("QOSLANE_SMPQUERY"),
        scontrol: env("QOSLANE_SCONTROL"),
    });
    qoslane::log::init(&paths);
    if hook == Some(Hook::TaskProlog) {
        return ExitCode::from(commands::task_prolog::run(&paths) as u8);
    }
    let timeout = cli
        .timeout_ms
        .or_else(|| {
            std::env::var("QOSLANE_TIMEOUT_MS")
                .ok()
                .and_then(|v| v.parse().ok())
        })
        .map_or(commands::DEFAULT_TIMEOUT, Duration::from_millis);
    let ctx = Ctx {
        paths,
        timeout,
        context,
    };

    let result: Result<i32, Error> = match (hook, cli.command) {
        (Some(Hook::Prolog), _) => Ok(commands::hooks::prolog(&ctx)),
        (Some(Hook::Epilog), _) => Ok(commands::hooks::epilog(&ctx)),
        (Some(Hook::TaskProlog), _) => unreachable!("handled above"),
        (None, Some(cmd)) => match cmd {
            Command::Validate { file, format } => commands::validate::run(&file, format),
            Command::Explain { qos, format } => commands::explain::run(&ctx, &qos, format),
            Command::Sync => Ok(commands::sync::run(&ctx)),
            Command::Health { json } => Ok(commands::health::run(&ctx, json)),
            Command::Status { json } => commands::status::run(&ctx, json),
            Command::Recover => Ok(commands::recover::run(&ctx)),
            Command::Metrics { listen } => commands::serve::run(&ctx, listen.as_deref()),
            Command::Generate { what } => generate(what),
            Command::Prolog | Command::Epilog | Command::TaskProlog => {
                unreachable!("hooks handled above")
            }
        },
        (None, None) => unreachable!("no hook and no command exits above"),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            eprintln!("qoslane: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn generate(what: Generate) -> Result<i32, Error> {
    let cmd = Cli::command();
    match what {
        Generate::Man { dir } => {
            std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
            clap_mangen::generate_to(cmd, &dir).map_err(Error::io("write man pages to", &dir))?;
        }
        Generate::Completions { shell, dir } => {
            std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
            let mut cmd = cmd;
            clap_complete::generate_to(shell, &mut cmd, "qoslane", &dir)
                .map_err(Error::io("write completions to", &dir))?;
        }
    }
    Ok(exit_code::OK)
}
