//! Fuzz the mapping parser and validator: arbitrary UTF-8 in, no panic out,
//! and the invariants of `qoslane_fuzz::check` hold.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A mapping file that is not UTF-8 is refused before parsing
    // (`config::read_text`): only text reaches the parser.
    if let Ok(src) = std::str::from_utf8(data) {
        qoslane_fuzz::check(src);
    }
});
