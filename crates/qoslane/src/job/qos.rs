//! Which QoS a job runs under, and how we know.
//!
//! Slurm 26.05+ passes `SLURM_JOB_QOS` to the node Prolog/Epilog from the
//! signed credential. Before that, the Prolog asks the controller with
//! `scontrol show job -o ID` under the run's deadline; when that fails the job
//! gets the default level. The TaskProlog never looks here: its environment
//! is the user's.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::JobId;
use crate::deadline::Deadline;
use crate::exec;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QosSource {
    Env,
    Scontrol,
    Default,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobQos {
    pub qos: Option<String>,
    pub source: QosSource,
    /// Why the QoS could not be learnt, when it fell back to the default.
    pub note: Option<String>,
}

/// Contexts whose environment comes from slurmd, not from the user.
const TRUSTED_CONTEXTS: &[&str] = &["prolog_slurmd", "epilog_slurmd"];

pub fn resolve(
    context: Option<&str>,
    env_qos: Option<&str>,
    job: JobId,
    scontrol: &Path,
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
        };
    }
    let id = job.to_string();
    let fallback = |note: String| JobQos {
        qos: None,
        source: QosSource::Default,
        note: Some(note),
    };
    // At most half the run's time: the level must still be applied after a
    // slow controller (FACTS: seconds when slurmctld is busy).
    match exec::run(scontrol, &["show", "job", "-o", &id], &deadline.half()) {
        Err(e) => fallback(format!("scontrol: {e}")),
        Ok(out) => match parse_scontrol_qos(&String::from_utf8_lossy(&out.stdout)) {
            Ok(q) => JobQos {
                qos: Some(q),
                source: QosSource::Scontrol,
                note: None,
            },
            Err(why) => fallback(format!("scontrol show job {id}: {why}")),
        },
    }
}

/// Slurm object names: no spaces, no separators.
fn is_qos_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The `QOS=` field of `scontrol show job -o ID`.
///
/// Values of other fields may hold spaces, newlines and user text
/// (`JobName=`, `Comment=`, `Command=`, `WorkDir=`), so a user could write
/// ` QOS=x` into one, even on a line of its own. No line is therefore taken
/// to be a whole record: everything from the first line starting with
/// `JobId=` to the end is one text. When `QOS=` occurs more than once, only
/// occurrences at its fixed place — right after `Account=…` and right before
/// ` JobState=` — count, and they must all agree (a heterogeneous job prints
/// one record per component); anything else is ambiguous and the job gets the
/// default level, never a level it named itself. Sound because the real field
/// is always there and always at its place.
pub fn parse_scontrol_qos(output: &str) -> Result<String, String> {
    let start = std::iter::once(0)
        .chain(output.match_indices('\n').map(|(i, _)| i + 1))
        .find(|&i| output[i..].starts_with("JobId="))
        .ok_or("no `JobId=` line in the output")?;
    let text = &output[start..];
    let values: Vec<(usize, &str)> = field_starts(text, "QOS=")
        .map(|i| {
            let value = text[i + 4..]
                .split(|c: char| c.is_ascii_whitespace())
                .next();
            (i, value.unwrap_or(""))
        })
        .collect();
    let chosen: Vec<&str> = if values.len() == 1 {
        vec![values[0].1]
    } else {
        values
            .iter()
            .filter(|(i, v)| {
                let before = &text[..*i];
                let after = &text[i + 4 + v.len()..];
                after.starts_with(" JobState=")
                    && before
                        .trim_end()
                        .rsplit(|c: char| c.is_ascii_whitespace())
                        .next()
                        .is_some_and(|f| f.starts_with("Account=") && f.len() > "Account=".len())
            })
            .map(|(_, v)| *v)
            .collect()
    };
    let agreed = chosen.first().filter(|q| chosen.iter().all(|c| c == *q));
    match agreed {
        None if values.is_empty() => Err("no `QOS=` field".into()),
        Some(q) if *q == "(null)" => Err("QOS=(null): accounting is not enforcing QoS".into()),
        Some(q) if is_qos_name(q) => Ok((*q).to_owned()),
        Some(q) => Err(format!("`QOS={}` is not a QoS name", q.escape_debug())),
        None => Err(format!(
            "`QOS=` appears {} times and its place is ambiguous",
            values.len()
        )),
    }
}

