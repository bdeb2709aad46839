//! `qoslane status`: what the node looks like now, the way `systemctl
//! status` reads: what is in force (and since when), the cached fabric probe
//! judged for every level, which jobs hold which level and SL since when,
//! the settings against their baseline, the last health check, a pending
//! journal, the last problems from the end of the audit log. `--json` gives
//! the same facts as one object (`"schema": 1`, docs/admin-guide.md §8).
//!
//! Read-only: no lock, and it creates or writes nothing (a node where no job
//! ran yet has no state directories; that reads as empty). State it cannot
//! read or trust is shown, not fatal.
//!
//! Exit 0 when the node is in order, 1 when something needs attention (the
//! reasons are listed; the first line starts with `×`).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;

use super::Ctx;
use crate::audit::read as audit_read;
use crate::config::{self, Source};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::check;
use crate::job::qos::QosSource;
use crate::mapping::Mapping;
use crate::paths::Paths;
use crate::settings;
use crate::state::{JobRecord, Store};

/// The JSON form's version: bumped when a key changes meaning or goes.
const SCHEMA: u32 = 1;
/// At most this much of the audit log is read, from its end.
const AUDIT_TAIL_BYTES: u64 = 256 * 1024;
/// Entries looked at for problems and the last health check.
const AUDIT_TAIL_ENTRIES: usize = 500;
/// Problems shown.
const PROBLEMS: usize = 5;

#[derive(Serialize)]
struct Status {
    schema: u32,
    /// `ok` or `attention`.
    state: &'static str,
    attention: Vec<String>,
    mapping: MappingState,
    fabric: FabricState,
    jobs: Vec<HeldLevel>,
    settings: Vec<SettingRow>,
    /// Settings whose file vanished while a job held them.
    settings_gone: Vec<String>,
    health: Option<Health>,
    journal: Option<Journal>,
    /// State files that could not be read or trusted.
    state_errors: Vec<String>,
    last_problems: Vec<Problem>,
    audit: AuditState,
}

/// The mapping, flat where scripts compare (the Omnia role syncs when
/// `sha256` differs from `last_known_good_sha256`).
#[derive(Serialize)]
struct MappingState {
    /// The installed file.
    path: String,
    /// Its content's hash (also when invalid); `None` when unreadable.
    sha256: Option<String>,
    valid: bool,
    /// Its first problem, when invalid.
    error: Option<String>,
    modified: Option<String>,
    last_known_good_sha256: Option<String>,
    /// When the last-known-good copy was written (a run promoted it).
    last_known_good_since: Option<String>,
    in_force: Option<InForce>,
    rejected: Option<config::Rejected>,
}

#[derive(Serialize)]
struct InForce {
    /// `file` or `last_known_good`.
    source: &'static str,
    sha256: String,
    /// When it became last-known-good (a run promoted it); `None` while no
    /// run has used it yet.
    since: Option<String>,
    /// Why the admin's file is not the one in force.
    problem: Option<String>,
}

#[derive(Serialize)]
struct FabricState {
    /// The in-force mapping's `fabric_check`.
    check: Option<&'static str>,
    /// Why the cache could not be used.
    note: Option<String>,
    ports: Vec<PortState>,
}

#[derive(Serialize)]
struct PortState {
    port: String,
    probed_s_ago: u64,
    link_state: String,
    oper_vls: String,
    levels: Vec<LevelOnPort>,
}

#[derive(Serialize)]
struct LevelOnPort {
    level: String,
    service_level: u8,
    vl: u8,
    want_vl: Option<u8>,
    lane: crate::fabric::lane::Lane,
    problem: Option<String>,
}

/// A job record as status shows it (the keys are the audit's).
#[derive(Serialize)]
struct HeldLevel {
    job_id: u64,
    user: Option<String>,
    qos: Option<String>,
    qos_source: QosSource,
    level: String,
    service_level: u8,
    virtual_lane: Option<u8>,
    since: String,
    mapping_sha256: String,
}

#[derive(Serialize)]
struct SettingRow {
    path: String,
    baseline: Option<String>,
    current: Option<String>,
    /// Why the current value could not be read.
    error: Option<String>,
    wanted: String,
    in_sync: bool,
}

#[derive(Serialize)]
struct Health {
    time: String,
    outcome: String,
    error: Option<String>,
}

#[derive(Serialize)]
struct Journal {
    event: String,
    job_id: Option<u64>,
    pid: u32,
    started: String,
}

