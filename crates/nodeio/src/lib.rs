//! `nodeio`: the primitives that a program running as root on a compute node
//! uses to touch files others can also touch, each written once and used by
//! both `qoslane` and `hookrun`.
//!
//! - [`walk`]: resolving a directory under the root prefix one component at a
//!   time, never through a symlink a non-trusted user could have made, and
//!   judging each directory by its *descriptor*;
//! - [`trusted`]: reading a file that decides what root does (the mapping, a
//!   state file, a hook): opened once without following, judged by `fstat`,
//!   its owner and mode and those of every directory up to the root prefix;
//! - [`atomic`]: replacing a file (exclusive no-follow temp name, fsync,
//!   rename, directory fsync) and removing what killed writers left;
//! - [`append`]: appending one line to a log root keeps (the audit log);
//! - [`lock`]: flock'd lock files nobody else can open, with a bounded wait;
//! - [`alarm`]: the timer that bounds a blocking syscall (the lock's wait);
//! - [`sigmask`]: clearing the signal mask a process inherited;
//! - [`counter_file`]: a JSON file updated read-modify-write under its lock;
//! - [`prom`]: the Prometheus text exposition format (escaping, histograms);
//! - [`child`]: running a program (absolute path, explicit environment, its
//!   own process group, a deadline, bounded output) and leaving nothing of
//!   it behind;
//! - [`log`]: journald, else syslog, else stderr only; never blocks past the
//!   run's deadline, counts what it had to drop.
//!
//! - [`spool`]: taking a spool file another program appends to (rename,
//!   bounded read, the tail read again next round), never through a symlink;
//!
//! - [`build`]: which build this is (package version, revision, commit);
//! - [`process`]: what the primitives remember of the process (its pid),
//!   forgotten in a fork that does not exec (`child`'s built-in programs).
//!
//! Nothing here knows about Slurm or InfiniBand.

pub mod alarm;
pub mod append;
pub mod atomic;
pub mod build;
pub mod child;
pub mod counter_file;
pub mod error;
pub mod lock;
pub mod log;
pub mod process;
pub mod prom;
pub mod sigmask;
pub mod spool;
pub mod trusted;
pub mod walk;

pub use error::{Absence, Error, Result};
