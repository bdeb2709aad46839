//! A small HTTP/1.0 server for GET and HEAD, without an async runtime or a
//! thread per connection: one thread polls the listener and every
//! connection (`poll`), so an idle connection costs a file descriptor and a
//! few bytes, never a worker. Each connection has its own deadline —
//! [`REQUEST_TIMEOUT`] from its accept for the whole request head (at most
//! [`MAX_REQUEST`] bytes), then [`WRITE_TIMEOUT`] for the whole answer — so
//! a slow or silent client (slowloris) holds nothing but its own socket
//! until then. At most [`MAX_CONNECTIONS`] are open (fewer if the
//! descriptor limit cannot be raised that far); one more closes the oldest
//! connection still waiting for its request rather than refusing the new
//! one. The server knows nothing of what it serves: a route maps a path to a
//! [`Reply`], made in the loop (it must be quick).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Resource, Rlimit};

mod request;
use request::{Head, answer, head_end, response};
pub use request::{PLAIN, Reply};

/// The largest request head read; a longer one gets `431`.
pub const MAX_REQUEST: usize = 8 * 1024;
/// The whole request head must arrive within this from the accept, however
/// it trickles in; an idle connection is answered `408` and closed then.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole answer must be taken within this.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once. Prometheus needs one; past this the oldest
/// connection still waiting for its request is closed to make room.
pub const MAX_CONNECTIONS: usize = 1024;
/// After an error answer to a request not read to its end, how long unread
/// input is drained so the client gets the answer rather than a reset.
const LINGER: Duration = Duration::from_millis(500);
/// At most this much unread input is drained while lingering.
const LINGER_MAX: usize = 16 * MAX_REQUEST;
/// Descriptors kept free of connections: the listener, stdio, the log, the
/// state files an answer reads.
const FD_RESERVE: usize = 64;
/// After `EMFILE` with no connection to close, accepting pauses this long
/// (the pending connection stays in the backlog) instead of spinning.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);
/// Accepts per loop turn, so a flood of connects cannot starve the others.
const ACCEPT_BATCH: usize = 64;

/// Serves `listener` until the process ends: each GET or HEAD is answered
/// with `route(path)` (the query dropped); a bad request, another method,
/// a head too large or too slow get their `4xx` here. `name` starts the
/// server's warnings (`NAME: accept: …`). Returns only if the listener
/// cannot be made non-blocking.
///
/// # Errors
/// The listener cannot be made non-blocking.
pub fn serve(
    listener: TcpListener,
    name: &str,
    route: &dyn Fn(&str) -> Reply,
) -> std::io::Result<std::convert::Infallible> {
    listener.set_nonblocking(true)?;
    let mut server = Server {
        listener,
        name,
        route,
        conns: Vec::new(),
        cap: connection_cap(name),
        accept_paused_until: None,
    };
    loop {
        server.turn();
    }
}

/// How many connections fit: [`MAX_CONNECTIONS`], the soft descriptor limit
/// raised towards it (up to the hard limit) first.
fn connection_cap(name: &str) -> usize {
    let want = u64::try_from(MAX_CONNECTIONS + FD_RESERVE).unwrap_or(u64::MAX);
    let limit = rustix::process::getrlimit(Resource::Nofile);
    let mut soft = limit.current.unwrap_or(u64::MAX);
    if soft < want {
        let raised = limit.maximum.map_or(want, |hard| hard.min(want));
        if raised > soft
            && rustix::process::setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(raised),
                    maximum: limit.maximum,
                },
            )
            .is_ok()
        {
            soft = raised;
        }
    }
    let fit = usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(FD_RESERVE);
    let cap = fit.clamp(1, MAX_CONNECTIONS);
    if cap < MAX_CONNECTIONS {
        crate::log::warn(&format!(
            "{name}: the descriptor limit allows {cap} connections at once, not {MAX_CONNECTIONS}"
        ));
    }
    cap
}

/// The poll loop's state.
struct Server<'a> {
    listener: TcpListener,
    name: &'a str,
    route: &'a dyn Fn(&str) -> Reply,
    /// In accept order: the oldest first.
    conns: Vec<Conn>,
    cap: usize,
    accept_paused_until: Option<Instant>,
}

