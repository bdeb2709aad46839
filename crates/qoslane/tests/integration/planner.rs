//! The planner, `txn::desired`, as a golden table: each row is a named
//! situation of a shared node — the active jobs' records (a level's rank and
//! settings), the node's baseline — and the whole desired node state it must
//! give, every path written out. A failure lists every wrong row, by name,
//! with what was expected and what came out.
//!
//! The rule under test: per setting path, the value of the highest-priority
//! active job that sets it (lowest rank, then lowest job id); a baseline path
//! no active job sets goes back to its baseline value.
//!
//! Pure: no node, no binary. The end-to-end counterpart (the real binary on
//! a temp root against an independent model) is `reliability`.

use std::collections::{BTreeMap, BTreeSet};

use qoslane::job::JobId;
use qoslane::job::qos::QosSource;
use qoslane::mapping::validate_str;
use qoslane::state::JobRecord;
use qoslane::txn::{Want, desired};

const TOS: &str = "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos";
const RMEM: &str = "/proc/sys/net/core/rmem_max";
const WMEM: &str = "/proc/sys/net/core/wmem_max";

/// What a Prolog copies from a level into a job's record.
#[derive(Clone, Copy, Debug)]
struct Level {
    name: &'static str,
    /// The level's place in the mapping: 0 is the highest priority.
    rank: usize,
    settings: &'static [(&'static str, &'static str)],
}

// The table's mapping (`MAPPING` below, checked against these by
// `table_levels_are_the_mappings`). Overlapping on purpose: on a shared node
// each path can be owned by a different job.
const MC: Level = Level {
    name: "mission-critical",
    rank: 0,
    settings: &[(TOS, "106"), (RMEM, "16777216")],
};
const HIGH: Level = Level {
    name: "high",
    rank: 1,
    settings: &[(TOS, "96"), (RMEM, "8388608"), (WMEM, "8388608")],
};
const NORMAL: Level = Level {
    name: "normal",
    rank: 2,
    settings: &[(RMEM, "4194304")],
};
const LOW: Level = Level {
    name: "low",
    rank: 3,
    settings: &[(TOS, "32"), (WMEM, "1048576")],
};
const NO_SETTINGS: Level = Level {
    name: "scavenger",
    rank: 4,
    settings: &[],
};
const LEVELS: [Level; 5] = [MC, HIGH, NORMAL, LOW, NO_SETTINGS];

// Records written under another version of the mapping (a job started
// before an edit, or rewritten by `sync` after it).
/// `high` after an edit that changed its ToS: same rank, another value.
const HIGH_EDITED: Level = Level {
    name: "high",
    rank: 1,
    settings: &[(TOS, "64"), (RMEM, "8388608"), (WMEM, "8388608")],
};
/// `high` after an edit that removed its `wmem_max` setting.
const HIGH_WITHOUT_WMEM: Level = Level {
    name: "high",
    rank: 1,
    settings: &[(TOS, "96"), (RMEM, "8388608")],
};
/// A level the current mapping no longer has: the hooks give it rank
/// `usize::MAX`, below every level.
const GONE: Level = Level {
    name: "retired",
    rank: usize::MAX,
    settings: &[(TOS, "7"), (RMEM, "1")],
};

const MAPPING: &str = "\
default_level: normal
fabric_check: off
on_failure: continue
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: \"106\"
      - path: /proc/sys/net/core/rmem_max
        value: \"16777216\"
  - name: high
    qos: [high]
    service_level: 2
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: \"96\"
      - path: /proc/sys/net/core/rmem_max
        value: \"8388608\"
      - path: /proc/sys/net/core/wmem_max
        value: \"8388608\"
  - name: normal
    qos: [normal]
    service_level: 1
    node_settings:
      - path: /proc/sys/net/core/rmem_max
        value: \"4194304\"
  - name: low
    qos: [low]
    service_level: 0
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: \"32\"
      - path: /proc/sys/net/core/wmem_max
        value: \"1048576\"
  - name: scavenger
    qos: [scavenger]
    service_level: 4
";

/// The node's values before the first job changed them.
const BASE_TOS: (&str, &str) = (TOS, "0");
const BASE_RMEM: (&str, &str) = (RMEM, "212992");
const BASE_WMEM: (&str, &str) = (WMEM, "212992");

