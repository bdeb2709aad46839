//! The node tried as an attacker would: each test is a defect that was found
//! that way and is fixed in `nodeio` (one safe primitive per risky act).
//! Regression tests, named after the attack.

use crate::util::Within as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use crate::util::{self, Node, ok, stderr};

fn chmod(p: &std::path::Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The mapping names the kernel files root writes. Its trust check judged
/// the file and its own directory only, by path, then reopened it by name:
/// a user who could write a directory above (here `/etc`) could swap in her
/// own `qoslane/` between check and read. Every directory from the root
/// prefix down is judged now, and the file read is the descriptor judged.
#[test]
fn a_mapping_under_a_directory_others_can_write_is_refused() {
    let n = Node::new();
    ok(&n.prolog(1, "high")); // a valid mapping becomes last-known-good
    ok(&n.epilog(1));
    n.write_mapping(&util::MAPPING.replace("value: \"74\"", "value: \"75\""));
    chmod(&n.path("/etc"), 0o777);
    let out = n.prolog(2, "high");
    ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("etc: is writable by group or others (mode 777)"),
        "{err}"
    );
    assert!(err.contains("using last-known-good"), "{err}");
    assert_eq!(
        n.get(util::TOS),
        "74",
        "the last-known-good level, not hers"
    );
    chmod(&n.path("/etc"), 0o755);
}

/// qoslane sent to the journal with a blocking send outside the deadline: a
/// journal that does not read hung a Prolog with `--timeout-ms 1000` for
/// ever, holding the node lock. The journal socket is the root prefix's now
/// (so this can be tried at all), non-blocking, and what it cannot take is
/// dropped.
#[test]
fn a_journal_that_never_reads_does_not_hang_a_prolog() {
    let n = Node::new();
    let sock = n.path("/run/systemd/journal/socket");
    std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
    let journal = UnixDatagram::bind(&sock).unwrap();

    // A reading journal gets the lines, under the root prefix.
    let out = n
        .cmd(
            &["prolog", "--timeout-ms", "1000"],
            &[("SLURM_JOB_ID", "1")],
        )
        .env_remove("QOSLANE_NO_JOURNAL")
        .output_within();
    ok(&out);
    journal.set_nonblocking(true).unwrap();
    let mut buf = vec![0u8; 65536];
    let got = journal.recv(&mut buf).expect("a line reached the journal");
    let first = String::from_utf8_lossy(&buf[..got]);
    assert!(first.contains("SYSLOG_IDENTIFIER=qoslane"), "{first}");
    ok(&n.epilog(1));

    // Now it stops reading: fill its buffer, then run.
    let filler = UnixDatagram::unbound().unwrap();
    filler.connect(&sock).unwrap();
    filler.set_nonblocking(true).unwrap();
    while filler.send(&[b'x'; 4096]).is_ok() {}
    let t = Instant::now();
    let out = n
        .cmd(
            &["prolog", "--timeout-ms", "1000"],
            &[("SLURM_JOB_ID", "2")],
        )
        .env_remove("QOSLANE_NO_JOURNAL")
        .output_within();
    ok(&out);
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "does not hang: {:?}",
        t.elapsed()
    );
    drop(journal);
}

/// Temp files of Prologs killed while writing the fabric cache were never
/// removed (7 of 300 killed Prologs left one). The next writer removes those
/// of writers that are gone; a live writer's is never touched.
#[test]
fn fabric_cache_leftovers_of_killed_writers_are_removed() {
    let n = Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: warn"));
    n.add_hca("qos-identity");
    let run = n.path("/run/qoslane");
    std::fs::create_dir_all(&run).unwrap();
    // pid 2^22 + 1 is above the kernel's pid_max limit: never alive.
    let dead = run.join(".fabric.json.tmp.4194305.0");
    std::fs::write(&dead, "{\"half").unwrap();
    let live = run.join(format!(".fabric.json.tmp.{}.0", std::process::id()));
    std::fs::write(&live, "in flight").unwrap();
    let smpquery = n.fake_smpquery().display().to_string();
    let out = n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "1"),
            ("FAKE_QOS", "high"),
            ("QOSLANE_SMPQUERY", &smpquery),
        ],
    );
    ok(&out);
    assert!(
        n.path("/run/qoslane/fabric.json").is_file(),
        "{}",
        stderr(&out)
    );
    assert!(!dead.exists(), "the dead writer's temp file is gone");
    assert!(live.exists(), "a live writer's is not touched");
}

