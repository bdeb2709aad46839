//! Reading the audit log back (`qoslane log`, `qoslane status`): the live
//! `audit.jsonl` and the files logrotate leaves beside it (`audit.jsonl.1`,
//! then `audit.jsonl.2.gz`, … with `delaycompress`), oldest first, filtered
//! by job, time, outcome, event and QoS. Every file is opened as nodeio's
//! trusted read opens a state file (no symlink, root's or ours, in
//! directories nobody else can write): an audit trail anyone could have
//! written is no trail. A line that is not an audit entry, or a file that
//! cannot be trusted or read, is reported with its name (and line number)
//! and skipped: never fatal. Lines are read as bytes: one that is not UTF-8
//! (a torn append cut inside a character) is skipped and counted like one
//! that is not JSON, and every line after it is read; an empty line (two
//! appenders that both repaired a torn tail) is skipped silently.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use nodeio::trusted::{self, Symlink};

pub use super::logged::{Filter, LoggedEntry, Note};
use crate::paths::Paths;

/// One audit line: parsed, and as written (`--json` passes it through
/// byte for byte).
#[derive(Clone, Debug)]
pub struct Line {
    pub entry: LoggedEntry,
    pub raw: String,
}

/// The audit log and its rotated files, oldest first.
pub fn files(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return vec![log.to_owned()];
    };
    let mut rotated: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let f = e.file_name().into_string().ok()?;
            let rest = f.strip_prefix(name)?.strip_prefix('.')?;
            let n = rest.strip_suffix(".gz").unwrap_or(rest);
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .then(|| Some((n.parse().ok()?, e.path())))?
        })
        .collect();
    // audit.jsonl.9.gz (oldest) .. audit.jsonl.1, then the live file.
    rotated.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut out: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    out.push(log.to_owned());
    out
}

/// What reading found: the matching entries (the last `limit`, in order)
/// and one line per problem.
#[derive(Debug, Default)]
pub struct Found {
    pub entries: Vec<Line>,
    /// Entries that matched before `limit` cut the oldest.
    pub matched: usize,
    /// Files read (that existed and could be trusted).
    pub files: usize,
    pub problems: Vec<String>,
    /// Lines skipped because they were not audit entries (not UTF-8, not
    /// JSON, or without the required fields: a torn or foreign line), each
    /// also said in `problems` (the first [`NAMED`]). Empty lines are not
    /// counted.
    pub skipped: usize,
    /// Where the first [`NAMED`] skipped lines are: `FILE:LINE`, or
    /// `FILE, byte N` in a tail that started inside the file.
    pub skipped_at: Vec<String>,
    /// The live file as read: (device, inode) and the bytes read, where
    /// `log --follow` goes on from.
    pub live: Option<((u64, u64), u64)>,
}

/// Skipped lines named one by one (in `problems` and `skipped_at`); the
/// rest are only counted, so a file of garbage cannot flood the output.
pub const NAMED: usize = 20;

impl Found {
    /// The skipped lines counted and placed: `N line(s) skipped: FILE:LINE,
    /// …` (the first [`NAMED`], then how many more); `what` words them
    /// (`line`, `audit line`).
    pub fn skipped_summary(&self, what: &str) -> String {
        let more = self.skipped - self.skipped_at.len();
        format!(
            "{} {what}{} skipped: {}{}",
            self.skipped,
            if self.skipped == 1 { "" } else { "s" },
            self.skipped_at.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    }

    /// Counts a skipped line at `at`, naming it while fewer than [`NAMED`]
    /// have been.
    fn skip(&mut self, at: String, why: &str) {
        self.skipped += 1;
        if self.skipped_at.len() < NAMED {
            self.problems.push(format!("{at}: {why}"));
            self.skipped_at.push(at);
        }
    }
}

/// Where the lines a [`scan`] reads are in their file.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// From the file's first line: problems say `FILE:LINE`.
    Start,
    /// From this byte offset (a tail): problems say `FILE, byte N`.
    Byte(u64),
}

/// Opens one file of the log as a trusted read; `None` (said in `problems`
/// unless the file is simply absent) when it cannot be used.
fn open(paths: &Paths, file: &Path, problems: &mut Vec<String>) -> Option<trusted::Opened> {
    match trusted::open(&paths.root, file, Symlink::Refuse) {
        Ok(o) => o,
        Err(e) => {
            problems.push(format!("{e}; skipped"));
            None
        }
    }
}

