//! `qoslane slurm-config`: the slurm.conf lines and `job_submit.lua` that
//! make Slurm place a `fail_job` level's jobs only where it is carried
//! ([`crate::slurm_config`]). Prints, or writes both files into a directory;
//! changes nothing else.

use std::io::Write;
use std::path::Path;

use super::Ctx;
use crate::cli::SlurmConfigArgs;
use crate::config;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::slurm_config::{self, CONF_FILE, LUA_FILE, LUA_FIRST_LINE, Placeholders};

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
    let opts = Placeholders {
        placeholders: args.placeholders,
        cpus: args.cpus,
        memory_mb: args.memory,
        gres: args.gres.clone(),
        features: args.features.clone(),
    };
    let cfg = slurm_config::generate(&loaded.mapping, &opts, &source, &loaded.sha256).map_err(
        |problems| Error::MappingInvalid {
            path: ctx.paths.config.clone(),
            count: problems.len(),
            first: format!(
                "Slurm cannot be told to place {source}: {}",
                problems.join("; ")
            ),
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
        Some(dir) => {
            let dir = std::path::absolute(dir).map_err(Error::io("resolve", dir))?;
            let lua = dir.join(LUA_FILE);
            refuse_a_site_script(&lua)?;
            // The script first: slurmctld does not start with
            // JobSubmitPlugins=lua and no script.
            crate::state::fsutil::publish(&ctx.paths, &lua, &cfg.lua, crate::state::PUBLIC)?;
            crate::state::fsutil::publish(
                &ctx.paths,
                &dir.join(CONF_FILE),
                &cfg.conf,
                crate::state::PUBLIC,
            )?;
            crate::log::info(&format!(
                "wrote {} and {} for {} level(s): {}",
                lua.display(),
                dir.join(CONF_FILE).display(),
                cfg.levels.len(),
                cfg.levels
                    .iter()
                    .map(|l| l.level.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(ExitClass::Ok)
}

/// A `job_submit.lua` already there that qoslane did not write is the
/// site's own: replacing it would drop whatever it does.
fn refuse_a_site_script(lua: &Path) -> Result<()> {
    match std::fs::read(lua) {
        Ok(text) if text.starts_with(LUA_FIRST_LINE.as_bytes()) => Ok(()),
        Ok(_) => Err(Error::Usage(format!(
            "{} is the site's own job_submit.lua (not qoslane's): merge the two by hand \
             (qoslane's is printed by `qoslane slurm-config` without --output), or write \
             elsewhere",
            lua.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("read", lua)(e)),
    }
}
