//! A hook built into the running binary: a program that embeds hookrun's
//! runner (qoslane's binary, run as `hookrun`) gives [`crate::app::main_with`]
//! the entry of its own hook. A hook file of the phase directory that *is*
//! the running binary — the file it leads to has the device and inode of
//! `/proc/self/exe` — then runs in a fork of hookrun that calls the entry,
//! without exec (`nodeio::child`'s built-in programs): one process start per
//! hook instead of two. Everything else is the hook's as before: judged by
//! [`crate::trust`], its own process group, its deadline and kills, the
//! environment, its output line by line, its exit status.
//!
//! A hook that is another file (a newer binary an upgrade put in place while
//! this one runs, a script, another program) is exec'd as before; so is
//! every hook when hookrun is the plain `hookrun` (no entry), or when the
//! process has another thread (never in hookrun: nothing it does starts one;
//! `nodeio` asks before each fork).

use std::os::unix::fs::MetadataExt;

use nodeio::child::Entry;

use crate::discover::Hook;
use crate::trust::FileId;

/// The running binary and its hook's entry.
#[derive(Debug, Clone, Copy)]
pub struct BuiltIn {
    pub entry: Entry,
    /// The running binary (`/proc/self/exe`).
    pub binary: FileId,
}

impl BuiltIn {
    /// The entry, with the running binary's identity; `None` when
    /// `/proc/self/exe` cannot be read (every hook is exec'd then).
    pub fn of_running_binary(entry: Entry) -> Option<BuiltIn> {
        let exe = std::fs::metadata("/proc/self/exe").ok()?;
        Some(BuiltIn {
            entry,
            binary: FileId {
                dev: exe.dev(),
                ino: exe.ino(),
            },
        })
    }

    /// Whether `hook` is the running binary: its judged file is this one.
    pub fn runs(&self, hook: &Hook) -> bool {
        hook.file == Some(self.binary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn entry(_: &[OsString]) -> i32 {
        0
    }

    fn hook(file: Option<FileId>) -> Hook {
        Hook {
            file_name: "10-x".into(),
            name: "10-x".into(),
            path: "/etc/slurm/prolog.d/10-x".into(),
            required: true,
            refused: None,
            file,
        }
    }

    #[test]
    fn only_the_running_binary_runs_built_in() {
        let built_in = BuiltIn::of_running_binary(entry).expect("/proc/self/exe");
        let me = std::fs::metadata(std::env::current_exe().expect("exe")).expect("stat");
        assert_eq!(
            built_in.binary,
            FileId {
                dev: me.dev(),
                ino: me.ino()
            }
        );
        assert!(built_in.runs(&hook(Some(built_in.binary))));
        let other = FileId {
            dev: built_in.binary.dev,
            ino: built_in.binary.ino + 1,
        };
        assert!(!built_in.runs(&hook(Some(other))), "another file");
        assert!(!built_in.runs(&hook(None)), "a refused hook");
    }
}