/// One client connection.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    phase: Phase,
}

/// Where a connection stands; each phase has its deadline.
#[derive(Debug)]
enum Phase {
    /// Waiting for the request head (what arrived so far; empty while idle).
    Reading { head: Vec<u8>, deadline: Instant },
    /// Sending the answer; then lingering if the request was not read whole.
    Writing {
        out: Vec<u8>,
        sent: usize,
        deadline: Instant,
        linger: bool,
    },
    /// Answer sent and write side shut: discarding input until the client
    /// closes, briefly.
    Lingering { drained: usize, deadline: Instant },
    /// Done: dropped (closed) at the end of the turn.
    Closed,
}

impl Phase {
    fn deadline(&self) -> Option<Instant> {
        match self {
            Phase::Reading { deadline, .. }
            | Phase::Writing { deadline, .. }
            | Phase::Lingering { deadline, .. } => Some(*deadline),
            Phase::Closed => None,
        }
    }

    fn interest(&self) -> PollFlags {
        match self {
            Phase::Reading { .. } | Phase::Lingering { .. } => PollFlags::IN,
            Phase::Writing { .. } => PollFlags::OUT,
            Phase::Closed => PollFlags::empty(),
        }
    }
}

impl Server<'_> {
    /// One poll and what became ready or due.
    fn turn(&mut self) {
        let now = Instant::now();
        if self.accept_paused_until.is_some_and(|until| until <= now) {
            self.accept_paused_until = None;
        }
        let accepting = self.accept_paused_until.is_none();
        let wake_at = self
            .conns
            .iter()
            .filter_map(|c| c.phase.deadline())
            .chain(self.accept_paused_until)
            .min();
        let ready: Vec<bool> = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            if accepting {
                fds.push(PollFd::new(&self.listener, PollFlags::IN));
            }
            fds.extend(
                self.conns
                    .iter()
                    .map(|c| PollFd::from_borrowed_fd(c.stream.as_fd(), c.phase.interest())),
            );
            // Round up so a wake-up never comes a hair before a deadline.
            let timeout = wake_at.map(|at| {
                let left = at.saturating_duration_since(now) + Duration::from_micros(500);
                Timespec::try_from(left).unwrap_or(Timespec {
                    tv_sec: i64::from(i32::MAX),
                    tv_nsec: 0,
                })
            });
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    crate::log::warn(&format!("{}: poll: {e}", self.name));
                    std::thread::sleep(ACCEPT_PAUSE);
                    return;
                }
            }
            fds.iter().map(|fd| !fd.revents().is_empty()).collect()
        };
        let (listener_ready, conns_ready) = if accepting {
            (ready[0], &ready[1..])
        } else {
            (false, &ready[..])
        };
        let now = Instant::now();
        for (conn, &ready) in self.conns.iter_mut().zip(conns_ready) {
            if ready {
                conn.step(self.name, self.route);
            }
            if conn.phase.deadline().is_some_and(|d| d <= now) {
                conn.expire(self.name, self.route);
            }
        }
        self.conns.retain(|c| !matches!(c.phase, Phase::Closed));
        if listener_ready {
            self.accept();
        }
    }

    /// Accepts what is waiting (a batch), making room when full.
    fn accept(&mut self) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.conns.len() >= self.cap && !self.close_oldest_idle() {
                        // Every connection is being answered: they finish
                        // within WRITE_TIMEOUT.
                        busy(&stream);
                        continue;
                    }
                    let mut conn = Conn {
                        stream,
                        phase: Phase::Reading {
                            head: Vec::new(),
                            deadline: Instant::now() + REQUEST_TIMEOUT,
                        },
                    };
                    // The request often arrived with the connection.
                    conn.step(self.name, self.route);
                    if !matches!(conn.phase, Phase::Closed) {
                        self.conns.push(conn);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // EMFILE and friends: make room, else pause accepting.
                    if !self.close_oldest_idle() {
                        crate::log::warn(&format!("{}: accept: {e}", self.name));
                        self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                        return;
                    }
                }
            }
        }
    }

    /// Closes the oldest connection still waiting for its request (`503`,
    /// best effort); false if there is none.
    fn close_oldest_idle(&mut self) -> bool {
        let Some(i) = self
            .conns
            .iter()
            .position(|c| matches!(c.phase, Phase::Reading { .. }))
        else {
            return false;
        };
        let conn = self.conns.remove(i);
        busy(&conn.stream);
        true
    }
}

