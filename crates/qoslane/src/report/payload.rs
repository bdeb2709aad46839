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

    /// The node's ports' counters as a hook read them.
    pub fn counters(&self) -> &[PortReading] {
        match self {
            Self::Prolog(p) => &p.counters,
            Self::Epilog(e) => &e.counters,
            _ => &[],
        }
    }

    /// When [`Self::counters`] were read: a hook may record its run after
    /// another hook that read later.
    pub fn counters_read_at_ms(&self) -> Option<u64> {
        match self {
            Self::Prolog(p) => p.counters_read_at_ms,
            Self::Epilog(e) => e.counters_read_at_ms,
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
