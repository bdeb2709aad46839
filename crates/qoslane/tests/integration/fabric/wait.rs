//! The fabric's own counters on the multi-switch simulated fabric (issue
//! 26): transmit wait set from ibsim's console (`PerformanceSet`), read by
//! `qoslane fabric audit` both ways (in process: a PMA Get per switch
//! egress port; with smpquery: perfquery per port) and by a job's Prolog
//! and Epilog (perfquery on the node's own port; ibsim has no per-SL data
//! counters: `unsupported`, remembered).

use super::MAPPING;
use super::path::{PathRig, audit, hook, install_mapping, text, write};
use super::reader::both_ways;
use super::rig::{read, rig_wanted};

/// `PerformanceSet "NODE"[PORT] PortVLXmitWaitCounters.PortVLXmitWaitCountersVL=N`.
fn set_wait(rig: &PathRig, node: &str, port: u32, vl: u8, ticks: u32) {
    rig.lever(
        "console",
        &[&format!(
            "PerformanceSet \"{node}\"[{port}] PortVLXmitWaitCounters.PortVLXmitWaitCounters{vl}={ticks}"
        )],
    );
}

#[test]
fn path_audit_names_the_switch_port_where_each_tier_waited() {
    if !rig_wanted("wait_audit") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    // mission-critical (SL 3 -> VL 3) waits at spine1 port 2 most, less at
    // leaf3 port 1; high (VL 2) at leaf2 port 3; VL 3 of leaf1 port 4 is
    // saturated; low's VL 1 never waits.
    set_wait(&rig, "spine1", 2, 3, 900);
    set_wait(&rig, "leaf3", 1, 3, 400);
    set_wait(&rig, "leaf2", 3, 2, 77);
    set_wait(&rig, "leaf1", 4, 3, 65535);
    // Both readers read the same per-port values (the report agrees).
    let v = both_ways(&rig, &node, &m);
    let r = &v["report"];
    let waits = r["xmit_wait"].as_array().unwrap();
    assert_eq!(
        waits.len(),
        3 * 4 + 2 * 3,
        "every connected switch port: {r}"
    );
    let spine1_2 = waits
        .iter()
        .find(|w| w["name"] == "spine1" && w["port"] == 2)
        .unwrap();
    assert_eq!(spine1_2["kind"], "switch");
    assert_eq!(spine1_2["ticks"][3], 900, "{spine1_2}");
    assert_eq!(spine1_2["ticks"][0], 0);
    assert_eq!(spine1_2["ticks"].as_array().unwrap().len(), 16);
    let levels = r["wait_levels"].as_array().unwrap();
    let mc = &levels[0];
    assert_eq!(mc["level"], "mission-critical");
    assert_eq!(
        (
            &mc["most"]["name"],
            &mc["most"]["port"],
            &mc["most"]["vl"],
            &mc["most"]["ticks"]
        ),
        (&"spine1".into(), &2.into(), &3.into(), &900.into()),
        "{mc}"
    );
    assert_eq!(mc["saturated"][0]["name"], "leaf1", "{mc}");
    assert_eq!(levels[1]["most"]["name"], "leaf2");
    assert!(
        levels[3].get("most").is_none(),
        "low never waited: {}",
        levels[3]
    );

    // The human text names the port; the textfile has the peak per level.
    let prom = rig.dir.path().join("audit.prom");
    let out = audit(&node, &m, &["--textfile", prom.to_str().unwrap()]);
    let human = text(&out);
    assert!(
        human.contains(
            "wait: level mission-critical (SL 3) waited most at switch spine1 (lid 2) port 2 VL 3: 900 ticks"
        ),
        "{human}"
    );
    assert!(
        human.contains(
            "wait: level mission-critical: saturated (65535 ticks or more) at switch leaf1"
        ),
        "{human}"
    );
    assert!(
        human.contains("wait: level low (SL 1): its lane never waited"),
        "{human}"
    );
    let t = read(&prom);
    assert!(
        t.contains("qoslane_fabric_audit_wait_ticks_max{level=\"mission-critical\"} 900\n"),
        "{t}"
    );
    assert!(t.contains("qoslane_fabric_audit_wait_ticks_max{level=\"high\"} 77\n"));
    assert!(
        t.contains("qoslane_fabric_audit_wait_saturated_ports{level=\"mission-critical\"} 1\n")
    );

    // --reset-wait clears what each reader read: the next audit shows only
    // what waited since. By perfquery (-R) first, then in process (a PMA Set).
    let cleared = audit(&node, &m, &["--reset-wait"]);
    assert!(
        !text(&cleared).contains("not cleared"),
        "{}",
        text(&cleared)
    );
    set_wait(&rig, "leaf2", 3, 2, 5);
    let v = in_process(&rig, &node, &m, &["--reset-wait"]);
    let levels = &v["report"]["wait_levels"];
    assert!(levels[0].get("most").is_none(), "cleared: {levels}");
    assert_eq!(levels[0]["saturated"], serde_json::json!([]), "{levels}");
    assert_eq!(levels[1]["most"]["ticks"], 5, "{levels}");
    let v = in_process(&rig, &node, &m, &[]);
    assert!(
        v["report"]["wait_levels"][1].get("most").is_none(),
        "cleared in process: {v}"
    );
    assert!(
        v["report"]["xmit_wait"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["ticks"].as_array().unwrap().iter().all(|t| t == 0)),
        "{v}"
    );
}

