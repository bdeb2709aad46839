//! What hookrun knows of its own drain of this node: a one-word file in its
//! state directory (`<state_dir>/drained`: `drained` or `in-service`), so
//! that a passing health check asks slurmctld about the node only when a
//! drain of hookrun's may be in place. `scontrol show node` is one request
//! answered with the whole node table, and one for the partitions: on every
//! node at every `HealthCheckInterval` that is 2,000 requests per interval at
//! 1,000 nodes, for nothing, when no node is drained (measured with sdiag by
//! tests/e2e/fabric_placement.sh).
//!
//! Written `drained` before every drain hookrun asks for (the health check's,
//! a failed Prolog's or Epilog's): a drain that went through but whose answer
//! was lost is still known. Written `in-service` once a passing health check
//! found no drain of hookrun's (it resumed one, or there was none: an admin
//! resumed the node, or drained it with a reason of their own). A missing or
//! unreadable file is not knowing: the next passing check asks, once (the
//! first run after an install or an upgrade from a hookrun that kept no such
//! file, whose drain a passing check must still resume). A file that cannot
//! be written is removed, so that it never says `in-service` over a drain.

use std::path::Path;

use nodeio::atomic::{self, Durability};
use nodeio::trusted::Symlink;
use nodeio::walk::Judge;

/// The file, in the state directory.
pub const FILE: &str = "drained";

/// What the file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// hookrun asked slurmctld to drain the node and has not seen it resumed.
    Drained,
    /// A passing check found no drain of hookrun's.
    InService,
    /// No file (or not one of the two words): ask.
    Unknown,
}

/// What the state directory's file says, read as hookrun's other state is
/// (nodeio's trusted read under `root`: a symlink or a file others may
/// write is not believed).
pub fn read(root: &Path, state_dir: &Path) -> Known {
    match nodeio::trusted::read(root, &state_dir.join(FILE), Symlink::Refuse, 64) {
        Ok(Some(bytes)) => match String::from_utf8_lossy(&bytes).trim() {
            "drained" => Known::Drained,
            "in-service" => Known::InService,
            _ => Known::Unknown,
        },
        _ => Known::Unknown,
    }
}

/// Records whether hookrun's drain may be in place (`drained`) under `root`
/// (the state directory made when missing). When it cannot be written the
/// file is removed (not knowing: the next passing check asks); the error says
/// why, for the log.
pub fn record(root: &Path, state_dir: &Path, drained: bool) -> Result<(), String> {
    let path = state_dir.join(FILE);
    let word = if drained { "drained\n" } else { "in-service\n" };
    let written = atomic::replace(
        root,
        &path,
        word.as_bytes(),
        0o644,
        Judge::NoFollow,
        true,
        Durability::Durable,
    );
    match written {
        Ok(_) => Ok(()),
        Err(error) => Err(match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => format!(
                "{} could not be written ({error}) nor removed ({e})",
                path.display()
            ),
            _ => format!("{} could not be written ({error})", path.display()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_recorded_is_read_back_and_anything_else_is_unknown() {
        let root = tempfile::tempdir().expect("tempdir");
        let state = root.path().join("var/lib/hookrun");
        assert_eq!(read(root.path(), &state), Known::Unknown, "no file");
        record(root.path(), &state, true).expect("recorded");
        assert_eq!(read(root.path(), &state), Known::Drained);
        record(root.path(), &state, false).expect("recorded");
        assert_eq!(read(root.path(), &state), Known::InService);
        std::fs::write(state.join(FILE), "maybe\n").expect("write");
        assert_eq!(read(root.path(), &state), Known::Unknown);
    }

    #[test]
    fn a_record_that_cannot_be_written_says_why() {
        let root = tempfile::tempdir().expect("tempdir");
        // the state directory's parent is a file: nothing can be made there
        std::fs::write(root.path().join("var"), "").expect("write");
        let state = root.path().join("var/lib/hookrun");
        let error = record(root.path(), &state, true).expect_err("not written");
        assert!(error.contains("could not be written"), "{error}");
        assert_eq!(read(root.path(), &state), Known::Unknown);
    }
}
