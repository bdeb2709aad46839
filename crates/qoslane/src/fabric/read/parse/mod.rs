//! Every parser of what the fabric tools print: `smpquery`'s tables and
//! nodes ([`smp`]), `perfquery`'s counters ([`counters`]) and
//! `ibnetdiscover -p`'s topology ([`topology`]), `ibroute`'s forwarding
//! table ([`route`]), strictly, on one way of
//! reading lines ([`lines`]). Pure (text in, `fabric/tables.rs` out, no
//! I/O); the program reader (`programs.rs`, `perfquery.rs`) and the first
//! hop call them.
//!
//! The formats are those of infiniband-diags 44 (libibmad's dump functions);
//! captured outputs live in `tests/fixtures/smpquery/`,
//! `tests/fixtures/smpquery-switch/` and `tests/fixtures/ibnetdiscover/`.
//! Anything else is an error quoting the line, so a format change cannot pass
//! as "aligned".
//!
//! Every `pub fn` of this folder is a parser named in [`PARSERS`]; the fuzz
//! target (`fuzz/src/smpquery.rs`, on stable in `reliability::fuzz_on_stable`)
//! runs each, and a test there fails when a `pub fn` of these files is not
//! listed.

pub mod counters;
pub mod lines;
pub mod route;
pub mod sa;
pub mod smp;
pub mod topology;

pub use counters::parse_perfquery;
pub use lines::ParseError;
pub use route::parse_forwarding;
pub use sa::parse_path_record_sl;
pub use smp::{
    parse_lid, parse_nodedesc, parse_nodeinfo, parse_portinfo, parse_sl2vl, parse_switch_sl2vl,
    parse_vlarb,
};
pub use topology::parse_topology;

/// Every parser of this folder, by name: the fuzz target runs each (and
/// panics on a name it does not know).
pub const PARSERS: [&str; 11] = [
    "parse_sl2vl",
    "parse_switch_sl2vl",
    "parse_portinfo",
    "parse_vlarb",
    "parse_nodeinfo",
    "parse_nodedesc",
    "parse_lid",
    "parse_topology",
    "parse_perfquery",
    "parse_path_record_sl",
    "parse_forwarding",
];
