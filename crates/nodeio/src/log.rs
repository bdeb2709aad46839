//! Logging that never blocks a hook past its deadline.
//!
//! Every line goes to stderr (Slurm keeps or discards it; an admin running a
//! command sees it) and to one persistent sink: the systemd journal's native
//! socket, else syslog's `/dev/log`, else none. Both sockets are connected
//! datagram sockets in non-blocking mode: a journal that does not read makes
//! a send fail with `EAGAIN`, and the line is dropped and counted, never
//! waited for. stderr is written only while `poll` says it can take the next
//! chunk (at most `PIPE_BUF` bytes, which a pipe then takes whole) before the
//! run's deadline; what is left then is dropped and counted too.
//!
//! Nothing here may fail the caller: errors of logging are not reported
//! anywhere but [`dropped`].

use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};

/// How long one line may wait for stderr when no deadline was set.
const DEFAULT_BOUND: Duration = Duration::from_millis(200);
/// A pipe takes a write of at most this many bytes whole, once writable.
const PIPE_BUF: usize = 4096;
/// syslog facility `daemon`.
const FACILITY_DAEMON: u8 = 3;

/// syslog severities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    Error = 3,
    Warning = 4,
    Info = 6,
}

/// Where lines go; see [`init`].
#[derive(Debug, Clone)]
pub struct Config {
    /// `SYSLOG_IDENTIFIER` and the syslog tag.
    pub ident: &'static str,
    /// The journal's native socket (under the root prefix); `None`: not used.
    pub journal: Option<PathBuf>,
    /// syslog's socket (`/dev/log` under the root prefix); `None`: not used.
    pub syslog: Option<PathBuf>,
    /// Extra journal fields on every line (`SLURM_JOB_ID=…`).
    pub fields: Vec<(String, String)>,
}

#[derive(Debug)]
enum Sink {
    Journal(UnixDatagram),
    Syslog(UnixDatagram),
    None,
}

#[derive(Debug)]
struct Logger {
    ident: &'static str,
    sink: Sink,
    fields: Vec<(String, String)>,
}

/// `None` until [`init`]; emptied by [`forget`] (a fork without exec).
static LOGGER: RwLock<Option<Logger>> = RwLock::new(None);
static DEADLINE: Mutex<Option<Instant>> = Mutex::new(None);
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Chooses the sink: the first socket of `journal`, `syslog` that accepts a
/// connection. Once per process; later calls are ignored.
pub fn init(config: Config) {
    let connect = |p: &Option<PathBuf>| {
        let p = p.as_ref()?;
        let s = UnixDatagram::unbound().ok()?;
        s.connect(p).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let sink = if let Some(s) = connect(&config.journal) {
        Sink::Journal(s)
    } else if let Some(s) = connect(&config.syslog) {
        Sink::Syslog(s)
    } else {
        Sink::None
    };
    if let Ok(mut logger) = LOGGER.write()
        && logger.is_none()
    {
        *logger = Some(Logger {
            ident: config.ident,
            sink,
            fields: config.fields,
        });
    }
}

/// Forgets the sink, the deadline and the count of dropped lines: called in
/// the child of a fork that does not exec (`child`'s built-in programs), which
/// is a new program and chooses its own ([`init`]).
pub(crate) fn forget() {
    if let Ok(mut logger) = LOGGER.write() {
        *logger = None;
    }
    if let Ok(mut d) = DEADLINE.lock() {
        *d = None;
    }
    DROPPED.store(0, Ordering::Relaxed);
}

/// Every later line waits for stderr at most until `until`.
pub fn set_deadline(until: Instant) {
    if let Ok(mut d) = DEADLINE.lock() {
        *d = Some(until);
    }
}

/// Lines (or parts of lines) dropped so far in this process.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// [`dropped`], counted from zero again: for a counter that adds it up.
pub fn take_dropped() -> u64 {
    DROPPED.swap(0, Ordering::Relaxed)
}

/// The program's name for its lines (`init`'s `ident`; `nodeio` before it).
pub fn ident() -> &'static str {
    LOGGER
        .read()
        .ok()
        .and_then(|l| l.as_ref().map(|l| l.ident))
        .unwrap_or("nodeio")
}

/// Which persistent sink is in use: `journal`, `syslog` or `none`.
pub fn sink_name() -> &'static str {
    let Ok(logger) = LOGGER.read() else {
        return "none";
    };
    match logger.as_ref().map(|l| &l.sink) {
        Some(Sink::Journal(_)) => "journal",
        Some(Sink::Syslog(_)) => "syslog",
        _ => "none",
    }
}

/// Logs `line` (already prefixed for stderr, e.g. `qoslane: error: …`);
/// `message` is what the persistent sink gets, with `fields`.
pub fn emit(priority: Priority, line: &str, message: &str, fields: &[(&str, &str)]) {
    write_stderr(line);
    let Ok(logger) = LOGGER.read() else {
        return;
    };
    let Some(logger) = logger.as_ref() else {
        return;
    };
    let sent = match &logger.sink {
        Sink::None => return,
        Sink::Journal(s) => {
            let mut record = format!(
                "PRIORITY={}\nSYSLOG_IDENTIFIER={}\n",
                priority as u8, logger.ident
            );
            for (k, v) in logger
                .fields
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .chain(fields.iter().copied())
            {
                record.push_str(k);
                record.push('=');
                record.push_str(&one_line(v));
                record.push('\n');
            }
            record.push_str("MESSAGE=");
            record.push_str(&one_line(message));
            record.push('\n');
            s.send(record.as_bytes())
        }
        Sink::Syslog(s) => {
            let pri = FACILITY_DAEMON * 8 + priority as u8;
            let text = format!(
                "<{pri}>{}[{}]: {}",
                logger.ident,
                std::process::id(),
                one_line(message)
            );
            s.send(text.as_bytes())
        }
    };
    if sent.is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

fn one_line(text: &str) -> String {
    text.replace('\n', " ")
}

/// Writes `line` and a newline to stderr in chunks a pipe takes whole, each
/// only once `poll` says stderr can take it, until the deadline.
fn write_stderr(line: &str) {
    let until = DEADLINE
        .lock()
        .ok()
        .and_then(|d| *d)
        .unwrap_or_else(|| Instant::now() + DEFAULT_BOUND);
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let stderr = std::io::stderr();
    let fd = stderr.as_fd();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let left = until.saturating_duration_since(Instant::now());
        let timeout = rustix::event::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 && fds[0].revents().contains(PollFlags::OUT) => {}
            Err(rustix::io::Errno::INTR) => continue,
            _ => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let chunk = &rest[..rest.len().min(PIPE_BUF)];
        match rustix::io::write(fd, chunk) {
            Ok(n) => rest = &rest[n..],
            Err(e) if std::io::Error::from(e).kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_that_never_reads_drops_lines_without_blocking() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let sock = tmp.path().join("journal.socket");
        let _server = UnixDatagram::bind(&sock).expect("bind");
        init(Config {
            ident: "test",
            journal: Some(sock),
            syslog: None,
            fields: vec![("JOB".into(), "1".into())],
        });
        assert_eq!(sink_name(), "journal");
        let start = Instant::now();
        let big = "x".repeat(2000);
        for _ in 0..2000 {
            emit(Priority::Info, "", &big, &[]);
        }
        assert!(dropped() > 0, "the socket buffer cannot hold 4 MB");
        assert!(start.elapsed() < Duration::from_secs(30), "does not hang");
    }
}
