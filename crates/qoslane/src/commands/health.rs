//! `qoslane health`: for Slurm's HealthCheckProgram (through hookrun).
//!
//! Each check ends `ok`, `warn` or `drain`. Only what means the node cannot
//! serve jobs safely drains it (exit 1): an interrupted transaction that
//! cannot be rolled back, state qoslane cannot trust or a state directory it
//! cannot use, a port that should be ACTIVE and is not (one `devices:`
//! lists, or the last one: with `devices: []` a down port beside an ACTIVE
//! one carries nothing and is a note), no usable mapping at all (invalid or
//! absent, and no last-known-good copy: no level can be granted). An
//! invalid mapping (the last-known-good copy is in force) or a level that
//! is not granted is a warning (exit 0): the Prolog refuses that level per
//! its `on_failure`, other jobs keep running. Each level's grant is decided
//! once ([`crate::grant`]: own ports, first hop, node settings), recorded in
//! `/run/qoslane/grants.json` for the Prologs, `status`, `explain` and the
//! metrics, and its words are the grant's. The first line says the
//! verdict — for a drain, the reason Slurm shows; every problem follows on
//! its own line with its fix.

use std::io::Write;
use std::time::Duration;

use serde_json::json;

use super::Ctx;
use crate::config;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::exit_code::ExitClass;
use crate::fabric::policy;
use crate::grant::{self, Decision};
use crate::mapping::{FabricCheck, Mapping};
use crate::paths::Paths;
use crate::report::{Event, Exit, Outcome, Report};
use crate::run::session::Session;
use crate::state::{Store, fsutil, grants};
use crate::txn::RecordOp;

/// How long health waits for a transaction in progress before it looks past
/// it (a Prolog holding the lock is not a problem of the node).
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// A transaction that has held the node lock this long is stuck: far past
/// any run's deadline (seconds; the watchdog ends a run hung past it — but a
/// kernel call in uninterruptible sleep keeps the process, and the lock,
/// alive). A warning: no job can get or release a level meanwhile.
const LOCK_STUCK_WARN: Duration = Duration::from_secs(60);
/// This long: the node is unhealthy (drained).
const LOCK_STUCK_DRAIN: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Drain,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::Drain => "drain",
        }
    }
}

#[derive(Debug)]
struct Check {
    name: &'static str,
    status: Status,
    detail: String,
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name,
        status,
        detail: detail.into(),
    }
}

pub fn run(ctx: &Ctx, as_json: bool) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Health, Deadline::after(ctx.timeout));
    let mut r = Report::new(Event::Health);
    let mut checks: Vec<Check> = Vec::new();
    let paths = &ctx.paths;

    let (mapping_check, mapping) = mapping_in_force(paths);
    checks.push(mapping_check);

    // The audit line names the mapping in force.
    r.mapping_sha256 = config::load(paths).ok().map(|l| l.sha256);

    checks.extend(state_dir_checks(paths));

    let (journal, held) = journal_check(&mut s);
    checks.push(journal);
    r.lock_held_seconds = held;

    if let Some(c) = stale_records(&mut s, &mut r) {
        checks.push(c);
    }

    if let Some(c) = state_files_check(paths) {
        checks.push(c);
    }

    if let Some((m, sha)) = &mapping {
        let (mut fabric, hop_wait) = policy::judge_health(paths, m, &s.deadline);
        r.first_hop_wait = hop_wait;
        let settings = crate::settings::check_levels(paths, m, &s.deadline);
        let record = grant::Record {
            mapping_sha256: sha.clone(),
            by: "health".to_owned(),
            time: crate::time::now_rfc3339(),
            first_hop: fabric.first_hop_read(m),
            grants: fabric.grants(m, Some(&settings)),
            settings: Some(settings),
        };
        checks.extend(port_checks(&fabric, m));
        checks.extend(grant_checks(&record, m));
        if let Err(e) = grants::store(paths, &record) {
            checks.push(check(
                "grants",
                Status::Warn,
                format!(
                    "{e}: the Prologs, `status` and the metrics see the previous record; fix \
                     {}",
                    paths.display(&paths.run_dir)
                ),
            ));
        }
        // The verdict and alignment for audit and metrics; health's own
        // lines are its notes.
        fabric.notes.clear();
        r.take_fabric(&mut fabric);
    }

    let drain = checks.iter().find(|c| c.status == Status::Drain);
    let warnings = checks.iter().filter(|c| c.status == Status::Warn).count();
    print_checks(&checks, drain, warnings, as_json);

    let lines: Vec<String> = checks
        .iter()
        .map(|c| match c.status {
            Status::Ok => format!("{}: ok: {}", c.name, c.detail),
            Status::Warn => format!("{}{}{}", c.name, crate::report::WARN_MARK, c.detail),
            Status::Drain => format!("{}{}{}", c.name, crate::report::FAIL_MARK, c.detail),
        })
        .collect();
    r.notes.extend(lines);
    r.warnings = warnings;
    let drain = drain.map(|d| d.detail.clone());
    s.finish(match drain {
        None if r.changes.is_empty() => Ok(r.with(Outcome::Unchanged)),
        None => Ok(r.with(Outcome::Reverted)),
        Some(m) => Err(r.fail(Error::Unhealthy(m), Exit::ByError)),
    })
}

