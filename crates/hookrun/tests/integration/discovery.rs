//! Which hooks run, in which order; what is skipped; empty and missing directories.

use std::fs;
use std::os::unix::fs::symlink;

use crate::util::Fixture;

#[test]
fn hooks_run_in_ascending_byte_order_of_their_names() {
    let fx = Fixture::new();
    // Byte order, not natural or locale order: "10" < "2", "B" < "_" < "a".
    for name in ["a", "2-a", "_x", "10-b", "B", "10-a"] {
        fx.recording_hook("prolog", name, "");
    }
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-a", "10-b", "2-a", "B", "_x", "a"]);
}

#[test]
fn leftovers_dotfiles_non_executables_and_directories_are_skipped() {
    let fx = Fixture::new();
    fx.recording_hook("prolog", "10-runs", "");
    let skipped = [
        "10-runs~",
        "10-runs.bak",
        "10-runs.swp",
        ".10-hidden",
        "#10-runs#",
        "10-runs.rpmnew",
        "10-runs.rpmsave",
        "10-runs.rpmorig",
        "10-runs.dpkg-old",
        "10-runs.dpkg-new",
        "10-runs.dpkg-dist",
        "10-runs.dpkg-tmp",
    ];
    for name in skipped {
        fx.recording_hook("prolog", name, "");
    }
    let not_executable = fx.recording_hook("prolog", "20-not-executable", "");
    fs::set_permissions(
        &not_executable,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .expect("chmod");
    fs::create_dir(fx.path("etc/slurm/prolog.d/30-directory")).expect("mkdir");
    // A symlink to an executable is a hook; a broken one is skipped, loudly.
    let target = fx.recording_hook("shared", "40-linked", "");
    symlink(&target, fx.path("etc/slurm/prolog.d/40-linked")).expect("symlink");
    symlink(
        "/nonexistent/hook",
        fx.path("etc/slurm/prolog.d/50-dangling"),
    )
    .expect("symlink");

    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-runs", "40-linked"]);
    assert!(
        run.has_line("hookrun[prolog] 50-dangling: ignored: broken symlink"),
        "{}",
        run.stderr
    );
}

#[test]
fn missing_hook_directories_are_success() {
    let fx = Fixture::new();
    for phase in ["prolog", "epilog", "task-prolog"] {
        let run = fx.hookrun().args([phase]).run();
        assert_eq!(run.code, Some(0), "{phase}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{phase}");
        assert!(
            run.has_line("does not exist: nothing to run"),
            "{}",
            run.stderr
        );
    }
}

/// Judging the hook directory through its descriptor (issue 38) reaches it
/// by a walk that judges the directories above it first: a phase directory
/// that does not exist is still nothing to run, whatever its parent is —
/// not a setup failure (which would drain the node at a health check).
#[test]
fn a_missing_hook_directory_under_a_writable_parent_is_still_nothing_to_run() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let slurm = fx.path("etc/slurm");
    fs::create_dir_all(&slurm).expect("mkdir");
    fs::set_permissions(&slurm, fs::Permissions::from_mode(0o777)).expect("chmod");
    let run = fx.hookrun().args(["epilog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.has_line("does not exist: nothing to run"),
        "{}",
        run.stderr
    );
    // One that exists there is refused, as before.
    fs::create_dir(slurm.join("epilog.d")).expect("mkdir");
    let run = fx.hookrun().args(["epilog"]).run();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert!(run.has_line("refusing to use it"), "{}", run.stderr);
}

#[test]
fn empty_hook_directories_are_success() {
    let fx = Fixture::new();
    for phase in ["prolog", "epilog", "task-prolog"] {
        fs::create_dir_all(fx.path(&format!("etc/slurm/{phase}.d"))).expect("mkdir");
        let run = fx.hookrun().args([phase]).run();
        assert_eq!(run.code, Some(0), "{phase}: {}", run.stderr);
        assert!(run.has_line("0 hooks"), "{}", run.stderr);
    }
}

#[test]
fn a_hook_directory_that_cannot_be_read_is_a_setup_failure() {
    let fx = Fixture::new();
    fx.write("etc/slurm/prolog.d", "not a directory", 0o644);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert!(
        run.has_line("failed to read hook directory"),
        "{}",
        run.stderr
    );
}

#[test]
fn list_shows_run_order_required_optional_and_ignored() {
    let fx = Fixture::new();
    fx.hook("prolog", "20-gpu.optional", "");
    fx.hook("prolog", "10-qoslane", "");
    fx.write("etc/slurm/prolog.d/README", "docs", 0o644);
    fx.hook("prolog", "10-qoslane.rpmsave", "");
    fx.hook("epilog", "90-cleanup", "");

    let run = fx.hookrun().args(["list", "prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    let dir = fx.path("etc/slurm/prolog.d");
    assert_eq!(
        lines,
        [
            format!("prolog  {}", dir.display()).as_str(),
            "   1  10-qoslane          required",
            "   2  20-gpu.optional     optional",
            "   -  10-qoslane.rpmsave  ignored: editor/package leftover (.rpmsave)",
            "   -  README              ignored: not executable",
        ]
    );
    assert!(
        run.stdout.starts_with("# configuration: "),
        "{}",
        run.stdout
    );

    let all = fx.hookrun().args(["list"]).run();
    for phase in ["prolog", "epilog", "task-prolog", "health"] {
        assert!(
            all.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{phase}  "))),
            "{phase} missing from\n{}",
            all.stdout
        );
    }
    assert!(all.stdout.contains("(missing: nothing runs)"));
}
