//! `qoslane log --follow`: the live audit log followed from its end, as
//! `tail -F` and `journalctl -f` do — every entry appended is handed on as
//! it comes, across logrotate's rename (the rest of the renamed file is
//! read, then the new file from its start). Every open is a trusted read,
//! as [`super::read`]'s. It polls (four times a second): the log is appended
//! by short-lived runs, and nothing here may hold a run up.

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use nodeio::trusted::{self, Symlink};

use super::read::{Filter, Line, LoggedEntry};
use crate::paths::Paths;

/// How often the log is looked at.
const POLL: Duration = Duration::from_millis(250);

/// The live file being followed: where it is read up to, and which file it
/// is (a rename puts another file at the path).
struct Live {
    file: std::fs::File,
    id: (u64, u64),
    partial: Vec<u8>,
}

fn identity(file: &std::fs::File) -> Option<(u64, u64)> {
    rustix::fs::fstat(file).ok().map(|s| (s.st_dev, s.st_ino))
}

/// The live file, opened where `read` left it (`from`: its identity and the
/// bytes read) when it is still that file, else at its start.
fn open(paths: &Paths, from: Option<((u64, u64), u64)>) -> Option<Live> {
    let o = trusted::open(&paths.root, &paths.audit_log, Symlink::Refuse).ok()??;
    let mut file = o.file;
    let id = identity(&file)?;
    if let Some((read_id, bytes)) = from
        && read_id == id
    {
        file.seek(SeekFrom::Start(bytes)).ok()?;
    }
    Some(Live {
        id,
        file,
        partial: Vec::new(),
    })
}

/// Hands on every entry `filter` matches that is appended after what
/// [`super::read::read`] read (`from`: its `Found::live`), in order — none
/// lost between the two, none twice; a line that is not an entry is
/// skipped, said on stderr. Returns only when `each` fails (the output is
/// gone): with its error.
pub fn follow<E>(
    paths: &Paths,
    filter: &Filter,
    from: Option<((u64, u64), u64)>,
    each: &mut dyn FnMut(&Line) -> Result<(), E>,
) -> E {
    let mut live = open(paths, from);
    loop {
        if let Some(l) = live.as_mut()
            && let Err(e) = drain(l, filter, each)
        {
            return e;
        }
        // Renamed away (logrotate), or made since: the file now at the path.
        let now = trusted::open(&paths.root, &paths.audit_log, Symlink::Refuse)
            .ok()
            .flatten()
            .and_then(|o| identity(&o.file));
        if now.is_some() && now != live.as_ref().map(|l| l.id) {
            // What reached the renamed file since the look above, then the
            // new file from its start.
            if let Some(l) = live.as_mut()
                && let Err(e) = drain(l, filter, each)
            {
                return e;
            }
            live = open(paths, None);
            continue;
        }
        std::thread::sleep(POLL);
    }
}

/// What was appended to `l` since the last look: each whole line handed on,
/// a torn tail kept for the next look.
fn drain<E>(
    l: &mut Live,
    filter: &Filter,
    each: &mut dyn FnMut(&Line) -> Result<(), E>,
) -> Result<(), E> {
    let mut new = Vec::new();
    if l.file.read_to_end(&mut new).is_err() {
        return Ok(());
    }
    l.partial.extend_from_slice(&new);
    let Some(end) = l.partial.iter().rposition(|&b| b == b'\n') else {
        return Ok(());
    };
    let whole: Vec<u8> = l.partial.drain(..=end).collect();
    for bytes in whole.split(|&b| b == b'\n') {
        let Ok(text) = std::str::from_utf8(bytes) else {
            crate::log::warn("log: a line that is not UTF-8, skipped");
            continue;
        };
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<LoggedEntry>(text) {
            Ok(entry) if filter.matches(&entry) => each(&Line {
                entry,
                raw: text.to_owned(),
            })?,
            Ok(_) => {}
            Err(_) => crate::log::warn(&format!(
                "log: not an audit entry, skipped: {}",
                text.chars().take(60).collect::<String>()
            )),
        }
    }
    Ok(())
}
