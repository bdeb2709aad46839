//! `qoslane explain --qos NAME`: what a job of that QoS would get. A dry run:
//! reads the mapping, touches nothing.

use std::io::Write;

use serde_json::json;

use super::Ctx;
use crate::cli::Format;
use crate::config::{self, Loaded, Source};
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::job::exports;
use crate::mapping::{Level, LevelMatch, Mapping, OnFailure};

/// The live grant of `--fabric`: its word, the refusal, the notes, what it
/// means for the level's jobs.
type FabricNow = (&'static str, Option<String>, Vec<String>, &'static str);

/// What `explain` found, said in either format.
struct Explanation<'a> {
    qos: &'a str,
    loaded: &'a Loaded,
    level: &'a Level,
    how: LevelMatch,
    exports: Vec<(String, String)>,
    policy: OnFailure,
    now: Option<FabricNow>,
    /// The node's recorded grant of the level (by `health`, `sync` or a
    /// Prolog), when it is of this mapping.
    recorded: Option<(crate::grant::Grant, String)>,
    /// Which file answered, as said on the `mapping` line.
    from: String,
    /// The newest Epilog of the level with counter evidence (audit log).
    counters: Option<crate::audit::read::LoggedEntry>,
}

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
    let now = fabric.then(|| fabric_now(ctx, m, &loaded.sha256, level));
    let from = match loaded.source {
        Source::Config => ctx.paths.config.display().to_string(),
        Source::LastKnownGood => format!(
            "{} (the configured file is unusable: {})",
            ctx.paths.last_known_good().display(),
            loaded.problem.as_deref().unwrap_or("?")
        ),
    };
    let recorded = crate::state::grants::load(&ctx.paths)
        .ok()
        .flatten()
        .filter(|r| r.mapping_sha256 == loaded.sha256)
        .and_then(|r| {
            let when = format!("{} {}", r.by, r.time);
            r.grants.get(&level.name).map(|g| (g.clone(), when))
        });
    let path_record = recorded.as_ref().is_some_and(|(g, _)| g.path_record_sl);
    let explanation = Explanation {
        counters: crate::audit::evidence::recent(&ctx.paths, &level.name),
        recorded,
        qos,
        loaded: &loaded,
        level,
        how,
        exports: exports::for_level(
            level,
            &m.exports,
            crate::run::job_grant::port_layers(&ctx.paths, m, None),
            path_record,
        )
        .set,
        policy: m.on_failure_for(level),
        now,
        from,
    };
    // A script can trust the exit: with --fabric, 1 when the level would be
    // refused (or run on the baseline) on this node now.
    let refused_now = explanation
        .now
        .as_ref()
        .is_some_and(|(_, refusal, _, _)| refusal.is_some());
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => render_json(&mut out, &explanation)?,
        Format::Human => render_human(&mut out, ctx, &explanation)?,
    }
    Ok(if refused_now {
        ExitClass::Failed
    } else {
        ExitClass::Ok
    })
}

/// The live grant: what a Prolog would decide on this node now, with a
/// fresh probe and the first hop, the settings as they are and the fabric
/// path as `health` recorded it, decided by
/// [`crate::grant::decide`]; nothing written.
fn fabric_now(ctx: &Ctx, m: &Mapping, sha256: &str, level: &Level) -> FabricNow {
    let d = crate::deadline::Deadline::after(ctx.timeout);
    let mut j = crate::fabric::policy::judge_dry(
        &ctx.paths,
        m,
        &d,
        crate::fabric::policy::Scope::Level(&level.name),
    );
    let mut evidence = j.evidence(&level.name);
    let settings = crate::settings::check_levels(&ctx.paths, m, &d);
    evidence.push(crate::grant::Evidence {
        scope: crate::grant::GrantScope::Settings,
        at_ms: settings.at_ms,
        found: settings
            .levels
            .get(&level.name)
            .cloned()
            .unwrap_or_default(),
    });
    // The fabric path as a Prolog takes it: from the record `health` made.
    let record = crate::state::grants::load(&ctx.paths).ok().flatten();
    evidence.extend(
        crate::grant::Record::recorded(
            record.as_ref(),
            sha256,
            &level.name,
            None,
            crate::time::now_ms(),
            crate::grant::MAX_RECORD_AGE_MS,
        )
        .evidence
        .into_iter()
        .filter(|e| e.scope == crate::grant::GrantScope::FabricPath),
    );
    let g = crate::grant::decide(m.fabric_check, m.on_failure_for(level), &evidence);
    let verdict = match (&j.check, g.decision) {
        (Some(crate::mapping::FabricCheck::Off), _) if g.reasons.is_empty() => "not_checked",
        (_, d) => d.as_str(),
    };
    let refusal = (!g.decision.gets_its_sl()).then(|| g.refusal(j.refusal.take()).to_string());
    let mut notes = g.notes.clone();
    notes.extend(g.warnings.iter().cloned());
    (verdict, refusal, notes, g.decision.meaning())
}

