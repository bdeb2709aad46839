//! The libraries read what the TaskProlog exports: its `export` lines fed
//! to the real configuration parsers of UCX (`ucx_info -cf`) and Open MPI
//! (`ompi_info --all --parsable`) as Debian 12 ships them (UCX 1.13,
//! Open MPI 4.1). Each transport's SL (and UCX's traffic class) must be the
//! level's. Skips without the tools unless `QOSLANE_REQUIRE_TOOLS=1`.
#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::Within as _;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::util::Node;

/// The exports of a `mission-critical` job (SL 3, traffic class 106).
fn exports() -> BTreeMap<String, String> {
    let n = Node::new();
    crate::util::ok(&n.prolog(140, "mission-critical"));
    let ex = Node::exports(&n.task_prolog(140, &[]));
    assert_eq!(ex["UCX_IB_SL"], "3", "{ex:?}");
    ex
}

/// `KEY=VALUE` lines of a tool's output, run with only `env`.
fn run(program: &Path, args: &[&str], env: &BTreeMap<String, String>) -> String {
    let out = Command::new(program)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/tmp")
        .envs(env)
        .args(args)
        .output_within();
    assert!(
        out.status.success(),
        "{}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn ucx_takes_the_sl_and_traffic_class_on_every_ib_transport() {
    let Some(ucx_info) = crate::util::tool(&["ucx_info"]) else {
        return;
    };
    let env = exports();
    let text = run(&ucx_info, &["-cf"], &env);
    let values: BTreeMap<&str, &str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    // Every verbs transport UCX 1.13 builds: RC, DC, UD (verbs and mlx5).
    let sls: Vec<(&str, &str)> = values
        .iter()
        .filter(|(k, _)| k.ends_with("_SL") && k.starts_with("UCX_"))
        .map(|(k, v)| (*k, *v))
        .collect();
    assert!(sls.len() >= 4, "transports with an SL: {sls:?}");
    for (k, v) in &sls {
        assert_eq!(*v, "3", "{k}");
    }
    let tcs: Vec<(&str, &str)> = values
        .iter()
        .filter(|(k, _)| k.ends_with("_TRAFFIC_CLASS"))
        .map(|(k, v)| (*k, *v))
        .collect();
    assert!(!tcs.is_empty());
    for (k, v) in &tcs {
        assert_eq!(*v, "106", "{k}");
    }
}

#[test]
fn open_mpi_openib_takes_the_service_level_from_the_environment() {
    let Some(ompi_info) = crate::util::tool(&["ompi_info"]) else {
        return;
    };
    let env = exports();
    let text = run(&ompi_info, &["--all", "--parsable"], &env);
    let value = |p: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "mca:btl:openib:param:btl_openib_ib_service_level:{p}:"
                ))
            })
            .map(str::to_owned)
    };
    assert_eq!(
        value("value").as_deref(),
        Some("3"),
        "Open MPI 4.1's openib BTL"
    );
    assert_eq!(value("source").as_deref(), Some("environment"));
}
