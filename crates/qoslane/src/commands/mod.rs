//! One module per subcommand; each composes the library layers and returns
//! an exit code. No command imports another command's module: the run
//! machinery they share (deadline, lock, audit, metrics, a job's counters)
//! is in [`crate::run`].

pub mod cluster;
pub mod explain;
pub mod fabric_audit;
pub mod health;
pub mod hooks;
pub mod log;
pub mod recover;
pub mod serve;
pub mod slurm_config;
pub mod sm_config;
pub mod status;
pub mod sync;
pub mod task_prolog;
pub mod validate;

use std::time::Duration;

use crate::paths::Paths;

/// What every command gets.
#[derive(Debug)]
pub struct Ctx {
    pub paths: Paths,
    pub timeout: Duration,
    /// `SLURM_SCRIPT_CONTEXT`, when set.
    pub context: Option<String>,
    /// The mapping was named (`--config`, `QOSLANE_CONFIG`): a dry run then
    /// explains that file or fails, never the copy in force instead.
    pub config_given: bool,
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
