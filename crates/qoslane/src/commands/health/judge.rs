//! Every decision of `qoslane health`, pure: from what [`super::gather`]
//! found to each check's status and words ([`NodeHealth`]). Only what means
//! the node cannot serve jobs safely drains it: an interrupted transaction
//! that cannot be rolled back, state qoslane cannot trust or a state
//! directory it cannot use, a port that should be ACTIVE and is not, no
//! usable mapping at all, a lock held far past any deadline. A mapping not
//! in force or a level that is not granted is a warning. Each level's words
//! are its grant's ([`grant::Decision::meaning`]).

use std::time::Duration;

use super::gather::{FabricFacts, HealthFacts, InstalledMapping, Lock, Records};
use super::model::NodeHealth;
use crate::grant::{self, Decision};
use crate::mapping::{FabricCheck, Mapping, OnUnknownQos};
use crate::report::health::{CheckStatus, HealthCheck};
use crate::run::placement::Synced;

/// A transaction that has held the node lock this long is stuck: far past
/// any run's deadline (seconds; the watchdog ends a run hung past it — but a
/// kernel call in uninterruptible sleep keeps the process, and the lock,
/// alive). A warning: no job can get or release a level meanwhile.
const LOCK_STUCK_WARN: Duration = Duration::from_secs(60);
/// This long: the node is unhealthy (drained).
const LOCK_STUCK_DRAIN: Duration = Duration::from_secs(600);

fn check(name: &str, status: CheckStatus, detail: impl Into<String>) -> HealthCheck {
    HealthCheck::new(name, status, detail)
}

/// The checks, in the order they are listed.
pub fn judge(facts: &HealthFacts) -> NodeHealth {
    let mut checks = vec![mapping(&facts.mapping)];
    checks.extend(facts.state_dirs.iter().map(state_dir));
    checks.push(lock(&facts.lock, &facts.run_dir));
    checks.extend(facts.records.as_ref().map(records));
    checks.extend(facts.state_files.as_ref().map(state_files));
    if let Some(f) = &facts.fabric {
        checks.extend(ports(f));
        checks.extend(levels(&f.record, &f.mapping));
        if let Some(e) = &f.store_error {
            checks.push(check(
                "grants",
                CheckStatus::Warn,
                format!(
                    "{e}: the Prologs, `status` and the metrics see the previous record; fix {}",
                    facts.run_dir
                ),
            ));
        }
    }
    checks.extend(facts.placement.as_ref().and_then(placement));
    NodeHealth::of(checks)
}

/// Placement (when on): what slurmctld was told. A failed send warns: the
/// node stays in service, and the next run sends again.
fn placement(p: &Synced) -> Option<HealthCheck> {
    Some(match p {
        Synced::Off => return None,
        Synced::Unchanged { active } => check(
            "placement",
            CheckStatus::Ok,
            format!("active features {} (sent before)", active.join(",")),
        ),
        Synced::Sent { due, active, .. } => check(
            "placement",
            CheckStatus::Ok,
            format!(
                "sent active features {} ({})",
                active.join(","),
                due.as_str()
            ),
        ),
        Synced::Failed { due, error } => check(
            "placement",
            CheckStatus::Warn,
            format!(
                "could not tell slurmctld this node's levels ({}): {error}; Slurm may place a \
                 level's jobs here that the Prolog refuses; the next health run sends again",
                due.as_str()
            ),
        ),
    })
}

/// An unusable file never drains while a last-known-good copy is in force;
/// no usable mapping at all does: no level can be granted.
fn mapping(m: &InstalledMapping) -> HealthCheck {
    match m {
        InstalledMapping::Valid { levels, sha256 } => check(
            "mapping",
            CheckStatus::Ok,
            format!("valid, {levels} levels, sha256 {sha256}"),
        ),
        InstalledMapping::Refused { problem, sha256 } => check(
            "mapping",
            CheckStatus::Warn,
            format!(
                "{}; sha256 {sha256} is in force: fix the fabric (or the mapping) and run \
                 `qoslane sync`",
                problem.as_deref().unwrap_or("not put in force"),
            ),
        ),
        InstalledMapping::Invalid { error, sha256 } => check(
            "mapping",
            CheckStatus::Warn,
            format!(
                "{error}; the last-known-good copy (sha256 {sha256}) is in force: fix the file \
                 (`qoslane validate`) and run `qoslane sync`"
            ),
        ),
        InstalledMapping::Unusable {
            error,
            on_unknown_qos,
        } => {
            // The node cannot serve what it promises, whatever the jobs' tiers.
            let jobs = match on_unknown_qos {
                OnUnknownQos::FailJob => "every job is refused (on_unknown_qos: fail_job)",
                OnUnknownQos::DefaultLevel => {
                    "a job would run without its SL (on_unknown_qos: default_level)"
                }
            };
            // The fix first: this line is hookrun's drain reason, cut past
            // 200 bytes; the node drains, so no job runs here.
            check(
                "mapping",
                CheckStatus::Drain,
                format!(
                    "no usable mapping: install a valid one (`qoslane validate`, then \
                     `qoslane sync`); {error}; no last-known-good copy: no level is granted \
                     ({jobs}), so the node is drained"
                ),
            )
        }
    }
}

