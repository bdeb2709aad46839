//! `qoslane slurm-config`: the slurm.conf lines and job_submit.lua generated
//! from a mapping, as golden text (insta snapshots in tests/snapshots/), the
//! files `--output DIR` writes (the module, qoslane's script or a site's own
//! that calls the module), each refusal of what Slurm cannot be told at the
//! mapping's line, and `--check-qos` against the stand-in
//! `tests/fixtures/bin/sacctmgr`. On real Slurm the generated scripts and the
//! real sacctmgr are run by tests/e2e/placement.sh.
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::Within as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::BIN;

const SIZES: &[&str] = &["--placeholders", "4", "--cpus", "2", "--memory", "1000"];

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn example() -> PathBuf {
    manifest().join("../../examples/qos-network.yml")
}

fn slurm_config(mapping: &Path, extra: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .env_clear()
        .env("QOSLANE_NO_JOURNAL", "1")
        .arg("slurm-config")
        .arg("--config")
        .arg(mapping)
        .args(extra)
        .output_within()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The output without the temp path and the hash of the mapping.
fn stable(text: &str, mapping: &Path) -> String {
    text.replace(&mapping.display().to_string(), "MAPPING")
        .lines()
        .map(|l| {
            if l.starts_with("# mapping sha256 ") {
                "# mapping sha256 SHA256"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn golden(name: &str, mapping: &Path, extra: &[&str]) {
    let out = slurm_config(mapping, extra);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stable(&String::from_utf8(out.stdout).unwrap(), mapping);
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_snapshot_path("../snapshots");
    settings.bind(|| insta::assert_snapshot!(format!("slurm_config__{name}"), text));
}

/// Two fail_job levels (the top-level policy, one with two QoS names), a
/// `continue` level and the default under `continue`.
const TWO_PLACED: &str = "default_level: normal\non_failure: fail_job\nlevels:\n  - name: gold\n    \
qos: [gold, Platinum]\n    service_level: 4\n  - name: silver.v2\n    qos: [silver]\n    \
service_level: 3\n  - name: bronze\n    qos: [bronze]\n    service_level: 2\n    on_failure: continue\n  \
- name: normal\n    qos: [normal]\n    service_level: 0\n    on_failure: continue\n";

const NONE_PLACED: &str = "default_level: b\nlevels:\n  - name: a\n    qos: [a]\n    \
service_level: 3\n  - name: b\n    qos: [b]\n    service_level: 0\n";

#[test]
fn golden_the_example_mapping() {
    golden("example", &example(), SIZES);
}

#[test]
fn golden_two_placed_levels_one_placeholder_with_gres_and_site_features() {
    let dir = tempfile::tempdir().unwrap();
    golden(
        "two-placed",
        &write(&dir, "m.yml", TWO_PLACED),
        &[
            "--placeholders",
            "1",
            "--cpus",
            "64",
            "--memory",
            "512000",
            "--gres",
            "gpu:4",
            "--features",
            "rackA,ib_hdr",
        ],
    );
}

#[test]
fn output_writes_both_files_as_printed_and_replaces_its_own_script() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("etc-slurm");
    std::fs::create_dir(&out_dir).unwrap();
    let printed = slurm_config(&example(), SIZES);
    assert!(printed.status.success());
    let printed = String::from_utf8(printed.stdout).unwrap();
    for _ in 0..2 {
        // the second run replaces the script the first wrote: it is qoslane's
        let mut args = SIZES.to_vec();
        args.extend(["--output", out_dir.to_str().unwrap()]);
        let out = slurm_config(&example(), &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "nothing printed with --output");
    }
    let conf = std::fs::read_to_string(out_dir.join("qoslane.conf")).unwrap();
    let lua = std::fs::read_to_string(out_dir.join("job_submit.lua")).unwrap();
    assert!(printed.contains(&conf), "the conf as printed");
    assert!(printed.ends_with(&lua), "the script as printed");
    assert!(lua.starts_with("-- job_submit.lua: qoslane placement."));
    assert!(lua.contains("   [\"mission-critical\"] = \"qoslane_mission-critical\",\n}"));
    assert!(lua.contains("local ANY_NODE = \"qoslane\"\n"));
    assert!(
        !lua.contains('@'),
        "every placeholder of the template filled"
    );
    let names: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "no temp file left: {names:?}");
    let module = std::fs::read_to_string(out_dir.join("qoslane_placement.lua")).unwrap();
    assert!(module.starts_with("-- qoslane_placement.lua: qoslane placement, the module."));
    assert!(module.trim_end().ends_with("return M"));
    assert!(
        module.contains("   [\"mission-critical\"] = \"qoslane_mission-critical\",\n}"),
        "the module has the same table"
    );
}

#[test]
fn a_site_job_submit_lua_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let site = "function slurm_job_submit(j, p, u) return slurm.SUCCESS end\n";
    let lua = write(&dir, "job_submit.lua", site);
    let mut args = SIZES.to_vec();
    args.extend(["--output", dir.path().to_str().unwrap()]);
    let out = slurm_config(&example(), &args);
    assert_eq!(out.status.code(), Some(64));
    let e = String::from_utf8(out.stderr).unwrap();
    let module = dir.path().join("qoslane_placement.lua");
    assert!(
        e.contains(&format!(
            "{} is the site's own job_submit.lua (not qoslane's) and lacks the module loaded",
            lua.display()
        )) && e.contains(&format!(
            "at the top: `local qoslane = dofile(\"{}\")`; in slurm_job_submit, before it \
             returns: `qoslane.job_submit(job_desc, part_list, submit_uid)`; in slurm_job_modify, \
             before it returns: `qoslane.job_modify(job_desc, job_rec, part_list, modify_uid)`",
            module.display()
        )),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&lua).unwrap(),
        site,
        "left as it was"
    );
    assert!(
        !dir.path().join("qoslane.conf").exists(),
        "no slurm.conf lines until the script calls the module"
    );
    assert!(
        module.exists(),
        "the module written, for the site's script to load"
    );

    // The site adds the lines: its script is left as it is, the rest written.
    let site = format!(
        "local qoslane = dofile(\"{}\")\nfunction slurm_job_submit(j, p, u)\n  \
         qoslane.job_submit(j, p, u)\n  return slurm.SUCCESS\nend\nfunction \
         slurm_job_modify(j, r, p, u)\n  qoslane.job_modify(j, r, p, u)\n  return \
         slurm.SUCCESS\nend\n",
        module.display()
    );
    std::fs::write(&lua, &site).unwrap();
    let out = slurm_config(&example(), &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("left as it is (the site's own, calling the module)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&lua).unwrap(),
        site,
        "never replaced"
    );
    assert!(dir.path().join("qoslane.conf").exists());
}

fn refused(text: &str, extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = slurm_config(&write(&dir, "m.yml", text), extra);
    assert_eq!(
        out.status.code(),
        Some(2),
        "refused as a mapping Slurm cannot be told: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "nothing printed on a refusal");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn nothing_to_place_is_refused_naming_each_levels_policy() {
    let e = refused(NONE_PLACED, SIZES);
    assert!(
        e.contains(
            "no level of the mapping has `on_failure: fail_job` (levels: a continue, b \
             continue): nothing to place"
        ),
        "{e}"
    );
}

#[test]
fn a_fail_job_default_level_is_refused() {
    let text = NONE_PLACED.replace("levels:", "on_failure: fail_job\nlevels:");
    let e = refused(&text, SIZES);
    assert!(
        e.contains("`default_level` `b` is `fail_job`: a job whose QoS no level lists gets it"),
        "{e}"
    );
}

/// What Slurm cannot be told names the mapping's line, as the validator's
/// diagnostics do: FILE:LINE:COL, then the line with a caret.
#[test]
fn a_refusal_names_the_mapping_line() {
    let text = NONE_PLACED.replace("levels:", "on_failure: fail_job\nlevels:");
    let e = refused(&text, SIZES);
    assert!(
        e.contains("m.yml:1:16: error: `default_level` `b` is `fail_job`"),
        "{e}"
    );
    assert!(
        e.contains("1 | default_level: b\n  |                ^"),
        "{e}"
    );
    let e = refused(NONE_PLACED, SIZES);
    assert!(
        e.contains("m.yml:2:1: error: no level of the mapping has `on_failure: fail_job`"),
        "{e}"
    );
    // an option's problem has no line of the mapping
    let e = refused(
        TWO_PLACED,
        &["--placeholders", "0", "--cpus", "1", "--memory", "1"],
    );
    assert!(
        e.contains("\nerror: --placeholders 0") || e.starts_with("error: --placeholders 0"),
        "{e}"
    );
}

/// `--check-qos` through the stand-in sacctmgr: (the directory holding
/// it, its path).
fn sacctmgr(qos: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("sacctmgr");
    std::os::unix::fs::symlink(crate::util::fixture_bin("sacctmgr"), &link).unwrap();
    match qos {
        Some(q) => std::fs::write(dir.path().join("sacctmgr.qos"), q).unwrap(),
        None => std::fs::write(dir.path().join("sacctmgr.fail"), "").unwrap(),
    }
    (dir, link)
}

fn check_qos(mapping: &Path, sacctmgr: &Path) -> Output {
    slurm_config(
        mapping,
        &["--check-qos", "--sacctmgr", sacctmgr.to_str().unwrap()],
    )
}

#[test]
fn check_qos_names_the_line_of_a_qos_slurm_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", TWO_PLACED);
    let (_s, bin) = sacctmgr(Some("normal\ngold\nsilver\nbronze\nscavenger\n"));
    let out = check_qos(&m, &bin);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains(
            "m.yml:5:17: error: level `gold` lists QoS `Platinum`, which Slurm does not know"
        ) && e.contains("sacctmgr add qos platinum"),
        "{e}"
    );
    let o = String::from_utf8(out.stdout).unwrap();
    assert!(
        o.contains("note: Slurm's QoS `scavenger` is in no level of")
            && o.contains("its jobs get the default level `normal`"),
        "{o}"
    );
    assert!(!dir.path().join("qoslane.conf").exists(), "nothing written");
}

#[test]
fn check_qos_passes_when_slurm_knows_every_qos_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", TWO_PLACED);
    let (s, bin) = sacctmgr(Some("normal\ngold\nplatinum\nsilver\nbronze\n"));
    let out = check_qos(&m, &bin);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = String::from_utf8(out.stdout).unwrap();
    assert!(
        o.contains("is known to Slurm (5 QoS in Slurm)") && !o.contains("note:"),
        "{o}"
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("sacctmgr.calls")).unwrap(),
        "-n -P show qos format=name\n"
    );
}

