//! A job's counters: its Prolog reads the node's ports' per-SL data and
//! per-VL wait counters into `/run/qoslane/counters/JOB.json`; its Epilog
//! reads them again and puts what they showed into its report
//! ([`CounterEvidence`]: the audit line's `evidence`, the off-level bytes
//! counted and told). Read by default, in process where the port opens
//! (`fabric/read/own_counters.rs`: a PMA Get per attribute, no program),
//! else by `perfquery` where a site configured one (`QOSLANE_PERFQUERY`).
//!
//! Nothing is read (and nothing costs) when the site turned the counters
//! off (`QOSLANE_COUNTERS=off`), when no port opens in process and no
//! `perfquery` is configured, or when every attribute of every port is
//! remembered as unsupported. Best effort: the job runs either way; a
//! failure is a note.
//!
//! Never in the way: both hooks read after their transaction, the node
//! lock given back (`Session::release`), and within half of what remains
//! of the run's time; a port that does not answer in it is `unanswered`
//! in the evidence, and the job's grant is what the transaction made it.
//!
//! Whether the job was alone on the node: no other job's snapshot when its
//! Prolog wrote its own, and no other job's Prolog while it ran. A Prolog
//! writes its snapshot first, then looks: finding others, it marks them
//! and itself with `JOB.shared` files (two Prologs at once: the later one
//! sees the earlier one's snapshot, and marks both).
//!
//! Every file has an owner: the job's. Whoever releases the job removes
//! them ([`release`]: its Epilog, whether counters are read or not, and
//! `health`'s release of a job Slurm no longer has), and `health` sweeps
//! the files of jobs neither recorded nor on the node in Slurm ([`sweep`]:
//! an Epilog killed after its transaction).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::fabric::pma::{self, PortReading, Reading};
use crate::fabric::read::own_counters::{self, CountedPort, Opened};
use crate::job::JobId;
use crate::mapping::OnFailure;
use crate::paths::Paths;
use crate::report::payload::{AloneJob, LiveCounters};
use crate::report::{Exit, Payload, Report, RunResult};
use crate::state::{PUBLIC, fsutil};

/// What a Prolog read.
#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    time: String,
    /// No other job's snapshot was there.
    alone: bool,
    readings: Vec<PortReading>,
}

fn report_of(result: &mut RunResult) -> &mut Report {
    match result {
        Ok(r) => r,
        Err(f) => &mut f.report,
    }
}

/// The part of the run's time the counters may take: half of what
/// remains, so a port that never answers leaves the run the rest.
fn share(deadline: &Deadline) -> Deadline {
    deadline.half()
}

/// Reads `ports` within `share`; what did not answer in it is said so.
/// With the time the read ended (ms since the epoch): the metrics order
/// two hooks' readings by it, not by when each recorded its run.
fn read(
    paths: &Paths,
    ports: &[CountedPort],
    share: &Deadline,
    opened: Opened,
) -> (Vec<PortReading>, u64) {
    let mut readings = own_counters::read(paths, ports, paths.perfquery.as_deref(), share, opened);
    let at = crate::time::now_ms();
    if share.remaining().is_zero() {
        let ms = share.budget().as_millis();
        for r in readings.iter_mut().flat_map(|p| p.readings.values_mut()) {
            if let Reading::Unread(why) = r {
                *r = Reading::Unread(format!("unanswered within {ms} ms ({why})"));
            }
        }
    }
    (readings, at)
}

/// The Prolog's snapshot, when its job runs (granted, or on the baseline);
/// after its transaction, the node lock given back.
pub fn prolog(paths: &Paths, deadline: &Deadline, result: &mut RunResult) {
    if !paths.counters_on {
        return;
    }
    if matches!(result, Err(f) if f.exit != Exit::ByPolicy(OnFailure::Continue)) {
        return;
    }
    let r = report_of(result);
    let Some(job) = r.job.job_id else { return };
    // No Epilog ever comes for an `srun --no-allocate` step: a snapshot
    // would have no owner.
    if job.kind().unmanaged().is_some() {
        return;
    }
    match snapshot(paths, deadline, job) {
        Ok((readings, _)) if readings.is_empty() => {}
        Ok((readings, at)) => {
            if let Payload::Prolog(p) = &mut r.payload {
                p.counters = readings;
                p.counters_read_at_ms = Some(at);
            }
        }
        Err(e) => r.notes.push(format!("counters not read: {e}")),
    }
}

