//! The persisted grants (`/run/qoslane/grants.json`, [`crate::grant::Record`]):
//! written atomically (0644: `status` and `qoslane metrics` may run as
//! another user), read trusted. Gone at reboot, as the fabric it describes
//! may have changed.

use crate::error::Result;
use crate::grant::Record;
use crate::paths::Paths;

use super::{PUBLIC, fsutil};

/// The record, `None` when absent.
pub fn load(paths: &Paths) -> Result<Option<Record>> {
    fsutil::read_json(paths, &paths.grants())
}

/// Replaces the record.
pub fn store(paths: &Paths, record: &Record) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.run_dir)?;
    fsutil::write_json(paths, &paths.grants(), record, PUBLIC)
}
