//! Diagnostics for the admin: one line per message on stderr, and to the
//! systemd journal when its socket is there (Slurm discards hook stderr).
//! Never stdout: in a TaskProlog, stdout is Slurm's protocol channel.

use std::io::Write;
use std::os::unix::net::UnixDatagram;

const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

#[derive(Clone, Copy, Debug)]
pub enum Priority {
    Error = 3,
    Warning = 4,
    Info = 6,
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
    let _ = writeln!(std::io::stderr().lock(), "qoslane: {tag}{msg}");
    if std::env::var_os("QOSLANE_NO_JOURNAL").is_none() {
        journal(prio, msg);
    }
}

/// The journal's native protocol: `KEY=value` lines in one datagram.
fn journal(prio: Priority, msg: &str) {
    if !std::path::Path::new(JOURNAL_SOCKET).exists() {
        return;
    }
    let Ok(sock) = UnixDatagram::unbound() else {
        return;
    };
    let one_line = msg.replace('\n', " ");
    let dgram = format!(
        "PRIORITY={}\nSYSLOG_IDENTIFIER=qoslane\nMESSAGE={one_line}\n",
        prio as u8
    );
    let _ = sock.send_to(dgram.as_bytes(), JOURNAL_SOCKET);
}
