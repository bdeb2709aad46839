//! The program reader: infiniband-diags' `smpquery` (an SMP query over
//! `/dev/infiniband/umadN`, as root) and, when given, `perfquery` (the PMA
//! counters the audit reads). This file runs them: it builds the argument
//! vectors and runs them through [`crate::exec::run_many`] (no shell, no
//! PATH, under the deadline), at most [`Smpquery::window`] programs at once
//! and all on the caller's thread: no reader threads. What to ask and how
//! the answers become tables is `programs.rs`' (its `Reader`
//! implementation) and the first hop's (`first_hop/read.rs`), through the
//! parsers (`parse/`).
//!
//! `via` is the local HCA port the SMPs leave from (`-C DEV -P PORT`);
//! the arguments are a directed route (`-D sl2vl 0,1 7`) or a LID
//! (`sl2vl LID 7`).

use std::path::{Path, PathBuf};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;
use crate::fabric::read::parse::parse_vlarb;
use crate::fabric::read::perfquery::Perfquery;
use crate::fabric::tables::{PortId, VlArbState};

/// The most programs any read runs at once (`--workers` of the audit).
pub const MAX_WINDOW: usize = 16;

/// Programs at once unless the caller says otherwise: a switch's output
/// ports in rounds of eight (the node's own ports' queries all at once:
/// [`Smpquery::run_all`]).
pub const DEFAULT_WINDOW: usize = 8;

/// Runs the `smpquery` program at an absolute path (and `perfquery`, when
/// given, for the counters).
#[derive(Clone, Debug)]
pub struct Smpquery {
    program: PathBuf,
    /// The local port LID-routed queries leave from (`None`: the default).
    via: Option<PortId>,
    /// `perfquery`, for the PMA counters (`None`: counters are not read).
    perfquery: Option<PathBuf>,
    /// `ibroute`: the switches' forwarding tables (the deadlock check).
    ibroute: Option<PathBuf>,
    window: usize,
}

impl Smpquery {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            via: None,
            perfquery: None,
            ibroute: None,
            window: DEFAULT_WINDOW,
        }
    }

    /// LID-routed queries (the audit's) leave from `via`.
    #[must_use]
    pub fn via(mut self, via: Option<PortId>) -> Self {
        self.via = via;
        self
    }

    /// The PMA counters are read with the `perfquery` at `program`.
    #[must_use]
    pub fn perfquery(mut self, program: Option<PathBuf>) -> Self {
        self.perfquery = program;
        self
    }

    /// At most `window` programs at once (1..=[`MAX_WINDOW`]).
    /// The forwarding tables read by `ibroute` at `program`.
    #[must_use]
    pub fn ibroute(mut self, program: Option<PathBuf>) -> Self {
        self.ibroute = program;
        self
    }

    /// The `ibroute` it reads forwarding tables with, if any.
    pub fn ibroute_program(&self) -> Option<&Path> {
        self.ibroute.as_deref()
    }

    #[must_use]
    pub fn with_window(mut self, window: usize) -> Self {
        self.window = window.clamp(1, MAX_WINDOW);
        self
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The local port LID-routed queries leave from.
    pub fn via_port(&self) -> Option<&PortId> {
        self.via.as_ref()
    }

    /// The counters' reader, when the counters are read: `perfquery` from
    /// the same local port, as many at once.
    pub fn counters(&self) -> Option<Perfquery> {
        self.perfquery
            .as_ref()
            .map(|p| Perfquery::new(p).via(self.via.clone(), self.window))
    }

    /// How many programs run at once.
    pub fn window(&self) -> usize {
        self.window
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

    /// [`Smpquery::run`] for several queries, [`Smpquery::window`] at once
    /// (each round one wait, no thread), the answers in order.
    pub fn run_many(
        &self,
        queries: &[(Option<&PortId>, &[&str])],
        deadline: &Deadline,
    ) -> Vec<Result<String>> {
        self.run_rounds(queries, self.window, deadline)
    }

    /// [`Smpquery::run_many`], all at once (one wait): the few queries of
    /// the node's own ports.
    pub fn run_all(
        &self,
        queries: &[(Option<&PortId>, &[&str])],
        deadline: &Deadline,
    ) -> Vec<Result<String>> {
        self.run_rounds(queries, queries.len(), deadline)
    }

    fn run_rounds(
        &self,
        queries: &[(Option<&PortId>, &[&str])],
        window: usize,
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
        exec::run_window(&self.program, &refs, window, deadline)
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