fn snapshot(
    paths: &Paths,
    deadline: &Deadline,
    job: JobId,
) -> crate::error::Result<(Vec<PortReading>, u64)> {
    let ports = own_counters::active(paths)?;
    let (readings, at) = read(paths, &ports, &share(deadline), Opened::new());
    if readings
        .iter()
        .all(|p| p.readings.values().all(|r| *r == Reading::Unsupported))
    {
        return Ok((Vec::new(), at));
    }
    let dir = paths.counters_dir();
    fsutil::ensure_dir(paths, &paths.run_dir)?;
    fsutil::ensure_dir(paths, &dir)?;
    let mut snap = Snapshot {
        time: crate::time::now_rfc3339(),
        alone: true,
        readings,
    };
    // Its own first, then the others': of two Prologs at once, the later
    // one to look sees the other.
    fsutil::write_json(paths, &paths.job_counters(job), &snap, PUBLIC)?;
    let others = snapshots(paths)?
        .into_iter()
        .filter(|o| *o != job.to_string() && paths.job_counters(o).exists())
        .collect::<Vec<_>>();
    for other in &others {
        let marker = paths.job_counters_shared(other);
        if !marker.exists() {
            fsutil::atomic_write(paths, &marker, b"", PUBLIC)?;
        }
    }
    if !others.is_empty() {
        snap.alone = false;
        fsutil::write_json(paths, &paths.job_counters(job), &snap, PUBLIC)?;
    }
    Ok((snap.readings, at))
}

