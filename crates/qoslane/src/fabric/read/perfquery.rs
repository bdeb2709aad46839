//! The counters' program reader: infiniband-diags' `perfquery`
//! ([`Perfquery`], a [`Reader`]) — the node's own ports' counters (each
//! attribute of [`Kind`] of each port, all at once: [`read`]) and the
//! audit's transmit wait of egress ports by LID (a window at once, the
//! `smpquery` reader's when it has a `perfquery`), through [`crate::exec`]
//! (no shell, no PATH, under the run's deadline, on the caller's thread),
//! parsed by `parse/counters.rs`.
//!
//! No capability bit says whether a port has the per-SL counters: it is
//! asked, and a port that does not answer an attribute (`cannot query`)
//! is remembered in `/run/qoslane/counters-unsupported.json`, so later runs
//! do not pay for it again (tmpfs: asked again after a reboot).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;
use crate::fabric::counters::pma::{Kind, PortReading, PortWait, Reading};
use crate::fabric::counters::wait::{self, WaitPort};
use crate::fabric::read::parse::parse_perfquery;
use crate::fabric::read::reader::Reader;
use crate::fabric::tables::PortId;
use crate::paths::Paths;
use crate::state::{PUBLIC, fsutil};

/// Runs the `perfquery` program at an absolute path.
#[derive(Clone, Debug)]
pub struct Perfquery {
    program: PathBuf,
    /// The local port LID-routed queries leave from (`None`: the default).
    via: Option<PortId>,
    /// How many programs run at once for ports by LID.
    window: usize,
}

impl Perfquery {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            via: None,
            window: 1,
        }
    }

    /// LID-routed queries (the audit's) leave from `via`, `window` at once.
    #[must_use]
    pub fn via(mut self, via: Option<PortId>, window: usize) -> Self {
        self.via = via;
        self.window = window.max(1);
        self
    }
}

impl Reader for Perfquery {
    fn name(&self) -> &'static str {
        "perfquery"
    }

    /// `perfquery --vlxmitcounters LID PORT` of every port.
    fn xmit_wait(&self, ports: &[WaitPort], deadline: &Deadline) -> (Vec<PortWait>, Vec<String>) {
        let kind = Kind::VlXmitWait;
        let all: Vec<&WaitPort> = ports.iter().collect();
        let mut errors = Vec::new();
        let waits = ports
            .iter()
            .zip(self.by_lid(&all, &[], deadline))
            .map(|(p, text)| {
                let got = text.and_then(|text| {
                    parse_perfquery(&text, kind.attribute(), kind.prefix()).map_err(|e| {
                        Error::Fabric(format!(
                            "perfquery {} {} {}: {e}",
                            kind.flag(),
                            p.lid,
                            p.port
                        ))
                    })
                });
                match got {
                    Ok(t) => p.read(t),
                    Err(e) => {
                        errors.push(format!("{} {}: {e}", p.kind.as_str(), p.name));
                        p.unread()
                    }
                }
            })
            .collect();
        (waits, errors)
    }

    /// `perfquery --vlxmitcounters -R LID PORT` of every port that was read.
    fn clear_xmit_wait(
        &self,
        ports: &[WaitPort],
        waits: &[PortWait],
        deadline: &Deadline,
    ) -> Vec<String> {
        let read = wait::read_ports(ports, waits);
        let results = self.by_lid(&read, &["-R"], deadline);
        wait::failures(&read, results)
    }

    /// `perfquery -C DEV -P PORT -t MS FLAG` of each (port, attribute), all
    /// at once; a port that does not answer an attribute is `Unsupported`.
    fn port_counters(&self, asks: &[(&PortId, Kind)], deadline: &Deadline) -> Vec<Reading> {
        let argvs: Vec<Vec<String>> = asks.iter().map(|(p, kind)| argv(p, *kind)).collect();
        let refs: Vec<Vec<&str>> = argvs
            .iter()
            .map(|a| a.iter().map(String::as_str).collect())
            .collect();
        let refs: Vec<&[&str]> = refs.iter().map(Vec::as_slice).collect();
        asks.iter()
            .zip(&argvs)
            .zip(exec::run_many_any_exit(&self.program, &refs, deadline))
            .map(|(((_, kind), args), got)| reading_of(*kind, got, &args.join(" ")))
            .collect()
    }
}

impl Perfquery {
    /// `perfquery [-C DEV -P PORT] --vlxmitcounters EXTRA… LID PORT` of
    /// each port, a window at once; each one's stdout or error.
    fn by_lid(
        &self,
        ports: &[&WaitPort],
        extra: &[&str],
        deadline: &Deadline,
    ) -> Vec<Result<String>> {
        let dev_port = self.via.as_ref().map(|v| v.port.to_string());
        let ids: Vec<(String, String)> = ports
            .iter()
            .map(|p| (p.lid.to_string(), p.port.to_string()))
            .collect();
        let argvs: Vec<Vec<&str>> = ids
            .iter()
            .map(|(lid, port)| {
                let mut args: Vec<&str> = Vec::new();
                if let (Some(v), Some(n)) = (&self.via, dev_port.as_deref()) {
                    args.extend(["-C", v.device.as_str(), "-P", n]);
                }
                args.push(Kind::VlXmitWait.flag());
                args.extend_from_slice(extra);
                args.extend([lid.as_str(), port.as_str()]);
                args
            })
            .collect();
        let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
        exec::run_window(&self.program, &refs, self.window, deadline)
            .into_iter()
            .map(|r| r.map(|out| String::from_utf8_lossy(&out.stdout).into_owned()))
            .collect()
    }
}

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
/// program at `program` ([`Reader::port_counters`] of a [`Perfquery`]).
pub fn read(
    program: &Path,
    paths: &Paths,
    ports: &[PortId],
    deadline: &Deadline,
) -> Vec<PortReading> {
    read_with(&Perfquery::new(program), paths, ports, deadline)
}

/// Reads every attribute of `ports` not remembered unsupported through
/// `reader`'s [`Reader::port_counters`] (perfquery's, or in process: the
/// same memory of what a port does not serve); newly unsupported ones are
/// remembered (best effort: a failure to write only means asking again).
pub fn read_with(
    reader: &dyn Reader,
    paths: &Paths,
    ports: &[PortId],
    deadline: &Deadline,
) -> Vec<PortReading> {
    let mut known = unsupported(paths);
    let mut asks: Vec<(usize, Kind)> = Vec::new();
    let mut out: Vec<PortReading> = ports
        .iter()
        .map(|p| PortReading {
            port: p.clone(),
            readings: BTreeMap::new(),
            read_by: Some(reader.name().to_owned()),
        })
        .collect();
    for (i, p) in ports.iter().enumerate() {
        for kind in Kind::ALL {
            if known.ports.contains(&(p.clone(), kind)) {
                out[i].readings.insert(kind, Reading::Unsupported);
            } else {
                asks.push((i, kind));
            }
        }
    }
    if asks.is_empty() {
        return out;
    }
    let asked: Vec<(&PortId, Kind)> = asks.iter().map(|(i, kind)| (&ports[*i], *kind)).collect();
    let readings = reader.port_counters(&asked, deadline);
    let mut learnt = false;
    for ((i, kind), reading) in asks.iter().zip(readings) {
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
pub fn reading_of(kind: Kind, got: Result<std::process::Output>, args: &str) -> Reading {
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
