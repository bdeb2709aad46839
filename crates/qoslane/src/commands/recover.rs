//! `qoslane recover`: roll back an interrupted transaction (also done by
//! every other run when it takes the node lock).

use super::Ctx;
use super::session::Session;
use crate::audit::Outcome;
use crate::deadline::Deadline;
use crate::exit_code;

pub fn run(ctx: &Ctx) -> i32 {
    let mut s = Session::new(&ctx.paths, "recover", Deadline::after(ctx.timeout));
    let had_journal = s.paths.journal().exists();
    match s.node() {
        Ok(_) => {
            let outcome = if had_journal {
                Outcome::Reverted
            } else {
                Outcome::Unchanged
            };
            if !had_journal {
                s.entry.notes.push("no interrupted transaction".into());
            }
            s.finish(outcome, None);
            exit_code::OK
        }
        Err(e) => {
            let code = e.exit_code();
            s.finish(Outcome::Failed, Some(&e));
            code
        }
    }
}