/// The job ids of the snapshots in the counters directory (none when it
/// does not exist), writers' temporary files left out.
fn snapshots(paths: &Paths) -> crate::error::Result<Vec<String>> {
    let dir = paths.counters_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(crate::error::Error::io("list", &dir)(e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let name = e
            .map_err(crate::error::Error::io("list", &dir))?
            .file_name();
        let name = name.to_string_lossy();
        if fsutil::temp_file_writer(&name).is_some() {
            continue;
        }
        if let Some(job) = name
            .strip_suffix(".json")
            .or_else(|| name.strip_suffix(".shared"))
        {
            out.push(job.to_owned());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// A health run's reading of the node's own ports' counters: every run,
/// after the node lock was given back, within half of what remains of the
/// run's time. The live transmit wait, and the job alone on the node (one
/// snapshot, not shared, a level recorded) whose bytes off its level the
/// metrics count meanwhile; through the ports the run already `opened` (its
/// first hop's), the others opened here. `None`: counters off, or nothing
/// read.
pub fn live(paths: &Paths, deadline: &Deadline, opened: Opened) -> Option<LiveCounters> {
    if !paths.counters_on {
        return None;
    }
    let ports = own_counters::active(paths).ok()?;
    if ports.is_empty() {
        return None;
    }
    let jobs = snapshots(paths).unwrap_or_default();
    let (readings, at_ms) = read(paths, &ports, &share(deadline), opened);
    if readings.is_empty() {
        return None;
    }
    Some(LiveCounters {
        readings,
        at_ms,
        alone: alone_job(paths, &jobs),
        jobs,
    })
}

/// The one job with a snapshot, when it is alone (its Prolog found no
/// other, and none came since) and has a level recorded.
fn alone_job(paths: &Paths, jobs: &[String]) -> Option<AloneJob> {
    let [job] = jobs else { return None };
    if paths.job_counters_shared(job).exists() {
        return None;
    }
    let snap: Snapshot = fsutil::read_json(paths, &paths.job_counters(job)).ok()??;
    if !snap.alone {
        return None;
    }
    let id = JobId::parse(job).ok()?;
    let rec = (crate::state::Store { paths }).record(id).ok()??;
    let sl = rec.service_level;
    let sm_traffic_sls = crate::config::load(paths)
        .map(|l| l.mapping.sm_traffic_sls())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| *s != sl)
        .collect();
    Some(AloneJob {
        job: id,
        level: rec.level,
        sl,
        sm_traffic_sls,
    })
}

/// The job's files gone (its snapshot, its shared marker): by whoever
/// releases the job. What could not be removed, said.
pub fn release(paths: &Paths, job: impl std::fmt::Display) -> Vec<String> {
    [paths.job_counters(&job), paths.job_counters_shared(&job)]
        .iter()
        .filter_map(|f| fsutil::remove(paths, f).err())
        .map(|e| format!("counters: {e}"))
        .collect()
}

/// The files of jobs no live job owns: neither `recorded` (a job with a
/// level) nor on the node as Slurm says (`on_node`, asked only when there
/// is such a file; any doubt removes nothing). The jobs whose files went,
/// or why none could be judged.
pub fn sweep(
    paths: &Paths,
    recorded: &BTreeSet<JobId>,
    on_node: impl FnOnce() -> crate::error::Result<BTreeSet<JobId>>,
) -> std::result::Result<Vec<String>, String> {
    let unrecorded: Vec<String> = snapshots(paths)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|j| !recorded.iter().any(|r| r.to_string() == *j))
        .collect();
    if unrecorded.is_empty() {
        return Ok(Vec::new());
    }
    let live = on_node().map_err(|e| e.to_string())?;
    let gone: Vec<String> = unrecorded
        .into_iter()
        .filter(|j| !live.iter().any(|l| l.to_string() == *j))
        .collect();
    for j in &gone {
        if let Some(e) = release(paths, j).into_iter().next() {
            return Err(e);
        }
    }
    Ok(gone)
}

/// The Epilog's reading: the evidence into the report (after its
/// transaction, the node lock given back), the node's own traffic's SLs
/// from `sm_traffic_sls` (the mapping in force, as the Epilog read it); the
/// job's files gone whether counters are read or not.
pub fn epilog(
    paths: &Paths,
    deadline: &Deadline,
    result: &mut RunResult,
    sm_traffic_sls: &dyn Fn() -> BTreeSet<u8>,
) {
    let r = report_of(result);
    let Some(job) = r.job.job_id else { return };
    if paths.counters_on {
        evidence(paths, deadline, r, job, sm_traffic_sls);
    }
    let errors = release(paths, job);
    r.notes.extend(errors);
}

fn evidence(
    paths: &Paths,
    deadline: &Deadline,
    r: &mut Report,
    job: JobId,
    sm_traffic_sls: &dyn Fn() -> BTreeSet<u8>,
) {
    let snap: Option<Snapshot> = match fsutil::read_json(paths, &paths.job_counters(job)) {
        Ok(s) => s,
        Err(e) => {
            r.notes.push(format!("counters not compared: {e}"));
            None
        }
    };
    let Some(snap) = snap else { return };
    let shared = paths.job_counters_shared(job);
    let alone = snap.alone && !shared.exists();
    // The snapshot's ports, at their LIDs now (a port gone from sysfs: no
    // LID, read by perfquery if at all).
    let now = own_counters::active(paths).unwrap_or_default();
    let ports: Vec<CountedPort> = snap
        .readings
        .iter()
        .map(|p| CountedPort {
            lid: now.iter().find(|o| o.id == p.port).map_or(0, |o| o.lid),
            id: p.port.clone(),
        })
        .collect();
    let (after, at) = read(paths, &ports, &share(deadline), Opened::new());
    // The node's own traffic's SLs, as the mapping in force declares them.
    let sm_traffic_sls = sm_traffic_sls();
    let e = pma::evidence(
        &snap.readings,
        &after,
        r.job.service_level,
        alone,
        &sm_traffic_sls,
    );
    if let Some(words) = r.job.level.as_deref().and_then(|l| e.off_level_words(l)) {
        crate::log::warn(&words);
        // The job's user is told too, in a file of theirs.
        let told = super::notice::tell_user(paths, job, &words);
        r.notes.push(words);
        r.notes.push(told);
    }
    if let Payload::Epilog(run) = &mut r.payload {
        run.evidence = Some(e);
        run.counters = after;
        run.counters_read_at_ms = Some(at);
    }
}
