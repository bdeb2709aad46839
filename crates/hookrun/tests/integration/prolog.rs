//! The Prolog: required/optional hooks and the two failure policies.

use crate::util::Fixture;

#[test]
fn required_failure_under_drain_exits_1_and_later_hooks_do_not_run() {
    let fx = Fixture::new();
    fx.recording_hook("prolog", "10-ok", "");
    fx.recording_hook("prolog", "20-broken", "echo 'no GPU found' >&2; exit 7");
    fx.recording_hook("prolog", "30-after", "");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-ok", "20-broken"]);
    assert!(
        run.has_line("hookrun[prolog] 20-broken> no GPU found"),
        "{}",
        run.stderr
    );
    assert!(
        run.has_line("hookrun[prolog] 20-broken: failed in "),
        "{}",
        run.stderr
    );
    assert!(run.has_line(": exit status 7"), "{}", run.stderr);
    assert!(
        run.has_line("hookrun[prolog] 30-after: skipped: required hook 20-broken failed"),
        "{}",
        run.stderr
    );
    assert!(run.has_line("Slurm drains the node"), "{}", run.stderr);
    assert!(fx.scontrol_calls().is_empty(), "drain policy calls nothing");
}

#[test]
fn optional_failure_is_logged_and_counted_only() {
    let fx = Fixture::new();
    fx.recording_hook("prolog", "10-flaky.optional", "exit 1");
    fx.recording_hook("prolog", "20-ok", "");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-flaky.optional", "20-ok"]);
    assert!(
        run.has_line("10-flaky.optional: failed in ")
            && run.has_line("(optional hook: not acted on)"),
        "{}",
        run.stderr
    );
    assert_eq!(fx.runs("prolog", "10-flaky.optional", "failed"), Some(1.0));
}

#[test]
fn success_is_logged_one_line_per_hook() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-qoslane", "");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0));
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("hookrun[prolog] 10-qoslane: "))
        .expect("result line");
    assert!(
        line.starts_with("hookrun[prolog] 10-qoslane: ok in "),
        "{line}"
    );
    assert!(line.ends_with(" ms"), "{line}");
}

#[test]
fn requeue_policy_holds_the_job_and_keeps_the_node() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.recording_hook("prolog", "10-broken", "exit 1");
    fx.recording_hook("prolog", "20-after", "");
    let run = fx
        .hookrun()
        .args(["prolog", "--on-failure", "requeue"])
        .env("SLURM_JOB_ID", "4242")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.scontrol_calls(), [["requeuehold", "4242"]]);
    assert_eq!(fx.ran(), ["10-broken"]);
    assert!(run.has_line("job 4242 requeued and held"), "{}", run.stderr);
}

#[test]
fn requeue_that_fails_falls_back_to_drain() {
    let fx = Fixture::new();
    fx.fake_scontrol(1);
    fx.hook("prolog", "10-broken", "exit 1");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("HOOKRUN_ON_FAILURE", "requeue")
        .env("SLURM_JOB_ID", "77")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    // The hold, then (issue 23 item 4) the drain with a reason naming the
    // hook; every scontrol call exits 1 here, so Slurm's "Prolog error" it is.
    assert_eq!(
        fx.scontrol_calls(),
        [
            vec!["requeuehold", "77"],
            vec![
                "update",
                "nodename=c1",
                "state=drain",
                "reason=hookrun: prolog 10-broken: exit status 1"
            ]
        ]
    );
    assert!(
        run.has_line("requeue-hold of job 77 failed"),
        "{}",
        run.stderr
    );
    assert!(run.has_line("the node drains"), "{}", run.stderr);
}

#[test]
fn requeue_without_a_job_id_falls_back_to_drain() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.hook("prolog", "10-broken", "exit 1");
    let run = fx
        .hookrun()
        .args(["prolog", "--on-failure", "requeue"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    // No hold without a job id; (issue 23 item 4) the drain names the hook.
    assert_eq!(
        fx.scontrol_calls(),
        [[
            "update",
            "nodename=c1",
            "state=drain",
            "reason=hookrun: prolog 10-broken: exit status 1"
        ]]
    );
    assert!(run.has_line("SLURM_JOB_ID is not set"), "{}", run.stderr);
}

#[test]
fn requeue_with_scontrol_missing_falls_back_to_drain() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-broken", "exit 1");
    let run = fx
        .hookrun()
        .args(["prolog", "--on-failure", "requeue"])
        .env("SLURM_JOB_ID", "5")
        .run();
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    assert!(run.has_line("could not start"), "{}", run.stderr);
}

