//! Metrics: counts add up across runs and concurrent runs lose nothing.

use std::fs;

use crate::util::Fixture;

#[test]
fn counts_add_up_across_runs_and_phases() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-ok", "");
    fx.hook("prolog", "20-flaky.optional", "exit 1");
    fx.hook("epilog", "10-ok", "");
    for _ in 0..3 {
        assert_eq!(fx.hookrun().args(["prolog"]).run().code, Some(0));
    }
    assert_eq!(fx.hookrun().args(["epilog"]).run().code, Some(0));

    assert_eq!(fx.runs("prolog", "10-ok", "ok"), Some(3.0));
    assert_eq!(fx.runs("prolog", "10-ok", "failed"), Some(0.0));
    assert_eq!(fx.runs("prolog", "20-flaky.optional", "failed"), Some(3.0));
    assert_eq!(fx.runs("epilog", "10-ok", "ok"), Some(1.0));
    assert_eq!(
        fx.sample(r#"hookrun_hook_duration_seconds_count{phase="prolog",hook="10-ok"}"#),
        Some(3.0)
    );
    assert_eq!(
        fx.sample(r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-ok",le="+Inf"}"#),
        Some(3.0)
    );
    let prom = fx.prom();
    assert!(
        prom.contains("# TYPE hookrun_hook_runs_total counter\n"),
        "{prom}"
    );
    assert!(
        prom.contains("# TYPE hookrun_hook_duration_seconds histogram\n"),
        "{prom}"
    );
    // Only the finished file is in the textfile directory.
    let names: Vec<_> = fs::read_dir(fx.path("var/lib/prometheus/node-exporter"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    assert_eq!(names, ["hookrun.prom"]);
    assert!(fx.path("var/lib/hookrun/metrics.json").is_file());
}

#[test]
fn concurrent_runs_do_not_lose_counts() {
    // Prologs of different jobs run concurrently on one node.
    let fx = Fixture::new();
    fx.hook("prolog", "10-a", "");
    fx.hook("prolog", "20-b", "");
    const RUNS: usize = 12;
    let children: Vec<_> = (0..RUNS)
        .map(|_| fx.hookrun().args(["prolog"]).spawn())
        .collect();
    for child in children {
        let output = crate::util::output_of(child, "hookrun prolog");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("metrics not updated"), "{stderr}");
    }
    assert_eq!(fx.runs("prolog", "10-a", "ok"), Some(RUNS as f64));
    assert_eq!(fx.runs("prolog", "20-b", "ok"), Some(RUNS as f64));
}

#[test]
fn a_metrics_failure_never_fails_the_hooks() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-ok", "");
    // The state directory cannot be created: a file is in the way.
    fx.write("var/lib/hookrun", "in the way", 0o644);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(run.has_line("metrics not updated"), "{}", run.stderr);
}

#[test]
fn the_textfile_directory_can_be_moved() {
    let fx = Fixture::new();
    fx.hook("prolog", "10-ok", "");
    let elsewhere = fx.path("srv/prom");
    fs::create_dir_all(&elsewhere).expect("mkdir");
    let run = fx
        .hookrun()
        .args(["prolog"])
        .env("HOOKRUN_TEXTFILE_DIR", &elsewhere)
        .run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(elsewhere.join("hookrun.prom").is_file());
    assert!(fx.prom().is_empty(), "the default location is not written");
}

/// Regression: the textfile was written through the fixed temp name
/// `.hookrun.prom.tmp`, opened with create+truncate following symlinks. The
/// `prometheus` user owns the textfile directory on Debian and could plant
/// that name as a symlink: root then overwrote the link's target.
#[test]
fn a_planted_symlink_in_the_textfile_directory_is_never_written_through() {
    use std::os::unix::fs::symlink;
    let fx = Fixture::new();
    fx.hook("prolog", "10-a", "");
    let victim = fx.path("etc/shadow-like");
    fs::create_dir_all(fx.path("etc")).expect("mkdir");
    fs::write(&victim, "root only\n").expect("write");
    let textfiles = fx.path("var/lib/prometheus/node-exporter");
    symlink(&victim, textfiles.join(".hookrun.prom.tmp")).expect("symlink");
    assert_eq!(fx.hookrun().args(["prolog"]).run().code, Some(0));
    assert_eq!(fs::read_to_string(&victim).expect("read"), "root only\n");
    assert_eq!(fx.runs("prolog", "10-a", "ok"), Some(1.0));
}

/// Regression: the same user swapped the textfile directory for a symlink of
/// theirs to a directory root writes into; it is refused, not followed.
#[test]
fn a_textfile_directory_swapped_for_someone_elses_symlink_is_refused() {
    use std::os::unix::fs::symlink;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to make a symlink owned by another user");
        return;
    }
    let fx = Fixture::new();
    fx.hook("prolog", "10-a", "");
    let textfiles = fx.path("var/lib/prometheus/node-exporter");
    fs::remove_dir(&textfiles).expect("rmdir");
    let target = fx.path("etc/cron.d");
    fs::create_dir_all(&target).expect("mkdir");
    symlink(&target, &textfiles).expect("symlink");
    std::os::unix::fs::lchown(&textfiles, Some(65534), Some(65534)).expect("lchown");
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(
        run.code,
        Some(0),
        "metrics never fail the phase: {}",
        run.stderr
    );
    assert!(run.has_line("symlink owned by uid 65534"), "{}", run.stderr);
    assert_eq!(
        fs::read_dir(&target).expect("ls").count(),
        0,
        "nothing written there"
    );
}

/// Regression: the metrics lock was mode 0644, so any user could hold an
/// exclusive flock on it and stall every Prolog by a second (and freeze the
/// counts). It is 0600, also when an older version left it 0644.
#[test]
fn the_metrics_lock_is_private() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let fx = Fixture::new();
    fx.hook("prolog", "10-a", "");
    let lock = fx.path("var/lib/hookrun/metrics.lock");
    fs::create_dir_all(lock.parent().expect("dir")).expect("mkdir");
    fs::write(&lock, "").expect("write");
    fs::set_permissions(&lock, fs::Permissions::from_mode(0o644)).expect("chmod");
    assert_eq!(fx.hookrun().args(["prolog"]).run().code, Some(0));
    assert_eq!(fs::metadata(&lock).expect("md").mode() & 0o777, 0o600);
}
