//! `qoslane fabric sm-config`: the OpenSM QoS options that carry the mapping
//! ([`crate::fabric::judge::sm_config`]). Prints; changes nothing.

use std::io::Write;

use super::Ctx;
use crate::cli::{Format, SmConfigArgs};
use crate::config;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::VlRange;
use crate::fabric::judge::sm_config::{self, Options};

pub fn run(ctx: &Ctx, args: &SmConfigArgs) -> Result<ExitClass> {
    let vl_cap = VlRange::parse(&args.vl_cap).ok_or_else(|| {
        Error::Usage(format!(
            "--vl-cap `{}`: want VL0, VL0-1, VL0-3, VL0-7 or VL0-14",
            args.vl_cap
        ))
    })?;
    // A file named on the command line is generated from, or refused with
    // its problem: never the copy in force instead.
    // (`--mapping`, its older spelling, is folded into `--config` by
    // `Cli::one_mapping`.)
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
    let cfg = sm_config::generate(
        &loaded.mapping,
        Options {
            vl_cap,
            high_tiers: args.high_tiers,
        },
    )
    .map_err(|problems| {
        Error::Fabric(format!(
            "the fabric cannot carry {source} as it stands: {}",
            problems.join("; ")
        ))
    })?;
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    match args.format {
        Format::Human => out
            .write_all(cfg.to_conf(&source, &loaded.sha256).as_bytes())
            .map_err(w)?,
        Format::Json => {
            let v = serde_json::json!({
                "mapping": source,
                "mapping_sha256": loaded.sha256,
                "options": cfg.options_json(),
                "lanes": cfg.lanes,
            });
            writeln!(out, "{v:#}").map_err(w)?;
        }
    }
    Ok(ExitClass::Ok)
}
