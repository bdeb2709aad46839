//! The fabric check against a simulated fabric: ibsim, a real OpenSM with a
//! QoS configuration, the real smpquery (rigs/ibsim_rig.sh, rigs/smpquery-sim).
//!
//! Each test starts its own rig (about 0.2 s) running a command that writes
//! the rig's environment to a file and then waits on stdin; dropping the
//! [`Rig`] closes stdin and the rig stops what it started.
//!
//! qoslane cannot see umad2sim's fake sysfs (a Rust binary), so each test
//! builds a sysfs tree for the simulated ports from the rig's GUIDs and LIDs:
//! `mlx5_0` is node2's HCA, `mlx5_1` node3's. The smpquery that qoslane runs
//! is a symlink to rigs/smpquery-sim with a `.env` file beside it.
//!
//! Without the rig's tools these tests skip, saying so, unless
//! `QOSLANE_FABRIC_RIG=1` or `QOSLANE_REQUIRE_TOOLS=1` (CI, scripts/test.sh,
//! rigs/fabric_e2e.sh): then they must run.

use crate::util::Within as _;
use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use qoslane::deadline::Deadline;
use qoslane::error::Error;
use qoslane::fabric::{self, AssessOptions, Assessment, ProbeMode, TablesSource};
use qoslane::mapping::Mapping;
use qoslane::paths::{Overrides, Paths};

use super::{MAPPING, mapping};

const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

pub(super) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether to run: the tools are there, or the rig is required.
pub(super) fn rig_wanted(test: &str) -> bool {
    let required = ["QOSLANE_FABRIC_RIG", "QOSLANE_REQUIRE_TOOLS"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| v == "1"));
    let tools = [
        "/usr/bin/ibsim",
        "/usr/sbin/opensm",
        "/usr/sbin/smpquery",
        UMAD2SIM,
    ];
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| !Path::new(t).exists())
        .collect();
    if missing.is_empty() || required {
        // when required, the rig installs what is missing or fails loudly
        return true;
    }
    eprintln!(
        "SKIP {test}: simulated fabric not installed (missing {}); \
         QOSLANE_FABRIC_RIG=1 or QOSLANE_REQUIRE_TOOLS=1 makes this a failure",
        missing.join(", ")
    );
    false
}

/// A running rig.
struct Rig {
    child: Child,
    stdin: Option<ChildStdin>,
    env: HashMap<String, String>,
    dir: tempfile::TempDir,
}

