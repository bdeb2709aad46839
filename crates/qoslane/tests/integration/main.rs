//! qoslane's integration tests: the real binary (and the library) against
//! temp-root nodes. One test binary (fast to link), a module per story; the
//! fixture builder is in `util`. Fixture files stay beside this directory:
//! `tests/fixtures/`, `tests/golden/`, `tests/mappings/`, `tests/snapshots/`.

mod admin;
mod cli;
mod cluster;
mod cost;
mod counters;
mod docs;
mod fabric;
mod fabric_verdict;
mod grants;
mod health_deadline;
mod hooks;
mod layers;
mod libraries;
mod mapping_in_force;
mod metrics;
mod notice;
mod placement;
mod planner;
mod reliability;
mod settings;
mod slurm_config;
mod sm_config;
mod trust;
mod util;
mod validate;
