//! The admin's read-only views, against the real binary under temp roots:
//! `qoslane status` (systemctl-like text, `--json` schema 1, exit 0 in order
//! / 1 needs attention, creates nothing) and `qoslane log` (the audit read
//! back across logrotate's files, filtered, `--json` byte for byte). The
//! human forms are insta snapshots with times, ages and the temp root
//! redacted.

use crate::util::Within as _;
use std::path::Path;

use crate::util::{self, BASE_RMEM, BASE_TOS, Node, RMEM, TOS, ok, stderr};

/// Every path under `root`, sorted (directories too).
fn tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).expect("list") {
            let p = e.expect("entry").path();
            out.push(
                p.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string(),
            );
            if p.is_dir() && !p.is_symlink() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// The text with what differs between runs replaced: the temp root,
/// RFC 3339 times (padded to their width), probe ages.
fn redact(n: &Node, text: &str) -> String {
    let text = text.replace(&n.root().display().to_string(), "<root>");
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    let digit = |j: usize| b.get(j).is_some_and(u8::is_ascii_digit);
    let is_time = |j: usize| {
        (0..19).all(|k| match k {
            4 | 7 => b.get(j + k) == Some(&b'-'),
            10 => b.get(j + k) == Some(&b'T'),
            13 | 16 => b.get(j + k) == Some(&b':'),
            _ => digit(j + k),
        })
    };
    while i < b.len() {
        if is_time(i) {
            let mut j = i + 19;
            if b.get(j) == Some(&b'.') {
                j += 1;
                while digit(j) {
                    j += 1;
                }
            }
            if b.get(j) == Some(&b'Z') {
                j += 1;
            }
            // In a table column (a space follows): as wide as the time, so
            // the columns stay aligned.
            let w = if b.get(j) == Some(&b' ') { j - i } else { 0 };
            out.push_str(&format!("{:<w$}", "<TIME>"));
            i = j;
        } else if text[i..].starts_with("probed ") && digit(i + 7) {
            out.push_str("probed <N>");
            i += 7;
            while digit(i) {
                i += 1;
            }
        } else {
            let c = text[i..].chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// An insta snapshot in tests/snapshots/ (beside this binary's directory).
fn snap(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

/// The example mapping under `fabric_check: enforce` on a node whose HCA
/// (mlx5-quirks) the fake smpquery answers with the identity SL2VL.
fn fabric_node() -> Node {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_hca("qos-identity");
    n
}

#[test]
fn regression_status_is_read_only_on_a_node_where_no_job_ran() {
    // It used to create /run/qoslane, its jobs/ and /var/lib/qoslane.
    let n = Node::new();
    let before = tree(n.root());
    for args in [&["status"][..], &["status", "--json"][..]] {
        let out = n.run(args, &[]);
        ok(&out);
        assert_eq!(tree(n.root()), before, "{args:?} created something");
    }
    snap(
        "status_fresh_node",
        &redact(&n, &stdout(&n.run(&["status"], &[]))),
    );
}

#[test]
fn status_shows_what_is_in_force_the_fabric_per_level_and_who_holds_what() {
    let n = fabric_node();
    ok(&n.prolog(120, "high"));
    ok(&n.prolog(121, "mission-critical"));
    ok(&n.run(&["health"], &[]));
    let before = tree(n.root());
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(tree(n.root()), before, "status wrote nothing");
    let text = stdout(&out);
    assert!(!text.contains('"'), "no JSON quoting:\n{text}");
    for debug in ["Squeue", "Scontrol", "Some(", "Carried", "Enforce"] {
        assert!(!text.contains(debug), "no Debug form {debug}:\n{text}");
    }
    // The QoS source and the lane verdicts are spelled as the audit does.
    let a = n.last_audit("prolog");
    assert!(
        text.contains(&format!(
            "mission-critical ({})",
            a["qos_source"].as_str().unwrap()
        )),
        "{text}"
    );
    snap("status_two_jobs_enforce", &redact(&n, &text));
}

#[test]
fn status_json_is_schema_1_with_the_same_facts() {
    let n = fabric_node();
    ok(&n.prolog(120, "high"));
    let out = n.run(&["status", "--json"], &[]);
    ok(&out);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["schema"], 1);
    assert_eq!(st["state"], "ok");
    assert_eq!(st["attention"], serde_json::json!([]));
    let keys: Vec<&str> = st.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "attention",
            "audit",
            "counters",
            "fabric",
            "grants",
            "health",
            "jobs",
            "journal",
            "last_problems",
            "mapping",
            "schema",
            "settings",
            "settings_gone",
            "state",
            "state_errors"
        ],
        "the documented top-level keys (docs/admin-guide.md §8)"
    );
    // The Omnia role's contract (tasks/node.yml): it syncs when the file's
    // hash is not last-known-good's.
    assert_eq!(
        st["mapping"]["sha256"],
        st["mapping"]["last_known_good_sha256"]
    );
    assert!(st["mapping"]["sha256"].is_string());
    let a = n.last_audit("prolog");
    let job = &st["jobs"][0];
    for k in [
        "job_id",
        "qos",
        "qos_source",
        "level",
        "service_level",
        "virtual_lane",
    ] {
        assert_eq!(job[k], a[k], "{k}: status and audit agree");
    }
    assert_eq!(st["mapping"]["in_force"]["source"], "file");
    assert_eq!(st["mapping"]["in_force"]["sha256"], a["mapping_sha256"]);
    assert!(st["mapping"]["in_force"]["since"].is_string());
    assert_eq!(st["fabric"]["check"], "enforce");
    let port = &st["fabric"]["ports"][0];
    let high = port["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["level"] == "high")
        .unwrap();
    assert_eq!(
        (high["vl"].as_u64(), high["lane"].as_str()),
        (Some(2), Some("carried"))
    );
    let tos = st["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == TOS)
        .unwrap();
    assert_eq!(
        (
            tos["current"].as_str(),
            tos["baseline"].as_str(),
            tos["in_sync"].as_bool()
        ),
        (Some("74"), Some(BASE_TOS), Some(true))
    );
}

#[test]
fn status_says_what_needs_attention_and_exits_1() {
    let n = fabric_node();
    ok(&n.prolog(120, "high"));
    // A setting changed behind qoslane's back.
    n.set(RMEM, BASE_RMEM);
    // A newer mapping the fabric does not carry (high on VL 5): rejected.
    n.write_mapping(
        &util::MAPPING
            .replace("fabric_check: off", "fabric_check: enforce")
            .replace(
                "service_level: 2\n    virtual_lane: 2",
                "service_level: 2\n    virtual_lane: 5",
            ),
    );
    let out = n.run(&["sync"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    n.set(RMEM, BASE_RMEM);
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("× qoslane: 1 job holding a level"),
        "{text}"
    );
    assert!(text.contains("Rejected: sha256 "), "{text}");
    assert!(
        text.contains("SL 2 -> VL 2, want VL 5"),
        "the first error:\n{text}"
    );
    assert!(
        text.contains("In force: the last-known-good copy"),
        "{text}"
    );
    assert!(
        text.contains("settings out of sync: /proc/sys/net/core/rmem_max"),
        "{text}"
    );
    assert!(
        text.contains("sync: failed: "),
        "the refusal among the problems:\n{text}"
    );
    let st: serde_json::Value =
        serde_json::from_slice(&n.run(&["status", "--json"], &[]).stdout).unwrap();
    assert_eq!(st["state"], "attention");
    assert_ne!(
        st["mapping"]["sha256"],
        st["mapping"]["last_known_good_sha256"]
    );
    assert_eq!(st["mapping"]["in_force"]["source"], "last_known_good");
    assert!(
        st["mapping"]["rejected"]["why"]
            .as_str()
            .unwrap()
            .contains("want VL 5")
    );

    // Unusable state is shown, not fatal.
    std::fs::write(n.path("/run/qoslane/node.json"), "{not json").unwrap();
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("State: UNUSABLE: node state: "),
        "{}",
        stdout(&out)
    );
}

#[cfg(feature = "fault-injection")]
#[test]
fn status_shows_a_pending_journal() {
    let n = Node::new();
    let out = n
        .cmd(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", "7"),
                ("FAKE_QOS", "high"),
                ("QOSLANE_FAULT", "journaled"),
            ],
        )
        .output_within();
    assert!(out.status.code().is_none(), "killed at the fault point");
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("Journal: PENDING: an interrupted prolog (pid "),
        "{text}"
    );
    assert!(n.journal_exists(), "status does not recover");
}

#[test]
fn log_answers_which_job_got_which_sl_and_why_across_rotation() {
    let n = Node::new();
    ok(&n.prolog(130, "high"));
    ok(&n.epilog(130));
    // logrotate (create, compress, delaycompress), twice: the oldest file
    // compressed by the real gzip, the previous one plain.
    let dir = n.path("/var/log/qoslane");
    std::fs::rename(dir.join("audit.jsonl"), dir.join("audit.jsonl.1")).unwrap();
    ok(&n.prolog(131, "low"));
    std::fs::rename(dir.join("audit.jsonl.1"), dir.join("audit.jsonl.2")).unwrap();
    let gz = std::process::Command::new("gzip")
        .arg(dir.join("audit.jsonl.2"))
        .status_within();
    assert!(gz.success());
    std::fs::rename(dir.join("audit.jsonl"), dir.join("audit.jsonl.1")).unwrap();
    let _ = n.prolog(132, "high");
    n.write_mapping("levels: [");
    let _ = n.prolog(133, "high");
    let mut rotated = std::fs::read_to_string(dir.join("audit.jsonl.1")).unwrap();
    rotated.push_str("garbage\n");
    std::fs::write(dir.join("audit.jsonl.1"), rotated).unwrap();

    let out = n.run(&["log", "--job", "130"], &[]);
    ok(&out);
    assert!(
        stderr(&out).contains("audit.jsonl.1:2: not an audit entry, skipped: garbage"),
        "{}",
        stderr(&out)
    );
    snap("log_job_130", &redact(&n, &stdout(&out)));
    snap("log_all", &redact(&n, &stdout(&n.run(&["log"], &[]))));

    // --json: the lines byte for byte as the audit wrote them, oldest first.
    let out = n.run(&["log", "--json", "--event", "prolog"], &[]);
    ok(&out);
    let mut written = String::new();
    for f in ["audit.jsonl.1", "audit.jsonl"] {
        written.push_str(&std::fs::read_to_string(dir.join(f)).unwrap());
    }
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for l in &lines[1..] {
        assert!(written.lines().any(|w| w == *l), "not as written: {l}");
    }
    let jobs: Vec<u64> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["job_id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(jobs, [130, 131, 132, 133], "oldest first, the .gz included");

    let count = |args: &[&str]| {
        let out = n.run(args, &[]);
        ok(&out);
        stdout(&out).lines().count()
    };
    assert_eq!(
        count(&["log", "--json", "--outcome", "failed"]),
        1,
        "the unusable mapping"
    );
    assert_eq!(
        count(&["log", "--json", "--since", "1h", "--qos", "low"]),
        1
    );
    assert_eq!(
        count(&["log", "--json", "--until", "2000-01-01T00:00:00+01:00"]),
        0
    );
    assert_eq!(count(&["log", "--json", "--limit", "2"]), 2);
    assert_eq!(
        count(&["log", "--json", "--limit", "0"]),
        count(&["log", "--json", "--limit", "1000"])
    );

    let out = n.run(&["log", "--since", "last tuesday"], &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        stderr(&out).contains("--since `last tuesday`: want RFC 3339"),
        "{}",
        stderr(&out)
    );
    let out = n.run(&["log", "--event", "prologue"], &[]);
    assert_eq!(out.status.code(), Some(64), "events are a closed list");
}

#[test]
fn log_without_an_audit_log_says_so() {
    let n = Node::new();
    let before = tree(n.root());
    let out = n.run(&["log"], &[]);
    assert_eq!(out.status.code(), Some(66), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no audit log to read at "),
        "{}",
        stderr(&out)
    );
    assert_eq!(tree(n.root()), before, "log creates nothing");
}

/// An audit entry with every field set, none to its default.
fn every_field_set() -> qoslane::audit::Entry {
    use qoslane::audit::Entry;
    use qoslane::fabric::FabricVerdict;
    use qoslane::job::JobId;
    use qoslane::job::qos::QosSource;
    use qoslane::report::Event;
    use qoslane::report::Outcome;
    use qoslane::state::Change;

    Entry {
        time: "2026-12-01T10:00:00.123Z".into(),
        node: "cn017".into(),
        event: Event::Prolog,
        job_id: Some(JobId::parse("42").expect("a job id")),
        user: Some("alice".into()),
        qos: Some("high".into()),
        qos_source: Some(QosSource::Squeue),
        level: Some("high".into()),
        service_level: Some(2),
        virtual_lane: Some(3),
        changes: vec![Change {
            path: "/proc/sys/net/core/rmem_max".into(),
            before: "212992".into(),
            after: "8388608".into(),
        }],
        fabric: FabricVerdict::CouldNotRun {
            policy: "enforce",
            error: "smpquery timed out".into(),
        },
        outcome: Outcome::RolledBack,
        error: Some("failed to verify".into()),
        duration_ms: 3.5,
        mapping_sha256: Some("7512abc".into()),
        settings_gone: vec!["/sys/gone".into()],
        notes: vec!["fell back to the default level".into()],
        evidence: Some(qoslane::fabric::pma::CounterEvidence {
            alone: true,
            sl: Some(3),
            ports: vec![qoslane::fabric::pma::PortCounterEvidence {
                device: "mlx5_0".into(),
                port: 1,
                sent_bytes_per_sl: qoslane::fabric::pma::CounterChange::Moved(
                    [(0, qoslane::fabric::pma::Delta::Count(4096))].into(),
                ),
                received_bytes_per_sl: qoslane::fabric::pma::CounterChange::Unsupported,
                xmit_wait_ticks_per_vl: qoslane::fabric::pma::CounterChange::Moved(
                    [(3, qoslane::fabric::pma::Delta::Saturated)].into(),
                ),
                read_by: Some("in-process".into()),
                said: None,
            }],
            off_level_bytes: Some(4096),
            sm_traffic_sls: vec![1],
            sm_traffic_bytes: Some(0),
        }),
        released_jobs: vec![JobId::parse("41").expect("a job id")],
    }
}

/// The audit line's contract (docs/admin-guide.md §7) holds between its
/// writer and its reader, field for field: an entry made with the writer's
/// `audit::Entry` and appended as a run appends it reads back as the
/// reader's `LoggedEntry` with every value. Both sides are destructured
/// without `..`, so a field added to either does not compile until the
/// other has it, and a field renamed on one side fails here.
#[test]
fn an_entry_written_by_the_writer_reads_back_field_for_field() {
    use qoslane::audit::read::{LoggedEntry, tail};
    use qoslane::audit::{Entry, append};
    use qoslane::paths::{Overrides, Paths};

    let d = tempfile::tempdir().unwrap();
    let p = Paths::new(Overrides {
        root: Some(d.path().to_owned()),
        audit_log: Some(d.path().join("audit.jsonl")),
        ..Overrides::default()
    });
    let written = every_field_set();
    append(&p, &written).unwrap();
    let found = tail(&p, 1 << 16, 10);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let [line] = &found.entries[..] else {
        panic!("one entry: {:?}", found.entries)
    };
    let Entry {
        time,
        node,
        event,
        job_id,
        user,
        qos,
        qos_source,
        level,
        service_level,
        virtual_lane,
        changes,
        fabric,
        outcome,
        error,
        duration_ms,
        mapping_sha256,
        settings_gone,
        notes,
        evidence,
        released_jobs,
    } = written;
    let LoggedEntry {
        time: r_time,
        node: r_node,
        event: r_event,
        job_id: r_job_id,
        user: r_user,
        qos: r_qos,
        qos_source: r_qos_source,
        level: r_level,
        service_level: r_service_level,
        virtual_lane: r_virtual_lane,
        changes: r_changes,
        fabric: r_fabric,
        outcome: r_outcome,
        error: r_error,
        duration_ms: r_duration_ms,
        mapping_sha256: r_mapping_sha256,
        settings_gone: r_settings_gone,
        notes: r_notes,
        evidence: r_evidence,
        released_jobs: r_released_jobs,
    } = line.entry.clone();
    assert_eq!(r_time, time);
    assert_eq!(r_node, node);
    assert_eq!(r_event, event.as_str());
    assert_eq!(r_job_id, job_id.map(|j| u64::from(j.get())));
    assert_eq!(r_user, user);
    assert_eq!(r_qos, qos);
    assert_eq!(r_qos_source, qos_source);
    assert_eq!(r_level, level);
    assert_eq!(r_service_level, service_level);
    assert_eq!(r_virtual_lane, virtual_lane);
    assert_eq!(r_changes, changes);
    assert_eq!(r_fabric, serde_json::to_value(&fabric).unwrap());
    assert_eq!(r_outcome, outcome.as_str());
    assert_eq!(r_error, error);
    assert!((r_duration_ms - duration_ms).abs() < f64::EPSILON);
    assert_eq!(r_mapping_sha256, mapping_sha256);
    assert_eq!(r_settings_gone, settings_gone);
    assert_eq!(r_notes, notes);
    assert_eq!(r_evidence, serde_json::to_value(&evidence).unwrap());
    assert_eq!(
        r_released_jobs,
        released_jobs
            .iter()
            .map(|j| u64::from(j.get()))
            .collect::<Vec<_>>()
    );
}

/// A torn append cut inside a multi-byte character (a user name `jö…`, the
/// file then full) leaves a line that is not UTF-8. The reader stopped at
/// it: `qoslane log` and `status` hid every later entry of the file, and
/// status said "Problems: none". The line is skipped, counted and named now;
/// every later entry is shown, and status needs attention, naming it.
#[test]
fn an_audit_line_torn_inside_a_character_hides_nothing_after_it() {
    use std::io::Write;
    let n = Node::new();
    ok(&n.prolog(140, "high"));
    let log = n.path("/var/log/qoslane/audit.jsonl");
    let torn = b"{\"time\":\"2026-12-01T08:00:00.000Z\",\"event\":\"prolog\",\"user\":\"j\xc3";
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(torn)
        .unwrap();
    ok(&n.epilog(140));
    ok(&n.prolog(141, "low"));
    // A failed run after it: a problem status must show.
    let _ = n.run(&["prolog"], &[]);

    let out = n.run(&["log", "--json"], &[]);
    ok(&out);
    let jobs: Vec<Option<u64>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["job_id"].as_u64())
        .collect();
    assert_eq!(
        jobs,
        [Some(140), Some(140), Some(140), Some(141), None],
        "every entry after the torn line: {}",
        stderr(&out)
    );
    let at = format!("{}:3", log.display());
    let err = stderr(&out);
    assert!(
        err.contains(&format!("log: {at}: not UTF-8 (a torn line?), skipped")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "log: 1 line skipped: {at} (not audit entries: torn or foreign lines; every other \
             line was read)"
        )),
        "{err}"
    );

    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "1 audit line skipped: {at}, not audit entries (a torn append lost a run's entry"
        )),
        "{text}"
    );
    assert!(
        text.contains("prolog: failed: "),
        "the later failure:\n{text}"
    );
    let st: serde_json::Value =
        serde_json::from_slice(&n.run(&["status", "--json"], &[]).stdout).unwrap();
    assert_eq!(st["state"], "attention");
    assert_eq!(st["audit"]["skipped_lines"], 1);
    assert_eq!(st["audit"]["entries_read"], 5);
}
