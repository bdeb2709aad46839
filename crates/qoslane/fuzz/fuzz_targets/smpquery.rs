//! Fuzz target `smpquery`: the checks are in `src/smpquery.rs` (shared with the
//! stable test suite, `tests/integration/reliability/fuzz_on_stable.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../src/smpquery.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::check(data));
