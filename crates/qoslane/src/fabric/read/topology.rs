//! The fabric's topology by `ibnetdiscover -p`: the program reader's, and
//! the in-process reader's where it does not walk it itself (`discover.rs`:
//! a node-name-map or an `ibdiag.conf` setting in force), run through
//! `exec` under the run's deadline and parsed by `parse/topology.rs`.
//! Reached through [`Reader::topology`](crate::fabric::read::reader::Reader::topology).

use std::path::Path;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;
use crate::fabric::read::parse::parse_topology;
use crate::fabric::tables::{PortId, Topology};

/// The most of `ibnetdiscover -p` read: a line per port, ~110 bytes; a
/// 4,032-HCA fat tree prints 1.7 MB, this holds ~500,000 ports.
pub const TOPOLOGY_MAX_OUTPUT: u64 = 64 << 20;

/// The fabric's topology: `ibnetdiscover -p` (through `via` when given),
/// parsed.
pub fn discover(
    ibnetdiscover: &Path,
    via: Option<&PortId>,
    deadline: &Deadline,
) -> Result<Topology> {
    let p = via.map(|v| v.port.to_string());
    let mut args: Vec<&str> = Vec::new();
    if let (Some(v), Some(p)) = (via, p.as_deref()) {
        args.extend(["-C", v.device.as_str(), "-P", p]);
    }
    args.push("-p");
    let out = exec::run_capped(ibnetdiscover, &args, TOPOLOGY_MAX_OUTPUT, deadline)?;
    // A name from a node-name-map is printed as the file has it (ISO-8859-1
    // `Zürich`): shown with U+FFFD, never a reason to read no switch at all.
    let text = String::from_utf8_lossy(&out.stdout);
    parse_topology(&text).map_err(|e| Error::Fabric(format!("ibnetdiscover -p: {e}")))
}