/// Byte offsets where `KEY=` begins a field: at the start of the text or
/// after whitespace.
fn field_starts<'a>(line: &'a str, key: &'a str) -> impl Iterator<Item = usize> + 'a {
    line.match_indices(key)
        .map(|(i, _)| i)
        .filter(move |&i| i == 0 || line.as_bytes()[i - 1].is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `scontrol show job -o` on Slurm 22.05.8.
    const REAL: &str = "JobId=7 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=10000 Nice=0 Account=rigacct QOS=high JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-29T10:00:00 EligibleTime=2026-11-29T10:00:00 AccrueTime=2026-11-29T10:00:00 StartTime=2026-11-29T10:00:00 EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T10:00:00 Scheduler=Main Partition=debug AllocNode:Sid=node:1 ReqNodeList=(null) ExcNodeList=(null) NodeList=node BatchHost=node NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) WorkDir=/tmp StdErr=/tmp/slurm-7.out StdIn=/dev/null StdOut=/tmp/slurm-7.out Power=\n";

    #[test]
    fn reads_the_qos_of_a_real_line() {
        assert_eq!(parse_scontrol_qos(REAL).unwrap(), "high");
    }

    #[test]
    fn a_job_name_with_spaces_and_a_fake_qos_cannot_spoof() {
        let spoof = REAL.replace("JobName=wrap", "JobName=my QOS=mission-critical job");
        assert_eq!(parse_scontrol_qos(&spoof).unwrap(), "high");
        let spoof2 = REAL.replace(
            "WorkDir=/tmp",
            "WorkDir=/tmp/a QOS=mission-critical JobState=x",
        );
        assert_eq!(parse_scontrol_qos(&spoof2).unwrap(), "high");
        let clever = REAL.replace(
            "JobName=wrap",
            "JobName=x Account=a QOS=mission-critical JobState=R",
        );
        assert!(
            parse_scontrol_qos(&clever).is_err(),
            "ambiguous output must not pick a level"
        );
    }

    /// Regression (issue 8, reliability review): a job name holding a
    /// newline made the first physical line a complete-looking record whose
    /// only `QOS=` was the user's (`sbatch -J $'x Account=a QOS=… JobState=R\n…'`).
    #[test]
    fn a_job_name_with_a_newline_cannot_spoof() {
        let spoof = REAL.replace(
            "JobName=wrap",
            "JobName=x Account=a QOS=mission-critical JobState=R\nrest",
        );
        assert!(parse_scontrol_qos(&spoof).is_err(), "must not pick a level");
        let spoof = REAL.replace("JobName=wrap", "JobName=x\nQOS=mission-critical");
        assert_eq!(parse_scontrol_qos(&spoof).unwrap(), "high");
        let same = REAL.replace(
            "JobName=wrap",
            "JobName=x Account=a QOS=high JobState=R\nrest",
        );
        assert_eq!(parse_scontrol_qos(&same).unwrap(), "high");
    }

    #[test]
    fn a_heterogeneous_job_agrees_or_falls_back() {
        let two = format!("{}{}", REAL, REAL.replace("JobId=7", "JobId=8"));
        assert_eq!(parse_scontrol_qos(&two).unwrap(), "high");
        let differ = format!(
            "{}{}",
            REAL,
            REAL.replace("JobId=7", "JobId=8")
                .replace("QOS=high", "QOS=low")
        );
        assert!(parse_scontrol_qos(&differ).is_err());
    }

    #[test]
    fn null_missing_and_garbage() {
        assert!(
            parse_scontrol_qos(&REAL.replace("QOS=high", "QOS=(null)"))
                .unwrap_err()
                .contains("(null)")
        );
        assert!(parse_scontrol_qos(&REAL.replace("QOS=high", "QOSX=high")).is_err());
        assert!(parse_scontrol_qos("slurm_load_jobs error: Invalid job id specified\n").is_err());
        assert!(parse_scontrol_qos("").is_err());
    }
}
