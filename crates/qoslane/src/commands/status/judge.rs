//! Every decision of `qoslane status`, in one pure function, from what was
//! read ([`Facts`]) to what is shown ([`NodeStatus`]): the recorded grants
//! (rendered, never decided again), which lanes carry a held job's SL,
//! whether a setting is in sync, the audit log's last health check and
//! problems, and every reason for attention, in the order they are listed.

use crate::config::{self, Source};
use crate::mapping::Mapping;
use crate::settings;
use crate::state::{JobRecord, NodeState};

use super::gather::{Facts, MappingFacts, SettingNow};
use super::model::{
    AuditState, Condition, GrantsState, HeldLevel, InForce, LevelGrant, MappingState, NodeStatus,
    PendingJournal, SCHEMA, SettingRow,
};
use super::{judge_audit, judge_fabric};

pub fn judge(facts: Facts) -> NodeStatus {
    let Facts {
        audit_path,
        state_errors,
        unreadable,
        uid,
        records,
        node,
        journal,
        mapping,
        cache,
        cache_note,
        now_ms,
        settings,
        audit,
        grants,
    } = facts;
    // Each step adds its reasons, in the order they are listed.
    let mut attention = Vec::new();
    if !state_errors.is_empty() {
        attention.push(format!(
            "state that cannot be used: {} (inspect, then remove it; `qoslane health` fails \
             until then)",
            state_errors.join("; ")
        ));
    }
    if !unreadable.is_empty() {
        attention.push(format!(
            "state not readable as uid {}: {} (`qoslane status` needs root to read it; nothing is \
             wrong with it for that)",
            uid,
            unreadable.join("; ")
        ));
    }
    let (in_force, mapping) = judge_mapping(mapping, &mut attention);
    let fabric = judge_fabric::fabric_state(&cache, cache_note, now_ms, in_force.as_ref());
    let grants = judge_grants(
        grants,
        &cache,
        in_force.as_ref(),
        mapping.in_force.as_ref(),
        &mut attention,
    );
    let jobs = held_jobs(&records, &audit.entries, &mut attention);
    attention.extend(judge_fabric::jobs_not_carried(&records, &cache));
    let settings = judge_settings(settings, &node, &mut attention);
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
    let (health, last_problems) = judge_audit::judge_audit(&audit.entries, &mut attention);
    if audit.skipped > 0 {
        attention.push(judge_audit::skipped_lines(&audit));
    }
    let counters = judge_audit::level_counters(&audit);

    NodeStatus {
        schema: SCHEMA,
        state: if attention.is_empty() {
            Condition::Ok
        } else {
            Condition::Attention
        },
        attention,
        mapping,
        fabric,
        grants,
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
            skipped_lines: audit.skipped,
        },
        counters,
    }
}

