//! Deadlines, process groups and signals: nothing a hook starts outlives it.

use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal as NixSignal, pthread_sigmask};
use rustix::process::{Pid, Signal};

use crate::util::{Fixture, pid_from, wait_gone};

/// A hook that starts a background `sleep` (a grandchild of hookrun), records
/// both pids, then hangs.
fn hanging_hook(fx: &Fixture, phase: &str, name: &str, prelude: &str) {
    let pids = fx.path(name);
    fx.hook(
        phase,
        name,
        &format!(
            "{prelude}\n/bin/sleep 60 &\necho $! > '{bg}'\necho $$ > '{me}'\n/bin/sleep 60",
            bg = pids.with_extension("bg").display(),
            me = pids.with_extension("pid").display(),
        ),
    );
}

fn pids(fx: &Fixture, name: &str) -> (i32, i32) {
    let base = fx.path(name);
    (
        pid_from(&base.with_extension("pid")),
        pid_from(&base.with_extension("bg")),
    )
}

/// SIGTERM to hookrun, as slurmd at PrologEpilogTimeout; its exit status.
/// Not a speed test (CONTRIBUTING: bounds only prove "does not hang"): a
/// hook that hangs for 60 s must not keep hookrun alive for 5.
fn sigterm_and_wait(child: &mut std::process::Child) -> std::process::ExitStatus {
    let signalled = Instant::now();
    rustix::process::kill_process(Pid::from_child(child), Signal::TERM).expect("signal hookrun");
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(5),
            "hookrun did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_hanging_hook_is_killed_at_its_deadline_with_its_whole_group() {
    let fx = Fixture::new();
    hanging_hook(&fx, "prolog", "10-hang", "");
    fx.recording_hook("prolog", "20-after", "");
    let run = fx
        .hookrun()
        .args(["prolog", "--hook-timeout", "300ms", "--kill-grace", "200ms"])
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.elapsed >= Duration::from_millis(300),
        "{:?}",
        run.elapsed
    );
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    assert!(
        run.has_line("hookrun[prolog] 10-hang: timeout in ")
            && run.has_line("deadline of 300ms (hook_timeout) reached; process group killed"),
        "{}",
        run.stderr
    );
    let (hook, grandchild) = pids(&fx, "10-hang");
    assert!(
        wait_gone(hook, Duration::from_secs(2)),
        "hook {hook} survived"
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)),
        "background child {grandchild} survived"
    );
    assert!(
        fx.ran().is_empty(),
        "a timeout is a failure: the prolog stops"
    );
    assert_eq!(fx.runs("prolog", "10-hang", "timeout"), Some(1.0));
}

#[test]
fn a_hook_ignoring_sigterm_is_killed_after_the_grace() {
    let fx = Fixture::new();
    // `trap '' TERM` is inherited by the sleeps: only SIGKILL ends them.
    hanging_hook(&fx, "epilog", "10-stubborn", "trap '' TERM");
    let started = Instant::now();
    let run = fx
        .hookrun()
        .args(["epilog", "--hook-timeout", "200ms", "--kill-grace", "300ms"])
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "SIGKILL came before the grace: {:?}",
        started.elapsed()
    );
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    let (hook, grandchild) = pids(&fx, "10-stubborn");
    assert!(wait_gone(hook, Duration::from_secs(2)));
    assert!(wait_gone(grandchild, Duration::from_secs(2)));
}

#[test]
fn background_work_of_a_successful_hook_is_not_left_behind() {
    let fx = Fixture::new();
    let bg = fx.path("bg.pid");
    // Exits at once, leaving a sleep that still holds stdout open.
    fx.hook(
        "prolog",
        "10-forks",
        &format!("/bin/sleep 60 &\necho $! > '{}'\nexit 0", bg.display()),
    );
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.elapsed < Duration::from_secs(2),
        "hookrun waited for the background process: {:?}",
        run.elapsed
    );
    let grandchild = pid_from(&bg);
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)),
        "{grandchild} survived"
    );
}

