//! `qoslane recover`: roll back an interrupted transaction (also done by
//! every other run when it takes the node lock).

use super::Ctx;
use super::session::Session;
use crate::deadline::Deadline;
use crate::exit_code::ExitClass;
use crate::report::{Event, Exit, Outcome, Report};

pub fn run(ctx: &Ctx) -> ExitClass {
    let mut s = Session::new(&ctx.paths, Event::Recover, Deadline::after(ctx.timeout));
    let mut r = Report::new(Event::Recover);
    let result = match s.lock() {
        Ok(Some(recovered)) => {
            r.gone(recovered.gone);
            let j = recovered.journal;
            r.job.job_id = j.job_id;
            r.changes = j.changes;
            r.rolled_back = true;
            r.notes.push(format!(
                "rolled back an interrupted {} (pid {})",
                j.event, j.pid
            ));
            Ok(r.with(Outcome::Reverted))
        }
        Ok(None) => {
            r.notes.push("no interrupted transaction".into());
            Ok(r.with(Outcome::Unchanged))
        }
        Err(e) => Err(r.fail(e, Exit::ByError)),
    };
    s.finish(result)
}