#[test]
fn policy_from_the_config_file() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.conf("# site policy\non_failure = requeue\n");
    fx.hook("prolog", "10-broken", "exit 1");
    let run = fx.hookrun().args(["prolog"]).env("SLURM_JOB_ID", "9").run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.scontrol_calls(), [["requeuehold", "9"]]);

    // A flag beats the file.
    let run = fx
        .hookrun()
        .args(["prolog", "--on-failure", "drain"])
        .env("SLURM_JOB_ID", "9")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
}

#[test]
fn a_bad_config_file_is_a_usage_error_naming_the_line() {
    let fx = Fixture::new();
    fx.conf("on_failure = requeue\non_falure = drain\n");
    fx.recording_hook("prolog", "10-ok", "");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.has_line("hookrun.conf:2: unknown key \"on_falure\""),
        "{}",
        run.stderr
    );
    assert!(fx.ran().is_empty(), "no hook runs on a bad configuration");
}

#[test]
fn hooks_get_the_phase_the_environment_and_no_stdin() {
    let fx = Fixture::new();
    let out = fx.path("seen");
    fx.hook(
        "prolog",
        "10-env",
        &format!(
            "read line; echo \"read=$? phase=$HOOKRUN_PHASE job=$SLURM_JOB_ID path=${{PATH-unset}}\" > '{}'",
            out.display()
        ),
    );
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "31")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let seen = std::fs::read_to_string(out).expect("hook wrote");
    // stdin is /dev/null (read hits EOF at once); the environment is inherited
    // as is — hookrun adds no PATH of its own.
    assert!(
        seen.starts_with("read=1 phase=prolog job=31 path="),
        "{seen}"
    );
}

#[test]
fn a_hook_that_cannot_be_executed_is_a_failure() {
    let fx = Fixture::new();
    fx.write(
        "etc/slurm/prolog.d/10-bad-interpreter",
        "#!/nonexistent/interpreter\n",
        0o755,
    );
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.has_line("10-bad-interpreter: failed in"),
        "{}",
        run.stderr
    );
    assert!(run.has_line("could not start"), "{}", run.stderr);
}

/// Issue 34 item 2 (was issue 23 item 4's requeue-hold, which left the
/// job held for ever): a hook that refuses the job (exit 100, "the node is
/// fine") gets it requeued — pending again, not held, Slurm starts it where
/// it can — with its first line in the job's `AdminComment`, and the node
/// stays in service, under the built-in defaults (`on_failure = drain`,
/// where a failure drains). Later hooks do not run; the refusal is counted.
#[test]
fn a_refusal_requeues_the_job_with_the_reason_and_keeps_the_node_under_the_defaults() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(crate::util::NODE_IDLE);
    fx.recording_hook(
        "prolog",
        "10-qoslane",
        "echo 'qoslane: level mission-critical not carried on c1 (SL 3 -> VL 15)'; \
         echo 'qoslane: error: prolog failed (refused)' >&2; exit 100",
    );
    fx.recording_hook("prolog", "20-after", "");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "4242")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_calls(),
        [
            vec![
                "update",
                "JobId=4242",
                "AdminComment=qoslane: level mission-critical not carried on c1 (SL 3 -> VL 15)"
            ],
            vec!["requeue", "4242"]
        ]
    );
    assert_eq!(fx.ran(), ["10-qoslane"]);
    assert!(
        run.has_line("hookrun[prolog] 10-qoslane: refused in "),
        "{}",
        run.stderr
    );
    assert!(
        run.has_line(
            "required hook 10-qoslane refused the job: job 4242 requeued, pending (not held"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.has_line("20-after: skipped: required hook 10-qoslane refused the job"),
        "{}",
        run.stderr
    );
    assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
    assert_eq!(fx.runs("prolog", "10-qoslane", "refused"), Some(1.0));
    assert_eq!(fx.runs("prolog", "10-qoslane", "failed"), Some(0.0));
}

/// No call of a refusal is a drain or a hold, whatever the policy.
fn assert_no_drain_nor_hold(fx: &Fixture) {
    for call in fx.scontrol_calls() {
        assert!(
            !call
                .iter()
                .any(|a| a.starts_with("state=") || a == "requeuehold"),
            "a refusal drained or held: {call:?}"
        );
    }
}

