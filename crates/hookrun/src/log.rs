//! Diagnostics: one line per event on stderr, prefixed `hookrun[PHASE]` so they
//! can be found among slurmd's messages, and the same line to the systemd
//! journal when its socket exists (Slurm does not keep a Prolog's stderr).
//! stdout is never written here: for the TaskProlog it is Slurm's protocol
//! channel.

use std::path::Path;
use std::time::Duration;

use nodeio::log as sink;
pub use nodeio::log::Priority;

use crate::config::reroot;

/// The journal's native socket, under the root prefix.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";
/// syslog's socket, under the root prefix.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// Also sends every line to the journal (else syslog) under `root`, tagged
/// with the job id. Never blocks: a full socket drops the line and counts it
/// (`nodeio::log`); it is on stderr anyway.
pub fn init(root: &Path, job_id: Option<&str>) {
    sink::init(sink::Config {
        ident: "hookrun",
        journal: Some(reroot(root, JOURNAL_SOCKET)),
        syslog: Some(reroot(root, SYSLOG_SOCKET)),
        fields: job_id
            .map(|j| vec![("SLURM_JOB_ID".to_owned(), j.to_owned())])
            .unwrap_or_default(),
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
    let mut fields = vec![("HOOKRUN_PHASE", phase)];
    if let Some(hook) = hook {
        fields.push(("HOOKRUN_HOOK", hook));
    }
    sink::emit(priority, line, line, &fields);
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
