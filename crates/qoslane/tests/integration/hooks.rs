//! The job hooks end to end on a temp root: the admin's story of prolog,
//! task-prolog and epilog, failures and rollback, shared nodes.

use crate::util;
use crate::util::Within as _;

use std::time::{Duration, Instant};

use crate::util::{BASE_RMEM, BASE_TOS, Node, RMEM, TOS, ok, stderr};

fn settings(tos: &str, rmem: &str) -> (String, String) {
    (tos.to_owned(), rmem.to_owned())
}

#[test]
fn each_qos_gets_its_own_level_exports_and_settings() {
    let cases = [
        (
            "mission-critical",
            "3",
            Some("106"),
            settings("106", "16777216"),
        ),
        ("high", "2", None, settings("74", "8388608")),
        ("normal", "0", None, settings(BASE_TOS, BASE_RMEM)),
        ("low", "1", None, settings(BASE_TOS, "1048576")),
        ("standby", "1", None, settings(BASE_TOS, "1048576")),
    ];
    for (qos, sl, tc, want) in cases {
        let n = Node::new();
        ok(&n.prolog(7, qos));
        assert_eq!(n.settings(), want, "settings for {qos}");
        let out = n.task_prolog(7, &[]);
        ok(&out);
        let ex = Node::exports(&out);
        for var in [
            "UCX_IB_SL",
            "NCCL_IB_SL",
            "OMPI_MCA_btl_openib_ib_service_level",
            "MV2_DEFAULT_SERVICE_LEVEL",
        ] {
            assert_eq!(ex.get(var).map(String::as_str), Some(sl), "{var} for {qos}");
        }
        assert_eq!(ex.get("UCX_IB_TRAFFIC_CLASS").map(String::as_str), tc);
        assert_eq!(ex.get("NCCL_IB_TC").map(String::as_str), tc);
        let a = n.last_audit("prolog");
        assert_eq!(a["qos"], qos);
        assert_eq!(a["qos_source"], "squeue");
        assert_eq!(a["service_level"].to_string(), sl);
        assert_eq!(a["outcome"], "applied");
        ok(&n.epilog(7));
        assert_eq!(
            n.settings(),
            settings(BASE_TOS, BASE_RMEM),
            "baseline after {qos}"
        );
        assert!(n.records().is_empty());
    }
}

#[test]
fn unknown_qos_gets_the_default_level() {
    let n = Node::new();
    ok(&n.prolog(8, "scavenger"));
    let a = n.last_audit("prolog");
    assert_eq!(a["level"], "normal");
    assert_eq!(a["qos"], "scavenger");
    let ex = Node::exports(&n.task_prolog(8, &[]));
    assert_eq!(ex["QOSLANE_LEVEL"], "normal");
    assert_eq!(ex["UCX_IB_SL"], "0");
}

#[test]
fn slurm_job_qos_is_trusted_only_in_a_slurmd_context() {
    let n = Node::new();
    ok(&n.run(
        &[],
        &[
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("SLURM_JOB_ID", "9"),
            ("SLURM_JOB_QOS", "high"),
        ],
    ));
    let a = n.last_audit("prolog");
    assert_eq!(
        (a["qos"].as_str(), a["qos_source"].as_str()),
        (Some("high"), Some("env"))
    );
    // Without the context the variable is ignored and squeue asked.
    ok(&n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "10"),
            ("SLURM_JOB_QOS", "mission-critical"),
            ("FAKE_QOS", "low"),
        ],
    ));
    let a = n.last_audit("prolog");
    assert_eq!(
        (a["qos"].as_str(), a["qos_source"].as_str()),
        (Some("low"), Some("squeue"))
    );
}

