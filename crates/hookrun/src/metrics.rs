//! Counting hook runs for Prometheus' node_exporter textfile collector.
//!
//! hookrun is short-lived and Prologs of different jobs run concurrently, so the
//! counters live in a JSON state file (`<root>/var/lib/hookrun/metrics.json`),
//! updated under an exclusive flock with a bounded wait (replaced through a
//! kept spare file, see [`record`]), and every update re-renders
//! `hookrun.prom` in the classic text format (HELP/TYPE lines, no
//! timestamps), written to a temporary name that node_exporter ignores and
//! put in place (not fsynced: every run rewrites it). A metrics failure is
//! logged, never fatal.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nodeio::walk::Judge;
use nodeio::{atomic, counter_file, prom};
use serde::{Deserialize, Serialize};

use crate::child::{Dropped, Stream};
use crate::runner::Fate;

pub const STATE_FILE: &str = "metrics.json";
pub const LOCK_FILE: &str = "metrics.lock";
pub const PROM_FILE: &str = "hookrun.prom";
const STATE_VERSION: u32 = 1;

/// Upper bounds of the duration histogram, in seconds (+Inf is implied).
pub const BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The `stream` label values of `hookrun_lines_dropped_total`, in order.
const STREAMS: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

/// How long to wait for another hookrun holding the metrics lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(1);

/// One hook run to count.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub phase: &'a str,
    pub hook: &'a str,
    pub fate: Fate,
    /// `None` for a hook that did not start: counted, not observed.
    pub elapsed: Option<Duration>,
    /// Over-long output lines dropped whole (`child::MAX_LINE`).
    pub dropped: Dropped,
}

/// Everything counted so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    pub version: u32,
    /// phase → hook → counters.
    #[serde(default)]
    pub hooks: BTreeMap<String, BTreeMap<String, HookStats>>,
}

/// Counters of one hook.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookStats {
    /// outcome label → runs.
    #[serde(default)]
    pub runs: BTreeMap<String, u64>,
    #[serde(default)]
    pub duration: Histogram,
    /// stream label (`stdout`, `stderr`) → over-long lines dropped whole.
    /// Absent in state files of older versions: zero.
    #[serde(default)]
    pub lines_dropped: BTreeMap<String, u64>,
    /// The last run's outcome label and when it ended (Unix seconds), for
    /// `hookrun list`. Absent in state files of older versions.
    #[serde(default)]
    pub last: Option<(String, u64)>,
}

/// A duration histogram; `counts` are per bucket (not cumulative), the last one
/// for observations above every bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bounds: BUCKETS.to_vec(),
            counts: vec![0; BUCKETS.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.bounds != BUCKETS || self.counts.len() != BUCKETS.len() + 1 {
            // Written with other buckets (an older version): start this one over;
            // Prometheus treats it as a counter reset.
            *self = Histogram::default();
        }
        let index = BUCKETS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(BUCKETS.len());
        self.counts[index] += 1;
        self.sum += seconds;
        self.count += 1;
    }
}

impl State {
    pub fn add(&mut self, record: &Record<'_>) {
        self.version = STATE_VERSION;
        let stats = self
            .hooks
            .entry(record.phase.to_owned())
            .or_default()
            .entry(record.hook.to_owned())
            .or_default();
        *stats
            .runs
            .entry(record.fate.label().to_owned())
            .or_default() += 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        stats.last = Some((record.fate.label().to_owned(), now));
        if let Some(elapsed) = record.elapsed {
            stats.duration.observe(elapsed.as_secs_f64());
        }
        for stream in STREAMS {
            let dropped = record.dropped.of(stream);
            if dropped > 0 {
                *stats
                    .lines_dropped
                    .entry(stream.label().to_owned())
                    .or_default() += dropped;
            }
        }
    }

    /// Runs of one hook with one fate (0 if never seen).
    pub fn runs(&self, phase: &str, hook: &str, fate: Fate) -> u64 {
        self.hooks
            .get(phase)
            .and_then(|hooks| hooks.get(hook))
            .and_then(|stats| stats.runs.get(fate.label()))
            .copied()
            .unwrap_or(0)
    }

