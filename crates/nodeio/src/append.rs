//! Appending to a log file (the audit log) that root keeps: the directory is
//! reached without following anyone else's symlink (made 0750 when missing),
//! the file opened with `O_APPEND | O_CREAT | O_NOFOLLOW`, each record one
//! `write(2)` (appends of one write do not interleave), then `fdatasync`
//! (where files outlive a reboot: [`atomic::persistent`]). The audit line is
//! the one record of a run that must survive a crash of the node, so this is
//! the one flush a hook makes on a real node.
//!
//! **A torn tail is repaired before the record is written.** An append that
//! ran into ENOSPC or EIO, or a writer killed between two pages, leaves a
//! fragment without its newline; the next record appended after it would
//! be glued onto it and lost with it. So the file's last byte is read first
//! (`fstat`, `pread` at size − 1) and, when it is not a newline (or cannot
//! be read), the record goes out with a newline in front — still one
//! `write(2)`. The fragment stays a line of its own, which a reader skips.
//!
//! **Appenders take turns for the look and the write** (a lock file beside
//! the log, `NAME.lock`, root's and 0600: [`crate::lock`], so no reader of the
//! log can hold it). Without it a healthy tail can look torn: a record
//! larger than what is left of a page is copied into the page cache a page
//! at a time and the file's size moves with each page, so another appender's
//! `fstat` + `pread` could see half a record and start a line of its own,
//! leaving an empty line. The wait is bounded ([`LOCK_WAIT`]); past it the
//! record is appended anyway — a record is never lost for a lock, at worst
//! an empty line is left, which readers skip.
//!
//! [`atomic::persistent`]: crate::atomic::persistent

use std::borrow::Cow;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::walk::{self, Judge};

/// How long an appender waits for the others' look and write: each holds
/// the lock for a `pread` and a `write` into the page cache (the flush comes
/// after), so a wait this long means a holder is stopped; the record goes
/// out without the turn rather than late.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Appends `record` (one line, with its newline) to `path`, made with mode
/// `mode` (exactly, whatever the umask) when missing, on a line of its own
/// even when the file ends in a torn fragment. A short write is an error (the
/// next append repairs the tail it leaves).
pub fn append_line(root: &Path, path: &Path, record: &[u8], mode: u32) -> Result<()> {
    let (dir_path, name) = walk::split(path)?;
    let dir = walk::open_dir(root, dir_path, Judge::NoFollow, Some(0o750))?;
    // Read and write: the tail is read back (`pread` ignores `O_APPEND`'s
    // offset; every write still goes to the end).
    let open = |create: OFlags| {
        rfs::openat(
            dir.fd(),
            name,
            OFlags::RDWR | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC | create,
            Mode::from_raw_mode(mode),
        )
    };
    // The log exists but at a node's first run: opened as it is (it keeps
    // the mode it has), made only when absent — here, with `mode` exactly,
    // whatever the umask. Another appender making it between the two opens:
    // theirs is opened.
    let fd = match open(OFlags::empty()) {
        Err(Errno::NOENT) => match open(OFlags::CREATE | OFlags::EXCL) {
            Ok(fd) => rfs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777)).map(|()| fd),
            Err(Errno::EXIST) => open(OFlags::empty()),
            Err(e) => Err(e),
        },
        other => other,
    }
    .map_err(Error::errno("open", path))?;
    let mut f = File::from(fd);
    let turn = crate::lock::acquire(
        &dir,
        &format!("{}.lock", name.to_string_lossy()),
        std::time::Instant::now() + LOCK_WAIT,
    );
    let out: Cow<'_, [u8]> = if ends_torn(&f) {
        let mut b = Vec::with_capacity(record.len() + 1);
        b.push(b'\n');
        b.extend_from_slice(record);
        Cow::Owned(b)
    } else {
        Cow::Borrowed(record)
    };
    let n = f.write(&out).map_err(Error::io("append to", path))?;
    drop(turn);
    if n != out.len() {
        return Err(Error::io("append to", path)(std::io::Error::other(
            format!(
                "short write ({n} of {} bytes; the next append starts a new line)",
                out.len()
            ),
        )));
    }
    if crate::atomic::persistent(&f) {
        f.sync_data().map_err(Error::io("fsync", path))?;
    }
    Ok(())
}

