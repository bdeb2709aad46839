//! Who may decide what hookrun runs as root: hook files, hook directories and
//! hookrun.conf writable by group or others, or owned by another user, are
//! refused (docs/hookrun.md, "Trust").

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, symlink};

use crate::util::Fixture;

fn chmod(path: &std::path::Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_hook_writable_by_others_or_owned_by_a_user_is_not_run_and_fails() {
    for (what, spoil) in [
        (
            "group-writable",
            (|p| chmod(p, 0o775)) as fn(&std::path::Path),
        ),
        ("world-writable", |p| chmod(p, 0o757)),
        ("owned by a user", |p| {
            chown(p, Some(1000), None).expect("chown");
        }),
    ] {
        let fx = Fixture::new();
        fx.recording_hook("prolog", "10-first", "");
        let bad = fx.recording_hook("prolog", "20-spoiled", "");
        fx.recording_hook("prolog", "30-after", "");
        spoil(&bad);
        let run = fx.hookrun().args(["prolog"]).run();
        assert_eq!(run.code, Some(1), "{what}: {}", run.stderr);
        assert_eq!(fx.ran(), ["10-first"], "{what}: the refused hook ran");
        assert!(
            run.has_line("hookrun[prolog] 20-spoiled: failed: refusing to run it: "),
            "{what}: {}",
            run.stderr
        );
        let listed = fx.hookrun().args(["list", "prolog"]).run();
        assert!(
            listed
                .stdout
                .contains("20-spoiled  required, refused (fails): "),
            "{}",
            listed.stdout
        );
    }
}

#[test]
fn an_optional_refused_hook_is_reported_not_acted_on() {
    let fx = Fixture::new();
    let bad = fx.recording_hook("prolog", "20-extra.optional", "");
    chmod(&bad, 0o777);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(fx.ran().is_empty());
    assert!(run.has_line("refusing to run it"), "{}", run.stderr);
    assert!(
        run.has_line("(optional hook: not acted on)"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_symlink_to_a_hook_in_an_open_directory_is_refused() {
    let fx = Fixture::new();
    // <root>/etc/slurm/../../opt/open.d/hook
    let target = fx.recording_hook("../../opt/open", "hook", "");
    let open = fx.path("opt/open.d");
    chmod(&open, 0o777);
    fs::create_dir_all(fx.path("etc/slurm/epilog.d")).expect("mkdir");
    symlink(&target, fx.path("etc/slurm/epilog.d/10-linked")).expect("symlink");
    let run = fx.hookrun().args(["epilog"]).run();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(fx.ran().is_empty());
    assert!(
        run.has_line("opt/open.d is writable by group or others (mode 777)"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_hook_directory_writable_by_others_is_a_setup_failure() {
    let fx = Fixture::new();
    fx.recording_hook("prolog", "10-x", "");
    chmod(&fx.path("etc/slurm/prolog.d"), 0o1777);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    assert!(fx.ran().is_empty());
    assert!(run.has_line("refusing to use it: "), "{}", run.stderr);
    assert!(run.has_line("(mode 1777)"), "{}", run.stderr);
    // ... and so is a directory above it that others may write.
    chmod(&fx.path("etc/slurm/prolog.d"), 0o755);
    chmod(&fx.path("etc/slurm"), 0o777);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(4), "{}", run.stderr);
    chmod(&fx.path("etc/slurm"), 0o755);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(fx.ran(), ["10-x"]);
}

#[test]
fn a_configuration_others_may_write_is_refused() {
    let fx = Fixture::new();
    fx.recording_hook("prolog", "10-x", "");
    fx.write("etc/slurm/hookrun.conf", "budget = 20s\n", 0o666);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(fx.ran().is_empty());
    assert!(run.has_line("refusing to use it: "), "{}", run.stderr);
    chmod(&fx.path("etc/slurm/hookrun.conf"), 0o644);
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
}
