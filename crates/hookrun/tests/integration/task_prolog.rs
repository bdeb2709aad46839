//! The TaskProlog: stdout carries Slurm's protocol and nothing else.

use crate::util::Fixture;

#[test]
fn protocol_lines_pass_through_in_order_and_everything_else_goes_to_stderr() {
    let fx = Fixture::new();
    fx.hook(
        "task-prolog",
        "10-qoslane",
        r#"echo "export UCX_IB_SL=3"
echo "checking level"
echo "print qoslane: level high"
echo "export FROM_STDERR=1" >&2
echo " export INDENTED=1"
echo "exported=2""#,
    );
    fx.hook(
        "task-prolog",
        "20-nccl",
        r#"echo "unset NCCL_IB_SL"
echo "export NCCL_IB_SL=3"
printf 'export NO_NEWLINE=1'"#,
    );
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "export UCX_IB_SL=3\nprint qoslane: level high\nunset NCCL_IB_SL\nexport NCCL_IB_SL=3\nexport NO_NEWLINE=1\n"
    );
    for junk in [
        "hookrun[task-prolog] 10-qoslane> checking level",
        "hookrun[task-prolog] 10-qoslane> export FROM_STDERR=1",
        "hookrun[task-prolog] 10-qoslane>  export INDENTED=1",
        "hookrun[task-prolog] 10-qoslane> exported=2",
    ] {
        assert!(run.has_line(junk), "missing {junk:?} in\n{}", run.stderr);
    }
    // Nothing on stderr is an instruction either (slurmstepd may read both).
    for line in run.stderr.lines() {
        for prefix in ["export ", "unset ", "print "] {
            assert!(
                !line.starts_with(prefix),
                "protocol-looking stderr line {line:?}"
            );
        }
    }
}

#[test]
fn a_failed_required_task_prolog_hook_fails_the_task_and_stops() {
    let fx = Fixture::new();
    fx.hook("task-prolog", "10-broken", "echo 'export A=1'; exit 1");
    fx.recording_hook("task-prolog", "20-after", "echo 'export B=1'");
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(run.stdout, "export A=1\n");
    assert!(fx.ran().is_empty());
    assert!(
        run.has_line("Slurm fails this task (the node is not drained)"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_failed_optional_task_prolog_hook_exits_0() {
    let fx = Fixture::new();
    fx.hook("task-prolog", "10-broken.optional", "exit 1");
    fx.hook("task-prolog", "20-ok", "echo 'export B=1'");
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "export B=1\n");
}

#[test]
fn the_job_users_environment_cannot_redirect_the_task_prolog() {
    // The TaskProlog runs with the user's environment: HOOKRUN_* there must not
    // pick other hooks or configuration.
    let fx = Fixture::new();
    fx.hook("task-prolog", "10-site", "echo 'export SITE=1'");
    let elsewhere = Fixture::new();
    elsewhere.hook("task-prolog", "10-user", "echo 'export UCX_IB_SL=0'");
    let run = fx
        .hookrun()
        .env("SLURM_SCRIPT_CONTEXT", "prolog_task")
        .env("HOOKRUN_HOOK_DIR", elsewhere.path("etc/slurm"))
        .env("HOOKRUN_HOOK_TIMEOUT", "nonsense")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "export SITE=1\n");
    assert!(
        run.has_line("ignoring HOOKRUN_HOOK_DIR, HOOKRUN_HOOK_TIMEOUT"),
        "{}",
        run.stderr
    );
}
