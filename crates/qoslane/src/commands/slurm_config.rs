//! `qoslane slurm-config`: the slurm.conf lines, the placement module and
//! `job_submit.lua` that make Slurm place a `fail_job` level's jobs only
//! where it is carried ([`crate::slurm_config`]). Prints, or writes the files
//! into a directory (a site's own `job_submit.lua` never replaced); with
//! `--check-qos`, compares the mapping's QoS names with Slurm's instead.
//! What Slurm cannot be told is a diagnostic naming the mapping's line.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::Ctx;
use crate::cli::SlurmConfigArgs;
use crate::config::{self, Loaded};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::mapping::places::Places;
use crate::mapping::{Diagnostic, diagnostic::render_all, yaml::Span};
use crate::slurm_config::{
    self, CONF_FILE, Inexpressible, LUA_FILE, MODULE_FILE, Placeholders, SiteScript, Where,
};

/// The least time sacctmgr gets (a busy slurmdbd answers in seconds).
const SACCTMGR_TIME: Duration = Duration::from_secs(10);

pub fn run(ctx: &Ctx, args: &SlurmConfigArgs) -> Result<ExitClass> {
    // A file named on the command line is generated from, or refused with
    // its problem: never the copy in force instead.
    let source = ctx.paths.config.display().to_string();
    let loaded = if ctx.config_given {
        config::read_for_dry_run(&ctx.paths.config)?
    } else {
        config::load(&ctx.paths)?
    };
    if let Some(p) = &loaded.problem {
        return Err(Error::Usage(format!(
            "{source} is unusable ({p}); fix it, or name a file with --config"
        )));
    }
    if args.check_qos {
        return check_qos(ctx, args, &loaded, &source);
    }
    // clap requires them without --check-qos
    let (Some(placeholders), Some(cpus), Some(memory_mb)) =
        (args.placeholders, args.cpus, args.memory)
    else {
        return Err(Error::Usage(
            "--placeholders, --cpus and --memory are required without --check-qos".into(),
        ));
    };
    let opts = Placeholders {
        placeholders,
        cpus,
        memory_mb,
        gres: args.gres.clone(),
        features: args.features.clone(),
    };
    let cfg = slurm_config::generate(&loaded.mapping, &opts, &source, &loaded.sha256).map_err(
        |problems| {
            let why = format!("Slurm cannot be told to place {source}");
            refuse(ctx, &loaded, &source, &problems, &why)
        },
    )?;
    match &args.output {
        None => {
            let mut out = std::io::stdout().lock();
            let w = Error::output;
            write!(
                out,
                "# ==== {CONF_FILE}: include it in slurm.conf ====\n{}\n-- ==== {LUA_FILE}: \
                 beside slurm.conf ====\n{}",
                cfg.conf, cfg.lua
            )
            .map_err(w)?;
        }
        Some(dir) => write_into(ctx, dir, &cfg)?,
    }
    Ok(ExitClass::Ok)
}

