//! A temp-root fixture: a hook tree under `<root>/etc/slurm`, a fake scontrol
//! (committed: tests/fixtures/bin/scontrol) that records its argv and simulates
//! the node's state, and a way to run the real hookrun binary against it with
//! an empty environment (Slurm gives hooks no PATH; neither do these tests).
//!
//! The hooks are what hookrun is tested on (their names, modes and bodies are
//! each test's story), so they are laid out per test; but never written by the
//! test process: a file this process held open for writing could be inherited
//! by another test thread's fork and fail its exec with ETXTBSY. `install(1)`,
//! a child that closes the file before it exits, puts each in place.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hookrun");

/// The example program `examples/embedded.rs`, built beside the binary by
/// `cargo test -p hookrun` and `cargo build --all-targets` (not by a build
/// of the integration tests alone: then this fails when it is missing or
/// stale, naming the command).
pub fn embedded() -> PathBuf {
    let path = Path::new(BIN)
        .parent()
        .expect("the binary's directory")
        .join("examples/embedded");
    // Older than a source of what it embeds (hookrun's, nodeio's) or its
    // own: a build of the tests alone (`--test integration`) left it stale.
    fn newest(dir: &Path) -> Option<std::time::SystemTime> {
        fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                if p.is_dir() {
                    newest(&p)
                } else {
                    fs::metadata(&p).and_then(|m| m.modified()).ok()
                }
            })
            .max()
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = [
        manifest.join("src"),
        manifest.join("examples"),
        manifest.join("../nodeio/src"),
    ];
    let fresh = fs::metadata(&path)
        .and_then(|m| m.modified())
        .is_ok_and(|at| sources.iter().filter_map(|d| newest(d)).all(|s| at >= s));
    assert!(
        fresh,
        "{} is missing or older than the sources it is built from: build it with `cargo build -p hookrun --examples` (`cargo test -p hookrun` builds it)",
        path.display()
    );
    path
}

/// An idle node as `scontrol show node -o` prints it (trimmed).
pub const NODE_IDLE: &str = "NodeName=c1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 \
    State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=debug \
    CfgTRES=cpu=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0";

/// A node drained with `reason`, as `scontrol show node -o` prints it.
pub fn node_drained(reason: &str) -> String {
    format!(
        "{} Reason={reason} [root@2024-05-01T10:00:00]",
        NODE_IDLE.replace("State=IDLE ", "State=IDLE+DRAIN ")
    )
}

#[derive(Debug)]
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

/// What a hookrun run did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// stderr lines, for `contains` checks that name the line.
    pub fn has_line(&self, needle: &str) -> bool {
        self.stderr.lines().any(|line| line.contains(needle))
    }
}

