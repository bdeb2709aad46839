//! Diagnostics for the admin: one line per message on stderr, and to the
//! systemd journal (else syslog) under the root prefix — Slurm discards hook
//! stderr. Never stdout: in a TaskProlog, stdout is Slurm's protocol
//! channel. The sinks and their never-blocking rules are `nodeio::log`'s;
//! [`init`] chooses them once per run, and the run's deadline bounds them.

use crate::paths::Paths;

pub use nodeio::log::Priority;

/// The journal's native socket and syslog's, under the root prefix.
pub const JOURNAL_SOCKET: &str = "run/systemd/journal/socket";
pub const SYSLOG_SOCKET: &str = "dev/log";

/// Chooses the persistent sink (none when `no_journal`: `QOSLANE_NO_JOURNAL`
/// set, in the environment or the site options).
pub fn init(paths: &Paths, no_journal: bool) {
    let off = no_journal;
    let under_root = |rel: &str| (!off).then(|| paths.root.join(rel));
    nodeio::log::init(nodeio::log::Config {
        ident: "qoslane",
        journal: under_root(JOURNAL_SOCKET),
        syslog: under_root(SYSLOG_SOCKET),
        fields: Vec::new(),
    });
}

pub fn error(msg: &str) {
    emit(Priority::Error, msg);
}
pub fn warn(msg: &str) {
    emit(Priority::Warning, msg);
}
pub fn info(msg: &str) {
    emit(Priority::Info, msg);
}

pub fn emit(prio: Priority, msg: &str) {
    let tag = match prio {
        Priority::Error => "error: ",
        Priority::Warning => "warning: ",
        Priority::Info => "",
    };
    nodeio::log::emit(prio, &format!("qoslane: {tag}{msg}"), msg, &[]);
}
