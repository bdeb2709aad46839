//! The fabric policy's gather step and the commands' entry points: what to
//! read for a scope (the options of the assessment: how old a cached probe
//! may be, whether the first hop is read, whether the cache is written),
//! the assessment read with a [`Reader`], then the pure judgement
//! (`judge/policy.rs`' [`judge_gathered`]). `fabric::policy` re-exports
//! both halves under the names the commands call.

use crate::deadline::Deadline;
use crate::error::Error;
use crate::fabric::counters::pma::PortWait;
use crate::fabric::first_hop::share::Scheduled;
use crate::fabric::gather::{AssessOptions, assess_with, ports_not_active};
use crate::fabric::judge::assessment::ProbeMode;
use crate::fabric::judge::policy::{Gathered, Judgement, Scope, judge_gathered};
use crate::fabric::read::own_counters::Opened;
use crate::fabric::read::reader::Reader;
use crate::fabric::read::smpquery::Smpquery;
use crate::mapping::{FabricCheck, Mapping, OnFailure};
use crate::paths::Paths;

/// What a judgement reads beyond its mode, and whether it writes nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags {
    /// The first hop too, though the mode is `Cached` (a Prolog's).
    pub first_hop: bool,
    /// Nothing written, not even the cache.
    pub dry_run: bool,
}

/// Assesses the fabric per `mapping.fabric_check` and judges `scope`.
pub fn judge(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
    scope: Scope<'_>,
) -> Judgement {
    let reader = Smpquery::new(&paths.smpquery);
    let gathered = gather(
        paths,
        mapping,
        deadline,
        mode,
        scope,
        &reader,
        Flags::default(),
    );
    judge_gathered(mapping, scope, gathered)
}

/// [`judge`] for `health`: every level, the own ports probed fresh, the
/// first hop shared with the other nodes of its switch as
/// `first_hop/share.rs` says (its own rows every run, the rest once per
/// period); what it read in full is kept for the next run. Beside it, the
/// transmit wait of each first hop's port toward this node, where read,
/// and the node's ports it opened in process, still open (for the run's
/// counters: each port opened once per run).
pub fn judge_health(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
) -> (Judgement, Vec<PortWait>, Opened) {
    let smp = Smpquery::new(&paths.smpquery);
    let reader = Scheduled::new(&smp, paths);
    let gathered = gather(
        paths,
        mapping,
        deadline,
        ProbeMode::Fresh,
        Scope::Every,
        &reader,
        Flags::default(),
    );
    let j = judge_gathered(mapping, Scope::Every, gathered);
    let waits = reader.take_waits();
    let opened = reader.take_opened();
    if let Err(e) = reader.store(paths) {
        crate::log::warn(&format!(
            "first-hop readings not kept (the next health reads in full): {e}"
        ));
    }
    (j, waits, opened)
}

/// [`judge`] for a dry run (`explain --fabric`): a fresh probe and the
/// first hop, the same rules, and nothing written (not even the cache).
pub fn judge_dry(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    scope: Scope<'_>,
) -> Judgement {
    let flags = Flags {
        first_hop: true,
        dry_run: true,
    };
    let reader = Smpquery::new(&paths.smpquery);
    let gathered = gather(
        paths,
        mapping,
        deadline,
        ProbeMode::Fresh,
        scope,
        &reader,
        flags,
    );
    judge_gathered(mapping, scope, gathered)
}

/// A Prolog's judgement of its level: the cached probe of its own ports,
/// and the first hop too when `first_hop` (a `fail_job` level under
/// `enforce` with no fresh first-hop reading recorded).
pub fn judge_level(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    level: &str,
    first_hop: bool,
) -> Judgement {
    let flags = Flags {
        first_hop,
        dry_run: false,
    };
    let reader = Smpquery::new(&paths.smpquery);
    let scope = Scope::Level(level);
    let gathered = gather(
        paths,
        mapping,
        deadline,
        ProbeMode::Cached,
        scope,
        &reader,
        flags,
    );
    judge_gathered(mapping, scope, gathered)
}

/// What the policy needs read for `scope`, read with `reader`: nothing
/// under `fabric_check: off`, else the assessment (or why it could not
/// run).
pub fn gather(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
    scope: Scope<'_>,
    reader: &dyn Reader,
    flags: Flags,
) -> Gathered {
    if mapping.fabric_check == FabricCheck::Off {
        return Gathered::Nothing;
    }
    let opts = options(mapping, mode, scope, flags);
    match assess_with(paths, mapping, deadline, mode, reader, &opts) {
        Ok(a) => Gathered::Assessment(a),
        Err(error) => Gathered::Failed {
            error,
            at_ms: crate::time::now_ms(),
        },
    }
}

/// The assessment's options for a scope.
fn options(mapping: &Mapping, mode: ProbeMode, scope: Scope<'_>, flags: Flags) -> AssessOptions {
    // A `fail_job` level is granted only on a probe younger than the
    // mapping's bound (default 15 s): the jobs that care most never rely on
    // an old cache entry.
    let mut opts = AssessOptions::default();
    if let Scope::Level(name) = scope
        && mapping
            .level(name)
            .is_some_and(|l| mapping.on_failure_for(l) == OnFailure::FailJob)
    {
        opts.max_cache_age = opts.max_cache_age.min(mapping.fail_job_max_probe_age);
    }
    // `sync` and `health` (a fresh assessment) also prove the first hop.
    opts.first_hop = mode == ProbeMode::Fresh || flags.first_hop;
    opts.store_cache = !flags.dry_run;
    opts
}

impl Judgement {
    /// After applying settings: the ports that were ACTIVE still are (a
    /// setting must never take a link down). Reads sysfs.
    pub fn ports_still_active(&self, paths: &Paths) -> crate::error::Result<()> {
        if self.active_ports.is_empty() {
            return Ok(());
        }
        let down = ports_not_active(paths, &self.active_ports)?;
        if down.is_empty() {
            Ok(())
        } else {
            Err(Error::Fabric(format!(
                "port(s) no longer ACTIVE after applying settings: {}",
                down.join(", ")
            )))
        }
    }
}
