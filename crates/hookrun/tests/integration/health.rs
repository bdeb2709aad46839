//! Health checks: drain on failure, resume only what hookrun drained.

use crate::util::{Fixture, NODE_IDLE, node_drained};

fn update(node: &str, rest: &[&str]) -> Vec<String> {
    let mut call = vec!["update".to_owned(), format!("nodename={node}")];
    call.extend(rest.iter().map(|s| (*s).to_owned()));
    call
}

#[test]
fn a_failing_check_drains_the_node_with_its_first_output_line() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.hook(
        "health",
        "10-ib",
        "echo 'port mlx5_0/1 is DOWN'\necho 'details follow'\nexit 1",
    );
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_updates(),
        [update(
            "c1",
            &[
                "state=drain",
                "reason=hookrun: 10-ib: port mlx5_0/1 is DOWN"
            ]
        )]
    );
    assert!(fx.node().contains("State=IDLE+DRAIN"), "{}", fx.node());
    // slurmd logs a failed health check's stdout: the reason, one line.
    assert_eq!(run.stdout, "hookrun: 10-ib: port mlx5_0/1 is DOWN\n");
}

/// Regression (issue 39, item 2): a reason past 200 bytes was cut there,
/// mid-word and without a mark. It is cut after the last whole word that
/// fits, and ends with `…`.
#[test]
fn a_long_reason_is_cut_after_a_whole_word_with_an_ellipsis() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    let line = format!(
        "qoslane: install a valid mapping (qoslane validate, then qoslane sync); {}",
        "the mapping file is not valid YAML at line 3 column 7 ".repeat(4)
    );
    fx.hook("health", "10-qoslane", &format!("echo '{line}'\nexit 1"));
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let updates = fx.scontrol_updates();
    let reason = updates[0][3].strip_prefix("reason=").unwrap();
    assert!(reason.len() <= 200, "{} bytes: {reason}", reason.len());
    let kept = reason
        .strip_suffix('…')
        .unwrap_or_else(|| panic!("no … at the cut: {reason}"));
    let whole = format!("hookrun: 10-qoslane: {}", line.trim_end());
    assert!(whole.starts_with(kept), "{reason}");
    assert!(
        whole[kept.len()..].starts_with(' '),
        "cut after a whole word: {reason}"
    );
    assert!(kept.contains("qoslane sync"), "the fix kept: {reason}");
    assert_eq!(run.stdout, format!("{reason}\n"));
}

#[test]
fn every_check_runs_and_the_first_failure_names_the_drain() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.recording_hook("health", "10-disk", "echo '/tmp full' >&2; exit 1");
    fx.recording_hook("health", "20-mem", "exit 1");
    fx.recording_hook("health", "30-ok", "");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-disk", "20-mem", "30-ok"]);
    assert_eq!(
        fx.scontrol_updates(),
        [update(
            "c1",
            &["state=drain", "reason=hookrun: 10-disk: /tmp full"]
        )]
    );
}

#[test]
fn an_optional_check_failing_does_not_drain() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.hook("health", "10-advisory.optional", "echo 'fan slow'; exit 1");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(fx.scontrol_updates().is_empty());
}

#[test]
fn healthy_again_resumes_a_node_hookrun_drained() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    let flag = fx.path("broken");
    fx.hook(
        "health",
        "10-ib",
        &format!(
            "if [ -e '{}' ]; then echo 'port down'; exit 1; fi",
            flag.display()
        ),
    );

    std::fs::write(&flag, "").expect("break it");
    let sick = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(sick.code, Some(1), "{}", sick.stderr);
    assert!(
        fx.node().contains("Reason=hookrun: 10-ib: port down"),
        "{}",
        fx.node()
    );

    // The same failure again does not rewrite the reason (keeps its time).
    let still_sick = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(still_sick.code, Some(1));
    assert_eq!(fx.scontrol_updates().len(), 1, "{:?}", fx.scontrol_calls());

    std::fs::remove_file(&flag).expect("fix it");
    let healthy = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(healthy.code, Some(0), "{}", healthy.stderr);
    assert_eq!(healthy.stdout, "", "nothing on stdout when healthy");
    assert_eq!(
        fx.scontrol_updates().last(),
        Some(&update("c1", &["state=resume"]))
    );
    assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
    assert!(
        healthy.has_line("healthy: resumed node c1"),
        "{}",
        healthy.stderr
    );
}

