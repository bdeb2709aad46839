//! Who may decide what hookrun runs as root. hookrun runs every executable of
//! a hook directory as the user it runs as — root for the Prolog, Epilog and
//! health checks — and `hookrun.conf` names a program it runs too
//! (`scontrol`). Whoever can write any of these runs commands as root. So:
//!
//! - a hook file (the file a symlink leads to), the directory holding it, a
//!   phase directory and `hookrun.conf` must be owned by root or by the user
//!   hookrun runs as (a TaskProlog runs as the job user; a hook of their own
//!   gives them nothing), and not be writable by group or others;
//! - every directory above them must not be writable by group or others
//!   unless it is sticky (`/tmp`: others cannot rename or remove what is
//!   ours there).
//!
//! A hook that fails the check is not run and counts as a failed hook (a
//! required one triggers the phase's policy); a phase directory or a
//! configuration that fails it is a setup failure. The reason names the path,
//! its owner or mode.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Why `md` (of `path`) may not be trusted as a file or directory that
/// decides what runs; `None` when it may.
fn owner_and_mode(path: &Path, md: &fs::Metadata) -> Option<String> {
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != 0 && md.uid() != me {
        return Some(format!(
            "{} is owned by uid {}, not root{}",
            path.display(),
            md.uid(),
            if me == 0 {
                String::new()
            } else {
                format!(" or uid {me}")
            }
        ));
    }
    let mode = md.permissions().mode();
    if mode & GROUP_OR_OTHER_WRITE != 0 {
        return Some(format!(
            "{} is writable by group or others (mode {:o})",
            path.display(),
            mode & 0o7777
        ));
    }
    None
}

/// The directories above `path` (already canonical): none writable by
/// group or others unless sticky.
fn ancestors(path: &Path) -> Result<(), String> {
    for dir in path.ancestors().skip(1) {
        let md = fs::metadata(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
        let mode = md.permissions().mode();
        if mode & GROUP_OR_OTHER_WRITE != 0 && mode & STICKY == 0 {
            return Err(format!(
                "{} is writable by group or others (mode {:o})",
                dir.display(),
                mode & 0o7777
            ));
        }
    }
    Ok(())
}

/// A directory whose entries hookrun runs: owned by root or us, writable by
/// no one else, nor replaceable through a directory above it.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let real =
        fs::canonicalize(dir).map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    let md = fs::metadata(&real).map_err(|e| format!("cannot inspect {}: {e}", real.display()))?;
    if let Some(why) = owner_and_mode(&real, &md) {
        return Err(why);
    }
    ancestors(&real)
}

/// A file hookrun runs or reads its settings from (through symlinks: the
/// file itself), and the directory that holds it.
pub fn check_file(path: &Path) -> Result<(), String> {
    let real =
        fs::canonicalize(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
    let md = fs::metadata(&real).map_err(|e| format!("cannot inspect {}: {e}", real.display()))?;
    if let Some(why) = owner_and_mode(&real, &md) {
        return Err(why);
    }
    match real.parent() {
        Some(parent) => check_dir(parent),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn modes_and_owners() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("prolog.d");
        fs::create_dir(&dir).expect("mkdir");
        chmod(&dir, 0o755);
        let hook = dir.join("10-x");
        fs::write(&hook, "#!/bin/sh\n").expect("write");
        chmod(&hook, 0o755);
        assert_eq!(check_dir(&dir), Ok(()));
        assert_eq!(check_file(&hook), Ok(()));

        chmod(&hook, 0o775);
        assert!(
            check_file(&hook)
                .unwrap_err()
                .contains("writable by group or others (mode 775)")
        );
        chmod(&hook, 0o755);
        chmod(&dir, 0o1777);
        assert!(
            check_dir(&dir).unwrap_err().contains("mode 1777"),
            "sticky does not help the hook dir"
        );
        assert!(check_file(&hook).is_err(), "nor the dir holding a hook");
        chmod(&dir, 0o755);

        // A symlink is judged by the file it leads to and that file's place.
        let elsewhere = tmp.path().join("open");
        fs::create_dir(&elsewhere).expect("mkdir");
        chmod(&elsewhere, 0o777);
        let target = elsewhere.join("hook");
        fs::write(&target, "#!/bin/sh\n").expect("write");
        chmod(&target, 0o755);
        let link = dir.join("20-link");
        symlink(&target, &link).expect("symlink");
        assert!(check_file(&link).unwrap_err().contains("mode 777"));

        // Sticky directories above are fine (/tmp).
        let sticky = tmp.path().join("sticky");
        fs::create_dir(&sticky).expect("mkdir");
        chmod(&sticky, 0o1777);
        let inner = sticky.join("prolog.d");
        fs::create_dir(&inner).expect("mkdir");
        chmod(&inner, 0o755);
        assert_eq!(check_dir(&inner), Ok(()));
        chmod(&sticky, 0o777);
        assert!(check_dir(&inner).unwrap_err().contains("mode 777"));
    }
}
