//! Running an external program (squeue, smpquery): absolute path, no shell,
//! no PATH lookup, its own process group, killed when the deadline passes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// The most output read from a program (stdout, and stderr each): scontrol's
/// job line and smpquery's tables are a few kilobytes.
pub const MAX_OUTPUT: u64 = 1 << 20;

enum Done {
    Exited(std::io::Result<Output>),
    TooLarge,
}

/// Runs `program args…` and returns its output when it exits 0.
pub fn run(program: &Path, args: &[&str], deadline: &Deadline) -> Result<Output> {
    let fail = |detail: String| Error::Program {
        program: program.to_owned(),
        detail,
    };
    if !program.is_absolute() {
        return Err(fail("not an absolute path (hooks run with no PATH)".into()));
    }
    deadline.check(|| format!("run {}", program.display()))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| fail(format!("cannot run: {e}")))?;
    let pid = child.id();
    let kill_group = || {
        // The whole group: a wrapper script's children go too.
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    };
    let (tx, rx) = mpsc::sync_channel(2);
    std::thread::spawn(move || {
        // Bounded reads: a runaway program cannot grow us without end (a
        // Prolog's memory is the node's).
        let stderr = child.stderr.take();
        let errors = std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(e) = stderr {
                let _ = e.take(MAX_OUTPUT).read_to_end(&mut buf);
            }
            buf
        });
        let mut stdout = Vec::new();
        if let Some(o) = child.stdout.take() {
            let _ = o.take(MAX_OUTPUT + 1).read_to_end(&mut stdout);
        }
        if stdout.len() as u64 > MAX_OUTPUT {
            let _ = tx.send(Done::TooLarge);
        }
        let status = child.wait();
        let stderr = errors.join().unwrap_or_default();
        let _ = tx.send(Done::Exited(status.map(|status| Output {
            status,
            stdout,
            stderr,
        })));
    });
    let out = match rx.recv_timeout(deadline.remaining()) {
        Ok(Done::Exited(r)) => r.map_err(|e| fail(format!("wait: {e}")))?,
        Ok(Done::TooLarge) => {
            kill_group();
            let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
            return Err(fail(format!(
                "printed more than {MAX_OUTPUT} bytes; killed (is it the right program?)"
            )));
        }
        Err(_) => {
            kill_group();
            let _ = rx.recv_timeout(std::time::Duration::from_millis(200));
            return Err(deadline.passed(format!("{} {}", program.display(), args.join(" "))));
        }
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Err(fail(format!(
            "{} ({})",
            out.status,
            if first.is_empty() {
                "no message"
            } else {
                first
            }
        )));
    }
    Ok(out)
}
