//! The runner of infiniband-diags' `smpquery` (an SMP query over
//! `/dev/infiniband/umadN`, as root): builds the argument vector, runs it
//! through [`crate::exec`] (no shell, no PATH, under the deadline; several
//! queries in one wait) and hands the text to the parsers
//! ([`crate::fabric::read::parse`]). Which queries to send is the caller's: the probe
//! (the node's own ports), the first hop, the sweep.
//!
//! `via` is the local HCA port the SMPs leave from (`-C DEV -P PORT`);
//! the arguments are a directed route (`-D sl2vl 0,1 7`) or a LID
//! (`sl2vl LID 7`).

use std::path::{Path, PathBuf};

use crate::fabric::read::parse::parse_vlarb;
use crate::fabric::tables::{PortId, VlArbState};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;

/// Runs the `smpquery` program at an absolute path.
#[derive(Clone, Debug)]
pub struct Smpquery {
    program: PathBuf,
}

impl Smpquery {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Runs `smpquery [-C DEV -P PORT] ARGS…` (ARGS: `-D sl2vl 0,1 7`, or
    /// `sl2vl LID 7`); its stdout, or the error with the arguments named.
    /// `via` is the local HCA port the SMPs leave from (the default port of
    /// the default device when `None`).
    pub fn run(&self, via: Option<&PortId>, args: &[&str], deadline: &Deadline) -> Result<String> {
        self.run_many(&[(via, args)], deadline)
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no smpquery result".into())))
    }

    /// [`Smpquery::run`] for several queries at once (one wait, no thread).
    pub fn run_many(
        &self,
        queries: &[(Option<&PortId>, &[&str])],
        deadline: &Deadline,
    ) -> Vec<Result<String>> {
        let ports: Vec<Option<String>> = queries
            .iter()
            .map(|(via, _)| via.map(|v| v.port.to_string()))
            .collect();
        let argvs: Vec<Vec<&str>> = queries
            .iter()
            .zip(&ports)
            .map(|((via, args), p)| {
                let mut argv: Vec<&str> = Vec::with_capacity(args.len() + 4);
                if let (Some(v), Some(p)) = (via, p.as_deref()) {
                    argv.extend(["-C", v.device.as_str(), "-P", p]);
                }
                argv.extend_from_slice(args);
                argv
            })
            .collect();
        let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
        exec::run_many(&self.program, &refs, deadline)
            .into_iter()
            .zip(&argvs)
            .map(|(r, argv)| match r {
                Ok(out) => String::from_utf8(out.stdout).map_err(|_| {
                    Error::Fabric(format!("smpquery {}: output is not UTF-8", argv.join(" ")))
                }),
                Err(Error::Program { program, detail }) => Err(Error::Program {
                    program,
                    detail: format!("{}: {detail}", argv.join(" ")),
                }),
                Err(e) => Err(e),
            })
            .collect()
    }
}

/// A `smpquery vlarb` answer as the checks keep it: the tables only decide
/// `starved`, so a failed or unparsable answer is recorded, not fatal; a
/// deadline is the run's, not the warning's, and gives up the read.
pub fn vlarb_state(answer: Result<String>) -> Result<VlArbState> {
    Ok(match answer {
        Err(e @ Error::Deadline { .. }) => return Err(e),
        Err(e) => VlArbState::Unavailable(e.to_string()),
        Ok(text) => match parse_vlarb(&text) {
            Ok(t) => VlArbState::Read(t),
            Err(e) => VlArbState::Unavailable(format!("smpquery vlarb: {e}")),
        },
    })
}
