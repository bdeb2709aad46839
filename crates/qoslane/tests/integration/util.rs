//! Test fixture: a node under a temp root — mapping, node settings files,
//! the committed stand-ins for `squeue` and `smpquery` (tests/fixtures/bin) —
//! a runner for the real binary, the real tools a test may need (`tool`) and
//! the processes it starts (`Proc`, killed when dropped).

#![expect(
    clippy::unwrap_used,
    reason = "a failing fixture should stop the test loudly"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// qoslane's textfile for node_exporter's textfile collector.
pub const TEXTFILE: &str = "/var/lib/prometheus/node-exporter/qoslane.prom";

#[derive(Debug)]
pub struct Node {
    pub dir: tempfile::TempDir,
    /// The fake squeue and its answers ([`fake_squeue`]): outside the root,
    /// whose tree the read-only views' tests compare.
    squeue: tempfile::TempDir,
    /// Processes the node's files need alive (see [`Node::add_kernel_probe`]),
    /// killed after the directory is gone.
    held: Mutex<Vec<Proc>>,
}

impl Node {
    pub fn new() -> Self {
        Self::with_mapping(MAPPING)
    }

    pub fn with_mapping(mapping: &str) -> Self {
        let n = Self {
            dir: tempfile::tempdir().unwrap(),
            squeue: tempfile::tempdir().unwrap(),
            held: Mutex::new(Vec::new()),
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
        self.write("/etc/qoslane/qos-network.yml", text);
    }

    /// A setting's value, as the kernel shows one: `V` and a newline.
    pub fn set(&self, p: &str, v: &str) {
        self.write(p, &format!("{v}\n"));
    }

    /// A setting's value without its line end.
    pub fn get(&self, p: &str) -> String {
        self.read(p).trim_end().to_owned()
    }

    /// `text` as the whole file at `p` under the root (directories made).
    pub fn write(&self, p: &str, text: &str) {
        let f = self.path(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }

    /// The file at `p` under the root, as it is.
    pub fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.path(p)).unwrap_or_else(|e| panic!("read {p}: {e}"))
    }

    /// What the last run wrote for node_exporter ([`TEXTFILE`]).
    pub fn textfile(&self) -> String {
        self.read(TEXTFILE)
    }

    pub fn settings(&self) -> (String, String) {
        (self.get(TOS), self.get(RMEM))
    }

    /// The binary with this root, a clean environment and `env` added.
    /// `FAKE_*` entries are the fake squeue's answers: qoslane gives squeue
    /// an environment of its own, so they go into its files
    /// ([`Node::fake_squeue`]), not into qoslane's environment.
    pub fn cmd(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let squeue = self.fake_squeue(env);
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("QOSLANE_ROOT", self.root())
            .env("QOSLANE_SQUEUE", squeue)
            .env("QOSLANE_NO_JOURNAL", "1")
            .args(args);
        // A node with the fake smpquery uses it (an explicit one wins below).
        let fake = self.root().join("fakebin/smpquery");
        if fake.exists() {
            c.env("QOSLANE_SMPQUERY", fake);
        }
        let fake = self.root().join("fakebin/perfquery");
        if fake.exists() {
            c.env("QOSLANE_PERFQUERY", fake);
        }
        for (k, v) in env.iter().filter(|(k, _)| !k.starts_with("FAKE_")) {
            c.env(k, v);
        }
        c
    }

    /// This node's squeue, answering a run of `env` ([`fake_squeue`]).
    pub fn fake_squeue(&self, env: &[(&str, &str)]) -> PathBuf {
        fake_squeue(self.squeue.path(), env)
    }

    /// What the fake squeue was given, one line per call: its arguments,
    /// then ` +NAME=value` for every variable outside the fixed list.
    pub fn squeue_calls(&self) -> String {
        std::fs::read_to_string(self.squeue.path().join("squeue.calls")).unwrap_or_default()
    }

