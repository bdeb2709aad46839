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
    let man = std::fs::read_to_string(dir.path().join("qoslane.8")).unwrap();
    assert!(
        man.contains(".TH qoslane 8") && man.contains("validate") && man.contains(".SH FILES"),
        "{man}"
    );
    assert!(
        dir.path().join("qoslane-validate.8").exists()
            && dir.path().join("qoslane-mapping.5").exists(),
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

/// `validate` with no path checks the installed mapping, as `nginx -t`.
#[test]
fn validate_without_a_path_checks_the_installed_mapping() {
    let n = crate::util::Node::new();
    let out = n.run(&["validate"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("qos-network.yml: valid: 4 levels"));
    n.write_mapping("levels: [");
    let out = n.run(&["validate"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", crate::util::stderr(&out));
}

/// Regression: `explain --config FILE` answered from the last-known-good
/// copy when FILE was invalid, with exit 0, naming the fallback only on its
/// last line. A file it is given is explained, or refused with its problem.
#[test]
fn explain_explains_the_file_it_was_given_or_fails() {
    let n = crate::util::Node::new();
    crate::util::ok(&n.prolog(1, "high")); // a last-known-good copy exists
    let draft = n.root().join("draft.yml");
    std::fs::write(&draft, "levels: [").unwrap();
    let d = draft.display().to_string();
    let out = n.run(&["--config", &d, "explain", "--qos", "high"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        crate::util::stderr(&out).contains("draft.yml"),
        "{}",
        crate::util::stderr(&out)
    );
    // The installed file broken: the answer is the copy in force, said first.
    n.write_mapping("levels: [");
    let out = n.run(&["explain", "--qos", "high"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("note: ") && text.contains("last-known-good"),
        "{text}"
    );
}
