//! The QoS → SL/VL mapping file: parsing with positions ([`yaml`]), every
//! key declared once ([`keys`]) and its documentation rendered from that
//! ([`keydocs`]), checking ([`shape`], then [`validate`]),
//! a level's lists (`node_settings`, `sm_traffic`: [`traffic`]; a name once
//! per list: `once.rs`), the site's
//! `exports:` edits (`exports.rs`), the
//! validated types ([`types`]), diagnostics ([`diagnostic`]) and where a
//! valid mapping's parts are written ([`places`]). Pure:
//! reads a string, touches nothing.

pub mod diagnostic;
mod exports;
pub mod keydocs;
pub mod keys;
mod node_settings;
mod once;
pub mod places;
mod shape;
mod traffic;
mod traffic_check;
pub mod types;
pub mod validate;
pub mod yaml;

pub use diagnostic::{Diagnostic, Severity};
pub use types::*;
pub use validate::{Validation, on_unknown_qos_of, validate_str, validate_str_until};
