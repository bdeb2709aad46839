//! The command line: help, usage errors and their exit codes, and the man
//! page and completions generated from the same definitions.

#![expect(clippy::unwrap_used, reason = "a failing test should stop loudly")]

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_qoslane");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).env_clear().args(args).output().unwrap()
}

#[test]
fn help_lists_every_subcommand_and_exits_0() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "validate",
        "explain",
        "prolog",
        "epilog",
        "task-prolog",
        "sync",
        "health",
        "status",
        "recover",
        "metrics",
    ] {
        assert!(text.contains(sub), "--help misses {sub}:\n{text}");
    }
    assert!(text.contains("Exit codes"), "{text}");
}

#[test]
fn usage_errors_exit_64() {
    assert_eq!(run(&["frobnicate"]).status.code(), Some(64));
    assert_eq!(
        run(&["explain"]).status.code(),
        Some(64),
        "--qos is required"
    );
    // No subcommand and no Slurm context: a clear usage error, not a guess.
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SLURM_SCRIPT_CONTEXT is unset"));
}

#[test]
fn man_page_and_completions_come_from_the_cli_definition() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert!(run(&["generate", "man", d]).status.success());
    let man = std::fs::read_to_string(dir.path().join("qoslane.1")).unwrap();
    assert!(
        man.contains(".TH qoslane") && man.contains("validate"),
        "{man}"
    );
    assert!(
        dir.path().join("qoslane-validate.1").exists(),
        "a page per subcommand"
    );
    for shell in ["bash", "zsh", "fish"] {
        assert!(
            run(&["generate", "completions", shell, d]).status.success(),
            "{shell}"
        );
    }
    let bash = std::fs::read_to_string(dir.path().join("qoslane.bash")).unwrap();
    assert!(
        bash.contains("task-prolog"),
        "bash completion knows the subcommands"
    );
}
