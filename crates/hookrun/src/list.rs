//! `hookrun list`: what each phase would run, in order, and what it ignores.

use std::io::{self, Write};

use crate::config::Config;
use crate::discover;
use crate::exit;
use crate::metrics::{self, State};
use crate::phase::Phase;

/// Prints the listing to stdout; returns the exit code.
pub fn print(config: &Config, only: Option<Phase>) -> i32 {
    let mut out = io::stdout().lock();
    let mut code = exit::OK;
    let written = write_listing(&mut out, config, only, &mut code);
    match written {
        Ok(()) => code,
        // `hookrun list | head`: the reader went away; nothing to say, the
        // status a shell reports for a program SIGPIPE ended (as qoslane's).
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => exit::BROKEN_PIPE,
        Err(_) => exit::SETUP_FAILED,
    }
}

fn write_listing(
    out: &mut dyn Write,
    config: &Config,
    only: Option<Phase>,
    code: &mut i32,
) -> io::Result<()> {
    let file = if config.config_found {
        config.config_path.display().to_string()
    } else {
        format!("{} (not found: defaults)", config.config_path.display())
    };
    writeln!(out, "# configuration: {file}")?;
    // How each hook went last (the metric state; none yet: nothing said).
    let counted = metrics::load(&config.state_dir).unwrap_or_default();
    if let Some(problem) = config.task_prolog_problem() {
        writeln!(out, "# configuration error: {problem}")?;
        *code = exit::SETUP_FAILED;
    }
    writeln!(
        out,
        "# on_failure={} budget={} hook_timeout={} kill_grace={} scontrol={} scontrol_timeout={}",
        config.on_failure.name(),
        humantime::format_duration(config.budget),
        humantime::format_duration(config.hook_timeout),
        humantime::format_duration(config.kill_grace),
        config.scontrol.display(),
        humantime::format_duration(config.scontrol_timeout),
    )?;
    for phase in Phase::ALL
        .into_iter()
        .filter(|p| only.is_none_or(|o| o == *p))
    {
        let dir = config.phase_dir(phase);
        let listing = match discover::scan(&config.root, &dir) {
            Ok(listing) => listing,
            Err(error) => {
                writeln!(out, "{phase}  {}  (error: {})", dir.display(), error.error)?;
                *code = exit::SETUP_FAILED;
                continue;
            }
        };
        if !listing.exists {
            writeln!(out, "{phase}  {}  (missing: nothing runs)", dir.display())?;
            continue;
        }
        if listing.hooks.is_empty() {
            writeln!(out, "{phase}  {}  (no hooks: nothing runs)", dir.display())?;
        } else {
            writeln!(out, "{phase}  {}", dir.display())?;
        }
        let width = listing
            .hooks
            .iter()
            .map(|h| h.name.len())
            .chain(listing.ignored.iter().map(|(name, _)| name.len()))
            .max()
            .unwrap_or(0);
        for (index, hook) in listing.hooks.iter().enumerate() {
            let kind = if hook.required {
                "required"
            } else {
                "optional"
            };
            let last = last_run(&counted, phase, &hook.name);
            match &hook.refused {
                None => writeln!(
                    out,
                    "  {:>2}  {:<width$}  {kind}{last}",
                    index + 1,
                    hook.name
                )?,
                Some(why) => writeln!(
                    out,
                    "  {:>2}  {:<width$}  {kind}, refused (fails): {why}{last}",
                    index + 1,
                    hook.name
                )?,
            }
        }
        for (name, why) in &listing.ignored {
            writeln!(out, "   -  {name:<width$}  ignored: {why}")?;
        }
    }
    Ok(())
}

/// `  last: ok at 2026-12-03T12:00:00Z, 12 runs`, or nothing for a hook never
/// counted.
fn last_run(counted: &State, phase: Phase, hook: &str) -> String {
    let Some(stats) = counted.hooks.get(phase.name()).and_then(|h| h.get(hook)) else {
        return String::new();
    };
    let runs: u64 = stats.runs.values().sum();
    match &stats.last {
        Some((outcome, at)) => format!(
            "  last: {outcome} at {}, {runs} runs",
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(*at)
            )
        ),
        None => format!("  {runs} runs"),
    }
}
