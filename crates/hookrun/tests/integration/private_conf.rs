//! A `hookrun.conf` the job's user cannot read (mode 0600, common under
//! /etc/slurm). The TaskProlog runs as that user: it must run with the
//! defaults, not fail every task of every job; `hookrun list` and the health
//! check say what is wrong, and health takes the node out of service until the
//! file is readable by every user.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::{Fixture, NODE_IDLE, Run};

/// The job's user: anyone but root (`nobody`).
const JOB_USER: u32 = 65534;

fn health(fx: &Fixture) -> Run {
    fx.hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run()
}

#[test]
fn a_private_conf_never_fails_a_task_and_drains_the_node_until_fixed() {
    if !crate::util::reachable_by_others() {
        return;
    }
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    let conf = fx.write("etc/slurm/hookrun.conf", "hook_timeout = 30s\n", 0o600);
    fx.hook(
        "task-prolog",
        "10-qoslane",
        "echo 'export UCX_IB_SL=3'\necho 'print qoslane: level high'",
    );
    fx.recording_hook("health", "10-ok", "exit 0");

    // The TaskProlog as the job's user: its protocol lines, exit 0.
    let run = fx.hookrun_as(JOB_USER).args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "export UCX_IB_SL=3\nprint qoslane: level high\n"
    );
    assert!(
        run.has_line("hookrun.conf: Permission denied")
            && run.has_line("running with the built-in defaults"),
        "{}",
        run.stderr
    );

    // `hookrun list` (root) reports it and fails.
    let run = fx.hookrun().args(["list"]).run();
    assert_eq!(run.code, Some(4), "{}\n{}", run.stdout, run.stderr);
    let flagged = format!(
        "# configuration error: {}: not readable by other users (mode 600): \
         the TaskProlog runs as the job's user",
        conf.display()
    );
    assert!(run.stdout.contains(&flagged), "{}", run.stdout);

    // Health drains the node with the reason, runs no check (a passing one
    // would resume it) and exits 1.
    let run = health(&fx);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(fx.ran().is_empty(), "{:?}", fx.ran());
    let updates = fx.scontrol_updates();
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0][2], "state=drain");
    let reason = format!(
        "reason=hookrun: {}: not readable by other users (mode 600)",
        conf.display()
    );
    assert!(updates[0][3].starts_with(&reason), "{updates:?}");
    assert!(
        run.stdout
            .contains("not readable by other users (mode 600)"),
        "slurmd logs the reason from stdout: {}",
        run.stdout
    );

    // Fixed: list is clean, health runs its checks and resumes its own drain.
    fs::set_permissions(&conf, fs::Permissions::from_mode(0o644)).expect("chmod");
    let run = fx.hookrun().args(["list"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    let run = health(&fx);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-ok"]);
    assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
}
