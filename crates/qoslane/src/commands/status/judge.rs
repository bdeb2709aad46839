//! Every decision of `qoslane status`, in one pure function: from what was
//! read ([`Facts`]) to what is shown ([`NodeStatus`]): which fabric lanes
//! carry which level (by the Prolog's own rules, [`check::check`]), whether
//! a setting is in sync, the last health check and the problems in the
//! audit log, and every reason the node needs attention, in the order
//! they are listed.

use crate::audit::read::LoggedEntry;
use crate::config::Source;
use crate::fabric::check;
use crate::mapping::Mapping;
use crate::settings;
use crate::state::JobRecord;

use super::gather::Facts;
use super::model::{
    AuditState, Condition, FabricState, Health, HeldLevel, InForce, LevelOnPort, MappingState,
    NodeStatus, PendingJournal, PortState, Problem, SCHEMA, SettingRow,
};

/// Problems shown.
const PROBLEMS: usize = 5;

/// The outcomes that are problems (`qoslane log --outcome failed --outcome
/// rolled_back` lists them all).
const PROBLEM_OUTCOMES: &[&str] = &["failed", "rolled_back"];

pub fn judge(facts: Facts) -> NodeStatus {
    let Facts {
        config_path,
        audit_path,
        state_errors,
        records,
        node,
        journal,
        file_sha256,
        file_error,
        file_modified,
        last_known_good_sha256: lkg,
        last_known_good_since: lkg_since,
        rejected,
        loaded,
        cache,
        cache_note,
        now_ms,
        settings,
        audit,
    } = facts;
    let mut attention = Vec::new();
    if !state_errors.is_empty() {
        attention.push(format!(
            "state that cannot be used: {} (inspect, then remove it; `qoslane health` fails \
             until then)",
            state_errors.join("; ")
        ));
    }

    // Only a refusal of the file installed now is news.
    let rejected = rejected.filter(|r| file_sha256.as_ref() == Some(&r.sha256));
    let (mapping, in_force) = match loaded {
        Ok(l) => {
            let since = lkg_since
                .clone()
                .filter(|_| lkg.as_ref() == Some(&l.sha256));
            let f = InForce {
                source: match l.source {
                    Source::Config => "file",
                    Source::LastKnownGood => "last_known_good",
                },
                sha256: l.sha256.clone(),
                since,
                problem: l.problem.clone(),
            };
            (Some(l.mapping), Some(f))
        }
        Err(e) => {
            attention.push(format!("no usable mapping: {e}"));
            (None, None)
        }
    };
    if let Some(e) = &file_error
        && in_force.is_some()
    {
        attention.push(format!(
            "the installed mapping is invalid (runs use last-known-good): {e}"
        ));
    }
    if let Some(r) = &rejected {
        attention.push(format!(
            "the installed mapping was not put in force: {}",
            r.why
        ));
    }

    let fabric = fabric_state(&cache, cache_note, now_ms, mapping.as_ref());
    let jobs: Vec<HeldLevel> = records.values().map(held).collect();
    for j in &jobs {
        for p in &fabric.ports {
            for l in p.levels.iter().filter(|l| l.level == j.level) {
                if let Some(problem) = &l.problem {
                    attention.push(format!(
                        "job {} holds level {} which the cached probe says is not carried: \
                         {problem}",
                        j.job_id, j.level
                    ));
                }
            }
        }
    }

    let settings: Vec<SettingRow> = settings
        .into_iter()
        .map(|s| {
            let (current, error) = match s.current {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e)),
            };
            let in_sync = current
                .as_deref()
                .is_some_and(|c| settings::same_value(&s.wanted, c));
            SettingRow {
                baseline: node.baseline.get(&s.path).cloned(),
                path: s.path,
                current,
                error,
                wanted: s.wanted,
                in_sync,
            }
        })
        .collect();
    let out_of_sync: Vec<&str> = settings
        .iter()
        .filter(|s| !s.in_sync && !node.gone.contains(&s.path))
        .map(|s| s.path.as_str())
        .collect();
    if !out_of_sync.is_empty() {
        attention.push(format!(
            "settings out of sync: {} (`qoslane health` puts them back)",
            out_of_sync.join(", ")
        ));
    }
    let journal = journal.map(|j| PendingJournal {
        event: j.event,
        job_id: j.job_id.map(|id| u64::from(id.get())),
        pid: j.pid,
        started: j.started,
    });
    if let Some(j) = &journal {
        attention.push(format!(
            "an interrupted {} (pid {}, started {}) left its journal: `qoslane recover` rolls it \
             back",
            j.event, j.pid, j.started
        ));
    }

    let newest_first = || audit.entries.iter().rev().map(|l| &l.entry);
    let health = newest_first()
        .find(|e| e.event == "health")
        .map(|e| Health {
            time: e.time.clone(),
            outcome: e.outcome.clone(),
            error: e.error.clone(),
            failed: e.outcome == "failed",
        });
    if let Some(h) = health.as_ref().filter(|h| h.failed) {
        attention.push(format!(
            "the last health check failed ({}): {}",
            h.time,
            h.error.as_deref().unwrap_or("-")
        ));
    }
    let last_problems: Vec<Problem> = newest_first()
        .filter(|e| PROBLEM_OUTCOMES.contains(&e.outcome.as_str()))
        .take(PROBLEMS)
        .map(problem)
        .collect();

    NodeStatus {
        schema: SCHEMA,
        state: if attention.is_empty() {
            Condition::Ok
        } else {
            Condition::Attention
        },
        attention,
        mapping: MappingState {
            path: config_path,
            valid: file_error.is_none() && file_sha256.is_some(),
            sha256: file_sha256,
            error: file_error,
            modified: file_modified,
            last_known_good_sha256: lkg,
            last_known_good_since: lkg_since,
            in_force,
            rejected,
        },
        fabric,
        jobs,
        settings,
        settings_gone: node.gone.into_iter().collect(),
        health,
        journal,
        state_errors,
        last_problems,
        audit: AuditState {
            path: audit_path,
            entries_read: audit.entries.len(),
            problems: audit.problems,
        },
    }
}

