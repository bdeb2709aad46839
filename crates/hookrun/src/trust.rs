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

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nodeio::trusted;
use nodeio::walk::Dir;

/// A directory whose entries hookrun runs: reached from the root prefix
/// through directories nobody else can write (sticky ones allowed), itself
/// owned by root or us and writable by no one else (`nodeio::trusted`).
pub fn check_dir(root: &Path, dir: &Path) -> Result<(), String> {
    open_dir(root, dir).map(drop).map_err(|e| e.to_string())
}

/// [`check_dir`], keeping the judged directory: its entries are listed and
/// judged through it ([`check_file_in`]). `nodeio`'s error, whose
/// [`nodeio::Error::is_not_found`] tells a missing directory.
pub fn open_dir(root: &Path, dir: &Path) -> Result<Dir, nodeio::Error> {
    trusted::check_dir(root, dir)
}

/// Which file a path leads to: its device and inode, as judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// [`check_file`] of the entry `name` of a directory [`open_dir`] judged,
/// opened through it (not reached from the root prefix again).
pub fn check_file_in(root: &Path, dir: &Dir, name: &OsStr) -> Result<FileId, String> {
    trusted::check_file_in(root, dir, name)
        .map(|o| FileId {
            dev: o.dev,
            ino: o.ino,
        })
        .map_err(|e| e.to_string())
}

/// A file hookrun runs or reads its configuration from: opened without
/// following a symlink someone else made, judged by its descriptor, in a
/// directory [`check_dir`] accepts. A symlink of root or ours is judged by its target.
/// Which file was judged (the symlink's target).
pub fn check_file(root: &Path, path: &Path) -> Result<FileId, String> {
    trusted::check_file(root, path)
        .map(|o| FileId {
            dev: o.dev,
            ino: o.ino,
        })
        .map_err(|e| e.to_string())
}

/// A file the TaskProlog reads: the TaskProlog runs as the job's user, any
/// user, so the file must be readable by others and every directory above it,
/// up to the root prefix, searchable by others. Judged by the mode bits (the
/// question is "can every user read it", not "can we"); a missing file is
/// fine (defaults). The reason names the path and its mode.
pub fn check_readable_by_all(root: &Path, path: &Path) -> Result<(), String> {
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o7777)
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    if std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(());
    }
    let bits = mode(path)?;
    if bits & 0o004 == 0 {
        return Err(format!(
            "{}: not readable by other users (mode {bits:o})",
            path.display()
        ));
    }
    for dir in path
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
    {
        let bits = mode(dir)?;
        if bits & 0o001 == 0 {
            return Err(format!(
                "{}: directory not searchable by other users (mode {bits:o})",
                dir.display()
            ));
        }
        if dir == root {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn modes_and_owners() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        let dir = tmp.path().join("prolog.d");
        fs::create_dir(&dir).expect("mkdir");
        chmod(&dir, 0o755);
        let hook = dir.join("10-x");
        fs::write(&hook, "#!/bin/sh\n").expect("write");
        chmod(&hook, 0o755);
        assert_eq!(check_dir(root, &dir), Ok(()));
        assert!(check_file(root, &hook).is_ok());

        chmod(&hook, 0o775);
        assert!(
            check_file(root, &hook)
                .unwrap_err()
                .contains("writable by group or others (mode 775)")
        );
        chmod(&hook, 0o755);
        chmod(&dir, 0o1777);
        assert!(
            check_dir(root, &dir).unwrap_err().contains("mode 1777"),
            "sticky does not help the hook dir"
        );
        assert!(
            check_file(root, &hook).is_err(),
            "nor the dir holding a hook"
        );
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
        assert!(check_file(root, &link).unwrap_err().contains("mode 777"));

        // Sticky directories above are fine (/tmp).
        let sticky = tmp.path().join("sticky");
        fs::create_dir(&sticky).expect("mkdir");
        chmod(&sticky, 0o1777);
        let inner = sticky.join("prolog.d");
        fs::create_dir(&inner).expect("mkdir");
        chmod(&inner, 0o755);
        assert_eq!(check_dir(root, &inner), Ok(()));
        chmod(&sticky, 0o777);
        assert!(check_dir(root, &inner).unwrap_err().contains("mode 777"));
    }

    #[test]
    fn readable_by_all_wants_others_read_and_search() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path();
        chmod(root, 0o755);
        let dir = root.join("etc");
        fs::create_dir(&dir).expect("mkdir");
        chmod(&dir, 0o755);
        let conf = dir.join("hookrun.conf");
        assert_eq!(
            check_readable_by_all(root, &conf),
            Ok(()),
            "missing is fine"
        );
        fs::write(&conf, "budget = 20s\n").expect("write");
        chmod(&conf, 0o644);
        assert_eq!(check_readable_by_all(root, &conf), Ok(()));
        for private in [0o600, 0o640, 0o400] {
            chmod(&conf, private);
            let why = check_readable_by_all(root, &conf).unwrap_err();
            assert!(
                why.contains(&format!("not readable by other users (mode {private:o})")),
                "{why}"
            );
        }
        chmod(&conf, 0o644);
        chmod(&dir, 0o750);
        let why = check_readable_by_all(root, &conf).unwrap_err();
        assert!(
            why.contains("not searchable by other users (mode 750)"),
            "{why}"
        );
        chmod(&dir, 0o755);
        chmod(root, 0o700);
        assert!(
            check_readable_by_all(root, &conf).is_err(),
            "the root prefix counts"
        );
    }
}