    /// This node's scontrol (the committed stand-in `tests/fixtures/bin/scontrol`,
    /// beside the fake squeue, outside the root), answering as `env`'s
    /// `FAKE_SCONTROL_*` entries say; `FAKE_SCONTROL_LOCK` is set to the
    /// node lock, so a call made under it is marked. Give it to a run as
    /// `QOSLANE_SCONTROL`.
    pub fn fake_scontrol(&self, env: &[(&str, &str)]) -> PathBuf {
        let dir = self.squeue.path();
        let link = dir.join("scontrol");
        match std::os::unix::fs::symlink(fixture_bin("scontrol"), &link) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{e}"),
            _ => {}
        }
        let lock = self.path("/run/qoslane/lock");
        let mut text = format!("export FAKE_SCONTROL_LOCK='{}'\n", lock.display());
        for (k, v) in env.iter().filter(|(k, _)| k.starts_with("FAKE_SCONTROL_")) {
            text.push_str(&format!("export {k}='{}'\n", v.replace('\'', r"'\''")));
        }
        let tmp = dir.join(format!(".scontrol.env.{}", std::process::id()));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join("scontrol.env")).unwrap();
        link
    }

    /// The fake scontrol's calls so far, one line each (its arguments; ` LOCKED`
    /// when the node lock was held).
    pub fn scontrol_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.squeue.path().join("scontrol.calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The binary run to its end, its output read, within [`PATIENCE`].
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.cmd(args, env).output_within()
    }

    pub fn prolog(&self, job: u32, qos: &str) -> Output {
        self.prolog_env(job, qos, &[])
    }

    /// A Prolog of job `job` whose QoS is `qos` (the fake squeue's), with
    /// `env` added.
    pub fn prolog_env(&self, job: u32, qos: &str, env: &[(&str, &str)]) -> Output {
        let id = job.to_string();
        let mut all = vec![
            ("SLURM_JOB_ID", id.as_str()),
            ("FAKE_QOS", qos),
            ("SLURM_JOB_USER", "alice"),
        ];
        all.extend_from_slice(env);
        self.run(&["prolog"], &all)
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
        c.output_within()
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

    /// `export` lines as a map (`print` lines, the baseline notice, skipped).
    /// The `export` lines of a TaskProlog run (`print` and `unset` lines
    /// are left out: see [`Node::unsets`]).
    pub fn exports(out: &Output) -> BTreeMap<String, String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("print ") && !l.starts_with("unset "))
            .map(|l| {
                let rest = l
                    .strip_prefix("export ")
                    .unwrap_or_else(|| panic!("not a protocol line: {l:?}"));
                let (k, v) = rest.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    /// The variables a TaskProlog run unsets (`unset NAME` lines).
    pub fn unsets(out: &Output) -> Vec<String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("unset "))
            .map(str::to_owned)
            .collect()
    }
}

/// `cmd` run under the file-mode creation mask `umask` (an admin's hardened
/// shell, Ansible's `become`): through `/bin/sh -c 'umask U; exec "$0" "$@"'`,
/// with the same program, arguments and environment.
pub fn with_umask(cmd: &Command, umask: &str) -> Command {
    let mut c = Command::new("/bin/sh");
    c.env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    c
}

/// A program the test needs, found on PATH or in the usual directories;
/// `None` (the test skips, saying so) when absent, unless CI requires it
/// (`QOSLANE_REQUIRE_TOOLS=1`).
pub fn tool(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from));
    for dir in dirs {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    assert!(
        std::env::var("QOSLANE_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "{} not found and QOSLANE_REQUIRE_TOOLS=1",
        names.join(" / ")
    );
    eprintln!("SKIP: {} not installed", names.join(" / "));
    None
}

/// A process a test started: killed and reaped when dropped, whatever the
/// test did.
#[derive(Debug)]
pub struct Proc {
    pub child: Child,
    what: &'static str,
}

impl Proc {
    pub fn spawn(what: &'static str, cmd: &mut Command) -> Self {
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
        Self { child, what }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status once it has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|e| panic!("wait {}: {e}", self.what))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a test waits for a child, or for a line or the end of a pipe,
/// before it fails saying what it waited for: no test waits without a
/// deadline. Not a speed assertion (a run takes milliseconds; this only
/// proves "does not hang", on a machine as busy as it gets).
pub const PATIENCE: Duration = Duration::from_secs(120);

/// `cmd`'s child with SIGINT and SIGQUIT at their default action, as a test
/// that sends them assumes: a suite started as a background job (`cmd &`)
/// runs with both ignored, and an ignored signal stays ignored across
/// `exec`. The child's own handlers, if any, are installed after this.
pub fn default_signals(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    #[expect(
        unsafe_code,
        reason = "pre_exec runs between fork and exec; the closure calls only signal(2), async-signal-safe"
    )]
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGQUIT] {
                if libc::signal(sig, libc::SIG_DFL) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}

