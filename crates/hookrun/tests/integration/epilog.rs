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
        fx.scontrol_calls().is_empty(),
        "a finished job is not requeued"
    );
}
