//! Reading the audit log back (`qoslane log`): the live `audit.jsonl` and
//! the files logrotate leaves beside it (`audit.jsonl.1`, then
//! `audit.jsonl.2.gz`, … with `delaycompress`), oldest first, filtered by
//! job, time, outcome, event and QoS. A line that is not an audit entry is
//! reported with its file and line number and skipped: never fatal.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

/// Which entries to keep; `None`/empty matches everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub job: Option<u64>,
    pub since: Option<SystemTime>,
    pub until: Option<SystemTime>,
    pub outcomes: Vec<String>,
    pub events: Vec<String>,
    pub qos: Option<String>,
}

impl Filter {
    pub fn matches(&self, e: &Value) -> bool {
        let s = |k: &str| e[k].as_str();
        if self.job.is_some() && e["job_id"].as_u64() != self.job {
            return false;
        }
        if !self.outcomes.is_empty()
            && !self
                .outcomes
                .iter()
                .any(|o| Some(o.as_str()) == s("outcome"))
        {
            return false;
        }
        if !self.events.is_empty() && !self.events.iter().any(|v| Some(v.as_str()) == s("event")) {
            return false;
        }
        if self.qos.is_some() && s("qos") != self.qos.as_deref() {
            return false;
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(t) = s("time").and_then(|t| humantime::parse_rfc3339_weak(t).ok()) else {
                return false;
            };
            if self.since.is_some_and(|since| t < since) || self.until.is_some_and(|u| t > u) {
                return false;
            }
        }
        true
    }
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
    if log.exists() {
        out.push(log.to_owned());
    }
    out
}

/// What reading found: the matching entries (the last `limit`, in order)
/// and one line per problem.
#[derive(Debug, Default)]
pub struct Found {
    pub entries: Vec<Value>,
    /// Entries that matched before `limit` cut the oldest.
    pub matched: usize,
    pub problems: Vec<String>,
}

/// Reads every file of `log`, keeping what `filter` matches.
pub fn read(log: &Path, filter: &Filter, limit: usize) -> Found {
    let mut found = Found::default();
    let mut keep = std::collections::VecDeque::new();
    for file in files(log) {
        let opened = std::fs::File::open(&file);
        let reader: Box<dyn Read> = match opened {
            Err(e) => {
                found.problems.push(format!("{}: {e}", file.display()));
                continue;
            }
            Ok(f) if file.extension().is_some_and(|x| x == "gz") => {
                Box::new(flate2::read::MultiGzDecoder::new(f))
            }
            Ok(f) => Box::new(f),
        };
        for (i, line) in BufReader::new(reader).lines().enumerate() {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    found
                        .problems
                        .push(format!("{}:{}: unreadable: {e}", file.display(), i + 1));
                    break;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(&line) {
                Ok(v) if v.is_object() && v["event"].is_string() => {
                    if filter.matches(&v) {
                        found.matched += 1;
                        keep.push_back(v);
                        if keep.len() > limit {
                            keep.pop_front();
                        }
                    }
                }
                _ => found.problems.push(format!(
                    "{}:{}: not an audit entry, skipped: {}",
                    file.display(),
                    i + 1,
                    line.chars().take(60).collect::<String>()
                )),
            }
        }
    }
    found.entries = keep.into();
    found
}

/// `--since`/`--until`: RFC 3339 (`2026-12-01T10:00:00Z`, or without the
/// zone and with a space: UTC), or a duration ago (`90m`, `2h`, `3d`).
pub fn parse_time(s: &str, now: SystemTime) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s)
        .ok()
        .or_else(|| humantime::parse_rfc3339_weak(&format!("{s} 00:00:00")).ok())
        .or_else(|| {
            humantime::parse_duration(s)
                .ok()
                .and_then(|d| now.checked_sub(d))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(job: u64, event: &str, outcome: &str, time: &str) -> String {
        format!(
            r#"{{"time":"{time}","event":"{event}","job_id":{job},"qos":"high","outcome":"{outcome}"}}"#
        )
    }

    #[test]
    fn rotated_files_are_read_oldest_first_and_bad_lines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("audit.jsonl");
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
        std::fs::write(
            &log,
            format!(
                "{}\n",
                line(2, "epilog", "reverted", "2026-12-01T10:00:00Z")
            ),
        )
        .unwrap();
        std::fs::write(d.path().join("audit.jsonl.old"), "ignored").unwrap();
        assert_eq!(
            files(&log)
                .iter()
                .map(|p| p.file_name().unwrap().to_owned())
                .collect::<Vec<_>>(),
            ["audit.jsonl.2.gz", "audit.jsonl.1", "audit.jsonl"]
        );
        let all = read(&log, &Filter::default(), 100);
        let jobs: Vec<u64> = all
            .entries
            .iter()
            .map(|e| e["job_id"].as_u64().unwrap())
            .collect();
        assert_eq!(jobs, [1, 2, 2]);
        assert_eq!(all.problems.len(), 1);
        assert!(
            all.problems[0].ends_with("audit.jsonl.1:2: not an audit entry, skipped: not json")
        );

        let job2 = Filter {
            job: Some(2),
            ..Filter::default()
        };
        assert_eq!(read(&log, &job2, 100).entries.len(), 2);
        let failed = Filter {
            outcomes: vec!["failed".into()],
            ..Filter::default()
        };
        assert_eq!(read(&log, &failed, 100).entries[0]["job_id"], 2);
        let now = humantime::parse_rfc3339("2026-12-01T10:30:00Z").unwrap();
        let recent = Filter {
            since: parse_time("1h", now),
            ..Filter::default()
        };
        assert_eq!(read(&log, &recent, 100).entries.len(), 1, "only 10:00");
        let window = Filter {
            since: parse_time("2026-12-01 08:30:00", now),
            until: parse_time("2026-12-01T09:30:00Z", now),
            ..Filter::default()
        };
        assert_eq!(read(&log, &window, 100).entries[0]["outcome"], "failed");
        let last = read(&log, &Filter::default(), 1);
        assert_eq!((last.entries.len(), last.matched), (1, 3));
        assert_eq!(
            parse_time("2026-12-01", now),
            parse_time("2026-12-01T00:00:00Z", now)
        );
        assert_eq!(parse_time("yesterday-ish", now), None);
    }
}