/// The mapping check, and the mapping in force: an unusable file never
/// drains; the last-known-good copy (if any) is in force and the Prolog
/// says so in every audit line.
fn mapping_in_force(paths: &Paths) -> (Check, Option<(Mapping, String)>) {
    match config::read_valid(paths, &paths.config) {
        Ok((m, sha, _)) => match config::load(paths) {
            // Valid, but refused by the fabric gate: the previous copy serves.
            Ok(l) if l.source == config::Source::LastKnownGood => (
                check(
                    "mapping",
                    Status::Warn,
                    format!(
                        "{}; sha256 {} is in force: fix the fabric (or the mapping) and run \
                         `qoslane sync`",
                        l.problem.as_deref().unwrap_or("not put in force"),
                        l.sha256
                    ),
                ),
                Some((l.mapping, l.sha256)),
            ),
            _ => (
                check(
                    "mapping",
                    Status::Ok,
                    format!("valid, {} levels, sha256 {sha}", m.levels().len()),
                ),
                Some((m, sha)),
            ),
        },
        Err(e) => {
            if let Ok(l) = config::load(paths) {
                (
                    check(
                        "mapping",
                        Status::Warn,
                        format!(
                            "{e}; the last-known-good copy (sha256 {}) is in force: fix the file \
                         (`qoslane validate`) and run `qoslane sync`",
                            l.sha256
                        ),
                    ),
                    Some((l.mapping, l.sha256)),
                )
            } else {
                // No level can be granted: the node cannot serve what it
                // promises, whatever the jobs' tiers.
                let jobs = match config::on_unknown_qos_of_installed(paths) {
                    crate::mapping::OnUnknownQos::FailJob => {
                        "every job is refused (on_unknown_qos: fail_job)"
                    }
                    crate::mapping::OnUnknownQos::DefaultLevel => "jobs run on the baseline",
                };
                (
                    check(
                        "mapping",
                        Status::Drain,
                        format!(
                            "no usable mapping: {e}; no last-known-good copy: no level is granted \
                             and {jobs} until a valid mapping is installed (`qoslane validate`, \
                             then `qoslane sync`)"
                        ),
                    ),
                    None,
                )
            }
        }
    }
}

/// Each state directory that exists must be root's, mode 0755.
fn state_dir_checks(paths: &Paths) -> Vec<Check> {
    let mut checks = Vec::new();
    for dir in [&paths.run_dir, &paths.lib_dir] {
        if dir.exists() {
            checks.push(match fsutil::check_dir(paths, dir) {
                Ok(()) => check("state", Status::Ok, format!("{} ok", dir.display())),
                Err(e) => check(
                    "state",
                    Status::Drain,
                    format!("{e}: make it a directory of root's, mode 0755"),
                ),
            });
        }
    }
    checks
}

