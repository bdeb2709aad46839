//! Which jobs Slurm has on this node: `squeue -h -w NODE -o %A` (one RPC,
//! `QOSLANE_SQUEUE`, under the deadline). squeue lists pending, running and
//! completing jobs, so a job it does not list for this node has left it —
//! exact, unlike `scontrol listpids`, which misses a job that has no step
//! yet (no `PrologFlags=Contain`). Used by `health` to find records that an
//! Epilog killed mid-way left behind.

use std::collections::BTreeSet;
use std::path::Path;

use super::JobId;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;

/// The jobs Slurm has on `node`. Any doubt is an error (the caller then
/// removes nothing): a failed or odd answer is never "no jobs".
pub fn jobs_on_node(squeue: &Path, node: &str, deadline: &Deadline) -> Result<BTreeSet<JobId>> {
    let out = exec::run(squeue, &["-h", "-w", node, "-o", "%A"], deadline)?;
    parse(&String::from_utf8_lossy(&out.stdout)).map_err(|why| Error::Program {
        program: squeue.to_path_buf(),
        detail: format!("-w {node} -o %A: {why}"),
    })
}

fn parse(output: &str) -> std::result::Result<BTreeSet<JobId>, String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| JobId::parse(l).map_err(|_| format!("`{}` is not a job id", l.escape_debug())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_one_per_line_or_an_error() {
        let ids = parse("12\n7\n\n").unwrap();
        assert_eq!(ids.len(), 2);
        assert!(parse("").unwrap().is_empty());
        assert!(parse("12\nJOBID\n").is_err());
    }
}
