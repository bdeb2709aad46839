//! The fabric audit's verdict taken in by `sync` and `health` (never by a
//! Prolog: it relies on what they recorded): the site's file
//! (`QOSLANE_FABRIC_VERDICT`, on a filesystem the nodes share), read
//! outside the node lock, then matched against this node's ports
//! (`fabric/sweep/verdict.rs`) into the `fabric path` scope of its grants.
//!
//! The file may be on NFS: a read that hangs must not hang the run, and no
//! kernel call of it may end the run as a failure (the watchdog of
//! `Deadline::run` would: a health check's failure drains the node). So it
//! is read on a thread of its own, waited for at most half of what is left
//! of the run; past that it is unread (the thread is left behind in its
//! read, and dies with the process). Missing, unreadable, untrusted, not
//! JSON, hung: unread, a warning on each level's grant, never a loss.

use std::path::PathBuf;
use std::sync::mpsc;

use crate::deadline::Deadline;
use crate::fabric::sweep::verdict::{self, OwnPort, PathVerdict};
use crate::grant::{PathRead, ReadPort};
use crate::mapping::Mapping;
use crate::paths::Paths;

/// Larger than any verdict of a real fabric (some 200 bytes per HCA port
/// and level that loses something): refused unread.
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// The verdict's word on this node's `ports` (as the assessment found
/// them) for every level of `mapping`; `None` when the site names no
/// verdict file.
pub fn fabric_path(
    paths: &Paths,
    mapping: &Mapping,
    sha256: &str,
    ports: &[ReadPort],
    deadline: &Deadline,
) -> Option<PathRead> {
    let file = paths.fabric_verdict.clone()?;
    let read = read(paths.root.clone(), file, deadline);
    let mine: Vec<OwnPort> = ports.iter().filter_map(own_port).collect();
    let levels: Vec<&str> = mapping.levels().iter().map(|l| l.name.as_str()).collect();
    let max_age_ms = u64::try_from(paths.fabric_verdict_max_age.as_millis()).unwrap_or(u64::MAX);
    Some(verdict::take_in(
        read,
        &mine,
        sha256,
        &levels,
        crate::time::now_ms(),
        max_age_ms,
    ))
}

/// `mlx5_0/1` with its node GUID: the port as the verdict names it.
fn own_port(p: &ReadPort) -> Option<OwnPort> {
    let (_, n) = p.port.rsplit_once('/')?;
    Some(OwnPort {
        guid: p.node_guid.clone(),
        port: n.parse().ok()?,
    })
}

/// The file, parsed, or why not; on a thread of its own, waited for at
/// most half of what the run has left.
fn read(root: PathBuf, file: PathBuf, deadline: &Deadline) -> Result<PathVerdict, String> {
    let wait = deadline.half().remaining();
    let shown = file.display().to_string();
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("qoslane-verdict".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            let _ = tx.send(read_now(&root, &file));
        })
        .map_err(|e| format!("{shown}: no thread to read it: {e}"))?;
    match rx.recv_timeout(wait) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!(
            "{shown}: no answer within {} ms (a hung shared filesystem?)",
            wait.as_millis()
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(format!("{shown}: the read failed")),
    }
}

/// A trusted read (a regular file of root or the caller, not writable by
/// group or others, in directories nobody else can write; a symlink of
/// root followed) and its parse.
fn read_now(root: &std::path::Path, file: &std::path::Path) -> Result<PathVerdict, String> {
    let shown = file.display();
    // A test holds the read here: a hung shared filesystem.
    crate::fault::hold("fabric-verdict-read");
    let bytes = nodeio::trusted::read(
        root,
        file,
        nodeio::trusted::Symlink::FollowTrusted,
        MAX_BYTES,
    )
    .map_err(|e| e.to_string())?
    .ok_or_else(|| format!("{shown} does not exist (has `qoslane fabric audit --verdict` run?)"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{shown} is not a fabric verdict: {e}"))
}
