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

    /// What the id says about the job's hooks ([`JobKind`]).
    pub fn kind(self) -> JobKind {
        if NO_ALLOCATION_IDS.contains(&self.0) {
            JobKind::NoAllocation
        } else {
            JobKind::Allocated
        }
    }
}

/// The ids Slurm gives a step of `srun --no-allocate` (root and SlurmUser
/// only): 0xffff0000 to 0xfffffffd, above every id of an allocation (and
/// below `NO_VAL`, 0xfffffffe).
pub const NO_ALLOCATION_IDS: std::ops::RangeInclusive<u32> = 0xffff_0000..=0xffff_fffd;

/// A job as its id classifies it for the hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// A job of an allocation (a batch or interactive job, an array task, a
    /// heterogeneous component): Slurm runs its Epilog after its Prolog.
    Allocated,
    /// A step of `srun --no-allocate`: Slurm runs the Prolog for it and
    /// never the Epilog, so nothing a Prolog left (a record, a level's
    /// settings) would be undone until the next health check.
    NoAllocation,
}

impl JobKind {
    /// Why the Prolog grants such a job nothing (its audit line's note), or
    /// `None` for a job the hooks manage.
    pub fn unmanaged(self) -> Option<&'static str> {
        match self {
            Self::Allocated => None,
            Self::NoAllocation => Some(
                "an `srun --no-allocate` step (job id 0xffff0000-0xfffffffd): Slurm runs no \
                 Epilog for it, so no level is granted and nothing is recorded; it runs on the \
                 node's settings as they are",
            ),
        }
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_allocate_ids_are_the_range_slurm_gives_them() {
        let kind = |s: &str| JobId::parse(s).map(JobId::kind).ok();
        assert_eq!(kind("1"), Some(JobKind::Allocated));
        assert_eq!(kind("4294901759"), Some(JobKind::Allocated));
        assert_eq!(kind("4294901760"), Some(JobKind::NoAllocation));
        assert_eq!(kind("4294967293"), Some(JobKind::NoAllocation));
        assert_eq!(kind("4294967294"), Some(JobKind::Allocated));
        assert!(JobKind::NoAllocation.unmanaged().is_some());
        assert!(JobKind::Allocated.unmanaged().is_none());
    }
}