/// Each state directory that exists must be root's, mode 0755.
fn state_dir(dir: &Result<String, String>) -> HealthCheck {
    match dir {
        Ok(shown) => check("state", CheckStatus::Ok, format!("{shown} ok")),
        Err(e) => check(
            "state",
            CheckStatus::Drain,
            format!("{e}: make it a directory of root's, mode 0755"),
        ),
    }
}

/// An interrupted transaction that cannot be rolled back drains; a lock
/// held by a transaction past [`LOCK_STUCK_WARN`] warns, past
/// [`LOCK_STUCK_DRAIN`] drains. Held outside a transaction (nobody named):
/// a warning at once, a drain once health has seen it held that long.
fn lock(l: &Lock, run_dir: &str) -> HealthCheck {
    match l {
        Lock::RolledBack => check(
            "journal",
            CheckStatus::Ok,
            "rolled back an interrupted transaction",
        ),
        Lock::Free => check("journal", CheckStatus::Ok, "none pending"),
        Lock::Unrecoverable(e) => check(
            "journal",
            CheckStatus::Drain,
            format!(
                "an interrupted transaction cannot be rolled back: {e}; fix the cause and run \
                 `qoslane recover`"
            ),
        ),
        Lock::HeldOutside { since, held } => check(
            "journal",
            if *held >= LOCK_STUCK_DRAIN {
                CheckStatus::Drain
            } else {
                CheckStatus::Warn
            },
            format!(
                "the node lock is held outside a transaction (no journal) since {since}, {} s: \
                 no job can get or release a level meanwhile; see who holds it with `fuser -v \
                 {run_dir}/lock` (an admin's flock, a run wedged before its transaction) and end it",
                held.as_secs()
            ),
        ),
        Lock::Held { pid, who, held } => {
            let status = if *held >= LOCK_STUCK_DRAIN {
                CheckStatus::Drain
            } else if *held >= LOCK_STUCK_WARN {
                CheckStatus::Warn
            } else {
                CheckStatus::Ok
            };
            let detail = match status {
                CheckStatus::Ok => {
                    format!("a transaction is in progress (node lock held by {who})")
                }
                _ => format!(
                    "the node lock is held by {who}: far past any run's deadline (a setting \
                     write stuck in the kernel?); no job can get or release a level: see `cat \
                     /proc/{pid}/stack`, then fix or reboot"
                ),
            };
            check("journal", status, detail)
        }
    }
}

/// Stale records released are fine; ones that cannot be released drain.
fn records(r: &Records) -> HealthCheck {
    match r {
        Records::NotCompared { count, why } => check(
            "records",
            CheckStatus::Ok,
            format!("{count} job record(s); not compared with Slurm ({why})"),
        ),
        Records::AllOnNode { count, node } => check(
            "records",
            CheckStatus::Ok,
            format!("{count} job record(s), every job on node {node}"),
        ),
        Records::Released { jobs, node } => check(
            "records",
            CheckStatus::Ok,
            format!("released stale record(s) of job(s) {jobs} (not on node {node} any more)"),
        ),
        Records::NotReleased { jobs, error } => check(
            "records",
            CheckStatus::Drain,
            format!(
                "stale record(s) of job(s) {jobs} could not be released: {error}; run `qoslane \
                 recover`, then `qoslane health`"
            ),
        ),
    }
}

/// State qoslane cannot trust stops every change: the node must not take
/// jobs.
fn state_files(r: &Result<usize, String>) -> HealthCheck {
    match r {
        Ok(n) => check(
            "state",
            CheckStatus::Ok,
            format!("{n} job record(s), baseline and journal readable"),
        ),
        Err(e) => check(
            "state",
            CheckStatus::Drain,
            format!("{e}: qoslane will not act on it; inspect, then remove or restore it"),
        ),
    }
}

/// A port that is not ACTIVE drains when `devices:` lists it (the admin
/// said it carries the levels) or when no selected port is ACTIVE (no
/// level has a carrier); with `devices: []` a down port beside an ACTIVE
/// one carries nothing and is a note.
fn ports(f: &FabricFacts) -> Vec<HealthCheck> {
    let Some(assessment) = &f.judgement.assessment else {
        return Vec::new();
    };
    let needed = !f.mapping.devices.is_empty() || assessment.no_active_port();
    assessment
        .skipped
        .iter()
        .filter(|p| !p.active)
        .map(|p| {
            let what = format!(
                "{}: not ACTIVE ({} port, state {}, phys_state {})",
                p.port, p.link_layer, p.state, p.phys_state
            );
            if needed {
                check(
                    "port",
                    CheckStatus::Drain,
                    format!("{what}: check the cable, the switch port and the SM"),
                )
            } else {
                check(
                    "port",
                    CheckStatus::Ok,
                    format!(
                        "{what}: carries no level (devices: [] judges the ACTIVE ports only; \
                         list it in `devices:` if it should carry them)"
                    ),
                )
            }
        })
        .collect()
}