/// An interrupted transaction is rolled back here (taking the lock does
/// it, and audits it); one that cannot be is a reason to drain. A lock held
/// by a transaction far past any deadline is reported (see
/// [`LOCK_STUCK_WARN`]), with how long it has been held.
fn journal_check(s: &mut Session<'_>) -> (Check, Option<u64>) {
    let c = match s.node_within(LOCK_WAIT) {
        Ok(Some(())) => check(
            "journal",
            Status::Ok,
            "rolled back an interrupted transaction",
        ),
        Ok(None) => check("journal", Status::Ok, "none pending"),
        Err(Error::LockTimeout { .. }) => return lock_held(s.paths),
        Err(e) => check(
            "journal",
            Status::Drain,
            format!(
                "an interrupted transaction cannot be rolled back: {}; fix the cause and run \
                 `qoslane recover`",
                e.with_causes()
            ),
        ),
    };
    (c, Some(0))
}

/// The node lock is held by another run: its journal (written under the
/// lock when its transaction began) says who and since when. Held past
/// [`LOCK_STUCK_WARN`] it is a warning, past [`LOCK_STUCK_DRAIN`] a drain;
/// also how long, for `qoslane_node_lock_held_seconds`.
fn lock_held(paths: &Paths) -> (Check, Option<u64>) {
    let journal = Store { paths }.journal().ok().flatten();
    let Some(j) = journal else {
        return (
            check(
                "journal",
                Status::Ok,
                "the node lock is held by another run outside a transaction; not looked at",
            ),
            None,
        );
    };
    let held = crate::time::parse_rfc3339(&j.started)
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let who = format!(
        "pid {} ({}{}) since {}, {} s",
        j.pid,
        j.event,
        j.job_id
            .map_or_else(String::new, |id| format!(" of job {id}")),
        j.started,
        held.as_secs()
    );
    let status = if held >= LOCK_STUCK_DRAIN {
        Status::Drain
    } else if held >= LOCK_STUCK_WARN {
        Status::Warn
    } else {
        Status::Ok
    };
    let detail = match status {
        Status::Ok => format!("a transaction is in progress (node lock held by {who})"),
        _ => format!(
            "the node lock is held by {who}: far past any run's deadline (a setting write stuck \
             in the kernel?); no job can get or release a level: see `cat /proc/{}/stack`, \
             then fix or reboot",
            j.pid
        ),
    };
    (check("journal", status, detail), Some(held.as_secs()))
}

/// The state files must be readable and trusted: a corrupt or foreign
/// record, baseline or journal stops every change (qoslane will not act
/// on state it cannot trust), so the node must not take jobs.
fn state_files_check(paths: &Paths) -> Option<Check> {
    if !paths.run_dir.is_dir() {
        return None;
    }
    let store = Store { paths };
    // The jobs directory appears with the first job (the fabric cache
    // may have created the run directory before).
    let records = if paths.jobs_dir().exists() {
        store.records().map(|r| r.len())
    } else {
        Ok(0)
    };
    Some(
        match records
            .and_then(|n| store.node_state().map(|_| n))
            .and_then(|n| store.journal().map(|_| n))
        {
            Ok(n) => check(
                "state",
                Status::Ok,
                format!("{n} job record(s), baseline and journal readable"),
            ),
            Err(e) => check(
                "state",
                Status::Drain,
                format!("{e}: qoslane will not act on it; inspect, then remove or restore it"),
            ),
        },
    )
}

