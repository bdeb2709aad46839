//! Running an external program (scontrol, smpquery): absolute path, no shell,
//! no PATH lookup, its own process group, killed when the deadline passes.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use crate::deadline::Deadline;
use crate::error::{Error, Result};

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
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| fail(format!("cannot run: {e}")))?;
    let pid = child.id();
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(deadline.remaining()) {
        Ok(r) => r.map_err(|e| fail(format!("wait: {e}")))?,
        Err(_) => {
            // The whole group: a wrapper script's children go too.
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
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
