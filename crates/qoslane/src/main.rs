//! `qoslane`: parse the command line, decide whether the environment may be
//! trusted, build the run's context, dispatch in one match; the exit code is
//! the exit class's.
//!
//! One binary, two programs: run under the name `hookrun` (the link the
//! packages install, `/usr/lib/qoslane/hookrun`, which slurm.conf names as
//! Prolog, Epilog, TaskProlog and HealthCheckProgram) it is hookrun, with
//! qoslane's hook built in: a hook file that is this binary (the packaged
//! links to `/usr/sbin/qoslane`) runs in a fork of hookrun that calls
//! [`hook`], without a second exec (hookrun's `builtin.rs`). Under any other
//! name it is qoslane.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use qoslane::cli::{Cli, Command, FabricCommand, Generate};
use qoslane::commands::{self, Ctx};
use qoslane::error::Error;
use qoslane::exit_code::ExitClass;
use qoslane::paths::{Overrides, Paths};
use qoslane::site::SiteOptions;

/// What runs: a subcommand, or the hook `SLURM_SCRIPT_CONTEXT` selects.
#[derive(Debug)]
enum Mode {
    Prolog,
    Epilog,
    TaskProlog,
    Other(Command),
}

impl Mode {
    /// `phase` is hookrun's `HOOKRUN_PHASE`: the packaged hooks are links to
    /// this binary, so the phase hookrun runs is the hook's, and it wins over
    /// Slurm's context. A site that runs `hookrun health` from its Epilog
    /// (NHC's pattern) gets the health check, not a second Epilog; with no
    /// hookrun (`Prolog=qoslane`) the context chooses. Only the TaskProlog's
    /// context is kept whatever the phase says: there the environment is the
    /// job's user's, who could set `HOOKRUN_PHASE` (and hookrun's
    /// `task-prolog` says the same). It gives nobody anything: the other
    /// hooks change only what their caller, root, can change anyway.
    fn of(
        command: Option<Command>,
        context: Option<&str>,
        phase: Option<&str>,
    ) -> Result<Self, String> {
        if let Some(command) = command {
            return Ok(match command {
                Command::Prolog => Self::Prolog,
                Command::Epilog => Self::Epilog,
                Command::TaskProlog => Self::TaskProlog,
                other => Self::Other(other),
            });
        }
        if context == Some("prolog_task") {
            return Ok(Self::TaskProlog);
        }
        match phase {
            Some("prolog") => return Ok(Self::Prolog),
            Some("epilog") => return Ok(Self::Epilog),
            Some("task-prolog") => return Ok(Self::TaskProlog),
            Some("health") => {
                return Ok(Self::Other(Command::Health {
                    format: qoslane::cli::Format::default(),
                    json: false,
                }));
            }
            Some(other) => {
                return Err(format!(
                    "no subcommand and HOOKRUN_PHASE is `{other}` (hookrun's phases: prolog, epilog, task-prolog, health); see `qoslane --help`"
                ));
            }
            None => {}
        }
        match context {
            Some("prolog_slurmd") => Ok(Self::Prolog),
            Some("epilog_slurmd") => Ok(Self::Epilog),
            other => Err(format!(
                "no subcommand, HOOKRUN_PHASE is unset and SLURM_SCRIPT_CONTEXT is {}; see `qoslane --help`",
                other.map_or("unset".into(), |c| format!("`{c}`"))
            )),
        }
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The name under which this binary is hookrun.
const HOOKRUN: &str = "hookrun";

/// The program: hookrun under its name, qoslane under any other; the
/// process's exit code (`entry.rs` is the process's entry point).
pub(crate) fn entry() -> i32 {
    let mut args = std::env::args_os();
    let name = args.next();
    if name
        .as_deref()
        .and_then(|n| Path::new(n).file_name())
        .is_some_and(|n| n == HOOKRUN)
    {
        let code = hookrun::app::main_with(Some(hook));
        return i32::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    // Every documented code fits in a byte (as `ExitCode::from(ExitClass)`).
    i32::from(u8::try_from(run(args.collect()).code()).unwrap_or(70))
}

/// qoslane as a hook, built into hookrun's runner: called in the fork that
/// runs a hook file that is this binary, with the argv an exec would have
/// given it (the hook's path, then its arguments: none, for a hook).
pub(crate) fn hook(argv: &[OsString]) -> i32 {
    run(argv.iter().skip(1).cloned().collect()).code()
}

/// qoslane, given its arguments (without the program's name).
fn run(args: Vec<OsString>) -> ExitClass {
    let parsed = qoslane::cli::hook_line(args.iter().cloned()).map_or_else(
        || {
            let matches = qoslane::cli::command()
                .try_get_matches_from(std::iter::once(OsString::from("qoslane")).chain(args))?;
            <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        },
        Ok,
    );
    let mut cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitClass::Usage
            } else {
                ExitClass::Ok
            };
        }
    };
    let context = std::env::var("SLURM_SCRIPT_CONTEXT").ok();
    let phase = std::env::var("HOOKRUN_PHASE").ok();
    if let Err(msg) = cli.one_mapping() {
        eprintln!("qoslane: error: {msg}");
        return ExitClass::Usage;
    }
    let mode = match Mode::of(cli.command.take(), context.as_deref(), phase.as_deref()) {
        Ok(m) => m,
        Err(msg) => {
            eprintln!("qoslane: {msg}");
            return ExitClass::Usage;
        }
    };