/// `child` waited for until [`PATIENCE`]; past it killed, and the test
/// fails naming `what`.
pub fn wait_within(child: &mut Child, what: &str) -> ExitStatus {
    let end = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {PATIENCE:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A pipe read to its end on a thread of its own; [`Drained::within`] takes
/// what was read, or fails the test when the pipe stays open past the end.
pub struct Drained(mpsc::Receiver<Vec<u8>>);

impl Drained {
    pub fn start(mut pipe: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = pipe.read_to_end(&mut all);
            let _ = tx.send(all);
        });
        Self(rx)
    }

    pub fn within(&self, end: Instant, what: &str) -> Vec<u8> {
        self.0
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| {
                panic!("{what}: still open {PATIENCE:?} after the start (a child left holds it)")
            })
    }
}

/// `Command`'s waits with a deadline: what `output()` and `status()` give,
/// within [`PATIENCE`]. A child that hangs is killed and a pipe a leftover
/// grandchild keeps open ends the wait, each failing the test by name.
pub trait Within {
    /// `output()`: stdin `/dev/null`, stdout and stderr read to their end.
    fn output_within(&mut self) -> Output {
        self.try_output_within()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.what()))
    }
    /// `output()` where the caller takes a failure to start the program.
    fn try_output_within(&mut self) -> std::io::Result<Output>;
    /// `status()`: the standard streams inherited.
    fn status_within(&mut self) -> ExitStatus;
    fn what(&self) -> String;
}

impl Within for Command {
    fn try_output_within(&mut self) -> std::io::Result<Output> {
        let child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(output_of(child, &self.what()))
    }

    fn status_within(&mut self) -> ExitStatus {
        let what = self.what();
        let mut child = self.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
        wait_within(&mut child, &what)
    }

    fn what(&self) -> String {
        Path::new(self.get_program()).display().to_string()
    }
}

/// `wait_with_output()` within [`PATIENCE`]: the child's piped stdout and
/// stderr (whichever it has) read to their end, and its status.
pub fn output_of(mut child: Child, what: &str) -> Output {
    let end = Instant::now() + PATIENCE;
    let out = child.stdout.take().map(Drained::start);
    let err = child.stderr.take().map(Drained::start);
    let status = wait_within(&mut child, what);
    Output {
        status,
        stdout: out.map_or_else(Vec::new, |d| d.within(end, &format!("{what}'s stdout"))),
        stderr: err.map_or_else(Vec::new, |d| d.within(end, &format!("{what}'s stderr"))),
    }
}

/// A child's output read line by line on a thread of its own, each line
/// within [`PATIENCE`] (a line that never comes fails the test, not hangs it);
/// dropped, the thread goes on draining the pipe to its end.
pub struct LinesWithin(mpsc::Receiver<std::io::Result<String>>);

impl LinesWithin {
    pub fn start(pipe: impl std::io::Read + Send + 'static) -> Self {
        use std::io::BufRead;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end even when nobody takes the lines any more:
            // the child never blocks on a full pipe.
            for line in std::io::BufReader::new(pipe).lines() {
                let _ = tx.send(line);
            }
        });
        Self(rx)
    }

    /// The next line; the test fails naming `what` at its end or past
    /// [`PATIENCE`].
    pub fn next(&self, what: &str) -> String {
        match self.0.recv_timeout(PATIENCE) {
            Ok(line) => line.unwrap(),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("no line within {PATIENCE:?}, waiting for {what}")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the output ended, waiting for {what}")
            }
        }
    }
}