/// `fabric audit --format json --reader in-process EXTRA…`: its JSON.
fn in_process(
    rig: &PathRig,
    node: &super::rig::SimNode,
    m: &std::path::Path,
    extra: &[&str],
) -> serde_json::Value {
    let out = super::reader::audit_in_process_with(rig, node, m, extra);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[test]
fn path_a_jobs_wait_per_vl_is_in_its_epilogs_evidence() {
    if !rig_wanted("wait_job") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let root = node.paths.root.clone();
    install_mapping(&node, MAPPING);
    let perfquery = node.paths.perfquery.clone().unwrap();
    let pq = perfquery.to_str().unwrap();
    let job = |name: &str, id: &str| {
        let env = [("QOSLANE_PERFQUERY", pq)];
        let out = hook(&node, name, id, "mission-critical", &env);
        assert!(out.status.success(), "{name} {id}: {}", text(&out));
    };
    set_wait(&rig, "node2", 1, 3, 100);
    job("prolog", "7");
    // While the job runs its port's VL 3 waits 400 ticks more.
    set_wait(&rig, "node2", 1, 3, 500);
    job("epilog", "7");
    let log = read(&root.join("var/log/qoslane/audit.jsonl"));
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    let e = &last["evidence"];
    assert_eq!(e["alone"], true, "{e}");
    let p = &e["ports"][0];
    assert_eq!(p["device"], "mlx5_0");
    assert_eq!(
        p["xmit_wait_ticks_per_vl"]["moved"],
        serde_json::json!({"3": 400}),
        "{e}"
    );
    assert_eq!(
        p["sent_bytes_per_sl"], "unsupported",
        "ibsim has no PortXmitDataSL: {e}"
    );
    assert_eq!(p["received_bytes_per_sl"], "unsupported");
    let remembered = read(&root.join("run/qoslane/counters-unsupported.json"));
    assert!(remembered.contains("xmit_data_sl") && remembered.contains("rcv_data_sl"));
}

/// A hook or `health` on `node` with no site option set, reading in
/// process through the rig's umad preload (as a node with an HCA reads its
/// own port): no `QOSLANE_PERFQUERY`.
fn in_process_run(
    rig: &PathRig,
    node: &super::rig::SimNode,
    scratch: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    use crate::util::Within as _;
    std::process::Command::new(crate::util::BIN)
        .env_clear()
        .current_dir(scratch)
        .env("QOSLANE_ROOT", &node.paths.root)
        .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
        .env(
            "QOSLANE_SQUEUE",
            crate::util::fake_squeue(&node.paths.root.join("fakesqueue"), env),
        )
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_TIMEOUT_MS", "30000")
        .env("LD_PRELOAD", rig.var("RIG_UMAD2SIM"))
        .env("SIM_HOST", "node2")
        .env("IBSIM_SOCKNAME", rig.var("IBSIM_SOCKNAME"))
        .args(args)
        .envs(env.iter().copied().filter(|(k, _)| !k.starts_with("FAKE_")))
        .output_within()
}

/// Issue 35, done when: with no site option set, a job's ports' counters
/// are read in process (PMA Gets through the port, no perfquery): its
/// Epilog's audit carries the VL wait set from ibsim's console and says
/// per-SL data is unsupported on ibsim (the simulator gives those Gets
/// back); a health run between reads the wait too, so
/// `qoslane_xmit_wait_ticks_total` grows while the job runs.
#[test]
fn path_a_jobs_evidence_is_read_in_process_by_default() {
    if !rig_wanted("wait_in_process") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2_as("ibsim0");
    let scratch = tempfile::tempdir().unwrap();
    install_mapping(&node, MAPPING);
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = in_process_run(&rig, &node, scratch.path(), args, env);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        out
    };
    let job = |hook: &str| {
        run(
            &[hook],
            &[
                ("SLURM_JOB_ID", "9"),
                ("FAKE_QOS", "mission-critical"),
                ("SLURM_JOB_USER", "alice"),
            ],
        )
    };
    let wait = |root: &std::path::Path| -> Option<u64> {
        let prom = read(&root.join("var/lib/prometheus/node-exporter/qoslane.prom"));
        prom.lines().find_map(|l| {
            l.strip_prefix(
                "qoslane_xmit_wait_ticks_total{device=\"ibsim0\",port=\"1\",vl=\"3\",level=\"mission-critical\"} ",
            )?
            .parse()
            .ok()
        })
    };
    let root = node.paths.root.clone();
    set_wait(&rig, "node2", 1, 3, 100);
    job("prolog");
    assert_eq!(wait(&root), Some(0), "the first reading starts the count");
    // While the job runs its port's VL 3 waits: each health run counts it.
    set_wait(&rig, "node2", 1, 3, 500);
    run(&["health"], &[]);
    assert_eq!(wait(&root), Some(400), "read by health, during the job");
    set_wait(&rig, "node2", 1, 3, 700);
    run(&["health"], &[]);
    assert_eq!(wait(&root), Some(600), "and again at the next run");
    set_wait(&rig, "node2", 1, 3, 750);
    job("epilog");
    assert_eq!(wait(&root), Some(650));
    let log = read(&root.join("var/log/qoslane/audit.jsonl"));
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["event"], "epilog", "{last}");
    let p = &last["evidence"]["ports"][0];
    assert_eq!(p["device"], "ibsim0", "{last}");
    assert_eq!(p["read_by"], "in-process", "{p}");
    assert_eq!(
        p["xmit_wait_ticks_per_vl"]["moved"],
        serde_json::json!({"3": 650}),
        "{p}"
    );
    assert_eq!(p["said"], "per-SL data unsupported by this port", "{p}");
    assert_eq!(p["sent_bytes_per_sl"], "unsupported", "{p}");
    assert_eq!(p["received_bytes_per_sl"], "unsupported");
    // No program read a counter.
    let calls = node.calls_log();
    assert!(
        !calls.contains("--vlxmitcounters") && !calls.contains(" -X") && !calls.contains(" -S"),
        "{calls}"
    );
    let remembered = read(&root.join("run/qoslane/counters-unsupported.json"));
    assert!(remembered.contains("xmit_data_sl") && remembered.contains("rcv_data_sl"));
}