    // The one trust decision: the TaskProlog runs as the job's user with the
    // user's environment, so there only the command line counts.
    let trust_env = !matches!(mode, Mode::TaskProlog);
    let ctx = match context_of(&cli, trust_env, context) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("qoslane: error: {e}");
            return e.exit_class();
        }
    };

    let result: Result<ExitClass, Error> = match mode {
        Mode::Prolog => Ok(commands::hooks::prolog(&ctx)),
        Mode::Epilog => Ok(commands::hooks::epilog(&ctx)),
        Mode::TaskProlog => Ok(commands::task_prolog::run(&ctx.paths)),
        // `one_mapping` made a FILE the `--config`.
        Mode::Other(Command::Validate { file: _, format }) => {
            commands::validate::run(&ctx.paths.config, format)
        }
        Mode::Other(Command::Explain {
            qos,
            fabric,
            format,
        }) => commands::explain::run(&ctx, &qos, fabric, format),
        Mode::Other(Command::Sync { dry_run }) => Ok(commands::sync::run(&ctx, dry_run)),
        Mode::Other(Command::Health { format, json }) => Ok(commands::health::run(
            &ctx,
            format.or_json(json) == qoslane::cli::Format::Json,
        )),
        Mode::Other(Command::Status { format, json }) => {
            commands::status::run(&ctx, format.or_json(json) == qoslane::cli::Format::Json)
        }
        Mode::Other(Command::Recover) => Ok(commands::recover::run(&ctx)),
        Mode::Other(Command::Log(args)) => commands::log::run(&ctx, &args),
        Mode::Other(Command::Metrics { listen }) => commands::serve::run(&ctx, listen.as_deref()),
        Mode::Other(Command::Fabric {
            what: FabricCommand::Audit(args),
        }) => commands::fabric_audit::run(&ctx, &args),
        Mode::Other(Command::Fabric {
            what: FabricCommand::Watch(args),
        }) => commands::fabric_audit::watch::run(&ctx, &args),
        Mode::Other(Command::Fabric {
            what: FabricCommand::SmConfig(args),
        }) => commands::sm_config::run(&ctx, &args),
        Mode::Other(Command::Cluster(args)) => commands::cluster::run(&ctx, &args),
        Mode::Other(Command::SlurmConfig(args)) => commands::slurm_config::run(&ctx, &args),
        Mode::Other(Command::Generate { what }) => generate(what),
        Mode::Other(Command::Complete { what: _ }) => commands::explain::qos_names(&ctx),
        Mode::Other(Command::Prolog | Command::Epilog | Command::TaskProlog) => {
            // Mode::of turned these into their own modes.
            Err(Error::Internal(
                "hook subcommand reached the dispatch".into(),
            ))
        }
    };
    match result {
        Ok(class) => class,
        // The reader went away (`| head`): nothing to say, to nobody.
        Err(e @ Error::BrokenPipe) => e.exit_class(),
        Err(e) => {
            // The error, then its causes (as cargo-nextest prints them).
            eprintln!("qoslane: error: {e}");
            let mut last = e.to_string();
            for cause in e.chain().skip(1) {
                // An I/O error's message already ends with its source's.
                let text = cause.to_string();
                if !last.ends_with(&text) {
                    eprintln!("  caused by: {text}");
                }
                last = text;
            }
            e.exit_class()
        }
    }
}

