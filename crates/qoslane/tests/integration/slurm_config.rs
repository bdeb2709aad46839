//! `qoslane slurm-config`: the slurm.conf lines and job_submit.lua generated
//! from a mapping, as golden text (insta snapshots in tests/snapshots/), the
//! files `--output DIR` writes, and each refusal of what Slurm cannot be told.
//! On real Slurm the generated script is run by tests/e2e/placement.sh.
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
    assert_eq!(names.len(), 2, "no temp file left: {names:?}");
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
    assert!(
        e.contains(&format!(
            "{} is the site's own job_submit.lua (not qoslane's): merge the two by hand",
            lua.display()
        )),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(&lua).unwrap(),
        site,
        "left as it was"
    );
    assert!(!dir.path().join("qoslane.conf").exists(), "nothing written");
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
