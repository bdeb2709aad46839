//! `qoslane task-prolog`: runs as the job user, once per task. Prints the
//! `export` lines the Prolog recorded for the job — or, when this node
//! granted no level, `unset` lines for the same variables — and the
//! Prolog's notice to the job as a `print` line, if it left one (a level not
//! granted, a QoS that could not be learnt), and nothing else on stdout; trusts nothing in its environment but the job id; never fails
//! the task.

use std::io::Write;

use crate::exit_code::ExitClass;
use crate::job::JobId;
use crate::log;
use crate::paths::Paths;
use crate::state::{self, JobRecord};

/// The variables the TaskProlog may set, whatever a record says.
const ALLOWED: &[&str] = &[
    "UCX_IB_SL",
    "NCCL_IB_SL",
    "OMPI_MCA_btl_openib_ib_service_level",
    "MV2_DEFAULT_SERVICE_LEVEL",
    "QOSLANE_LEVEL",
    "UCX_IB_TRAFFIC_CLASS",
    "NCCL_IB_TC",
];

/// Always [`ExitClass::Ok`]: a non-zero TaskProlog fails the task.
pub fn run(paths: &Paths) -> ExitClass {
    let job = match JobId::from_env() {
        Ok(j) => j,
        Err(e) => {
            log::warn(&format!("task-prolog: {e}"));
            return ExitClass::Ok;
        }
    };
    let record = match state::read_record_as_user(paths, job) {
        Ok(Some(r)) => r,
        Ok(None) => {
            // Baseline: no level granted on this node, so none of our
            // variables: a task here must not keep an SL it inherited (srun
            // passes the batch step's environment, exported by another
            // node's TaskProlog, to every node of the job). Then say why, if
            // the Prolog left a notice (one `print` line, our own text).
            let mut out = unset_lines();
            if let Ok(Some(line)) = state::read_notice_as_user(paths, job) {
                out.push_str(&format!("print {line}\n"));
            }
            let _ = std::io::stdout().lock().write_all(out.as_bytes());
            return ExitClass::Ok;
        }
        Err(e) => {
            log::warn(&format!("task-prolog: job {job}: {e}"));
            return ExitClass::Ok;
        }
    };
    let (mut out, refused) = protocol_lines(job, &record);
    for r in refused {
        log::warn(&format!("task-prolog: job {job}: {r}"));
    }
    // A granted job may have a notice too: its QoS could not be learnt and
    // it runs at the default level.
    if let Ok(Some(line)) = state::read_notice_as_user(paths, job) {
        out.push_str(&format!("print {line}\n"));
    }
    // One write; a closed stdout is not our failure.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    ExitClass::Ok
}

/// `unset NAME` for every variable the TaskProlog may set: what a task on a
/// node that granted no level gets.
pub fn unset_lines() -> String {
    ALLOWED.iter().map(|k| format!("unset {k}\n")).collect()
}

/// What the TaskProlog prints for `record` (Slurm's protocol: only `export
/// NAME=VALUE` lines, NAME one of the allowed variables, VALUE plain
/// `[A-Za-z0-9_.-]`), and what it refused. Pure, so that the record reader
/// can be fuzzed end to end (fuzz/src/job_record.rs).
pub fn protocol_lines(job: JobId, record: &JobRecord) -> (String, Vec<String>) {
    if record.job_id != job {
        return (
            String::new(),
            vec![format!("record names job {}; ignored", record.job_id)],
        );
    }
    let mut out = String::new();
    let mut refused = Vec::new();
    for (k, v) in &record.exports {
        if ALLOWED.contains(&k.as_str())
            && !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            out.push_str(&format!("export {k}={v}\n"));
        } else {
            refused.push(format!("refusing export {k:?}={v:?}"));
        }
    }
    (out, refused)
}