#[test]
fn check_qos_with_slurmdbd_unreachable_is_a_clear_error_naming_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", TWO_PLACED);
    let (_s, bin) = sacctmgr(None);
    let out = check_qos(&m, &bin);
    assert_eq!(out.status.code(), Some(69), "unavailable");
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains(&format!(
            "`{} -n -P show qos format=name` failed, so the mapping's QoS names cannot be \
             checked against Slurm's (is slurmdbd reachable from here?)",
            bin.display()
        )) && e.contains("Connection refused"),
        "{e}"
    );
}

/// A host that does not reach slurmdbd (the Omnia role's control node)
/// checks what sacctmgr printed on one that does.
#[test]
fn check_qos_reads_slurms_names_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", TWO_PLACED);
    let names = write(&dir, "qos.txt", "normal\ngold\nsilver\nbronze\n");
    let out = slurm_config(&m, &["--check-qos", "--qos-from", names.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("m.yml:5:17: error: level `gold` lists QoS `Platinum`"),
        "{e}"
    );
    let out = slurm_config(&m, &["--qos-from", names.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(64), "only with --check-qos");
}

#[test]
fn check_qos_finds_sacctmgr_in_the_environment_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(&dir, "m.yml", TWO_PLACED);
    let (_s, bin) = sacctmgr(Some("normal\n"));
    let out = std::process::Command::new(BIN)
        .env_clear()
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_SACCTMGR", &bin)
        .args(["slurm-config", "--check-qos", "--config"])
        .arg(&m)
        .output_within();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("(and 3 more)") || e.matches("which Slurm does not know").count() >= 4,
        "{e}"
    );
    let out = slurm_config(&m, &["--check-qos", "--output", "/nonexistent"]);
    assert_eq!(
        out.status.code(),
        Some(64),
        "--output is not for --check-qos"
    );
}

