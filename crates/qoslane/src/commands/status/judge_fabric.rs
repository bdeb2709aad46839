//! What `qoslane status` says of the fabric cache: each cached port judged
//! for every level of the mapping in force, and the held jobs whose SL a
//! port does not carry (by the rules a Prolog uses: `fabric::check`); and
//! whether the recorded grants still describe the ports the cache shows.

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

/// Why the recorded grants may no longer hold, if they may not: the first
/// hop they were read with is under another SM than the ports' probe, or
/// the ports were probed after the record (a Prolog or `sync` probed again:
/// another SM, a port re-assigned). Only the next `health` decides again.
pub fn grants_stale(
    record: &crate::grant::Record,
    cache: &[crate::fabric::cache::CachedPort],
) -> Option<String> {
    let recorded = record.first_hop.iter().flat_map(|f| &f.ports);
    for r in recorded {
        let now = cache.iter().find(|c| c.port.to_string() == r.port);
        if let Some(c) = now.filter(|c| c.identity.sm_lid != r.sm_lid) {
            return Some(format!(
                "recorded under another SM (port {}: SM LID {} then, {} in the ports' probe)",
                r.port, r.sm_lid, c.identity.sm_lid
            ));
        }
    }
    let recorded_ms = crate::time::parse_rfc3339(&record.time)?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    let newest = cache.iter().max_by_key(|c| c.probed_at_ms)?;
    (u128::from(newest.probed_at_ms) > recorded_ms).then(|| {
        let probed = std::time::UNIX_EPOCH + std::time::Duration::from_millis(newest.probed_at_ms);
        format!(
            "older than the ports' probe ({} probed {})",
            newest.port,
            crate::time::rfc3339_seconds(probed)
        )
    })
}
