//! The persisted grants (`/run/qoslane/grants.json`, [`crate::grant::Record`]):
//! written atomically (0644: `status` and `qoslane metrics` may run as
//! another user), read trusted. Gone at reboot, as the fabric it describes
//! may have changed.

use std::sync::Mutex;

use crate::error::Result;
use crate::grant::Record;
use crate::paths::Paths;

use super::{PUBLIC, fsutil};

/// The record, `None` when absent. A run reads it more than once (its
/// grant, then the metrics' gauges): the last text parsed is kept for the
/// process with its record, so the same bytes are parsed once. Keyed by
/// the content, never by the path or a timestamp: a changed file is always
/// parsed anew.
pub fn load(paths: &Paths) -> Result<Option<Record>> {
    static LAST: Mutex<Option<(Vec<u8>, Record)>> = Mutex::new(None);
    let path = paths.grants();
    let Some(bytes) = fsutil::read_trusted(paths, &path)? else {
        return Ok(None);
    };
    if let Ok(last) = LAST.lock()
        && let Some((_, record)) = last.as_ref().filter(|(b, _)| *b == bytes)
    {
        return Ok(Some(record.clone()));
    }
    let record: Record = serde_json::from_slice(&bytes)
        .map_err(|e| crate::error::Error::state(&path, format!("is not valid: {e}")))?;
    if let Ok(mut last) = LAST.lock() {
        *last = Some((bytes, record.clone()));
    }
    Ok(Some(record))
}

/// Replaces the record.
pub fn store(paths: &Paths, record: &Record) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.run_dir)?;
    fsutil::write_json_read_again(paths, &paths.grants(), record, PUBLIC)
}
