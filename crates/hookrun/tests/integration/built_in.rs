//! A hook that is the running binary itself runs built in: a program that
//! embeds hookrun (`examples/embedded.rs`, as qoslane's binary does), run as
//! `hookrun`, forks and calls its own hook's entry instead of exec'ing itself
//! again; everything hookrun guarantees of a hook holds (its own process
//! group, its deadline and the kill of its whole group, the stop signals,
//! its output, its exit status). Every other hook is exec'd as before, and
//! the plain hookrun execs them all.

use std::time::Duration;

use rustix::process::{Pid, Signal};

use crate::util::{Fixture, Run, wait_for_line, wait_gone};

/// The fields of the hook's line (`built in: pid=… ppid=… pgid=… phase=…
/// argv0=… sigblk=… sigign=…`), by name; and how it ran.
fn how_it_ran(run: &Run, hook: &str) -> (String, Vec<(String, String)>) {
    let prefix = format!("{hook}> ");
    let line = run
        .stderr
        .lines()
        .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest.to_owned()))
        .unwrap_or_else(|| panic!("no line of {hook}:\n{}", run.stderr));
    let (how, fields) = line.split_once(": ").expect("how: fields");
    let fields = fields
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (how.to_owned(), fields)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or_else(|| panic!("no {name} in {fields:?}"), |(_, v)| v.as_str())
}

#[test]
fn the_binary_s_own_hook_runs_built_in_in_its_own_group_and_a_plain_hook_still_runs() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    let hook = fx.embedded_hook("prolog", "10-embedded");
    fx.recording_hook("prolog", "20-plain", "echo plain ran");
    let run = fx
        .embedded_hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "7")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (how, fields) = how_it_ran(&run, "10-embedded");
    assert_eq!(how, "built in", "{}", run.stderr);
    // A process of its own, a child of hookrun, leading its own group, with
    // the phase and the argv an exec would have given it.
    let pid = field(&fields, "pid");
    assert_eq!(field(&fields, "pgid"), pid, "its own process group");
    assert_ne!(field(&fields, "ppid"), pid);
    assert_eq!(field(&fields, "phase"), "prolog");
    assert_eq!(field(&fields, "argv0"), hook.display().to_string());
    // No signal blocked, as a spawned program's: hookrun's stop signals,
    // blocked into its signalfd, are not the hook's.
    assert_eq!(field(&fields, "sigblk"), "0000000000000000");
    assert_eq!(fx.ran(), ["20-plain"], "the plain hook still runs");
    assert!(run.has_line("20-plain> plain ran"), "{}", run.stderr);
    assert_eq!(fx.runs("prolog", "10-embedded", "ok"), Some(1.0));
    assert_eq!(fx.runs("prolog", "20-plain", "ok"), Some(1.0));
}

/// hookrun started with SIGTERM ignored (a wrapper's `trap '' TERM` before
/// its `exec`: an ignored disposition survives it) reads its own
/// SIGTERM all the same (blocked into its `signalfd`), and its built-in hook
/// gets SIGTERM at its default, as a spawned program does: the hook's
/// deadline is a SIGTERM to its group, and an ignored one would be lost
/// (only the SIGKILL after the grace). Before, the fork kept every ignored
/// disposition, SIGTERM's too.
#[test]
fn a_built_in_hook_gets_sigterm_at_its_default_whatever_hookrun_ignores() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.embedded_hook("prolog", "10-embedded");
    let run = fx
        .embedded_hookrun_with_sigterm_ignored()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "7")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (how, fields) = how_it_ran(&run, "10-embedded");
    assert_eq!(how, "built in", "{}", run.stderr);
    let ignored = u64::from_str_radix(field(&fields, "sigign"), 16).expect("SigIgn in hex");
    let sigterm = 1 << (Signal::TERM.as_raw() - 1);
    assert_eq!(ignored & sigterm, 0, "SIGTERM ignored: {}", run.stderr);
}

#[test]
fn the_plain_hookrun_execs_the_same_hook() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.embedded_hook("epilog", "10-embedded");
    let run = fx.hookrun().args(["epilog"]).env("SLURM_JOB_ID", "7").run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (how, fields) = how_it_ran(&run, "10-embedded");
    assert_eq!(how, "exec'd", "{}", run.stderr);
    assert_eq!(field(&fields, "phase"), "epilog");
}

