//! What `qoslane status` says of the fabric cache: each cached port judged
//! for every level of the mapping in force, and the held jobs whose SL a
//! port does not carry (by the rules a Prolog uses: `fabric::check`).

use crate::fabric::check;
use crate::mapping::Mapping;
use crate::state::JobRecord;

use super::model::{FabricState, LevelOnPort, PortState};

/// The cached probe, each port judged for every level of the mapping in
/// force by the same rules as a Prolog.
pub fn fabric_state(
    cache: &[crate::fabric::cache::CachedPort],
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

/// A job whose SL the cached probe says a port does not carry: judged by the
/// SL and VL it was granted (its record), not the mapping in force now.
pub fn jobs_not_carried(
    records: &std::collections::BTreeMap<crate::job::JobId, JobRecord>,
    cache: &[crate::fabric::cache::CachedPort],
) -> Vec<String> {
    let mut out = Vec::new();
    for r in records.values() {
        for e in cache {
            let v = check::check_sl(
                &e.port,
                &e.tables,
                &r.level,
                r.service_level,
                r.virtual_lane,
            );
            if let Some(problem) = v.problem {
                out.push(format!(
                    "job {} holds level {} (SL {}) which the cached probe says is not carried: \
                     {problem}",
                    r.job_id, r.level, r.service_level
                ));
            }
        }
    }
    out
}
