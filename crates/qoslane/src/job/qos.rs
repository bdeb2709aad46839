//! Which QoS a job runs under, and how we know — decided so that no text a
//! user chooses can pick the answer or which source is asked.
//!
//! 1. `SLURM_JOB_QOS` in a `prolog_slurmd`/`epilog_slurmd` context: Slurm
//!    26.05+ passes it from the signed credential (zero controller RPCs).
//! 2. Otherwise `squeue -h -j ID -o "%A %q" --local` (`QOSLANE_SQUEUE`,
//!    absolute path, half the run's deadline): it prints each component's
//!    own job id and its QoS, nothing else, so the job name, comment, work
//!    dir or submit line — user text that `scontrol show job` mixes into its
//!    output — never reach the parser; and only the line of this job's own id
//!    counts (`-j` of a heterogeneous job's leader lists every component,
//!    each with its own QoS: seen on 22.05). `--local`: the job runs on this cluster, so squeue need
//!    not ask for the federation first (2 RPCs instead of 3, counted with
//!    sdiag on 24.11: job info, partition info; bench/ctld_cost.sh).
//! 3. Otherwise the default level, with a note saying why.
//!
//! No Slurm version is checked: the trust rests on the context, which
//! slurmd sets, and on the Prolog/Epilog environment, which slurmd builds
//! from scratch (none of the user's variables reach it: verified on 22.05,
//! 24.11 and 26.05 by tests/e2e/slurm.sh's spoof cases). Before 26.05 that
//! environment has no `SLURM_JOB_QOS` (`qos_source: squeue`); from 26.05 it
//! has the credential's (`qos_source: env`).
//!
//! The TaskProlog never looks here: its environment is the user's.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::JobId;
use crate::deadline::Deadline;
use crate::exec;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QosSource {
    Env,
    Squeue,
    /// Records and audit lines written before Stage 2 (read, never made).
    Scontrol,
    Default,
}

impl QosSource {
    /// As the audit log spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Env => "env",
            Self::Squeue => "squeue",
            Self::Scontrol => "scontrol",
            Self::Default => "default",
        }
    }
}

impl std::fmt::Display for QosSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run's note on a QoS that could not be learnt begins (the audit
/// line's note, the job's notice).
pub const UNKNOWN_NOTE: &str = "QoS unknown, default level used: ";

/// Why a job's QoS could not be learnt: the `reason` label of
/// `qoslane_qos_fallbacks_total`, decided here once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// squeue did not answer within half the run's deadline (a busy
    /// controller: a job storm).
    SqueueSlow,
    /// squeue could not be run or failed.
    SqueueFailed,
    /// squeue answered, but not with one QoS (unknown job, `(null)`,
    /// components that disagree).
    SqueueAnswer,
}

impl Fallback {
    pub const ALL: &[Self] = &[Self::SqueueSlow, Self::SqueueFailed, Self::SqueueAnswer];

