//! The fabric cache, `/run/qoslane/fabric.json`: each IB port's probed tables,
//! so a job start does not pay for SMP queries.
//!
//! An entry serves a [`super::ProbeMode::Cached`] assessment while the port's
//! identity (node GUID, LID, SM LID, read from sysfs on every run) is the one
//! recorded and the entry is younger than the maximum age. A re-sweep that
//! changes the SL2VL table without changing any identity is therefore seen
//! within the maximum age, or at once by a `Fresh` assessment (`sync`,
//! `health`), which always probes and rewrites the cache.
//!
//! The file is written atomically (temp file in the same directory, fsync,
//! rename). A file that cannot be read or parsed is ignored and rewritten:
//! the cache can only save time, never decide an outcome.

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::probe::PortTables;
use super::sysfs::{PortId, PortIdentity};
use crate::error::{Error, Result};

/// Bumped when the layout changes; another version is ignored (rewritten).
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    version: u32,
    ports: Vec<Entry>,
}

/// One port's probe result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub port: PortId,
    pub identity: PortIdentity,
    /// When the probe ran: milliseconds since the Unix epoch.
    pub probed_at_ms: u64,
    pub tables: PortTables,
}

impl Entry {
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

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The entries, or none and why (a missing file says nothing).
pub fn load(path: &Path) -> (Vec<Entry>, Option<String>) {
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (Vec::new(), None),
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

/// Replaces the file atomically with `entries`.
pub fn store(path: &Path, entries: Vec<Entry>) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal(format!("cache path {} has no parent", path.display())))?;
    fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
    let body = serde_json::to_vec(&CacheFile {
        version: VERSION,
        ports: entries,
    })
    .map_err(|e| Error::Internal(format!("serialize fabric cache: {e}")))?;
    // Unique per process and call: concurrent prologs write concurrently.
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let write = || -> io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // Persist the rename too (a no-op on tmpfs).
        fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io("write", path)(e)
    })
}

#[cfg(test)]
mod tests {
    use super::super::probe::{Sl2Vl, VlArbState, VlRange};
    use super::*;

    fn entry(probed_at_ms: u64) -> Entry {
        Entry {
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
        let path = dir.path().join("run/qoslane/fabric.json");
        store(&path, vec![entry(7)]).unwrap();
        let (entries, note) = load(&path);
        assert_eq!(note, None);
        assert_eq!(entries, [entry(7)]);
        let (entries, note) = load(&dir.path().join("missing.json"));
        assert!(entries.is_empty() && note.is_none());
    }
}
