//! The path, not only the port, on the multi-switch simulated fabric
//! (rigs/fabric_path_rig.sh: leaf1..3 with node1..6 on ports 1-2, spine1..2
//! on leaf ports 3-4; a real OpenSM with QoS): the first hop that `sync` and
//! `health` read, `qoslane fabric audit`, and `qoslane fabric sm-config`'s
//! options started with a real OpenSM and proven by the audit.
//!
//! The node is node2 (leaf1 port 2), its HCA `mlx5_0`.

use crate::util::Within as _;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use qoslane::deadline::Deadline;
use qoslane::fabric::policy::{self, Scope};
use qoslane::fabric::{AssessOptions, ProbeMode};

use super::rig::{SimNode, SimPort, read, repo, rig_wanted};
use super::{MAPPING, mapping};
use crate::util::BIN;

/// A running multi-switch rig; stopped when dropped.
pub(super) struct PathRig {
    env_file: PathBuf,
    env: HashMap<String, String>,
    pub(super) dir: tempfile::TempDir,
}

fn script() -> PathBuf {
    repo().join("rigs/fabric_path_rig.sh")
}

impl PathRig {
    pub(super) fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .args(args)
            .output_within();
        assert!(
            out.status.success(),
            "fabric_path_rig.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env_file = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        let env = read(&env_file)
            .lines()
            .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Self { env_file, env, dir }
    }

    pub(super) fn var(&self, k: &str) -> &str {
        self.env
            .get(k)
            .unwrap_or_else(|| panic!("rig env has no {k}"))
    }

    /// One lever of the rig (`misalign`, `zero-weight`, `restart-sm`, …).
    pub(super) fn lever(&self, cmd: &str, args: &[&str]) {
        let out = Command::new("bash")
            .arg(script())
            .arg(cmd)
            .arg(&self.env_file)
            .args(args)
            .output_within();
        assert!(
            out.status.success(),
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// (lid, guid) of a node, from the rig's nodes.tsv.
    fn node_ids(&self, name: &str) -> (u16, String) {
        let tsv = read(Path::new(self.var("RIG_NODES")));
        let cols: Vec<&str> = tsv
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|c| c[0] == name)
            .unwrap_or_else(|| panic!("no {name} in nodes.tsv:\n{tsv}"));
        (cols[2].parse().unwrap(), cols[3].to_owned())
    }

    /// node2 as a qoslane node: its HCA is `mlx5_0`.
    pub(super) fn node2(&self) -> SimNode {
        self.node2_as("mlx5_0")
    }

    /// node2 with its HCA named `device` (`ibsim0`: the name the rig's umad
    /// preload gives it, for qoslane reading SMPs in process).
    pub(super) fn node2_as(&self, device: &str) -> SimNode {
        let (lid, guid) = self.node_ids("node2");
        let (sm_lid, _) = self.node_ids(self.var("RIG_SM_NODE"));
        let mut env: Vec<(String, String)> = ["IBSIM_SOCKNAME", "RIG_UMAD2SIM", "RIG_WORK"]
            .iter()
            .map(|k| ((*k).to_owned(), self.var(k).to_owned()))
            .collect();
        env.push(("RIG_CA".into(), "ibsim0".into()));
        if device != "mlx5_0" {
            env.push(("SMPQUERY_SIM_HOSTS".into(), format!("{device}=node2")));
        }
        SimNode::new(
            self.dir.path(),
            env,
            &[SimPort {
                device: device.into(),
                guid,
                lid,
                sm_lid,
            }],
        )
    }
}

impl Drop for PathRig {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.env_file)
            .try_output_within();
    }
}

fn first_hop_opts() -> AssessOptions {
    AssessOptions {
        first_hop: true,
        probe_timeout: Duration::from_secs(20),
        ..AssessOptions::default()
    }
}

