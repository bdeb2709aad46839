//! A job's counters: its Prolog reads the node's ports' per-SL data and
//! per-VL wait counters (`fabric::perfquery`) into
//! `/run/qoslane/counters/JOB.json`; its Epilog reads them again and puts
//! what they showed into its report ([`CounterEvidence`]: the audit line's
//! `evidence`, the off-level bytes counted and told).
//!
//! Nothing is read (and nothing costs) when no `QOSLANE_PERFQUERY` is
//! configured, or when every attribute of every port is remembered as
//! unsupported. Best effort: the job runs either way; a failure is a note.
//!
//! Whether the job was alone on the node: no other job's snapshot when its
//! Prolog read, and no other job's Prolog while it ran (that Prolog marks
//! every snapshot it finds with a `JOB.shared` file).

use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::fabric::PortId;
use crate::fabric::perfquery;
use crate::fabric::pma::{self, PortReading, Reading};
use crate::mapping::OnFailure;
use crate::paths::Paths;
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

/// The node's Active InfiniBand ports (the job's: a job uses the node's
/// fabric ports).
fn ports(paths: &Paths) -> crate::error::Result<Vec<PortId>> {
    Ok(crate::fabric::sysfs::discover(paths, &[])?
        .ports
        .into_iter()
        .filter(|p| p.active && p.link_layer == crate::fabric::LinkLayer::InfiniBand)
        .map(|p| p.id)
        .collect())
}

/// The Prolog's snapshot, when its job runs (granted, or on the baseline).
pub fn prolog(paths: &Paths, deadline: &Deadline, result: &mut RunResult) {
    let Some(program) = &paths.perfquery else {
        return;
    };
    if matches!(result, Err(f) if f.exit != Exit::ByPolicy(OnFailure::Continue)) {
        return;
    }
    let r = report_of(result);
    let Some(job) = r.job.job_id else { return };
    match snapshot(program, paths, deadline, job) {
        Ok(readings) => {
            if let Payload::Prolog(p) = &mut r.payload {
                p.counters = readings;
            }
        }
        Err(e) => r.notes.push(format!("counters not read: {e}")),
    }
}

fn snapshot(
    program: &std::path::Path,
    paths: &Paths,
    deadline: &Deadline,
    job: crate::job::JobId,
) -> crate::error::Result<Vec<PortReading>> {
    let ports = ports(paths)?;
    let readings = perfquery::read(program, paths, &ports, deadline);
    if readings
        .iter()
        .all(|p| p.readings.values().all(|r| *r == Reading::Unsupported))
    {
        return Ok(Vec::new());
    }
    let dir = paths.counters_dir();
    fsutil::ensure_dir(paths, &paths.run_dir)?;
    fsutil::ensure_dir(paths, &dir)?;
    let mine = format!("{job}.json");
    let mut alone = true;
    for e in std::fs::read_dir(&dir).map_err(crate::error::Error::io("list", &dir))? {
        let name = e
            .map_err(crate::error::Error::io("list", &dir))?
            .file_name();
        let name = name.to_string_lossy();
        if let Some(other) = name.strip_suffix(".json")
            && *name != mine
            && fsutil::temp_file_writer(&name).is_none()
        {
            alone = false;
            let marker = paths.job_counters_shared(other);
            if !marker.exists() {
                fsutil::atomic_write(paths, &marker, b"", PUBLIC)?;
            }
        }
    }
    let snap = Snapshot {
        time: crate::time::now_rfc3339(),
        alone,
        readings,
    };
    fsutil::write_json(paths, &paths.job_counters(job), &snap, PUBLIC)?;
    Ok(snap.readings)
}

/// The Epilog's reading: the evidence into the report, the snapshot gone.
pub fn epilog(paths: &Paths, deadline: &Deadline, result: &mut RunResult) {
    let Some(program) = &paths.perfquery else {
        return;
    };
    let r = report_of(result);
    let Some(job) = r.job.job_id else { return };
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
    let ports: Vec<PortId> = snap.readings.iter().map(|p| p.port.clone()).collect();
    let after = perfquery::read(program, paths, &ports, deadline);
    let e = pma::evidence(&snap.readings, &after, r.job.service_level, alone);
    if let Some(words) = r.job.level.as_deref().and_then(|l| e.off_level_words(l)) {
        crate::log::warn(&words);
        r.notes.push(words);
    }
    if let Payload::Epilog(run) = &mut r.payload {
        run.evidence = Some(e);
        run.counters = after;
    }
    for f in [paths.job_counters(job), shared] {
        if let Err(e) = fsutil::remove(paths, &f) {
            r.notes.push(format!("counters: {e}"));
        }
    }
}
