//! The command line: help, usage errors and their exit codes, and the man
//! page and completions generated from the same definitions.

use crate::util::Within as _;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_qoslane");

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).env_clear().args(args).output_within()
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

/// Issue 25: one way to name a mapping, `--config FILE`; `validate FILE`
/// (an older spelling, kept hidden) beside it is a usage error, and either
/// alone names the same file.
#[test]
fn validate_s_file_and_config_are_one_name() {
    let n = crate::util::Node::new();
    n.write("/tmp/draft.yml", "levels: [");
    let draft = n.path("/tmp/draft.yml");
    let draft = draft.to_str().unwrap();
    let m = n.path("/etc/qoslane/qos-network.yml");
    let m = m.to_str().unwrap();
    let both = n.run(&["--config", m, "validate", draft], &[]);
    assert_eq!(
        both.status.code(),
        Some(64),
        "{}",
        crate::util::stderr(&both)
    );
    assert!(
        crate::util::stderr(&both).contains("'FILE' cannot be used with '--config <FILE>'"),
        "{}",
        crate::util::stderr(&both)
    );
    for args in [&["validate", "--config", draft][..], &["validate", draft]] {
        let out = n.run(args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: the draft is invalid");
        assert!(
            crate::util::stderr(&out).contains("draft.yml:1:"),
            "{args:?}"
        );
    }
    // The help names one spelling only.
    let help = String::from_utf8(run(&["validate", "--help"]).stdout).unwrap();
    assert!(help.contains("--config"), "{help}");
    assert!(
        !help.contains("[FILE]"),
        "the older spelling is hidden: {help}"
    );
    let help = String::from_utf8(run(&["fabric", "sm-config", "--help"]).stdout).unwrap();
    assert!(
        !help.contains("--mapping"),
        "the older spelling is hidden: {help}"
    );
}

/// Issue 25: "qoslane: error: m.yml:3:12: error: …" — an error that carries a
/// mapping's diagnostic said its severity twice, on the command line, in the
/// log line of a failed run and in the audit.
#[test]
fn an_error_says_error_once() {
    let n = crate::util::Node::new();
    n.write_mapping("default_level: x\nlevels:\n  - {name: a, qos: [a], service_level: 16}\n");
    for args in [
        &["explain", "--qos", "a"][..],
        &["fabric", "sm-config"],
        &["sync"],
    ] {
        let out = n.run(args, &[]);
        let err = crate::util::stderr(&out);
        assert!(err.contains("qos-network.yml:1:16: "), "{args:?}: {err}");
        let doubled: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("qoslane:") && l.matches("error").count() > 1)
            .collect();
        assert!(doubled.is_empty(), "{args:?}: {doubled:?}");
    }
}

