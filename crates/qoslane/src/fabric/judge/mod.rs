//! Judging, pure: what the caller gathered in, verdicts out. Nothing here
//! reads the fabric, a file or the clock.
//!
//! - [`lane`]: the one set of lane rules (dropped, not operational, other
//!   VL, starved) for every egress port;
//! - [`check`]: one level on one of the node's own ports;
//! - [`assessment`]: what an assessment found and the views taken of it
//!   ([`assessment::FabricVerdict`], per level, per port);
//! - [`policy`]: `fabric_check: enforce | warn | off` judged once on what
//!   was gathered ([`policy::judge_gathered`]; the gathering is
//!   `gather/policy.rs`');
//! - [`sm_config`]: the OpenSM options a mapping asks for;
//! - [`deadlock`]: a level's channel dependency graph on the routes in
//!   use, acyclic or one credit loop named.
//!
//! The lane rules on the switch a port is cabled to are the first hop's
//! (`first_hop/judge.rs`).

pub mod assessment;
pub mod check;
pub mod deadlock;
pub mod lane;
pub mod policy;
pub mod sm_config;
pub mod sm_policy;