#[test]
fn context_dispatch_runs_each_hook() {
    let n = Node::new();
    ok(&n.run(
        &[],
        &[
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("SLURM_JOB_ID", "5"),
            ("FAKE_QOS", "high"),
        ],
    ));
    assert_eq!(n.get(TOS), "74");
    let root = n.root().to_str().unwrap().to_owned();
    let out = std::process::Command::new(util::BIN)
        .env_clear()
        .args(["--root", &root])
        .env("SLURM_SCRIPT_CONTEXT", "prolog_task")
        .env("SLURM_JOB_ID", "5")
        .output_within();
    assert_eq!(Node::exports(&out)["UCX_IB_SL"], "2");
    ok(&n.run(
        &[],
        &[
            ("SLURM_SCRIPT_CONTEXT", "epilog_slurmd"),
            ("SLURM_JOB_ID", "5"),
        ],
    ));
    assert_eq!(n.get(TOS), BASE_TOS);
    let out = n.run(&[], &[("SLURM_SCRIPT_CONTEXT", "prolog_srun")]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    // No context (a site's wrapper running `hookrun task-prolog`): hookrun's
    // HOOKRUN_PHASE picks the TaskProlog, and only the TaskProlog.
    ok(&n.run(
        &[],
        &[
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("SLURM_JOB_ID", "6"),
            ("FAKE_QOS", "high"),
        ],
    ));
    let out = std::process::Command::new(util::BIN)
        .env_clear()
        .args(["--root", &root])
        .env("HOOKRUN_PHASE", "task-prolog")
        .env("SLURM_JOB_ID", "6")
        .output_within();
    assert_eq!(Node::exports(&out)["UCX_IB_SL"], "2", "{}", stderr(&out));
    // The packaged hooks are links to qoslane: hookrun's phase is the hook's,
    // where Slurm set no context (HealthCheckProgram) and where it did.
    ok(&n.run(&[], &[("HOOKRUN_PHASE", "health")]));
    let out = n.run(
        &[],
        &[
            ("HOOKRUN_PHASE", "prolog"),
            ("SLURM_JOB_ID", "7"),
            ("FAKE_QOS", "high"),
        ],
    );
    ok(&out);
    assert_eq!(
        n.last_audit("prolog")["job_id"],
        7,
        "HOOKRUN_PHASE=prolog ran the Prolog"
    );
    let out = n.run(&[], &[("HOOKRUN_PHASE", "task-epilog")]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    let out = n.run(&[], &[]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
}

/// Regression (issue 39, item 1): qoslane picked its hook from Slurm's
/// context before hookrun's phase, so `hookrun health` run from the Epilog
/// (NHC's pattern) ran a second Epilog instead of the health check. hookrun's
/// phase wins for a hook run in a phase, except in the TaskProlog, whose
/// environment is the job user's.
#[test]
fn hookruns_phase_wins_over_slurms_context() {
    let n = Node::new();
    let root = n.root().to_str().unwrap().to_owned();
    ok(&n.run(
        &[],
        &[
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("SLURM_JOB_ID", "6"),
            ("FAKE_QOS", "high"),
        ],
    ));
    let (prologs, epilogs) = (
        n.audit_events("prolog").len(),
        n.audit_events("epilog").len(),
    );
    let out = n.run(
        &[],
        &[
            ("HOOKRUN_PHASE", "prolog"),
            ("SLURM_SCRIPT_CONTEXT", "epilog_slurmd"),
            ("SLURM_JOB_ID", "7"),
            ("FAKE_QOS", "high"),
        ],
    );
    ok(&out);
    assert_eq!(
        (
            n.audit_events("prolog").len(),
            n.audit_events("epilog").len()
        ),
        (prologs + 1, epilogs),
        "hookrun's phase wins over Slurm's context: the Prolog ran, no Epilog"
    );
    // `hookrun health` run from the Epilog.
    let epilogs = n.audit_events("epilog");
    let healths = n.audit_events("health").len();
    let out = n.run(
        &[],
        &[
            ("HOOKRUN_PHASE", "health"),
            ("SLURM_SCRIPT_CONTEXT", "epilog_slurmd"),
            ("SLURM_JOB_ID", "7"),
        ],
    );
    ok(&out);
    assert_eq!(n.audit_events("epilog"), epilogs, "no second Epilog ran");
    assert_eq!(
        n.audit_events("health").len(),
        healths + 1,
        "the health check ran: {}",
        stderr(&out)
    );
    // The TaskProlog's environment is the job user's: a HOOKRUN_PHASE there
    // does not turn it into another hook.
    let out = std::process::Command::new(util::BIN)
        .env_clear()
        .args(["--root", &root])
        .env("SLURM_SCRIPT_CONTEXT", "prolog_task")
        .env("HOOKRUN_PHASE", "epilog")
        .env("SLURM_JOB_ID", "6")
        .output_within();
    assert_eq!(Node::exports(&out)["UCX_IB_SL"], "2", "{}", stderr(&out));
}

/// Regression (issue 39, item 7): Slurm runs the Prolog for a step of
/// `srun --no-allocate` (root and SlurmUser only; job ids 0xffff0000 to
/// 0xfffffffd) and never its Epilog: the level's record and settings stayed
/// until the next health check. Such a job gets nothing, said in its audit
/// line; the id just below the range is an ordinary job.
#[test]
fn an_srun_no_allocate_step_gets_no_level_and_leaves_nothing() {
    let n = Node::new();
    for id in [0xffff_0000_u32, 0xffff_fffd] {
        let id = id.to_string();
        let out = n.run(&["prolog"], &[("SLURM_JOB_ID", &id), ("FAKE_QOS", "high")]);
        ok(&out);
        assert!(n.records().is_empty(), "{id}: {:?}", n.records());
        assert_eq!(n.settings(), (BASE_TOS.into(), BASE_RMEM.into()), "{id}");
        let a = n.last_audit("prolog");
        assert_eq!(a["job_id"].to_string(), id, "{a}");
        assert_eq!(a["outcome"], "unchanged", "{a}");
        assert!(
            a["notes"][0]
                .as_str()
                .is_some_and(|s| s.contains("srun --no-allocate") && s.contains("no Epilog")),
            "{a}"
        );
        let tp = n.task_prolog(id.parse().unwrap(), &[]);
        assert!(Node::exports(&tp).is_empty(), "{id}: no exports");
    }
    let below = 0xfffe_ffff_u32.to_string();
    ok(&n.run(
        &["prolog"],
        &[("SLURM_JOB_ID", &below), ("FAKE_QOS", "high")],
    ));
    assert_eq!(n.records(), [format!("{below}.json")]);
}

#[test]
fn squeue_failing_or_hanging_falls_back_to_the_default_within_the_deadline() {
    let n = Node::new();
    let out = n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "21"),
            ("FAKE_QOS", "high"),
            ("FAKE_SQUEUE_FAIL", "1"),
        ],
    );
    ok(&out);
    let a = n.last_audit("prolog");
    assert_eq!(
        (a["level"].as_str(), a["qos_source"].as_str()),
        (Some("normal"), Some("default"))
    );
    assert!(
        a["notes"][0]
            .as_str()
            .unwrap()
            .contains("Unable to contact"),
        "{a}"
    );

    let t = Instant::now();
    let out = n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "22"),
            ("FAKE_QOS", "high"),
            ("FAKE_SQUEUE_SLEEP", "30"),
            ("QOSLANE_TIMEOUT_MS", "700"),
        ],
    );
    // The deadline bounds the whole run; the job gets the default level.
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    let a = n.last_audit("prolog");
    assert_eq!(a["qos_source"], "default", "{a}\n{}", stderr(&out));
}

/// The QoS query prints the QoS alone (`squeue -o %q`): whatever the job's
/// name, comment or directory hold, the level follows the QoS Slurm has.
#[test]
fn user_text_never_reaches_the_qos_query() {
    let n = Node::new();
    ok(&n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "30"),
            ("FAKE_QOS", "low"),
            ("SLURM_JOB_NAME", "x QOS=mission-critical"),
            ("SLURM_JOB_COMMENT", "QOS=mission-critical"),
        ],
    ));
    let a = n.last_audit("prolog");
    assert_eq!(
        (a["level"].as_str(), a["qos_source"].as_str()),
        (Some("low"), Some("squeue")),
        "{a}"
    );
}

/// Issue 24 (suspected case, confirmed on 22.05): the Prolog of a
/// heterogeneous job's leader asks `squeue -j LEADER`, which lists every
/// component with its own QoS; components with different QoS made it the
/// default level. Only the line of the job's own id counts.
#[test]
fn a_heterogeneous_jobs_leader_gets_its_own_components_level() {
    let n = Node::new();
    ok(&n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "264"),
            ("FAKE_QOS", "high"),
            ("FAKE_SQUEUE_OTHER", "265 low"),
        ],
    ));
    let a = n.last_audit("prolog");
    assert_eq!(
        (a["level"].as_str(), a["qos_source"].as_str()),
        (Some("high"), Some("squeue")),
        "{a}"
    );
    ok(&n.run(&["prolog"], &[("SLURM_JOB_ID", "265"), ("FAKE_QOS", "low")]));
    let a = n.last_audit("prolog");
    assert_eq!(a["level"].as_str(), Some("low"), "{a}");
}

