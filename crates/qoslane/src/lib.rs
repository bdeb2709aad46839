//! qoslane: carries a Slurm job's QoS onto the InfiniBand fabric.
//!
//! The binary (`main.rs`) is a thin shell over these modules. Layers, from
//! pure to effectful (CONTRIBUTING.md has the table, row by row, and
//! `tests/integration/layers.rs` holds the code to it):
//! - [`libraries`]: what the job's libraries read, the export table (pure);
//! - [`mapping`]: the mapping file — parse, validate, typed (pure);
//! - [`time`], [`paths`], [`exit_code`], [`error`]: leaves and the error type;
//! - [`grant`]: the node's one decision per level, from every scope (pure);
//! - [`fault`], [`log`], [`deadline`], [`exec`], [`http`]: fault injection
//!   (tests), logging, the run's deadline, programs, the metrics' HTTP server;
//! - [`job`], [`state`], [`config`], [`settings`]: the job, node state, the
//!   mapping in force, kernel settings;
//! - [`fabric`]: HCA ports, the SL2VL/OperVLs probe, the per-level check and
//!   the fabric policy ([`fabric::policy`]);
//! - [`report`]: what a run did (event, outcome, fabric verdict, one
//!   payload per event);
//! - [`txn`]: the one transaction that changes a node;
//! - [`audit`], [`metrics`]: what every run leaves behind;
//! - [`cli`], [`manual`]: the command line, its man pages and completions;
//! - [`run`]: what every node-changing run shares (the session, the
//!   Prolog's grant, a job's notice and counters);
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
pub mod grant;
pub mod http;
pub mod job;
pub mod libraries;
pub mod log;
pub mod manual;
pub mod mapping;
pub mod metrics;
pub mod paths;
pub mod report;
pub mod run;
pub mod settings;
pub mod site;
pub mod slurm_config;
pub mod state;
pub mod time;
pub mod txn;
