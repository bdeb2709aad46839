//! `qoslane cluster`: which nodes carry which placed (`fail_job`) level,
//! as slurmctld knows it — each node's ActiveFeatures, which its own
//! `qoslane health` keeps — and the pending jobs qoslane turned away (their
//! `AdminComment`) or that wait for a level carried nowhere. Read-only: two
//! requests to slurmctld (`scontrol show node -o`, `squeue`), nothing
//! written, no root needed; runs on any host with Slurm's client commands.
//!
//! Three steps: [`parse`] reads Slurm's answers, [`model`] decides the
//! view (pure), [`render`] words it; the JSON is the model serialised.
//! Exit 0 when every placed level is carried on a node in service, 1 when
//! one is carried nowhere; 69 when scontrol or squeue fails, 75 when one
//! does not answer in time.

mod model;
mod parse;
mod render;

pub use model::{ClusterView, view};
pub use parse::{SQUEUE_FORMAT, jobs, nodes};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Ctx;
use crate::cli::{ClusterArgs, Format};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;
use crate::exit_code::ExitClass;

/// scontrol when neither `--scontrol` nor `QOSLANE_SCONTROL` names one.
pub const DEFAULT_SCONTROL: &str = "/usr/bin/scontrol";

/// The most either program may print: `scontrol show node -o` is ~1 KB a
/// node, squeue's line ~200 bytes a pending job.
const MAX_ANSWER: u64 = 64 << 20;

pub fn run(ctx: &Ctx, args: &ClusterArgs) -> Result<ExitClass> {
    let scontrol = args
        .scontrol
        .clone()
        .or_else(|| ctx.paths.scontrol.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SCONTROL));
    let squeue = args
        .squeue
        .clone()
        .unwrap_or_else(|| ctx.paths.squeue.clone());
    let deadline = Deadline::after(Duration::from_secs(args.timeout));
    let nodes = ask(&scontrol, &parse::SCONTROL_ARGS, &deadline, parse::nodes)?;
    let jobs = ask(&squeue, &parse::SQUEUE_ARGS, &deadline, parse::jobs)?;
    let v = model::view(&nodes, &jobs);
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    if args.format == Format::Json {
        let text = serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?;
        writeln!(out, "{text}").map_err(w)?;
    } else {
        out.write_all(render::human(&v).as_bytes()).map_err(w)?;
    }
    Ok(if v.needs_attention() {
        ExitClass::Failed
    } else {
        ExitClass::Ok
    })
}

/// Runs `program args` and parses its output; an error names the command.
fn ask<T>(
    program: &Path,
    args: &[&str],
    deadline: &Deadline,
    parse: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<T> {
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let command = format!("`{name} {}`", args.join(" ").replace('\t', "\\t"));
    let fail = |detail: String| Error::Program {
        program: program.to_owned(),
        detail: format!(
            "{command}: {detail}; the cluster view needs slurmctld's answer (`scontrol ping`; \
             --scontrol/--squeue or QOSLANE_SCONTROL/QOSLANE_SQUEUE name the programs)"
        ),
    };
    let out = match exec::run_capped(program, args, MAX_ANSWER, deadline) {
        Ok(o) => o,
        Err(Error::Program { detail, .. }) => return Err(fail(detail)),
        Err(e) => return Err(e),
    };
    parse(&String::from_utf8_lossy(&out.stdout)).map_err(fail)
}
