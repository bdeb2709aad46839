//! `qoslane recover`: roll back an interrupted transaction (also done by
//! every other run when it takes the node lock).

use super::Ctx;
use crate::deadline::Deadline;
use crate::exit_code::ExitClass;
use crate::report::{Event, Exit, Outcome, Report};
use crate::run::session::Session;

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
            let note = format!("rolled back an interrupted {} (pid {})", j.event, j.pid);
            r.notes.push(note.clone());
            let mut r = r.with(Outcome::Reverted);
            r.said = Some(r.summary_line(&note));
            Ok(r)
        }
        Ok(None) => {
            let note = "the journal checked: no interrupted transaction";
            r.notes.push("no interrupted transaction".into());
            let mut r = r.with(Outcome::Unchanged);
            r.said = Some(r.summary_line(note));
            Ok(r)
        }
        Err(e) => Err(r.fail(e, Exit::ByError)),
    };
    s.finish(result)
}
