//! What `qoslane status` takes from the end of the audit log, judged: the
//! last health check (its checks read typed) and whether it failed, the
//! newest problems, lines that are not audit entries, each level's newest
//! counter evidence, and the held jobs whose Epilog failed.

use crate::audit::logged::Logged;
use crate::audit::read::{Found, Line, LoggedEntry, Note};
use crate::report::health::HealthCheck;
use crate::report::{Event, Outcome};

use super::model::{Health, LevelCounters, Problem};

/// Problems shown.
const PROBLEMS: usize = 5;

/// Whether an audit line's outcome is a problem: one the run's own
/// vocabulary does not count as a success (`failed`, `rolled_back`: `qoslane
/// log --outcome failed --outcome rolled_back` lists them all). A word this
/// binary does not know (a newer writer's) is not judged here.
fn is_problem(outcome: &Logged<Outcome>) -> bool {
    outcome.known().is_some_and(|o| !o.is_success())
}

/// From the end of the audit log (oldest first): the last health check (a
/// failed one needs attention) and the newest problems.
pub fn judge_audit(
    entries: &[Line],
    attention: &mut Vec<String>,
) -> (Option<Health>, Vec<Problem>) {
    let newest_first = || entries.iter().rev().map(|l| &l.entry);
    let health = newest_first()
        .find(|e| e.event == Event::Health)
        .map(|e| Health {
            time: e.time.clone(),
            outcome: e.outcome.to_string(),
            error: e.error.clone(),
            warnings: e
                .notes
                .iter()
                .filter_map(Note::check)
                .filter(|c| c.is_problem())
                .map(HealthCheck::note)
                .collect(),
            failed: e.outcome == Outcome::Failed,
        });
    if let Some(h) = health.as_ref().filter(|h| h.failed) {
        attention.push(format!(
            "the last health check failed ({}): {}",
            h.time,
            h.error.as_deref().unwrap_or("-")
        ));
    }
    let problems = newest_first()
        .filter(|e| is_problem(&e.outcome))
        .take(PROBLEMS)
        .map(problem)
        .collect();
    (health, problems)
}

/// Lines of the audit log's tail that are not audit entries: a torn append
/// (ENOSPC, EIO, a kill) lost a run's entry there, or someone else wrote
/// into the log. Named by file and line (or byte, in a tail that started
/// inside the file); it stays listed until the line leaves the tail.
pub fn skipped_lines(audit: &Found) -> String {
    format!(
        "{}, not audit entries (a torn append lost a run's entry, or a foreign line; \
         `qoslane log` reads every other line)",
        audit.skipped_summary("audit line")
    )
}

fn problem(e: &LoggedEntry) -> Problem {
    Problem {
        time: e.time.clone(),
        event: e.event.to_string(),
        job_id: e.job_id,
        qos: e.qos.clone(),
        level: e.level.clone(),
        outcome: e.outcome.to_string(),
        error: e.error.clone(),
    }
}

/// Per level, its newest Epilog with counter evidence among the entries
/// read (newest last).
pub fn level_counters(audit: &Found) -> Vec<LevelCounters> {
    let mut out: Vec<LevelCounters> = Vec::new();
    for l in audit.entries.iter().rev() {
        let e = &l.entry;
        let Some(level) = e.level.as_deref() else {
            continue;
        };
        if e.event == crate::report::Event::Epilog
            && !e.evidence.is_null()
            && !out.iter().any(|c| c.level == level)
        {
            out.push(LevelCounters {
                level: level.to_owned(),
                job_id: e.job_id,
                time: e.time.clone(),
                evidence: e.evidence.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.level.cmp(&b.level));
    out
}

/// The held jobs whose Epilog ran after their record was written and did
/// not succeed (a setting it could not restore: the level is still held,
/// hookrun drained the node): job id → `TIME: ERROR` of its newest one.
pub fn failed_epilogs(
    entries: &[Line],
    records: &std::collections::BTreeMap<crate::job::JobId, crate::state::JobRecord>,
) -> std::collections::BTreeMap<u64, String> {
    let at = |t: &str| crate::time::parse_rfc3339(t);
    records
        .values()
        .filter_map(|r| {
            let id = u64::from(r.job_id.get());
            let since = at(&r.time)?;
            let e = entries.iter().rev().map(|l| &l.entry).find(|e| {
                e.event == Event::Epilog
                    && e.job_id == Some(id)
                    && at(&e.time).is_some_and(|t| t >= since)
            })?;
            is_problem(&e.outcome).then(|| {
                (
                    id,
                    format!(
                        "{}: {}",
                        e.time,
                        e.error.as_deref().unwrap_or(e.outcome.to_string().as_str())
                    ),
                )
            })
        })
        .collect()
}
