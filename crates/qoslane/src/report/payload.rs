//! What a run of one event reports beyond what every run does: one payload
//! per event ([`Payload`]), so a field exists only where its event has it.
//! The audit line and the metrics take what they need from it
//! (`audit::Entry::of`, `metrics::Run::of`).

use crate::fabric::pma::{CounterEvidence, PortReading, PortWait};
use crate::fabric::policy::{Alignment, HopCount};

use super::event::Event;
use super::health::{CheckStatus, HealthCheck};

/// One payload per event.
#[derive(Clone, Debug)]
pub enum Payload {
    Prolog(PrologRun),
    Epilog(EpilogRun),
    Sync(FabricSeen),
    Recover,
    Health(HealthRun),
    /// A new mapping became last-known-good, or one was rejected.
    MappingChanged,
}

impl Payload {
    /// The payload a run of `event` starts with: nothing seen yet.
    pub fn of(event: Event) -> Self {
        match event {
            Event::Prolog => Self::Prolog(PrologRun::default()),
            Event::Epilog => Self::Epilog(EpilogRun::default()),
            Event::Sync => Self::Sync(FabricSeen::default()),
            Event::Recover => Self::Recover,
            Event::Health => Self::Health(HealthRun::default()),
            Event::MappingChanged => Self::MappingChanged,
        }
    }

    pub fn event(&self) -> Event {
        match self {
            Self::Prolog(_) => Event::Prolog,
            Self::Epilog(_) => Event::Epilog,
            Self::Sync(_) => Event::Sync,
            Self::Recover => Event::Recover,
            Self::Health(_) => Event::Health,
            Self::MappingChanged => Event::MappingChanged,
        }
    }

    /// What the run saw of the fabric, for the events that judge it.
    pub fn fabric(&self) -> Option<&FabricSeen> {
        match self {
            Self::Prolog(p) => Some(&p.fabric),
            Self::Sync(f) => Some(f),
            Self::Health(h) => Some(&h.fabric),
            Self::Epilog(_) | Self::Recover | Self::MappingChanged => None,
        }
    }

    pub fn fabric_mut(&mut self) -> Option<&mut FabricSeen> {
        match self {
            Self::Prolog(p) => Some(&mut p.fabric),
            Self::Sync(f) => Some(f),
            Self::Health(h) => Some(&mut h.fabric),
            Self::Epilog(_) | Self::Recover | Self::MappingChanged => None,
        }
    }

    /// The node's ports' counters as a hook or a health run read them.
    pub fn counters(&self) -> &[PortReading] {
        match self {
            Self::Prolog(p) => &p.counters,
            Self::Epilog(e) => &e.counters,
            Self::Health(h) => h.counters.as_ref().map_or(&[], |c| &c.readings),
            _ => &[],
        }
    }

    /// When [`Self::counters`] were read: a run may record after another
    /// that read later.
    pub fn counters_read_at_ms(&self) -> Option<u64> {
        match self {
            Self::Prolog(p) => p.counters_read_at_ms,
            Self::Epilog(e) => e.counters_read_at_ms,
            Self::Health(h) => h.counters.as_ref().map(|c| c.at_ms),
            _ => None,
        }
    }
}

/// The fabric as a run that judged it saw it: what the gauges show.
#[derive(Clone, Debug, Default)]
pub struct FabricSeen {
    /// For the `qoslane_fabric_aligned` gauge, when the fabric was probed.
    pub alignment: Option<Vec<Alignment>>,
    /// For the `qoslane_first_hop_ports` gauge, when the first hop was read.
    pub first_hop: Option<Vec<HopCount>>,
}

/// A Prolog's: the fabric for its level, its snapshot of the node's
/// ports' counters (the node's wait metric), and why its job's QoS could
/// not be learnt when the default level was used (the job's notice says
/// it).
#[derive(Clone, Debug, Default)]
pub struct PrologRun {
    pub fabric: FabricSeen,
    pub counters: Vec<PortReading>,
    /// When `counters` were read (ms since the epoch).
    pub counters_read_at_ms: Option<u64>,
    pub qos_unknown: Option<String>,
}

/// An Epilog's: the node's ports' counters read again, and what they
/// showed while the job ran.
#[derive(Clone, Debug, Default)]
pub struct EpilogRun {
    pub counters: Vec<PortReading>,
    /// When `counters` were read (ms since the epoch).
    pub counters_read_at_ms: Option<u64>,
    pub evidence: Option<CounterEvidence>,
}

/// A health run's: its checks (in the audit line as notes), the fabric,
/// the node lock as it found it and the first hop's transmit wait.
#[derive(Clone, Debug, Default)]
pub struct HealthRun {
    pub fabric: FabricSeen,
    pub checks: Vec<HealthCheck>,
    /// How long another run's transaction had held the node lock when
    /// health looked (0: free; `None`: not looked at, or held outside a
    /// transaction).
    pub lock_held_seconds: Option<u64>,
    /// The transmit wait of the first hop's port toward this node (the
    /// node's wait metric too).
    pub first_hop_wait: Vec<PortWait>,
    /// The jobs whose level this run released (Slurm no longer has them on
    /// the node): the audit line's `released_jobs`, which `log --job` reads.
    pub released_jobs: Vec<crate::job::JobId>,
    /// The node's own ports' counters as this run read them (every run:
    /// the live wait, a lone job's off-level bytes meanwhile).
    pub counters: Option<LiveCounters>,
}

/// What a health run read of the node's own ports' counters.
#[derive(Clone, Debug, Default)]
pub struct LiveCounters {
    pub readings: Vec<PortReading>,
    /// When they were read (ms since the epoch).
    pub at_ms: u64,
    /// The job alone on the node when read, if one was.
    pub alone: Option<AloneJob>,
    /// The jobs with a counter snapshot when read (the metrics forget the
    /// others' stretches).
    pub jobs: Vec<String>,
}

/// A job alone on the node: what its bytes off its level are counted
/// against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AloneJob {
    pub job: crate::job::JobId,
    pub level: String,
    pub sl: u8,
    /// The SLs of the node's own traffic (not the job's to answer for).
    pub sm_traffic_sls: Vec<u8>,
}

impl HealthRun {
    /// Problems found that did not stop the run.
    pub fn warnings(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.status == CheckStatus::Warn)
            .count()
    }
}
