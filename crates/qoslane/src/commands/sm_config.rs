//! `qoslane fabric sm-config`: the OpenSM QoS options that carry the mapping
//! ([`crate::fabric::judge::sm_config`]), and with `--qos-policy` the QoS
//! policy file for the levels' `sm_traffic`
//! ([`crate::fabric::judge::sm_policy`]); the JSON has both. Prints;
//! changes nothing.

use std::io::Write;

use super::Ctx;
use crate::cli::{Format, SmConfigArgs};
use crate::config;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::VlRange;
use crate::fabric::judge::sm_config::{self, Options};
use crate::fabric::judge::sm_policy;

pub fn run(ctx: &Ctx, args: &SmConfigArgs) -> Result<ExitClass> {
    let vl_cap = VlRange::parse(&args.vl_cap).ok_or_else(|| {
        Error::Usage(format!(
            "--vl-cap `{}`: want VL0, VL0-1, VL0-3, VL0-7 or VL0-14",
            args.vl_cap
        ))
    })?;
    let policy_file = &args.qos_policy_file;
    if !policy_file.starts_with('/') || policy_file.contains(char::is_whitespace) {
        return Err(Error::Usage(format!(
            "--qos-policy-file `{}`: want an absolute path without blanks (an opensm.conf value)",
            policy_file.escape_debug()
        )));
    }
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
        &Options {
            vl_cap,
            high_tiers: args.high_tiers,
            policy_file: policy_file.clone(),
        },
    )
    .map_err(|problems| {
        Error::Fabric(format!(
            "the fabric cannot carry {source} as it stands: {}",
            problems.join("; ")
        ))
    })?;
    let policy = sm_policy::wanted(&loaded.mapping)
        .then(|| sm_policy::qos_policy(&loaded.mapping, &source, &loaded.sha256));
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    if args.qos_policy {
        let Some(policy) = policy else {
            return Err(Error::Usage(format!(
                "{source} declares no sm_traffic: there is no QoS policy to write (the SM's \
                 default answers every path record)"
            )));
        };
        return match args.format {
            Format::Human => out.write_all(policy.as_bytes()).map_err(w),
            Format::Json => writeln!(
                out,
                "{:#}",
                serde_json::json!({
                    "mapping": source,
                    "mapping_sha256": loaded.sha256,
                    "qos_policy_file": policy_file,
                    "qos_policy": policy,
                    "classes": sm_policy::classes(&loaded.mapping),
                })
            )
            .map_err(w),
        }
        .map(|()| ExitClass::Ok);
    }
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
                "qos_policy_file": policy.is_some().then_some(policy_file),
                "qos_policy": policy,
            });
            writeln!(out, "{v:#}").map_err(w)?;
        }
    }
    Ok(ExitClass::Ok)
}