#[derive(Serialize)]
struct Problem {
    time: String,
    event: String,
    job_id: Option<u64>,
    qos: Option<String>,
    level: Option<String>,
    outcome: String,
    error: Option<String>,
}

#[derive(Serialize)]
struct AuditState {
    path: String,
    /// Entries read from the end of the log (bounded).
    entries_read: usize,
    problems: Vec<String>,
}

pub fn run(ctx: &Ctx, as_json: bool) -> Result<ExitClass> {
    let st = gather(&ctx.paths, &Deadline::after(ctx.timeout));
    let mut out = std::io::stdout().lock();
    let w = |e: std::io::Error| Error::io("write output", "<stdout>")(e);
    if as_json {
        let text = serde_json::to_string_pretty(&st).map_err(|e| Error::Internal(e.to_string()))?;
        writeln!(out, "{text}").map_err(w)?;
    } else {
        out.write_all(human(&st).as_bytes()).map_err(w)?;
    }
    Ok(if st.attention.is_empty() {
        ExitClass::Ok
    } else {
        ExitClass::Failed
    })
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// When a trusted file was last written (`None`: absent or not ours).
fn modified(paths: &Paths, path: &Path) -> Option<String> {
    let o = nodeio::trusted::open(&paths.root, path, nodeio::trusted::Symlink::FollowTrusted)
        .ok()??;
    o.file.metadata().ok()?.modified().ok().map(rfc3339)
}

fn gather(paths: &Paths, deadline: &Deadline) -> Status {
    let mut attention = Vec::new();
    let mut state_errors = Vec::new();
    let store = Store::read_only(paths);
    fn got<T: Default>(errors: &mut Vec<String>, what: &str, r: Result<T>) -> T {
        r.unwrap_or_else(|e| {
            errors.push(format!("{what}: {e}"));
            T::default()
        })
    }
    let records = got(&mut state_errors, "job records", store.records());
    let node = got(&mut state_errors, "node state", store.node_state());
    let journal = got(&mut state_errors, "journal", store.journal());
    if !state_errors.is_empty() {
        attention.push(format!(
            "state that cannot be used: {} (inspect, then remove it; `qoslane health` fails \
             until then)",
            state_errors.join("; ")
        ));
    }

    // The mapping: the admin's file, what a run would use now, last-known-good.
    let (sha256, error) = match config::read_valid(paths, &paths.config) {
        Ok((_, sha, _)) => (Some(sha), None),
        Err(e) => (
            config::read_text(&paths.config)
                .ok()
                .map(|t| config::sha256_hex(t.as_bytes())),
            Some(e.to_string()),
        ),
    };
    let lkg = config::last_known_good_sha(paths);
    let lkg_since = lkg
        .as_ref()
        .and_then(|_| modified(paths, &paths.last_known_good()));
    let rejected = config::rejected(paths).filter(|r| sha256.as_ref() == Some(&r.sha256));
    let (mapping, in_force) = match config::load(paths) {
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
    if let Some(e) = &error
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

    let fabric = fabric_state(paths, mapping.as_ref());
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

    let wants = crate::txn::desired(&crate::state::claims_of(&records), &node.baseline);
    let settings: Vec<SettingRow> = wants
        .iter()
        .map(|(path, want)| {
            let (crate::txn::Want::Set(wanted) | crate::txn::Want::Restore(wanted)) = want;
            let (current, error) = match settings::read(paths, path, deadline) {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let in_sync = current
                .as_deref()
                .is_some_and(|c| settings::same_value(wanted, c));
            SettingRow {
                path: path.clone(),
                baseline: node.baseline.get(path).cloned(),
                current,
                error,
                wanted: wanted.clone(),
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
    let journal = journal.map(|j| Journal {
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

    let tail = audit_read::tail(paths, AUDIT_TAIL_BYTES, AUDIT_TAIL_ENTRIES);
    let text = |e: &serde_json::Value, k: &str| e[k].as_str().map(ToOwned::to_owned);
    let health = tail
        .entries
        .iter()
        .rev()
        .map(|l| &l.entry)
        .find(|e| e["event"] == "health")
        .map(|e| Health {
            time: text(e, "time").unwrap_or_default(),
            outcome: text(e, "outcome").unwrap_or_default(),
            error: text(e, "error"),
        });
    if let Some(h) = health.as_ref().filter(|h| h.outcome == "failed") {
        attention.push(format!(
            "the last health check failed ({}): {}",
            h.time,
            h.error.as_deref().unwrap_or("-")
        ));
    }
    let last_problems: Vec<Problem> = tail
        .entries
        .iter()
        .rev()
        .map(|l| &l.entry)
        .filter(|e| matches!(e["outcome"].as_str(), Some("failed" | "rolled_back")))
        .take(PROBLEMS)
        .map(|e| Problem {
            time: text(e, "time").unwrap_or_default(),
            event: text(e, "event").unwrap_or_default(),
            job_id: e["job_id"].as_u64(),
            qos: text(e, "qos"),
            level: text(e, "level"),
            outcome: text(e, "outcome").unwrap_or_default(),
            error: text(e, "error"),
        })
        .collect();

    Status {
        schema: SCHEMA,
        state: if attention.is_empty() {
            "ok"
        } else {
            "attention"
        },
        attention,
        mapping: MappingState {
            path: paths.config.display().to_string(),
            valid: error.is_none() && sha256.is_some(),
            sha256,
            error,
            modified: modified(paths, &paths.config),
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
            path: paths.audit_log.display().to_string(),
            entries_read: tail.entries.len(),
            problems: tail.problems,
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

/// The cached probe (no SMP query: status only reads), each port judged for
/// every level of the mapping in force by the same rules as a Prolog.
fn fabric_state(paths: &Paths, mapping: Option<&Mapping>) -> FabricState {
    let (cache, note) = crate::fabric::cache::load(paths);
    let now_ms = crate::fabric::cache::now_ms();
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

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// The systemctl-like text: a headline, then one labelled block per topic.
fn human(st: &Status) -> String {
    let mut s = String::new();
    let label = |s: &mut String, l: &str, text: &str| {
        let _ = writeln!(s, "{l:>12}: {text}");
    };
    let more = |s: &mut String, text: &str| {
        let _ = writeln!(s, "{:>12}  {text}", "");
    };
    let m = &st.mapping;
    let _ = writeln!(
        s,
        "{} qoslane: {} job{} holding a level; mapping in force {}{}",
        if st.attention.is_empty() { "●" } else { "×" },
        st.jobs.len(),
        if st.jobs.len() == 1 { "" } else { "s" },
        m.in_force
            .as_ref()
            .map_or_else(|| "none".to_owned(), |f| short(&f.sha256)),
        if st.attention.is_empty() {
            ""
        } else {
            " (needs attention)"
        }
    );
    for (i, a) in st.attention.iter().enumerate() {
        if i == 0 {
            label(&mut s, "Attention", a);
        } else {
            more(&mut s, a);
        }
    }

    let file_state = match (&m.error, &m.sha256) {
        (None, Some(sha)) => format!("valid, sha256 {}", short(sha)),
        (Some(e), _) => format!("INVALID: {e}"),
        (None, None) => "missing".to_owned(),
    };
    let modified = m
        .modified
        .as_ref()
        .map_or_else(String::new, |t| format!(", modified {t}"));
    label(
        &mut s,
        "Mapping",
        &format!("{} ({file_state}{modified})", m.path),
    );
    let in_force = match &m.in_force {
        None => "nothing: no valid mapping and no last-known-good copy".to_owned(),
        Some(i) => {
            let what = match i.source {
                "file" => "the file",
                _ => "the last-known-good copy",
            };
            match &i.since {
                Some(t) => format!("{what}, sha256 {}, since {t}", short(&i.sha256)),
                None => format!(
                    "{what}, sha256 {} (no run has used it yet{})",
                    short(&i.sha256),
                    m.last_known_good_sha256
                        .as_ref()
                        .map_or_else(String::new, |k| format!(
                            "; last known good {}{}",
                            short(k),
                            m.last_known_good_since
                                .as_ref()
                                .map_or_else(String::new, |t| format!(" since {t}"))
                        ))
                ),
            }
        }
    };
    label(&mut s, "In force", &in_force);
    if let Some(r) = &m.rejected {
        label(
            &mut s,
            "Rejected",
            &format!("sha256 {} at {}: {}", short(&r.sha256), r.time, r.why),
        );
    }

    let fab = &st.fabric;
    let check = fab
        .check
        .map_or_else(String::new, |c| format!("fabric_check {c}; "));
    if fab.ports.is_empty() {
        let why = match (&fab.note, fab.check) {
            (Some(n), _) => format!("the cache is unusable: {n}"),
            (None, Some("off")) => "not probed".to_owned(),
            (None, _) => "no probe cached yet (the next Prolog, sync or health probes)".to_owned(),
        };
        label(&mut s, "Fabric", &format!("{check}{why}"));
    }
    for (i, p) in fab.ports.iter().enumerate() {
        let head = format!(
            "{}{} probed {} s ago, link {}, OperVLs {}",
            if i == 0 { check.as_str() } else { "" },
            p.port,
            p.probed_s_ago,
            p.link_state,
            p.oper_vls
        );
        if i == 0 {
            label(&mut s, "Fabric", &head);
        } else {
            more(&mut s, &head);
        }
        let levels: Vec<String> = p
            .levels
            .iter()
            .map(|l| {
                format!(
                    "{} SL {} -> VL {} {}",
                    l.level, l.service_level, l.vl, l.lane
                )
            })
            .collect();
        if !levels.is_empty() {
            more(&mut s, &format!("  {}", levels.join(", ")));
        }
    }

    if st.jobs.is_empty() {
        label(&mut s, "Jobs", "none");
    } else {
        label(
            &mut s,
            "Jobs",
            &format!(
                "{:<10} {:<18} {:>2} {:>2}  {:<26} SINCE",
                "JOB", "LEVEL", "SL", "VL", "QOS (FROM)"
            ),
        );
        for j in &st.jobs {
            let qos = format!("{} ({})", j.qos.as_deref().unwrap_or("-"), j.qos_source);
            let vl = j
                .virtual_lane
                .map_or_else(|| "-".to_owned(), |v| v.to_string());
            more(
                &mut s,
                &format!(
                    "{:<10} {:<18} {:>2} {:>2}  {:<26} {}",
                    j.job_id, j.level, j.service_level, vl, qos, j.since
                ),
            );
        }
    }

    if st.settings.is_empty() {
        label(&mut s, "Settings", "all at baseline (no job changed any)");
    }
    for (i, r) in st.settings.iter().enumerate() {
        let now = match (&r.current, &r.error) {
            (Some(c), _) => c.clone(),
            (None, Some(e)) => format!("unreadable ({e})"),
            (None, None) => "-".to_owned(),
        };
        let line = format!(
            "{}: now {now}, wanted {}, baseline {}{}",
            r.path,
            r.wanted,
            r.baseline.as_deref().unwrap_or("-"),
            if r.in_sync { "" } else { "  OUT OF SYNC" }
        );
        if i == 0 {
            label(&mut s, "Settings", &line);
        } else {
            more(&mut s, &line);
        }
    }
    for g in &st.settings_gone {
        more(
            &mut s,
            &format!("{g}: the file is gone (skipped until it is back)"),
        );
    }

    let health = match &st.health {
        None if st.audit.entries_read == 0 => "none recorded (no audit entries yet)".to_owned(),
        None => format!(
            "no health check in the last {} audit entries",
            st.audit.entries_read
        ),
        Some(h) if h.outcome == "failed" => format!(
            "FAILED at {}: {}",
            h.time,
            h.error.as_deref().unwrap_or("-")
        ),
        Some(h) => format!("ok at {} ({})", h.time, h.outcome),
    };
    label(&mut s, "Health", &health);
    let journal = st.journal.as_ref().map_or_else(
        || "clean".to_owned(),
        |j| {
            format!(
                "PENDING: an interrupted {} (pid {}, started {}): run `qoslane recover`",
                j.event, j.pid, j.started
            )
        },
    );
    label(&mut s, "Journal", &journal);
    for e in &st.state_errors {
        label(&mut s, "State", &format!("UNUSABLE: {e}"));
    }

    if st.audit.entries_read == 0 {
        label(
            &mut s,
            "Problems",
            &format!("none recorded (no audit entries yet in {})", st.audit.path),
        );
    } else if st.last_problems.is_empty() {
        label(
            &mut s,
            "Problems",
            &format!(
                "none in the last {} audit entries ({})",
                st.audit.entries_read, st.audit.path
            ),
        );
    } else {
        label(
            &mut s,
            "Problems",
            &format!("newest first, from {}", st.audit.path),
        );
        for p in &st.last_problems {
            let job = p.job_id.map_or_else(String::new, |j| format!(" job {j}"));
            let qos = p
                .qos
                .as_ref()
                .map_or_else(String::new, |q| format!(" qos {q}"));
            more(
                &mut s,
                &format!(
                    "{} {}{job}{qos}: {}: {}",
                    p.time,
                    p.event,
                    p.outcome,
                    p.error.as_deref().unwrap_or("-")
                ),
            );
        }
        more(
            &mut s,
            "(all of them: `qoslane log --outcome failed --outcome rolled_back`)",
        );
    }
    for p in &st.audit.problems {
        more(&mut s, &format!("audit: {p}"));
    }
    s
}
