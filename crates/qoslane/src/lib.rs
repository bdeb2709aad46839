//! qoslane: carries a Slurm job's QoS onto the InfiniBand fabric.
//!
//! The binary (`main.rs`) is a thin shell over these modules.

pub mod deadline;
pub mod error;
pub mod exec;
pub mod exit_code;
pub mod job;
pub mod mapping;
pub mod paths;