/// The mapping in force (if any) and what status says of the mapping: no
/// usable mapping, an invalid installed file, a refused one need attention.
fn judge_mapping(m: MappingFacts, attention: &mut Vec<String>) -> (Option<Mapping>, MappingState) {
    // Only a refusal of the file installed now is news.
    let rejected = m.rejected.filter(|r| m.sha256.as_ref() == Some(&r.sha256));
    let (mapping, in_force) = match m.loaded {
        Ok(l) => {
            let since = m
                .last_known_good_since
                .clone()
                .filter(|_| m.last_known_good_sha256.as_ref() == Some(&l.sha256));
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
    if let Some(e) = &m.error
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
    let (installed_in_force, installed_not_in_force) = match m.installed {
        config::Installed::InForce => (true, None),
        config::Installed::Absent => (false, Some("absent".to_owned())),
        config::Installed::NotInForce(why) => (false, Some(why)),
    };
    let state = MappingState {
        installed_in_force,
        installed_not_in_force,
        path: m.path,
        valid: m.error.is_none() && m.sha256.is_some(),
        sha256: m.sha256,
        error: m.error,
        modified: m.modified,
        last_known_good_sha256: m.last_known_good_sha256,
        last_known_good_since: m.last_known_good_since,
        in_force,
        rejected,
    };
    (mapping, state)
}

/// The recorded grants of the mapping in force: a level a job starting now
/// would not get (refused, or on the baseline) needs attention. Rendered as
/// recorded, never decided again.
fn judge_grants(
    grants: std::result::Result<Option<crate::grant::Record>, String>,
    cache: &[crate::fabric::cache::CachedPort],
    mapping: Option<&Mapping>,
    in_force: Option<&InForce>,
    attention: &mut Vec<String>,
) -> GrantsState {
    let (record, error) = match grants {
        Ok(r) => (r, None),
        Err(e) => (None, Some(e)),
    };
    let record = record.filter(|r| in_force.is_some_and(|f| f.sha256 == r.mapping_sha256));
    let Some(record) = record else {
        return GrantsState {
            recorded_by: None,
            stale: None,
            error,
            levels: Vec::new(),
        };
    };
    let stale = judge_fabric::grants_stale(&record, cache);
    let by = match &stale {
        None => format!("{} {}", record.by, record.time),
        Some(why) => format!(
            "{} {}, stale: {why}; `qoslane health` decides again",
            record.by, record.time
        ),
    };
    let levels: Vec<LevelGrant> = mapping
        .map(Mapping::levels)
        .unwrap_or_default()
        .iter()
        .filter_map(|l| record.grants.get(&l.name).map(|g| (l, g)))
        .map(|(l, g)| LevelGrant {
            level: l.name.clone(),
            decision: g.decision,
            meaning: g.decision.meaning(),
            reasons: g
                .reason_lines()
                .into_iter()
                .map(ToOwned::to_owned)
                .collect(),
            warnings: g.warnings.clone(),
        })
        .collect();
    for g in levels.iter().filter(|g| !g.decision.gets_its_sl()) {
        attention.push(format!(
            "level {} is not granted ({by}): {}: {}",
            g.level,
            g.meaning,
            g.reasons.join("; ")
        ));
    }
    GrantsState {
        recorded_by: Some(format!("{} {}", record.by, record.time)),
        stale,
        error,
        levels,
    }
}

/// Each setting against what it should hold (kernel-normalised); one out of
/// sync needs attention, unless its file is gone.
fn judge_settings(
    settings: Vec<SettingNow>,
    node: &NodeState,
    attention: &mut Vec<String>,
) -> Vec<SettingRow> {
    let rows: Vec<SettingRow> = settings
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
    let out_of_sync: Vec<&str> = rows
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
    rows
}

/// The held jobs; one whose Epilog failed (its level still held, the node
/// drained by hookrun) needs attention.
fn held_jobs(
    records: &std::collections::BTreeMap<crate::job::JobId, JobRecord>,
    entries: &[crate::audit::read::Line],
    attention: &mut Vec<String>,
) -> Vec<HeldLevel> {
    let failed = judge_audit::failed_epilogs(entries, records);
    let jobs: Vec<HeldLevel> = records
        .values()
        .map(|r| held(r, failed.get(&u64::from(r.job_id.get())).cloned()))
        .collect();
    for j in jobs.iter().filter(|j| j.epilog_failed.is_some()) {
        attention.push(format!(
            "job {}'s Epilog failed ({}): its level {} is still held and hookrun drained the \
             node; fix the cause: the next `qoslane health` releases the level once Slurm no \
             longer has the job, and hookrun's passing check resumes the node",
            j.job_id,
            j.epilog_failed.as_deref().unwrap_or("-"),
            j.level
        ));
    }
    jobs
}

fn held(r: &JobRecord, epilog_failed: Option<String>) -> HeldLevel {
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
        epilog_failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::read::{Found, Line};

    fn facts() -> Facts {
        Facts {
            audit_path: "/var/log/qoslane/audit.jsonl".into(),
            state_errors: Vec::new(),
            unreadable: Vec::new(),
            uid: 0,
            records: std::collections::BTreeMap::new(),
            node: NodeState::default(),
            journal: None,
            mapping: MappingFacts {
                path: "/etc/qoslane/qos-network.yml".into(),
                sha256: None,
                error: Some("no such file".into()),
                modified: None,
                last_known_good_sha256: None,
                last_known_good_since: None,
                rejected: None,
                loaded: Err("no mapping and no last-known-good copy".into()),
                installed: config::Installed::Absent,
            },
            cache: Vec::new(),
            cache_note: None,
            now_ms: 0,
            settings: Vec::new(),
            audit: Found::default(),
            grants: Ok(None),
        }
    }

    fn line(json: &str) -> Line {
        Line {
            entry: serde_json::from_str(json).unwrap(),
            raw: json.to_owned(),
        }
    }

    /// Pure: facts in, every judgement out, no node needed. The reasons come
    /// in their documented order; a gone setting is not out of sync.
    #[test]
    fn every_reason_for_attention_is_judged_from_the_facts_alone() {
        let mut f = facts();
        f.state_errors.push("node state: not json".into());
        f.node.gone.insert("/sys/gone".into());
        f.settings = vec![
            SettingNow {
                path: "/proc/sys/a".into(),
                wanted: "1 2".into(),
                current: Ok("1\t2\n".into()),
            },
            SettingNow {
                path: "/proc/sys/b".into(),
                wanted: "5".into(),
                current: Err("unreadable".into()),
            },
            SettingNow {
                path: "/sys/gone".into(),
                wanted: "5".into(),
                current: Err("gone".into()),
            },
        ];
        f.journal = Some(crate::state::Journal {
            event: "prolog".into(),
            job_id: None,
            pid: 7,
            started: "t0".into(),
            changes: Vec::new(),
            node_before: NodeState::default(),
            records_before: Vec::new(),
        });
        f.audit.entries = vec![
            line(r#"{"time":"t1","event":"health","outcome":"failed","error":"boom"}"#),
            line(r#"{"time":"t2","event":"prolog","job_id":3,"outcome":"rolled_back"}"#),
            line(r#"{"time":"t3","event":"epilog","outcome":"reverted"}"#),
        ];
        f.audit.skipped = 1;
        f.audit.skipped_at = vec!["/var/log/qoslane/audit.jsonl:7".into()];
        let st = judge(f);
        assert_eq!(st.state, Condition::Attention);
        let starts: Vec<&str> = st
            .attention
            .iter()
            .map(|a| a.split(':').next().unwrap())
            .collect();
        assert_eq!(
            starts,
            [
                "state that cannot be used",
                "no usable mapping",
                "settings out of sync",
                "an interrupted prolog (pid 7, started t0) left its journal",
                "the last health check failed (t1)",
                "1 audit line skipped",
            ]
        );
        assert!(
            st.attention[5].starts_with("1 audit line skipped: /var/log/qoslane/audit.jsonl:7, "),
            "named by file and line: {}",
            st.attention[5]
        );
        assert_eq!(st.audit.skipped_lines, 1);
        assert!(st.attention[2].starts_with("settings out of sync: /proc/sys/b ("));
        let in_sync: Vec<bool> = st.settings.iter().map(|s| s.in_sync).collect();
        assert_eq!(in_sync, [true, false, false]);
        assert!(!st.mapping.valid);
        assert!(st.health.as_ref().is_some_and(|h| h.failed));
        let problems: Vec<(&str, Option<u64>)> = st
            .last_problems
            .iter()
            .map(|p| (p.outcome.as_str(), p.job_id))
            .collect();
        assert_eq!(problems, [("rolled_back", Some(3)), ("failed", None)]);
    }

    fn with_example(f: &mut Facts) {
        f.mapping.loaded = crate::config::read_for_dry_run(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/qos-network.yml"
        )))
        .map_err(|e| e.to_string());
        f.mapping.error = None;
    }

    /// A level the record does not grant needs attention, in the grant's
    /// words; a record of another mapping is not shown.
    #[test]
    fn a_recorded_grant_that_refuses_a_level_needs_attention() {
        use crate::grant::{Decision, Grant, Reason, Record};
        let mut f = facts();
        with_example(&mut f);
        let sha = f.mapping.loaded.as_ref().unwrap().sha256.clone();
        let level = f.mapping.loaded.as_ref().unwrap().mapping.levels()[0]
            .name
            .clone();
        let mut record = Record {
            mapping_sha256: sha,
            by: "health".into(),
            time: "t0".into(),
            ..Record::default()
        };
        record.grants.insert(
            level.clone(),
            Grant {
                decision: Decision::Refused,
                reasons: vec![Reason {
                    scope: crate::grant::GrantScope::FirstHop,
                    line: "mlx5_0/1 first hop: SL 3 -> VL 15".into(),
                }],
                warnings: Vec::new(),
                notes: Vec::new(),
                scopes: Vec::new(),
                path_record_sl: false,
            },
        );
        f.grants = Ok(Some(record.clone()));
        let st = judge(f);
        assert_eq!(
            st.attention,
            [format!(
                "level {level} is not granted (health t0): its jobs are refused and requeued \
                 (on_failure: fail_job): mlx5_0/1 first hop: SL 3 -> VL 15"
            )]
        );
        let mut f = facts();
        record.mapping_sha256 = "another".into();
        f.grants = Ok(Some(record));
        assert!(judge(f).grants.levels.is_empty(), "another mapping's");
    }

    #[test]
    fn a_node_with_nothing_wrong_is_ok() {
        let mut f = facts();
        with_example(&mut f);
        f.audit.entries = vec![line(
            r#"{"time":"t1","event":"health","outcome":"unchanged"}"#,
        )];
        let st = judge(f);
        assert_eq!(
            (st.state, st.attention.len()),
            (Condition::Ok, 0),
            "{:?}",
            st.attention
        );
        assert!(st.health.is_some_and(|h| !h.failed));
        assert_eq!(st.mapping.in_force.map(|i| i.source), Some("file"));
    }
}
