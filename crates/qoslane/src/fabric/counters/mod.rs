//! The fabric's own counters, as data and as judged: [`pma`] (per-SL data,
//! per-VL transmit wait; what two readings show: a job's evidence) and
//! [`wait`] (the audit's transmit wait: per level, where its lane waited
//! most). Read by the readers of `fabric/read/`.

pub mod pma;
pub mod wait;
