//! The `hookrun` binary: a thin shell over the library (see `lib.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = hookrun::app::main();
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}