/// The files into `dir`: the module first (a site's script may load it),
/// then `job_submit.lua` unless it is the site's, then the slurm.conf lines
/// (slurmctld does not start with JobSubmitPlugins=lua and no script).
fn write_into(ctx: &Ctx, dir: &Path, cfg: &slurm_config::SlurmConfig) -> Result<()> {
    let dir = std::path::absolute(dir).map_err(Error::io("resolve", dir))?;
    let publish = |name: &str, text: &str| {
        crate::state::fsutil::publish(&ctx.paths, &dir.join(name), text, crate::state::PUBLIC)
    };
    let lua = dir.join(LUA_FILE);
    let module = dir.join(MODULE_FILE);
    let found = match std::fs::read(&lua) {
        Ok(text) => Some(slurm_config::site_script(&String::from_utf8_lossy(&text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read", &lua)(e)),
    };
    publish(MODULE_FILE, &cfg.module)?;
    let script = match found {
        None | Some(SiteScript::Ours) => {
            publish(LUA_FILE, &cfg.lua)?;
            format!("{}", lua.display())
        }
        Some(SiteScript::CallsTheModule) => format!(
            "{} left as it is (the site's own, calling the module)",
            lua.display()
        ),
        Some(SiteScript::Lacks(what)) => {
            let [load, submit, modify] = slurm_config::site_lines(&module.display().to_string());
            return Err(Error::Usage(format!(
                "{} is the site's own job_submit.lua (not qoslane's) and lacks {}: it is not \
                 replaced. Add to it, at the top: `{load}`; in slurm_job_submit, before it \
                 returns: `{submit}`; in slurm_job_modify, before it returns: `{modify}` (with \
                 your functions' own argument names), then run this again. {} is written; {} \
                 is not, until then",
                lua.display(),
                what.join(", "),
                module.display(),
                dir.join(CONF_FILE).display()
            )));
        }
    };
    publish(CONF_FILE, &cfg.conf)?;
    crate::log::info(&format!(
        "wrote {}, {script} and {} for {} level(s): {}",
        module.display(),
        dir.join(CONF_FILE).display(),
        cfg.levels.len(),
        cfg.levels
            .iter()
            .map(|l| l.level.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

/// Every problem rendered to stderr, each at its line of the mapping (an
/// option's on a line of its own); the error carries the first.
fn refuse(
    ctx: &Ctx,
    loaded: &Loaded,
    source: &str,
    problems: &[Inexpressible],
    why: &str,
) -> Error {
    let places = Places::of(loaded.text());
    let mut located = Vec::new();
    let mut plain = Vec::new();
    for p in problems {
        match span_of(&places, &p.place) {
            Some(span) => located.push(Diagnostic::error(span, p.message.clone())),
            None => plain.push(format!("error: {}", p.message)),
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "{}{}",
        render_all(&located, source, loaded.text()),
        plain.iter().map(|l| format!("{l}\n")).collect::<String>()
    );
    let first = located.first().map_or_else(
        || plain.first().cloned().unwrap_or_default(),
        |d| d.located(source),
    );
    Error::MappingInvalid {
        path: ctx.paths.config.clone(),
        count: problems.len(),
        first: format!("{why}: {first}"),
    }
}

fn span_of(places: &Places, place: &Where) -> Option<Span> {
    match place {
        Where::Levels => places.levels_key,
        Where::DefaultLevel => places.default_level,
        Where::Level(name) => places.level(name).map(|l| l.name_span),
        Where::Qos(q) => places.qos(q).map(|(_, s)| s),
        Where::Option => None,
    }
}

/// `--check-qos`: Slurm's QoS names from sacctmgr, compared.
fn check_qos(
    ctx: &Ctx,
    args: &SlurmConfigArgs,
    loaded: &Loaded,
    source: &str,
) -> Result<ExitClass> {
    let listed = match &args.qos_from {
        Some(file) => std::fs::read(file).map_err(Error::io("read", file))?,
        None => sacctmgr_qos(ctx, args)?,
    };
    let names = slurm_config::slurm_qos_names(&String::from_utf8_lossy(&listed));
    let c = slurm_config::compare_qos(&loaded.mapping, &names);
    let mut text = String::new();
    for q in &c.unlisted {
        text.push_str(&format!(
            "note: Slurm's QoS `{q}` is in no level of {source}: its jobs get the default level \
             `{}`\n",
            c.default_level
        ));
    }
    if c.missing.is_empty() {
        text.push_str(&format!(
            "every QoS of {source} is known to Slurm ({} QoS in Slurm)\n",
            names.len()
        ));
    }
    write!(std::io::stdout().lock(), "{text}").map_err(Error::output)?;
    if c.missing.is_empty() {
        return Ok(ExitClass::Ok);
    }
    let problems: Vec<Inexpressible> = c
        .missing
        .iter()
        .map(|(level, q)| Inexpressible {
            place: Where::Qos(q.clone()),
            message: format!(
                "level `{level}` lists QoS `{q}`, which Slurm does not know (`sacctmgr show \
                 qos`): no job can have it; create it (sacctmgr add qos {}) or correct the name",
                q.to_ascii_lowercase()
            ),
        })
        .collect();
    let why = format!("{source} names QoS Slurm does not know");
    Err(refuse(ctx, loaded, source, &problems, &why))
}

/// `sacctmgr -n -P show qos format=name`'s output, or why it could not be had.
fn sacctmgr_qos(ctx: &Ctx, args: &SlurmConfigArgs) -> Result<Vec<u8>> {
    let sacctmgr = args.sacctmgr.as_ref().unwrap_or(&ctx.paths.sacctmgr);
    let argv = ["-n", "-P", "show", "qos", "format=name"];
    let deadline = Deadline::after(ctx.timeout.max(SACCTMGR_TIME));
    crate::exec::run(sacctmgr, &argv, &deadline)
        .map(|o| o.stdout)
        .map_err(|e| {
            // the program's own error names it already: its detail only
            let why = match &e {
                Error::Program { detail, .. } => detail.clone(),
                other => Error::with_causes(other),
            };
            Error::Program {
                program: sacctmgr.clone(),
                detail: format!(
                    "`{} {}` failed, so the mapping's QoS names cannot be checked against \
                     Slurm's (is slurmdbd reachable from here?): {why}",
                    sacctmgr.display(),
                    argv.join(" "),
                ),
            }
        })
}