#[test]
fn path_first_hop_catches_what_the_own_port_cannot_see() {
    if !rig_wanted("path_first_hop") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let m = mapping(MAPPING);
    // An aligned fabric: the own port and every leaf1 output port carry every level.
    let r = node.assess_opts(&m, ProbeMode::Fresh, &first_hop_opts());
    assert_eq!(super::all_problems(&r), Vec::<String>::new());
    let counts = r.first_hop_counts().unwrap();
    let carried: u64 = counts
        .iter()
        .filter(|(l, v, _)| l == "mission-critical" && v == "carried")
        .map(|(.., n)| n)
        .sum();
    assert_eq!(carried, 3, "leaf1's ports 1, 3, 4 (port 2 is node2's own)");

    // leaf1 drops SL 3 toward spine1 (port 3) and starves VL 3 toward spine2.
    rig.lever("misalign", &["leaf1", "3", "3", "15"]);
    rig.lever("zero-weight", &["leaf1", "4", "3"]);
    let r = node.assess_opts(&m, ProbeMode::Fresh, &first_hop_opts());
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1 first hop: SL 3 -> VL 15 (dropped: VL 15 is the management lane) at \
             switch leaf1 (lid 4) port 2 -> 3",
            "mlx5_0/1 first hop: SL 3 -> VL 3 (starved: weight 0 in both VL arbitration \
             tables) at switch leaf1 (lid 4) port 2 -> 4",
        ]
    );
    assert_eq!(
        r.problems("high"),
        Vec::<String>::new(),
        "SL 2 is untouched"
    );
    // The own port alone (a Prolog's view) sees nothing wrong.
    let own = node.assess_opts(&m, ProbeMode::Fresh, &AssessOptions::default());
    assert_eq!(super::all_problems(&own), Vec::<String>::new());

    // The fabric policy (sync, health) refuses the level under enforce.
    let d = Deadline::after(Duration::from_secs(30));
    let j = policy::judge(&node.paths, &m, &d, ProbeMode::Fresh, Scope::Every);
    let refusal = j.refusal.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        refusal.contains("level `mission-critical`: mlx5_0/1 first hop: SL 3 -> VL 15"),
        "{refusal}"
    );
    let hops = j.first_hop.unwrap();
    let dropped = hops
        .iter()
        .find(|h| h.level == "mission-critical" && h.verdict == "dropped")
        .map_or(0, |h| h.ports);
    assert_eq!(dropped, 1);

    // A fresh SM rewrites every table: carried again.
    rig.lever("restart-sm", &[]);
    let r = node.assess_opts(&m, ProbeMode::Fresh, &first_hop_opts());
    assert_eq!(super::all_problems(&r), Vec::<String>::new());
}

pub(super) fn audit(node: &SimNode, mapping_file: &Path, extra: &[&str]) -> Output {
    audit_command(node, mapping_file)
        .args(extra)
        .output_within()
}

/// `qoslane fabric audit --mapping FILE` with the rig's tools and nothing
/// else in its environment.
pub(super) fn audit_command(node: &SimNode, mapping_file: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
        .env("QOSLANE_IBNETDISCOVER", &node.paths.ibnetdiscover)
        .env("QOSLANE_PERFQUERY", node.paths.perfquery.as_ref().unwrap())
        .env("QOSLANE_IBROUTE", &node.paths.ibroute)
        .args(["fabric", "audit", "--mapping"])
        .arg(mapping_file);
    c
}

pub(super) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

