//! Metrics: counters kept across runs in `/var/lib/qoslane/counters.json`
//! (hooks are short-lived processes), rendered in the classic Prometheus text
//! format into node_exporter's textfile directory, atomically, without
//! timestamps. Writing metrics never fails a hook. docs/metrics.md describes
//! every family.
//!
//! Concurrency: Prologs and Epilogs of different jobs run at once, and a run
//! that could not get the node lock still counts itself, so the
//! read-modify-write of the counters has its own lock
//! (`counters.lock` beside them, bounded wait).

use std::time::Duration;

use crate::error::Result;
use crate::paths::Paths;
use crate::state::fsutil;

mod counters;
mod render;
pub use counters::{BUCKETS, Counters, Gauges, Histogram, JobSent, Run, Stage, Stretch};
pub use render::render;

/// The counters and their lock, in the lib directory. The counters are
/// public (0644: `qoslane metrics` may run as a metrics user); the lock is
/// private (nodeio::lock), so no user can hold it.
const COUNTERS_FILE: &str = "counters.json";
const COUNTERS_LOCK: &str = "counters.lock";
const PUBLISH_LOCK: &str = "publish.lock";

/// The least a run waits for the other runs' counter updates (a fraction of
/// a millisecond each); a run whose deadline is further waits until then, so
/// that no count is lost when hundreds of jobs start at once.
pub const COUNTERS_LOCK_WAIT: Duration = Duration::from_secs(1);

/// The counters so far; all zero when the file does not exist yet.
pub fn load(paths: &Paths) -> Result<Counters> {
    Ok(fsutil::read_json(paths, &paths.counters())?.unwrap_or_default())
}

/// Adds `run` to the counters, then brings the textfile up to date. The
/// counters have their own lock, so this is safe with or without the node
/// lock. Under that lock only the read-add-replace of `counters.json`
/// happens (and a try of the publish lock); the file is not flushed (a node
/// crash costs at most the last counts: `nodeio::counter_file`). Errors are
/// returned for logging; callers never fail a hook on them.
pub fn record_and_publish(
    paths: &Paths,
    run: &Run<'_>,
    deadline: std::time::Instant,
    gauges: &dyn Fn() -> Gauges,
) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.lib_dir)?;
    let mut updated = nodeio::counter_file::update::<Counters, _>(
        &paths.root,
        &paths.lib_dir,
        COUNTERS_FILE,
        COUNTERS_LOCK,
        crate::state::PUBLIC,
        deadline.max(std::time::Instant::now() + COUNTERS_LOCK_WAIT),
        |c| c.record(run),
    )?;
    if let Some(note) = &updated.restarted {
        // Prometheus' rate() takes a reset in its stride.
        crate::log::warn(&format!("metrics: {note}"));
    }
    // The publish lock, tried before the counters' lock goes: holding both,
    // the counters are what this run just wrote, so it publishes them as it
    // has them (no read of the file), and nothing published before can be
    // newer (a publisher reads the counters under the publish lock).
    let publishing = nodeio::walk::open_dir(
        &paths.root,
        &paths.lib_dir,
        nodeio::walk::Judge::Trusted,
        None,
    )
    .map_err(crate::error::Error::from)
    .and_then(|dir| try_publish_lock(&dir));
    let bytes = std::mem::take(&mut updated.written);
    // Visible at once, not flushed: see nodeio::counter_file.
    let (counted, written) = updated.release_written()?;
    match publishing? {
        Some(lock) => publish_latest(paths, gauges, lock, counted, (bytes, written)),
        // Another run is publishing: it looks at the counters again when done.
        None => Ok(()),
    }
}

/// The publish lock, never waited for: `None` while another run holds it.
fn try_publish_lock(dir: &nodeio::walk::Dir) -> Result<Option<nodeio::lock::Lock>> {
    match nodeio::lock::acquire(dir, PUBLISH_LOCK, std::time::Instant::now()) {
        Ok(l) => Ok(Some(l)),
        Err(nodeio::Error::LockTimeout { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Rewrites the textfile from the counters (`counted`, the file's content
/// `bytes`, as read or written under the publish lock this run holds) and
/// the gauges as the node's state has them now (`gauges` reads them: the
/// caller knows where) — once for many runs when they finish together.
///
/// One run publishes at a time (`publish.lock`, never waited for). A run
/// that finds another one publishing leaves it to that one: when done, a
/// publisher looks at the counters again (the file it wrote still in place,
/// or after a later look their bytes compared with what it published: no
/// read, no parse when nobody counted meanwhile) and publishes again if
/// any run counted meanwhile. Every run counts after its transaction
/// committed, so the last textfile written shows every count and the final
/// state, while N jobs ending at once read the N job records far fewer than
/// N times.
fn publish_latest(
    paths: &Paths,
    gauges: &dyn Fn() -> Gauges,
    mut publishing: nodeio::lock::Lock,
    mut counted: Counters,
    (mut bytes, mut written): (Vec<u8>, Option<nodeio::counter_file::Written>),
) -> Result<()> {
    let path = paths.counters();
    // The counters are read under the publish lock, so what is published
    // never goes back (a run publishing the value it counted, after another
    // published a later one, made a counter drop for a scrape: a reset to
    // Prometheus). Bounded: each round is a few milliseconds.
    for _ in 0..64 {
        publish(paths, &counted, &gauges())?;
        drop(publishing);
        let unchanged = match written.take() {
            // The file this run wrote is still the one at the name.
            Some(w) => w.in_place(&paths.root, &path),
            None => nodeio::counter_file::load_bytes(&paths.root, &path)
                .is_ok_and(|now| now.as_deref() == Some(bytes.as_slice())),
        };
        if unchanged {
            return Ok(());
        }
        let dir = nodeio::walk::open_dir(
            &paths.root,
            &paths.lib_dir,
            nodeio::walk::Judge::Trusted,
            None,
        )?;
        publishing = match try_publish_lock(&dir)? {
            Some(l) => l,
            None => return Ok(()),
        };
        let now = nodeio::counter_file::load_bytes(&paths.root, &path)?;
        bytes = now.clone().unwrap_or_default();
        counted = nodeio::counter_file::parse(&path, now)?.unwrap_or_default();
    }
    Ok(())
}

/// Writes the textfile (`nodeio::atomic`: a temp name node_exporter
/// ignores, then a rename, in a directory reached without following anyone
/// else's symlink: it belongs to the `prometheus` user on Debian). Not
/// flushed to disk: it is rewritten from the counters by every run; a crash
/// before write-back leaves the previous file (or an empty one) until then.
pub fn publish(paths: &Paths, c: &Counters, gauges: &Gauges) -> Result<()> {
    let _visible = nodeio::atomic::replace(
        &paths.root,
        &paths.textfile(),
        render(c, gauges).as_bytes(),
        crate::state::PUBLIC,
        nodeio::walk::Judge::NoFollow,
        true,
        nodeio::atomic::Durability::Visible,
    )?;
    Ok(())
}
