//! The fabric cache, `/run/qoslane/fabric.json`: each IB port's probed tables,
//! so a job start does not pay for SMP queries.
//!
//! An entry serves a `Cached` assessment (`assessment::ProbeMode`) while the port's
//! identity (node GUID, LID, SM LID, read from sysfs on every run) is the one
//! recorded and the entry is younger than the maximum age. A re-sweep that
//! changes the SL2VL table without changing any identity is therefore seen
//! within the maximum age, or at once by a `Fresh` assessment (`sync`,
//! `health`), which always probes and rewrites the cache.
//!
//! The file is written atomically (nodeio's atomic replace). A file that cannot be read or parsed is ignored and rewritten:
//! the cache can only save time, never decide an outcome.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fabric::tables::{PortId, PortIdentity, PortTables};
use crate::paths::Paths;
use crate::state::fsutil;

/// Bumped when the layout changes; another version is ignored (rewritten).
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    version: u32,
    ports: Vec<CachedPort>,
}

/// One port's probe result, as the cache keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedPort {
    pub port: PortId,
    pub identity: PortIdentity,
    /// When the probe ran: milliseconds since the Unix epoch.
    pub probed_at_ms: u64,
    pub tables: PortTables,
}

impl CachedPort {
    /// Whether the entry may stand for a probe of `port` with `identity` now.
    pub fn valid_for(
        &self,
        port: &PortId,
        identity: &PortIdentity,
        now_ms: u64,
        max_age: Duration,
    ) -> bool {
        // A clock that went backwards makes the age unknown: re-probe.
        let fresh = now_ms
            .checked_sub(self.probed_at_ms)
            .is_some_and(|age| u128::from(age) < max_age.as_millis());
        self.port == *port && self.identity == *identity && fresh
    }
}

pub use crate::time::now_ms;

/// The entries, or none and why (a missing file says nothing). Read like
/// every state file (nodeio's trusted read: no symlink, root's or ours).
pub fn load(paths: &Paths) -> (Vec<CachedPort>, Option<String>) {
    let text = match fsutil::read_trusted(paths, &paths.fabric_cache()) {
        Ok(Some(t)) => t,
        Ok(None) => return (Vec::new(), None),
        Err(e) => return (Vec::new(), Some(format!("read: {e}"))),
    };
    match serde_json::from_slice::<CacheFile>(&text) {
        Ok(f) if f.version == VERSION => (f.ports, None),
        Ok(f) => (
            Vec::new(),
            Some(format!("version {}, not {VERSION}", f.version)),
        ),
        Err(e) => (Vec::new(), Some(format!("not a fabric cache: {e}"))),
    }
}

/// Replaces the file atomically with `entries` (nodeio's atomic replace; on
/// tmpfs, so not flushed: it is only ever a cache). Temp files of killed
/// writers are removed by the next writer.
pub fn store(paths: &Paths, entries: Vec<CachedPort>) -> Result<()> {
    fsutil::ensure_dir(paths, &paths.run_dir)?;
    let mut body = serde_json::to_vec(&CacheFile {
        version: VERSION,
        ports: entries,
    })
    .map_err(|e| Error::Internal(format!("serialize fabric cache: {e}")))?;
    body.push(b'\n');
    let _visible =
        fsutil::atomic_replace(paths, &paths.fabric_cache(), &body, crate::state::PUBLIC)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::tables::{Sl2Vl, VlArbState, VlRange};

    fn entry(probed_at_ms: u64) -> CachedPort {
        CachedPort {
            port: PortId::new("mlx5_0", 1),
            identity: identity(4, 1),
            probed_at_ms,
            tables: PortTables {
                sl2vl: Sl2Vl::new([0; 16]).unwrap(),
                oper_vls: VlRange::from_code(4).unwrap(),
                vl_cap: VlRange::from_code(4).unwrap(),
                link_state: "Active".into(),
                vlarb: VlArbState::Unavailable("test".into()),
            },
        }
    }

    fn identity(lid: u16, sm_lid: u16) -> PortIdentity {
        PortIdentity {
            node_guid: "0x0002c90300440320".into(),
            lid,
            sm_lid,
        }
    }

    #[test]
    fn an_entry_serves_its_port_identity_and_age_only() {
        let e = entry(1_000_000);
        let port = PortId::new("mlx5_0", 1);
        let age = Duration::from_secs(300);
        assert!(e.valid_for(&port, &identity(4, 1), 1_000_000, age));
        assert!(e.valid_for(&port, &identity(4, 1), 1_299_999, age));
        assert!(
            !e.valid_for(&port, &identity(4, 1), 1_300_000, age),
            "too old"
        );
        assert!(
            !e.valid_for(&port, &identity(4, 1), 999_999, age),
            "from the future"
        );
        assert!(
            !e.valid_for(&port, &identity(5, 1), 1_000_000, age),
            "new LID"
        );
        assert!(
            !e.valid_for(&port, &identity(4, 2), 1_000_000, age),
            "new SM"
        );
        assert!(!e.valid_for(&PortId::new("mlx5_0", 2), &identity(4, 1), 1_000_000, age));
        assert!(!e.valid_for(&port, &identity(4, 1), 1_000_000, Duration::ZERO));
    }

    #[test]
    fn store_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(crate::paths::Overrides {
            root: Some(dir.path().to_owned()),
            ..Default::default()
        });
        let (entries, note) = load(&paths);
        assert!(entries.is_empty() && note.is_none());
        store(&paths, vec![entry(7)]).unwrap();
        let (entries, note) = load(&paths);
        assert_eq!(note, None);
        assert_eq!(entries, [entry(7)]);
    }
}