/// Each level's grant in words (the grant's: [`grant::Decision::meaning`]):
/// a level that is not granted, or granted with warnings, is a warning with
/// its reasons and where to fix them; all granted is one `ok` line.
fn levels(record: &grant::Record, m: &Mapping) -> Vec<HealthCheck> {
    let mut out = Vec::new();
    for l in m.levels() {
        let Some(g) = record.grants.get(&l.name) else {
            continue;
        };
        if g.decision == Decision::Granted {
            continue;
        }
        let mut why: Vec<&str> = g.reason_lines();
        why.extend(g.warnings.iter().map(String::as_str));
        let fix = if g
            .reasons
            .iter()
            .any(|r| r.scope == grant::GrantScope::Settings)
            || g.warnings.iter().any(|w| w.starts_with("node settings"))
        {
            "make the level's node settings writable (or remove them from the level)"
        } else {
            "fix the SM's SL2VL/VLArb, or the probe if it could not run (docs/fabric.md)"
        };
        out.push(check(
            "level",
            CheckStatus::Warn,
            format!(
                "level {}: {}; {}: {fix}",
                l.name,
                why.join("; "),
                g.decision.meaning()
            ),
        ));
    }
    if out.is_empty() {
        let what = if m.fabric_check == FabricCheck::Off {
            "fabric_check off"
        } else {
            "own ports and first hop carry them"
        };
        out.push(check(
            "level",
            CheckStatus::Ok,
            format!(
                "every level granted ({} level(s); {what})",
                m.levels().len()
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(mapping: InstalledMapping, lock: Lock) -> HealthFacts {
        HealthFacts {
            mapping,
            state_dirs: vec![Ok("/run/qoslane".into())],
            lock,
            records: None,
            state_files: Some(Ok(0)),
            fabric: None,
            run_dir: "/run/qoslane".into(),
            placement: None,
        }
    }

    /// Placement: off says nothing; a failed send warns (the node stays in
    /// service), a send or nothing to send is ok.
    #[test]
    fn a_failed_placement_send_warns_and_placement_off_is_silent() {
        use crate::slurm_config::Due;
        let mut f = facts(
            InstalledMapping::Valid {
                levels: 1,
                sha256: "x".into(),
            },
            Lock::Free,
        );
        f.placement = Some(Synced::Off);
        assert!(!judge(&f).checks.iter().any(|c| c.name == "placement"));
        f.placement = Some(Synced::Failed {
            due: Due::Changed,
            error: "scontrol: unreachable".into(),
        });
        let h = judge(&f);
        let c = h.checks.iter().find(|c| c.name == "placement").unwrap();
        assert_eq!(c.status, CheckStatus::Warn);
        assert!(h.drain().is_none());
        f.placement = Some(Synced::Sent {
            due: Due::First,
            active: vec!["qoslane".into()],
            calls: 2,
        });
        let h = judge(&f);
        let c = h.checks.iter().find(|c| c.name == "placement").unwrap();
        assert_eq!(c.status, CheckStatus::Ok);
        assert_eq!(c.detail, "sent active features qoslane (first since boot)");
    }

    /// Pure: facts in, checks out. A lock held past the warning time warns,
    /// past the drain time drains; no usable mapping drains.
    #[test]
    fn the_checks_are_judged_from_the_facts_alone() {
        let valid = || InstalledMapping::Valid {
            levels: 2,
            sha256: "abc".into(),
        };
        let held = |secs| Lock::Held {
            pid: 7,
            who: "pid 7 (prolog)".into(),
            held: Duration::from_secs(secs),
        };
        let h = judge(&facts(valid(), Lock::Free));
        assert!(h.healthy && h.warnings == 0, "{h:?}");
        let names: Vec<&str> = h.checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["mapping", "state", "journal", "state"]);
        let h = judge(&facts(valid(), held(61)));
        assert!(h.healthy && h.warnings == 1, "{h:?}");
        let h = judge(&facts(valid(), held(601)));
        assert!(!h.healthy);
        assert!(
            h.drain()
                .is_some_and(|d| d.detail.contains("/proc/7/stack"))
        );
        let unusable = InstalledMapping::Unusable {
            error: "no such file".into(),
            on_unknown_qos: OnUnknownQos::FailJob,
        };
        let h = judge(&facts(unusable, Lock::Free));
        assert!(
            h.drain()
                .is_some_and(|d| d.name == "mapping" && d.detail.contains("every job is refused"))
        );
    }
}