impl Rig {
    /// `ibsim_rig.sh ARGS -- <write env, wait>`; up when the env file is.
    fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let env_file = dir.path().join("rig.env");
        let log = fs::File::create(dir.path().join("rig.log")).unwrap();
        let mut child = Command::new("bash")
            .arg(repo().join("rigs/ibsim_rig.sh"))
            .args(args)
            .args([
                "--",
                "bash",
                "-c",
                r#"env >"$0.tmp" && mv "$0.tmp" "$0" && exec cat >/dev/null"#,
            ])
            .arg(&env_file)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("run rigs/ibsim_rig.sh");
        let stdin = child.stdin.take();
        let t = Instant::now();
        while !env_file.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "rig exited ({status}):\n{}",
                    read(&dir.path().join("rig.log"))
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "rig not up after 120 s:\n{}",
                read(&dir.path().join("rig.log"))
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let env = read(&env_file)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Self {
            child,
            stdin,
            env,
            dir,
        }
    }

    fn var(&self, name: &str) -> &str {
        self.env
            .get(name)
            .unwrap_or_else(|| panic!("rig environment has no {name}"))
    }

    /// A node root with sysfs for the simulated HCAs (`mlx5_0` is node2's,
    /// `mlx5_1` node3's) and a smpquery that reaches them.
    fn node(&self) -> SimNode {
        let env = ["IBSIM_SOCKNAME", "RIG_UMAD2SIM", "RIG_CA", "RIG_WORK"]
            .iter()
            .map(|k| ((*k).to_owned(), self.var(k).to_owned()))
            .collect();
        let sm_lid: u16 = self.var("RIG_SM_LID").parse().unwrap();
        let ports: Vec<SimPort> = [("mlx5_0", "NODE2"), ("mlx5_1", "NODE3")]
            .iter()
            .map(|(dev, node)| SimPort {
                device: (*dev).to_owned(),
                guid: self.var(&format!("RIG_{node}_GUID")).to_owned(),
                lid: self.var(&format!("RIG_{node}_LID")).parse().unwrap(),
                sm_lid,
            })
            .collect();
        SimNode::new(self.dir.path(), env, &ports)
    }

    /// Runs an infiniband-diags tool as a simulated host, like the rig's `sim`.
    fn sim(&self, host: &str, cmd: &[&str]) -> String {
        let out = Command::new("timeout")
            .args(["-k", "2", "10"])
            .args(cmd)
            .env("LD_PRELOAD", self.var("RIG_UMAD2SIM"))
            .env("SIM_HOST", host)
            .env("IBSIM_SOCKNAME", self.var("IBSIM_SOCKNAME"))
            .current_dir(self.var("RIG_WORK"))
            .output_within();
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Rewrites OpenSM's CA SL2VL table and makes it re-sweep (SIGHUP).
    fn resweep_with_sl2vl(&self, table: &str) {
        let conf = Path::new(self.var("RIG_WORK")).join("opensm.conf");
        let text = read(&conf);
        let new: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with("qos_ca_sl2vl ") {
                    format!("qos_ca_sl2vl {table}")
                } else {
                    l.to_owned()
                }
            })
            .collect();
        fs::write(&conf, new.join("\n") + "\n").unwrap();
        let st = Command::new("kill")
            .args(["-HUP", self.var("RIG_OSM_PID")])
            .status_within();
        assert!(st.success());
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // EOF for the waiting command: the rig stops ibsim and opensm.
        drop(self.stdin.take());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn read(p: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = fs::File::open(p) {
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// A simulated HCA's port as its sysfs shows it.
pub(super) struct SimPort {
    pub device: String,
    pub guid: String,
    pub lid: u16,
    pub sm_lid: u16,
}

/// A node whose sysfs shows the simulated HCAs.
pub(super) struct SimNode {
    _dir: tempfile::TempDir,
    pub paths: Paths,
    calls: PathBuf,
}

impl SimNode {
    /// `env`: what rigs/smpquery-sim needs (IBSIM_SOCKNAME, ...), handed to it
    /// in the `.env` file beside the symlink qoslane runs.
    pub(super) fn new(under: &Path, env: Vec<(String, String)>, ports: &[SimPort]) -> Self {
        let dir = tempfile::tempdir_in(under).unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir(&bin).unwrap();
        let smpquery = bin.join("smpquery");
        std::os::unix::fs::symlink(repo().join("rigs/smpquery-sim"), &smpquery).unwrap();
        // The same wrapper runs ibnetdiscover when invoked by that name.
        let ibnetdiscover = bin.join("ibnetdiscover");
        std::os::unix::fs::symlink(repo().join("rigs/smpquery-sim"), &ibnetdiscover).unwrap();
        // And perfquery (the job's and the audit's counters).
        let perfquery = bin.join("perfquery");
        std::os::unix::fs::symlink(repo().join("rigs/smpquery-sim"), &perfquery).unwrap();
        // And ibroute (the switches' forwarding tables, the deadlock check).
        let ibroute = bin.join("ibroute");
        std::os::unix::fs::symlink(repo().join("rigs/smpquery-sim"), &ibroute).unwrap();
        let calls = dir.path().join("calls.log");
        let paths = Paths::new(Overrides {
            root: Some(dir.path().join("root")),
            smpquery: Some(smpquery),
            ibnetdiscover: Some(ibnetdiscover),
            perfquery: Some(perfquery),
            ibroute: Some(ibroute),
            ..Default::default()
        });
        let mut lines = vec![
            "export SIM_HOST=node2".to_owned(),
            "export SMPQUERY_SIM_HOSTS=mlx5_0=node2,mlx5_1=node3".to_owned(),
            format!("export SMPQUERY_SIM_LOG={}", calls.display()),
        ];
        lines.extend(env.iter().map(|(k, v)| format!("export {k}={v}")));
        fs::write(bin.join("smpquery.env"), lines.join("\n") + "\n").unwrap();
        fs::write(bin.join("ibnetdiscover.env"), lines.join("\n") + "\n").unwrap();
        fs::write(bin.join("perfquery.env"), lines.join("\n") + "\n").unwrap();
        fs::write(bin.join("ibroute.env"), lines.join("\n") + "\n").unwrap();
        for p in ports {
            write_port(&paths, p);
        }
        // ib_umad's ABI file, as the kernel shows it while the module is
        // loaded: the rig's umad preload is this node's umad (a job's
        // counters are read in process only where the file is).
        let mad = paths.sysfs_ib().with_file_name("infiniband_mad");
        fs::create_dir_all(&mad).unwrap();
        fs::write(mad.join("abi_version"), "5\n").unwrap();
        Self {
            _dir: dir,
            paths,
            calls,
        }
    }

    fn calls(&self) -> usize {
        read(&self.calls).lines().count()
    }

    /// The smpquery calls made so far, one line each (`SMPQUERY_SIM_LOG`).
    pub(super) fn calls_log(&self) -> String {
        fs::read_to_string(&self.calls).unwrap_or_default()
    }

    fn assess(&self, m: &Mapping, mode: ProbeMode) -> Assessment {
        self.assess_opts(m, mode, &AssessOptions::default())
    }

    pub(super) fn assess_opts(
        &self,
        m: &Mapping,
        mode: ProbeMode,
        o: &AssessOptions,
    ) -> Assessment {
        let probe = fabric::Smpquery::new(&self.paths.smpquery);
        let d = Deadline::after(Duration::from_secs(20));
        fabric::assess_with(&self.paths, m, &d, mode, &probe, o).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// sysfs for one simulated single-port HCA, as the kernel would show it.
fn write_port(paths: &Paths, port: &SimPort) {
    let SimPort {
        device: dev,
        guid,
        lid,
        sm_lid,
    } = port;
    let hex = guid.trim_start_matches("0x");
    assert_eq!(hex.len(), 16, "guid {guid}");
    let sysfs_guid = format!(
        "{}:{}:{}:{}",
        &hex[0..4],
        &hex[4..8],
        &hex[8..12],
        &hex[12..16]
    );
    let d = paths.sysfs_ib().join(dev);
    let p = d.join("ports/1");
    fs::create_dir_all(&p).unwrap();
    let files = [
        (d.join("node_guid"), sysfs_guid),
        (d.join("node_type"), "1: CA".to_owned()),
        (p.join("state"), "4: ACTIVE".to_owned()),
        (p.join("phys_state"), "5: LinkUp".to_owned()),
        (p.join("link_layer"), "InfiniBand".to_owned()),
        (p.join("lid"), format!("0x{lid:x}")),
        (p.join("sm_lid"), format!("0x{sm_lid:x}")),
        (p.join("sm_sl"), "0".to_owned()),
        (p.join("rate"), "40 Gb/sec (4X QDR)".to_owned()),
    ];
    for (f, v) in files {
        fs::write(f, format!("{v}\n")).unwrap();
    }
}

const IDENTITY: &str = "0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7";

fn problems(r: &Assessment) -> Vec<String> {
    super::all_problems(r)
}

// ---------------------------------------------------------------- scenarios

#[test]
fn rig_aligned_fabric_passes_and_the_cache_then_serves_job_starts() {
    if !rig_wanted("rig_aligned_fabric_passes") {
        return;
    }
    let rig = Rig::start(&["-s", IDENTITY]);
    let node = rig.node();
    let m = mapping(MAPPING);

    let t = Instant::now();
    let r = node.assess(&m, ProbeMode::Fresh);
    let fresh = t.elapsed();
    assert_eq!(super::ib_ports(&r), ["mlx5_0/1", "mlx5_1/1"]);
    assert_eq!(problems(&r), Vec::<String>::new());
    assert_eq!(super::all_warnings(&r), Vec::<String>::new());
    assert_eq!(node.calls(), 6, "three queries per port");
    let p = &r.ib_ports[0];
    assert_eq!(p.tables.oper_vls.as_str(), "VL0-7");
    assert_eq!(p.tables.link_state, "Active");
    assert_eq!(p.identity.lid.to_string(), rig.var("RIG_NODE2_LID"));
    assert_eq!(
        r.ib_ports[1].identity.lid.to_string(),
        rig.var("RIG_NODE3_LID")
    );

    let t = Instant::now();
    let r = node.assess(&m, ProbeMode::Cached);
    let cached = t.elapsed();
    assert_eq!(node.calls(), 6, "no smpquery at job start");
    assert!(r.ib_ports.iter().all(|p| p.source == TablesSource::Cache));
    assert_eq!(problems(&r), Vec::<String>::new());

    // one port alone: the latency of one probe (three queries at once)
    let one = mapping(&MAPPING.replace(
        "fabric_check: enforce\n",
        "fabric_check: enforce\ndevices: [mlx5_0]\n",
    ));
    let t = Instant::now();
    node.assess(&one, ProbeMode::Fresh);
    let single = t.elapsed();
    eprintln!(
        "simulated fabric: fresh assess of 2 ports {fresh:?}, of 1 port {single:?}; \
         cached assess {cached:?}"
    );
}

#[test]
fn rig_sl_mapped_to_vl15_fails() {
    if !rig_wanted("rig_sl_mapped_to_vl15_fails") {
        return;
    }
    let rig = Rig::start(&["-s", "0,1,2,15,4,5,6,7,0,1,2,3,4,5,6,7"]);
    let r = rig.node().assess(&mapping(MAPPING), ProbeMode::Fresh);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 15, the management lane: SL 3 packets are dropped; want VL 3",
            "mlx5_1/1: SL 3 -> VL 15, the management lane: SL 3 packets are dropped; want VL 3",
        ]
    );
    assert_eq!(r.problems("high"), Vec::<String>::new());
}

#[test]
fn rig_vl_outside_opervls_fails() {
    if !rig_wanted("rig_vl_outside_opervls_fails") {
        return;
    }
    // OpenSM programs SL n -> VL n on VL0-7, then node2's port is cut to
    // VL0-1 (ibportstate ... vls 2): its table now points past OperVLs.
    let rig = Rig::start(&["-s", IDENTITY]);
    rig.sim("node2", &["ibportstate", "-D", "0", "1", "vls", "2"]);
    let r = rig.node().assess(&mapping(MAPPING), ProbeMode::Fresh);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 3, outside OperVLs VL0-1: not operational; \
          want VL 3 (not operational: OperVLs VL0-1, VLCap VL0-7)"
        ]
    );
    assert_eq!(r.problems("low"), Vec::<String>::new());
}