#[test]
fn bad_sizes_and_site_features_are_refused_all_at_once() {
    let e = refused(
        TWO_PLACED,
        &[
            "--placeholders",
            "0",
            "--cpus",
            "0",
            "--memory",
            "0",
            "--gres",
            "gpu 4",
            "--features",
            "rack|A,qoslane_gold",
        ],
    );
    for want in [
        "--placeholders 0",
        "--cpus 0",
        "--memory 0",
        "--gres `gpu 4`",
        "--features: `rack|A` holds \"|\"",
        "--features: `qoslane_gold` is qoslane's own",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn the_sizes_are_required() {
    let out = slurm_config(&example(), &[]);
    assert_eq!(out.status.code(), Some(64));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("--placeholders <K>"), "{e}");
}

/// The constraint logic of the rendered scripts (`tests/e2e/placement.lua`,
/// which tests/e2e/placement.sh also runs before its Slurm rig): qoslane's
/// job_submit.lua and the module called as a site's script calls it, with
/// Lua 5.1 (slurmctld's job_submit/lua), on every `cargo test`.
#[test]
fn the_rendered_scripts_pass_the_constraint_logic_cases() {
    let Some(lua) = crate::util::tool(&["lua5.1"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // As placement.lua expects: mission-critical -> qoslane_mc, high -> qoslane_high.
    let mapping = write(
        &dir,
        "mapping.yml",
        "default_level: normal\nlevels:\n  - name: mc\n    qos: [mission-critical]\n    \
         service_level: 3\n    on_failure: fail_job\n  - name: high\n    qos: [high]\n    \
         service_level: 2\n    on_failure: fail_job\n  - name: normal\n    qos: [normal]\n    \
         service_level: 0\n",
    );
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let mut args = SIZES.to_vec();
    args.extend(["--output", out_dir.to_str().unwrap()]);
    let out = slurm_config(&mapping, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases = manifest().join("../../tests/e2e/placement.lua");
    for script in ["job_submit.lua", "qoslane_placement.lua"] {
        let out = std::process::Command::new(&lua)
            .arg(&cases)
            .arg(out_dir.join(script))
            .output_within();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.trim_end() == "all ok",
            "{script}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
