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

/// How much of the audit log's end `explain` reads for a level's counters.
const RECENT_BYTES: u64 = 256 * 1024;
const RECENT_ENTRIES: usize = 500;

/// The newest Epilog of `level` whose audit line carries counter evidence
/// (the end of the audit log), as written.
pub fn recent(paths: &Paths, level: &str) -> Option<crate::audit::read::LoggedEntry> {
    crate::audit::read::tail(paths, RECENT_BYTES, RECENT_ENTRIES)
        .entries
        .into_iter()
        .rev()
        .map(|l| l.entry)
        .find(|e| {
            e.event == crate::report::Event::Epilog
                && e.level.as_deref() == Some(level)
                && !e.evidence.is_null()
        })
}

/// A recorded evidence, in words: one line per port (what the Epilog
/// wrote, rendered; nothing judged again).
pub fn evidence_lines(evidence: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let seen = |v: &Value, what: &str, unit: &str| -> String {
        match v {
            Value::String(word) => format!("{what} {word}"),
            Value::Object(o) => match o.get("moved").and_then(Value::as_object) {
                Some(m) if m.is_empty() => format!("{what} nothing"),
                Some(m) => {
                    let each: Vec<String> = m
                        .iter()
                        .map(|(k, n)| match n {
                            Value::String(word) => format!("{k}: {word}"),
                            n => format!("{k}: {n}{unit}"),
                        })
                        .collect();
                    format!("{what} {}", each.join(", "))
                }
                None => format!(
                    "{what} unread ({})",
                    o.get("unread").unwrap_or(&Value::Null)
                ),
            },
            _ => format!("{what} not read"),
        }
    };
    let mut lines = vec![format!(
        "{}{}",
        if evidence["alone"] == true {
            "alone on the node"
        } else {
            "shared the node (counters not the job's alone)"
        },
        evidence["off_level_bytes"]
            .as_u64()
            .map_or_else(String::new, |n| format!("; {n} bytes off its SL"))
    )];
    for p in evidence["ports"].as_array().into_iter().flatten() {
        lines.push(format!(
            "{}/{}: {}; {}; {}",
            p["device"].as_str().unwrap_or("?"),
            p["port"],
            seen(&p["sent_bytes_per_sl"], "sent per SL", " B"),
            seen(&p["received_bytes_per_sl"], "received per SL", " B"),
            seen(&p["xmit_wait_ticks_per_vl"], "waited per VL", " ticks"),
        ));
    }
    lines
}