/// Parses the lines of `reader` (of `file`, starting at `origin`) into
/// `keep`. Read as bytes: a line that is not UTF-8, not JSON or not an
/// entry is skipped and counted ([`Found::skip`]), never the end of the
/// file; an empty line is skipped silently; only a read error ends it.
fn scan(
    reader: impl Read,
    file: &Path,
    origin: Origin,
    mut keep: impl FnMut(Line),
    found: &mut Found,
) -> u64 {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let (mut number, mut offset) = (0usize, 0u64);
    loop {
        buf.clear();
        let at_byte = offset;
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(n) => offset += u64::try_from(n).unwrap_or(u64::MAX),
            Err(e) => {
                found.problems.push(format!(
                    "{}: unreadable after byte {offset}: {e}",
                    file.display()
                ));
                break;
            }
        }
        number += 1;
        let at = match origin {
            Origin::Start => format!("{}:{number}", file.display()),
            Origin::Byte(base) => format!("{}, byte {}", file.display(), base + at_byte),
        };
        let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.trim_ascii().is_empty() {
            continue;
        }
        let Ok(line) = std::str::from_utf8(bytes) else {
            found.skip(at, "not UTF-8 (a torn line?), skipped");
            continue;
        };
        match serde_json::from_str::<LoggedEntry>(line) {
            Ok(entry) => keep(Line {
                entry,
                raw: line.to_owned(),
            }),
            Err(_) => found.skip(
                at,
                &format!(
                    "not an audit entry, skipped: {}",
                    line.chars().take(60).collect::<String>()
                ),
            ),
        }
    }
    offset
}

/// Reads every file of the log, keeping what `filter` matches: the last
/// `limit` (0: all).
pub fn read(paths: &Paths, filter: &Filter, limit: usize) -> Found {
    let mut found = Found::default();
    let mut keep = std::collections::VecDeque::new();
    let mut matched = 0;
    for file in files(&paths.audit_log) {
        let Some(o) = open(paths, &file, &mut found.problems) else {
            continue;
        };
        found.files += 1;
        let id = rustix::fs::fstat(&o.file)
            .ok()
            .map(|s| (s.st_dev, s.st_ino));
        let reader: Box<dyn Read> = if file.extension().is_some_and(|x| x == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(o.file))
        } else {
            Box::new(o.file)
        };
        let take = |l: Line| {
            if filter.matches(&l.entry) {
                matched += 1;
                keep.push_back(l);
                if limit > 0 && keep.len() > limit {
                    keep.pop_front();
                }
            }
        };
        let bytes = scan(reader, &file, Origin::Start, take, &mut found);
        if file == paths.audit_log {
            found.live = id.map(|id| (id, bytes));
        }
    }
    found.matched = matched;
    found.entries = keep.into();
    found
}

