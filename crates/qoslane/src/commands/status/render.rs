//! The human form of `qoslane status`, the way `systemctl status` reads: a
//! headline, then one labelled block per topic. Only words: every judgement
//! is already in the [`NodeStatus`] ([`super::judge`]).

use std::fmt::Write as _;

use super::model::{Condition, FabricState, GrantsState, HeldLevel, MappingState, NodeStatus};

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// A block's first line, under its label.
fn label(s: &mut String, l: &str, text: &str) {
    let _ = writeln!(s, "{l:>12}: {text}");
}

/// A block's next line.
fn more(s: &mut String, text: &str) {
    let _ = writeln!(s, "{:>12}  {text}", "");
}

/// The systemctl-like text: a headline, then one labelled block per topic.
pub fn human(st: &NodeStatus) -> String {
    let mut s = String::new();
    headline(&mut s, st);
    mapping(&mut s, &st.mapping);
    fabric(&mut s, &st.fabric);
    grants(&mut s, &st.grants);
    counters(&mut s, &st.counters);
    jobs(&mut s, &st.jobs);
    settings(&mut s, st);
    health(&mut s, st);
    problems(&mut s, st);
    s
}

fn headline(s: &mut String, st: &NodeStatus) {
    let m = &st.mapping;
    let _ = writeln!(
        s,
        "{} qoslane: {} job{} holding a level; mapping in force {}{}",
        if st.state == Condition::Ok {
            "●"
        } else {
            "×"
        },
        st.jobs.len(),
        if st.jobs.len() == 1 { "" } else { "s" },
        m.in_force
            .as_ref()
            .map_or_else(|| "none".to_owned(), |f| short(&f.sha256)),
        if st.state == Condition::Ok {
            ""
        } else {
            " (needs attention)"
        }
    );
    for (i, a) in st.attention.iter().enumerate() {
        if i == 0 {
            label(s, "Attention", a);
        } else {
            more(s, a);
        }
    }
}

fn mapping(s: &mut String, m: &MappingState) {
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
        s,
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
    label(s, "In force", &in_force);
    label(
        s,
        "Installed",
        &m.installed_not_in_force.as_ref().map_or_else(
            || "in force".to_owned(),
            |why| format!("NOT in force: {why}"),
        ),
    );
    if let Some(r) = &m.rejected {
        label(
            s,
            "Rejected",
            &format!("sha256 {} at {}: {}", short(&r.sha256), r.time, r.why),
        );
    }
}

/// Each level's recorded grant, in the grant's words.
fn grants(s: &mut String, g: &GrantsState) {
    let Some(by) = &g.recorded_by else {
        let why = g.error.as_deref().map_or_else(
            || "none recorded for the mapping in force (`qoslane health` records them)".to_owned(),
            |e| format!("UNREADABLE: {e}"),
        );
        label(s, "Grants", &why);
        return;
    };
    let head = match &g.stale {
        None => format!("recorded by {by}"),
        Some(why) => format!("recorded by {by}, STALE: {why}; `qoslane health` decides again"),
    };
    label(s, "Grants", &head);
    for l in &g.levels {
        let first = l.reasons.first().or(l.warnings.first());
        more(
            s,
            &match first {
                Some(why) => format!("{}: {}: {}: {why}", l.level, l.decision.as_str(), l.meaning),
                None => format!("{}: {}", l.level, l.decision.as_str()),
            },
        );
    }
}

/// Each level's newest counter evidence, as the Epilog wrote it.
fn counters(s: &mut String, c: &[super::model::LevelCounters]) {
    for (i, l) in c.iter().enumerate() {
        let job = l.job_id.map_or_else(|| "?".to_owned(), |j| j.to_string());
        let head = format!("{}: job {job}, Epilog {}", l.level, l.time);
        if i == 0 {
            label(s, "Counters", &head);
        } else {
            more(s, &head);
        }
        for line in crate::audit::evidence::evidence_lines(&l.evidence) {
            more(s, &format!("  {line}"));
        }
    }
}

