//! `qoslane status`: what the node looks like now, the way `systemctl
//! status` reads: what is in force (and since when), the cached fabric probe
//! judged for every level, which jobs hold which level and SL since when,
//! the settings against their baseline, the last health check, a pending
//! journal, the last problems from the end of the audit log. `--json` gives
//! the same facts as one object (`"schema": 1`, docs/admin-guide.md §8).
//!
//! Three steps: [`gather`] reads (read-only: no lock, and it creates or
//! writes nothing; a node where no job ran yet has no state directories,
//! which reads as empty; state it cannot read or trust is shown, not
//! fatal), [`judge`] decides (one pure function: every "is this in order";
//! what the audit log's end and the fabric cache say in [`judge_audit`] and
//! [`judge_fabric`]),
//! [`render`] words it; the JSON is the [`model`] serialised.
//!
//! Exit 0 when the node is in order, 1 when something needs attention (the
//! reasons are listed; the first line starts with `×`).

mod gather;
mod judge;
mod judge_audit;
mod judge_fabric;
mod model;
mod render;

use std::io::Write;

use super::Ctx;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use model::Condition;

pub fn run(ctx: &Ctx, as_json: bool) -> Result<ExitClass> {
    let facts = gather::gather(&ctx.paths, &Deadline::after(ctx.timeout));
    let st = judge::judge(facts);
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    if as_json {
        let text = serde_json::to_string_pretty(&st).map_err(|e| Error::Internal(e.to_string()))?;
        writeln!(out, "{text}").map_err(w)?;
    } else {
        out.write_all(render::human(&st).as_bytes()).map_err(w)?;
    }
    Ok(match st.state {
        Condition::Ok => ExitClass::Ok,
        Condition::Attention => ExitClass::Failed,
    })
}
