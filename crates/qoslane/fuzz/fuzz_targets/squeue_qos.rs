//! Fuzz target `squeue_qos`: the checks are in `src/squeue.rs` (shared with the
//! stable test suite, `tests/integration/reliability/fuzz_on_stable.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/squeue.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::check(data));
