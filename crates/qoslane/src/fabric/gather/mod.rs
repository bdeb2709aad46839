//! Gathering an assessment of this node's ports: discover them in sysfs
//! (`read/sysfs.rs`), take their tables from the cache (`read/cache.rs`)
//! or probe them through a [`Reader`], read the first hops when asked
//! (through the same reader) and check every level of the mapping
//! (`judge/check.rs`, `first_hop/judge.rs`). The result is an
//! [`Assessment`]; the fabric policy judges it (`judge/policy.rs`, gathered
//! for by [`policy`]).

pub mod policy;
pub mod verdict;

use std::time::Duration;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::fabric::first_hop::judge::JudgedHop;
use crate::fabric::judge::assessment::{Assessment, IbPort, ProbeMode, SkippedPort, TablesSource};
use crate::fabric::judge::check;
use crate::fabric::read::cache;
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smpquery::Smpquery;
use crate::fabric::read::sysfs::{self, LinkLayer, SysfsPort};
use crate::fabric::tables::{PortId, PortIdentity, PortTables};
use crate::mapping::Mapping;
use crate::paths::Paths;

/// Knobs of an assessment; [`assess`] uses the defaults.
#[derive(Clone, Debug)]
pub struct AssessOptions {
    /// How long a cache entry stands for a probe (its identity unchanged).
    pub max_cache_age: Duration,
    /// The most one port's probe may take, within the run's deadline, so a
    /// hung query leaves the run time to roll back and audit.
    pub probe_timeout: Duration,
    /// Also read the first hop (the switch each port is cabled to): `sync`
    /// and `health`, not a Prolog.
    pub first_hop: bool,
    /// Write what was probed to the cache (not in a dry run).
    pub store_cache: bool,
}

impl AssessOptions {
    pub const DEFAULT_MAX_CACHE_AGE: Duration = Duration::from_secs(300);
    pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
}

impl Default for AssessOptions {
    fn default() -> Self {
        Self {
            max_cache_age: Self::DEFAULT_MAX_CACHE_AGE,
            probe_timeout: Self::DEFAULT_PROBE_TIMEOUT,
            first_hop: false,
            store_cache: true,
        }
    }
}

/// Discover selected ports, probe (or use cache), check every level of
/// `mapping` on every IB port. Probes with `paths.smpquery`.
pub fn assess(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
) -> Result<Assessment> {
    assess_with(
        paths,
        mapping,
        deadline,
        mode,
        &Smpquery::new(&paths.smpquery),
        &AssessOptions::default(),
    )
}

/// [`assess`] with another reader and options.
///
/// An error means the fabric could not be assessed (sysfs unreadable or
/// unparsable, a probe failed or passed its deadline); misalignments are not
/// errors but the assessment's problems.
pub fn assess_with(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
    reader: &dyn Reader,
    opts: &AssessOptions,
) -> Result<Assessment> {
    let discovery = {
        // On a helper thread: a hung driver cannot make the run overstay.
        let (owned, devices) = (paths.clone(), mapping.devices.clone());
        deadline.run(
            || format!("read {}", paths.display(&paths.sysfs_ib())),
            move || sysfs::discover(&owned, &devices),
        )
    }??;
    let now = cache::now_ms();
    let mut notes = Vec::new();
    let cached = cached_ports(paths, mode, &mut notes);

    let Sorted {
        ib,
        roce_ports,
        skipped,
    } = sort_ports(
        discovery.ports,
        !mapping.devices.is_empty(),
        &cached,
        now,
        opts.max_cache_age,
    );

    // Probe the ports the cache could not serve, all at once.
    let to_probe: Vec<&PortId> = ib
        .iter()
        .filter(|c| c.from_cache.is_none())
        .map(|c| &c.id)
        .collect();
    let probed: Vec<Result<PortTables>> = if to_probe.is_empty() {
        Vec::new()
    } else {
        reader.probe_many(&to_probe, &probe_bound(deadline, opts.probe_timeout))
    };
    let any_probed = !probed.is_empty();
    // The first hops, one port at a time (each reads its switch's ports in
    // rounds of programs or a window of Gets), under the same bound as the
    // probes.
    let first_hops: Vec<Option<JudgedHop>> = if opts.first_hop {
        let hop_deadline = probe_bound(deadline, opts.probe_timeout);
        ib.iter()
            .map(|c| {
                let (hop, read_at_ms) = reader.first_hop_at(&c.id, &c.identity, &hop_deadline);
                let mut judged = JudgedHop::of(&c.id, hop, mapping.levels());
                judged.read_at_ms = read_at_ms;
                Some(judged)
            })
            .collect()
    } else {
        ib.iter().map(|_| None).collect()
    };
    let mut first_hops = first_hops.into_iter();
    let mut probed = probed.into_iter();
    let probed_at = cache::now_ms();
    let mut ib_ports = Vec::with_capacity(ib.len());
    for IbCandidate {
        id,
        identity,
        rate,
        from_cache,
    } in ib
    {
        let (tables, source, probed_at_ms) = if let Some((t, at)) = from_cache {
            (t, TablesSource::Cache, at)
        } else {
            let t = probed
                .next()
                .ok_or_else(|| Error::Internal("probe results out of step".into()))??;
            (t, TablesSource::Probe, probed_at)
        };
        let verdicts = mapping
            .levels()
            .iter()
            .map(|l| check::check(&id, &tables, l))
            .collect();
        ib_ports.push(IbPort {
            port: id,
            identity,
            rate,
            source,
            probed_at_ms,
            tables,
            verdicts,
            first_hop: first_hops.next().flatten(),
        });
    }

    if any_probed && opts.store_cache {
        store_probed(paths, &ib_ports, &mut notes);
    }

    Ok(Assessment {
        mode,
        assessed_at_ms: now,
        levels: mapping.levels().iter().map(|l| l.name.clone()).collect(),
        ib_ports,
        roce_ports,
        skipped,
        unselected: discovery.unselected,
        unmatched_devices: discovery.unmatched,
        notes,
    })
}

