//! Reading and writing node settings (sysfs, configfs, procfs files) under
//! the run's deadline, and comparing values the way the kernel writes them.

use std::io::{Read, Write};
use std::path::PathBuf;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::paths::Paths;

/// The file for a setting path (as written in the mapping) under the root.
fn file(paths: &Paths, path: &str) -> PathBuf {
    paths.root.join(path.trim_start_matches('/'))
}

/// Reads a setting's current value in the form that can be written back
/// ([`writable`]): what a before-value is saved as and restored from.
pub fn read(paths: &Paths, path: &str, deadline: &Deadline) -> Result<String> {
    read_raw(paths, path, deadline).map(|raw| writable(&raw))
}

/// What kind of value a setting file holds, judged from what it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// One value (`106`, `16777216`).
    Plain,
    /// The kernel lists the choices and brackets the selected one
    /// (`/sys/block/<dev>/queue/scheduler`: `[none] mq-deadline`); only the
    /// selection can be written.
    ChoiceList,
    /// Several whitespace-separated values (`tcp_rmem`: `4096\t131072\t6291456`);
    /// written back separated by single spaces.
    MultiValue,
}

/// The kind of a value as read.
pub fn kind(raw: &str) -> ValueKind {
    let mut tokens = raw.split_whitespace();
    let first = tokens.next();
    let more = tokens.next().is_some();
    if raw.split_whitespace().any(|t| selected(t).is_some()) {
        ValueKind::ChoiceList
    } else if more || first.is_some_and(|t| t != raw.trim()) {
        ValueKind::MultiValue
    } else {
        ValueKind::Plain
    }
}

/// What writing back a value read as `raw` must write: the selection of a
/// choice list, the values of a multi-value file separated by single spaces,
/// a plain value as it is (trailing newline removed by the reader).
pub fn writable(raw: &str) -> String {
    match kind(raw) {
        ValueKind::ChoiceList => raw
            .split_whitespace()
            .find_map(selected)
            .unwrap_or_default()
            .to_owned(),
        ValueKind::MultiValue => raw.split_whitespace().collect::<Vec<_>>().join(" "),
        ValueKind::Plain => raw.to_owned(),
    }
}

fn selected(token: &str) -> Option<&str> {
    token.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
}

/// Why a setting is gone: [`nodeio::Absence`], "gone" judged once for every
/// file of a device (settings here, HCA ports in `fabric/read/sysfs.rs`).
pub use nodeio::Absence;

/// What an error of a setting's I/O says, if it says it is gone.
fn absence(e: &Error) -> Option<Absence> {
    match e {
        Error::Io { source, .. } => Absence::of_io(source),
        _ => None,
    }
}

/// Whether `e` says the setting is gone ([`Absence`]): nothing can be
/// applied or restored there, and that is never a reason to fail.
pub fn is_gone(e: &Error) -> bool {
    absence(e).is_some()
}

/// The file's text, without its trailing newline.
fn read_raw(paths: &Paths, path: &str, deadline: &Deadline) -> Result<String> {
    let f = file(paths, path);
    let what = format!("read {path}");
    deadline
        .run(
            || what,
            move || {
                // Never through a symlink at the last component (the
                // directories of sysfs are symlinks; the files are not).
                let h =
                    nodeio::walk::open_setting(&f, false).map_err(Error::io("open setting", &f))?;
                let mut buf = Vec::new();
                h.take(64 * 1024)
                    .read_to_end(&mut buf)
                    .map_err(Error::io("read setting", &f))?;
                Ok::<_, Error>(buf)
            },
        )?
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches(['\n', '\r'])
                .to_owned()
        })
}

/// Whether the setting can be written now (it exists and the kernel lets
/// it be opened for writing), without writing it, under the deadline.
pub fn check_writable(paths: &Paths, path: &str, deadline: &Deadline) -> Result<()> {
    let f = file(paths, path);
    let what = format!("check {path}");
    deadline.run(
        || what,
        move || nodeio::walk::setting_writable(&f).map_err(Error::io("open setting", &f)),
    )?
}

/// The node-settings scope of every level's grant (`sync`, `health`): each
/// setting of the level checked with [`check_writable`]. One that cannot be
/// written is a problem (every job of the level would roll back); one that
/// is gone is a warning (nothing is applied there: the job runs without it).
/// A check the run's deadline did not leave time for was not looked at: the
/// level's scope is unread (a warning under every policy, `grant::decide`),
/// never "cannot be written" — a slow fabric read before it must not refuse
/// a `fail_job` level (its grant would flap with the node's load).
pub fn check_levels(
    paths: &Paths,
    mapping: &crate::mapping::Mapping,
    deadline: &Deadline,
) -> crate::grant::ScopeRead {
    let at_ms = crate::time::now_ms();
    let levels = mapping
        .levels()
        .iter()
        .map(|l| {
            let mut found = crate::grant::Findings::default();
            for s in &l.node_settings {
                let path = s.path.as_str();
                match check_writable(paths, path, deadline) {
                    Ok(()) => {}
                    Err(e @ Error::Deadline { .. }) => {
                        // The rest of the level's settings are not looked
                        // at either: the deadline has passed for them too.
                        found.unread = Some(e.to_string());
                        break;
                    }
                    Err(e) if is_gone(&e) => found
                        .warnings
                        .push(format!("node setting {path} does not exist: {e}")),
                    Err(e) => found
                        .problems
                        .push(format!("node setting {path} cannot be written: {e}")),
                }
            }
            (l.name.clone(), found)
        })
        .collect();
    crate::grant::ScopeRead {
        at_ms,
        ports: Vec::new(),
        levels,
    }
}