/// The first line of a pipe (with its newline), read within [`PATIENCE`] on
/// a thread of its own, which then drops the pipe: its writer meets a closed
/// pipe.
pub fn first_line_within(pipe: impl std::io::Read + Send + 'static) -> String {
    use std::io::BufRead;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut first = String::new();
        let _ = std::io::BufReader::new(pipe).read_line(&mut first);
        let _ = tx.send(first);
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("no first line within {PATIENCE:?}"))
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a loopback port")
}

/// A node's squeue, `<dir>/squeue` (a symlink to the
/// committed stand-in), answering a run of `env` as that run's
/// environment says: its `FAKE_*` entries are written beside the link,
/// as `squeue.ID.env` for a run with `SLURM_JOB_ID=ID` (what `squeue -j
/// ID` reads), else as `squeue.env`. Each run's file holds exactly its
/// own entries, as its environment would have.
pub fn fake_squeue(dir: &Path, env: &[(&str, &str)]) -> PathBuf {
    let link = dir.join("squeue");
    std::fs::create_dir_all(dir).unwrap();
    match std::os::unix::fs::symlink(fixture_bin("squeue"), &link) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => panic!("{e}"),
        _ => {}
    }
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("squeue.calls"));
    let text: String = env
        .iter()
        .filter(|(k, _)| k.starts_with("FAKE_"))
        .map(|(k, v)| format!("export {k}='{}'\n", v.replace('\'', r"'\''")))
        .collect();
    let name = match env.iter().find(|(k, _)| *k == "SLURM_JOB_ID") {
        Some((_, id)) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => {
            format!("squeue.{id}.env")
        }
        _ => "squeue.env".to_owned(),
    };
    // Replaced whole: a run started meanwhile reads the old file or the new.
    let tmp = dir.join(format!(
        ".{name}.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(&name)).unwrap();
    link
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

// ------------------------------------------------------------ reliability helpers
// (used by the reliability tests; hooks does not need them)

/// What a transaction may change on a node, for exact before/after
/// comparisons: setting values, job records (parsed, whole), the node's
/// baseline, whether a journal is pending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub settings: BTreeMap<String, String>,
    pub records: BTreeMap<String, serde_json::Value>,
    pub baseline: BTreeMap<String, String>,
    pub journal: bool,
}

impl Snapshot {
    /// The same snapshot with each record's `time` removed (two runs of the
    /// same transaction differ only there). The crash matrix's, which needs
    /// fault injection.
    #[cfg(feature = "fault-injection")]
    pub fn timeless(&self) -> Self {
        let mut s = self.clone();
        for r in s.records.values_mut() {
            if let Some(o) = r.as_object_mut() {
                o.remove("time");
            }
        }
        s
    }
}

impl Node {
    /// The settings at `paths`, the records, the baseline and the journal.
    pub fn snapshot(&self, paths: &[&str]) -> Snapshot {
        let settings = paths
            .iter()
            .map(|p| ((*p).to_owned(), self.get(p)))
            .collect();
        let mut records = BTreeMap::new();
        for name in self.records() {
            if name.starts_with('.') {
                continue;
            }
            let text = std::fs::read_to_string(self.path("/run/qoslane/jobs").join(&name))
                .unwrap_or_else(|e| panic!("record {name}: {e}"));
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("record {name}: {e}"));
            records.insert(name, v);
        }
        let baseline = std::fs::read_to_string(self.path("/run/qoslane/node.json"))
            .ok()
            .map(|t| {
                let v: serde_json::Value = serde_json::from_str(&t).expect("node.json is JSON");
                v["baseline"]
                    .as_object()
                    .expect("node.json has a baseline")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().expect("string").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Snapshot {
            settings,
            records,
            baseline,
            journal: self.journal_exists(),
        }
    }

    /// Files a writer left behind: temp files of atomic writes anywhere in
    /// the state directories.
    pub fn stray_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for dir in [
            "/run/qoslane",
            "/run/qoslane/jobs",
            "/run/qoslane/notices",
            "/var/lib/qoslane",
        ] {
            let Ok(rd) = std::fs::read_dir(self.path(dir)) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.contains(".tmp.") {
                    out.push(format!("{dir}/{name}"));
                }
            }
        }
        out.sort();
        out
    }

    /// A stand-in `smpquery` for this node: `<root>/fakebin/smpquery`, a
    /// symlink to the committed fake, driven by files beside it (see
    /// tests/fixtures/bin/fake-smpquery).
    pub fn fake_smpquery(&self) -> PathBuf {
        let bin = self.root().join("fakebin");
        std::fs::create_dir_all(&bin).unwrap();
        let link = bin.join("smpquery");
        if !link.exists() {
            std::os::unix::fs::symlink(fixture_bin("fake-smpquery"), &link).unwrap();
        }
        link
    }

    /// The stand-in `perfquery` answers every port with the perfquery
    /// fixture `FILE` for `op` (`xmtsl`, `rcvsl`, `vlxmit`;
    /// tests/fixtures/perfquery/), exiting `rc`; a node with it has
    /// `QOSLANE_PERFQUERY` set. Its calls: `fakebin/perfquery.log`.
    pub fn answer_perfquery(&self, op: &str, file: &str, rc: u8) {
        let bin = self.root().join("fakebin");
        std::fs::create_dir_all(&bin).unwrap();
        let link = bin.join("perfquery");
        if !link.exists() {
            std::os::unix::fs::symlink(fixture_bin("fake-perfquery"), &link).unwrap();
        }
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/perfquery/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        std::fs::write(bin.join(format!("any.{op}.txt")), text).unwrap();
        std::fs::write(bin.join(format!("any.{op}.rc")), rc.to_string()).unwrap();
    }

    /// A real kernel file that refuses a value, under the root:
    /// `/proc/sys/qoslane-probe` is a symlink to `/proc/PID` of a child
    /// that lives as long as the node, so `/proc/sys/qoslane-probe/oom_score_adj`
    /// takes -1000..=1000 and the kernel answers EINVAL to anything else (a
    /// genuine write failure, reached through a symlinked directory).
    pub fn add_kernel_probe(&self) {
        let probe = Proc::spawn(
            "sleep",
            Command::new("/bin/sleep")
                .arg("120")
                .stdin(std::process::Stdio::null()),
        );
        let proc_dir = PathBuf::from(format!("/proc/{}", probe.pid()));
        assert!(
            std::fs::read_to_string(proc_dir.join("oom_score_adj")).is_ok(),
            "this test needs a readable /proc/<pid>/oom_score_adj"
        );
        let link = self.path("/proc/sys/qoslane-probe");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&proc_dir, &link).unwrap();
        self.held.lock().unwrap().push(probe);
    }

    /// Replaces the setting file `p` with a real kernel object whose open
    /// answers `errno` ([`dead_device`]), what a setting of a device that
    /// vanished answers.
    #[cfg(feature = "fault-injection")]
    pub fn replace_with_dead_device(&self, p: &str, errno: rustix::io::Errno) -> bool {
        dead_device(&self.path(p), errno)
    }

    /// A file beside the fake smpquery (`any.sl2vl.txt`, `hang`, …).
    pub fn smpquery_file(&self, name: &str, content: &str) {
        self.fake_smpquery();
        std::fs::write(self.root().join("fakebin").join(name), content).unwrap();
    }

    /// The fake smpquery answers every port with the captured SCENARIO
    /// tables (tests/fixtures/smpquery/SCENARIO.{sl2vl,portinfo,vlarb}.txt).
    pub fn answer_smpquery(&self, scenario: &str) {
        for op in ["sl2vl", "portinfo", "vlarb"] {
            self.smpquery_file(&format!("any.{op}.txt"), &captured_smpquery(scenario, op));
        }
    }

    /// An mlx5 HCA (the mlx5-quirks sysfs tree) whose port the fake smpquery
    /// answers with SCENARIO's tables.
    pub fn add_hca(&self, scenario: &str) {
        self.add_fabric("mlx5-quirks");
        self.answer_smpquery(scenario);
    }

    /// Copies a sysfs fixture (tests/fixtures/fabric/NAME) under the root.
    pub fn add_fabric(&self, name: &str) {
        copy_tree(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/fabric")
                .join(name),
            self.root(),
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A captured smpquery output (tests/fixtures/smpquery/SCENARIO.OP.txt).
pub fn captured_smpquery(scenario: &str, op: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smpquery")
        .join(format!("{scenario}.{op}.txt"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A filesystem mounted for one test (a tiny or read-only tmpfs), unmounted
/// (lazily) when dropped. Declare it after the `Node` so it goes first.
#[derive(Debug)]
pub struct Mount {
    pub path: PathBuf,
}

impl Mount {
    /// `mount -t tmpfs -o OPTIONS tmpfs PATH` (PATH created). `None`, with a
    /// message, when this machine does not let us mount (not root, no
    /// CAP_SYS_ADMIN); a failure instead when `QOSLANE_REQUIRE_TOOLS=1` (CI).
    pub fn tmpfs(path: &Path, options: &str) -> Option<Self> {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("/usr/bin/mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .try_output_within();
        match out {
            Ok(o) if o.status.success() => Some(Self {
                path: path.to_owned(),
            }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    std::env::var_os("QOSLANE_REQUIRE_TOOLS").is_none_or(|v| v != "1"),
                    "cannot mount a tmpfs (QOSLANE_REQUIRE_TOOLS=1): {why}"
                );
                eprintln!("SKIPPED: cannot mount a tmpfs here: {why}");
                None
            }
        }
    }

    /// Remounts read-only (or back).
    pub fn remount(&self, options: &str) {
        let out = Command::new("/usr/bin/mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.path)
            .output_within();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Fills the filesystem: a file that takes every free block.
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path.join(".filler")).unwrap();
        let block = [0u8; 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("/usr/bin/umount")
            .arg("-l")
            .arg(&self.path)
            .try_output_within();
    }
}

/// Whether the test binary's qoslane can be run by another user (every
/// directory above it searchable by others); says why not.
pub fn reachable_by_others() -> bool {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_qoslane"));
    let reachable = bin.ancestors().skip(1).all(|d| {
        std::fs::metadata(d)
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o001 != 0)
    });
    if !reachable {
        eprintln!("skipped: {} is not reachable by other users", bin.display());
    }
    reachable
}

/// Replaces the file `f` with a real kernel object whose open answers `errno`
/// (`ENODEV` or `ENXIO`), what a file of a device that vanished answers (a
/// setting in configfs, an attribute of an HCA port in sysfs): a character
/// device node of the misc major with a minor no driver has (the misc core
/// answers `ENODEV`), or of a major no driver registered (`ENXIO`).
/// Candidates are tried until open says `errno`. `false` (skipped, said)
/// where device nodes cannot be made (not root, a user namespace, a `nodev`
/// mount), unless `QOSLANE_REQUIRE_TOOLS=1`.
pub fn dead_device(f: &Path, errno: rustix::io::Errno) -> bool {
    use rustix::fs::{FileType, Mode, OFlags, makedev, mknodat, open};
    let candidates: Vec<(u32, u32)> = if errno == rustix::io::Errno::NODEV {
        (240..=254).map(|minor| (10, minor)).collect()
    } else {
        (240..=254).map(|major| (major, 0)).collect()
    };
    for (major, minor) in candidates {
        let _ = std::fs::remove_file(f);
        let made = mknodat(
            rustix::fs::CWD,
            f,
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o644),
            makedev(major, minor),
        );
        if made.is_err() {
            break;
        }
        if open(f, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()).err() == Some(errno) {
            return true;
        }
    }
    assert!(
        std::env::var("QOSLANE_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "no device node answering {errno:?} and QOSLANE_REQUIRE_TOOLS=1"
    );
    eprintln!("SKIP: no device node answering {errno:?} can be made here");
    false
}

/// A node whose mission-critical Prolog (job 1) was killed after its first
/// setting was written: its journal left for the next run.
#[cfg(feature = "fault-injection")]
pub fn killed_mid_prolog() -> Node {
    let n = Node::new();
    let out = n.run(
        &["prolog"],
        &[
            ("SLURM_JOB_ID", "1"),
            ("FAKE_QOS", "mission-critical"),
            ("QOSLANE_FAULT", "applied:0"),
        ],
    );
    assert_ne!(out.status.code(), Some(0), "killed mid-transaction");
    n
}