/// The run's context: paths, deadline, Slurm context. Outside the
/// TaskProlog (`trust_env`) a value comes from the flag, else the
/// environment, else the site options file,
/// else the default; in the TaskProlog from the flag only.
fn context_of(cli: &Cli, trust_env: bool, context: Option<String>) -> Result<Ctx, Error> {
    let env = |name: &str| if trust_env { env_path(name) } else { None };
    let root = cli.root.clone().or_else(|| env("QOSLANE_ROOT"));
    let site = if trust_env {
        qoslane::site::read(root.as_deref().unwrap_or(Path::new("/")))?
    } else {
        SiteOptions::default()
    };
    let opt = |name: &str| {
        env(name).or_else(|| site.get(name).filter(|v| !v.is_empty()).map(PathBuf::from))
    };
    // A bound that is not a number is said once the log is up.
    let max_age = opt("QOSLANE_FABRIC_VERDICT_MAX_AGE").map_or(Ok(None), |v| {
        v.to_str()
            .and_then(|s| s.parse::<u64>().ok())
            .map(|s| Some(Duration::from_secs(s)))
            .ok_or_else(|| v.display().to_string())
    });
    let paths = Paths::new(Overrides {
        root,
        config: cli.config.clone().or_else(|| opt("QOSLANE_CONFIG")),
        audit_log: opt("QOSLANE_AUDIT_LOG"),
        textfile_dir: opt("QOSLANE_TEXTFILE_DIR"),
        smpquery: opt("QOSLANE_SMPQUERY"),
        ibnetdiscover: opt("QOSLANE_IBNETDISCOVER"),
        ibroute: opt("QOSLANE_IBROUTE"),
        squeue: opt("QOSLANE_SQUEUE"),
        perfquery: opt("QOSLANE_PERFQUERY"),
        scontrol: opt("QOSLANE_SCONTROL"),
        fabric_verdict: opt("QOSLANE_FABRIC_VERDICT"),
        fabric_verdict_max_age: max_age.as_ref().ok().copied().flatten(),
        sacctmgr: opt("QOSLANE_SACCTMGR"),
        counters_off: counters_off(trust_env, &site)?,
    });
    qoslane::log::init(
        &paths,
        std::env::var_os("QOSLANE_NO_JOURNAL").is_some()
            || site.get("QOSLANE_NO_JOURNAL").is_some(),
    );
    if let Err(v) = max_age {
        qoslane::log::warn(&format!(
            "QOSLANE_FABRIC_VERDICT_MAX_AGE={v}: not a number of seconds; the default \
             ({} s) is used",
            qoslane::paths::defaults::FABRIC_VERDICT_MAX_AGE.as_secs()
        ));
    }
    let timeout = cli
        .timeout_ms
        .or_else(|| {
            trust_env
                .then(|| {
                    std::env::var("QOSLANE_TIMEOUT_MS")
                        .ok()
                        .or_else(|| site.get("QOSLANE_TIMEOUT_MS").map(str::to_owned))
                })
                .flatten()
                .and_then(|v| v.parse().ok())
        })
        .map_or(commands::DEFAULT_TIMEOUT, Duration::from_millis);
    Ok(Ctx {
        paths,
        timeout,
        context,
        config_given: cli.config.is_some() || (trust_env && env_path("QOSLANE_CONFIG").is_some()),
    })
}

/// `QOSLANE_COUNTERS` (the environment, else the site options): `off`
/// turns the counters off, `on` or nothing leaves them on; another word is
/// refused. In the TaskProlog nothing is read, so nothing to turn off.
fn counters_off(trust_env: bool, site: &SiteOptions) -> Result<bool, Error> {
    if !trust_env {
        return Ok(false);
    }
    let value = std::env::var("QOSLANE_COUNTERS")
        .ok()
        .or_else(|| site.get("QOSLANE_COUNTERS").map(str::to_owned));
    match value.as_deref().map(str::trim) {
        None | Some("" | "on") => Ok(false),
        Some("off") => Ok(true),
        Some(other) => Err(Error::Usage(format!(
            "QOSLANE_COUNTERS is `{}`: `on` (the default) or `off`",
            other.escape_debug()
        ))),
    }
}

fn generate(what: Generate) -> Result<ExitClass, Error> {
    let cmd = qoslane::cli::command();
    match what {
        Generate::Man { dir } => {
            std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
            let pages =
                qoslane::manual::pages().map_err(Error::io("render man pages for", &dir))?;
            for (name, roff) in pages {
                let file = dir.join(name);
                std::fs::write(&file, roff).map_err(Error::io("write", &file))?;
            }
        }
        Generate::Completions { shell, dir } => {
            std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
            let file = dir.join(clap_complete::Generator::file_name(&shell, "qoslane"));
            let text = qoslane::manual::completions(shell, cmd);
            std::fs::write(&file, text).map_err(Error::io("write", &file))?;
        }
        Generate::Keys { dir } => {
            use qoslane::mapping::keydocs;
            for (path, style) in keydocs::FILES {
                let file = dir.join(path);
                let text = std::fs::read_to_string(&file).map_err(Error::io("read", &file))?;
                let new = keydocs::regenerate(&text, *style)
                    .map_err(|e| Error::Usage(format!("{}: {e}", file.display())))?;
                if new != text {
                    std::fs::write(&file, new).map_err(Error::io("write", &file))?;
                }
            }
        }
    }
    Ok(ExitClass::Ok)
}
