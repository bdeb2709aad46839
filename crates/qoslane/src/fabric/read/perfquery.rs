//! The runner of infiniband-diags' `perfquery` for the node's own ports:
//! each counter attribute of [`Kind`] of each port, all at once through
//! [`crate::exec`] (no shell, no PATH, under the run's deadline), parsed by
//! [`super::parse::parse_perfquery`] into [`PortReading`]s.
//!
//! No capability bit says whether a port has the per-SL counters: it is
//! asked, and a port that does not answer an attribute (`cannot query`)
//! is remembered in `/run/qoslane/counters-unsupported.json`, so later runs
//! do not pay for it again (tmpfs: asked again after a reboot).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::exec;
use crate::fabric::counters::pma::{Kind, PortReading, Reading};
use crate::fabric::read::parse::parse_perfquery;
use crate::fabric::tables::PortId;
use crate::paths::Paths;
use crate::state::{PUBLIC, fsutil};

/// How long `perfquery` waits for a port's answer (`-t`): the node's own
/// HCA answers in microseconds; a port that does not answer in this is
/// unsupported, and costs this once.
pub const ANSWER_MS: &str = "200";

/// What the port said when it does not serve an attribute.
const NO_ANSWER: &str = "cannot query";

/// The attributes of ports that did not answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsupported {
    pub ports: BTreeSet<(PortId, Kind)>,
}

/// The remembered unsupported attributes (none when the file is absent or
/// unreadable: they are asked again).
pub fn unsupported(paths: &Paths) -> Unsupported {
    fsutil::read_json(paths, &paths.counters_unsupported())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Reads every attribute of `ports` not remembered unsupported, with the
/// program at `program`; newly unsupported ones are remembered (best
/// effort: a failure to write only means asking again).
pub fn read(
    program: &Path,
    paths: &Paths,
    ports: &[PortId],
    deadline: &Deadline,
) -> Vec<PortReading> {
    let mut known = unsupported(paths);
    let mut asks: Vec<(usize, Kind, Vec<String>)> = Vec::new();
    let mut out: Vec<PortReading> = ports
        .iter()
        .map(|p| PortReading {
            port: p.clone(),
            readings: BTreeMap::new(),
        })
        .collect();
    for (i, p) in ports.iter().enumerate() {
        for kind in Kind::ALL {
            if known.ports.contains(&(p.clone(), kind)) {
                out[i].readings.insert(kind, Reading::Unsupported);
            } else {
                asks.push((i, kind, argv(p, kind)));
            }
        }
    }
    if asks.is_empty() {
        return out;
    }
    let argvs: Vec<Vec<&str>> = asks
        .iter()
        .map(|(_, _, a)| a.iter().map(String::as_str).collect())
        .collect();
    let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
    let mut learnt = false;
    for ((i, kind, args), got) in asks
        .iter()
        .zip(exec::run_many_any_exit(program, &refs, deadline))
    {
        let reading = reading_of(*kind, got, &args.join(" "));
        if reading == Reading::Unsupported {
            learnt |= known.ports.insert((ports[*i].clone(), *kind));
        }
        out[*i].readings.insert(*kind, reading);
    }
    if learnt
        && fsutil::ensure_dir(paths, &paths.run_dir).is_ok()
        && let Err(e) = fsutil::write_json(paths, &paths.counters_unsupported(), &known, PUBLIC)
    {
        crate::log::warn(&format!("counters: not remembered as unsupported: {e}"));
    }
    out
}

/// `-C DEV -P PORT -t MS FLAG`: the port's own counters.
fn argv(p: &PortId, kind: Kind) -> Vec<String> {
    vec![
        "-C".into(),
        p.device.clone(),
        "-P".into(),
        p.port.to_string(),
        "-t".into(),
        ANSWER_MS.into(),
        kind.flag().into(),
    ]
}

/// One answer as a reading: the parsed counters; `unsupported` when the
/// port did not answer the attribute (perfquery says `cannot query` on
/// stdout and exits non-zero); else why it could not be read.
pub fn reading_of(
    kind: Kind,
    got: crate::error::Result<std::process::Output>,
    args: &str,
) -> Reading {
    let out = match got {
        Ok(out) => out,
        Err(e) => return Reading::Unread(e.to_string()),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains(NO_ANSWER) {
            return Reading::Unsupported;
        }
        let said = [&text, &String::from_utf8_lossy(&out.stderr)]
            .into_iter()
            .find_map(|t| {
                t.lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| "no message".into());
        return Reading::Unread(format!("perfquery {args}: {} ({said})", out.status));
    }
    match parse_perfquery(&text, kind.attribute(), kind.prefix()) {
        Ok(v) => Reading::Values(v),
        Err(e) => Reading::Unread(format!("perfquery {args}: {e}")),
    }
}
