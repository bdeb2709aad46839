//! qoslane: carries a Slurm job's QoS onto the InfiniBand fabric.
//!
//! The binary (`main.rs`) is a thin shell over these modules. Layers, from
//! pure to effectful:
//! - [`mapping`]: the mapping file — parse, validate, typed (pure);
//! - [`job`]: job id, QoS resolution, TaskProlog exports;
//! - [`fabric`]: HCA ports from sysfs, SL2VL/OperVLs probe, alignment check;
//! - [`state`], [`settings`], [`txn`]: node state files, kernel settings, and
//!   the one transaction that changes a node (journal, verify, rollback);
//! - [`audit`], [`metrics`]: what every run leaves behind;
//! - [`commands`]: one module per subcommand, composing the above.

pub mod audit;
pub mod cli;
pub mod commands;
pub mod config;
pub mod deadline;
pub mod error;
pub mod exec;
pub mod exit_code;
pub mod fabric;
pub mod fault;
pub mod http;
pub mod job;
pub mod log;
pub mod manual;
pub mod mapping;
pub mod metrics;
pub mod paths;
pub mod report;
pub mod settings;
pub mod state;
pub mod txn;