/// The fabric cache was read without the trusted read: a symlink in its
/// place was followed, so a forged cache (here: tables in which the level is
/// misaligned) decided the Prolog. It is refused now: the port is probed.
#[test]
fn a_symlink_in_place_of_the_fabric_cache_is_not_read_through() {
    let n =
        Node::with_mapping(&util::MAPPING.replace("fabric_check: off", "fabric_check: enforce"));
    n.add_fabric("mlx5-quirks");
    let tables = |scenario: &str| n.answer_smpquery(scenario);
    let smpquery = n.fake_smpquery().display().to_string();
    let prolog = |job: &str| {
        n.run(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", job),
                ("FAKE_QOS", "high"),
                ("QOSLANE_SMPQUERY", &smpquery),
            ],
        )
    };
    // A valid, fresh cache in which `high` is misaligned: the forgery.
    tables("qos-reversed");
    ok(&prolog("1"));
    assert_eq!(
        n.last_audit("prolog")["outcome"],
        "failed",
        "reversed tables refuse high"
    );
    let cache = n.path("/run/qoslane/fabric.json");
    let decoy = n.root().join("decoy.json");
    std::fs::rename(&cache, &decoy).unwrap();
    std::os::unix::fs::symlink(&decoy, &cache).unwrap();
    let forged = std::fs::read_to_string(&decoy).unwrap();
    // The fabric is fine now; only the forged cache says otherwise.
    tables("qos-identity");
    let out = prolog("2");
    ok(&out);
    assert_eq!(
        n.last_audit("prolog")["outcome"],
        "applied",
        "the forged cache was not used: {}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&decoy).unwrap(),
        forged,
        "not written through"
    );
    let md = std::fs::symlink_metadata(&cache).unwrap();
    assert!(md.is_file(), "replaced by a real cache file");
}

/// `qoslane metrics` as a non-root metrics user: the counters were 0600 and
/// had to be owned by the caller, while the docs said a metrics user could
/// read them. They are 0644 now, and files of root are trusted by any
/// reader (nodeio's trusted read: root or the caller).
#[test]
fn metrics_are_readable_by_a_non_root_metrics_user() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to run as another user");
        return;
    }
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    chmod(n.root(), 0o755);
    // The binary must be reachable by that user too.
    if !util::reachable_by_others() {
        return;
    }
    let out = n
        .cmd(&["metrics"], &[])
        .uid(65534)
        .gid(65534)
        .output_within();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(r#"qoslane_hook_runs_total{event="prolog",outcome="applied"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"qoslane_active_jobs{level="high"} 1"#),
        "{text}"
    );
}

/// Where `/var/log` keeps no blocks for root, a user who fills it makes an
/// audit append run out of space inside a record: the write is short and a
/// fragment without its newline stays. The next run's line was appended
/// right after it, glued on: that job was granted its level and `qoslane
/// log --job N` never found it. nodeio's append repairs a torn tail before
/// it writes now. A real ENOSPC: a 64 KiB tmpfs as the audit directory,
/// filled, runs until one append is cut short, space again, one more job.
#[test]
fn a_full_var_log_cannot_hide_the_next_job_s_audit_line() {
    let n = Node::new();
    let Some(m) = util::Mount::tmpfs(&n.path("/var/log/qoslane"), "size=64k,mode=0750") else {
        return;
    };
    let log = m.path.join("audit.jsonl");
    ok(&n.prolog(1, "high"));
    ok(&n.epilog(1));
    m.fill();
    let ends_torn = || std::fs::read(&log).unwrap().last() != Some(&b'\n');
    // Each run still succeeds; its line fits in the file's last page, until
    // one reaches past it and the write stops where the space does.
    let mut job = 2;
    while !ends_torn() {
        assert!(job < 40, "no append was cut short: nothing tried");
        let out = n.prolog(job, "low");
        ok(&out);
        ok(&n.epilog(job));
        job += 1;
    }
    std::fs::remove_file(m.path.join(".filler")).unwrap();
    ok(&n.prolog(100, "mission-critical"));
    ok(&n.epilog(100));

    let out = n.run(&["log", "--json", "--job", "100"], &[]);
    ok(&out);
    let found: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = found.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["prolog", "epilog"], "{}", stderr(&out));
    assert_eq!(found[0]["outcome"], "applied");
    // Every line is a whole record but the one fragment, which the reader
    // skips, counts and names.
    let text = std::fs::read(&log).unwrap();
    let bad: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && serde_json::from_slice::<serde_json::Value>(l).is_err())
        .collect();
    assert_eq!(bad.len(), 1, "{:?}", String::from_utf8_lossy(&text));
    assert!(
        stderr(&out).contains("log: 1 line skipped: "),
        "{}",
        stderr(&out)
    );
    drop(m);
}

