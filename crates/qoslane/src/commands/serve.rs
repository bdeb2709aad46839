//! `qoslane metrics [--listen ADDR]`: the metric families, printed once or
//! served at `/metrics` over plain HTTP/1.0 for sites without
//! node_exporter. Reads state only (creates nothing, locks nothing).
//!
//! No async runtime: one thread per connection, at most
//! [`MAX_CONNECTIONS`] at once (more get `503` at once), each request bounded
//! in size ([`MAX_REQUEST`]) and in total time ([`REQUEST_TIMEOUT`] to read
//! the head, [`WRITE_TIMEOUT`] to send the answer), so neither a slow nor a
//! silent client can hold the server.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::Ctx;
use crate::error::{Error, Result};
use crate::exit_code::Verdict;
use crate::metrics;
use crate::paths::Paths;

/// The largest request head read; a longer one gets `431`.
pub const MAX_REQUEST: usize = 8 * 1024;
/// The whole request head must arrive within this, however it trickles in.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole answer must be taken within this.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; Prometheus needs one.
pub const MAX_CONNECTIONS: usize = 16;
/// After an error answer to a request not read to its end, how long unread
/// input is drained so the client gets the answer rather than a reset.
const LINGER: Duration = Duration::from_millis(500);

/// The exposition text from the node's state, as the textfile would have it.
/// A counters file that cannot be read gives zeros (and a warning); the HTTP
/// endpoint answers `500` instead.
pub fn exposition(ctx: &Ctx) -> String {
    render(&ctx.paths).unwrap_or_else(|e| {
        crate::log::warn(&format!("metrics: {e}"));
        metrics::render(&metrics::Counters::default(), &metrics::gauges(&ctx.paths))
    })
}

fn render(paths: &Paths) -> Result<String> {
    let counters = metrics::load(paths)?;
    Ok(metrics::render(&counters, &metrics::gauges(paths)))
}

pub fn run(ctx: &Ctx, listen: Option<&str>) -> Result<Verdict> {
    let Some(addr) = listen else {
        let text = render(&ctx.paths)?;
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(Error::io("write", "standard output"))?;
        return Ok(Verdict::Ok);
    };
    let listener = TcpListener::bind(addr).map_err(Error::io("listen on", addr))?;
    let local = listener
        .local_addr()
        .map_or_else(|_| addr.to_owned(), |a| a.to_string());
    crate::log::info(&format!("serving metrics on http://{local}/metrics"));
    let active = Arc::new(AtomicUsize::new(0));
    let paths = &ctx.paths;
    std::thread::scope(|scope| {
        for conn in listener.incoming() {
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    crate::log::warn(&format!("metrics: accept: {e}"));
                    // EMFILE and friends: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
                busy(stream);
                continue;
            }
            let slot = Slot::take(&active);
            let spawned = std::thread::Builder::new()
                .name("metrics-conn".into())
                .spawn_scoped(scope, move || {
                    let _slot = slot;
                    if let Err(e) = handle(paths, stream) {
                        crate::log::warn(&format!("metrics: {e}"));
                    }
                });
            if let Err(e) = spawned {
                crate::log::warn(&format!("metrics: spawn: {e}"));
            }
        }
    });
    Ok(Verdict::Ok)
}

/// One connection's share of [`MAX_CONNECTIONS`], given back on drop.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(active: &Arc<AtomicUsize>) -> Self {
        active.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(active))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

