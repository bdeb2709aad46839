//! Test fixture: a node under a temp root — mapping, node settings files,
//! a fake `scontrol`, a fake `smpquery` — and a runner for the real binary.

#![expect(dead_code, reason = "each test binary uses part of the fixture")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_qoslane");

/// Two node settings the example levels use: a RoCE ToS in configfs and a
/// procfs knob.
pub const TOS: &str = "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos";
pub const RMEM: &str = "/proc/sys/net/core/rmem_max";

/// Four levels, each with distinct settings; `fabric_check: off` (the fabric
/// has its own tests).
pub const MAPPING: &str = "\
default_level: normal
fabric_check: off
on_failure: continue
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    virtual_lane: 3
    traffic_class: 106
    on_failure: fail_job
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: \"106\"
      - path: /proc/sys/net/core/rmem_max
        value: \"16777216\"
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: \"74\"
      - path: /proc/sys/net/core/rmem_max
        value: \"8388608\"
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low, standby]
    service_level: 1
    virtual_lane: 1
    node_settings:
      - path: /proc/sys/net/core/rmem_max
        value: \"1048576\"
";

pub const BASE_TOS: &str = "0";
pub const BASE_RMEM: &str = "212992";

#[derive(Debug)]
pub struct Node {
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn new() -> Self {
        Self::with_mapping(MAPPING)
    }

    pub fn with_mapping(mapping: &str) -> Self {
        let n = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        n.write_mapping(mapping);
        n.set(TOS, BASE_TOS);
        n.set(RMEM, BASE_RMEM);
        n
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.root().join(p.trim_start_matches('/'))
    }

    pub fn write_mapping(&self, text: &str) {
        let p = self.path("/etc/qoslane/qos-network.yml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn set(&self, p: &str, v: &str) {
        let f = self.path(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, format!("{v}\n")).unwrap();
    }

    pub fn get(&self, p: &str) -> String {
        std::fs::read_to_string(self.path(p))
            .unwrap()
            .trim_end()
            .to_owned()
    }

    pub fn settings(&self) -> (String, String) {
        (self.get(TOS), self.get(RMEM))
    }

    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// The binary with this root, a clean environment and `env` added.
    pub fn cmd(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("QOSLANE_ROOT", self.root())
            .env("QOSLANE_SCONTROL", fixture_bin("scontrol"))
            .env("QOSLANE_NO_JOURNAL", "1")
            .args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.cmd(args, env).output().unwrap()
    }

    pub fn prolog(&self, job: u32, qos: &str) -> Output {
        let id = job.to_string();
        self.run(
            &["prolog"],
            &[
                ("SLURM_JOB_ID", &id),
                ("FAKE_QOS", qos),
                ("SLURM_JOB_USER", "alice"),
            ],
        )
    }

    pub fn epilog(&self, job: u32) -> Output {
        let id = job.to_string();
        self.run(&["epilog"], &[("SLURM_JOB_ID", &id)])
    }

    pub fn task_prolog(&self, job: u32, extra: &[(&str, &str)]) -> Output {
        let id = job.to_string();
        let mut env = vec![("SLURM_JOB_ID", id.as_str())];
        env.extend_from_slice(extra);
        let root = self.root().to_str().unwrap().to_owned();
        let mut c = Command::new(BIN);
        c.env_clear().args(["--root", &root, "task-prolog"]);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    /// Every audit line, parsed.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        match std::fs::read_to_string(self.path("/var/log/qoslane/audit.jsonl")) {
            Ok(t) => t
                .lines()
                .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    pub fn audit_events(&self, event: &str) -> Vec<serde_json::Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["event"] == event)
            .collect()
    }

    pub fn last_audit(&self, event: &str) -> serde_json::Value {
        self.audit_events(event)
            .pop()
            .unwrap_or_else(|| panic!("no {event} audit line"))
    }

    /// Job records left in the state directory.
    pub fn records(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path("/run/qoslane/jobs"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn journal_exists(&self) -> bool {
        self.path("/run/qoslane/journal.json").exists()
    }

    /// `export` lines as a map.
    pub fn exports(out: &Output) -> BTreeMap<String, String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let rest = l
                    .strip_prefix("export ")
                    .unwrap_or_else(|| panic!("not a protocol line: {l:?}"));
                let (k, v) = rest.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }
}

/// A committed stand-in program under tests/fixtures/bin.
pub fn fixture_bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bin")
        .join(name)
}

pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
