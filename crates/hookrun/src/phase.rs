//! The four Slurm hook points hookrun serves, and what differs between them.

use std::fmt;

/// A hook point: which directory runs, and how failures are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Phase {
    /// Slurm `Prolog=` (`SLURM_SCRIPT_CONTEXT=prolog_slurmd`), runs `prolog.d/`.
    Prolog,
    /// Slurm `Epilog=` (`SLURM_SCRIPT_CONTEXT=epilog_slurmd`), runs `epilog.d/`.
    Epilog,
    /// Slurm `TaskProlog=` (`SLURM_SCRIPT_CONTEXT=prolog_task`), runs `task-prolog.d/`.
    TaskProlog,
    /// Slurm `HealthCheckProgram=` (no context variable), runs `health.d/`.
    Health,
}

impl Phase {
    /// Every phase, in the order `hookrun list` shows them.
    pub const ALL: [Phase; 4] = [
        Phase::Prolog,
        Phase::Epilog,
        Phase::TaskProlog,
        Phase::Health,
    ];

    /// The name used in logs, metrics labels and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prolog => "prolog",
            Phase::Epilog => "epilog",
            Phase::TaskProlog => "task-prolog",
            Phase::Health => "health",
        }
    }

    /// The hook directory's name under the hook base directory.
    pub fn dir_name(self) -> &'static str {
        match self {
            Phase::Prolog => "prolog.d",
            Phase::Epilog => "epilog.d",
            Phase::TaskProlog => "task-prolog.d",
            Phase::Health => "health.d",
        }
    }

    /// Whether the first failed required hook stops the run.
    ///
    /// Set-up phases stop: the job will not run on this node, so later set-up is
    /// wasted and may act on a half-prepared node. Clean-up and health checks run
    /// every hook: skipping clean-up leaves the node dirty for the next job, and a
    /// health run should report everything it can.
    pub fn stops_at_required_failure(self) -> bool {
        match self {
            Phase::Prolog | Phase::TaskProlog => true,
            Phase::Epilog | Phase::Health => false,
        }
    }

    /// Maps `SLURM_SCRIPT_CONTEXT` to a phase; `None` for contexts hookrun does
    /// not serve (`prolog_slurmctld`, `epilog_task`, …).
    pub fn from_script_context(context: &str) -> Option<Phase> {
        match context {
            "prolog_slurmd" => Some(Phase::Prolog),
            "epilog_slurmd" => Some(Phase::Epilog),
            "prolog_task" => Some(Phase::TaskProlog),
            _ => None,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_contexts_map_to_phases() {
        assert_eq!(
            Phase::from_script_context("prolog_slurmd"),
            Some(Phase::Prolog)
        );
        assert_eq!(
            Phase::from_script_context("epilog_slurmd"),
            Some(Phase::Epilog)
        );
        assert_eq!(
            Phase::from_script_context("prolog_task"),
            Some(Phase::TaskProlog)
        );
        assert_eq!(Phase::from_script_context("epilog_task"), None);
        assert_eq!(Phase::from_script_context("prolog_slurmctld"), None);
    }

    #[test]
    fn clap_names_match_log_names() {
        use clap::ValueEnum;
        for phase in Phase::ALL {
            let value = phase.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(value.as_deref(), Some(phase.name()));
        }
    }
}
