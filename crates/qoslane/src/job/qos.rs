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
    match exec::run(scontrol, &["show", "job", "-o", &id], deadline) {
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

/// The `QOS=` field of one `scontrol show job -o` line.
///
/// Values of other fields may hold spaces and user text (`JobName=`,
/// `Comment=`, `Command=`, `WorkDir=`), so a user could write ` QOS=x` into
/// one. When `QOS=` occurs more than once, only the occurrence at its fixed
/// place — right after `Account=…` and right before `JobState=` — is taken,
/// and it must be the only one there; anything else is ambiguous and the job
/// gets the default level, never a level it named itself.
pub fn parse_scontrol_qos(output: &str) -> Result<String, String> {
    let line = output
        .lines()
        .find(|l| l.starts_with("JobId="))
        .ok_or("no `JobId=` line in the output")?;
    let values: Vec<(usize, &str)> = field_starts(line, "QOS=")
        .map(|i| (i, line[i + 4..].split(' ').next().unwrap_or("")))
        .collect();
    let chosen: Vec<&str> =
        if values.len() == 1 {
            vec![values[0].1]
        } else {
            values
                .iter()
                .filter(|(i, v)| {
                    let before = &line[..*i];
                    let after = &line[i + 4 + v.len()..];
                    after.starts_with(" JobState=")
                        && before.trim_end().rsplit(' ').next().is_some_and(|f| {
                            f.starts_with("Account=") && f.len() > "Account=".len()
                        })
                })
                .map(|(_, v)| *v)
                .collect()
        };
    match chosen.as_slice() {
        [] if values.is_empty() => Err("no `QOS=` field".into()),
        [q] if *q == "(null)" => Err("QOS=(null): accounting is not enforcing QoS".into()),
        [q] if is_qos_name(q) => Ok((*q).to_owned()),
        [q] => Err(format!("`QOS={}` is not a QoS name", q.escape_debug())),
        _ => Err(format!(
            "`QOS=` appears {} times and its place is ambiguous",
            values.len()
        )),
    }
}

/// Byte offsets where ` KEY=` (or `KEY=` at the start) begins.
fn field_starts<'a>(line: &'a str, key: &'a str) -> impl Iterator<Item = usize> + 'a {
    line.match_indices(key)
        .map(|(i, _)| i)
        .filter(move |&i| i == 0 || line.as_bytes()[i - 1] == b' ')
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