/// Issue 24 (suspected case, confirmed on 24.11): a task of a heterogeneous
/// job's step runs with the leader's `SLURM_JOB_ID` whatever its
/// component, while the component's Prolog recorded its level under the
/// component's own id: the TaskProlog of component 1 found no record (or,
/// components sharing a node, the leader's). It reads the one component
/// whose record this node holds; with several, none.
#[test]
fn a_heterogeneous_components_task_reads_its_own_components_record() {
    let het = [
        ("SLURM_HET_SIZE", "2"),
        ("SLURM_JOB_ID_HET_GROUP_0", "103"),
        ("SLURM_JOB_ID_HET_GROUP_1", "104"),
        ("SLURM_JOB_QOS", "high"),
    ];
    // Component 1's node: its Prolog ran as job 104, QoS low.
    let n = Node::new();
    ok(&n.prolog(104, "low"));
    let out = n.task_prolog(103, &het);
    let exports = Node::exports(&out);
    assert_eq!(
        exports.get("QOSLANE_LEVEL").map(String::as_str),
        Some("low"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Both components on one node: which is the task's is not known.
    ok(&n.prolog(103, "high"));
    let out = n.task_prolog(103, &het);
    assert!(
        Node::exports(&out).is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr(&out).contains("heterogeneous components 103, 104"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_or_bad_job_id_is_a_clear_error() {
    let n = Node::new();
    let out = n.run(&["prolog"], &[("FAKE_QOS", "high")]);
    assert!(
        stderr(&out).contains("SLURM_JOB_ID is not set"),
        "{}",
        stderr(&out)
    );
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    let out = n.run(&["prolog"], &[("SLURM_JOB_ID", "12x; rm -rf /")]);
    assert!(stderr(&out).contains("is not a job id"), "{}", stderr(&out));
    assert_eq!(n.last_audit("prolog")["outcome"], "failed");
}

#[test]
fn prolog_and_epilog_are_idempotent_and_an_orphan_epilog_is_a_no_op() {
    let n = Node::new();
    ok(&n.epilog(40));
    assert_eq!(n.last_audit("epilog")["outcome"], "unchanged");
    ok(&n.prolog(41, "high"));
    ok(&n.prolog(41, "high"));
    let p = n.audit_events("prolog");
    assert_eq!(p[1]["outcome"], "unchanged", "{}", p[1]);
    assert_eq!(p[1]["changes"].as_array().unwrap().len(), 0);
    ok(&n.epilog(41));
    ok(&n.epilog(41));
    let e = n.audit_events("epilog");
    assert_eq!(
        (e[1]["outcome"].as_str(), e[2]["outcome"].as_str()),
        (Some("reverted"), Some("unchanged"))
    );
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
}

#[test]
fn shared_node_follows_the_highest_active_level_and_restores_the_baseline() {
    let n = Node::new();
    ok(&n.prolog(1, "low"));
    assert_eq!(n.settings(), settings(BASE_TOS, "1048576"));
    ok(&n.prolog(2, "mission-critical"));
    assert_eq!(n.settings(), settings("106", "16777216"));
    ok(&n.prolog(3, "high"));
    assert_eq!(n.settings(), settings("106", "16777216"));
    ok(&n.epilog(2));
    assert_eq!(n.settings(), settings("74", "8388608"));
    ok(&n.epilog(3));
    assert_eq!(n.settings(), settings(BASE_TOS, "1048576"));
    ok(&n.epilog(1));
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    // Each job kept its own SL throughout.
    assert!(n.records().is_empty());
}

#[test]
fn an_unreadable_setting_fails_before_any_change() {
    let n = Node::new();
    let rmem = n.path(RMEM);
    std::fs::remove_file(&rmem).unwrap();
    std::fs::create_dir(&rmem).unwrap();
    ok(&n.prolog(50, "high"));
    assert_eq!(n.get(TOS), BASE_TOS);
    let a = n.last_audit("prolog");
    assert_eq!(a["outcome"], "failed", "{a}");
    assert!(a["error"].as_str().unwrap().contains("rmem_max"), "{a}");
    assert!(n.records().is_empty());
}

#[test]
fn a_missing_setting_file_fails_before_any_change() {
    let n = Node::new();
    std::fs::remove_file(n.path(RMEM)).unwrap();
    let out = n.prolog(52, "high");
    ok(&out);
    assert_eq!(n.get(TOS), BASE_TOS);
    let a = n.last_audit("prolog");
    assert_eq!(a["outcome"], "failed", "{a}");
    assert!(a["error"].as_str().unwrap().contains("rmem_max"));
}

#[test]
fn spoofed_environment_in_the_task_prolog_is_ignored() {
    let n = Node::new();
    ok(&n.prolog(60, "low"));
    let out = n.task_prolog(
        60,
        &[
            ("SLURM_JOB_QOS", "mission-critical"),
            ("SLURM_SCRIPT_CONTEXT", "prolog_slurmd"),
            ("QOSLANE_ROOT", "/nonexistent"),
            ("UCX_IB_SL", "3"),
        ],
    );
    ok(&out);
    assert_eq!(Node::exports(&out)["UCX_IB_SL"], "1");
    assert_eq!(Node::exports(&out)["QOSLANE_LEVEL"], "low");
}

/// The variables qoslane sets (the export table, docs/admin-guide.md "What
/// the job's libraries read"), as a TaskProlog on a node that granted no
/// level unsets them.
const OUR_VARIABLES: [&str; 17] = [
    "UCX_IB_SL",
    "NCCL_IB_SL",
    "OMPI_MCA_btl_openib_ib_service_level",
    "MV2_DEFAULT_SERVICE_LEVEL",
    "NVSHMEM_IB_SL",
    "UCC_TL_MLX5_QP_SL",
    "MC_IB_SL",
    "NIC_SERVICE_LEVEL",
    "EP_OVERRIDE_RDMA_SL",
    "QOSLANE_LEVEL",
    "UCX_IB_TRAFFIC_CLASS",
    "NCCL_IB_TC",
    "NVSHMEM_IB_TRAFFIC_CLASS",
    "MC_IB_TC",
    "NIC_TRAFFIC_CLASS",
    "MV2_PATH_SL_QUERY",
    "OMPI_MCA_btl_openib_ib_path_record_service_level",
];

/// The traffic-class variables of the export table.
const TRAFFIC_CLASSES: [&str; 5] = [
    "UCX_IB_TRAFFIC_CLASS",
    "NCCL_IB_TC",
    "NVSHMEM_IB_TRAFFIC_CLASS",
    "MC_IB_TC",
    "NIC_TRAFFIC_CLASS",
];

/// A job on a native InfiniBand port gets no traffic-class variable (on
/// such a port NVSHMEM's IBGDA path fails with one: NVIDIA/nvshmem#45), and
/// the TaskProlog unsets them there, so that a task never keeps one another
/// node's TaskProlog exported; on RoCE ports it gets them, and no
/// InfiniBand-only variable; on a node with both, none of either.
#[test]
fn traffic_classes_are_exported_on_roce_ports_only() {
    let ib = Node::new();
    ib.add_fabric("mlx5-quirks");
    ok(&ib.prolog(80, "mission-critical"));
    let out = ib.task_prolog(80, &[]);
    ok(&out);
    let ex = Node::exports(&out);
    for v in TRAFFIC_CLASSES {
        assert!(!ex.contains_key(v), "{v} on an InfiniBand port: {ex:?}");
    }
    for v in [
        "UCX_IB_SL",
        "NVSHMEM_IB_SL",
        "UCC_TL_MLX5_QP_SL",
        "MC_IB_SL",
        "NIC_SERVICE_LEVEL",
        "EP_OVERRIDE_RDMA_SL",
    ] {
        assert_eq!(ex.get(v).map(String::as_str), Some("3"), "{v}: {ex:?}");
    }
    assert_eq!(Node::unsets(&out), TRAFFIC_CLASSES, "{out:?}");
    let record = ib.read("/run/qoslane/jobs/80.json");
    assert!(record.contains("\"unset\""), "{record}");

    let roce = Node::new();
    roce.add_fabric("roce-only");
    ok(&roce.prolog(81, "mission-critical"));
    let out = roce.task_prolog(81, &[]);
    ok(&out);
    let ex = Node::exports(&out);
    for v in TRAFFIC_CLASSES {
        assert_eq!(ex.get(v).map(String::as_str), Some("106"), "{v}: {ex:?}");
    }
    assert!(!ex.contains_key("EP_OVERRIDE_RDMA_SL"), "{ex:?}");
    assert_eq!(Node::unsets(&out), ["EP_OVERRIDE_RDMA_SL"]);
    assert_eq!(ex["NVSHMEM_IB_SL"], "3");

    // A level without a traffic class, on RoCE: nothing to export, and the
    // user's own traffic class is left alone.
    ok(&roce.prolog(82, "high"));
    let out = roce.task_prolog(82, &[]);
    assert!(
        !Node::exports(&out)
            .keys()
            .any(|k| TRAFFIC_CLASSES.contains(&k.as_str()))
    );
    assert_eq!(Node::unsets(&out), ["EP_OVERRIDE_RDMA_SL"]);

    let mixed = Node::new();
    mixed.add_fabric("mlx4-vpi");
    ok(&mixed.prolog(83, "mission-critical"));
    let out = mixed.task_prolog(83, &[]);
    let ex = Node::exports(&out);
    assert!(
        !ex.keys().any(|k| TRAFFIC_CLASSES.contains(&k.as_str())),
        "{ex:?}"
    );
    assert!(!ex.contains_key("EP_OVERRIDE_RDMA_SL"), "{ex:?}");
    assert_eq!(ex["UCX_IB_SL"], "3");
}

/// A site drops a variable of the table (its users set it) and adds its own
/// library's: the TaskProlog exports the one and neither exports nor unsets
/// the other, granted or on the baseline.
#[test]
fn a_site_adds_and_drops_exports_in_the_mapping() {
    let mapping = util::MAPPING.replacen(
        "levels:\n",
        "exports:\n  drop: [NIC_SERVICE_LEVEL, NCCL_IB_TC]\n  add:\n    - variable: MYLIB_SL\n      value: sl\n    - variable: MYLIB_TC\n      value: traffic_class\nlevels:\n",
        1,
    );
    let n = Node::with_mapping(&mapping);
    n.add_fabric("roce-only");
    ok(&n.prolog(84, "mission-critical"));
    let ex = Node::exports(&n.task_prolog(84, &[]));
    assert_eq!(ex.get("MYLIB_SL").map(String::as_str), Some("3"), "{ex:?}");
    assert_eq!(
        ex.get("MYLIB_TC").map(String::as_str),
        Some("106"),
        "{ex:?}"
    );
    assert!(!ex.contains_key("NIC_SERVICE_LEVEL") && !ex.contains_key("NCCL_IB_TC"));
    assert_eq!(ex["UCX_IB_TRAFFIC_CLASS"], "106");

    let out = n.task_prolog(85, &[]);
    ok(&out);
    let unsets = Node::unsets(&out);
    assert!(unsets.contains(&"MYLIB_SL".to_owned()) && unsets.contains(&"MYLIB_TC".to_owned()));
    assert!(
        !unsets.contains(&"NIC_SERVICE_LEVEL".to_owned()),
        "{unsets:?}"
    );
    assert!(!unsets.contains(&"NCCL_IB_TC".to_owned()), "{unsets:?}");
    assert_eq!(unsets.len(), OUR_VARIABLES.len() - 2 + 2);
}

#[test]
fn task_prolog_for_a_job_without_a_level_here_unsets_our_variables_and_succeeds() {
    let n = Node::new();
    let out = n.task_prolog(61, &[]);
    ok(&out);
    assert!(Node::exports(&out).is_empty());
    assert_eq!(Node::unsets(&out), OUR_VARIABLES, "{out:?}");
    let out = n.task_prolog(0, &[]);
    ok(&out);
    assert!(out.stdout.is_empty());
}

#[test]
fn a_symlink_planted_in_the_state_directory_is_refused() {
    let n = Node::new();
    ok(&n.prolog(70, "low"));
    let forged = n.root().join("forged.json");
    std::fs::write(
        &forged,
        std::fs::read_to_string(n.path("/run/qoslane/jobs/70.json"))
            .unwrap()
            .replace("\"1\"", "\"3\""),
    )
    .unwrap();
    let rec = n.path("/run/qoslane/jobs/71.json");
    std::os::unix::fs::symlink(&forged, &rec).unwrap();
    let out = n.task_prolog(71, &[]);
    ok(&out);
    assert!(
        out.stdout.is_empty(),
        "followed a symlink: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr(&out).contains("symlink"), "{}", stderr(&out));
}

#[test]
fn an_edited_mapping_is_picked_up_by_the_next_job_and_audited() {
    let n = Node::new();
    ok(&n.prolog(80, "high"));
    ok(&n.epilog(80));
    n.write_mapping(&util::MAPPING.replace("service_level: 2", "service_level: 5"));
    ok(&n.prolog(81, "high"));
    assert_eq!(Node::exports(&n.task_prolog(81, &[]))["UCX_IB_SL"], "5");
    let changes = n.audit_events("mapping_changed");
    assert_eq!(changes.len(), 2, "first sight and the edit: {changes:?}");
    assert_eq!(changes[1]["outcome"], "applied");
    assert_ne!(changes[0]["mapping_sha256"], changes[1]["mapping_sha256"]);
}

#[test]
fn an_invalid_mapping_on_the_node_falls_back_to_last_known_good() {
    let n = Node::new();
    ok(&n.prolog(90, "high"));
    ok(&n.epilog(90));
    n.write_mapping(&util::MAPPING.replace("service_level: 2", "service_level: 22"));
    ok(&n.prolog(91, "high"));
    assert_eq!(
        Node::exports(&n.task_prolog(91, &[]))["UCX_IB_SL"],
        "2",
        "last-known-good level"
    );
    let rejected = n.last_audit("mapping_changed");
    assert_eq!(rejected["outcome"], "failed");
    let err = rejected["error"].as_str().unwrap();
    assert!(
        // Located, its severity the error's own (issue 25: never `error: … error:`).
        err.contains("qos-network.yml:18:20: ")
            && err.contains("service_level")
            && !err.contains("error:"),
        "{err}"
    );
    // Audited once per distinct bad file, not once per job.
    ok(&n.prolog(92, "low"));
    assert_eq!(
        n.audit_events("mapping_changed")
            .iter()
            .filter(|e| e["outcome"] == "failed")
            .count(),
        1
    );
}

#[test]
fn with_no_usable_mapping_at_all_the_node_stays_as_it_is() {
    let n = Node::with_mapping("levels: [");
    let out = n.prolog(95, "high");
    ok(&out);
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    let a = n.last_audit("prolog");
    assert_eq!(a["outcome"], "failed");
    let err = a["error"].as_str().unwrap();
    assert!(
        err.contains("qos-network.yml:1:")
            && err.contains(": invalid YAML")
            && !err.contains("error:"),
        "{a}"
    );
}

#[test]
fn sync_reapplies_settings_for_running_jobs_under_the_new_mapping() {
    let n = Node::new();
    ok(&n.prolog(100, "high"));
    assert_eq!(n.get(TOS), "74");
    n.write_mapping(&util::MAPPING.replace("value: \"74\"", "value: \"90\""));
    let out = n.run(&["sync"], &[]);
    ok(&out);
    assert_eq!(n.get(TOS), "90");
    let a = n.last_audit("sync");
    assert_eq!(a["outcome"], "applied", "{a}");
    assert_eq!(n.last_audit("mapping_changed")["outcome"], "applied");
    // The running job keeps its environment.
    assert_eq!(Node::exports(&n.task_prolog(100, &[]))["UCX_IB_SL"], "2");
    ok(&n.epilog(100));
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    // Nothing new: unchanged.
    ok(&n.run(&["sync"], &[]));
    assert_eq!(n.last_audit("sync")["outcome"], "unchanged");
}

#[test]
fn sync_refuses_an_invalid_mapping_and_changes_nothing() {
    let n = Node::new();
    ok(&n.prolog(110, "high"));
    n.write_mapping(&util::MAPPING.replace("default_level: normal", "default_level: norml"));
    let out = n.run(&["sync"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did you mean `normal`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(n.get(TOS), "74");
    assert_eq!(n.last_audit("sync")["outcome"], "failed");
}

#[test]
fn explain_and_status_agree_with_what_the_prolog_applied() {
    let n = Node::new();
    let out = n.run(&["explain", "--qos", "high", "--format", "json"], &[]);
    ok(&out);
    let ex: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    ok(&n.prolog(120, "high"));
    let a = n.last_audit("prolog");
    assert_eq!(ex["level"], a["level"]);
    assert_eq!(ex["service_level"], a["service_level"]);
    let got = Node::exports(&n.task_prolog(120, &[]));
    for e in ex["exports"].as_array().unwrap() {
        assert_eq!(
            got[e["name"].as_str().unwrap()],
            e["value"].as_str().unwrap()
        );
    }
    let out = n.run(&["status", "--json"], &[]);
    ok(&out);
    let st: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["jobs"][0]["level"], "high");
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
fn concurrent_jobs_with_random_levels_end_on_the_baseline() {
    let n = Node::new();
    let levels = ["mission-critical", "high", "normal", "low", "standby"];
    let jobs: Vec<u32> = (1000..1064).collect();
    std::thread::scope(|s| {
        for chunk in jobs.chunks(8) {
            let n = &n;
            s.spawn(move || {
                for &j in chunk {
                    let out = n.prolog(j, levels[(j as usize * 7) % levels.len()]);
                    assert!(
                        out.status.success() || out.status.code() == Some(1),
                        "{}",
                        stderr(&out)
                    );
                }
                for &j in chunk.iter().rev() {
                    ok(&n.epilog(j));
                }
            });
        }
    });
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    assert!(n.records().is_empty(), "{:?}", n.records());
    assert!(!n.journal_exists());
    assert_eq!(
        n.audit_events("prolog").len(),
        64,
        "one audit line per prolog run"
    );
    assert_eq!(n.audit_events("epilog").len(), 64);
    assert!(
        n.audit_events("prolog")
            .iter()
            .all(|e| e["outcome"] == "applied")
    );
}

#[cfg(feature = "fault-injection")]
mod faults {
    use super::*;

    fn with_fault(
        n: &Node,
        job: u32,
        qos: &str,
        fault: &str,
        timeout_ms: &str,
    ) -> std::process::Output {
        let id = job.to_string();
        n.run(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", &id),
                ("FAKE_QOS", qos),
                ("QOSLANE_FAULT", fault),
                ("QOSLANE_TIMEOUT_MS", timeout_ms),
            ],
        )
    }

    /// A Prolog of job `job` at QoS high held where its transaction checks
    /// the ports again (`hold:check`), its port's state set to `state`
    /// meanwhile, then let go (the state put back after it ended).
    fn prolog_with_port_meanwhile(n: &Node, job: u32, state: &str) {
        let dir = n.path(&format!("/hold-{job}"));
        std::fs::create_dir_all(&dir).expect("the hold directory");
        let fault = format!("hold:check:{}", dir.display());
        let smp = n.fake_smpquery().display().to_string();
        let id = job.to_string();
        let mut proc = util::Proc::spawn(
            "a held prolog",
            n.cmd(
                &["prolog"],
                &[
                    ("SLURM_JOB_ID", &id),
                    ("FAKE_QOS", "high"),
                    ("QOSLANE_SMPQUERY", &smp),
                    ("QOSLANE_FAULT", &fault),
                    ("QOSLANE_TIMEOUT_MS", "60000"),
                ],
            )
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
        );
        let port = n.path("/sys/class/infiniband/mlx5_0/ports/1/state");
        let since = Instant::now();
        while !dir.join("held").exists() {
            assert!(
                proc.exited().is_none(),
                "job {job}'s prolog ended before its hold"
            );
            assert!(since.elapsed() < Duration::from_secs(60), "never held");
            std::thread::sleep(Duration::from_millis(10));
        }
        let was = std::fs::read_to_string(&port).expect("the port's state");
        std::fs::write(&port, format!("{state}\n")).expect("the port's state");
        std::fs::write(dir.join("go"), b"").expect("the go file");
        while proc.exited().is_none() {
            assert!(since.elapsed() < Duration::from_secs(120), "never ended");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::write(&port, was).expect("the port's state");
    }

    /// The ports' check after a transaction guards against a setting taking
    /// a link down: a Prolog that wrote a setting and finds its port DOWN
    /// fails and puts everything back; a Prolog whose transaction writes
    /// records only (its level's settings already in force for another
    /// job) wrote nothing that could take a link down, and reads no port
    /// again (before, it read the state again, and failed on a port that
    /// went down of itself).
    #[test]
    fn the_ports_are_checked_again_only_after_a_setting_was_written() {
        let n = Node::with_mapping(
            &util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"),
        );
        n.add_hca("qos-identity");
        let smp = n.fake_smpquery().display().to_string();
        prolog_with_port_meanwhile(&n, 2, "1: DOWN");
        let a = n.last_audit("prolog");
        assert!(a.to_string().contains("no longer ACTIVE"), "{a}");
        assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
        assert!(n.records().is_empty(), "{:?}", n.records());
        assert!(!n.journal_exists());

        ok(&n.run(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", "3"),
                ("FAKE_QOS", "high"),
                ("QOSLANE_SMPQUERY", &smp),
            ],
        ));
        assert_eq!(n.settings(), settings("74", "8388608"));
        prolog_with_port_meanwhile(&n, 4, "1: DOWN");
        let a = n.last_audit("prolog");
        assert_eq!(a["job_id"], 4, "{a}");
        assert_eq!(a["outcome"], "applied", "{a}");
        assert_eq!(n.records().len(), 2, "{:?}", n.records());
        assert_eq!(n.settings(), settings("74", "8388608"));
    }

    /// SIGKILL at every step of a prolog, an epilog and a sync: the next run
    /// of anything restores the pre-transaction values exactly.
    #[test]
    fn a_kill_at_any_step_is_undone_by_the_next_run() {
        let points = [
            "locked",
            "journaled",
            "applied:0",
            "applied:1",
            "verified",
            "recorded",
            "node_state",
            "committed",
        ];
        for point in points {
            // Prolog killed: the node goes back to the baseline (or, past the
            // commit, keeps the completed transaction).
            let n = Node::new();
            let out = with_fault(&n, 200, "high", point, "3000");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(9),
                "{point}: not killed: {}",
                stderr(&out)
            );
            ok(&n.run(&["recover"], &[]));
            let committed = point == "committed";
            let want = if committed {
                settings("74", "8388608")
            } else {
                settings(BASE_TOS, BASE_RMEM)
            };
            assert_eq!(n.settings(), want, "prolog killed at {point}");
            assert_eq!(
                n.records().len(),
                usize::from(committed),
                "prolog killed at {point}: {:?}",
                n.records()
            );
            assert!(!n.journal_exists());

            // Epilog killed while another job keeps a level.
            let n = Node::new();
            ok(&n.prolog(300, "low"));
            ok(&n.prolog(301, "mission-critical"));
            let out = n.run(
                &["epilog"],
                &[("SLURM_JOB_ID", "301"), ("QOSLANE_FAULT", point)],
            );
            assert_eq!(out.status.signal(), Some(9), "{point}");
            // The next run of any hook recovers first.
            ok(&n.prolog(302, "normal"));
            let want = if committed {
                settings(BASE_TOS, "1048576")
            } else {
                settings("106", "16777216")
            };
            assert_eq!(n.settings(), want, "epilog killed at {point}");
            let journaled = !matches!(point, "locked" | "committed");
            assert_eq!(
                n.audit_events("recover").len(),
                usize::from(journaled),
                "{point}"
            );
            ok(&n.epilog(301));
            ok(&n.epilog(300));
            ok(&n.epilog(302));
            assert_eq!(
                n.settings(),
                settings(BASE_TOS, BASE_RMEM),
                "{point}: baseline at the end"
            );

            // Sync killed while it re-applies a changed level.
            let n = Node::new();
            ok(&n.prolog(400, "high"));
            n.write_mapping(
                &util::MAPPING
                    .replace("value: \"74\"", "value: \"90\"")
                    .replace("\"8388608\"", "\"4194304\""),
            );
            let out = n.run(&["sync"], &[("QOSLANE_FAULT", point)]);
            assert_eq!(out.status.signal(), Some(9), "{point}");
            ok(&n.run(&["recover"], &[]));
            let want = if committed {
                settings("90", "4194304")
            } else {
                settings("74", "8388608")
            };
            assert_eq!(n.settings(), want, "sync killed at {point}");
            ok(&n.run(&["sync"], &[]));
            assert_eq!(
                n.settings(),
                settings("90", "4194304"),
                "{point}: sync completes on retry"
            );
        }
    }

    #[test]
    fn a_write_error_midway_rolls_everything_back() {
        let n = Node::new();
        // rmem_max is written second: the ToS was already changed.
        ok(&with_fault(&n, 50, "high", "write-error:rmem_max", "3000")); // on_failure: continue
        assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM), "ToS restored");
        let a = n.last_audit("prolog");
        assert_eq!(a["outcome"], "rolled_back", "{a}");
        assert!(a["error"].as_str().unwrap().contains("rmem_max"), "{a}");
        assert_eq!(a["changes"].as_array().unwrap().len(), 2, "{a}");
        assert!(
            n.records().is_empty(),
            "no record for a job on the baseline"
        );
        assert!(
            Node::exports(&n.task_prolog(50, &[])).is_empty(),
            "baseline job gets no SL exports"
        );
        assert!(!n.journal_exists());
    }

    #[test]
    fn fail_job_policy_exits_non_zero_after_rollback() {
        let n = Node::new();
        let out = with_fault(&n, 51, "mission-critical", "write-error:rmem_max", "3000");
        // Rolled back, the node consistent: the refusal status (issue 23
        // item 4), which hookrun answers with a requeue-hold, not a drain.
        assert_eq!(
            out.status.code(),
            Some(qoslane::exit_code::REFUSED),
            "{}",
            stderr(&out)
        );
        assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
        assert_eq!(n.last_audit("prolog")["outcome"], "rolled_back");
    }

    #[test]
    fn a_value_that_reads_back_wrong_is_rolled_back() {
        let n = Node::new();
        let out = with_fault(&n, 210, "high", "misread", "3000");
        ok(&out);
        let a = n.last_audit("prolog");
        assert_eq!(a["outcome"], "rolled_back", "{a}");
        assert!(a["error"].as_str().unwrap().contains("read back"), "{a}");
        assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    }

    #[test]
    fn a_hanging_write_does_not_overstay_and_is_undone() {
        let n = Node::new();
        let t = Instant::now();
        let out = with_fault(&n, 220, "mission-critical", "hang-write", "600");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "overstayed: {:?}",
            t.elapsed()
        );
        assert_eq!(
            out.status.code(),
            Some(1),
            "fail_job level: {}",
            stderr(&out)
        );
        let a = n.last_audit("prolog");
        assert!(a["error"].as_str().unwrap().contains("deadline"), "{a}");
        // The restore hung too: the journal stays and the next run undoes it.
        ok(&n.run(&["recover"], &[]));
        assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
        assert!(!n.journal_exists());
    }
}

/// A job whose level is refused under `on_failure: continue` runs on the
/// baseline: its TaskProlog unsets qoslane's variables and tells it so with
/// Slurm's `print` line, and the Epilog removes the notice.
#[cfg(feature = "fault-injection")]
#[test]
fn a_job_on_the_baseline_is_told_why() {
    let n = Node::new();
    let out = n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "5"),
            ("FAKE_QOS", "high"),
            ("QOSLANE_FAULT", "write-error:rmem_max"),
        ],
    );
    ok(&out);
    assert_eq!(n.last_audit("prolog")["outcome"], "rolled_back");
    // A task here may carry another node's grant: srun passes the batch
    // step's environment (exported by the TaskProlog of the node that
    // granted) to every node of the job. This node granted nothing: unset.
    let tp = n.task_prolog(5, &[("UCX_IB_SL", "2"), ("QOSLANE_LEVEL", "high")]);
    let text = String::from_utf8_lossy(&tp.stdout);
    assert!(Node::exports(&tp).is_empty(), "{text}");
    assert_eq!(Node::unsets(&tp), OUR_VARIABLES, "{text}");
    let prints: Vec<&str> = text.lines().filter(|l| l.starts_with("print ")).collect();
    assert_eq!(prints.len(), 1, "{text}");
    assert!(
        prints[0].starts_with("print qoslane: QoS high: level high was not granted (")
            && prints[0].ends_with("); the job runs without its SL"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("{}\n", prints[0])),
        "unset first: {text}"
    );
    ok(&n.epilog(5));
    assert!(!n.path("/run/qoslane/notices/5").exists());
    let tp = n.task_prolog(5, &[]);
    assert!(
        !String::from_utf8_lossy(&tp.stdout).contains("print "),
        "notice removed"
    );
}

