//! The fabric audit reaches the grants (issue 34, item 4): a verdict file
//! (`qoslane fabric audit --verdict`, here written as the audit writes it)
//! naming this node's port loses the level in `health`'s grant, the
//! placement sync follows, a Prolog obeys the recorded scope, a newer good
//! verdict gives the level back; a stale, other mapping's, unreadable or
//! hung verdict is a warning, never a refusal or a drain. The audit writing
//! it on the real multi-switch fabric: `fabric/path.rs`.
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::{self, Node, stderr};

const NODE: &str = "n7";
/// The fixture HCA's (`mlx5-quirks`) node GUID and port.
const GUID: &str = "0x0a7fbc1245efd23b";
const VERDICT: &str = "/shared/qoslane/fabric-verdict.json";
const LINE: &str =
    "fabric path: spine1 port 2 -> leaf2: SL 3 -> VL 15 (dropped: VL 15 is the management lane)";

fn node() -> Node {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_hca("qos-identity");
    n
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(n: &Node, args: &[&str], extra: &[(&str, &str)]) -> std::process::Output {
    let smpquery = n.fake_smpquery().display().to_string();
    let scontrol = n.fake_scontrol(&[]).display().to_string();
    let verdict = n.path(VERDICT).display().to_string();
    let mut env = vec![
        ("QOSLANE_SMPQUERY", smpquery.as_str()),
        ("QOSLANE_SCONTROL", scontrol.as_str()),
        ("QOSLANE_FABRIC_VERDICT", verdict.as_str()),
        ("SLURMD_NODENAME", NODE),
    ];
    env.extend_from_slice(extra);
    n.run(args, &env)
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The mapping in force's sha256, as the first `health` recorded it.
fn sha(n: &Node) -> String {
    let g: serde_json::Value = serde_json::from_str(&n.read("/run/qoslane/grants.json")).unwrap();
    g["mapping_sha256"].as_str().unwrap().to_owned()
}

/// A verdict as `fabric audit --verdict` writes it: made `age_ms` ago, of
/// `sha`, this node's port losing mission-critical when `lost`.
fn verdict(sha: &str, age_ms: u64, lost: bool) -> String {
    let me = serde_json::json!({"guid": GUID, "port": 1, "node": "n7 HCA-1"});
    let other = serde_json::json!({"guid": "0x0000000000100001", "port": 1, "node": "node1 HCA-1"});
    let losses = if lost {
        serde_json::json!([{"guid": GUID, "port": 1, "node": "n7 HCA-1", "lines": [LINE]}])
    } else {
        serde_json::json!([])
    };
    let level = |name: &str, sl: u8, lost: serde_json::Value| serde_json::json!({"level": name, "sl": sl, "lost": lost, "unread": []});
    let v = serde_json::json!({
        "version": 1,
        "made": "2026-12-06T05:00:00Z",
        "made_ms": now_ms() - age_ms,
        "host": "sm1",
        "mapping_sha256": sha,
        "hcas": [other, me],
        "levels": [
            level("mission-critical", 3, losses),
            level("high", 2, serde_json::json!([])),
            level("normal", 0, serde_json::json!([])),
            level("low", 1, serde_json::json!([])),
        ],
    });
    format!("{v:#}\n")
}

fn grant(n: &Node, level: &str) -> serde_json::Value {
    let g: serde_json::Value = serde_json::from_str(&n.read("/run/qoslane/grants.json")).unwrap();
    g["grants"][level].clone()
}

#[test]
fn a_verdict_naming_this_node_refuses_the_level_and_a_good_one_gives_it_back() {
    let n = node();
    // No verdict yet: unread, a warning; the level stays granted.
    let out = run(&n, &["health"], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let g = grant(&n, "mission-critical");
    assert_eq!(g["decision"], "granted_with_warnings", "{g}");
    assert!(
        g["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("fabric path not checked: the fabric verdict could not be read:"),
        "{g}"
    );
    let sha = sha(&n);
    assert!(
        n.scontrol_calls()
            .last()
            .unwrap()
            .contains("ActiveFeatures=qoslane,qoslane_mission-critical"),
        "{:?}",
        n.scontrol_calls()
    );

    // The audit finds spine1 dropping SL 3 toward this node's leaf.
    n.write(VERDICT, &verdict(&sha, 60_000, true));
    let out = run(&n, &["health"], &[]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning, never a drain: {text}"
    );
    assert!(text.contains(LINE), "{text}");
    let g = grant(&n, "mission-critical");
    assert_eq!(g["decision"], "refused", "{g}");
    assert_eq!(g["reasons"][0]["scope"], "fabric_path", "{g}");
    assert_eq!(g["reasons"][0]["line"], LINE, "{g}");
    assert!(g["scopes"].to_string().contains("fabric_path"), "{g}");
    assert_eq!(
        grant(&n, "high")["decision"],
        "granted",
        "other levels untouched"
    );
    // Placement follows: the level's feature withdrawn, once.
    let calls = n.scontrol_calls();
    assert_eq!(
        calls.last().unwrap(),
        &format!("update NodeName={NODE} ActiveFeatures=qoslane"),
        "{calls:?}"
    );
    // `explain --fabric` says what a Prolog would decide: refused, the line.
    let out = run(
        &n,
        &["explain", "--qos", "mission-critical", "--fabric"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains(LINE), "{}", stdout(&out));
    // A Prolog obeys the recorded scope (it never reads the shared file:
    // the file is gone, the refusal stands).
    std::fs::remove_file(n.path(VERDICT)).unwrap();
    let out = n.prolog(1, "mission-critical");
    assert!(!out.status.success(), "refused: {}", stderr(&out));
    assert!(stderr(&out).contains(LINE), "{}", stderr(&out));
    util::ok(&n.prolog(2, "high"));

    // The next good audit gives it back.
    n.write(VERDICT, &verdict(&sha, 1_000, false));
    let out = run(&n, &["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(grant(&n, "mission-critical")["decision"], "granted");
    assert_eq!(
        n.scontrol_calls().last().unwrap(),
        &format!("update NodeName={NODE} ActiveFeatures=qoslane,qoslane_mission-critical")
    );
    util::ok(&n.prolog(3, "mission-critical"));
}

#[test]
fn a_stale_or_other_mappings_verdict_is_ignored_with_a_warning() {
    let n = node();
    run(&n, &["health"], &[]);
    let sha = sha(&n);
    for (text, why) in [
        (
            verdict(&sha, 3_700_000, true),
            "s old (more than 3600 s): ignored",
        ),
        (
            verdict("0123456789abcdef", 1_000, true),
            "not of the one in force",
        ),
    ] {
        n.write(VERDICT, &text);
        let out = run(&n, &["health"], &[]);
        let said = stdout(&out);
        assert_eq!(out.status.code(), Some(0), "{said}");
        let g = grant(&n, "mission-critical");
        assert_eq!(g["decision"], "granted_with_warnings", "{g}");
        assert!(g["warnings"].to_string().contains(why), "{g}");
        assert!(said.contains(why), "health says it: {said}");
        let status = n.run(&["status"], &[]);
        assert!(
            stdout(&status).contains(why),
            "status says it: {}",
            stdout(&status)
        );
    }
    // The site's bound, shorter: a one-minute-old verdict is stale.
    n.write(VERDICT, &verdict(&sha, 60_000, true));
    run(&n, &["health"], &[("QOSLANE_FABRIC_VERDICT_MAX_AGE", "30")]);
    assert!(
        grant(&n, "mission-critical")["warnings"]
            .to_string()
            .contains("(more than 30 s): ignored")
    );
    // A bound that is not a number: said, and the default (1 h) stands.
    let out = run(&n, &["health"], &[("QOSLANE_FABRIC_VERDICT_MAX_AGE", "1h")]);
    assert!(
        stderr(&out).contains("QOSLANE_FABRIC_VERDICT_MAX_AGE=1h: not a number of seconds"),
        "{}",
        stderr(&out)
    );
    assert_eq!(grant(&n, "mission-critical")["decision"], "refused");
}

#[test]
fn an_unreadable_verdict_is_unread_not_a_refusal() {
    let n = node();
    run(&n, &["health"], &[]);
    // Not JSON.
    n.write(VERDICT, "not json\n");
    let out = run(&n, &["health"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let g = grant(&n, "mission-critical");
    assert_eq!(g["decision"], "granted_with_warnings", "{g}");
    assert!(
        g["warnings"]
            .to_string()
            .contains("is not a fabric verdict"),
        "{g}"
    );
    // Writable by others: not trusted, unread.
    let sha = sha(&n);
    n.write(VERDICT, &verdict(&sha, 1_000, true));
    let f = n.path(VERDICT);
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    run(&n, &["health"], &[]);
    assert_eq!(
        grant(&n, "mission-critical")["decision"],
        "granted_with_warnings"
    );
}

/// A read that hangs (a shared filesystem gone): the run ends in time, the
/// level is not lost, the node not drained.
#[cfg(feature = "fault-injection")]
#[test]
fn a_hung_verdict_read_ends_in_time_and_costs_no_level() {
    let n = node();
    run(&n, &["health"], &[]);
    let sha = sha(&n);
    n.write(VERDICT, &verdict(&sha, 1_000, true));
    let hold = tempfile::tempdir().unwrap();
    let fault = format!("hold:fabric-verdict-read:{}", hold.path().display());
    let out = run(
        &n,
        &["health"],
        &[
            ("QOSLANE_FAULT", fault.as_str()),
            ("QOSLANE_TIMEOUT_MS", "2000"),
        ],
    );
    assert!(hold.path().join("held").exists(), "the read was held");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let g = grant(&n, "mission-critical");
    assert_eq!(g["decision"], "granted_with_warnings", "{g}");
    assert!(
        g["warnings"].to_string().contains("no answer within"),
        "{g}"
    );
}

/// A credit loop the audit found on a level's SL (the deadlock check)
/// costs every node of the fabric that level, the loop named.
#[test]
fn a_credit_loop_in_the_verdict_refuses_the_level_on_every_node() {
    let n = node();
    run(&n, &["health"], &[]);
    let sha = sha(&n);
    let mut v: serde_json::Value = serde_json::from_str(&verdict(&sha, 1_000, false)).unwrap();
    let cycle = "credit loop: sw1 port 2 -> sw2 port 2 -> sw3 port 2 -> sw1 on VL 0";
    v["levels"][0]["credit_loop"] = serde_json::json!(cycle);
    n.write(VERDICT, &format!("{v:#}\n"));
    run(&n, &["health"], &[]);
    let g = grant(&n, "mission-critical");
    assert_eq!(g["decision"], "refused", "{g}");
    assert_eq!(
        g["reasons"][0]["line"],
        format!("fabric path: SL 3 (every route of the level): {cycle}"),
        "{g}"
    );
    assert_eq!(grant(&n, "high")["decision"], "granted");
}