/// Issue 25: `qoslane log | head -1` printed "error: write output <stdout>:
/// Broken pipe" and exited 74. A reader that goes away ends the output
/// quietly, with 141 (128 + SIGPIPE, as a shell reports a program a
/// broken pipe ended), in both forms.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let n = crate::util::Node::new();
    let line = r#"{"time":"2026-12-01T00:00:00.000Z","node":"n","event":"recover","outcome":"unchanged","duration_ms":1}"#;
    n.write(
        "/var/log/qoslane/audit.jsonl",
        &format!("{line}\n").repeat(20_000),
    );
    for format in ["human", "json"] {
        let mut child = n
            .cmd(&["log", "--limit", "0", "--format", format], &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The pipe is closed once its first line is read (its reader
        // dropped): ~2 MB cannot fit.
        let first = crate::util::first_line_within(child.stdout.take().unwrap());
        let out = crate::util::output_of(child, "qoslane log");
        assert!(!first.is_empty(), "{format}");
        assert_eq!(
            out.status.code(),
            Some(141),
            "{format}: {}",
            crate::util::stderr(&out)
        );
        assert_eq!(crate::util::stderr(&out), "", "{format}: nothing said");
    }
}

/// `c` (the binary with its arguments and environment) as `/bin/sh` runs
/// it with its standard input, output and error closed, as a careless
/// parent may start it: `sh` closes them, then execs it.
fn with_stdio_closed(c: &Command) -> Command {
    let mut sh = Command::new("/bin/sh");
    sh.env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    sh.args(["-c", r#"exec "$0" "$@" <&- >&- 2>&-"#])
        .arg(c.get_program())
        .args(c.get_args());
    sh
}

/// The binary's entry (`entry.rs`, `#![no_main]`) opens a standard
/// descriptor it was started without on `/dev/null`, as Rust's own start
/// did: else the first files a run opens become its stdin, stdout and
/// stderr, and what it prints goes into them. Seen in a run that stays
/// (`log --follow`, its audit log open): its descriptors 0, 1 and 2 are
/// `/dev/null`. And a Prolog started so records its audit line, every line
/// of the log JSON.
#[test]
fn a_run_started_with_its_standard_descriptors_closed_has_them_on_dev_null() {
    let n = crate::util::Node::new();
    let out = with_stdio_closed(&n.cmd(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "7"),
            ("FAKE_QOS", "high"),
            ("SLURM_JOB_USER", "alice"),
        ],
    ))
    .output_within();
    assert_eq!(out.status.code(), Some(0), "prolog: {:?}", out.status);
    let lines = n.audit_events("prolog");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["outcome"], "applied", "{lines:?}");

    let mut sh = with_stdio_closed(&n.cmd(&["log", "--follow"], &[]));
    let mut child = crate::util::Proc::spawn(
        "qoslane log --follow, its stdio closed",
        crate::util::default_signals(&mut sh),
    );
    let pid = child.pid();
    let fd = |i: u32| std::fs::read_link(format!("/proc/{pid}/fd/{i}")).ok();
    let audit = n.path("/var/log/qoslane/audit.jsonl");
    let end = std::time::Instant::now() + crate::util::PATIENCE;
    // Once sh has exec'd it and it follows the log (the log open).
    while !(0..64).any(|i| fd(i).as_deref() == Some(audit.as_path())) {
        assert!(child.exited().is_none(), "log --follow ended");
        assert!(
            std::time::Instant::now() < end,
            "log --follow did not open the audit log"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for i in 0..3 {
        assert_eq!(
            fd(i).as_deref(),
            Some(std::path::Path::new("/dev/null")),
            "descriptor {i}"
        );
    }
}

/// Issue 25: `recover` and a `sync` that changed nothing printed nothing; a
/// command run by hand says in one line what it did or checked.
#[test]
fn recover_and_an_unchanged_sync_say_what_they_checked() {
    let n = crate::util::Node::new();
    let out = n.run(&["recover"], &[]);
    crate::util::ok(&out);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "recover: unchanged: nothing changed; the journal checked: no interrupted transaction\n"
    );
    crate::util::ok(&n.run(&["sync"], &[]));
    let out = n.run(&["sync"], &[]);
    crate::util::ok(&out);
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.starts_with("sync: unchanged: nothing changed; mapping sha256 ")
            && said.contains("levels judged; 0 running job(s), 0 re-planned")
            && said.lines().count() == 1,
        "{said}"
    );
}

