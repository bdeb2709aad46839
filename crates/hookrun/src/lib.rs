//! hookrun: the Slurm Prolog/Epilog/TaskProlog/HealthCheck hook framework.
//!
//! Slurm points `Prolog=`, `Epilog=`, `TaskProlog=` and `HealthCheckProgram=`
//! at this one binary; it runs the executables of `prolog.d/`, `epilog.d/`,
//! `task-prolog.d/` or `health.d/` in order, each under a deadline, and turns
//! their results into what Slurm understands. docs/hookrun.md is the admin's
//! guide; this is the map of the code:
//!
//! - [`cli`] — command-line syntax, its global flags in [`options`]; [`config`]
//!   — what they mean, merged with the environment, [`conffile`]
//!   (`hookrun.conf`) and defaults;
//! - [`phase`] — the four hook points and how they differ;
//! - [`discover`] — which files of a hook directory run, in which order;
//!   [`trust`] — who may own and write them (else they are refused);
//! - [`child`] — running one program (`nodeio::child`: its own process
//!   group, a deadline) with hookrun's limits, [`signals`] stopping it on
//!   SIGTERM/SIGINT/SIGHUP;
//! - [`runner`] — running a phase's hooks and reporting each result; a hook
//!   that is the running binary itself runs built in ([`builtin`]: a fork
//!   calling the entry a program embedding hookrun gave [`app::main_with`],
//!   no exec);
//!   [`protocol`] — the TaskProlog stdout protocol;
//! - [`app`] — dispatch; [`decide`] — what a phase's result means (exit
//!   non-zero, requeue-hold, drain with hookrun's reason, shaped by
//!   [`reason`]; [`health`] drain/resume) through [`slurm`]'s scontrol calls;
//! - [`metrics`] — counters in a locked state file, rendered for node_exporter;
//! - [`exit`] — the exit codes; [`log`] — stderr (and journal) lines; [`list`] —
//!   `hookrun list`; [`manual`] — the man pages (hookrun(8), hookrun.conf(5)).
//!
//! stdout is written in three places only: TaskProlog protocol lines
//! ([`runner`]), the drain reason of a failed health check, which slurmd logs
//! ([`health`]), and `hookrun list`.

pub mod app;
pub mod builtin;
pub mod child;
pub mod cli;
pub mod conffile;
pub mod config;
pub mod decide;
pub mod discover;
pub mod drained;
pub mod exit;
pub mod health;
pub mod list;
pub mod log;
pub mod manual;
pub mod metrics;
pub mod options;
pub mod phase;
pub mod protocol;
pub mod reason;
pub mod runner;
pub mod signals;
pub mod slurm;
pub mod trust;