/// The permission bits of `p` under the node's root.
fn mode_of(n: &Node, p: &str) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(n.path(p))
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .mode()
        & 0o7777
}

/// The first run after boot with a hardened umask (027 from an admin's
/// shell, 077) made `/run/qoslane` and `jobs/` 0750 (mkdirat's mode is
/// masked by the umask, and nothing fixed it): every job's TaskProlog, run
/// as the job's user, printed nothing while the audit said `applied`. Every
/// directory and file nodeio makes now gets exactly the mode asked for.
#[test]
fn state_made_under_a_hardened_umask_has_the_modes_asked_for() {
    use std::os::unix::process::CommandExt;
    for umask in ["027", "077"] {
        let n = Node::new();
        let prolog = n.cmd(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", "1"),
                ("FAKE_QOS", "high"),
                ("SLURM_JOB_USER", "alice"),
            ],
        );
        ok(&util::with_umask(&prolog, umask).output_within());
        for (path, mode) in [
            ("/run", 0o755),
            ("/run/qoslane", 0o755),
            ("/run/qoslane/jobs", 0o755),
            ("/run/qoslane/jobs/1.json", 0o644),
            ("/run/qoslane/node.json", 0o600),
            ("/run/qoslane/lock", 0o600),
            ("/var/lib/qoslane", 0o755),
            ("/var/lib/qoslane/counters.json", 0o644),
            ("/var/lib/prometheus/node-exporter", 0o755),
            (util::TEXTFILE, 0o644),
            ("/var/log/qoslane", 0o750),
            ("/var/log/qoslane/audit.jsonl", 0o640),
        ] {
            assert_eq!(
                format!("{:o}", mode_of(&n, path)),
                format!("{mode:o}"),
                "umask {umask}: {path}"
            );
        }
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root to run the TaskProlog as another user");
            continue;
        }
        if !util::reachable_by_others() {
            continue;
        }
        chmod(n.root(), 0o755);
        let root = n.root().to_str().unwrap().to_owned();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_qoslane"))
            .env_clear()
            .env("SLURM_JOB_ID", "1")
            .args(["--root", &root, "task-prolog"])
            .uid(65534)
            .gid(65534)
            .output_within();
        assert_eq!(
            out.status.code(),
            Some(0),
            "umask {umask}: {}",
            stderr(&out)
        );
        let exports = Node::exports(&out);
        assert!(
            exports.contains_key("UCX_IB_SL"),
            "umask {umask}: the job's user gets its exports: {exports:?} {}",
            stderr(&out)
        );
    }
}

/// State directories an earlier version made under a hardened umask (0750)
/// are ours: the next run widens them to what their readers need and says
/// so. One writable by others is still refused, never widened.
#[test]
fn state_directories_made_too_narrow_are_widened_and_said() {
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    for d in ["/run/qoslane", "/run/qoslane/jobs", "/var/lib/qoslane"] {
        chmod(&n.path(d), 0o750);
    }
    let out = n.prolog(2, "low");
    ok(&out);
    for d in ["/run/qoslane", "/run/qoslane/jobs", "/var/lib/qoslane"] {
        assert_eq!(mode_of(&n, d), 0o755, "{d}");
        assert!(
            stderr(&out).contains(&format!(
                "{}: mode 750 is too narrow for its readers; widened to 755",
                n.path(d).display()
            )),
            "{d}: {}",
            stderr(&out)
        );
    }
    chmod(&n.path("/run/qoslane/jobs"), 0o770);
    let out = n.prolog(3, "low");
    assert!(
        stderr(&out).contains("is writable by group or others (mode 770)"),
        "a group-writable jobs directory is refused: {}",
        stderr(&out)
    );
    assert_eq!(mode_of(&n, "/run/qoslane/jobs"), 0o770);
}
