//! Diagnostics: one line per event on stderr, prefixed `hookrun[PHASE]` so they
//! can be found among slurmd's messages, and the same line to the systemd
//! journal when its socket exists (Slurm does not keep a Prolog's stderr).
//! stdout is never written here: for the TaskProlog it is Slurm's protocol
//! channel.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// The journal's native socket, under the root prefix.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// syslog priorities, as the journal wants them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Error = 3,
    Warning = 4,
    Info = 6,
}

#[derive(Debug)]
struct Journal {
    socket: UnixDatagram,
    job_id: Option<String>,
}

static JOURNAL: OnceLock<Journal> = OnceLock::new();

/// Also sends every line to the journal at `socket`, tagged with the job id.
/// Does nothing when the socket is not there. Never blocks: a full socket
/// buffer drops the line (it is on stderr anyway).
pub fn use_journal(socket: &Path, job_id: Option<&str>) {
    if !socket.exists() {
        return;
    }
    let Ok(datagram) = UnixDatagram::unbound() else {
        return;
    };
    if datagram.connect(socket).is_err() || datagram.set_nonblocking(true).is_err() {
        return;
    }
    let _ = JOURNAL.set(Journal {
        socket: datagram,
        job_id: job_id.map(str::to_owned),
    });
}

/// `hookrun[prolog]: message`
pub fn phase(priority: Priority, phase: &str, message: &str) {
    emit(
        priority,
        phase,
        None,
        &format!("hookrun[{phase}]: {message}"),
    );
}

/// `hookrun[prolog] 10-qoslane: message`
pub fn hook(priority: Priority, phase: &str, hook: &str, message: &str) {
    emit(
        priority,
        phase,
        Some(hook),
        &format!("hookrun[{phase}] {hook}: {message}"),
    );
}

/// `hookrun[prolog] 10-qoslane> a line the hook printed`
///
/// The `>` keeps hook output apart from hookrun's own lines, and the prefix
/// means a hook's stderr never starts with `export ` at column 0.
pub fn hook_output(phase: &str, hook: &str, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    emit(
        Priority::Info,
        phase,
        Some(hook),
        &format!("hookrun[{phase}] {hook}> {}", text.trim_end_matches('\r')),
    );
}

fn emit(priority: Priority, phase: &str, hook: Option<&str>, line: &str) {
    // Nowhere to report a failing stderr; the hooks' work matters more.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
    if let Some(journal) = JOURNAL.get() {
        let mut record = format!(
            "PRIORITY={}\nSYSLOG_IDENTIFIER=hookrun\nHOOKRUN_PHASE={phase}\n",
            priority as u8
        );
        if let Some(hook) = hook {
            record.push_str(&format!("HOOKRUN_HOOK={}\n", one_line(hook)));
        }
        if let Some(job_id) = &journal.job_id {
            record.push_str(&format!("SLURM_JOB_ID={}\n", one_line(job_id)));
        }
        record.push_str(&format!("MESSAGE={}\n", one_line(line)));
        let _ = journal.socket.send(record.as_bytes());
    }
}

/// The native protocol's simple form takes one line per field.
fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

/// `3.2 ms`, `1.50 s`: short and exact enough for a log line.
pub fn duration(elapsed: Duration) -> String {
    if elapsed < Duration::from_secs(1) {
        format!("{:.1} ms", elapsed.as_secs_f64() * 1000.0)
    } else {
        format!("{:.2} s", elapsed.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_micros(3200)), "3.2 ms");
        assert_eq!(duration(Duration::from_millis(999)), "999.0 ms");
        assert_eq!(duration(Duration::from_millis(1500)), "1.50 s");
    }
}