fn held(r: &JobRecord) -> HeldLevel {
    HeldLevel {
        job_id: u64::from(r.job_id.get()),
        user: r.user.clone(),
        qos: r.qos.clone(),
        qos_source: r.qos_source,
        level: r.level.clone(),
        service_level: r.service_level,
        virtual_lane: r.virtual_lane,
        since: r.time.clone(),
        mapping_sha256: r.mapping_sha256.clone(),
    }
}

fn problem(e: &LoggedEntry) -> Problem {
    Problem {
        time: e.time.clone(),
        event: e.event.clone(),
        job_id: e.job_id,
        qos: e.qos.clone(),
        level: e.level.clone(),
        outcome: e.outcome.clone(),
        error: e.error.clone(),
    }
}

/// The cached probe, each port judged for every level of the mapping in
/// force by the same rules as a Prolog.
fn fabric_state(
    cache: &[crate::fabric::cache::Entry],
    note: Option<String>,
    now_ms: u64,
    mapping: Option<&Mapping>,
) -> FabricState {
    let ports = cache
        .iter()
        .map(|e| PortState {
            port: e.port.to_string(),
            probed_s_ago: now_ms.saturating_sub(e.probed_at_ms) / 1000,
            link_state: e.tables.link_state.clone(),
            oper_vls: e.tables.oper_vls.to_string(),
            levels: mapping
                .map(Mapping::levels)
                .unwrap_or_default()
                .iter()
                .map(|level| {
                    let v = check::check(&e.port, &e.tables, level);
                    LevelOnPort {
                        level: v.level,
                        service_level: v.service_level,
                        vl: v.vl,
                        want_vl: v.want_vl,
                        lane: v.lane,
                        problem: v.problem,
                    }
                })
                .collect(),
        })
        .collect();
    FabricState {
        check: mapping.map(|m| m.fabric_check.as_str()),
        note,
        ports,
    }
}