/// Issue 23 item 4: a node a failed Prolog drained through hookrun (its
/// reason `hookrun: prolog HOOK: …`) is hookrun's own: a passing health
/// check resumes it.
#[test]
fn healthy_resumes_a_node_a_failed_prolog_drained_through_hookrun() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(&crate::util::node_drained(
        "hookrun: prolog 20-broken: no GPU found",
    ));
    fx.hook("health", "10-ib", "exit 0");
    let healthy = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(healthy.code, Some(0), "{}", healthy.stderr);
    assert_eq!(
        fx.scontrol_updates(),
        [update("c1", &["state=resume"])],
        "{:?}",
        fx.scontrol_calls()
    );
    assert!(fx.node().contains("State=IDLE "), "{}", fx.node());
}

#[test]
fn a_node_an_admin_drained_stays_drained_when_healthy() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(&node_drained("replacing DIMM B2, ticket 4711"));
    fx.hook("health", "10-ok", "");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        fx.scontrol_updates().is_empty(),
        "{:?}",
        fx.scontrol_calls()
    );
    assert!(
        run.has_line("stays drained: not drained by hookrun"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_node_slurm_drained_for_a_prolog_error_is_not_resumed() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(&node_drained("Prolog error"));
    fx.hook("health", "10-ok", "");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(fx.scontrol_updates().is_empty());
}

#[test]
fn an_admins_drain_reason_is_not_overwritten_when_unhealthy() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(&node_drained("maintenance"));
    fx.hook("health", "10-ib", "echo 'port down'; exit 1");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        fx.scontrol_updates().is_empty(),
        "{:?}",
        fx.scontrol_calls()
    );
    assert!(fx.node().contains("Reason=maintenance"));
    assert!(
        run.has_line("already drained by someone else"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_healthy_node_in_service_is_not_touched() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.hook("health", "10-ok", "");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.scontrol_calls(), [["show", "node", "-o", "c1"]]);
}

#[test]
fn without_slurmd_nodename_the_short_host_name_is_used() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.hook("health", "10-bad", "exit 1");
    let run = fx.hookrun().args(["health"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let uname = rustix::system::uname();
    let host = uname.nodename().to_string_lossy();
    let short = host.split('.').next().unwrap_or_default();
    assert_eq!(
        fx.scontrol_calls().first(),
        Some(&vec![
            "show".to_owned(),
            "node".to_owned(),
            "-o".to_owned(),
            short.to_owned()
        ])
    );
    assert_eq!(fx.scontrol_updates().len(), 1);
    assert_eq!(fx.scontrol_updates()[0][1], format!("nodename={short}"));
}

#[test]
fn an_unreadable_node_state_still_drains_an_unhealthy_node() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    // No node.txt: `show node` fails like it does for an unknown node.
    fx.hook("health", "10-bad", "echo 'bad'; exit 1");
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.has_line("draining anyway"), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_updates(),
        [update(
            "c1",
            &["state=drain", "reason=hookrun: 10-bad: bad"]
        )]
    );
}

#[test]
fn health_checks_that_cannot_be_read_drain_the_node() {
    // slurmd only logs HealthCheckProgram's exit status: the node itself must show it.
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.write("etc/slurm/health.d", "not a directory", 0o644);
    let run = fx
        .hookrun()
        .args(["health"])
        .env("SLURMD_NODENAME", "c1")
        .run();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    let updates = fx.scontrol_updates();
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0][2], "state=drain");
    assert!(
        updates[0][3].starts_with("reason=hookrun: ")
            && updates[0][3].ends_with("health.d: cannot read the health checks"),
        "{updates:?}"
    );
}

/// Issue 34 (measured with sdiag on real Slurm: every passing check cost
/// slurmctld a `show node`, the whole node table, on every node at every
/// interval): a passing check asks about the node only when a drain of
/// hookrun's may be in place. The first check on a node asks once (hookrun
/// keeps no record yet), the next ones ask nothing.
#[test]
fn a_passing_check_on_a_node_in_service_asks_once_then_nothing() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.hook("health", "10-ok", "");
    for _ in 0..3 {
        let run = fx
            .hookrun()
            .args(["health"])
            .env("SLURMD_NODENAME", "c1")
            .run();
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    assert_eq!(fx.scontrol_calls(), [["show", "node", "-o", "c1"]]);
}

