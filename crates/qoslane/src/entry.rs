//! The binary's crate root and the process's entry point: [`main`], a C
//! `main` (`#![no_main]`) that calls `main.rs`'s [`program::entry`].
//!
//! Rust's own start (`lang_start`) costs every run ~0.16 ms (measured,
//! docs/PERFORMANCE.md) for what this binary does not need: reading
//! `/proc/self/maps` for the main thread's stack guard, an alternate signal
//! stack and SIGSEGV/SIGBUS handlers — whose one effect is a "has overflowed
//! its stack" line before the process dies by a signal (SIGABRT; without
//! them it dies by SIGSEGV: a run killed by a signal all the same to hookrun
//! and slurmd). What of that start the binary relies on, [`main`] does
//! itself: SIGPIPE ignored (a reader gone is `EPIPE`, ended quietly with
//! 141), the standard descriptors open (a closed one becomes `/dev/null`, so
//! no file a run opens becomes its stdout or stderr), and the exit through
//! [`std::process::exit`], which flushes stdout as returning from Rust's
//! `main` does. The arguments and the environment are std's as before
//! (glibc hands them to std before `main` runs).

// Under `cargo test` the harness's own `main` runs this crate's tests
// (main.rs's have none of their own: the program is tested as a process).
#![cfg_attr(not(test), no_main)]

#[path = "main.rs"]
mod program;

/// Under `cargo test` the program is not the entry point: named here, it is
/// still built and linted as it ships.
#[cfg(test)]
const _: fn() -> i32 = program::entry;

/// The process's entry, called by the C runtime: the part of Rust's start
/// this binary relies on (see the module), then [`program::entry`], whose
/// result is the exit code.
#[cfg(not(test))]
#[unsafe(no_mangle)]
#[expect(
    unsafe_code,
    reason = "the C entry point, SIGPIPE's disposition and the standard descriptors: the one audited block of qoslane's binary"
)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: called once, by the C runtime, before any thread of this
    // process exists. `signal` installs SIG_IGN, no code. `poll` is given a
    // local array of three entries and its length. `open` is given a
    // NUL-terminated literal; with the lowest descriptor closed it returns
    // that one (POSIX), and a process whose standard descriptors cannot be
    // made valid is ended at once, as Rust's own start ends it. Nothing here
    // reads or frees memory it does not own.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        let polled = libc::poll(fds.as_mut_ptr(), 3, 0) >= 0;
        for pfd in fds {
            let closed = if polled {
                pfd.revents & libc::POLLNVAL != 0
            } else {
                libc::fcntl(pfd.fd, libc::F_GETFD) == -1
                    && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF)
            };
            if closed && libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0) != pfd.fd {
                libc::abort();
            }
        }
    }
    std::process::exit(program::entry())
}
