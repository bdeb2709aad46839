//! hookrun's integration tests: the real binary against temp-root hook trees.
//! One test binary (fast to link); the fixture builder is in `util`.

mod built_in;
mod deadlines;
mod discovery;
mod dispatch;
mod epilog;
mod health;
mod journal;
mod long_lines;
mod metrics;
mod private_conf;
mod prolog;
mod task_prolog;
mod trust;
mod util;