/// Issue 25: the admin guide's command table (§11) says, for every command,
/// how it gives JSON, how it is given a mapping and how it exits; `-h` of
/// each says the same, and every command has a row.
#[test]
fn the_command_table_is_what_help_says() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/admin-guide.md"),
    )
    .unwrap();
    let commands = manpage::table::leaf_commands(&qoslane::cli::command());
    assert!(commands.len() >= 13, "{commands:?}");
    let help = |words: &[String]| {
        let mut args: Vec<&str> = words.iter().map(String::as_str).collect();
        args.push("-h");
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let problems = manpage::table::problems(&guide, "qoslane", &commands, &help);
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Issue 25: `qoslane log --follow` goes on with what is appended, as
/// `journalctl -f`, across logrotate's rename (the rest of the renamed file,
/// then the new one), and a Ctrl-C (SIGINT) ends it with nothing said.
#[test]
fn log_follow_goes_on_across_a_rotation_and_ends_on_sigint() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let n = crate::util::Node::new();
    let log = n.path("/var/log/qoslane/audit.jsonl");
    let entry = |job: u32| {
        format!(
            r#"{{"time":"2026-12-01T00:00:0{job}.000Z","node":"n","event":"prolog","job_id":{job},"outcome":"applied","duration_ms":1}}"#
        )
    };
    n.write("/var/log/qoslane/audit.jsonl", &format!("{}\n", entry(1)));
    // Regression (issue 39): the child inherited this process's SIGINT
    // disposition (ignored when the suite runs as a background job, `cmd &`)
    // and each read waited for ever; now SIGINT is at its default action in
    // the child, as the test assumes, and every wait has a deadline.
    let mut cmd = n.cmd(
        &["log", "--follow", "--format", "json", "--event", "prolog"],
        &[],
    );
    let mut child = crate::util::Proc::spawn(
        "qoslane log --follow",
        crate::util::default_signals(&mut cmd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let lines = crate::util::LinesWithin::start(child.child.stdout.take().unwrap());
    let err = crate::util::Drained::start(child.child.stderr.take().unwrap());
    let next = |what: &str| lines.next(what);
    assert_eq!(next("entry 1"), entry(1), "the entries there, first");
    let append = |path: &std::path::Path, text: String| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append(&log, format!("{}\n", entry(2)));
    assert_eq!(next("entry 2"), entry(2), "appended");
    // logrotate: the file renamed, a late line into it, then a new file.
    let rotated = n.path("/var/log/qoslane/audit.jsonl.1");
    std::fs::rename(&log, &rotated).unwrap();
    append(&rotated, format!("{}\n", entry(3)));
    append(&log, format!("{}\n", entry(4).replace("prolog", "epilog")));
    append(&log, format!("{}\n", entry(5)));
    assert_eq!(next("entry 3"), entry(3), "the rest of the renamed file");
    assert_eq!(next("entry 5"), entry(5), "the new file, filtered");
    let end = std::time::Instant::now() + crate::util::PATIENCE;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(child.pid()).unwrap()).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let status = crate::util::wait_within(&mut child.child, "qoslane log --follow after SIGINT");
    assert_eq!(status.signal(), Some(2), "ended by SIGINT: {status:?}");
    let said = String::from_utf8(err.within(end, "its stderr")).unwrap();
    assert_eq!(said, "", "nothing said");
}

/// Issue 25: `--since yesterday` and relative times (`today` and a zone-less
/// time in a fixed zone: `time::tests`), and times shown in the local zone
/// (TZ; `--utc`: as written). An entry of a minute ago is since yesterday's
/// midnight at any hour, in any zone.
#[test]
fn log_reads_days_and_relative_times_and_shows_local_time() {
    let n = crate::util::Node::new();
    let now = std::time::SystemTime::now();
    let at = |ago: u64| {
        humantime::format_rfc3339_millis(now - std::time::Duration::from_secs(ago)).to_string()
    };
    let line = |t: String, job: u32| {
        format!(
            r#"{{"time":"{t}","node":"n","event":"prolog","job_id":{job},"outcome":"applied","duration_ms":1}}"#
        )
    };
    n.write(
        "/var/log/qoslane/audit.jsonl",
        &format!("{}\n{}\n", line(at(3 * 86_400), 1), line(at(60), 2)),
    );
    let jobs = |args: &[&str], tz: &str| {
        let mut a = vec!["log", "--format", "json"];
        a.extend_from_slice(args);
        let out = n.run(&a, &[("TZ", tz)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            crate::util::stderr(&out)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["job_id"]
                    .as_u64()
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    for tz in ["UTC", "Asia/Tokyo", "America/Los_Angeles"] {
        assert_eq!(jobs(&["--since", "yesterday"], tz), [2], "{tz}");
        assert_eq!(jobs(&["--since", "-1h"], tz), [2], "{tz}");
        assert_eq!(jobs(&["--since", "2 hours ago"], tz), [2], "{tz}");
        assert_eq!(jobs(&["--until", "-2d"], tz), [1], "{tz}");
    }
    // Shown in TZ's zone, or as written with --utc.
    let written = at(60);
    let shown = |args: &[&str]| {
        let mut a = vec!["log", "--job", "2"];
        a.extend_from_slice(args);
        String::from_utf8(n.run(&a, &[("TZ", "Asia/Kolkata")]).stdout).unwrap()
    };
    assert!(shown(&[]).contains("+05:30 prolog"), "{}", shown(&[]));
    assert!(
        shown(&["--utc"]).contains(&format!("{written} prolog")),
        "{}",
        shown(&["--utc"])
    );
}

/// Issue 25: `--qos` completed file names. The completions offer the QoS
/// names of the mapping in force (`qoslane complete qos`, called by the
/// generated scripts): run here through bash's own completion.
#[test]
fn qos_completes_the_mapping_s_qos_names() {
    let n = crate::util::Node::new();
    let names = n.run(&["complete", "qos"], &[]);
    crate::util::ok(&names);
    let names = String::from_utf8(names.stdout).unwrap();
    assert!(names.lines().any(|l| l == "high"), "{names}");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        assert!(
            run(&["generate", "completions", shell, d]).status.success(),
            "{shell}"
        );
    }
    for file in ["_qoslane", "qoslane.fish"] {
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let qos: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("qos=[") || l.contains(" -l qos "))
            .collect();
        assert!(
            qos.len() == 2 && qos.iter().all(|l| l.contains("qoslane complete qos")),
            "{file}: {qos:?}"
        );
    }
    // bash: the words typed, then what the completion function offers.
    let bin = std::path::Path::new(BIN).parent().unwrap();
    let script = format!(
        "source {d}/qoslane.bash\nCOMP_WORDS=(qoslane log --qos hi); COMP_CWORD=3\n\
         _qoslane qoslane hi --qos\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    );
    let out = std::process::Command::new("/bin/bash")
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("QOSLANE_ROOT", n.root())
        .env("QOSLANE_NO_JOURNAL", "1")
        .args(["-c", &script])
        .output_within();
    let err = crate::util::stderr(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "high\n", "{err}");
}