/// Issue 34 item 3: an srun's or salloc's job cannot be requeued (slurmctld
/// answers "Only batch jobs are accepted"; before, the Prolog failed and
/// the node drained). hookrun exits 0: the node stays in service, the job
/// keeps the reason in its AdminComment and the refusing hook's TaskProlog
/// fails its tasks (qoslane's: `hooks::a_refused_srun_job_*`).
#[test]
fn a_refused_job_that_cannot_be_requeued_leaves_the_node_in_service() {
    for policy in ["drain", "requeue"] {
        let fx = Fixture::new();
        fx.fake_scontrol(0);
        fx.set_node(crate::util::NODE_IDLE);
        fx.scontrol_verb_fails(
            "requeue",
            1,
            "Only batch jobs are accepted or processed for job 77",
        );
        fx.hook(
            "prolog",
            "10-qoslane",
            "echo 'qoslane: level mc refused'; exit 100",
        );
        let run = fx
            .hookrun()
            .args(["prolog", "--on-failure", policy])
            .env("SLURM_JOB_ID", "77")
            .env("SLURMD_NODENAME", "c1")
            .run();
        assert_eq!(run.code, Some(0), "{policy}: {}", run.stderr);
        assert_eq!(
            fx.scontrol_calls(),
            [
                vec![
                    "update",
                    "JobId=77",
                    "AdminComment=qoslane: level mc refused"
                ],
                vec!["requeue", "77"]
            ],
            "{policy}"
        );
        assert_no_drain_nor_hold(&fx);
        assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
        assert!(
            run.has_line("job 77 not requeued (")
                && run.has_line("Only batch jobs are accepted")
                && run.has_line("the refusing hook's TaskProlog fails the job's tasks"),
            "{policy}: {}",
            run.stderr
        );
        assert_eq!(fx.runs("prolog", "10-qoslane", "refused"), Some(1.0));
    }
}

/// scontrol unreachable (every call fails), missing, or no job id: still
/// no drain, exit 0 — the TaskProlog path.
#[test]
fn a_refusal_with_scontrol_failing_or_missing_or_no_job_id_never_drains() {
    // Every call fails (the controller down).
    let fx = Fixture::new();
    fx.fake_scontrol(1);
    fx.set_node(crate::util::NODE_IDLE);
    fx.hook("prolog", "10-qoslane", "exit 100");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "5")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_calls(),
        [
            vec![
                "update",
                "JobId=5",
                "AdminComment=hookrun: prolog 10-qoslane refused the job"
            ],
            vec!["requeue", "5"]
        ]
    );
    assert_no_drain_nor_hold(&fx);
    assert!(
        run.has_line("its AdminComment was not set") && run.has_line("job 5 not requeued"),
        "{}",
        run.stderr
    );

    // scontrol missing.
    let fx = Fixture::new();
    fx.hook("prolog", "10-qoslane", "exit 100");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "5")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.has_line("could not start"), "{}", run.stderr);

    // No job id: nothing to requeue or tell, nothing drained (before:
    // exit 3 and a drain).
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(crate::util::NODE_IDLE);
    fx.hook("prolog", "10-qoslane", "echo 'level refused' >&2; exit 100");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(fx.scontrol_calls().is_empty(), "{:?}", fx.scontrol_calls());
    assert!(
        run.has_line("but SLURM_JOB_ID is not set: nothing to requeue"),
        "{}",
        run.stderr
    );
}

/// Issue 23 item 4: a broken hook still fails the Prolog, and the node is
/// drained with a reason naming the hook and its cause, not Slurm's bare
/// "Prolog error" (slurmctld keeps a drained node's reason when the
/// Prolog's status arrives: seen on 22.05, 24.11 and 26.05).
#[test]
fn a_broken_hook_drains_with_a_reason_naming_it() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(crate::util::NODE_IDLE);
    fx.hook("prolog", "20-broken", "echo 'no GPU found' >&2; exit 7");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "12")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_calls(),
        [[
            "update",
            "nodename=c1",
            "state=drain",
            "reason=hookrun: prolog 20-broken: no GPU found"
        ]]
    );
    assert!(
        fx.node()
            .contains("Reason=hookrun: prolog 20-broken: no GPU found"),
        "{}",
        fx.node()
    );
    assert!(run.has_line("drained node c1"), "{}", run.stderr);
}

/// A refusal means something only in the Prolog: in the Epilog, exit 100
/// is a failure like any non-zero status.
#[test]
fn exit_100_outside_the_prolog_is_a_failure() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.hook("epilog", "50-clean", "exit 100");
    let run = fx
        .hookrun()
        .args(["epilog"])
        .env("SLURM_JOB_ID", "12")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    // No requeue-hold: a failed Epilog drains (issue 39), it holds no job.
    assert!(
        !fx.scontrol_calls()
            .iter()
            .flatten()
            .any(|a| a.contains("requeue")),
        "{:?}",
        fx.scontrol_calls()
    );
    assert_eq!(fx.runs("epilog", "50-clean", "failed"), Some(1.0));
    assert!(
        run.has_line("a refusal only means something in the prolog"),
        "{}",
        run.stderr
    );
}
