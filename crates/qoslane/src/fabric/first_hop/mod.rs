//! The first hop: the switch a node's HCA port is cabled to, and what it
//! does with each level's SL coming in from this node.
//!
//! - [`read`]: the switch's tables by directed route, by `smpquery` (each
//!   query a program, run together) or in process (SMP Gets in one window);
//! - [`judge`]: the lane rules on its output ports (pure);
//! - [`share`]: `health`'s reader: the own rows every run, the rest from
//!   the last full reading, read again once per period.

pub mod judge;
pub mod read;
pub mod share;