    /// The Prometheus text exposition of every counter.
    pub fn render(&self) -> String {
        let mut w = prom::Writer::new();
        w.family(
            "hookrun_hook_runs_total",
            prom::Kind::Counter,
            "Slurm hook runs by phase, hook and outcome (ok, failed, timeout, skipped, interrupted).",
        );
        for (phase, hook, stats) in self.each_hook() {
            for fate in Fate::ALL {
                let runs = stats.runs.get(fate.label()).copied().unwrap_or(0);
                w.sample(
                    "hookrun_hook_runs_total",
                    &[("phase", phase), ("hook", hook), ("outcome", fate.label())],
                    runs,
                );
            }
        }
        w.family(
            "hookrun_hook_duration_seconds",
            prom::Kind::Histogram,
            "Wall-clock time of Slurm hook runs (hooks that did not start are not observed).",
        );
        for (phase, hook, stats) in self.each_hook() {
            let h = &stats.duration;
            w.histogram(
                "hookrun_hook_duration_seconds",
                &[("phase", phase), ("hook", hook)],
                &h.bounds,
                &h.counts,
                h.sum,
            );
        }
        w.family(
            "hookrun_lines_dropped_total",
            prom::Kind::Counter,
            "Hook output lines over 16 KiB dropped whole (never passed on in part), by phase, hook and stream.",
        );
        for (phase, hook, stats) in self.each_hook() {
            for stream in STREAMS {
                let dropped = stats
                    .lines_dropped
                    .get(stream.label())
                    .copied()
                    .unwrap_or(0);
                w.sample(
                    "hookrun_lines_dropped_total",
                    &[("phase", phase), ("hook", hook), ("stream", stream.label())],
                    dropped,
                );
            }
        }
        w.family(
            "hookrun_build_info",
            prom::Kind::Gauge,
            "Always 1; the labels are the hookrun build that wrote this file (version, package revision, commit).",
        );
        w.sample("hookrun_build_info", &nodeio::build::labels(), 1);
        w.finish()
    }

    fn each_hook(&self) -> impl Iterator<Item = (&str, &str, &HookStats)> {
        self.hooks.iter().flat_map(|(phase, hooks)| {
            hooks
                .iter()
                .map(move |(hook, stats)| (phase.as_str(), hook.as_str(), stats))
        })
    }
}

pub use nodeio::prom::escape;

/// Something went wrong while counting; the hooks are unaffected.
#[derive(Debug)]
pub struct MetricsError {
    pub context: String,
    pub error: io::Error,
}

impl std::fmt::Display for MetricsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "failed to {}: {}", self.context, self.error)
    }
}

impl std::error::Error for MetricsError {}

impl From<nodeio::Error> for MetricsError {
    fn from(e: nodeio::Error) -> Self {
        let (context, error) = match e {
            nodeio::Error::Io { op, path, source } => (format!("{op} {}", path.display()), source),
            other => (
                "use the metrics files".to_owned(),
                io::Error::new(io::ErrorKind::PermissionDenied, other.to_string()),
            ),
        };
        MetricsError { context, error }
    }
}

/// Where the metrics go.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The root prefix: directories are reached from it (nodeio::walk).
    pub root: PathBuf,
    pub state_dir: PathBuf,
    /// `hookrun.prom` is written only when this directory exists (node_exporter
    /// is installed); the state file is always kept.
    pub textfile_dir: PathBuf,
}

