//! A prototype, not shipped: a resident per-node process the hooks talk to
//! (docs/PERFORMANCE.md, "One process start per hook", what a resident
//! process would give). It is qoslane's binary's own code (`src/main.rs`,
//! included), kept running: for each request on its Unix socket — the
//! client's environment, NUL-separated, ended by an empty entry, sent by
//! `bench/tools/resident-client.c`, the program slurmd would start — it runs
//! qoslane's hook as hookrun runs a built-in one (`nodeio::child`: a fork of
//! this warm process calling the hook's entry with exactly that
//! environment, its own process group, a deadline), and answers one byte,
//! the hook's exit status. No exec at all per hook on the server's side.
//! What it leaves out (a shipped design would need them): hookrun's
//! directories, policy and metrics; authentication of the peer (SO_PEERCRED);
//! the TaskProlog's protocol on stdout; a restart when the binary changes.
//!
//! With `in-process`, the hook runs in the server itself, no fork: the
//! environment set to the client's, qoslane's hook called, its status sent
//! (the caches of a run — the mapping validated, the grants parsed — kept
//! for the next, as a resident design would keep them; a hook that hangs or
//! crashes takes the server with it: what a shipped design would have to
//! answer).
//!
//!   resident_prototype SOCKET [fork|in-process]
//!
//! bench/resident.sh builds and runs it.

#![expect(
    dead_code,
    reason = "main.rs's own main and helpers are included beside this one"
)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use nodeio::child::{self, Ending, Env, Output, Program, Timing};

#[path = "../src/main.rs"]
mod binary;

fn main() {
    let socket = std::env::args_os()
        .nth(1)
        .expect("usage: resident_prototype SOCKET [fork|in-process]");
    let in_process = std::env::args().nth(2).as_deref() == Some("in-process");
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).expect("bind the socket");
    let exe = std::env::current_exe().expect("the binary");
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut request = Vec::new();
        let mut buf = [0u8; 8192];
        // The request ends with an empty entry: two NULs in a row.
        while !request.ends_with(b"\0\0") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let vars: Vec<(OsString, OsString)> = request
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                let at = e.iter().position(|&b| b == b'=')?;
                Some((
                    OsString::from_vec(e[..at].to_vec()),
                    OsString::from_vec(e[at + 1..].to_vec()),
                ))
            })
            .collect();
        if in_process {
            let status = run_here(&exe, &vars);
            let _ = stream.write_all(&[status]);
            continue;
        }
        let program = Program::new(&exe, Env::Exact(vars)).built_in(binary::hook);
        let timing = Timing {
            deadline: Instant::now() + Duration::from_secs(30),
            kill_grace: Duration::from_millis(500),
            reap_wait: Duration::from_secs(2),
        };
        let status = match child::run(&program, Output::Capture { cap: 1 << 20 }, timing, None) {
            Ok(f) => match f.ending {
                Ending::Exited(s) => s.code().map_or(128, |c| u8::try_from(c).unwrap_or(1)),
                _ => 124,
            },
            Err(_) => 127,
        };
        let _ = stream.write_all(&[status]);
    }
}

/// The hook in this process: the environment made the client's, then the
/// hook's entry called.
fn run_here(exe: &std::path::Path, vars: &[(OsString, OsString)]) -> u8 {
    let old: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    // SAFETY: the server has one thread when it changes its environment
    // (qoslane's watchdog thread, once started, reads none of it).
    #[expect(
        unsafe_code,
        reason = "a prototype, not shipped: the client's environment set in the server"
    )]
    unsafe {
        for k in old {
            std::env::remove_var(k);
        }
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
    }
    u8::try_from(binary::hook(&[exe.as_os_str().to_owned()])).unwrap_or(1)
}
