//! The node lock: one qoslane transaction at a time on a node. Prologs and
//! Epilogs of different jobs run concurrently; this serialises them with a
//! bounded wait (`nodeio::lock`: flock on a file nobody else can open,
//! released by the kernel if the holder dies).

use crate::deadline::Deadline;
use crate::error::Result;
use crate::paths::Paths;

#[derive(Debug)]
pub struct NodeLock {
    _lock: nodeio::lock::Lock,
}

impl NodeLock {
    /// Waits for the lock until `deadline`.
    pub fn acquire(paths: &Paths, deadline: &Deadline) -> Result<Self> {
        let dir = nodeio::trusted::state_dir(&paths.root, &paths.run_dir, true)?;
        let lock = nodeio::lock::acquire(&dir, crate::paths::LOCK_FILE, deadline.instant())?;
        Ok(Self { _lock: lock })
    }
}
