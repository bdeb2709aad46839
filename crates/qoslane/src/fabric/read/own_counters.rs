//! The node's own ports' counters (per-SL data, per-VL transmit wait), as a
//! job's Prolog and Epilog and every `health` run read them: **in process**
//! where the port opens (a PMA Get per attribute to the port's own LID,
//! through the port itself: [`InProcess::own`]; no program), else with
//! `perfquery` where a site configured one (`QOSLANE_PERFQUERY`: the
//! fallback), else not at all. Either way through the
//! [`Reader`](crate::fabric::read::reader::Reader) trait and
//! the one memory of what a port does not serve
//! (`perfquery::read_with`). A port the run already opened in process
//! (`health`'s first hop: [`Opened`]) is read through that opening, not
//! opened again; a port opened here registers the PMA's agent alone.

use std::path::Path;

use crate::deadline::Deadline;
use crate::fabric::counters::pma::PortReading;
use crate::fabric::read::in_process::InProcess;
use crate::fabric::read::perfquery::{self, Perfquery};
use crate::fabric::tables::PortId;
use crate::paths::Paths;

/// The node's ports a run already opened in process, by port: the counters
/// read through them.
pub type Opened = Vec<(PortId, InProcess)>;

/// One of the node's own ports and its LID (0: none yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountedPort {
    pub id: PortId,
    pub lid: u16,
}

/// The node's Active InfiniBand ports (sysfs under the root prefix).
pub fn active(paths: &Paths) -> crate::error::Result<Vec<CountedPort>> {
    Ok(crate::fabric::read::sysfs::discover(paths, &[])?
        .ports
        .into_iter()
        .filter(|p| p.active && p.link_layer == crate::fabric::read::sysfs::LinkLayer::InfiniBand)
        .map(|p| CountedPort {
            lid: p.identity.as_ref().map_or(0, |i| i.lid),
            id: p.id,
        })
        .collect())
}

/// Every attribute of each port (in order) that can be read: in process
/// where the port opens (through its opening in `opened`, if the run has
/// one), the rest with `perfquery` (all at once) when one is configured; a
/// port neither reads is left out. A node without `ib_umad`
/// (`sysfs::umad_loaded`) opens none in process: libibumad is not loaded.
pub fn read(
    paths: &Paths,
    ports: &[CountedPort],
    perfquery: Option<&Path>,
    deadline: &Deadline,
    mut opened: Opened,
) -> Vec<PortReading> {
    let mut out: Vec<(usize, PortReading)> = Vec::new();
    let mut by_program: Vec<(usize, PortId)> = Vec::new();
    let umad = ports
        .iter()
        .any(|p| !opened.iter().any(|(id, _)| *id == p.id))
        && crate::fabric::read::sysfs::umad_loaded(paths);
    for (i, p) in ports.iter().enumerate() {
        let reader = match opened.iter().position(|(id, _)| *id == p.id) {
            Some(k) => Ok(opened.swap_remove(k).1.counting(&p.id, p.lid)),
            None if umad => InProcess::own(&p.id, p.lid),
            None => Err(String::new()),
        };
        match reader {
            Ok(reader) => {
                let got =
                    perfquery::read_with(&reader, paths, std::slice::from_ref(&p.id), deadline);
                out.extend(got.into_iter().map(|r| (i, r)));
            }
            Err(_) => by_program.push((i, p.id.clone())),
        }
    }
    if let Some(program) = perfquery
        && !by_program.is_empty()
    {
        let ids: Vec<PortId> = by_program.iter().map(|(_, p)| p.clone()).collect();
        let got = perfquery::read_with(&Perfquery::new(program), paths, &ids, deadline);
        out.extend(by_program.iter().map(|(i, _)| *i).zip(got));
    }
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}