#[test]
fn rig_max_op_vls_folds_the_table_and_fails_the_level() {
    if !rig_wanted("rig_max_op_vls_folds_the_table") {
        return;
    }
    let rig = Rig::start(&["-V", "2", "-s", IDENTITY]);
    let r = rig.node().assess(&mapping(MAPPING), ProbeMode::Fresh);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 1, want VL 3 (not operational: OperVLs VL0-1, VLCap VL0-7)",
            "mlx5_1/1: SL 3 -> VL 1, want VL 3 (not operational: OperVLs VL0-1, VLCap VL0-7)",
        ]
    );
    assert_eq!(r.problems("normal"), Vec::<String>::new());
}

#[test]
fn rig_table_differing_from_the_mapping_fails_naming_both_vls() {
    if !rig_wanted("rig_table_differing_from_the_mapping") {
        return;
    }
    let rig = Rig::start(&[]); // the rig's default: 7,6,5,4,3,2,1,0,0,1,...
    let r = rig.node().assess(&mapping(MAPPING), ProbeMode::Fresh);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 4, want VL 3",
            "mlx5_1/1: SL 3 -> VL 4, want VL 3"
        ]
    );
    assert_eq!(
        r.first_problem().as_deref(),
        Some("level mission-critical: mlx5_0/1: SL 3 -> VL 4, want VL 3")
    );
}

