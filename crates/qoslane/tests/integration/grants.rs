//! The node's one decision per level (issue 23): what `health` and `sync`
//! record in `/run/qoslane/grants.json` and every view renders — ports that
//! carry nothing, node settings that cannot be written — and `status` and
//! `log` telling the truth (a job judged by the level it was granted,
//! warnings first, a permission error said as one). The first hop on a real
//! multi-switch fabric: `fabric/path.rs`.

use crate::util::Within as _;
use crate::util::{self, Node, ok, stderr};

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `util::MAPPING` under `enforce` on a single HCA the fake smpquery answers
/// with an identity SL2VL.
fn fabric_node(mapping: &str) -> Node {
    let n = Node::with_mapping(&mapping.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_hca("qos-identity");
    n
}

fn run(n: &Node, args: &[&str]) -> std::process::Output {
    let smpquery = n.fake_smpquery().display().to_string();
    n.run(args, &[("QOSLANE_SMPQUERY", smpquery.as_str())])
}

/// Item 5: with `devices: []` a down, uncabled second port of a dual-port
/// HCA carries no level: a note, never a drain. Listed in `devices:`, it
/// drains. (It drained the node before.)
#[test]
fn a_down_port_beside_an_active_one_is_a_note_unless_listed() {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_fabric("dual-port");
    n.answer_smpquery("qos-identity");
    let out = run(&n, &["health"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(!text.contains("drain"), "{text}");
    let notes = n.last_audit("health")["notes"].to_string();
    assert!(
        notes.contains("port: ok: mlx5_0/2: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 2: Polling): carries no level"),
        "{notes}"
    );
    assert!(notes.contains("level: ok: every level granted"), "{notes}");

    n.write_mapping(&util::MAPPING.replace(
        "fabric_check: off",
        "fabric_check: enforce\ndevices: [mlx5_0]",
    ));
    let out = run(&n, &["health"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).starts_with("qoslane: mlx5_0/2: not ACTIVE"),
        "{}",
        stdout(&out)
    );
}

/// A port listed in `devices:` that is DOWN fails every level, in the one
/// decision: `sync` names each level refused or on the baseline (exit 1),
/// `health` says so beside its drain, and a Prolog in between obeys it.
/// (Regression, issue 39: the levels were granted on the ACTIVE port beside
/// it until the next health drain.)
#[test]
fn a_listed_port_that_is_down_fails_every_level_everywhere() {
    let n = Node::with_mapping(&util::MAPPING.replace(
        "fabric_check: off",
        "fabric_check: enforce\ndevices: [mlx5_0]",
    ));
    n.add_fabric("dual-port");
    n.answer_smpquery("qos-identity");
    let down = "mlx5_0/2: not ACTIVE (InfiniBand port, state 1: DOWN, phys_state 2: Polling)";

    let out = run(&n, &["sync"]);
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "level mission-critical: its jobs are refused and requeued (on_failure: fail_job): {down}"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "level low: its jobs run on the baseline, without their SL (on_failure: continue): {down}"
        )),
        "{said}"
    );

    let out = n.prolog(1, "mission-critical");
    assert!(!out.status.success(), "refused: {}", stderr(&out));
    assert!(stderr(&out).contains(down), "{}", stderr(&out));
    let out = n.prolog(2, "high");
    ok(&out);
    // on_failure: continue: the job starts, on the baseline (nothing applied).
    let audit = n.last_audit("prolog");
    assert_eq!(audit["outcome"], "failed", "{audit}");
    assert_eq!(audit["changes"], serde_json::json!([]), "{audit}");
    assert!(audit["error"].as_str().unwrap().contains(down), "{audit}");

    let out = run(&n, &["health"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("qoslane: warn: level: level high: {down}")),
        "{text}"
    );
    let out = n.run(&["metrics"], &[]);
    let m = stdout(&out);
    for level in ["mission-critical", "high", "normal", "low"] {
        assert!(
            m.contains(&format!("qoslane_level_granted{{level=\"{level}\"}} 0\n")),
            "{level}: {m}"
        );
    }
}

