//! The body of the `job_record` fuzz target, apart from libFuzzer so the
//! stable test suite runs the same checks (`tests/integration/reliability/fuzz_on_stable.rs` includes
//! this file as a module).
//!
//! The per-job record (`/run/qoslane/jobs/<id>.json`) is written by the root
//! Prolog and read by the TaskProlog as the job user (after the owner, mode
//! and no-symlink checks of `state::read_record_as_user`), whose stdout is
//! Slurm's protocol channel. For any bytes in the file:
//!
//! - the reader (`serde_json` into `qoslane::state::JobRecord`, unknown
//!   fields refused) does not panic, and a record it accepts survives a
//!   write and a read unchanged;
//! - what the TaskProlog would print for it
//!   (`qoslane::commands::task_prolog::protocol_lines`) is only
//!   `export NAME=VALUE` lines, then `unset NAME` lines, NAME a variable of
//!   the export table, `QOSLANE_LEVEL` or one a site may add (never
//!   LD_PRELOAD, PATH, Slurm's …), VALUE plain `[A-Za-z0-9_.-]+` — never a
//!   line break, `print`, or another variable, whatever a record says.

use qoslane::commands::task_prolog::{allowed, protocol_lines};
use qoslane::job::JobId;
use qoslane::state::JobRecord;

pub fn check(data: &[u8]) {
    let Ok(record) = serde_json::from_slice::<JobRecord>(data) else {
        return;
    };
    let bytes = serde_json::to_vec_pretty(&record).expect("a record serialises");
    let again: JobRecord = serde_json::from_slice(&bytes).expect("a written record reads");
    assert_eq!(again, record);

    for job in [record.job_id, JobId::parse("4294967295").expect("a job id")] {
        let (out, refused) = protocol_lines(job, &record);
        if job != record.job_id {
            assert!(out.is_empty(), "exports for another job's record");
            continue;
        }
        let mut printed = 0;
        let mut unsets = false;
        for line in out.split_terminator('\n') {
            if let Some(name) = line.strip_prefix("unset ") {
                assert!(allowed(name), "variable {name:?}");
                assert!(!name.contains(['=', ' ']), "unset {name:?}");
                unsets = true;
                printed += 1;
                continue;
            }
            assert!(!unsets, "an export after the unsets: {line:?}");
            let (name, value) = line
                .strip_prefix("export ")
                .and_then(|l| l.split_once('='))
                .unwrap_or_else(|| panic!("not an export line: {line:?}"));
            assert!(allowed(name), "variable {name:?}");
            assert!(
                !value.is_empty()
                    && value
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')),
                "value {value:?}"
            );
            printed += 1;
        }
        assert!(out.is_empty() || out.ends_with('\n'));
        assert_eq!(
            printed + refused.len(),
            record.exports.len() + record.unset.len()
        );
    }
}