fn write_error(e: std::io::Error) -> Error {
    Error::output(e)
}

fn render_json(out: &mut impl Write, x: &Explanation<'_>) -> Result<()> {
    let (level, m) = (x.level, &x.loaded.mapping);
    let v = json!({
        "qos": x.qos,
        "level": level.name,
        "matched": match x.how { LevelMatch::Listed => "listed", LevelMatch::Default => "default" },
        "service_level": level.service_level.get(),
        "virtual_lane": level.virtual_lane.map(super::super::mapping::types::VirtualLane::get),
        "traffic_class": level.traffic_class.map(super::super::mapping::types::TrafficClass::get),
        "on_failure": x.policy.as_str(),
        "fabric_check": m.fabric_check.as_str(),
        "node_settings": level.node_settings.iter().map(|s| json!({"path": s.path.as_str(), "value": s.value})).collect::<Vec<_>>(),
        "exports": x.exports.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "mapping": x.from,
        "mapping_sha256": x.loaded.sha256,
        "fabric_now": x.now.as_ref().map(|(v, refusal, notes, _)| json!({"verdict": v, "refusal": refusal, "notes": notes})),
        "grant": x.recorded.as_ref().map(|(g, by)| json!({"grant": g, "recorded_by": by})),
        "counters": x.counters.as_ref().map(|e| json!({"job_id": e.job_id, "time": e.time, "evidence": e.evidence})),
    });
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?
    )
    .map_err(write_error)
}

fn render_human(out: &mut impl Write, ctx: &Ctx, x: &Explanation<'_>) -> Result<()> {
    let w = write_error;
    let (qos, level, m, loaded) = (x.qos, x.level, &x.loaded.mapping, x.loaded);
    let why = match x.how {
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
    writeln!(out, "  on failure      {}", x.policy.as_str()).map_err(w)?;
    if level.node_settings.is_empty() {
        writeln!(out, "  node settings   none").map_err(w)?;
    } else {
        writeln!(out, "  node settings").map_err(w)?;
        for s in &level.node_settings {
            writeln!(out, "    {} = {}", s.path, s.value).map_err(w)?;
        }
    }
    writeln!(out, "  TaskProlog exports").map_err(w)?;
    for line in exports::render(&x.exports).lines() {
        writeln!(out, "    {line}").map_err(w)?;
    }
    match &x.recorded {
        Some((g, by)) => {
            writeln!(out, "  grant           {} (recorded by {by})", g.decision.meaning())
                .map_err(w)?;
            for line in g.reason_lines() {
                writeln!(out, "    {line}").map_err(w)?;
            }
        }
        None => writeln!(
            out,
            "  grant           not recorded for this mapping (`qoslane health` or `sync` records it)"
        )
        .map_err(w)?,
    }
    if let Some((verdict, refusal, notes, meaning)) = &x.now {
        let text = match (*verdict, refusal) {
            ("not_checked", _) => "not checked (fabric_check off)".to_owned(),
            (_, Some(r)) => format!("REFUSED on this node now: {r}"),
            _ => "granted on this node now (own ports and first hop)".to_owned(),
        };
        writeln!(out, "  fabric now      {text}").map_err(w)?;
        writeln!(out, "    {meaning}").map_err(w)?;
        for n in notes {
            writeln!(out, "    {n}").map_err(w)?;
        }
    }
    match &x.counters {
        Some(e) => {
            let job = e.job_id.map_or_else(|| "?".to_owned(), |j| j.to_string());
            writeln!(out, "  counters        job {job}, its Epilog at {}", e.time).map_err(w)?;
            for line in crate::audit::evidence::evidence_lines(&e.evidence) {
                writeln!(out, "    {line}").map_err(w)?;
            }
        }
        None => writeln!(
            out,
            "  counters        no job of this level with counter evidence recently \
             (counters: QOSLANE_COUNTERS)"
        )
        .map_err(w)?,
    }
    writeln!(out, "  mapping         {}", x.from).map_err(w)?;
    writeln!(out, "  sha256          {}", loaded.sha256).map_err(w)?;
    Ok(())
}

/// `qoslane complete qos`: every QoS name of the mapping `explain` would
/// read, one per line, sorted — what the shell completions offer for
/// `--qos`. Says nothing on stderr (a completion must not garble the
/// prompt): a mapping that cannot be read offers nothing.
pub fn qos_names(ctx: &Ctx) -> Result<ExitClass> {
    let loaded = if ctx.config_given {
        config::read_for_dry_run(&ctx.paths.config)
    } else {
        config::load(&ctx.paths)
    };
    let Ok(loaded) = loaded else {
        return Ok(ExitClass::NoInput);
    };
    let mut names: Vec<&str> = loaded
        .mapping
        .levels()
        .iter()
        .flat_map(|l| l.qos.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut out = std::io::stdout().lock();
    for n in names {
        writeln!(out, "{n}").map_err(Error::output)?;
    }
    Ok(ExitClass::Ok)
}
