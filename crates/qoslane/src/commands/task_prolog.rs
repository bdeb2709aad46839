//! `qoslane task-prolog`: runs as the job user, once per task. Prints the
//! `export` lines the Prolog recorded for the job — or, when this node
//! granted no level, `unset` lines for the same variables — and the
//! Prolog's notice to the job as a `print` line, if it left one (a level not
//! granted, a QoS that could not be learnt), and nothing else on stdout; trusts nothing in its environment but the job id; never fails
//! the task.

use std::io::Write;

use crate::exit_code::ExitClass;
use crate::job::{JobId, exports};
use crate::libraries;
use crate::log;
use crate::paths::Paths;
use crate::state::{self, JobRecord};

/// Whether the TaskProlog may set or unset `name`, whatever a record says:
/// a variable of the export table, `QOSLANE_LEVEL`, or a name a site may add
/// (`exports.add`: one that changes nothing but a library's SL or traffic
/// class, [`libraries::refuse_site_variable`]).
pub fn allowed(name: &str) -> bool {
    name == libraries::LEVEL_VARIABLE
        || libraries::find(name).is_some()
        || libraries::refuse_site_variable(name).is_none()
}

/// [`ExitClass::Ok`], except for a job this node's Prolog refused
/// ([`ExitClass::Failed`]: a non-zero TaskProlog fails the task, and srun
/// prints the `print` line before Slurm's own `TaskProlog failed`).
pub fn run(paths: &Paths) -> ExitClass {
    let job = match JobId::from_env() {
        Ok(j) => j,
        Err(e) => {
            log::warn(&format!("task-prolog: {e}"));
            return ExitClass::Ok;
        }
    };
    let (job, record) = match record_on_this_node(paths, job) {
        Ok(Some(found)) => found,
        Ok(None) => {
            // Refused by this node's Prolog (a `fail_job` level it could not
            // grant) and not requeued (srun, salloc): the task must not run
            // without its level; it fails, told why, and the node is not
            // drained (a failing Prolog would have drained it).
            if let Some(line) = refusal_on_this_node(paths, job) {
                let out = format!("{}print {line}\n", unset_lines(paths));
                let _ = std::io::stdout().lock().write_all(out.as_bytes());
                log::warn(&format!("task-prolog: job {job}: refused here: {line}"));
                return ExitClass::Failed;
            }
            // Baseline: no level granted on this node, so none of our
            // variables: a task here must not keep an SL it inherited (srun
            // passes the batch step's environment, exported by another
            // node's TaskProlog, to every node of the job). Then say why, if
            // the Prolog left a notice (one `print` line, our own text).
            let mut out = unset_lines(paths);
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

/// The record of the job this task belongs to, with its id. A task of a
/// heterogeneous job's step runs with the leader's `SLURM_JOB_ID` whatever
/// its component (and the leader's `SLURM_JOB_QOS`: seen on 24.11), while
/// each component's Prolog ran with, and recorded under, the component's
/// own id (`SLURM_JOB_ID_HET_GROUP_K`). So: the one component whose record
/// this node holds. None: the baseline. Several (components sharing the
/// node): the task's own cannot be told, and another component's level
/// must not be exported to it: the baseline, said.
fn record_on_this_node(
    paths: &Paths,
    job: JobId,
) -> crate::error::Result<Option<(JobId, JobRecord)>> {
    let size = std::env::var("SLURM_HET_SIZE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok());
    let Some(size) = size else {
        return Ok(state::read_record_as_user(paths, job)?.map(|r| (job, r)));
    };
    let mut found = Vec::new();
    for k in 0..size.min(MAX_HET_COMPONENTS) {
        let Ok(id) = std::env::var(format!("SLURM_JOB_ID_HET_GROUP_{k}")) else {
            continue;
        };
        let Ok(component) = JobId::parse(&id) else {
            continue;
        };
        if let Some(r) = state::read_record_as_user(paths, component)? {
            found.push((component, r));
        }
    }
    if found.len() > 1 {
        let ids: Vec<String> = found.iter().map(|(c, _)| c.to_string()).collect();
        log::warn(&format!(
            "task-prolog: job {job}: heterogeneous components {} all hold a level on this node; \
             which one this task belongs to is not known: no SL exported",
            ids.join(", ")
        ));
        return Ok(None);
    }
    Ok(found.pop())
}

/// The refusal this node's Prolog left the task's job (`run::notice`), if
/// any: under the job's id, or, for a heterogeneous job's task (the
/// leader's `SLURM_JOB_ID`), any of its components'. One that cannot be
/// read is none: the task runs on the baseline, as before.
fn refusal_on_this_node(paths: &Paths, job: JobId) -> Option<String> {
    let mut ids = vec![job];
    if let Some(size) = std::env::var("SLURM_HET_SIZE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
    {
        ids.extend((0..size.min(MAX_HET_COMPONENTS)).filter_map(|k| {
            std::env::var(format!("SLURM_JOB_ID_HET_GROUP_{k}"))
                .ok()
                .and_then(|id| JobId::parse(&id).ok())
        }));
    }
    ids.into_iter()
        .find_map(|id| state::read_refusal_as_user(paths, id).ok().flatten())
        .filter(|line| !line.trim().is_empty())
}

/// Most components of a heterogeneous job looked at (Slurm's own limit is
/// far above any real job's).
const MAX_HET_COMPONENTS: u32 = 128;

/// `unset NAME` for every variable the TaskProlog may set under the mapping
/// in force (the export table with the site's edits, `QOSLANE_LEVEL`): what
/// a task on a node that granted no level gets. A mapping that cannot be
/// read: the table as shipped.
pub fn unset_lines(paths: &Paths) -> String {
    let edit = crate::config::load(paths)
        .map(|l| l.mapping.exports)
        .unwrap_or_default();
    exports::ours(&edit)
        .iter()
        .map(|k| format!("unset {k}\n"))
        .collect()
}

/// What the TaskProlog prints for `record` (Slurm's protocol: only `export
/// NAME=VALUE` lines, NAME an [`allowed`] variable, VALUE plain
/// `[A-Za-z0-9_.-]`, then `unset NAME` for the allowed variables the
/// record holds back for this node's link layer), and what it refused.
/// Pure, so that the record reader can be fuzzed end to end
/// (fuzz/src/job_record.rs).
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
        if allowed(k)
            && !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            out.push_str(&format!("export {k}={v}\n"));
        } else {
            refused.push(format!("refusing export {k:?}={v:?}"));
        }
    }
    for k in &record.unset {
        if allowed(k) && !record.exports.iter().any(|(e, _)| e == k) {
            out.push_str(&format!("unset {k}\n"));
        } else {
            refused.push(format!("refusing unset {k:?}"));
        }
    }
    (out, refused)
}
