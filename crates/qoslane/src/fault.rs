//! Fault injection points, compiled in only with the `fault-injection`
//! feature (the test build). `QOSLANE_FAULT=<point>` SIGKILLs the process
//! at that point, as Slurm's timeout kill or a crash would;
//! `QOSLANE_FAULT=misread` makes verification read back a wrong value;
//! `QOSLANE_FAULT=hang-write` makes every setting write block (a hung driver);
//! `QOSLANE_FAULT=write-error:NAME` fails writes to files named NAME with EIO
//! (writes of the rollback included: a driver that broke mid-way);
//! `QOSLANE_FAULT=hold:NAME:DIR` stops the run at hold point NAME — it
//! creates `DIR/held`, then waits (at most a minute) for `DIR/go` — so a
//! test can act between two steps of a run (a rollout between a Prolog's
//! reading of the mapping and its promotion).

#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if std::env::var("QOSLANE_FAULT").is_ok_and(|v| v == name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline]
pub fn point(_name: &str) {}

#[cfg(feature = "fault-injection")]
pub fn active(name: &str) -> bool {
    std::env::var("QOSLANE_FAULT").is_ok_and(|v| v == name)
}

#[cfg(not(feature = "fault-injection"))]
#[inline]
pub fn active(_name: &str) -> bool {
    false
}

#[cfg(feature = "fault-injection")]
pub fn write_error(path: &std::path::Path) -> bool {
    std::env::var("QOSLANE_FAULT").is_ok_and(|v| {
        v.strip_prefix("write-error:")
            .is_some_and(|name| path.file_name().is_some_and(|f| f == name))
    })
}

#[cfg(not(feature = "fault-injection"))]
#[inline]
pub fn write_error(_path: &std::path::Path) -> bool {
    false
}

#[cfg(feature = "fault-injection")]
pub fn hold(name: &str) {
    let Ok(v) = std::env::var("QOSLANE_FAULT") else {
        return;
    };
    let Some((point, dir)) = v.strip_prefix("hold:").and_then(|r| r.split_once(':')) else {
        return;
    };
    if point != name {
        return;
    }
    let dir = std::path::Path::new(dir);
    let _ = std::fs::write(dir.join("held"), b"");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("go").exists() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline]
pub fn hold(_name: &str) {}
