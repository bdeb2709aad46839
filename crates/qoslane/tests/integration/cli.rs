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

/// Regression (issue 23, item 6): the manual commands ignored
/// `/etc/default/qoslane`; only the hook scripts read it, so on a site that
/// set `QOSLANE_AUDIT_LOG` (or `QOSLANE_SMPQUERY`) `qoslane sync`, `log` and
/// `status` used other files and programs than the Prolog. qoslane reads
/// it itself outside the TaskProlog: flag > environment > file > default;
/// a file that is not root's or is writable by others is refused, and a bad
/// line is named.
#[test]
fn the_site_options_file_is_read_below_flags_and_the_environment() {
    use std::os::unix::fs::PermissionsExt;
    let n = crate::util::Node::new();
    let site_log = n.path("/var/log/site/audit.jsonl");
    let site = n.path("/etc/default/qoslane");
    std::fs::create_dir_all(site.parent().unwrap()).unwrap();
    std::fs::write(
        &site,
        format!(
            "# the site's options\nQOSLANE_AUDIT_LOG=\"{}\"\nQOSLANE_TIMEOUT_MS=4000\n",
            site_log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&site, std::fs::Permissions::from_mode(0o644)).unwrap();
    crate::util::ok(&n.prolog(1, "high"));
    let logged = std::fs::read_to_string(&site_log).unwrap_or_default();
    assert!(
        logged.contains("\"job_id\":1"),
        "the site's audit log: {logged:?}"
    );
    let out = n.run(&["log", "--job", "1"], &[]);
    crate::util::ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("prolog"));
    // The environment wins over the file.
    let env_log = n.path("/var/log/env/audit.jsonl");
    std::fs::create_dir_all(env_log.parent().unwrap()).unwrap();
    crate::util::ok(&n.run(
        &["health"],
        &[("QOSLANE_AUDIT_LOG", env_log.to_str().unwrap())],
    ));
    assert!(
        std::fs::read_to_string(&env_log)
            .unwrap()
            .contains("\"health\"")
    );
    assert!(
        !std::fs::read_to_string(&site_log)
            .unwrap()
            .contains("\"health\"")
    );

    // Writable by the group: refused, naming the file, like the hooks do.
    std::fs::set_permissions(&site, std::fs::Permissions::from_mode(0o664)).unwrap();
    let out = n.run(&["status"], &[]);
    assert_eq!(out.status.code(), Some(74), "{}", crate::util::stderr(&out));
    let err = crate::util::stderr(&out);
    assert!(
        err.contains("/etc/default/qoslane") && err.contains("refusing the site options"),
        "{err}"
    );
    // Not root's: refused.
    std::fs::set_permissions(&site, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(&site, Some(65534), None).unwrap();
    let out = n.run(&["sync", "--dry-run"], &[]);
    assert_eq!(out.status.code(), Some(74), "{}", crate::util::stderr(&out));
    std::os::unix::fs::chown(&site, Some(0), None).unwrap();
    // A bad line is named.
    std::fs::write(&site, "QOSLANE_SQUEUE=/usr/bin/squeue\nPATH=/tmp\n").unwrap();
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(74), "{}", crate::util::stderr(&out));
    let err = crate::util::stderr(&out);
    assert!(
        err.contains("line 2: `PATH` is not a qoslane site option"),
        "{err}"
    );
    // The TaskProlog never reads it (the job's user runs it).
    let tp = n.task_prolog(1, &[]);
    assert_eq!(tp.status.code(), Some(0));
    assert_eq!(crate::util::Node::exports(&tp)["UCX_IB_SL"], "2");

    // On a RHEL-family node the .rpm installs it as /etc/sysconfig/qoslane:
    // read when /etc/default/qoslane is not there.
    std::fs::remove_file(&site).unwrap();
    let rpm_site = n.path("/etc/sysconfig/qoslane");
    std::fs::create_dir_all(rpm_site.parent().unwrap()).unwrap();
    std::fs::write(
        &rpm_site,
        format!("QOSLANE_AUDIT_LOG={}\n", site_log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&rpm_site, std::fs::Permissions::from_mode(0o644)).unwrap();
    crate::util::ok(&n.prolog(2, "high"));
    assert!(
        std::fs::read_to_string(&site_log)
            .unwrap()
            .contains("\"job_id\":2"),
        "/etc/sysconfig/qoslane's audit log"
    );
}

/// Issue 25: one way to ask for JSON. `health`, `status` and `log` take
/// `--format human|json` like `validate`, `explain` and `fabric`; the older
/// `--json` still means `--format json`, byte for byte.
#[test]
fn every_view_takes_format_json_and_json_still_means_it() {
    let n = crate::util::Node::new();
    crate::util::ok(&n.prolog(1, "high"));
    for cmd in [&["status"][..], &["log", "--job", "1"][..], &["health"][..]] {
        let with = |extra: &[&str]| {
            let args: Vec<&str> = cmd.iter().chain(extra).copied().collect();
            n.run(&args, &[])
        };
        let format = with(&["--format", "json"]);
        let json = with(&["--json"]);
        assert_eq!(format.status.code(), json.status.code(), "{cmd:?}");
        let text = String::from_utf8_lossy(&format.stdout).into_owned();
        // One object (status, health) or JSON lines (log).
        let parsed = serde_json::from_str::<serde_json::Value>(&text).is_ok()
            || text
                .lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok());
        assert!(parsed && !text.is_empty(), "{cmd:?} --format json: {text}");
        if cmd[0] != "health" {
            // health's report carries its own time and duration
            assert_eq!(text, String::from_utf8_lossy(&json.stdout), "{cmd:?}");
        }
    }
}

/// Issue 25: `fabric sm-config --mapping A --config B` used A without a
/// word. Two names for the mapping are refused as a usage error.
#[test]
fn a_mapping_named_twice_is_a_usage_error() {
    let n = crate::util::Node::new();
    let m = n.path("/etc/qoslane/qos-network.yml");
    let m = m.to_str().unwrap();
    for sub in ["sm-config", "audit"] {
        let out = n.run(&["--config", m, "fabric", sub, "--mapping", m], &[]);
        assert_eq!(
            out.status.code(),
            Some(64),
            "{sub}: {}",
            crate::util::stderr(&out)
        );
        assert!(
            crate::util::stderr(&out).contains("cannot be used with"),
            "{}",
            crate::util::stderr(&out)
        );
    }
}
