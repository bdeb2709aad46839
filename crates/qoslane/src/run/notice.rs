//! The notice a Prolog leaves its job: one line for the TaskProlog to print
//! (Slurm's `print` protocol line), so the job's user learns why — a level
//! refused under `continue` (the job runs on the baseline), or a QoS that
//! could not be learnt (the job runs at the default level). Best effort:
//! the job runs either way. Made from the run's report alone.
//!
//! And the refusal a Prolog leaves its job when it refused it (a `fail_job`
//! level not granted, the node left as it was: exit 100): one line,
//! `qoslane: level L (QoS Q) refused on NODE: why`, printed first on
//! stdout — hookrun puts a refusing hook's first line in the job's
//! `AdminComment` and requeues it — and left in the job's refusal marker
//! for the TaskProlog: a job hookrun cannot requeue (srun, salloc) starts
//! its tasks here, and each fails with the line, so the node is never
//! drained for a refusal. The Epilog removes it; a Prolog that does not
//! refuse removes a stale one (a requeued job back on this node).
//!
//! And what a job did that its user should know once it ended (bytes sent
//! on an SL other than its level's, counted by its Epilog): a file the
//! user owns and alone reads ([`tell_user`]: `/run/qoslane/told/JOBID`,
//! mode 0400, in a directory of root's), not the root-only audit log. Not
//! the job's `AdminComment`: slurmctld refuses to update a job whose
//! Epilog runs ("Job has already finished", seen on Slurm 22.05, 24.11 and 26.05
//! by tests/e2e/notice.sh). Every file has an owner: each write removes the
//! notices older than [`TOLD_MAX_AGE`], and a reboot empties `/run`.
//!
//! Not during the job either: a running job's `AdminComment` could be
//! appended to (two RPCs to slurmctld per node per health run that finds a
//! lone job sending off its level), but what a health run counts during the
//! job is the metric and its alert, for the admin; the user's account of
//! the job is this file, once it ended.

use std::io::Write;

use crate::error::Error;
use crate::exit_code::ExitClass;
use crate::job::JobId;
use crate::mapping::OnFailure;
use crate::paths::Paths;
use crate::report::{Exit, Payload, Report, RunResult};
use crate::state::fsutil;

/// Leaves the notice a Prolog's result calls for, if any: a failure the
/// job runs through (`continue`), or a grant at the default level.
pub fn leave(paths: &Paths, result: &RunResult) {
    let report = match result {
        Ok(r) => r,
        Err(f) => &f.report,
    };
    match result {
        Err(f) if f.exit_class() == ExitClass::Refused => {
            refuse(paths, &f.report, &f.error);
            return;
        }
        _ => {
            if let Some(job) = report.job.job_id {
                let _ = fsutil::remove(paths, &paths.job_refusal(job));
            }
        }
    }
    match result {
        Err(f) if f.exit == Exit::ByPolicy(OnFailure::Continue) => {
            write(paths, &f.report, Some(&f.error));
        }
        Ok(r) if r.job.qos_fallback.is_some() => write(paths, r, None),
        _ => {}
    }
}

/// A refused job: its line on stdout (hookrun's reason for it) and in its
/// refusal marker (the TaskProlog's).
fn refuse(paths: &Paths, report: &Report, error: &Error) {
    let node = std::env::var("SLURMD_NODENAME").ok();
    let line = refusal_text(report, node.as_deref(), error);
    // stdout's reader gone: hookrun's log has the error line anyway.
    let _ = writeln!(std::io::stdout().lock(), "{line}");
    let Some(job) = report.job.job_id else {
        return;
    };
    if fsutil::ensure_dir(paths, &paths.run_dir).is_ok()
        && fsutil::ensure_dir(paths, &paths.notices_dir()).is_ok()
    {
        let _ = fsutil::atomic_write(
            paths,
            &paths.job_refusal(job),
            line.as_bytes(),
            crate::state::PUBLIC,
        );
    }
}

/// `qoslane: level L (QoS Q) refused on NODE: why` — what the refused job's
/// user reads (its `AdminComment`, or srun's output through the
/// TaskProlog); one line.
pub fn refusal_text(report: &Report, node: Option<&str>, error: &Error) -> String {
    let why: String = error
        .to_string()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    let qos = report.job.qos.as_deref().unwrap_or("unknown");
    let what = match &report.job.level {
        Some(level) => format!("level {level} (QoS {qos})"),
        None => format!("the job (QoS {qos})"),
    };
    let on = node.map_or_else(String::new, |n| format!(" on {n}"));
    format!("qoslane: {what} refused{on}: {why}")
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

/// How long a job's notice file stays (a week: its user has read it, or
/// asked support, by then).
pub const TOLD_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Leaves `words` (one line) for the job's user, in a file of theirs
/// ([`Paths::job_told`], mode 0400) — the user from the Epilog's
/// environment (`SLURM_JOB_UID`, `SLURM_JOB_GID`) — and removes the
/// notices past [`TOLD_MAX_AGE`]. What happened, as a note for the run's
/// report.
pub fn tell_user(paths: &Paths, job: JobId, words: &str) -> String {
    let id = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    let (Some(uid), Some(gid)) = (id("SLURM_JOB_UID"), id("SLURM_JOB_GID")) else {
        return "the job's user was not told: no SLURM_JOB_UID/SLURM_JOB_GID".to_owned();
    };
    let line: String = words
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(1000)
        .collect();
    let path = paths.job_told(job);
    let written = fsutil::ensure_dir(paths, &paths.run_dir)
        .and_then(|()| fsutil::ensure_dir(paths, &paths.told_dir()))
        .and_then(|()| {
            fsutil::write_for_user(
                paths,
                &path,
                format!("{line}\n").as_bytes(),
                0o400,
                (uid, gid),
            )
        });
    let mut note = match written {
        Ok(()) => format!("the job's user is told in {}", paths.display(&path)),
        Err(e) => format!("the job's user was not told: {e}"),
    };
    let swept = sweep_told(paths, std::time::SystemTime::now());
    if !swept.is_empty() {
        note.push_str(&format!("; old notices removed: {}", swept.join(", ")));
    }
    note
}

/// Removes the notices written before `now` − [`TOLD_MAX_AGE`] (by their
/// modification time); the jobs whose notice went.
pub fn sweep_told(paths: &Paths, now: std::time::SystemTime) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(paths.told_dir()) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > TOLD_MAX_AGE);
        if old && fsutil::remove(paths, &paths.told_dir().join(&name)).is_ok() {
            gone.push(name);
        }
    }
    gone.sort();
    gone
}