/// Regression: the guide said exit 64 (a drained node); then that the exit
/// follows `on_failure`. The code exits 0 even under `fail_job`: before the
/// job is known nothing can be requeued, and a non-zero Prolog would drain
/// the node for a fault of the hook wiring. The failure is audited.
#[test]
fn a_hook_without_slurm_job_id_is_an_audited_failure_that_never_drains() {
    for mapping in [
        util::MAPPING.to_owned(),
        util::MAPPING.replace("on_failure: continue", "on_failure: fail_job"),
    ] {
        let n = Node::with_mapping(&mapping);
        for hook in ["prolog", "epilog"] {
            let out = n.run(&[hook], &[]);
            assert_eq!(out.status.code(), Some(0), "{hook}: {}", stderr(&out));
            assert!(stderr(&out).contains("SLURM_JOB_ID is not set"), "{hook}");
            let a = n.last_audit(hook);
            assert_eq!(a["outcome"], "failed", "{hook}");
            assert_eq!(
                a["error"],
                "SLURM_JOB_ID is not set: run this as a Slurm hook"
            );
        }
        assert_eq!(n.settings(), (BASE_TOS.to_owned(), BASE_RMEM.to_owned()));
    }
}

/// The fixture mapping with `on_unknown_qos: fail_job`.
fn refusing_unknown_qos() -> String {
    util::MAPPING.replace(
        "on_failure: continue\n",
        "on_failure: continue\non_unknown_qos: fail_job\n",
    )
}

