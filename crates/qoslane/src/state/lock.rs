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

/// When `health` first saw the node lock held with no journal (an admin's
/// `flock`, a run wedged before its transaction began): health's own file,
/// so that a holder nobody names still has an age.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LockSeen {
    since: String,
    by: String,
}

/// The lock is held outside a transaction: since when health first saw it
/// so (now, on first sight: remembered) and how long ago.
pub fn seen_held(paths: &Paths) -> (String, std::time::Duration) {
    let now = std::time::SystemTime::now();
    let path = paths.lock_seen();
    let seen = super::fsutil::read_json::<LockSeen>(paths, &path)
        .ok()
        .flatten()
        .and_then(|s| {
            let t = crate::time::parse_rfc3339(&s.since)?;
            Some((s.since, now.duration_since(t).unwrap_or_default()))
        });
    seen.unwrap_or_else(|| {
        let since = crate::time::rfc3339_seconds(now);
        let record = LockSeen {
            since: since.clone(),
            by: "health".to_owned(),
        };
        // Not written: the next run sees it for the first time again (a run
        // directory that cannot be written is health's `state` check).
        let _ = super::fsutil::write_json(paths, &path, &record, super::PUBLIC);
        (since, std::time::Duration::ZERO)
    })
}

/// The lock was free (health took it): nothing is remembered.
pub fn seen_free(paths: &Paths) {
    let path = paths.lock_seen();
    if path.exists() {
        let _ = super::fsutil::remove(paths, &path);
    }
}