fn fabric(s: &mut String, fab: &FabricState) {
    let check = fab
        .check
        .map_or_else(String::new, |c| format!("fabric_check {c}; "));
    if fab.ports.is_empty() {
        let why = match (&fab.note, fab.check) {
            (Some(n), _) => format!("the cache is unusable: {n}"),
            (None, Some("off")) => "not probed".to_owned(),
            (None, _) => "no probe cached yet (the next Prolog, sync or health probes)".to_owned(),
        };
        label(s, "Fabric", &format!("{check}{why}"));
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
            label(s, "Fabric", &head);
        } else {
            more(s, &head);
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
            more(s, &format!("  {}", levels.join(", ")));
        }
    }
}

fn jobs(s: &mut String, jobs: &[HeldLevel]) {
    if jobs.is_empty() {
        label(s, "Jobs", "none");
    } else {
        label(
            s,
            "Jobs",
            &format!(
                "{:<10} {:<18} {:>2} {:>2}  {:<26} SINCE",
                "JOB", "LEVEL", "SL", "VL", "QOS (FROM)"
            ),
        );
        for j in jobs {
            let qos = format!("{} ({})", j.qos.as_deref().unwrap_or("-"), j.qos_source);
            let vl = j
                .virtual_lane
                .map_or_else(|| "-".to_owned(), |v| v.to_string());
            more(
                s,
                &format!(
                    "{:<10} {:<18} {:>2} {:>2}  {:<26} {}",
                    j.job_id, j.level, j.service_level, vl, qos, j.since
                ),
            );
            if let Some(why) = &j.epilog_failed {
                more(s, &format!("  Epilog FAILED {why}"));
            }
        }
    }
}

fn settings(s: &mut String, st: &NodeStatus) {
    if st.settings.is_empty() {
        label(s, "Settings", "all at baseline (no job changed any)");
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
            label(s, "Settings", &line);
        } else {
            more(s, &line);
        }
    }
    for g in &st.settings_gone {
        more(
            s,
            &format!("{g}: the file is gone (skipped until it is back)"),
        );
    }
}

/// The last health check, the journal, unusable state.
fn health(s: &mut String, st: &NodeStatus) {
    let health = match &st.health {
        None if st.audit.entries_read == 0 => "none recorded (no audit entries yet)".to_owned(),
        None => format!(
            "no health check in the last {} audit entries",
            st.audit.entries_read
        ),
        Some(h) if h.failed => format!(
            "FAILED at {}: {}",
            h.time,
            h.error.as_deref().unwrap_or("-")
        ),
        Some(h) if !h.warnings.is_empty() => format!(
            "WARNINGS at {} ({} warning{}): {}",
            h.time,
            h.warnings.len(),
            if h.warnings.len() == 1 { "" } else { "s" },
            h.warnings[0]
        ),
        Some(h) => format!("ok at {} ({})", h.time, h.outcome),
    };
    label(s, "Health", &health);
    if let Some(h) = &st.health {
        for w in h.warnings.iter().skip(1) {
            more(s, w);
        }
    }
    let journal = st.journal.as_ref().map_or_else(
        || "clean".to_owned(),
        |j| {
            format!(
                "PENDING: an interrupted {} (pid {}, started {}): run `qoslane recover`",
                j.event, j.pid, j.started
            )
        },
    );
    label(s, "Journal", &journal);
    for e in &st.state_errors {
        label(s, "State", &format!("UNUSABLE: {e}"));
    }
}

/// `; N lines skipped` when lines of the tail were not audit entries: the
/// entries read may not be all there were.
fn skipped_note(st: &NodeStatus) -> String {
    match st.audit.skipped_lines {
        0 => String::new(),
        1 => "; 1 line skipped".to_owned(),
        n => format!("; {n} lines skipped"),
    }
}

fn problems(s: &mut String, st: &NodeStatus) {
    if st.audit.entries_read == 0 {
        label(
            s,
            "Problems",
            &format!("none recorded (no audit entries yet in {})", st.audit.path),
        );
    } else if st.last_problems.is_empty() {
        label(
            s,
            "Problems",
            &format!(
                "none in the last {} audit entries ({}){}",
                st.audit.entries_read,
                st.audit.path,
                skipped_note(st)
            ),
        );
    } else {
        label(
            s,
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
                s,
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
            s,
            "(all of them: `qoslane log --outcome failed --outcome rolled_back`)",
        );
    }
    for p in &st.audit.problems {
        more(s, &format!("audit: {p}"));
    }
}