/// What one path should hold, as the table spells it.
#[derive(Clone, Copy, Debug)]
enum W {
    Set(&'static str),
    Restore(&'static str),
}
use W::{Restore, Set};

struct Case {
    name: &'static str,
    /// The active jobs: (job id, the level its record was written from).
    jobs: &'static [(u32, Level)],
    /// The node's baseline (`node.json`): what the first job found.
    baseline: &'static [(&'static str, &'static str)],
    /// The desired node state: every path, nothing else.
    want: &'static [(&'static str, W)],
}

const CASES: &[Case] = &[
    // --- no jobs
    Case {
        name: "no jobs, no baseline: nothing to do",
        jobs: &[],
        baseline: &[],
        want: &[],
    },
    Case {
        name: "no jobs: every baseline path goes back to its baseline",
        jobs: &[],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Restore("0")),
            (RMEM, Restore("212992")),
            (WMEM, Restore("212992")),
        ],
    },
    // --- one job
    Case {
        name: "one job on a fresh node: its level's settings",
        jobs: &[(1, HIGH)],
        baseline: &[],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "one job: a set path is set, not restored, though it is in the baseline",
        jobs: &[(1, NORMAL)],
        baseline: &[BASE_RMEM],
        want: &[(RMEM, Set("4194304"))],
    },
    Case {
        name: "one job: baseline paths it does not set are restored",
        jobs: &[(1, NORMAL)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Restore("0")),
            (RMEM, Set("4194304")),
            (WMEM, Restore("212992")),
        ],
    },
    Case {
        name: "one job of a level without settings: the baseline only",
        jobs: &[(1, NO_SETTINGS)],
        baseline: &[BASE_TOS],
        want: &[(TOS, Restore("0"))],
    },
    // --- different ranks on the same setting
    Case {
        name: "two ranks want the same settings: the highest rank wins (younger job)",
        jobs: &[(3, HIGH), (9, MC)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("106")),
            (RMEM, Set("16777216")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "two ranks want the same settings: the highest rank wins (older job)",
        jobs: &[(3, MC), (9, HIGH)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("106")),
            (RMEM, Set("16777216")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "per path, not per job: each path has its own highest job",
        jobs: &[(1, LOW), (2, NORMAL), (3, MC)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("106")),
            (RMEM, Set("16777216")),
            (WMEM, Set("1048576")),
        ],
    },
    Case {
        name: "four levels at once: the highest of each path",
        jobs: &[
            (10, LOW),
            (11, NORMAL),
            (12, HIGH),
            (13, MC),
            (14, NO_SETTINGS),
        ],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("106")),
            (RMEM, Set("16777216")),
            (WMEM, Set("8388608")),
        ],
    },
    // --- a setting only one job wants
    Case {
        name: "a setting only one job wants: that job's value, below a higher job",
        jobs: &[(1, MC), (2, LOW)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("106")),
            (RMEM, Set("16777216")),
            (WMEM, Set("1048576")),
        ],
    },
    Case {
        name: "a setting only one job wants, not yet in the baseline: set all the same",
        jobs: &[(1, NORMAL), (2, LOW)],
        baseline: &[BASE_RMEM],
        want: &[
            (TOS, Set("32")),
            (RMEM, Set("4194304")),
            (WMEM, Set("1048576")),
        ],
    },
    // --- equal ranks
    Case {
        name: "equal rank, same level: the level's values",
        jobs: &[(5, HIGH), (6, HIGH)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "equal rank, values differ (an edit between their starts): the oldest job wins",
        jobs: &[(4, HIGH), (8, HIGH_EDITED)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "equal rank, values differ: the oldest job wins, not the newest mapping",
        jobs: &[(4, HIGH_EDITED), (8, HIGH)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("64")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "equal rank: job ids compare as numbers (9 is older than 10)",
        jobs: &[(10, HIGH_EDITED), (9, HIGH)],
        baseline: &[],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    // --- settings that disappear from a level
    Case {
        name: "a setting disappears from the only job's level: back to the baseline",
        jobs: &[(1, HIGH_WITHOUT_WMEM)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Restore("212992")),
        ],
    },
    Case {
        name: "a setting disappears from one level, a lower job still wants it: its value",
        jobs: &[(1, HIGH_WITHOUT_WMEM), (2, LOW)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("1048576")),
        ],
    },
    Case {
        name: "a setting disappears from one job's record, an older record still has it",
        jobs: &[(1, HIGH), (2, HIGH_WITHOUT_WMEM)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("96")),
            (RMEM, Set("8388608")),
            (WMEM, Set("8388608")),
        ],
    },
    Case {
        name: "the highest job ended: its paths go to the next job in line or the baseline",
        jobs: &[(2, LOW)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[
            (TOS, Set("32")),
            (RMEM, Restore("212992")),
            (WMEM, Set("1048576")),
        ],
    },
    // --- a level the mapping no longer has
    Case {
        name: "a record of a removed level (rank usize::MAX) loses to every level",
        jobs: &[(1, GONE), (2, LOW)],
        baseline: &[BASE_TOS, BASE_RMEM],
        want: &[(TOS, Set("32")), (RMEM, Set("1")), (WMEM, Set("1048576"))],
    },
    Case {
        name: "a record of a removed level alone still gets its settings",
        jobs: &[(1, GONE)],
        baseline: &[BASE_TOS, BASE_RMEM, BASE_WMEM],
        want: &[(TOS, Set("7")), (RMEM, Set("1")), (WMEM, Restore("212992"))],
    },
];

fn record(job: u32, level: &Level) -> JobRecord {
    JobRecord {
        job_id: JobId::parse(&job.to_string()).expect("a job id"),
        time: "2026-11-30T00:00:00.000Z".into(),
        user: Some("alice".into()),
        qos: Some(level.name.into()),
        qos_source: QosSource::Env,
        level: level.name.into(),
        rank: level.rank,
        service_level: 0,
        virtual_lane: None,
        traffic_class: None,
        settings: level
            .settings
            .iter()
            .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
            .collect(),
        exports: Vec::new(),
        unset: Vec::new(),
        mapping_sha256: "0".repeat(64),
    }
}

fn want(w: W) -> Want {
    match w {
        Set(v) => Want::Set(v.to_owned()),
        Restore(v) => Want::Restore(v.to_owned()),
    }
}

fn render(state: &BTreeMap<String, Want>) -> String {
    if state.is_empty() {
        return "    (nothing)\n".to_owned();
    }
    state
        .iter()
        .map(|(p, w)| format!("    {p}: {w:?}\n"))
        .collect()
}

/// Every row of `CASES`; all wrong rows are reported at once.
#[test]
fn desired_node_state_golden_table() {
    let mut wrong = Vec::new();
    for case in CASES {
        let active: BTreeMap<JobId, JobRecord> = case
            .jobs
            .iter()
            .map(|(j, l)| {
                let r = record(*j, l);
                (r.job_id, r)
            })
            .collect();
        assert_eq!(active.len(), case.jobs.len(), "{}: a job twice", case.name);
        let baseline: BTreeMap<String, String> = case
            .baseline
            .iter()
            .map(|(p, v)| ((*p).to_owned(), (*v).to_owned()))
            .collect();
        let expected: BTreeMap<String, Want> = case
            .want
            .iter()
            .map(|(p, w)| ((*p).to_owned(), want(*w)))
            .collect();
        assert_eq!(
            expected.len(),
            case.want.len(),
            "{}: a path twice",
            case.name
        );
        let got = desired(&qoslane::state::claims_of(&active), &baseline);
        if got != expected {
            let jobs: Vec<String> = case
                .jobs
                .iter()
                .map(|(j, l)| format!("{j}:{}(rank {})", l.name, l.rank))
                .collect();
            wrong.push(format!(
                "{}\n  jobs: {}\n  baseline: {:?}\n  expected:\n{}  got:\n{}",
                case.name,
                jobs.join(" "),
                case.baseline,
                render(&expected),
                render(&got)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} rows wrong:\n\n{}",
        wrong.len(),
        CASES.len(),
        wrong.join("\n")
    );
}

/// The rows are named, and no two alike: a failure names one situation.
#[test]
fn golden_table_rows_have_distinct_names() {
    let mut seen = BTreeSet::new();
    for case in CASES {
        assert!(!case.name.is_empty());
        assert!(seen.insert(case.name), "two rows named `{}`", case.name);
    }
}

/// The table's levels are what a real mapping gives a Prolog: the rank is
/// the level's place in the file, the settings its `node_settings`.
#[test]
fn table_levels_are_the_mappings() {
    let v = validate_str(MAPPING);
    let m = v.mapping.unwrap_or_else(|| panic!("{:?}", v.diagnostics));
    for l in LEVELS {
        assert_eq!(m.rank(l.name), Some(l.rank), "{}", l.name);
        let level = m.level(l.name).expect("the level");
        let settings: Vec<(&str, &str)> = level
            .node_settings
            .iter()
            .map(|n| (n.path.as_str(), n.value.as_str()))
            .collect();
        assert_eq!(settings, l.settings, "{}", l.name);
    }
    assert_eq!(
        m.rank(GONE.name),
        None,
        "the removed level is not in the mapping"
    );
}