/// A drain of hookrun's own is remembered on the node: after checks that
/// asked nothing, the health check's drain, a failed Prolog's and a failed
/// Epilog's are each resumed by the next passing check, which then asks
/// nothing again.
#[test]
fn every_drain_of_hookruns_is_resumed_after_checks_that_asked_nothing() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    let flag = fx.path("broken");
    let check = |fx: &Fixture| {
        fx.hookrun()
            .args(["health"])
            .env("SLURMD_NODENAME", "c1")
            .run()
    };
    fx.hook(
        "health",
        "10-ib",
        &format!(
            "if [ -e '{}' ]; then echo 'port down'; exit 1; fi",
            flag.display()
        ),
    );
    fx.hook(
        "prolog",
        "20-gpu",
        &format!(
            "if [ -e '{}' ]; then echo 'no GPU found'; exit 1; fi",
            flag.display()
        ),
    );
    fx.hook(
        "epilog",
        "30-restore",
        &format!(
            "if [ -e '{}' ]; then echo 'cannot restore'; exit 1; fi",
            flag.display()
        ),
    );
    assert_eq!(check(&fx).code, Some(0), "the first check asks once");
    for (phase, reason) in [
        ("health", "hookrun: 10-ib: port down"),
        ("prolog", "hookrun: prolog 20-gpu: no GPU found"),
        ("epilog", "hookrun: epilog 30-restore: cannot restore"),
    ] {
        let asked = fx.scontrol_calls().len();
        assert_eq!(check(&fx).code, Some(0));
        assert_eq!(
            fx.scontrol_calls().len(),
            asked,
            "{phase}: a passing check asked nothing"
        );
        std::fs::write(&flag, "").expect("break it");
        let broke = fx
            .hookrun()
            .args([phase])
            .env("SLURMD_NODENAME", "c1")
            .env("SLURM_JOB_ID", "7")
            .run();
        assert_eq!(broke.code, Some(1), "{phase}: {}", broke.stderr);
        assert!(
            fx.node().contains(&format!("Reason={reason}")),
            "{phase}: {}",
            fx.node()
        );
        std::fs::remove_file(&flag).expect("fix it");
        let healthy = check(&fx);
        assert_eq!(healthy.code, Some(0), "{}", healthy.stderr);
        assert!(
            fx.node().contains("State=IDLE "),
            "{phase}: resumed: {}",
            fx.node()
        );
        assert_eq!(
            fx.scontrol_updates().last(),
            Some(&update("c1", &["state=resume"])),
            "{phase}"
        );
    }
    let asked = fx.scontrol_calls().len();
    assert_eq!(check(&fx).code, Some(0));
    assert_eq!(
        fx.scontrol_calls().len(),
        asked,
        "in service again: nothing asked"
    );
}

/// An admin who resumes a node hookrun drained: the next passing check
/// asks once, finds no drain of hookrun's, and asks nothing after.
#[test]
fn a_node_an_admin_resumed_is_seen_once() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    let flag = fx.path("broken");
    fx.hook(
        "health",
        "10-ib",
        &format!(
            "if [ -e '{}' ]; then echo 'port down'; exit 1; fi",
            flag.display()
        ),
    );
    let check = || {
        fx.hookrun()
            .args(["health"])
            .env("SLURMD_NODENAME", "c1")
            .run()
    };
    std::fs::write(&flag, "").expect("break it");
    assert_eq!(check().code, Some(1));
    fx.set_node(NODE_IDLE); // `scontrol update nodename=c1 state=resume` by an admin
    std::fs::remove_file(&flag).expect("fix it");
    let asked = fx.scontrol_calls().len();
    assert_eq!(check().code, Some(0));
    assert_eq!(
        fx.scontrol_calls()[asked..],
        [vec!["show", "node", "-o", "c1"]],
        "asked once, resumed nothing"
    );
    assert_eq!(check().code, Some(0));
    assert_eq!(fx.scontrol_calls().len(), asked + 1, "then nothing");
}