/// A squeue slower than half the deadline (a busy controller before Slurm
/// 26.05): the QoS cannot be learnt.
const SLOW_SQUEUE: &[(&str, &str)] = &[("FAKE_SQUEUE_SLEEP", "30"), ("QOSLANE_TIMEOUT_MS", "700")];

/// Regression (issue 23, item 3): on Slurm before 26.05 a squeue slower
/// than half the deadline quietly gave a mission-critical job the default
/// level, audited `applied`, its output silent. `on_unknown_qos` decides:
/// `default_level` grants the default level and tells the job;
/// `fail_job` refuses it (exit 1: Slurm requeues it). Either way the
/// fallback is counted and audited with its reason.
#[test]
fn a_job_whose_qos_cannot_be_learnt_is_told_and_on_unknown_qos_decides() {
    // default_level (the default): granted the default level, told.
    let n = Node::new();
    ok(&n.prolog_env(21, "mission-critical", SLOW_SQUEUE));
    let a = n.last_audit("prolog");
    assert_eq!(
        (
            a["outcome"].as_str(),
            a["level"].as_str(),
            a["qos_source"].as_str()
        ),
        (Some("applied"), Some("normal"), Some("default")),
        "{a}"
    );
    let tp = n.task_prolog(21, &[]);
    let text = String::from_utf8_lossy(&tp.stdout);
    assert_eq!(Node::exports(&tp)["QOSLANE_LEVEL"], "normal", "{text}");
    let prints: Vec<&str> = text.lines().filter(|l| l.starts_with("print ")).collect();
    assert_eq!(prints.len(), 1, "{text}");
    assert!(
        prints[0].starts_with("print qoslane: QoS unknown (squeue: ")
            && prints[0].ends_with("): the job runs at the default level normal"),
        "{text}"
    );
    assert!(
        n.textfile()
            .contains("qoslane_qos_fallbacks_total{reason=\"squeue_slow\"} 1\n")
    );

    // fail_job: refused, nothing granted, the reason in the audit line.
    let n = Node::with_mapping(&refusing_unknown_qos());
    let out = n.prolog_env(22, "mission-critical", SLOW_SQUEUE);
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "{}",
        stderr(&out)
    );
    let a = n.last_audit("prolog");
    assert_eq!(a["outcome"], "failed", "{a}");
    assert_eq!(a["qos_source"], "default", "{a}");
    let err = a["error"].as_str().unwrap_or_default();
    assert!(
        err.starts_with("QoS unknown: squeue: ")
            && err.ends_with("on_unknown_qos: fail_job refuses the job"),
        "{a}"
    );
    assert!(n.records().is_empty());
    assert_eq!(n.settings(), settings(BASE_TOS, BASE_RMEM));
    assert!(
        n.textfile()
            .contains("qoslane_qos_fallbacks_total{reason=\"squeue_slow\"} 1\n")
    );
    // A QoS that is learnt is granted as ever.
    ok(&n.prolog(23, "mission-critical"));
    assert_eq!(n.last_audit("prolog")["level"], "mission-critical");
}