#[test]
fn the_budget_caps_the_whole_run() {
    let fx = Fixture::new();
    fx.hook("epilog", "10-slow", "/bin/sleep 60");
    fx.recording_hook("epilog", "20-never", "");
    fx.recording_hook("epilog", "30-never.optional", "");
    let run = fx
        .hookrun()
        .args([
            "epilog",
            "--budget",
            "300ms",
            "--hook-timeout",
            "10s",
            "--kill-grace",
            "100ms",
        ])
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
    assert!(
        run.has_line("(what was left of the budget) reached"),
        "{}",
        run.stderr
    );
    assert!(
        run.has_line("hookrun[epilog] 20-never: skipped: budget of 300ms spent"),
        "{}",
        run.stderr
    );
    assert!(fx.ran().is_empty());
    assert_eq!(fx.runs("epilog", "20-never", "skipped"), Some(1.0));
    assert_eq!(fx.runs("epilog", "30-never.optional", "skipped"), Some(1.0));
}

#[test]
fn sigterm_to_hookrun_kills_the_running_hook_group_first() {
    let fx = Fixture::new();
    hanging_hook(&fx, "prolog", "10-hang", "");
    fx.recording_hook("prolog", "20-after", "");
    let mut child = fx.hookrun().args(["prolog"]).spawn();
    let (hook, grandchild) = pids(&fx, "10-hang");

    let status = sigterm_and_wait(&mut child);
    assert_eq!(status.code(), Some(143));
    assert!(
        wait_gone(hook, Duration::from_secs(2)),
        "hook {hook} survived"
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)),
        "background child {grandchild} survived"
    );
    let output = crate::util::output_of(child, "hookrun prolog");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("stopped by SIGTERM: the running hook's process group was killed"),
        "{stderr}"
    );
    assert!(fx.ran().is_empty(), "no hook starts after SIGTERM");
}

/// Regression (issue 24, suspected case, confirmed): hookrun started with
/// SIGTERM blocked (an inherited mask) never ran its handler — slurmd's
/// SIGTERM at PrologEpilogTimeout was ignored, and the hook, in its own
/// process group, outlived slurmd's SIGKILL of hookrun's. hookrun clears
/// the mask it inherited; its hooks start with none blocked.
#[test]
fn sigterm_reaches_hookrun_started_with_it_blocked() {
    let fx = Fixture::new();
    // The hook's own mask, read by the program it execs into (a shell's
    // children see the masks it sets around fork and wait, not its own).
    let mask = fx.path("hook.sigblk");
    fx.hook(
        "prolog",
        "05-mask",
        &format!(
            "exec /bin/sed -n 's/^SigBlk:[[:space:]]*//p' /proc/self/status > '{}'",
            mask.display()
        ),
    );
    hanging_hook(&fx, "prolog", "10-hang", "");
    // Started from a thread with SIGHUP blocked, as a test runner may leave
    // its threads (std's spawn passes the caller's mask on): what hookrun
    // is started with is the wrapper's mask, exactly SIGTERM, whatever the
    // runner's.
    let mut runner = SigSet::empty();
    pthread_sigmask(
        SigmaskHow::SIG_BLOCK,
        Some(&SigSet::from(NixSignal::SIGHUP)),
        Some(&mut runner),
    )
    .expect("block SIGHUP");
    let mut child = fx
        .hookrun_with_sigterm_blocked()
        .args(["prolog", "--hook-timeout", "30s"])
        .spawn();
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&runner), None).expect("the mask back");
    let (hook, grandchild) = pids(&fx, "10-hang");
    let status = sigterm_and_wait(&mut child);
    assert_eq!(status.code(), Some(143));
    assert!(
        wait_gone(hook, Duration::from_secs(2)),
        "hook {hook} survived"
    );
    assert!(
        wait_gone(grandchild, Duration::from_secs(2)),
        "background child {grandchild} survived"
    );
    let blocked = std::fs::read_to_string(&mask).expect("the hook wrote its mask");
    assert_eq!(blocked.trim(), "0000000000000000", "the hook's mask");
    let output = crate::util::output_of(child, "hookrun prolog");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "started with signals blocked: SIGTERM (15) (its stop signals read all the same"
        ),
        "{stderr}"
    );
}