/// The newest entries of the log, bounded: at most `max_bytes` read from
/// the end of the live file (a first, partial line dropped), and from the
/// end of `audit.jsonl.1` when the live file was just rotated and holds
/// fewer than `want` entries. Oldest first.
pub fn tail(paths: &Paths, max_bytes: u64, want: usize) -> Found {
    let mut found = Found::default();
    let log = &paths.audit_log;
    let mut rotated = log.as_os_str().to_owned();
    rotated.push(".1");
    let mut chunks = Vec::new();
    for file in [log.clone(), PathBuf::from(rotated)] {
        if chunks.iter().map(Vec::len).sum::<usize>() >= want {
            break;
        }
        let Some(mut o) = open(paths, &file, &mut found.problems) else {
            continue;
        };
        found.files += 1;
        let start = o.size.saturating_sub(max_bytes);
        if start > 0 && o.file.seek(SeekFrom::Start(start - 1)).is_err() {
            found
                .problems
                .push(format!("{}: cannot seek; skipped", file.display()));
            continue;
        }
        let mut lines = Vec::new();
        let mut reader = BufReader::new((&o.file).take(max_bytes.saturating_add(1)));
        // Starting mid-file: the bytes up to the first newline belong to a
        // line that began before the window.
        let origin = if start > 0 {
            let mut partial = Vec::new();
            let _ = reader.read_until(b'\n', &mut partial);
            let dropped = u64::try_from(partial.len()).unwrap_or(u64::MAX);
            Origin::Byte((start - 1).saturating_add(dropped))
        } else {
            Origin::Start
        };
        scan(reader, &file, origin, |l| lines.push(l), &mut found);
        chunks.push(lines);
    }
    for chunk in chunks.into_iter().rev() {
        found.entries.extend(chunk);
    }
    let from = found.entries.len().saturating_sub(want);
    found.entries.drain(..from);
    found.matched = found.entries.len();
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::Overrides;
    use std::time::SystemTime;
    /// In UTC: the times below are written so.
    fn parse_time(s: &str, now: SystemTime) -> Option<SystemTime> {
        crate::time::parse_time_in(s, now, &jiff::tz::TimeZone::UTC)
    }
    use std::io::Write;

    fn line(job: u64, event: &str, outcome: &str, time: &str) -> String {
        format!(
            r#"{{"time":"{time}","event":"{event}","job_id":{job},"qos":"high","outcome":"{outcome}"}}"#
        )
    }

    fn paths(d: &Path) -> Paths {
        Paths::new(Overrides {
            root: Some(d.to_owned()),
            audit_log: Some(d.join("audit.jsonl")),
            ..Overrides::default()
        })
    }

    #[test]
    fn rotated_files_are_read_oldest_first_and_bad_lines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let log = &p.audit_log;
        let gz = d.path().join("audit.jsonl.2.gz");
        let mut enc = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::fast(),
        );
        writeln!(
            enc,
            "{}",
            line(1, "prolog", "applied", "2026-12-01T08:00:00Z")
        )
        .unwrap();
        enc.finish().unwrap();
        std::fs::write(
            d.path().join("audit.jsonl.1"),
            format!(
                "{}\nnot json\n",
                line(2, "prolog", "failed", "2026-12-01T09:00:00Z")
            ),
        )
        .unwrap();
        let last = line(2, "epilog", "reverted", "2026-12-01T10:00:00Z");
        std::fs::write(log, format!("{last}\n")).unwrap();
        std::fs::write(d.path().join("audit.jsonl.old"), "ignored").unwrap();
        assert_eq!(
            files(log)
                .iter()
                .map(|p| p.file_name().unwrap().to_owned())
                .collect::<Vec<_>>(),
            ["audit.jsonl.2.gz", "audit.jsonl.1", "audit.jsonl"]
        );
        let all = read(&p, &Filter::default(), 100);
        let jobs: Vec<u64> = all
            .entries
            .iter()
            .map(|e| e.entry.job_id.unwrap())
            .collect();
        assert_eq!(jobs, [1, 2, 2]);
        assert_eq!(all.entries[2].raw, last, "passed through as written");
        assert_eq!(all.problems.len(), 1);
        assert!(
            all.problems[0].ends_with("audit.jsonl.1:2: not an audit entry, skipped: not json")
        );

        let job2 = Filter {
            job: Some(2),
            ..Filter::default()
        };
        assert_eq!(read(&p, &job2, 100).entries.len(), 2);
        let failed = Filter {
            outcomes: vec!["failed".into()],
            ..Filter::default()
        };
        assert_eq!(read(&p, &failed, 100).entries[0].entry.job_id, Some(2));
        let now = humantime::parse_rfc3339("2026-12-01T10:30:00Z").unwrap();
        let recent = Filter {
            since: parse_time("1h", now),
            ..Filter::default()
        };
        assert_eq!(read(&p, &recent, 100).entries.len(), 1, "only 10:00");
        let window = Filter {
            since: parse_time("2026-12-01 08:30:00", now),
            until: parse_time("2026-12-01T11:30:00+02:00", now),
            ..Filter::default()
        };
        assert_eq!(read(&p, &window, 100).entries[0].entry.outcome, "failed");
        assert_eq!(read(&p, &window, 100).entries.len(), 1, "09:30Z");
        let last = read(&p, &Filter::default(), 1);
        assert_eq!((last.entries.len(), last.matched), (1, 3));
        assert_eq!(read(&p, &Filter::default(), 0).entries.len(), 3, "0: all");
    }

    /// A torn append cut inside a multi-byte character, then the next
    /// run's line (repaired onto a line of its own) and more. `lines()` used
    /// to stop at the first line that is not UTF-8: every later entry was
    /// hidden and nothing counted. Now the line is skipped, counted and
    /// named, and every later one read; empty lines are not counted.
    #[test]
    fn a_line_that_is_not_utf8_is_skipped_counted_and_the_rest_read() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let mut bytes = Vec::new();
        bytes.extend(line(1, "prolog", "applied", "2026-12-01T08:00:00Z").bytes());
        bytes.extend(b"\n{\"time\":\"2026-12-01T08:01:00Z\",\"user\":\"j\xc3\n\n");
        for j in 2..=4 {
            bytes.extend(line(j, "prolog", "applied", "2026-12-01T08:02:00Z").bytes());
            bytes.push(b'\n');
        }
        std::fs::write(&p.audit_log, &bytes).unwrap();
        let jobs =
            |f: &Found| -> Vec<u64> { f.entries.iter().map(|e| e.entry.job_id.unwrap()).collect() };
        let all = read(&p, &Filter::default(), 0);
        assert_eq!(jobs(&all), [1, 2, 3, 4]);
        let at = format!("{}:2", p.audit_log.display());
        assert_eq!((all.skipped, &all.skipped_at), (1, &vec![at.clone()]));
        assert_eq!(
            all.problems,
            [format!("{at}: not UTF-8 (a torn line?), skipped")]
        );

        let t = tail(&p, 1 << 16, 10);
        assert_eq!(jobs(&t), [1, 2, 3, 4]);
        assert_eq!((t.skipped, t.skipped_at), (1, vec![at]));
        // A window that starts inside the file names the byte the line
        // starts at.
        let t = tail(&p, u64::try_from(bytes.len() - 5).unwrap(), 10);
        assert_eq!(jobs(&t), [2, 3, 4]);
        let first = line(1, "prolog", "applied", "2026-12-01T08:00:00Z").len() + 1;
        assert_eq!(
            t.skipped_at,
            [format!("{}, byte {first}", p.audit_log.display())]
        );
    }

    #[test]
    fn a_file_of_garbage_is_counted_but_names_only_the_first_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        std::fs::write(&p.audit_log, "x\n".repeat(NAMED * 3)).unwrap();
        let f = read(&p, &Filter::default(), 0);
        assert_eq!(
            (f.skipped, f.skipped_at.len(), f.problems.len()),
            (NAMED * 3, NAMED, NAMED)
        );
    }

    #[test]
    fn a_line_without_the_contract_s_required_fields_is_not_an_entry() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        std::fs::write(
            &p.audit_log,
            "{\"event\":\"prolog\",\"outcome\":\"applied\"}\n\
             {\"time\":\"2026-12-01T08:00:00Z\",\"event\":\"prolog\",\"outcome\":\"applied\",\
             \"job_id\":\"seven\"}\n",
        )
        .unwrap();
        let f = read(&p, &Filter::default(), 0);
        assert!(f.entries.is_empty(), "{:?}", f.entries);
        assert_eq!(f.problems.len(), 2, "{:?}", f.problems);
        assert!(
            f.problems[0].ends_with(
                ":1: not an audit entry, skipped: {\"event\":\"prolog\",\"outcome\":\"applied\"}"
            ),
            "{:?}",
            f.problems
        );
    }

    #[test]
    fn a_log_anyone_could_write_is_named_and_skipped() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        std::fs::write(
            &p.audit_log,
            line(1, "prolog", "applied", "2026-12-01T08:00:00Z") + "\n",
        )
        .unwrap();
        std::fs::set_permissions(&p.audit_log, std::fs::Permissions::from_mode(0o666)).unwrap();
        let f = read(&p, &Filter::default(), 0);
        assert!(f.entries.is_empty());
        assert_eq!(f.problems.len(), 1, "{:?}", f.problems);
        assert!(f.problems[0].contains("audit.jsonl"), "{:?}", f.problems);
        assert!(tail(&p, 1 << 16, 10).entries.is_empty());
    }

    #[test]
    fn tail_reads_a_bounded_window_from_the_end_and_the_rotated_file() {
        let d = tempfile::tempdir().unwrap();
        let p = paths(d.path());
        let lines: Vec<String> = (1..=100)
            .map(|j| line(j, "prolog", "applied", "2026-12-01T08:00:00Z"))
            .collect();
        std::fs::write(&p.audit_log, lines.join("\n") + "\n").unwrap();
        let one = u64::try_from(lines[99].len() + 1).unwrap();
        // A window of 3.5 lines: the partial one is dropped, not reported.
        let t = tail(&p, one * 7 / 2, 10);
        let jobs: Vec<u64> = t.entries.iter().map(|e| e.entry.job_id.unwrap()).collect();
        assert_eq!(jobs, [98, 99, 100]);
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(tail(&p, 1 << 20, 2).entries.len(), 2);

        // Just rotated: the live file is empty, the newest are in `.1`.
        std::fs::rename(&p.audit_log, d.path().join("audit.jsonl.1")).unwrap();
        std::fs::write(
            &p.audit_log,
            line(101, "epilog", "reverted", "2026-12-01T09:00:00Z") + "\n",
        )
        .unwrap();
        let t = tail(&p, 1 << 20, 3);
        let jobs: Vec<u64> = t.entries.iter().map(|e| e.entry.job_id.unwrap()).collect();
        assert_eq!(jobs, [99, 100, 101]);
    }
}