/// Item 8: a level's setting that cannot be written is found by `sync` and
/// `health`, which say which levels would roll back; the recorded grant
/// refuses the `fail_job` level in the next Prolog and `status` says so.
#[test]
fn a_setting_that_cannot_be_written_is_said_by_sync_and_health_and_obeyed() {
    let n = Node::new();
    // rmem_max (of mission-critical, high and low) cannot be opened for writing.
    std::fs::remove_file(n.path(util::RMEM)).unwrap();
    std::fs::create_dir(n.path(util::RMEM)).unwrap();
    let out = n.run(&["sync"], &[]);
    let said = stderr(&out);
    // Regression (issue 39, item 8): sync exited 0 (an Omnia run went
    // green) while levels were refused: its status follows the levels.
    assert_eq!(out.status.code(), Some(1), "{said}");
    for level in ["mission-critical", "high", "low"] {
        assert!(
            said.contains(&format!("level {level}: ")),
            "sync names {level}: {said}"
        );
    }
    assert!(
        said.contains("its jobs are refused and requeued (on_failure: fail_job): node setting /proc/sys/net/core/rmem_max cannot be written"),
        "{said}"
    );
    assert!(
        !said.contains("level normal: "),
        "normal has no setting: {said}"
    );
    let out = n.run(&["health"], &[]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "a warning, not a drain: {text}");
    assert!(
        text.contains("qoslane: warn: level: level high: node setting /proc/sys/net/core/rmem_max cannot be written")
            && text.contains("its jobs run on the baseline, without their SL (on_failure: continue): make the level's node settings writable"),
        "{text}"
    );
    let out = n.prolog(1, "mission-critical");
    assert!(!out.status.success(), "refused by its grant");
    assert!(
        stderr(&out)
            .contains("node settings: node setting /proc/sys/net/core/rmem_max cannot be written"),
        "{}",
        stderr(&out)
    );
    ok(&n.prolog(2, "normal"));
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("level mission-critical is not granted (health "),
        "{}",
        stdout(&out)
    );
    let out = n.run(&["metrics"], &[]);
    let m = stdout(&out);
    assert!(
        m.contains("qoslane_level_granted{level=\"normal\"} 1\n"),
        "{m}"
    );
    assert!(
        m.contains("qoslane_level_granted{level=\"high\"} 0\n"),
        "{m}"
    );
}

/// A setting that is gone (its file vanished) is a warning: nothing is
/// applied there, the job still gets its SL.
#[test]
fn a_setting_that_is_gone_is_a_warning_and_the_level_is_granted() {
    let n = Node::new();
    std::fs::remove_file(n.path(util::TOS)).unwrap();
    let out = n.run(&["health"], &[]);
    let text = stdout(&out);
    assert!(
        text.contains("level high: node settings: node setting /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos does not exist")
            && text.contains("its jobs get their SL (with warnings)"),
        "{text}"
    );
    ok(&n.prolog(1, "high"));
}

