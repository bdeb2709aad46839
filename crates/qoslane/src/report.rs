//! What a run did, as one value. Every command that changes or judges the
//! node returns `Result<Report, Failure>`; [`crate::run::session`]
//! turns it, in one place, into the audit line, the metrics run and the
//! exit class. Commands never write the audit or the metrics themselves.

pub mod event;
pub mod health;
pub mod payload;

use serde::Serialize;

use crate::error::Error;
use crate::exit_code::ExitClass;
use crate::fabric::assessment::FabricVerdict;
use crate::fabric::policy::Judgement;
use crate::job::JobId;
use crate::job::qos::{Fallback, QosSource};
use crate::mapping::OnFailure;
use crate::state::Change;
pub use event::Event;
pub use payload::Payload;

/// How a run ended, as the audit log and the metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The level was granted and its settings are in place.
    Applied,
    /// Nothing needed to change (also: an Epilog with nothing to undo).
    Unchanged,
    /// Something failed after changes began; the before-values are back.
    RolledBack,
    /// Something failed before any change; the node is untouched.
    Failed,
    /// An Epilog (or recover) put settings back to what they were before.
    Reverted,
}

impl Outcome {
    pub const ALL: &[Outcome] = &[
        Self::Applied,
        Self::Unchanged,
        Self::RolledBack,
        Self::Failed,
        Self::Reverted,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Unchanged => "unchanged",
            Self::RolledBack => "rolled_back",
            Self::Failed => "failed",
            Self::Reverted => "reverted",
        }
    }
    pub fn is_success(self) -> bool {
        matches!(self, Self::Applied | Self::Unchanged | Self::Reverted)
    }
}

/// The job a run was about, and the level it got.
#[derive(Clone, Debug, Default)]
pub struct JobFacts {
    pub job_id: Option<JobId>,
    pub user: Option<String>,
    pub qos: Option<String>,
    pub qos_source: Option<QosSource>,
    /// Why the QoS could not be learnt, when it could not.
    pub qos_fallback: Option<Fallback>,
    pub level: Option<String>,
    pub service_level: Option<u8>,
    pub virtual_lane: Option<u8>,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Report {
    pub outcome: Outcome,
    pub job: JobFacts,
    pub changes: Vec<Change>,
    pub fabric: FabricVerdict,
    /// What the admin should know that is not an error.
    pub notes: Vec<String>,
    pub mapping_sha256: Option<String>,
    /// Node settings were touched and restored.
    pub rolled_back: bool,
    /// Settings whose file vanished (driver reload, HCA reset): nothing was
    /// applied or restored there.
    pub settings_gone: Vec<String>,
    /// The line a command run by hand prints when it succeeds
    /// ([`Report::summary_line`]); `None` for the hooks and views.
    pub said: Option<String>,
    /// What only a run of its event has; the event is the payload's.
    pub payload: Payload,
}

impl Report {
    /// The one line a command run by hand (`sync`, `recover`) prints on
    /// success: `EVENT: OUTCOME: what changed (or nothing); what`, `what`
    /// being what it checked, in its words.
    pub fn summary_line(&self, what: &str) -> String {
        let verb = if self.outcome == Outcome::Reverted {
            "restored"
        } else {
            "changed"
        };
        let did = match self.changes.len() {
            0 => "nothing changed".to_owned(),
            1 => format!("1 setting {verb}"),
            n => format!("{n} settings {verb}"),
        };
        format!("{}: {}: {did}; {what}", self.event(), self.outcome.as_str())
    }

    pub fn new(event: Event) -> Self {
        Self {
            outcome: Outcome::Unchanged,
            job: JobFacts::default(),
            changes: Vec::new(),
            fabric: FabricVerdict::NotChecked,
            notes: Vec::new(),
            mapping_sha256: None,
            rolled_back: false,
            settings_gone: Vec::new(),
            said: None,
            payload: Payload::of(event),
        }
    }

    /// What the run was.
    pub fn event(&self) -> Event {
        self.payload.event()
    }

    /// Whether the run succeeded: its outcome is a success and it found
    /// nothing to warn about. A health run with warnings (even "the fabric
    /// check could not run") is not a success: the metrics' last-success
    /// time does not move for it.
    pub fn succeeded(&self) -> bool {
        let warned = matches!(&self.payload, Payload::Health(h) if h.warnings() > 0);
        self.outcome.is_success() && !warned
    }

    /// Ends as `outcome`.
    pub fn with(mut self, outcome: Outcome) -> Self {
        self.outcome = outcome;
        self
    }

    /// Fails with `error`; the exit follows `exit`.
    pub fn fail(self, error: Error, exit: Exit) -> Box<Failure> {
        let outcome = if self.rolled_back {
            Outcome::RolledBack
        } else {
            Outcome::Failed
        };
        Box::new(Failure {
            report: self.with(outcome),
            error,
            exit,
        })
    }

    /// Settings found gone, into the report: noted for the admin.
    pub fn gone(&mut self, gone: Vec<String>) {
        for g in &gone {
            self.notes.push(format!(
                "setting {g} is gone (its file vanished: a driver reload or HCA reset?); \
                 nothing to apply or restore there"
            ));
        }
        self.settings_gone.extend(gone);
    }

    /// The fabric judgement's parts, into this report (what the gauges
    /// show of it, for the events that judge the fabric).
    pub fn take_fabric(&mut self, j: &mut Judgement) {
        self.fabric = std::mem::take(&mut j.verdict);
        if let Some(seen) = self.payload.fabric_mut() {
            seen.alignment = j.alignment.take();
            seen.first_hop = j.first_hop.take();
        }
        self.notes.append(&mut j.notes);
    }
}

/// What a command returns: what it did, or why it failed and what it did
/// anyway (boxed: a report is large, the happy path should not carry it).
pub type RunResult = Result<Report, Box<Failure>>;

/// A run that failed: what it did anyway, why, and how it exits.
#[derive(Debug)]
pub struct Failure {
    pub report: Report,
    pub error: Error,
    pub exit: Exit,
}

/// What decides a failed run's exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// The error's kind (exit_code.rs).
    ByError,
    /// A hook's: the level's `on_failure` (`continue` exits 0: the job runs
    /// on the baseline; `fail_job`: a Prolog that left the node consistent
    /// refuses the job — exit 100, hookrun requeues and holds it — else
    /// exit 1, the hook failed and the node drains).
    ByPolicy(OnFailure),
}

impl Failure {
    pub fn exit_class(&self) -> ExitClass {
        match self.exit {
            Exit::ByError => self.error.exit_class(),
            Exit::ByPolicy(OnFailure::Continue) => ExitClass::Ok,
            Exit::ByPolicy(OnFailure::FailJob)
                if self.report.event() == Event::Prolog && self.error.leaves_node_consistent() =>
            {
                ExitClass::Refused
            }
            Exit::ByPolicy(OnFailure::FailJob) => ExitClass::Failed,
        }
    }
}
