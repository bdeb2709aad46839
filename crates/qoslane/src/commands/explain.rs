//! `qoslane explain --qos NAME`: what a job of that QoS would get. A dry run:
//! reads the mapping, touches nothing.

use std::io::Write;

use serde_json::json;

use super::Ctx;
use crate::cli::Format;
use crate::config::{self, Source};
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::job::exports;
use crate::mapping::LevelMatch;

pub fn run(ctx: &Ctx, qos: &str, fabric: bool, format: Format) -> Result<ExitClass> {
    // A file named on the command line is explained, or refused with its
    // problem; the installed one may be served by the copy in force, which
    // is then said first.
    let loaded = if ctx.config_given {
        config::read_for_dry_run(&ctx.paths.config)?
    } else {
        config::load(&ctx.paths)?
    };
    let m = &loaded.mapping;
    let (level, how) = m.level_for_qos(Some(qos));
    let ex = exports::for_level(level);
    let policy = m.on_failure_for(level);
    // The live verdict: what a Prolog would decide on this node now, with a
    // fresh probe (and the first hop), by the same policy; nothing written.
    let now = fabric.then(|| {
        let d = crate::deadline::Deadline::after(ctx.timeout);
        let j = crate::fabric::policy::judge_dry(
            &ctx.paths,
            m,
            &d,
            crate::fabric::policy::Scope::Level(&level.name),
        );
        let verdict = match (&j.check, &j.refusal) {
            (Some(crate::mapping::FabricCheck::Off), _) => "not_checked",
            (_, Some(_)) => "refused",
            (_, None) if j.notes.is_empty() => "granted",
            (_, None) => "granted_with_warnings",
        };
        (verdict, j.refusal.map(|e| e.to_string()), j.notes)
    });
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::io("write output", "<stdout>")(e);
    let from = match loaded.source {
        Source::Config => ctx.paths.config.display().to_string(),
        Source::LastKnownGood => format!(
            "{} (the configured file is unusable: {})",
            ctx.paths.last_known_good().display(),
            loaded.problem.as_deref().unwrap_or("?")
        ),
    };
    match format {
        Format::Json => {
            let v = json!({
                "qos": qos,
                "level": level.name,
                "matched": match how { LevelMatch::Listed => "listed", LevelMatch::Default => "default" },
                "service_level": level.service_level.get(),
                "virtual_lane": level.virtual_lane.map(super::super::mapping::types::VirtualLane::get),
                "traffic_class": level.traffic_class.map(super::super::mapping::types::TrafficClass::get),
                "on_failure": policy.as_str(),
                "fabric_check": m.fabric_check.as_str(),
                "node_settings": level.node_settings.iter().map(|s| json!({"path": s.path.as_str(), "value": s.value})).collect::<Vec<_>>(),
                "exports": ex.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "mapping": from,
                "mapping_sha256": loaded.sha256,
                "fabric_now": now.as_ref().map(|(v, refusal, notes)| json!({"verdict": v, "refusal": refusal, "notes": notes})),
            });
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?
            )
            .map_err(w)?;
        }
        Format::Human => {
            let why = match how {
                LevelMatch::Listed => "listed".to_owned(),
                LevelMatch::Default => format!("no level lists `{qos}`: default_level"),
            };
            if loaded.source == Source::LastKnownGood {
                // Said first: this is not the installed file's answer.
                writeln!(
                    out,
                    "note: {} is unusable ({}); this is the last-known-good copy's answer",
                    ctx.paths.config.display(),
                    loaded.problem.as_deref().unwrap_or("?")
                )
                .map_err(w)?;
            }
            writeln!(out, "QoS `{qos}` -> level `{}` ({why})", level.name).map_err(w)?;
            writeln!(out, "  service level   {}", level.service_level).map_err(w)?;
            match level.virtual_lane {
                Some(v) => writeln!(
                    out,
                    "  virtual lane    {v} (checked against each port's SL2VL: fabric_check {})",
                    m.fabric_check.as_str()
                ),
                None => writeln!(
                    out,
                    "  virtual lane    any data VL (fabric_check {})",
                    m.fabric_check.as_str()
                ),
            }
            .map_err(w)?;
            if let Some(tc) = level.traffic_class {
                writeln!(out, "  traffic class   {tc}").map_err(w)?;
            }
            writeln!(out, "  on failure      {}", policy.as_str()).map_err(w)?;
            if level.node_settings.is_empty() {
                writeln!(out, "  node settings   none").map_err(w)?;
            } else {
                writeln!(out, "  node settings").map_err(w)?;
                for s in &level.node_settings {
                    writeln!(out, "    {} = {}", s.path, s.value).map_err(w)?;
                }
            }
            writeln!(out, "  TaskProlog exports").map_err(w)?;
            for line in exports::render(&ex).lines() {
                writeln!(out, "    {line}").map_err(w)?;
            }
            if let Some((verdict, refusal, notes)) = &now {
                let text = match (*verdict, refusal) {
                    ("not_checked", _) => "not checked (fabric_check off)".to_owned(),
                    (_, Some(r)) => format!("REFUSED on this node now: {r}"),
                    _ => "granted on this node now (own ports and first hop)".to_owned(),
                };
                writeln!(out, "  fabric now      {text}").map_err(w)?;
                for n in notes {
                    writeln!(out, "    {n}").map_err(w)?;
                }
            }
            writeln!(out, "  mapping         {from}").map_err(w)?;
            writeln!(out, "  sha256          {}", loaded.sha256).map_err(w)?;
        }
    }
    Ok(ExitClass::Ok)
}
