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
//! on an SL other than its level's, counted by its Epilog): appended to
//! the job's `AdminComment` ([`tell_job`]: `scontrol update JobId=N
//! AdminComment=…`), which the job's user reads in `scontrol show job` and,
//! with accounting, `sacct -o AdminComment` — not the root-only audit log.
//! What is there already (hookrun's refusal reason of an earlier run) is
//! kept; the whole stays within [`MAX_ADMIN_COMMENT`]. Two RPCs, only when
//! there is something to tell, never under the node lock; nothing without
//! `QOSLANE_SCONTROL`.

use std::io::Write;

use crate::deadline::Deadline;
use crate::error::Error;
use crate::exec;
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

/// The longest `AdminComment` qoslane leaves a job (bytes): what was there
/// and what it appends. Slurm keeps more; a reader's terminal line and
/// `sacct`'s column do not.
pub const MAX_ADMIN_COMMENT: usize = 1024;

/// Between what a job's `AdminComment` held and what is appended.
const SEPARATOR: &str = " | ";

/// Appends `words` (one line) to the job's `AdminComment`, for its user:
/// reads the comment (`scontrol show job N`), leaves it as it is when it
/// already says so (an Epilog run twice), else writes it back with `words`
/// after it, cut to fit [`MAX_ADMIN_COMMENT`]. Must be called without the
/// node lock (two RPCs to slurmctld). `None` without `QOSLANE_SCONTROL`;
/// else what happened, as a note for the run's report.
pub fn tell_job(paths: &Paths, deadline: &Deadline, job: JobId, words: &str) -> Option<String> {
    let scontrol = paths.scontrol.as_ref()?;
    let id = job.to_string();
    let shown = match exec::run(scontrol, &["show", "job", &id], deadline) {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => return Some(format!("the job's user was not told (AdminComment): {e}")),
    };
    let old = admin_comment(&shown).unwrap_or_default();
    let Some(new) = appended(&old, words) else {
        return Some("the job's AdminComment already tells its user".to_owned());
    };
    let arg_job = format!("JobId={id}");
    let arg_comment = format!("AdminComment={new}");
    Some(
        match exec::run(scontrol, &["update", &arg_job, &arg_comment], deadline) {
            Ok(_) => "the job's user is told in its AdminComment".to_owned(),
            Err(e) => format!("the job's user was not told (AdminComment): {e}"),
        },
    )
}

/// The `AdminComment` of `scontrol show job`'s output (its own line,
/// `   AdminComment=TEXT `), if it has one.
pub fn admin_comment(shown: &str) -> Option<String> {
    shown.lines().find_map(|l| {
        l.trim_start()
            .strip_prefix("AdminComment=")
            .map(|v| v.trim_end().to_owned())
            .filter(|v| !v.is_empty() && v != "(null)")
    })
}

/// `old` with `words` after it, on one line, at most [`MAX_ADMIN_COMMENT`]
/// bytes (`words` cut at a character's end; `old` kept whole when it fits
/// with something of `words`); `None` when `old` already holds `words` or
/// leaves no room.
pub fn appended(old: &str, words: &str) -> Option<String> {
    let words: String = words
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if words.is_empty() || old.contains(&words) {
        return None;
    }
    let head = if old.is_empty() {
        String::new()
    } else {
        format!("{old}{SEPARATOR}")
    };
    let room = MAX_ADMIN_COMMENT.checked_sub(head.len())?;
    let mut cut = words.len().min(room);
    while !words.is_char_boundary(cut) {
        cut -= 1;
    }
    (cut > 0).then(|| format!("{head}{}", &words[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_comment_is_read_from_its_own_line() {
        let shown = "JobId=7 JobName=x\n   UserId=alice(1000) GroupId=alice(1000)\n   \
                     AdminComment=qoslane: level high refused on n1: why \n   Comment=mine \n";
        assert_eq!(
            admin_comment(shown).as_deref(),
            Some("qoslane: level high refused on n1: why")
        );
        assert_eq!(admin_comment("JobId=7\n   Comment=x\n"), None);
        assert_eq!(admin_comment("   AdminComment=(null)\n"), None);
    }

    #[test]
    fn appending_keeps_what_was_there_once_and_within_the_bound() {
        assert_eq!(appended("", "told").as_deref(), Some("told"));
        assert_eq!(
            appended("refused", "told").as_deref(),
            Some("refused | told")
        );
        assert_eq!(
            appended("refused | told", "told"),
            None,
            "an Epilog run twice"
        );
        assert_eq!(appended("a", "x\ny").as_deref(), Some("a | x y"));
        let long = "é".repeat(2000);
        let got = appended("old", &long).expect("room");
        assert!(
            got.len() <= MAX_ADMIN_COMMENT && got.starts_with("old | é"),
            "{}",
            got.len()
        );
        assert_eq!(appended(&"o".repeat(MAX_ADMIN_COMMENT), "told"), None);
        assert_eq!(appended("", ""), None);
    }
}