#[test]
fn rig_vl_without_arbitration_weight_is_starved() {
    if !rig_wanted("rig_vl_without_arbitration_weight_is_starved") {
        return;
    }
    let rig = Rig::start(&["-s", IDENTITY, "-L", "0:32,1:32,2:32,4:32,5:32,6:32,7:32"]);
    let r = rig.node().assess(&mapping(MAPPING), ProbeMode::Fresh);
    assert_eq!(
        r.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 3, but VL 3 has weight 0 in both VL arbitration tables: \
             it is never scheduled (starved)",
            "mlx5_1/1: SL 3 -> VL 3, but VL 3 has weight 0 in both VL arbitration tables: \
             it is never scheduled (starved)",
        ]
    );
    assert_eq!(r.warnings("mission-critical"), Vec::<String>::new());
}

#[test]
fn rig_sm_resweep_is_caught_by_fresh_and_by_cached_once_the_entry_ages() {
    if !rig_wanted("rig_sm_resweep") {
        return;
    }
    let rig = Rig::start(&["-s", IDENTITY]);
    let node = rig.node();
    let m = mapping(MAPPING);
    assert_eq!(
        problems(&node.assess(&m, ProbeMode::Fresh)),
        Vec::<String>::new()
    );

    // The SM is reconfigured and re-swept: same LIDs, same SM, new table.
    let t = Instant::now();
    rig.resweep_with_sl2vl("7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7");
    let drifted = loop {
        // OpenSM re-programs the ports one by one: wait for both
        let r = node.assess(&m, ProbeMode::Fresh);
        if r.problems("mission-critical").len() == 2 {
            break r;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "table never changed");
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("re-sweep seen by a fresh assess after {:?}", t.elapsed());
    assert_eq!(
        drifted.problems("mission-critical"),
        [
            "mlx5_0/1: SL 3 -> VL 4, want VL 3",
            "mlx5_1/1: SL 3 -> VL 4, want VL 3"
        ]
    );
    // The fresh assess refreshed the cache: job starts see the drift too.
    let calls = node.calls();
    let r = node.assess(&m, ProbeMode::Cached);
    assert_eq!(node.calls(), calls);
    assert_eq!(
        r.problems("mission-critical"),
        drifted.problems("mission-critical")
    );

    // Back to the aligned table. Within the maximum age a cached assess still
    // answers from the (now stale) cache: the documented bound on staleness.
    let t = Instant::now();
    rig.resweep_with_sl2vl(IDENTITY);
    let aligned_row = "| 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|";
    while !["node2", "node3"].iter().all(|n| {
        rig.sim(n, &["smpquery", "-D", "sl2vl", "0"])
            .contains(aligned_row)
    }) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "table never changed back"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = node.assess(&m, ProbeMode::Cached);
    assert!(r.ib_ports.iter().all(|p| p.source == TablesSource::Cache));
    assert_eq!(
        r.problems("mission-critical").len(),
        2,
        "stale within the age, by design"
    );
    // Once the entry is older than the maximum age it is probed again.
    let aged = AssessOptions {
        max_cache_age: Duration::ZERO,
        ..AssessOptions::default()
    };
    let r = node.assess_opts(&m, ProbeMode::Cached, &aged);
    assert!(r.ib_ports.iter().all(|p| p.source == TablesSource::Probe));
    assert_eq!(problems(&r), Vec::<String>::new());
}

#[test]
fn rig_ibsim_not_running_fails_within_the_deadline() {
    if !rig_wanted("rig_ibsim_not_running") {
        return;
    }
    // The shim pointed at a fabric that is not there: umad2sim clients retry
    // forever, so only the deadline ends the probe.
    let dir = tempfile::tempdir().unwrap();
    let sock = format!("qoslane-absent-{}", std::process::id());
    let env = vec![
        ("IBSIM_SOCKNAME".to_owned(), sock.clone()),
        ("RIG_UMAD2SIM".to_owned(), UMAD2SIM.to_owned()),
        ("RIG_WORK".to_owned(), dir.path().display().to_string()),
    ];
    let port = SimPort {
        device: "mlx5_0".into(),
        guid: "0x0000000000100002".into(),
        lid: 3,
        sm_lid: 1,
    };
    let node = SimNode::new(dir.path(), env, &[port]);
    let probe = fabric::Smpquery::new(&node.paths.smpquery);
    let t = Instant::now();
    let e = fabric::assess_with(
        &node.paths,
        &mapping(MAPPING),
        &Deadline::after(Duration::from_millis(1500)),
        ProbeMode::Fresh,
        &probe,
        &AssessOptions::default(),
    )
    .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, Error::Deadline { .. }), "{e}");
    assert!(e.to_string().ends_with("deadline of 1500 ms passed"), "{e}");
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    // nothing left running: the whole process group was killed
    std::thread::sleep(Duration::from_millis(200));
    let needle = format!("IBSIM_SOCKNAME={sock}");
    let left: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let environ = fs::read(e.path().join("environ")).ok()?;
            environ
                .split(|&b| b == 0)
                .any(|v| v == needle.as_bytes())
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    assert!(
        left.is_empty(),
        "still running with {needle}: pids {left:?}"
    );
}

