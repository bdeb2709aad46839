//! The Epilog: clean-up is never skipped.

use crate::util::Fixture;

#[test]
fn every_epilog_hook_runs_even_after_a_failure() {
    let fx = Fixture::new();
    fx.recording_hook("epilog", "10-first", "");
    fx.recording_hook("epilog", "20-broken", "exit 2");
    fx.recording_hook("epilog", "30-cleanup", "");
    fx.recording_hook("epilog", "40-also-broken.optional", "exit 2");
    fx.recording_hook("epilog", "50-last", "");
    let run = fx.hookrun().args(["epilog"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        fx.ran(),
        [
            "10-first",
            "20-broken",
            "30-cleanup",
            "40-also-broken.optional",
            "50-last"
        ]
    );
    assert!(
        run.has_line("required hook 20-broken failed"),
        "{}",
        run.stderr
    );
    assert!(run.has_line("\"Epilog error\""), "{}", run.stderr);
}

#[test]
fn only_optional_epilog_failures_exit_0() {
    let fx = Fixture::new();
    fx.recording_hook("epilog", "10-broken.optional", "exit 2");
    fx.recording_hook("epilog", "20-ok", "");
    let run = fx.hookrun().args(["epilog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}

#[test]
fn requeue_policy_does_not_apply_to_the_epilog() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.hook("epilog", "10-broken", "exit 1");
    let run = fx
        .hookrun()
        .args(["epilog", "--on-failure", "requeue"])
        .env("SLURM_JOB_ID", "12")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        !fx.scontrol_calls()
            .iter()
            .flatten()
            .any(|a| a.contains("requeue")),
        "a finished job is not requeued: {:?}",
        fx.scontrol_calls()
    );
}

/// Regression (issue 39, item 3): an Epilog that could not restore a
/// setting exited non-zero and Slurm drained the node with its bare
/// "Epilog error", which no passing health check resumes (not hookrun's
/// drain). hookrun drains with its own reason first (Slurm keeps a drained
/// node's reason), so the health check that passes once the setting is
/// restored resumes the node.
#[test]
fn a_failed_epilog_drains_with_hookruns_reason_and_a_passing_check_resumes() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(crate::util::NODE_IDLE);
    fx.hook(
        "epilog",
        "50-qoslane",
        "echo 'qoslane: epilog of job 12: rmem_max not restored'\nexit 1",
    );
    fx.hook("epilog", "60-cleanup", "exit 0");
    let run = fx
        .hookrun()
        .args(["epilog"])
        .env("SLURM_JOB_ID", "12")
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let reason = "hookrun: epilog 50-qoslane: qoslane: epilog of job 12: rmem_max not restored";
    assert_eq!(
        fx.scontrol_updates(),
        [vec![
            "update".to_owned(),
            "nodename=c1".to_owned(),
            "state=drain".to_owned(),
            format!("reason={reason}"),
        ]],
        "{}",
        run.stderr
    );
    assert!(fx.node().contains("State=IDLE+DRAIN"), "{}", fx.node());
    // The setting restored (qoslane's health releases the record): the
    // check passes and resumes the node hookrun drained.
    fx.hook("health", "10-qoslane", "exit 0");
    let healthy = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(healthy.code, Some(0), "{}", healthy.stderr);
    assert_eq!(
        fx.scontrol_updates().last().map(|u| u[2].as_str()),
        Some("state=resume"),
        "{:?}",
        fx.scontrol_calls()
    );
    assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
}
