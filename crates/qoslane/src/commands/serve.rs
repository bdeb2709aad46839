//! `qoslane metrics [--listen ADDR]`: the metric families, printed once or
//! served at `/metrics` over plain HTTP/1.0 for sites without
//! node_exporter. Reads state only; bounded request size and time.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::Ctx;
use crate::config;
use crate::error::{Error, Result};
use crate::exit_code;
use crate::metrics::{self, Gauges};
use crate::state::Store;

const MAX_REQUEST: usize = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// The exposition text from the node's state, as the textfile would have it.
pub fn exposition(ctx: &Ctx) -> String {
    let paths = &ctx.paths;
    let counters = metrics::load(paths).unwrap_or_default();
    let mut g = Gauges {
        mapping_sha256: config::last_known_good_sha(paths),
        ..Default::default()
    };
    if let Ok((m, _, _)) = config::read_valid(&paths.last_known_good()) {
        for l in m.levels() {
            g.active_jobs.insert(l.name.clone(), 0);
        }
    }
    if paths.run_dir.exists()
        && let Ok(store) = Store::open(paths)
        && let Ok(records) = store.records()
    {
        for r in records.values() {
            *g.active_jobs.entry(r.level.clone()).or_default() += 1;
        }
    }
    metrics::render(&counters, &g)
}

pub fn run(ctx: &Ctx, listen: Option<&str>) -> Result<i32> {
    let Some(addr) = listen else {
        let _ = std::io::stdout()
            .lock()
            .write_all(exposition(ctx).as_bytes());
        return Ok(exit_code::OK);
    };
    let listener = TcpListener::bind(addr).map_err(Error::io("listen on", addr))?;
    crate::log::info(&format!("serving metrics on http://{addr}/metrics"));
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                if let Err(e) = handle(ctx, stream) {
                    crate::log::warn(&format!("metrics: {e}"));
                }
            }
            Err(e) => crate::log::warn(&format!("metrics: accept: {e}")),
        }
    }
    Ok(exit_code::OK)
}

fn handle(ctx: &Ctx, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut parts = head.lines().next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, ctype, body) = if len == MAX_REQUEST {
        (
            "431 Request Header Fields Too Large",
            "text/plain",
            "request too large\n".to_owned(),
        )
    } else if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_owned(),
        )
    } else if path == "/metrics" {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            exposition(ctx),
        )
    } else {
        (
            "404 Not Found",
            "text/plain",
            "not found; try /metrics\n".to_owned(),
        )
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}