/// Regression (issue 23, item 3): a node with an invalid mapping and no
/// last-known-good copy granted nothing, told the job "QoS unknown: level
/// its level was not granted", audited no QoS although squeue knew it, and
/// health exited 0. Now the audit has the QoS, the notice reads, the
/// installed file's `on_unknown_qos` (read even from an invalid file)
/// decides whether the job is refused, and health drains the node.
#[test]
fn a_node_without_a_usable_mapping_refuses_per_on_unknown_qos_and_health_drains() {
    let n = Node::with_mapping("default_level: normal\nlevels: [\n");
    ok(&n.prolog(31, "high"));
    let a = n.last_audit("prolog");
    assert_eq!(
        (
            a["outcome"].as_str(),
            a["qos"].as_str(),
            a["qos_source"].as_str()
        ),
        (Some("failed"), Some("high"), Some("squeue")),
        "{a}"
    );
    let tp = n.task_prolog(31, &[]);
    let text = String::from_utf8_lossy(&tp.stdout);
    let prints: Vec<&str> = text.lines().filter(|l| l.starts_with("print ")).collect();
    assert_eq!(prints.len(), 1, "{text}");
    assert!(
        prints[0].starts_with("print qoslane: QoS high: no level was granted (")
            && prints[0].ends_with("); the job runs without an SL"),
        "{text}"
    );
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    // Regression (issue 39, item 2): the line (hookrun's drain reason) said
    // "jobs run on the baseline" of a node it drains, and its fix came last,
    // past the 200 bytes of the reason. The fix first; no job runs here.
    let first = said.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "qoslane: no usable mapping: install a valid one (`qoslane validate`, then `qoslane sync`); "
        ) && first.contains("without its SL (on_unknown_qos: default_level)")
            && first.ends_with("so the node is drained")
            && !said.contains("jobs run on the baseline"),
        "{said}"
    );

    // The broken file says fail_job: every job is refused.
    let n = Node::with_mapping("default_level: normal\non_unknown_qos: fail_job\nlevels: 3\n");
    let out = n.prolog(32, "high");
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "{}",
        stderr(&out)
    );
    assert_eq!(n.last_audit("prolog")["qos"], "high");
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("every job is refused (on_unknown_qos: fail_job)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Issue 34 items 2 and 3: a job its Prolog refuses (a `fail_job` level not
/// granted here) was requeue-held by hookrun for ever, and an srun's, which
/// cannot be requeued, drained the node. Now the Prolog leaves the node as
/// it was, prints its reason first on stdout (hookrun puts it in the job's
/// `AdminComment` and requeues the job: hookrun's `prolog::a_refusal_*`)
/// and leaves it for the TaskProlog: a job that could not be requeued runs
/// its tasks here, and each fails with the reason as a `print` line. A
/// Prolog that grants the job (back on this node, the level carried again)
/// and the Epilog take the refusal away.
#[test]
fn a_refused_job_says_why_on_stdout_and_its_tasks_fail_with_the_reason() {
    let n = Node::new();
    // rmem_max (a setting of mission-critical: fail_job) cannot be written:
    // health records the level as not granted.
    std::fs::remove_file(n.path(util::RMEM)).unwrap();
    std::fs::create_dir(n.path(util::RMEM)).unwrap();
    let _ = n.run(&["health"], &[]);
    let out = n.prolog_env(7, "mission-critical", &[("SLURMD_NODENAME", "n3")]);
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "{}",
        stderr(&out)
    );
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stdout: {said}");
    let reason = lines[0];
    assert!(
        reason
            .starts_with("qoslane: level mission-critical (QoS mission-critical) refused on n3: ")
            && reason.contains("rmem_max cannot be written"),
        "{reason}"
    );
    // No level applied: the node as it was.
    assert!(n.records().is_empty(), "{:?}", n.records());
    assert_eq!(n.get(TOS), BASE_TOS);

    // The job's task (an srun hookrun could not requeue) fails, told why.
    let tp = n.task_prolog(7, &[]);
    assert_eq!(tp.status.code(), Some(1), "{}", stderr(&tp));
    let text = String::from_utf8_lossy(&tp.stdout).into_owned();
    assert!(Node::exports(&tp).is_empty(), "{text}");
    assert!(text.contains("unset UCX_IB_SL\n"), "{text}");
    assert_eq!(
        text.lines().last(),
        Some(format!("print {reason}").as_str())
    );
    // Another job's task is not touched by it.
    ok(&n.task_prolog(8, &[]));

    // The level carried again, the job back on this node: granted, the
    // stale refusal gone.
    std::fs::remove_dir(n.path(util::RMEM)).unwrap();
    std::fs::write(n.path(util::RMEM), format!("{BASE_RMEM}\n")).unwrap();
    ok(&n.run(&["health"], &[]));
    let out = n.prolog(7, "mission-critical");
    ok(&out);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let tp = n.task_prolog(7, &[]);
    ok(&tp);
    assert_eq!(Node::exports(&tp)["UCX_IB_SL"], "3");
    assert!(!String::from_utf8_lossy(&tp.stdout).contains("print "));
    ok(&n.epilog(7));

    // Refused again, then its Epilog: the refusal goes with the job.
    std::fs::remove_file(n.path(util::RMEM)).unwrap();
    std::fs::create_dir(n.path(util::RMEM)).unwrap();
    let _ = n.run(&["health"], &[]);
    let out = n.prolog(9, "mission-critical");
    assert_eq!(out.status.code(), Some(qoslane::exit_code::REFUSED));
    assert_eq!(n.task_prolog(9, &[]).status.code(), Some(1));
    ok(&n.epilog(9));
    let tp = n.task_prolog(9, &[]);
    ok(&tp);
    assert!(!String::from_utf8_lossy(&tp.stdout).contains("print "));
}
