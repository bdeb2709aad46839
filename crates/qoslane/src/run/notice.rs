//! The notice a Prolog leaves its job: one line for the TaskProlog to print
//! (Slurm's `print` protocol line), so the job's user learns why — a level
//! refused under `continue` (the job runs on the baseline), or a QoS that
//! could not be learnt (the job runs at the default level). Best effort:
//! the job runs either way. Made from the run's report alone.

use crate::error::Error;
use crate::mapping::OnFailure;
use crate::paths::Paths;
use crate::report::{Exit, Payload, Report, RunResult};
use crate::state::fsutil;

/// Leaves the notice a Prolog's result calls for, if any: a failure the
/// job runs through (`continue`), or a grant at the default level.
pub fn leave(paths: &Paths, result: &RunResult) {
    match result {
        Err(f) if f.exit == Exit::ByPolicy(OnFailure::Continue) => {
            write(paths, &f.report, Some(&f.error));
        }
        Ok(r) if r.job.qos_fallback.is_some() => write(paths, r, None),
        _ => {}
    }
}

fn write(paths: &Paths, report: &Report, refused: Option<&Error>) {
    let Some(job) = report.job.job_id else {
        return;
    };
    let Some(line) = text(report, refused) else {
        return;
    };
    // Only into a state directory qoslane trusts (never through a symlink).
    if fsutil::ensure_dir(paths, &paths.run_dir).is_ok()
        && fsutil::ensure_dir(paths, &paths.notices_dir()).is_ok()
    {
        let _ = fsutil::atomic_write(
            paths,
            &paths.job_notice(job),
            line.as_bytes(),
            crate::state::PUBLIC,
        );
    }
}

/// The notice's text: what was (not) granted, and why, from the report
/// (the QoS's fallback reason from the Prolog's payload, not its notes).
fn text(report: &Report, refused: Option<&Error>) -> Option<String> {
    let one_line = |s: String| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(200)
            .collect()
    };
    let qos = report
        .job
        .qos
        .as_deref()
        .map_or_else(|| "QoS unknown".to_owned(), |q| format!("QoS {q}"));
    let fallback = match &report.payload {
        Payload::Prolog(p) => p.qos_unknown.clone().map(one_line),
        _ => None,
    };
    Some(match (refused, &report.job.level) {
        (Some(e), Some(level)) => format!(
            "qoslane: {qos}: level {level} was not granted ({}); the job runs without its SL",
            one_line(e.to_string())
        ),
        (Some(e), None) => format!(
            "qoslane: {qos}: no level was granted ({}); the job runs without an SL",
            one_line(e.to_string())
        ),
        (None, Some(level)) => format!(
            "qoslane: QoS unknown ({}): the job runs at the default level {level}",
            fallback?
        ),
        (None, None) => return None,
    })
}