/// Prints the checks: JSON, or the first line Slurm shows and one line per
/// check that is not ok.
fn print_checks(checks: &[Check], drain: Option<&Check>, warnings: usize, as_json: bool) {
    let mut out = std::io::stdout().lock();
    if as_json {
        let v = json!({
            "healthy": drain.is_none(),
            "warnings": warnings,
            "checks": checks.iter().map(|c| json!({
                "check": c.name,
                "ok": c.status != Status::Drain,
                "status": c.status.as_str(),
                "detail": c.detail,
            })).collect::<Vec<_>>(),
        });
        let _ = writeln!(out, "{v}");
    } else {
        // The first line is what Slurm shows (hookrun's drain reason).
        let first = match (drain, warnings) {
            (Some(d), _) => format!("qoslane: {}", one_line(&d.detail)),
            (None, 0) => "qoslane: ok".to_owned(),
            (None, n) => format!(
                "qoslane: ok, {n} warning{}: {}",
                if n == 1 { "" } else { "s" },
                checks
                    .iter()
                    .find(|c| c.status == Status::Warn)
                    .map(|c| one_line(&c.detail))
                    .unwrap_or_default()
            ),
        };
        let _ = writeln!(out, "{first}");
        for c in checks.iter().filter(|c| c.status != Status::Ok) {
            let _ = writeln!(
                out,
                "qoslane: {}: {}: {}",
                c.status.as_str(),
                c.name,
                one_line(&c.detail)
            );
        }
    }
}

/// Records of jobs Slurm no longer has on this node (an Epilog killed
/// mid-way, a node rebooted under a job): their levels are released through
/// the transaction, so the settings follow the jobs that remain, and the
/// report (audit) lists the changes. Only under the lock health took, and
/// only when Slurm answered: any doubt removes nothing.
fn stale_records(s: &mut Session<'_>, r: &mut Report) -> Option<Check> {
    let paths = s.paths;
    let deadline = s.deadline.half();
    let node = s.store()?;
    let records = node.records().ok()?;
    if records.is_empty() {
        return None;
    }
    let name = crate::audit::node_name();
    let on_node = match crate::job::on_node::jobs_on_node(&paths.squeue, &name, &deadline) {
        Ok(ids) => ids,
        Err(e) => {
            return Some(check(
                "records",
                Status::Ok,
                format!(
                    "{} job record(s); not compared with Slurm ({e})",
                    records.len()
                ),
            ));
        }
    };
    let stale: Vec<crate::job::JobId> = records
        .keys()
        .filter(|id| !on_node.contains(id))
        .copied()
        .collect();
    if stale.is_empty() {
        return Some(check(
            "records",
            Status::Ok,
            format!("{} job record(s), every job on node {name}", records.len()),
        ));
    }
    let ops: Vec<RecordOp> = stale.iter().map(|id| RecordOp::Remove(*id)).collect();
    let list = stale
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let node = s.node().ok()?;
    Some(match node.transact("health", None, &ops, &|| Ok(())) {
        Ok(c) => {
            crate::run::session::committed(r, c);
            r.notes.push(format!(
                "released the level of job(s) {list}: Slurm no longer has them on node {name} \
                 (their Epilog did not finish)"
            ));
            check(
                "records",
                Status::Ok,
                format!("released stale record(s) of job(s) {list} (not on node {name} any more)"),
            )
        }
        Err(f) => check(
            "records",
            Status::Drain,
            format!(
                "stale record(s) of job(s) {list} could not be released: {}; run `qoslane \
                 recover`, then `qoslane health`",
                f.into_error().with_causes()
            ),
        ),
    })
}

/// The ports' checks: a port that is not ACTIVE drains when `devices:`
/// lists it (the admin said it carries the levels) or when no selected port
/// is ACTIVE (no level has a carrier); with `devices: []` a down port beside
/// an ACTIVE one carries nothing and is a note.
fn port_checks(j: &policy::Judgement, m: &Mapping) -> Vec<Check> {
    let Some(assessment) = &j.assessment else {
        return Vec::new();
    };
    let needed = !m.devices.is_empty() || assessment.no_active_port();
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
                    Status::Drain,
                    format!("{what}: check the cable, the switch port and the SM"),
                )
            } else {
                check(
                    "port",
                    Status::Ok,
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
fn grant_checks(record: &grant::Record, m: &Mapping) -> Vec<Check> {
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
            Status::Warn,
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
            Status::Ok,
            format!(
                "every level granted ({} level(s); {what})",
                m.levels().len()
            ),
        ));
    }
    out
}

fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}