#[test]
fn path_audit_names_the_spine_that_drops_and_the_leaf_that_starves() {
    if !rig_wanted("path_audit") {
        return;
    }
    let rig = PathRig::start(&["-m", "spine1:2:3:15", "-z", "leaf3:2:3"]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let out = audit(&node, &m, &["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = &v["report"];
    assert_eq!(
        (report["switches"].as_u64(), report["hcas"].as_u64()),
        (Some(5), Some(6))
    );
    assert_eq!(report["unread"].as_array().unwrap().len(), 0);
    let mc = &report["levels"][0];
    assert_eq!(mc["level"], "mission-critical");
    let messages: Vec<&str> = mc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "level mission-critical: SL 3 -> VL 3 (starved: weight 0 in both VL arbitration \
             tables) at switch leaf3 (lid 7) every in port -> 2",
            "level mission-critical: SL 3 -> VL 15 (dropped: VL 15 is the management lane) \
             at switch spine1 (lid 2) every in port -> 2",
        ]
    );
    for level in &report["levels"].as_array().unwrap()[1..] {
        assert_eq!(level["findings"].as_array().unwrap().len(), 0, "{level}");
    }
    assert_eq!(v["verdict"], "not_carried");

    // The textfile says the same.
    let prom = rig.dir.path().join("audit.prom");
    let out = audit(&node, &m, &["--textfile", prom.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = read(&prom);
    assert!(text.contains("qoslane_fabric_audit_success 1\n"), "{text}");
    assert!(
        text.contains("qoslane_fabric_audit_level_carried{level=\"mission-critical\"} 0\n"),
        "{text}"
    );
    assert!(text.contains("qoslane_fabric_audit_level_carried{level=\"high\"} 1\n"));
    assert!(
        text.contains(
            "qoslane_fabric_audit_port_pairs{level=\"mission-critical\",verdict=\"dropped\"} 2\n"
        ),
        "spine1 2 <- 1,3: {text}"
    );
    let human = String::from_utf8(out.stdout).unwrap();
    assert!(
        human.contains("verdict: 1 of 4 levels fail: mission-critical (not carried)"),
        "{human}"
    );

    // A fresh SM rewrites every table: every level carried.
    rig.lever("restart-sm", &[]);
    let out = audit(&node, &m, &[]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{human}");
    assert!(human.contains("verdict: every level carried on every data port"));
}

#[test]
fn path_audit_without_a_fabric_is_unavailable() {
    if !rig_wanted("path_audit_unavailable") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    drop(
        Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&rig.env_file)
            .try_output_within(),
    );
    let prom = rig.dir.path().join("audit.prom");
    let out = audit(
        &node,
        &m,
        &["--timeout", "5", "--textfile", prom.to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = read(&prom);
    assert!(text.contains("qoslane_fabric_audit_success 0\n"), "{text}");
    assert!(!text.contains("level_carried"), "no stale verdict: {text}");
}

/// `sm-config`'s options for `mapping`, in a file.
fn sm_config(dir: &Path, mapping_file: &Path, name: &str) -> PathBuf {
    let out = Command::new(BIN)
        .env_clear()
        .args(["fabric", "sm-config", "--mapping"])
        .arg(mapping_file)
        .output_within();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    write(dir, name, &String::from_utf8(out.stdout).unwrap())
}

const SECOND: &str = "\
default_level: scavenger
fabric_check: enforce
levels:
  - name: interactive
    qos: [interactive]
    service_level: 6
    virtual_lane: 1
  - name: batch
    qos: [batch]
    service_level: 4
    virtual_lane: 2
  - name: scavenger
    qos: [scavenger]
    service_level: 9
";

#[test]
fn path_sm_config_is_carried_by_a_real_opensm_and_a_broken_line_is_caught() {
    if !rig_wanted("path_sm_config") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = repo().join("examples/qos-network.yml");
    for (mapping_file, top_vl) in [
        (example.clone(), 3u8),
        (write(dir.path(), "second.yml", SECOND), 1),
    ] {
        let conf = sm_config(dir.path(), &mapping_file, "sm.conf");
        let rig = PathRig::start(&["-c", conf.to_str().unwrap()]);
        let node = rig.node2();
        let out = audit(&node, &mapping_file, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}:\n{}{}",
            mapping_file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The top tier's VL is the high-priority table's entry on a spine port.
        let (spine, _) = rig.node_ids("spine1");
        let vlarb = Command::new(&node.paths.smpquery)
            .args(["vlarb", &spine.to_string(), "1"])
            .output_within();
        let text = String::from_utf8(vlarb.stdout).unwrap();
        let high = text
            .split("# High priority VL Arbitration Table:")
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        let first_vl = high
            .lines()
            .find(|l| l.starts_with("VL"))
            .and_then(|l| l.split('|').nth(1))
            .map(str::trim)
            .unwrap();
        assert_eq!(first_vl, format!("0x{top_vl:x}"), "{text}");
    }

    // One hand-broken line (switch external ports: SL 3 -> VL 15) is caught.
    let conf = sm_config(dir.path(), &example, "broken.conf");
    let text = read(&conf).replace("qos_swe_sl2vl 0,1,2,3,", "qos_swe_sl2vl 0,1,2,15,");
    assert!(text.contains("qos_swe_sl2vl 0,1,2,15,"), "{text}");
    fs::write(&conf, text).unwrap();
    let rig = PathRig::start(&["-c", conf.to_str().unwrap()]);
    let node = rig.node2();
    let out = audit(&node, &example, &[]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{human}");
    assert!(
        human.contains(
            "FAIL level mission-critical: SL 3 -> VL 15 (dropped: VL 15 is the management lane) \
             at switch leaf1 (lid 4) every in port -> 1,2,3,4"
        ),
        "{human}"
    );
    assert!(human.contains("verdict: 1 of 4 levels fail: mission-critical (not carried)"));
}

#[test]
fn path_audit_of_a_generated_fat_tree() {
    if !rig_wanted("path_fat_tree") {
        return;
    }
    let rig = PathRig::start(&["-t", "ft:4:3:2"]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let out = audit(&node, &m, &["--format", "json", "--workers", "6"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["report"]["switches"], 6);
    assert_eq!(v["report"]["hcas"], 12);
    // 4 leaves x (3 HCA + 2 up) + 2 spines x 4 down + 12 HCA ports
    assert_eq!(v["report"]["ports_read"], 40);
}

#[test]
fn path_fewer_opervls_on_one_link_and_a_bounce_that_repairs_drift() {
    if !rig_wanted("path_opervls_bounce") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    // spine1's port 2 runs two data VLs only (one side of the link).
    rig.lever("opervls", &["spine1", "2", "2"]);
    let out = audit(&node, &m, &[]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{human}");
    assert!(
        human.contains(
            "FAIL level mission-critical: SL 3 -> VL 3 (dropped: outside OperVLs VL0-1) at switch \
             spine1 (lid 2) every in port -> 2"
        ),
        "{human}"
    );
    assert!(
        human.contains("level low (SL 1 -> VL 1): carried"),
        "VL 1 still runs: {human}"
    );

    // Drift behind the SM's back survives a heavy sweep; bouncing the link repairs it.
    rig.lever("restart-sm", &[]);
    rig.lever("misalign", &["spine2", "1", "2", "15"]);
    rig.lever("reconf", &["sweep_interval", "0"]);
    let out = audit(&node, &m, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a SIGHUP re-sweep left the drift"
    );
    rig.lever("bounce", &["spine2", "1"]);
    let out = audit(&node, &m, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the bounced port was rewritten: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn path_explain_fabric_tells_whether_the_level_would_be_granted_now_and_writes_nothing() {
    if !rig_wanted("path_explain_fabric") {
        return;
    }
    let rig = PathRig::start(&["-m", "leaf1:3:3:15"]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let explain = |qos: &str| {
        Command::new(BIN)
            .env_clear()
            .env("QOSLANE_NO_JOURNAL", "1")
            .env("QOSLANE_ROOT", &node.paths.root)
            .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
            .arg("--config")
            .arg(&m)
            .args(["explain", "--fabric", "--qos", qos])
            .output_within()
    };
    let out = explain("mission-critical");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a dry run, whose exit a script can trust: {text}"
    );
    assert!(
        text.contains(
            "  fabric now      REFUSED on this node now: fabric check: mlx5_0/1 first hop: SL 3 -> VL 15"
        ),
        "{text}"
    );
    let out = explain("high");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "granted: {text}");
    assert!(
        text.contains("  fabric now      granted on this node now (own ports and first hop)"),
        "{text}"
    );
    assert!(
        !node.paths.fabric_cache().exists(),
        "a dry run writes no cache"
    );
}

/// The test mapping with `mission-critical` (SL 3) a `fail_job` level,
/// installed on `node`.
pub(super) fn install_fail_job_mapping(node: &SimNode) {
    install_mapping(
        node,
        &MAPPING.replace(
            "    virtual_lane: 3\n",
            "    virtual_lane: 3\n    on_failure: fail_job\n",
        ),
    );
}

/// The binary on `node` (its root, the rig's smpquery, the fake squeue).
/// `mapping` installed as the node's mapping file; its path.
pub(super) fn install_mapping(node: &SimNode, mapping: &str) -> PathBuf {
    let cfg = node.paths.root.join("etc/qoslane/qos-network.yml");
    fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    fs::write(&cfg, mapping).unwrap();
    cfg
}

/// A hook (`prolog`, `epilog`) of job `id` of QoS `qos` (alice's), with `env`.
pub(super) fn hook(
    node: &SimNode,
    hook: &str,
    id: &str,
    qos: &str,
    env: &[(&str, &str)],
) -> Output {
    let mut all = vec![
        ("SLURM_JOB_ID", id),
        ("FAKE_QOS", qos),
        ("SLURM_JOB_USER", "alice"),
    ];
    all.extend_from_slice(env);
    run_bin(node, &[hook], &all)
}

pub(super) fn run_bin(node: &SimNode, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("QOSLANE_ROOT", &node.paths.root)
        .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
        // squeue gets an exact environment: the job's FAKE_QOS goes to a
        // file beside the stand-in (util::fake_squeue), not through qoslane.
        .env(
            "QOSLANE_SQUEUE",
            crate::util::fake_squeue(&node.paths.root.join("fakesqueue"), env),
        )
        .env("QOSLANE_NO_JOURNAL", "1")
        .env("QOSLANE_TIMEOUT_MS", "30000")
        .args(args)
        .envs(env.iter().copied().filter(|(k, _)| !k.starts_with("FAKE_")));
    c.output_within()
}

/// What a run printed, stdout then stderr.
pub(super) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Issue 23, item 1: the first switch (leaf1) drops the `fail_job` level's
/// SL behind the SM. (a) `health` records it, the next Prolog of that level
/// is refused, and `health`, `status`, `explain` and the metric all say it
/// is not granted; (b) on a node with no record, the Prolog of the
/// `fail_job` level reads the first hop itself and refuses.
#[test]
fn path_a_leaf_dropping_the_fail_job_level_refuses_it_and_every_view_says_so() {
    if !rig_wanted("path_grant") {
        return;
    }
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let root = node.paths.root.clone();
    install_fail_job_mapping(&node);
    install_mapping(
        &node,
        &MAPPING.replace(
            "    virtual_lane: 3\n",
            "    virtual_lane: 3\n    on_failure: fail_job\n",
        ),
    );
    let run = |args: &[&str], env: &[(&str, &str)]| run_bin(&node, args, env);
    let prolog = |id: &str, qos: &str| hook(&node, "prolog", id, qos, &[]);
    let out = run(&["sync"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let out = prolog("1", "mission-critical");
    assert!(out.status.success(), "aligned: granted: {}", text(&out));
    assert!(run(&["epilog"], &[("SLURM_JOB_ID", "1")]).status.success());

    // leaf1 drops SL 3 toward spine1: node2's own port still carries it.
    rig.lever("misalign", &["leaf1", "3", "3", "15"]);
    let dropped = "mlx5_0/1 first hop: SL 3 -> VL 15";

    // (a) health records it; the Prolog obeys the record.
    let out = run(&["health"], &[]);
    let said = text(&out);
    assert!(
        out.status.success(),
        "a level not granted is a warning: {said}"
    );
    assert!(
        said.contains("level mission-critical: ")
            && said.contains(dropped)
            && said.contains("its jobs are refused and requeued (on_failure: fail_job)"),
        "{said}"
    );
    let out = prolog("2", "mission-critical");
    assert!(
        !out.status.success(),
        "refused by the recorded first hop: {}",
        text(&out)
    );
    assert!(text(&out).contains(dropped), "{}", text(&out));
    assert!(
        !root.join("run/qoslane/jobs/2.json").exists(),
        "no record, no SL for job 2"
    );
    let out = prolog("3", "high");
    assert!(out.status.success(), "SL 2 is carried: {}", text(&out));
    assert!(run(&["epilog"], &[("SLURM_JOB_ID", "3")]).status.success());

    let out = run(&["status"], &[]);
    let st = text(&out);
    assert_eq!(out.status.code(), Some(1), "{st}");
    assert!(
        st.contains("level mission-critical is not granted") && st.contains(dropped),
        "{st}"
    );
    let out = run(&["explain", "--qos", "mission-critical"], &[]);
    let ex = text(&out);
    assert!(
        ex.contains("  grant           its jobs are refused and requeued (on_failure: fail_job)"),
        "{ex}"
    );
    let out = run(&["metrics"], &[]);
    let m = text(&out);
    assert!(
        m.contains("qoslane_level_granted{level=\"mission-critical\"} 0\n"),
        "{m}"
    );
    assert!(
        m.contains("qoslane_level_granted{level=\"high\"} 1\n"),
        "{m}"
    );

    // (b) a node with no record: the fail_job level reads its first hop itself.
    fs::remove_file(root.join("run/qoslane/grants.json")).unwrap();
    let out = prolog("4", "mission-critical");
    let said = text(&out);
    assert!(!out.status.success(), "refused without a record: {said}");
    assert!(said.contains(dropped), "{said}");
    // A `continue` level never waits for the first hop: granted on its own port.
    let out = prolog("5", "high");
    assert!(out.status.success(), "{}", text(&out));
}
