//! `qoslane metrics [--listen ADDR]`: the metric families, printed once or
//! served at `/metrics` over plain HTTP/1.0 for sites without
//! node_exporter ([`crate::http`]: one polling thread, per-connection
//! deadlines and limits). Reads state only (creates nothing, locks
//! nothing). Answering is quick (the counters are small local files).

use std::io::Write;
use std::net::TcpListener;

use super::Ctx;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::http::{self, Reply};
use crate::metrics;
use crate::paths::Paths;
use crate::run::session::node_gauges;

fn render(paths: &Paths) -> Result<String> {
    let counters = metrics::load(paths)?;
    Ok(metrics::render(&counters, &node_gauges(paths)))
}

pub fn run(ctx: &Ctx, listen: Option<&str>) -> Result<ExitClass> {
    let Some(addr) = listen else {
        let text = render(&ctx.paths)?;
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(Error::output)?;
        return Ok(ExitClass::Ok);
    };
    let listener = TcpListener::bind(addr).map_err(Error::io("listen on", addr))?;
    let local = listener
        .local_addr()
        .map_or_else(|_| addr.to_owned(), |a| a.to_string());
    crate::log::info(&format!("serving metrics on http://{local}/metrics"));
    let Err(e) = http::serve(listener, "metrics", &|path| route(&ctx.paths, path));
    Err(Error::io("listen on", addr)(e))
}

/// `/metrics`: the exposition text, or `500` when the counters cannot be
/// read (printed once, they would be zeros with a warning).
fn route(paths: &Paths, path: &str) -> Reply {
    if path != "/metrics" {
        return Reply {
            status: "404 Not Found",
            content_type: http::PLAIN,
            body: "not found; the metrics are at /metrics\n".to_owned(),
        };
    }
    match render(paths) {
        Ok(body) => Reply {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body,
        },
        Err(e) => {
            crate::log::warn(&format!("metrics: {e}"));
            Reply {
                status: "500 Internal Server Error",
                content_type: http::PLAIN,
                body: format!("cannot read the counters: {e}\n"),
            }
        }
    }
}
