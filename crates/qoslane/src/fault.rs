//! Fault injection points, compiled in only with the `fault-injection`
//! feature (the test build). `QOSLANE_FAULT=<point>` SIGKILLs the process
//! at that point, as Slurm's timeout kill or a crash would;
//! `QOSLANE_FAULT=misread` makes verification read back a wrong value.

#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if std::env::var("QOSLANE_FAULT").is_ok_and(|v| v == name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_name: &str) {}

#[cfg(feature = "fault-injection")]
pub fn active(name: &str) -> bool {
    std::env::var("QOSLANE_FAULT").is_ok_and(|v| v == name)
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn active(_name: &str) -> bool {
    false
}
