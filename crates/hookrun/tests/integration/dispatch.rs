//! Choosing the phase: subcommand, SLURM_SCRIPT_CONTEXT, or health by default.

use crate::util::{Fixture, NODE_IDLE};

#[test]
fn slurm_script_context_selects_the_phase() {
    let fx = Fixture::new();
    for phase in ["prolog", "epilog", "task-prolog"] {
        fx.recording_hook(phase, &format!("10-{phase}"), "");
    }
    for (context, hook) in [
        ("prolog_slurmd", "10-prolog"),
        ("epilog_slurmd", "10-epilog"),
        ("prolog_task", "10-task-prolog"),
    ] {
        let run = fx.hookrun().env("SLURM_SCRIPT_CONTEXT", context).run();
        assert_eq!(run.code, Some(0), "{context}: {}", run.stderr);
        assert_eq!(fx.ran().last().map(String::as_str), Some(hook), "{context}");
    }
    assert_eq!(fx.ran().len(), 3);
}

#[test]
fn no_context_and_no_subcommand_runs_the_health_check() {
    // Slurm starts HealthCheckProgram without arguments or a context.
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.recording_hook("health", "10-check", "");
    fx.recording_hook("prolog", "10-prolog", "");
    let run = fx.hookrun().env("SLURMD_NODENAME", "c1").run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-check"]);
}

#[test]
fn an_unsupported_context_is_a_usage_error() {
    let fx = Fixture::new();
    fx.recording_hook("health", "10-check", "");
    let run = fx
        .hookrun()
        .env("SLURM_SCRIPT_CONTEXT", "epilog_task")
        .run();
    assert_eq!(run.code, Some(64), "usage, as qoslane's: {}", run.stderr);
    assert!(
        run.has_line("SLURM_SCRIPT_CONTEXT=epilog_task"),
        "{}",
        run.stderr
    );
    assert!(fx.ran().is_empty());
}

#[test]
fn a_subcommand_wins_over_the_context() {
    let fx = Fixture::new();
    fx.recording_hook("epilog", "10-epilog", "");
    let run = fx
        .hookrun()
        .args(["epilog"])
        .env("SLURM_SCRIPT_CONTEXT", "prolog_slurmd")
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-epilog"]);
}

#[test]
fn help_and_bad_arguments() {
    let fx = Fixture::new();
    let help = fx.hookrun().args(["--help"]).run();
    assert_eq!(help.code, Some(0));
    for needle in [
        "prolog",
        "task-prolog",
        "health",
        "list",
        "HOOKRUN_ROOT",
        ".optional",
    ] {
        assert!(
            help.stdout.contains(needle),
            "--help lacks {needle}:\n{}",
            help.stdout
        );
    }
    // Usage is 64 in both programs (2 is a bad configuration file).
    let bad = fx.hookrun().args(["prolog", "--budget", "soon"]).run();
    assert_eq!(bad.code, Some(64), "{}", bad.stderr);
    let bad = fx.hookrun().args(["reboot"]).run();
    assert_eq!(bad.code, Some(64), "{}", bad.stderr);
    let bad = fx
        .hookrun()
        .args(["prolog"])
        .env("HOOKRUN_BUDGET", "soon")
        .run();
    assert_eq!(bad.code, Some(64), "a variable is usage: {}", bad.stderr);
}

#[test]
fn generate_writes_man_pages_and_completions_and_runs_no_hook() {
    let fx = Fixture::new();
    fx.recording_hook("health", "10-check", "");
    let out = fx.path("generated");
    let dir = out.to_str().unwrap();
    let run = fx.hookrun().args(["generate", "man", dir]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let man = std::fs::read_to_string(out.join("hookrun.8")).unwrap();
    // Regression: clap_mangen dropped the empty date from `.TH`, shifting
    // the source and manual in the page's footer.
    let th = man.lines().find(|l| l.starts_with(".TH ")).unwrap();
    assert!(
        !th.contains("  ") && th.ends_with("\" \"System Administration\""),
        "{th}"
    );
    let conf = std::fs::read_to_string(out.join("hookrun.conf.5")).unwrap();
    assert!(conf.contains(".SH KEYS"), "hookrun.conf(5)");
    assert!(
        man.contains(".TH hookrun 8") && man.contains("prolog") && man.contains(".SH FILES"),
        "{man}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let run = fx
            .hookrun()
            .args(["generate", "completions", shell, dir])
            .run();
        assert_eq!(run.code, Some(0), "{shell}: {}", run.stderr);
    }
    assert!(out.join("hookrun.bash").exists() && out.join("_hookrun").exists());
    assert!(
        fx.ran().is_empty(),
        "generate must not run the health check"
    );
}

/// Issue 25: a bare `hookrun` typed by hand ran the health check, which can
/// drain the node. On a terminal, with nothing of Slurm's in the
/// environment, it shows what each phase would run and how it went last,
/// and runs nothing; slurmd's HealthCheckProgram call (no terminal) and a
/// terminal with `SLURMD_NODENAME` still run the health check.
#[test]
fn a_bare_hookrun_on_a_terminal_shows_instead_of_acting() {
    let fx = Fixture::new();
    fx.fake_scontrol(0);
    fx.set_node(NODE_IDLE);
    fx.recording_hook("health", "10-check", "");
    let shown = fx.bare_hookrun_on_terminal(&[]);
    assert_eq!(shown.code, Some(0), "{}", shown.stdout);
    assert!(fx.ran().is_empty(), "no hook ran: {}", shown.stdout);
    assert!(fx.scontrol_calls().is_empty(), "no scontrol call");
    assert!(
        shown.stdout.contains("showing what would run"),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.trim_end() == "   1  10-check  required"),
        "{}",
        shown.stdout
    );

    // slurmd's call: no terminal.
    let run = fx.hookrun().run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-check"]);
    // On a terminal with slurmd's variable: the health check too.
    let run = fx.bare_hookrun_on_terminal(&[("SLURMD_NODENAME", "c1")]);
    assert_eq!(run.code, Some(0), "{}", run.stdout);
    assert_eq!(fx.ran(), ["10-check", "10-check"]);

    // Shown again: the hook's last result.
    let shown = fx.bare_hookrun_on_terminal(&[]);
    assert!(
        shown.stdout.contains("10-check  required  last: ok at ")
            && shown.stdout.contains(", 2 runs"),
        "{}",
        shown.stdout
    );
    assert_eq!(fx.ran().len(), 2, "still nothing ran");
}

/// Issue 25: hookrun's rows of the admin guide's command table (§11) are
/// what `-h` of each command says, and every command has one.
#[test]
fn the_command_table_is_what_help_says() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/admin-guide.md"),
    )
    .expect("the admin guide");
    let commands = manpage::table::leaf_commands(&hookrun::cli::command());
    assert_eq!(commands.len(), 5, "{commands:?}");
    let fx = Fixture::new();
    let help = |words: &[String]| {
        let run = fx.hookrun().args(words).args(["-h"]).run();
        assert_eq!(run.code, Some(0), "{words:?}");
        run.stdout
    };
    let problems = manpage::table::problems(&guide, "hookrun", &commands, &help);
    assert!(problems.is_empty(), "{problems:#?}");
}
