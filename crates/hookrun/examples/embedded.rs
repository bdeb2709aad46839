//! A program that embeds hookrun's runner and has a hook of its own, as
//! qoslane's binary does: run under the name `hookrun` (a link to it) it is
//! hookrun, whose hooks that are this very binary run built in (a fork that
//! calls [`hook`], no exec); run under any other name — a hook link exec'd
//! by the plain hookrun — it is that hook. hookrun's tests
//! (`tests/integration/built_in.rs`) run it; what the hook does is asked by
//! `EMBEDDED_DO`:
//!
//! - unset: print how it runs, one line (`built in` or `exec'd`, its pid,
//!   its parent's, its process group, `HOOKRUN_PHASE`, its argv\[0\], its
//!   signal mask and its ignored signals: `SigBlk` and `SigIgn` of
//!   `/proc/self/status`);
//! - `sleep`: the same line; start `/bin/sleep 600` (in its process group),
//!   write its own pid and the sleep's to the file `EMBEDDED_PIDS` names,
//!   one a line, then sleep until killed;
//! - `export`: a TaskProlog protocol line, `export EMBEDDED=built-in`;
//! - `refuse`: `embedded: job refused (HOW)`, then exit 100 (hookrun's
//!   "refuse this job, the node is fine");
//! - `exit:N`: exit N;
//! - `panic`: panic.

#![expect(
    clippy::print_stdout,
    reason = "what the hook prints is what hookrun's tests read"
)]

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let code = if name == "hookrun" {
        hookrun::app::main_with(Some(hook))
    } else {
        behave("exec'd", &argv)
    };
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}

/// The hook, built in: called in hookrun's fork.
fn hook(argv: &[OsString]) -> i32 {
    behave("built in", argv)
}

fn behave(how: &str, argv: &[OsString]) -> i32 {
    let what = std::env::var("EMBEDDED_DO").unwrap_or_default();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let of_status = |field: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map_or("unknown", str::trim)
    };
    let line = format!(
        "{how}: pid={} ppid={} pgid={} phase={} argv0={} sigblk={} sigign={}",
        std::process::id(),
        rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get()),
        rustix::process::getpgrp().as_raw_nonzero().get(),
        std::env::var("HOOKRUN_PHASE").unwrap_or_default(),
        argv.first()
            .map(|a| a.to_string_lossy())
            .unwrap_or_default(),
        of_status("SigBlk:"),
        of_status("SigIgn:"),
    );
    match what.as_str() {
        "" => println!("{line}"),
        "sleep" => {
            println!("{line}");
            let sleeper = std::process::Command::new("/bin/sleep")
                .arg("600")
                .spawn()
                .map(|c| c.id());
            if let (Ok(sleeper), Some(file)) = (sleeper, std::env::var_os("EMBEDDED_PIDS")) {
                let _ = std::fs::write(file, format!("{}\n{sleeper}\n", std::process::id()));
            }
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "export" => println!("export EMBEDDED=built-in"),
        "refuse" => {
            println!("embedded: job refused ({how})");
            return 100;
        }
        "panic" => panic!("the embedded hook panics"),
        other => {
            if let Some(code) = other.strip_prefix("exit:").and_then(|c| c.parse().ok()) {
                return code;
            }
            eprintln!("embedded: EMBEDDED_DO={other}: not a thing it does");
            return 64;
        }
    }
    0
}
