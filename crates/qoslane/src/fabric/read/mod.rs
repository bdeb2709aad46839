//! Reading: everything that reaches the fabric or the node's view of it.
//!
//! - [`reader`]: the one reader trait ([`reader::Reader`]): every read of
//!   the fabric goes through it;
//! - the program readers: [`smpquery`] (the runner) and [`programs`] (its
//!   `Reader`: the own ports, the first hop, egress ports by LID), and
//!   [`perfquery`] (the counters); each query a program, several at once
//!   through `exec`, on the caller's thread;
//! - the in-process reader: [`in_process`] (its `Reader`), [`mad`] (the
//!   Gets as bytes), [`umad`] (libibumad), [`smp_batch`] (a window of Gets
//!   in flight under one deadline), [`discover`] (the topology walked by
//!   directed route, as `ibnetdiscover -p` prints it);
//! - [`parse`]: every parser of a fabric tool's output;
//! - [`sysfs`]: the node's HCA ports; [`cache`]: the tables last probed.
//!
//! No reader thread: the concurrency is the window.

pub mod cache;
pub mod discover;
pub mod in_process;
pub mod mad;
pub mod memo;
pub mod own_counters;
pub mod parse;
pub mod perfquery;
pub mod programs;
pub mod reader;
pub mod smp_batch;
pub mod smpquery;
pub mod sysfs;
pub mod topology;
pub mod umad;