/// Whether the file's last byte is anything but a newline: a record cut
/// short. An empty file is whole; a tail that cannot be read counts as torn
/// (an extra empty line costs nothing, a glued one costs a record).
fn ends_torn(f: &File) -> bool {
    let Ok(size) = f.metadata().map(|m| m.len()) else {
        return true;
    };
    if size == 0 {
        return false;
    }
    let mut last = [0u8; 1];
    match f.read_at(&mut last, size - 1) {
        Ok(1) => last[0] != b'\n',
        // Truncated since the fstat (logrotate's copytruncate): empty.
        Ok(_) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(d: &Path, record: &str) -> Result<()> {
        append_line(d, &d.join("log/audit.jsonl"), record.as_bytes(), 0o640)
    }

    fn read(d: &Path) -> String {
        std::fs::read_to_string(d.join("log/audit.jsonl")).unwrap()
    }

    #[test]
    fn records_are_appended_one_line_each_without_extra_newlines() {
        let d = tempfile::tempdir().unwrap();
        append(d.path(), "{\"n\":1}\n").unwrap();
        append(d.path(), "{\"n\":2}\n").unwrap();
        assert_eq!(read(d.path()), "{\"n\":1}\n{\"n\":2}\n");
    }

    /// An append that hit ENOSPC (or a writer killed between two pages)
    /// left a fragment without its newline. The next record used to be
    /// glued onto it: `{"n":1,"ti{"n":2}` — neither line readable, the
    /// second run's record lost. It is a line of its own now.
    #[test]
    fn a_record_after_a_torn_fragment_is_a_line_of_its_own() {
        let d = tempfile::tempdir().unwrap();
        append(d.path(), "{\"n\":0}\n").unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("log/audit.jsonl"))
            .unwrap();
        // Torn inside a multi-byte character, as a cut can be.
        f.write_all(b"{\"n\":1,\"user\":\"j\xc3").unwrap();
        append(d.path(), "{\"n\":2}\n").unwrap();
        append(d.path(), "{\"n\":3}\n").unwrap();
        let bytes = std::fs::read(d.path().join("log/audit.jsonl")).unwrap();
        let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        assert_eq!(
            lines,
            [
                &b"{\"n\":0}"[..],
                b"{\"n\":1,\"user\":\"j\xc3",
                b"{\"n\":2}",
                b"{\"n\":3}",
                b""
            ]
        );
    }

    /// Appenders racing after a torn tail may each prepend a newline: empty
    /// lines at most, every record whole.
    #[test]
    fn concurrent_appenders_after_a_torn_tail_leave_every_record_whole() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("log")).unwrap();
        std::fs::write(d.path().join("log/audit.jsonl"), "{\"torn\"").unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let d = d.path();
                s.spawn(move || {
                    for i in 0..50 {
                        append(d, &format!("{{\"t\":{t},\"i\":{i}}}\n")).unwrap();
                    }
                });
            }
        });
        let text = read(d.path());
        // One of them repairs the tail, in its turn; the others find it whole.
        let mut lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.remove(0), "{\"torn\"");
        assert_eq!(lines.len(), 400, "{text}");
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("{\"t\":") && l.ends_with('}')),
            "{text}"
        );
        assert!(text.ends_with('\n'));
    }

    /// Records larger than a page: a writer's copy into the page cache
    /// moves the file's size a page at a time, so another appender that
    /// looked at the tail without the writers' lock could see a record
    /// half-written, take it for a torn one and start a line of its own
    /// (an empty line in the log).
    #[test]
    fn concurrent_appenders_of_records_over_a_page_leave_no_empty_line() {
        let d = tempfile::tempdir().unwrap();
        let pad = "x".repeat(6000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (d, pad) = (d.path(), &pad);
                s.spawn(move || {
                    for i in 0..200 {
                        append(d, &format!("{{\"t\":{t},\"i\":{i},\"p\":\"{pad}\"}}\n")).unwrap();
                    }
                });
            }
        });
        let text = read(d.path());
        let empty = text.lines().filter(|l| l.is_empty()).count();
        assert_eq!(empty, 0, "empty lines among {}", text.lines().count());
        assert_eq!(text.lines().count(), 800);
    }

    /// The log is opened as it is first (the common case: one open), made
    /// only when absent: a new log has the mode asked, an existing one keeps
    /// its own.
    #[test]
    fn a_missing_log_is_made_with_its_mode_and_an_existing_one_keeps_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        append(d.path(), "{\"n\":1}\n").unwrap();
        let log = d.path().join("log/audit.jsonl");
        let mode = || std::fs::metadata(&log).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(), 0o640);
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o600)).unwrap();
        append(d.path(), "{\"n\":2}\n").unwrap();
        assert_eq!(mode(), 0o600);
        assert_eq!(read(d.path()), "{\"n\":1}\n{\"n\":2}\n");
    }

    #[test]
    fn a_file_that_is_only_a_fragment_is_repaired_too() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("log")).unwrap();
        std::fs::write(d.path().join("log/audit.jsonl"), "{\"n\"").unwrap();
        append(d.path(), "{\"n\":1}\n").unwrap();
        assert_eq!(read(d.path()), "{\"n\"\n{\"n\":1}\n");
    }

    #[test]
    fn a_symlink_in_place_of_the_log_is_not_written_through() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("log")).unwrap();
        std::fs::write(d.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink(d.path().join("elsewhere"), d.path().join("log/audit.jsonl"))
            .unwrap();
        assert!(append(d.path(), "{}\n").is_err());
        assert_eq!(
            std::fs::read_to_string(d.path().join("elsewhere")).unwrap(),
            "x"
        );
    }
}