/// A short `503` without waiting on the client (one non-blocking write),
/// then the connection is closed by its drop.
fn busy(mut stream: &TcpStream) {
    let body = "busy\n";
    let mut out = response("503 Service Unavailable", PLAIN, body, &[]);
    out.push_str(body);
    let _ = stream.write(out.as_bytes());
    let _ = stream.shutdown(Shutdown::Both);
}

impl Conn {
    /// The socket is ready for what the phase waits for.
    fn step(&mut self, name: &str, route: &dyn Fn(&str) -> Reply) {
        match self.phase {
            Phase::Reading { .. } => self.read_head(name, route),
            Phase::Writing { .. } => self.write_ready(name),
            Phase::Lingering { .. } => self.drain(),
            Phase::Closed => {}
        }
    }

    fn read_head(&mut self, name: &str, route: &dyn Fn(&str) -> Reply) {
        let Phase::Reading { head, .. } = &mut self.phase else {
            return;
        };
        let mut chunk = [0u8; 4096];
        let room = (MAX_REQUEST - head.len()).min(chunk.len());
        let answered = match (&self.stream).read(&mut chunk[..room]) {
            Ok(0) => {
                self.phase = Phase::Closed;
                return;
            }
            Ok(n) => {
                head.extend_from_slice(&chunk[..n]);
                if let Some(end) = head_end(head) {
                    answer(route, Head::Complete(&head[..end]))
                } else if head.len() >= MAX_REQUEST {
                    answer(route, Head::TooLarge)
                } else {
                    return;
                }
            }
            Err(e) if is_transient(&e) => return,
            Err(_) => {
                self.phase = Phase::Closed;
                return;
            }
        };
        self.start_writing(name, answered);
    }

    fn write_ready(&mut self, name: &str) {
        let Phase::Writing {
            out, sent, linger, ..
        } = &mut self.phase
        else {
            return;
        };
        match (&self.stream).write(&out[*sent..]) {
            Ok(0) => self.phase = Phase::Closed,
            Ok(n) => {
                *sent += n;
                if *sent == out.len() {
                    self.phase = if *linger {
                        let _ = self.stream.shutdown(Shutdown::Write);
                        Phase::Lingering {
                            drained: 0,
                            deadline: Instant::now() + LINGER,
                        }
                    } else {
                        Phase::Closed
                    };
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => {
                if !matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                    crate::log::warn(&format!("{name}: {e}"));
                }
                self.phase = Phase::Closed;
            }
        }
    }

    fn drain(&mut self) {
        let Phase::Lingering { drained, .. } = &mut self.phase else {
            return;
        };
        let mut sink = [0u8; 4096];
        match (&self.stream).read(&mut sink) {
            Ok(n) if n > 0 && *drained + n < LINGER_MAX => *drained += n,
            Err(e) if is_transient(&e) => {}
            _ => self.phase = Phase::Closed,
        }
    }

    /// The phase's deadline passed.
    fn expire(&mut self, name: &str, route: &dyn Fn(&str) -> Reply) {
        match self.phase {
            Phase::Reading { .. } => self.start_writing(name, answer(route, Head::TimedOut)),
            Phase::Writing { .. } => {
                crate::log::warn(&format!("{name}: client too slow to take the answer"));
                self.phase = Phase::Closed;
            }
            Phase::Lingering { .. } | Phase::Closed => self.phase = Phase::Closed,
        }
    }

    /// Sends what the socket takes at once; the rest when it is ready.
    fn start_writing(&mut self, name: &str, (out, linger): (Vec<u8>, bool)) {
        self.phase = Phase::Writing {
            out,
            sent: 0,
            deadline: Instant::now() + WRITE_TIMEOUT,
            linger,
        };
        self.write_ready(name);
    }
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
}