/// The binary on the simulated fabric under a real OpenSM: `sync` puts a
/// mapping in force only when every level passes (issue 12, item 5), and a
/// `fail_job` level is not granted on a probe older than
/// `fail_job_max_probe_age` after the SM re-swept with another table while
/// a `continue` level still uses the cache (item 6).
#[test]
fn rig_mapping_in_force_and_fail_job_probe_age_with_the_binary() {
    if !rig_wanted("rig_mapping_in_force") {
        return;
    }
    let rig = Rig::start(&["-s", IDENTITY]);
    let node = rig.node();
    let root = node.paths.root.clone();
    let cfg = root.join("etc/qoslane/qos-network.yml");
    fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let lkg = root.join("var/lib/qoslane/last-known-good.yml");
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = Command::new(crate::util::BIN);
        c.env_clear()
            .env("QOSLANE_ROOT", &root)
            .env("QOSLANE_SMPQUERY", &node.paths.smpquery)
            .env(
                "QOSLANE_SQUEUE",
                crate::util::fake_squeue(&root.join("fakesqueue"), env),
            )
            .env("QOSLANE_NO_JOURNAL", "1")
            .env("QOSLANE_TIMEOUT_MS", "20000")
            .args(args);
        for (k, v) in env.iter().filter(|(k, _)| !k.starts_with("FAKE_")) {
            c.env(k, v);
        }
        c.output_within()
    };
    let good = MAPPING
        .replace(
            "fabric_check: enforce\n",
            "fabric_check: enforce\nfail_job_max_probe_age: 1\n",
        )
        .replace(
            "    virtual_lane: 3\n",
            "    virtual_lane: 3\n    on_failure: fail_job\n",
        );
    fs::write(&cfg, &good).unwrap();
    let out = run(&["sync"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&lkg), good);

    // A mapping whose `high` the SM does not carry (SL 2 -> VL 2, want 5).
    fs::write(
        &cfg,
        good.replace("    virtual_lane: 2\n", "    virtual_lane: 5\n"),
    )
    .unwrap();
    let out = run(&["sync"], &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&lkg), good, "the previous copy stays in force");
    fs::write(&cfg, &good).unwrap();
    assert!(run(&["sync"], &[]).status.success());

    // Both levels granted on the fresh cache.
    for (id, qos) in [("1", "mission-critical"), ("2", "high")] {
        let out = run(&["prolog"], &[("SLURM_JOB_ID", id), ("FAKE_QOS", qos)]);
        assert!(
            out.status.success(),
            "{qos}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(run(&["epilog"], &[("SLURM_JOB_ID", id)]).status.success());
    }
    // OpenSM re-sweeps with another table: SL 3 -> VL 4.
    let t = Instant::now();
    rig.resweep_with_sl2vl("7,6,5,4,3,2,1,0,0,1,2,3,4,5,6,7");
    let moved = "| 7| 6| 5| 4| 3| 2| 1| 0|";
    while !["node2", "node3"].iter().all(|n| {
        rig.sim(n, &["smpquery", "-D", "sl2vl", "0"])
            .contains(moved)
    }) {
        assert!(t.elapsed() < Duration::from_secs(10), "table never changed");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1100)); // past the 1 s bound
    let out = run(
        &["prolog"],
        &[("SLURM_JOB_ID", "3"), ("FAKE_QOS", "mission-critical")],
    );
    // Refused, the node untouched: the refusal status (issue 23 item 4).
    assert_eq!(
        out.status.code(),
        Some(qoslane::exit_code::REFUSED),
        "fail_job refused on a fresh probe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("SL 3 -> VL 4, want VL 3"));
    let out = run(&["prolog"], &[("SLURM_JOB_ID", "4"), ("FAKE_QOS", "high")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
