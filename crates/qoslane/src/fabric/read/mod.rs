//! Reading: everything that reaches the fabric or the node's view of it.
//!
//! - [`sysfs`]: the node's HCA ports; [`cache`]: the tables last probed;
//! - [`parse`]: every parser of a fabric tool's output;
//! - [`smpquery`], [`perfquery`]: the program readers (each query a
//!   program, run together through `exec::run_many`);
//! - [`mad`], [`umad`], [`smp_batch`]: the in-process reader (SMP and PMA
//!   Gets through libibumad, a window in flight);
//! - [`probe`]: the one reader trait.

pub mod cache;
pub mod mad;
pub mod parse;
pub mod perfquery;
pub mod probe;
pub mod smp_batch;
pub mod smpquery;
pub mod sysfs;
pub mod umad;
