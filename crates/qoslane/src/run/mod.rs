//! The machinery every node-changing run shares, below the commands (no
//! command imports another command's module): the session ([`session`]:
//! deadline, node lock, mapping, and `Session::finish`, where a result
//! becomes the audit line, the metrics and the exit class), the Prolog's
//! grant assembled in one place ([`job_grant`]), the notice a Prolog leaves
//! its job ([`notice`]) and a job's counters ([`job_counters`]).

pub mod job_counters;
pub mod job_grant;
pub mod notice;
pub mod placement;
pub mod session;
