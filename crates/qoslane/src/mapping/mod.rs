//! The QoS → SL/VL mapping file: parsing with positions ([`yaml`]), checking
//! ([`validate`]), the validated types ([`types`]) and diagnostics
//! ([`diagnostic`]). Pure: reads a string, touches nothing.

pub mod diagnostic;
pub mod types;
pub mod validate;
pub mod yaml;

pub use diagnostic::{Diagnostic, Severity};
pub use types::*;
pub use validate::{Validation, validate_str, validate_str_until};
