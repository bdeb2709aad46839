//! A Slurm job as the hooks see it: its id, its QoS and where that came from,
//! the per-job record, and the TaskProlog exports.

pub mod exports;
pub mod on_node;
pub mod qos;

use std::fmt;

use crate::error::{Error, Result};

/// A Slurm job id (a positive integer; array tasks have their own).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct JobId(u32);

impl JobId {
    pub fn parse(s: &str) -> Result<Self> {
        match s.parse::<u32>() {
            Ok(n) if n > 0 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(Self(n)),
            _ => Err(Error::Usage(format!(
                "SLURM_JOB_ID `{}` is not a job id",
                s.escape_debug()
            ))),
        }
    }

    /// From the hook environment: `SLURM_JOB_ID`, else `SLURM_JOBID`.
    pub fn from_env() -> Result<Self> {
        let v = std::env::var("SLURM_JOB_ID")
            .or_else(|_| std::env::var("SLURM_JOBID"))
            .map_err(|_| {
                Error::Usage("SLURM_JOB_ID is not set: run this as a Slurm hook".into())
            })?;
        Self::parse(&v)
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