/// Whether another user can run the test binary (every directory above it
/// searchable by others: a checkout under a private home is not); says why not.
pub fn reachable_by_others() -> bool {
    use std::os::unix::fs::PermissionsExt;
    let bin = Path::new(BIN);
    let reachable = bin
        .ancestors()
        .skip(1)
        .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0));
    if !reachable {
        eprintln!("skipped: {} is not reachable by other users", bin.display());
    }
    reachable
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_owned();
        // Like `/`: others may search it (a TaskProlog runs as the job's user).
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod root");
        fs::create_dir_all(root.join("etc/slurm")).expect("mkdir etc/slurm");
        fs::create_dir_all(root.join("var/lib/prometheus/node-exporter")).expect("mkdir textfile");
        Fixture { _dir: dir, root }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// `<root>/etc/slurm/<phase>.d/<name>`, a `#!/bin/sh` script, mode 0755.
    pub fn hook(&self, phase: &str, name: &str, body: &str) -> PathBuf {
        let path = self.path(&format!("etc/slurm/{phase}.d/{name}"));
        self.write_script(&path, body);
        path
    }

    /// A hook that appends its name to `ran.log`, then runs `then`.
    pub fn recording_hook(&self, phase: &str, name: &str, then: &str) -> PathBuf {
        let log = self.path("ran.log");
        self.hook(
            phase,
            name,
            &format!("echo '{name}' >> '{}'\n{then}", log.display()),
        )
    }

    /// Names recorded by [`Fixture::recording_hook`], in run order.
    pub fn ran(&self) -> Vec<String> {
        fs::read_to_string(self.path("ran.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn write_script(&self, path: &Path, body: &str) {
        self.install(path, &format!("#!/bin/sh\n{body}\n"), 0o755);
    }

    /// `contents` at `relative` with `mode` (an executable one put in place
    /// by `install`, see the module's note).
    pub fn write(&self, relative: &str, contents: &str, mode: u32) -> PathBuf {
        let path = self.path(relative);
        if mode & 0o111 == 0 {
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(&path, contents).expect("write");
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        } else {
            self.install(&path, contents, mode);
        }
        path
    }

    /// An executable file at `path`, written by a child process: the
    /// contents go to a data file outside the hook tree (never executed), and
    /// `/usr/bin/install -m MODE` copies it into place and exits, so no
    /// process that may fork again ever holds `path` open for writing.
    fn install(&self, path: &Path, contents: &str, mode: u32) {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let staged = self.path(&format!(".staged.{}", SEQ.fetch_add(1, Ordering::Relaxed)));
        fs::write(&staged, contents).expect("write the staged contents");
        let status = Command::new("/usr/bin/install")
            .arg("-m")
            .arg(format!("{mode:o}"))
            .arg(&staged)
            .arg(path)
            .stdin(Stdio::null())
            .spawn()
            .expect("run install");
        let status = output_of(status, "install").status;
        assert!(status.success(), "install {}: {status}", path.display());
        fs::remove_file(&staged).expect("remove the staged contents");
    }

    pub fn conf(&self, text: &str) {
        self.write("etc/slurm/hookrun.conf", text, 0o644);
    }

    /// `<root>/bin/scontrol`, a link to the committed stand-in
    /// (tests/fixtures/bin/scontrol): records each call's argv (one line per
    /// call, arguments separated by 0x1f) in `scontrol.calls`; `show node`
    /// prints `node.txt`; `update … state=drain|resume` rewrites it like
    /// slurmctld would. Every call exits `exit_code`.
    pub fn fake_scontrol(&self, exit_code: i32) -> PathBuf {
        let path = self.path("bin/scontrol");
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir bin");
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin/scontrol");
        std::os::unix::fs::symlink(fake, &path).expect("link the fake scontrol");
        fs::write(self.path("scontrol.idle"), format!("{NODE_IDLE}\n")).expect("write idle");
        fs::write(self.path("scontrol.rc"), format!("{exit_code}\n")).expect("write rc");
        path
    }

    /// Calls of the fake scontrol whose first argument is `verb` exit
    /// `exit_code` and print `stderr` (whatever the other calls do): e.g.
    /// `requeue` answering as slurmctld does for an srun's job.
    pub fn scontrol_verb_fails(&self, verb: &str, exit_code: i32, stderr: &str) {
        fs::write(
            self.path(&format!("scontrol.{verb}.rc")),
            format!("{exit_code}\n"),
        )
        .expect("write verb rc");
        fs::write(
            self.path(&format!("scontrol.{verb}.err")),
            format!("{stderr}\n"),
        )
        .expect("write verb stderr");
    }

    /// What `scontrol show node` will print.
    pub fn set_node(&self, line: &str) {
        fs::write(self.path("node.txt"), format!("{line}\n")).expect("write node state");
    }

    pub fn node(&self) -> String {
        fs::read_to_string(self.path("node.txt")).unwrap_or_default()
    }

    /// Each scontrol call's arguments.
    pub fn scontrol_calls(&self) -> Vec<Vec<String>> {
        fs::read_to_string(self.path("scontrol.calls"))
            .unwrap_or_default()
            .lines()
            .map(|line| {
                line.split('\u{1f}')
                    .filter(|arg| !arg.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .collect()
    }

    /// `update` calls only.
    pub fn scontrol_updates(&self) -> Vec<Vec<String>> {
        self.scontrol_calls()
            .into_iter()
            .filter(|call| call.first().is_some_and(|c| c == "update"))
            .collect()
    }

    /// hookrun with `--root` and the fake scontrol's path, empty environment.
    pub fn hookrun(&self) -> Hookrun {
        self.hookrun_with(Command::new(BIN))
    }

    /// The example program that embeds hookrun and has a hook of its own
    /// (`examples/embedded.rs`), run through `<root>/bin/hookrun`, a link
    /// named so: hookrun with that hook built in. Otherwise as
    /// [`Fixture::hookrun`].
    pub fn embedded_hookrun(&self) -> Hookrun {
        self.hookrun_with(Command::new(self.embedded_link()))
    }

    /// [`Fixture::embedded_hookrun`] started with SIGTERM ignored, as a
    /// wrapper that ran `trap '' TERM` before its `exec` starts it (an ignored
    /// disposition survives `exec`, as a mask does): `env --ignore-signal`
    /// (coreutils) ignores it, then execs the link.
    pub fn embedded_hookrun_with_sigterm_ignored(&self) -> Hookrun {
        let mut command = Command::new("/usr/bin/env");
        command
            .arg("--ignore-signal=TERM")
            .arg(self.embedded_link());
        self.hookrun_with(command)
    }

    /// `<root>/bin/hookrun`, a link to the embedding program (made once).
    fn embedded_link(&self) -> PathBuf {
        let link = self.path("bin/hookrun");
        if !link.exists() {
            fs::create_dir_all(link.parent().expect("parent")).expect("mkdir bin");
            std::os::unix::fs::symlink(embedded(), &link).expect("link hookrun");
        }
        link
    }

    /// `<root>/etc/slurm/<phase>.d/<name>`, a link to the embedding program
    /// (the hook that runs built in under [`Fixture::embedded_hookrun`]).
    pub fn embedded_hook(&self, phase: &str, name: &str) -> PathBuf {
        let path = self.path(&format!("etc/slurm/{phase}.d/{name}"));
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(embedded(), &path).expect("link the hook");
        path
    }

    /// [`Fixture::hookrun`] as another user, the way slurmstepd runs a
    /// TaskProlog: `setpriv(1)` (util-linux) takes uid, gid and groups away
    /// first.
    pub fn hookrun_as(&self, uid: u32) -> Hookrun {
        let mut command = Command::new("/usr/bin/setpriv");
        command
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups")
            .arg(BIN);
        self.hookrun_with(command)
    }

    /// [`Fixture::hookrun`] started with SIGTERM blocked, as a supervisor
    /// that blocked it around its fork would start it (a signal mask
    /// survives `exec`): perl sets the mask to exactly SIGTERM (not added
    /// to whatever the test's thread had blocked: std's spawn passes that
    /// on), then execs hookrun.
    pub fn hookrun_with_sigterm_blocked(&self) -> Hookrun {
        let mut command = Command::new("/usr/bin/perl");
        command
            .arg("-MPOSIX")
            .arg("-e")
            .arg("sigprocmask(SIG_SETMASK, POSIX::SigSet->new(SIGTERM)) or die; exec @ARGV or die")
            .arg(BIN);
        self.hookrun_with(command)
    }

    fn hookrun_with(&self, mut command: Command) -> Hookrun {
        command
            .env_clear()
            .arg("--root")
            .arg(&self.root)
            .arg("--scontrol")
            .arg(self.path("bin/scontrol"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Hookrun { command }
    }

    /// A bare `hookrun` (its `--root` and `--scontrol` only) typed on a
    /// terminal: `script(1)` (util-linux) gives it a pseudo-terminal as stdin
    /// and stdout; `env` is its whole environment. Its stdout and stderr
    /// both come back in `stdout` (the terminal's), with `\r\n` line ends.
    pub fn bare_hookrun_on_terminal(&self, env: &[(&str, &str)]) -> Run {
        let line = format!(
            "exec '{}' --root '{}' --scontrol '{}'",
            BIN,
            self.root.display(),
            self.path("bin/scontrol").display()
        );
        let mut command = Command::new("/usr/bin/script");
        command
            .env_clear()
            .envs(env.iter().copied())
            .env("SHELL", "/bin/sh")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Hookrun { command }.run()
    }

    pub fn prom(&self) -> String {
        fs::read_to_string(self.path("var/lib/prometheus/node-exporter/hookrun.prom"))
            .unwrap_or_default()
    }

    /// The value of one sample of `hookrun.prom`, by its exact series text.
    pub fn sample(&self, series: &str) -> Option<f64> {
        self.prom().lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
    }

    pub fn runs(&self, phase: &str, hook: &str, outcome: &str) -> Option<f64> {
        self.sample(&format!(
            "hookrun_hook_runs_total{{phase=\"{phase}\",hook=\"{hook}\",outcome=\"{outcome}\"}}"
        ))
    }
}

#[derive(Debug)]
pub struct Hookrun {
    command: Command,
}

impl Hookrun {
    pub fn args<I, S>(mut self, args: I) -> Hookrun
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Hookrun {
        self.command.env(name, value);
        self
    }

    pub fn run(mut self) -> Run {
        let started = Instant::now();
        let child = self.command.spawn().expect("run hookrun");
        let output = output_of(child, "hookrun");
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed: started.elapsed(),
        }
    }

    pub fn spawn(mut self) -> Child {
        self.command.spawn().expect("spawn hookrun")
    }
}

/// How long a test waits for a child, or for the end of its pipes, before it
/// fails saying what it waited for: no test waits without a deadline. Not a
/// speed assertion (a run takes milliseconds; this proves "does not hang").
pub const PATIENCE: Duration = Duration::from_secs(120);

/// `wait_with_output()` within [`PATIENCE`]: the child's piped stdout and
/// stderr (whichever it has) read to their end on threads of their own, and
/// its status. A child that hangs is killed, and a pipe a leftover
/// grandchild keeps open ends the wait, each failing the test by name.
pub fn output_of(mut child: Child, what: &str) -> Output {
    let end = Instant::now() + PATIENCE;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        pipe.map(|mut pipe| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = pipe.read_to_end(&mut all);
                let _ = tx.send(all);
            });
            rx
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {PATIENCE:?}: killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let take = |rx: Option<mpsc::Receiver<Vec<u8>>>, which: &str| {
        rx.map_or_else(Vec::new, |rx| {
            rx.recv_timeout(end.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| {
                    panic!("{what}'s {which}: still open {PATIENCE:?} after the start (a child left holds it)")
                })
        })
    };
    Output {
        status,
        stdout: take(out, "stdout"),
        stderr: take(err, "stderr"),
    }
}

/// Polls `path` until it holds a complete line (bounded).
pub fn wait_for_line(path: &Path, within: Duration) -> String {
    let give_up = Instant::now() + within;
    loop {
        if let Ok(text) = fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        assert!(
            Instant::now() < give_up,
            "{} not written within {within:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A process that no longer exists, or is a zombie (dead, waiting for a parent
/// that is not ours to control — in a container pid 1 may never reap it).
pub fn process_gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Waits (bounded) for `pid` to be gone; SIGKILL is delivered asynchronously.
pub fn wait_gone(pid: i32, within: Duration) -> bool {
    let give_up = Instant::now() + within;
    while Instant::now() < give_up {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    process_gone(pid)
}

pub fn pid_from(path: &Path) -> i32 {
    wait_for_line(path, Duration::from_secs(5))
        .parse()
        .expect("pid file holds a pid")
}
