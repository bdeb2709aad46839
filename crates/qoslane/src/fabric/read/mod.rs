//! Reading: everything that reaches the fabric or the node's view of it.
//!
//! - [`sysfs`]: the node's HCA ports; [`cache`]: the tables last probed;
//! - [`parse`]: every parser of a fabric tool's output;
//! - [`smpquery`], [`perfquery`]: the program readers (each query a
//!   program, run together through `exec::run_many`);
//! - [`mad`], [`umad`], [`smp_batch`]: the in-process reader (SMP and PMA
//!   Gets through libibumad, a window in flight);
//! - [`reader`]: the one reader trait ([`reader::Reader`]); [`programs`] its
//!   implementation by programs, [`in_process`] by libibumad.

pub mod cache;
pub mod in_process;
pub mod mad;
pub mod parse;
pub mod perfquery;
pub mod programs;
pub mod reader;
pub mod smp_batch;
pub mod smpquery;
pub mod sysfs;
pub mod umad;