/// Item 7: a job still on its old SL after a mapping change is judged by
/// the SL and VL it was granted, not the level as the mapping has it now
/// (status raised a false Attention); after a health run with warnings,
/// `status` does not say "Health: ok" and `log` shows the warning first.
#[test]
fn status_judges_a_job_by_its_grant_and_says_health_warnings() {
    let n = fabric_node(&util::MAPPING.replace("fabric_check: off", "fabric_check: warn"));
    ok(&run(&n, &["sync"]));
    let smpquery = n.fake_smpquery().display().to_string();
    ok(&n.prolog_env(1, "high", &[("QOSLANE_SMPQUERY", smpquery.as_str())]));
    // `high` now wants VL 5, which the identity SL2VL does not give SL 2
    // (accepted under `warn`); job 1 keeps SL 2 on VL 2, which is carried.
    n.write_mapping(
        &util::MAPPING
            .replace("fabric_check: off", "fabric_check: warn")
            .replace(
                "service_level: 2\n    virtual_lane: 2",
                "service_level: 2\n    virtual_lane: 5",
            ),
    );
    ok(&run(&n, &["sync"]));
    let out = run(&n, &["status"]);
    let st = stdout(&out);
    assert!(!st.contains("job 1 holds level high"), "{st}");
    let out = run(&n, &["health"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let st = stdout(&run(&n, &["status"]));
    assert!(
        st.contains("Health: WARNINGS at ") && st.contains("level: WARN: level high: "),
        "{st}"
    );
    assert!(!st.contains("Health: ok"), "{st}");
    let log = stdout(&run(&n, &["log", "--event", "health"]));
    let last = log.lines().last().unwrap_or_default();
    assert!(
        last.contains("level: WARN: level high: fabric (warn): ") && !last.contains("mapping: ok"),
        "{log}"
    );
}

/// Item 7: as a non-root user, `status` says the state is not readable as
/// its uid (never advice to remove it) and `log` never says there is no
/// audit log when it cannot read it.
#[test]
fn a_non_root_user_is_told_it_needs_root_not_to_delete_state() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run as another user");
        return;
    }
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    ok(&n.run(&["health"], &[]));
    if !util::reachable_by_others() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(n.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| n.cmd(args, &[]).uid(65534).gid(65534).output_within();
    let out = as_nobody(&["status"]);
    let st = stdout(&out);
    assert!(
        st.contains("state not readable as uid 65534"),
        "{st}{}",
        stderr(&out)
    );
    assert!(st.contains("needs root"), "{st}");
    assert!(!st.contains("remove it"), "{st}");
    let out = as_nobody(&["log"]);
    let err = stderr(&out);
    assert!(!err.contains("no audit log"), "{err}");
    assert!(err.contains("not readable as uid 65534"), "{err}");
}

/// Issue 39: `qoslane health` as a non-root user printed drains that were
/// not real (the state "owned by uid 0", "an interrupted transaction cannot
/// be rolled back"), exit 1. Now it fails as `sync` and `recover` do there
/// (exit 74, nothing judged), saying it needs root.
#[test]
fn health_as_a_non_root_user_says_it_needs_root_and_judges_nothing() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run as another user");
        return;
    }
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    ok(&n.run(&["health"], &[]));
    if !util::reachable_by_others() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(n.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let as_nobody = |args: &[&str]| n.cmd(args, &[]).uid(65534).gid(65534).output_within();
    let sync = as_nobody(&["sync"]);
    for args in [&["health"][..], &["health", "--json"]] {
        let out = as_nobody(args);
        assert_eq!(
            out.status.code(),
            sync.status.code(),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(out.status.code(), Some(74), "{args:?}: {}", stderr(&out));
        assert!(
            stdout(&out).is_empty(),
            "{args:?}: no verdict: {}",
            stdout(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains("`qoslane health` needs root"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("drain"), "{args:?}: {err}");
    }
    // As root, it is healthy still.
    ok(&n.run(&["health"], &[]));
}

/// Issue 39: `status` kept a grant recorded before the SM was fixed or
/// changed, beside a Fabric line that contradicted it, until the next
/// health run. A record older than the ports' probe (the fabric cache) or
/// of another SM (the first hop's ports read under another SM LID) is
/// shown as stale, with why, and its refusals are not given as facts.
#[test]
fn status_shows_a_grant_older_than_the_probe_or_of_another_sm_as_stale() {
    let n = fabric_node(util::MAPPING);
    ok(&run(&n, &["health"]));
    let status = |n: &Node| -> serde_json::Value {
        serde_json::from_slice(&n.run(&["status", "--json"], &[]).stdout).unwrap()
    };
    let st = status(&n);
    assert!(st["grants"]["recorded_by"].is_string(), "{st}");
    assert_eq!(st["grants"]["stale"], serde_json::Value::Null, "{st}");

    // A Prolog probed again after the record (a port re-assigned, an SM
    // that changed the tables).
    let cache_path = n.path("/run/qoslane/fabric.json");
    let original = std::fs::read_to_string(&cache_path).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut cache: serde_json::Value = serde_json::from_str(&original).unwrap();
        for p in cache["ports"].as_array_mut().unwrap() {
            f(p);
        }
        std::fs::write(&cache_path, cache.to_string()).unwrap();
    };
    let now_ms = u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    edit(&|p| p["probed_at_ms"] = (now_ms + 60_000).into());
    let st = status(&n);
    let why = st["grants"]["stale"]
        .as_str()
        .unwrap_or_else(|| panic!("{st}"));
    assert!(why.contains("older than the ports' probe"), "{why}");
    let text = stdout(&n.run(&["status"], &[]));
    assert!(
        text.contains("STALE: older than the ports' probe"),
        "{text}"
    );

    // The record's first hop was read under the SM the cache no longer
    // names (probed before the record: the SM LID alone says it).
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(n.path("/run/qoslane/grants.json")).unwrap())
            .unwrap();
    assert!(
        record["first_hop"]["ports"][0]["sm_lid"].is_u64(),
        "{record}"
    );
    edit(&|p| p["identity"]["sm_lid"] = 77.into());
    let st = status(&n);
    let why = st["grants"]["stale"]
        .as_str()
        .unwrap_or_else(|| panic!("{st}"));
    assert!(why.contains("another SM"), "{why}");

    // The next health run decides again: fresh.
    ok(&run(&n, &["health"]));
    assert_eq!(status(&n)["grants"]["stale"], serde_json::Value::Null);
}

/// Issue 39: an Epilog that could not restore a setting left its job's
/// level held (and hookrun drained the node with its reason) while `status`
/// stayed green. The job is shown with its failed Epilog (when, why), and
/// the node needs attention until the level is released.
#[test]
fn status_shows_a_job_whose_epilog_could_not_restore() {
    let n = Node::new();
    ok(&n.prolog(1, "mission-critical"));
    ok(&n.prolog(2, "low"));
    // default_roce_tos (mission-critical's alone) cannot be written back.
    let tos = n.path(util::TOS);
    std::fs::remove_file(&tos).unwrap();
    std::fs::create_dir(&tos).unwrap();
    let out = n.run(&["epilog"], &[("SLURM_JOB_ID", "1")]);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert_eq!(n.records().len(), 2, "job 1's level is still held");

    let out = n.run(&["status", "--json"], &[]);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["state"], "attention", "{st}");
    let job = st["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == 1)
        .unwrap_or_else(|| panic!("{st}"));
    let failed = job["epilog_failed"]
        .as_str()
        .unwrap_or_else(|| panic!("{job}"));
    assert!(failed.contains("default_roce_tos"), "{failed}");
    let other = st["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == 2)
        .unwrap();
    assert_eq!(other["epilog_failed"], serde_json::Value::Null, "{other}");
    assert!(
        st["attention"]
            .to_string()
            .contains("job 1's Epilog failed"),
        "{st}"
    );
    let text = stdout(&n.run(&["status"], &[]));
    assert!(text.contains("Epilog FAILED"), "{text}");
}