/// Adds `records` to the state and re-renders the textfile. Returns notes worth
/// logging (e.g. a corrupt state file that was started over).
///
/// The state file is updated under its lock (`nodeio::counter_file`: a lock
/// file nobody else can open), its directory reached once, the file
/// replaced through a kept spare (`.metrics.json.spare`: no file created or
/// removed per run; `/var/lib/hookrun` is root's, and purge removes it),
/// not flushed (a node crash costs at most the last counts). Under the same
/// lock (so the last textfile shows the last count), the textfile is
/// replaced atomically (`nodeio::atomic`: a new file per run, as
/// node_exporter reads it on its own schedule) in a directory reached
/// without following anyone else's symlink: on Debian it belongs to the
/// `prometheus` user. It is not flushed: every run rewrites it. No textfile
/// directory (node_exporter not installed): no textfile.
///
/// Both directories are reached in one walk's memory
/// (`nodeio::walk::remember_judged_dirs`, held for this call only: hookrun
/// forks no hook while it lives): the trusted directories on the way to the
/// state directory are judged once, and the textfile directory is reached
/// from its nearest trusted ancestor (`/var/lib`), each directory below it
/// judged, instead of from the root again.
pub fn record(
    paths: &Paths,
    records: &[Record<'_>],
    lock_wait: Duration,
) -> Result<Vec<String>, MetricsError> {
    let _one_walk = nodeio::walk::remember_judged_dirs();
    let mut notes = Vec::new();
    let updated = counter_file::update_kept::<State, _>(
        &paths.root,
        &paths.state_dir,
        STATE_FILE,
        LOCK_FILE,
        0o644,
        Instant::now() + lock_wait,
        |state| {
            for record in records {
                state.add(record);
            }
        },
    )?;
    notes.extend(updated.restarted.clone());
    let written = atomic::replace(
        &paths.root,
        &paths.textfile_dir.join(PROM_FILE),
        updated.value.render().as_bytes(),
        0o644,
        Judge::NoFollow,
        false,
        atomic::Durability::Visible,
    );
    match written {
        Ok(_visible) => {}
        Err(_) if !paths.textfile_dir.is_dir() => {}
        Err(e) => return Err(e.into()),
    }
    updated.release()?;
    Ok(notes)
}

/// Reads the state file (`hookrun list`, tests). Read without the lock: a
/// read that overlapped two runs' updates (it can, through the kept spare)
/// does not parse, and is read again.
pub fn load(state_dir: &Path) -> io::Result<State> {
    let path = state_dir.join(STATE_FILE);
    let parse = || -> io::Result<State> {
        serde_json::from_slice(&fs::read(&path)?).map_err(io::Error::other)
    };
    parse().or_else(|_| parse())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(hook: &str, fate: Fate, ms: Option<u64>) -> Record<'_> {
        Record {
            phase: "prolog",
            hook,
            fate,
            elapsed: ms.map(Duration::from_millis),
            dropped: Dropped::default(),
        }
    }

    #[test]
    fn dropped_lines_are_counted_per_stream_and_old_state_files_still_load() {
        let mut state = State::default();
        let mut record = sample("10-a", Fate::Ok, Some(1));
        record.dropped = Dropped {
            stdout: 2,
            stderr: 0,
        };
        state.add(&record);
        state.add(&record);
        let text = state.render();
        for line in [
            r#"hookrun_lines_dropped_total{phase="prolog",hook="10-a",stream="stdout"} 4"#,
            r#"hookrun_lines_dropped_total{phase="prolog",hook="10-a",stream="stderr"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        assert!(text.contains("# TYPE hookrun_lines_dropped_total counter\n"));
        // A state file written before the counter existed.
        let old = r#"{"version":1,"hooks":{"prolog":{"10-a":{"runs":{"ok":3}}}}}"#;
        let old: State = serde_json::from_str(old).expect("old state loads");
        assert_eq!(old.runs("prolog", "10-a", Fate::Ok), 3);
        assert!(old.render().contains(
            r#"hookrun_lines_dropped_total{phase="prolog",hook="10-a",stream="stdout"} 0"#
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("two\nlines"), "two\\nlines");
        let mut state = State::default();
        state.add(&sample("odd\"name", Fate::Ok, Some(1)));
        assert!(state.render().contains(
            r#"hookrun_hook_runs_total{phase="prolog",hook="odd\"name",outcome="ok"} 1"#
        ));
    }

    #[test]
    fn rendered_text_format() {
        let mut state = State::default();
        state.add(&sample("10-a", Fate::Ok, Some(3)));
        state.add(&sample("10-a", Fate::Failed, Some(700)));
        state.add(&sample("10-a", Fate::Skipped, None));
        let text = state.render();
        let expected_runs = [
            r#"hookrun_hook_runs_total{phase="prolog",hook="10-a",outcome="ok"} 1"#,
            r#"hookrun_hook_runs_total{phase="prolog",hook="10-a",outcome="failed"} 1"#,
            r#"hookrun_hook_runs_total{phase="prolog",hook="10-a",outcome="timeout"} 0"#,
            r#"hookrun_hook_runs_total{phase="prolog",hook="10-a",outcome="skipped"} 1"#,
            r#"hookrun_hook_runs_total{phase="prolog",hook="10-a",outcome="interrupted"} 0"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="0.001"} 0"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="0.005"} 1"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="0.5"} 1"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="1"} 2"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="10"} 2"#,
            r#"hookrun_hook_duration_seconds_bucket{phase="prolog",hook="10-a",le="+Inf"} 2"#,
            r#"hookrun_hook_duration_seconds_sum{phase="prolog",hook="10-a"} 0.703"#,
            r#"hookrun_hook_duration_seconds_count{phase="prolog",hook="10-a"} 2"#,
        ];
        for line in expected_runs {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        assert!(text.contains("# TYPE hookrun_hook_runs_total counter\n"));
        assert!(text.contains("# TYPE hookrun_hook_duration_seconds histogram\n"));
        // Which hookrun wrote it: its version (here the crate's), revision and commit.
        let info = format!(
            r#"hookrun_build_info{{version="{}",revision="",commit=""}} 1"#,
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.lines().any(|l| l == info), "missing {info}\n{text}");
        // No timestamps: every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let after_labels = line.rsplit_once('}').map_or("", |(_, v)| v.trim());
            assert!(!after_labels.contains(' '), "timestamp or junk in {line}");
        }
    }

    #[test]
    fn overlong_runs_land_in_inf() {
        let mut histogram = Histogram::default();
        histogram.observe(42.0);
        assert_eq!(histogram.counts[BUCKETS.len()], 1);
        assert_eq!(histogram.count, 1);
    }

    #[test]
    fn record_twice_adds_up_and_writes_textfile() {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths = Paths {
            root: dir.path().to_owned(),
            state_dir: dir.path().join("state"),
            textfile_dir: dir.path().join("prom"),
        };
        fs::create_dir(&paths.textfile_dir).expect("mkdir");
        for _ in 0..2 {
            record(&paths, &[record_ok()], LOCK_WAIT).expect("recorded");
        }
        let state = load(&paths.state_dir).expect("state");
        assert_eq!(state.runs("prolog", "10-a", Fate::Ok), 2);
        let prom = fs::read_to_string(paths.textfile_dir.join(PROM_FILE)).expect("prom");
        assert!(prom.contains(r#"outcome="ok"} 2"#));
        let leftovers: Vec<_> = fs::read_dir(&paths.textfile_dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(leftovers, [PROM_FILE]);
        // The state: replaced through its kept spare, nothing else made.
        let mut state_files: Vec<_> = fs::read_dir(&paths.state_dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        state_files.sort();
        assert_eq!(state_files, [".metrics.json.spare", STATE_FILE, LOCK_FILE]);
    }

    #[test]
    fn no_textfile_without_the_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths = Paths {
            root: dir.path().to_owned(),
            state_dir: dir.path().join("state"),
            textfile_dir: dir.path().join("absent"),
        };
        record(&paths, &[record_ok()], LOCK_WAIT).expect("recorded");
        assert!(!paths.textfile_dir.exists());
    }

    #[test]
    fn corrupt_state_starts_over_with_a_note() {
        let dir = tempfile::tempdir().expect("temp dir");
        let paths = Paths {
            root: dir.path().to_owned(),
            state_dir: dir.path().to_owned(),
            textfile_dir: dir.path().join("absent"),
        };
        fs::write(dir.path().join(STATE_FILE), "{not json").expect("write");
        let notes = record(&paths, &[record_ok()], LOCK_WAIT).expect("recorded");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(
            load(dir.path())
                .expect("state")
                .runs("prolog", "10-a", Fate::Ok),
            1
        );
    }

    fn record_ok() -> Record<'static> {
        sample("10-a", Fate::Ok, Some(2))
    }
}