    /// As the metrics' `reason` label spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SqueueSlow => "squeue_slow",
            Self::SqueueFailed => "squeue_failed",
            Self::SqueueAnswer => "squeue_answer",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobQos {
    pub qos: Option<String>,
    pub source: QosSource,
    /// Why the QoS could not be learnt, when it fell back to the default.
    pub note: Option<String>,
    /// The same, as a reason the metrics count.
    pub fallback: Option<Fallback>,
}

/// Contexts whose environment comes from slurmd, not from the user.
const TRUSTED_CONTEXTS: &[&str] = &["prolog_slurmd", "epilog_slurmd"];

pub fn resolve(
    context: Option<&str>,
    env_qos: Option<&str>,
    job: JobId,
    squeue: &Path,
    deadline: &Deadline,
) -> JobQos {
    if let (Some(ctx), Some(q)) = (context, env_qos)
        && TRUSTED_CONTEXTS.contains(&ctx)
        && is_qos_name(q)
    {
        return JobQos {
            qos: Some(q.to_owned()),
            source: QosSource::Env,
            note: None,
            fallback: None,
        };
    }
    let id = job.to_string();
    let fallback = |why: Fallback, note: String| JobQos {
        qos: None,
        source: QosSource::Default,
        note: Some(note),
        fallback: Some(why),
    };
    // At most half the run's time: the level must still be applied after a
    // slow controller (seconds when slurmctld is busy: docs/PERFORMANCE.md).
    match exec::run(
        squeue,
        &["-h", "-j", &id, "-o", "%A %q", "--local"],
        &deadline.half(),
    ) {
        Err(e) => fallback(
            if matches!(e, crate::error::Error::Deadline { .. }) {
                Fallback::SqueueSlow
            } else {
                Fallback::SqueueFailed
            },
            format!("squeue: {e}"),
        ),
        Ok(out) => match parse_squeue_qos(&id, &String::from_utf8_lossy(&out.stdout)) {
            Ok(q) => JobQos {
                qos: Some(q),
                source: QosSource::Squeue,
                note: None,
                fallback: None,
            },
            Err(why) => fallback(
                Fallback::SqueueAnswer,
                format!("squeue -j {id} -o '%A %q': {why}"),
            ),
        },
    }
}

/// The output of `squeue -h -j ID -o "%A %q"`: `JOBID QOS` per job
/// component. Only the lines of job `id` itself count: a heterogeneous
/// job's leader lists every component, each its own job id and QoS (a
/// component's Prolog runs with its own id). Anything else — no line of
/// `id`, its lines disagreeing, a QoS that is not a QoS name, a line that is
/// not `JOBID QOS` — is an error, and the job gets the default level.
pub fn parse_squeue_qos(id: &str, output: &str) -> Result<String, String> {
    let mut own = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (job, qos) = line
            .split_once(' ')
            .ok_or_else(|| format!("`{}` is not `JOBID QOS`", line.escape_debug()))?;
        if job == id {
            own.push(qos.trim());
        }
    }
    let mut lines = own.into_iter();
    let first = lines
        .next()
        .ok_or("no output for the job (the job is not known)")?;
    if let Some(other) = lines.find(|l| *l != first) {
        return Err(format!(
            "components disagree (`{}` and `{}`)",
            first.escape_debug(),
            other.escape_debug()
        ));
    }
    match first {
        "(null)" => Err("QoS (null): accounting is not enforcing QoS".into()),
        q if is_qos_name(q) => Ok(q.to_owned()),
        q => Err(format!("`{}` is not a QoS name", q.escape_debug())),
    }
}

/// Slurm object names: no spaces, no separators.
fn is_qos_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One spelling: what `status` and `log` print is what the audit and
    /// the job record hold.
    #[test]
    fn display_is_the_audit_spelling() {
        for s in [
            QosSource::Env,
            QosSource::Squeue,
            QosSource::Scontrol,
            QosSource::Default,
        ] {
            assert_eq!(
                serde_json::to_value(s).unwrap(),
                serde_json::Value::String(s.to_string())
            );
        }
    }

    #[test]
    fn squeue_prints_the_qos_alone() {
        assert_eq!(parse_squeue_qos("7", "7 high\n").unwrap(), "high");
        assert_eq!(
            parse_squeue_qos("7", "7 high\n7 high\n").unwrap(),
            "high",
            "lines of the job agree"
        );
        assert!(
            parse_squeue_qos("7", "7 high\n7 low\n")
                .unwrap_err()
                .contains("disagree")
        );
        assert_eq!(
            parse_squeue_qos("7", "7 high\n8 low\n").unwrap(),
            "high",
            "a heterogeneous job's other component, its own id"
        );
        assert!(parse_squeue_qos("7", "").is_err());
        assert!(
            parse_squeue_qos("7", "7 (null)\n")
                .unwrap_err()
                .contains("accounting")
        );
        assert!(
            parse_squeue_qos("7", "7 a b\n")
                .unwrap_err()
                .contains("not a QoS name")
        );
        assert!(
            parse_squeue_qos("7", "slurm_load_jobs error: Invalid job id specified\n").is_err()
        );
    }

    #[test]
    fn env_only_in_slurmd_contexts() {
        let d = Deadline::after(std::time::Duration::from_millis(10));
        let job = JobId::parse("1").unwrap();
        let none = Path::new("/nonexistent/squeue");
        let q = resolve(Some("prolog_slurmd"), Some("high"), job, none, &d);
        assert_eq!((q.qos.as_deref(), q.source), (Some("high"), QosSource::Env));
        let q = resolve(Some("prolog_task"), Some("high"), job, none, &d);
        assert_eq!(q.source, QosSource::Default, "the user's environment");
        let q = resolve(None, Some("high"), job, none, &d);
        assert_eq!(q.source, QosSource::Default);
    }
}