#[test]
fn a_built_in_hook_past_its_deadline_is_killed_with_its_whole_group() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.embedded_hook("prolog", "10-embedded");
    fx.recording_hook("prolog", "20-after", "");
    let pids = fx.path("embedded.pids");
    let run = fx
        .embedded_hookrun()
        .args(["prolog", "--hook-timeout", "500ms", "--kill-grace", "200ms"])
        .env("SLURM_JOB_ID", "7")
        .env("EMBEDDED_DO", "sleep")
        .env("EMBEDDED_PIDS", &pids)
        .run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.has_line("10-embedded: timeout") && run.has_line("process group killed"),
        "{}",
        run.stderr
    );
    assert_eq!(how_it_ran(&run, "10-embedded").0, "built in");
    let text = wait_for_line(&pids, Duration::from_secs(5));
    let mut lines = text.lines().map(|l| l.parse::<i32>().expect("a pid"));
    let (hook, sleeper) = (lines.next().expect("hook"), lines.next().expect("sleep"));
    assert!(wait_gone(hook, Duration::from_secs(5)), "the hook lives on");
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)),
        "what the hook started lives on"
    );
    assert!(fx.ran().is_empty(), "the Prolog stopped at its failure");
    assert_eq!(fx.runs("prolog", "10-embedded", "timeout"), Some(1.0));
}

#[test]
fn hookrun_stopped_kills_the_built_in_hook_at_once() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.embedded_hook("epilog", "10-embedded");
    let pids = fx.path("embedded.pids");
    let child = fx
        .embedded_hookrun()
        .args(["epilog"])
        .env("SLURM_JOB_ID", "7")
        .env("EMBEDDED_DO", "sleep")
        .env("EMBEDDED_PIDS", &pids)
        .spawn();
    let hook = first_pid(&pids);
    rustix::process::kill_process(Pid::from_child(&child), Signal::TERM).expect("signal hookrun");
    let output = crate::util::output_of(child, "hookrun");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("10-embedded: interrupted"), "{stderr}");
    assert!(wait_gone(hook, Duration::from_secs(5)), "the hook lives on");
}

/// The hook's pid, the first line of the file it wrote (bounded wait).
fn first_pid(path: &std::path::Path) -> i32 {
    wait_for_line(path, Duration::from_secs(5))
        .lines()
        .next()
        .and_then(|l| l.parse().ok())
        .expect("the file holds a pid")
}

#[test]
fn a_built_in_task_prolog_s_exports_reach_slurm_and_its_failures_are_a_hook_s() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.embedded_hook("task-prolog", "10-embedded");
    let run = fx
        .embedded_hookrun()
        .args(["task-prolog"])
        .env("EMBEDDED_DO", "export")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "export EMBEDDED=built-in\n");

    // A built-in's exit status is the hook's (a panic: Rust's 101, in a
    // build that unwinds; the release build aborts: SIGABRT).
    for (what, detail) in [("exit:3", "exit status 3"), ("panic", "")] {
        let run = fx
            .embedded_hookrun()
            .args(["task-prolog"])
            .env("EMBEDDED_DO", what)
            .run();
        assert_ne!(run.code, Some(0), "{what}: {}", run.stderr);
        assert!(
            run.has_line("10-embedded: failed in") && run.has_line(detail),
            "{what}: {}",
            run.stderr
        );
    }
}

/// A built-in Prolog hook's refusal (exit 100) is a hook's: the job requeued
/// with the hook's first line as its AdminComment, the node never drained.
#[test]
fn a_built_in_hook_s_refusal_requeues_the_job_and_keeps_the_node() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(crate::util::NODE_IDLE);
    fx.embedded_hook("prolog", "10-embedded");
    fx.recording_hook("prolog", "20-after", "");
    let run = fx
        .embedded_hookrun()
        .args(["prolog"])
        .env("SLURM_JOB_ID", "4242")
        .env("SLURMD_NODENAME", "c1")
        .env("EMBEDDED_DO", "refuse")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        fx.scontrol_calls(),
        [
            vec![
                "update",
                "JobId=4242",
                "AdminComment=embedded: job refused (built in)"
            ],
            vec!["requeue", "4242"]
        ]
    );
    assert!(fx.ran().is_empty(), "the Prolog stopped at the refusal");
    assert_eq!(fx.node(), format!("{}\n", crate::util::NODE_IDLE));
    assert_eq!(fx.runs("prolog", "10-embedded", "refused"), Some(1.0));
}