/// Writes `value` with a single write(2), as `echo value > file` would (no
/// O_CREAT: a setting that does not exist is an error, not a new file).
pub fn write(paths: &Paths, path: &str, value: &str, deadline: &Deadline) -> Result<()> {
    let f = file(paths, path);
    let data = format!("{value}\n").into_bytes();
    let what = format!("write {path}");
    deadline.run(
        || what,
        move || {
            if crate::fault::active("hang-write") {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
            if crate::fault::write_error(&f) {
                return Err(Error::io("write setting", &f)(
                    std::io::Error::from_raw_os_error(5),
                ));
            }
            let mut h =
                nodeio::walk::open_setting(&f, true).map_err(Error::io("open setting", &f))?;
            let n = h.write(&data).map_err(Error::io("write setting", &f))?;
            if n != data.len() {
                return Err(Error::io("write setting", &f)(std::io::Error::other(
                    format!("short write: {n} of {} bytes", data.len()),
                )));
            }
            Ok(())
        },
    )?
}

/// Whether `found` (read back) is what writing `wanted` should give, allowing
/// for the kernel's normalisation: surrounding and repeated whitespace,
/// numbers in another base or with leading zeros, and `[choice]` lists.
pub fn same_value(wanted: &str, found: &str) -> bool {
    let w: Vec<&str> = wanted.split_whitespace().collect();
    let f: Vec<&str> = found.split_whitespace().collect();
    if w == f {
        return true;
    }
    if w.len() == f.len()
        && w.iter().zip(&f).all(|(a, b)| match (int(a), int(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        })
    {
        return true;
    }
    w.len() == 1
        && f.iter()
            .any(|t| t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) == Some(w[0]))
}

fn int(s: &str) -> Option<i128> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::{Absence, ValueKind, kind, same_value, writable};

    #[test]
    fn gone_is_what_the_kernel_answers_for_a_vanished_file_or_device() {
        use rustix::io::Errno;
        assert_eq!(
            Absence::of(Errno::NOENT.raw_os_error()),
            Some(Absence::File)
        );
        assert_eq!(
            Absence::of(Errno::NODEV.raw_os_error()),
            Some(Absence::Device)
        );
        assert_eq!(
            Absence::of(Errno::NXIO.raw_os_error()),
            Some(Absence::Device)
        );
        for live in [
            Errno::IO,
            Errno::INVAL,
            Errno::ACCESS,
            Errno::PERM,
            Errno::BUSY,
        ] {
            assert_eq!(Absence::of(live.raw_os_error()), None, "{live:?}");
        }
        let err = |errno: Errno| {
            crate::error::Error::io("read setting", "/x")(std::io::Error::from_raw_os_error(
                errno.raw_os_error(),
            ))
        };
        assert!(super::is_gone(&err(Errno::NODEV)));
        assert!(!super::is_gone(&err(Errno::IO)));
    }

    #[test]
    fn values_are_saved_as_what_can_be_written_back() {
        assert_eq!(kind("106"), ValueKind::Plain);
        assert_eq!(writable("106"), "106");
        assert_eq!(kind("[none] mq-deadline"), ValueKind::ChoiceList);
        assert_eq!(writable("[none] mq-deadline"), "none");
        assert_eq!(writable("mq-deadline [kyber] none"), "kyber");
        assert_eq!(
            writable("[none]"),
            "none",
            "a single choice is still a choice"
        );
        assert_eq!(kind("4096\t131072\t6291456"), ValueKind::MultiValue);
        assert_eq!(writable("4096\t131072\t6291456"), "4096 131072 6291456");
        assert_eq!(writable(""), "");
        // What is saved verifies against what the kernel reads back.
        for raw in ["[none] mq-deadline", "4096\t131072  6291456", "0x6a"] {
            assert!(same_value(&writable(raw), raw), "{raw}");
        }
    }

    #[test]
    fn kernel_normalisation_is_allowed() {
        assert!(same_value("106", "106"));
        assert!(same_value("0x6a", "106"));
        assert!(same_value("4096 87380 6291456", "4096\t87380\t6291456"));
        assert!(same_value("007", "7"));
        assert!(same_value("none", "[none] mq-deadline"));
        assert!(!same_value("106", "0"));
        assert!(!same_value("none", "none [mq-deadline]"));
    }
}
