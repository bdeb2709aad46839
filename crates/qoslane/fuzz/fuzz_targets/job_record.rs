//! Fuzz target `job_record`: the checks are in `src/job_record.rs` (shared with the
//! stable test suite, `tests/integration/reliability/fuzz_on_stable.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/job_record.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::check(data));