/// Over the connection cap: a short answer, never waiting on the client.
fn busy(mut stream: TcpStream) {
    let _ = stream.set_nonblocking(true);
    // What already arrived is read first, so that closing does not reset the
    // connection under the answer.
    let mut sink = [0u8; 4096];
    for _ in 0..MAX_REQUEST / sink.len() {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = stream.write_all(
        response(
            "503 Service Unavailable",
            "text/plain; charset=utf-8",
            "busy\n",
            &[],
        )
        .as_bytes(),
    );
    let _ = stream.shutdown(Shutdown::Write);
}

/// Why a request head could not be read.
enum Head {
    Complete(usize),
    TooLarge,
    TimedOut,
    Closed,
}

/// Reads the request head, up to [`MAX_REQUEST`] bytes, all within
/// [`REQUEST_TIMEOUT`].
fn read_head(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<Head> {
    let start = Instant::now();
    let mut len = 0;
    loop {
        if let Some(end) = head_end(&buf[..len]) {
            return Ok(Head::Complete(end));
        }
        if len == buf.len() {
            return Ok(Head::TooLarge);
        }
        let left = REQUEST_TIMEOUT.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Ok(Head::TimedOut);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[len..]) {
            Ok(0) => return Ok(Head::Closed),
            Ok(n) => len += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(Head::TimedOut);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The length of the head (through its blank line), if it is all there.
fn head_end(b: &[u8]) -> Option<usize> {
    let crlf = b.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = b.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn response(status: &str, ctype: &str, body: &str, extra: &[(&str, &str)]) -> String {
    let mut head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

fn handle(paths: &Paths, mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; MAX_REQUEST];
    let head = read_head(&mut stream, &mut buf)?;
    let text;
    let (method, path) = match head {
        Head::Closed => return Ok(()),
        Head::Complete(len) => {
            text = String::from_utf8_lossy(&buf[..len]).into_owned();
            let mut parts = text.lines().next().unwrap_or("").split(' ');
            let method = parts.next().unwrap_or("");
            let target = parts.next().unwrap_or("");
            let version = parts.next().unwrap_or("");
            if !version.starts_with("HTTP/") || !target.starts_with('/') {
                ("", "")
            } else {
                (method, target.split('?').next().unwrap_or(""))
            }
        }
        Head::TooLarge | Head::TimedOut => ("", ""),
    };
    let plain = "text/plain; charset=utf-8";
    let mut extra: Vec<(&str, &str)> = Vec::new();
    let (status, ctype, body) = match head {
        Head::TooLarge => (
            "431 Request Header Fields Too Large",
            plain,
            "request too large\n".to_owned(),
        ),
        Head::TimedOut => ("408 Request Timeout", plain, "request timeout\n".to_owned()),
        _ if method.is_empty() => ("400 Bad Request", plain, "bad request\n".to_owned()),
        _ if method != "GET" && method != "HEAD" => {
            extra.push(("Allow", "GET, HEAD"));
            (
                "405 Method Not Allowed",
                plain,
                "only GET and HEAD\n".to_owned(),
            )
        }
        _ if path == "/metrics" => match render(paths) {
            Ok(body) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", body),
            Err(e) => {
                crate::log::warn(&format!("metrics: {e}"));
                (
                    "500 Internal Server Error",
                    plain,
                    format!("cannot read the counters: {e}\n"),
                )
            }
        },
        _ => (
            "404 Not Found",
            plain,
            "not found; the metrics are at /metrics\n".to_owned(),
        ),
    };
    let mut out = response(status, ctype, &body, &extra).into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    write_within(&mut stream, &out, WRITE_TIMEOUT)?;
    if !matches!(head, Head::Complete(_)) {
        linger(&mut stream);
    }
    Ok(())
}

/// `write_all` with one deadline for the whole buffer, not per write.
fn write_within(stream: &mut TcpStream, mut data: &[u8], limit: Duration) -> std::io::Result<()> {
    let start = Instant::now();
    while !data.is_empty() {
        let left = limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(std::io::Error::new(
                ErrorKind::TimedOut,
                "client too slow to take the answer",
            ));
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write(data) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}

/// Half-closes and discards what the client still sends for a moment, so
/// closing with unread input does not reset the connection before the client
/// has read the answer.
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let start = Instant::now();
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    while drained < 16 * MAX_REQUEST {
        let left = LINGER.saturating_sub(start.elapsed());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}