/// The cache's entries when the mode reads it; a cache that cannot be used
/// is said in a note and ignored.
fn cached_ports(paths: &Paths, mode: ProbeMode, notes: &mut Vec<String>) -> Vec<cache::CachedPort> {
    match mode {
        ProbeMode::Fresh => Vec::new(),
        ProbeMode::Cached => {
            let (entries, why) = cache::load(paths);
            if let Some(why) = why {
                notes.push(format!(
                    "fabric cache {} ignored: {why}",
                    paths.display(&paths.fabric_cache())
                ));
            }
            entries
        }
    }
}

/// An active InfiniBand port, to be checked.
struct IbCandidate {
    id: PortId,
    identity: PortIdentity,
    /// Its rate, as sysfs says it.
    rate: Option<String>,
    /// Its tables and when they were probed, when the cache serves it.
    from_cache: Option<(PortTables, u64)>,
}

/// The discovered ports by what the assessment does with them.
struct Sorted {
    ib: Vec<IbCandidate>,
    roce_ports: Vec<PortId>,
    skipped: Vec<SkippedPort>,
}

/// Sorts the ports: active InfiniBand ones are checked (from the cache when
/// an entry stands for them at `now`), active Ethernet ones are RoCE, the
/// rest are skipped (`listed` when a non-empty `devices:` selected them).
fn sort_ports(
    ports: Vec<SysfsPort>,
    listed: bool,
    cached: &[cache::CachedPort],
    now: u64,
    max_cache_age: Duration,
) -> Sorted {
    let mut ib = Vec::new();
    let mut roce_ports = Vec::new();
    let mut skipped = Vec::new();
    for p in ports {
        match (p.active, &p.link_layer, p.identity) {
            (true, LinkLayer::InfiniBand, Some(identity)) => {
                let hit = cached
                    .iter()
                    .find(|e| e.valid_for(&p.id, &identity, now, max_cache_age));
                let from_cache = hit.map(|e| (e.tables.clone(), e.probed_at_ms));
                ib.push(IbCandidate {
                    id: p.id,
                    identity,
                    rate: p.rate,
                    from_cache,
                });
            }
            (true, LinkLayer::Ethernet, _) => roce_ports.push(p.id),
            (active, layer, _) => skipped.push(SkippedPort {
                port: p.id,
                link_layer: layer.to_string(),
                state: p.state,
                phys_state: p.phys_state,
                active,
                listed,
            }),
        }
    }
    Sorted {
        ib,
        roce_ports,
        skipped,
    }
}

/// The run's deadline, or the probe's own bound when that is sooner.
fn probe_bound(deadline: &Deadline, probe_timeout: Duration) -> Deadline {
    if deadline.remaining() <= probe_timeout {
        *deadline
    } else {
        Deadline::after(probe_timeout)
    }
}

/// Writes the ports' tables to the cache; a failure is said in a note.
fn store_probed(paths: &Paths, ib_ports: &[IbPort], notes: &mut Vec<String>) {
    let entries = ib_ports
        .iter()
        .map(|p| cache::CachedPort {
            port: p.port.clone(),
            identity: p.identity.clone(),
            probed_at_ms: p.probed_at_ms,
            tables: p.tables.clone(),
        })
        .collect();
    if let Err(e) = cache::store(paths, entries) {
        notes.push(format!("fabric cache not written: {e}"));
    }
}

/// Reads only sysfs: which of `ports` are not ACTIVE now (for
/// verify-after-apply), one line each, e.g. `mlx5_0/1: state 1: DOWN, not 4:
/// ACTIVE`.
pub fn ports_not_active(paths: &Paths, ports: &[PortId]) -> Result<Vec<String>> {
    sysfs::not_active(paths, ports)
}

/// The selected ports as sysfs shows them (for `status`, `explain`).
pub fn discover(paths: &Paths, mapping: &Mapping) -> Result<sysfs::Discovery> {
    sysfs::discover(paths, &mapping.devices)
}
