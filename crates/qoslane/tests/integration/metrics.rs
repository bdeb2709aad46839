//! Metrics end to end: the rendered text against a golden file and a real
//! Prometheus parser (`promtool check metrics`), a real node_exporter's
//! textfile collector scraping what real prolog/epilog runs (one rolled back)
//! left behind, the `qoslane metrics --listen` endpoint, concurrent runs
//! losing no counts, metrics failures never failing a hook, and the shipped
//! alert rules and Grafana dashboard.
//!
//! Tests that need `promtool` or node_exporter skip with a message when the
//! program is missing, and fail instead when `QOSLANE_REQUIRE_TOOLS=1` (CI).
//! Every process started here is killed by a guard; only loopback is used.

#![expect(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::util::Within as _;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use qoslane::fabric::policy::Alignment;
use qoslane::metrics::{self, Counters, Gauges, Histogram};

use crate::util::{Node, Proc, TEXTFILE, TOS, free_port, ok, tool};

// ---------------------------------------------------------------------------
// Processes that listen

/// `addr` accepts connections before `proc` ends (at most 10 s).
fn wait_for_listener(addr: SocketAddr, proc: &mut Proc) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if proc.exited().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

// ---------------------------------------------------------------------------
// HTTP and the text format

#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Sends `request` as is and reads the whole answer (the server closes).
fn http_raw(addr: SocketAddr, request: &[u8]) -> Response {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).expect("send request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read answer");
    let text = String::from_utf8(raw).expect("answer is UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line: {head}"));
    Response {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

fn get(addr: SocketAddr, path: &str) -> Response {
    http_raw(
        addr,
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: qoslane-test\r\n\r\n")
            .as_bytes(),
    )
}

/// `{k="v",...}` at the start of `s` (if any): the labels and what follows.
fn parse_labels<'a>(s: &'a str, line: &str) -> (BTreeMap<String, String>, &'a str) {
    let mut labels = BTreeMap::new();
    let Some(mut rest) = s.strip_prefix('{') else {
        return (labels, s);
    };
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let (key, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad labels in {line:?}"));
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => panic!("bad escape in {line:?}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        };
        labels.insert(key.trim().to_owned(), value);
        rest = &after[end + 1..];
    }
}

/// Samples of an exposition: metric name and label set → value.
#[derive(Debug, Default)]
struct Samples(BTreeMap<(String, BTreeMap<String, String>), f64>);

impl Samples {
    /// Parses the classic text format (as node_exporter or qoslane print it).
    fn parse(text: &str) -> Self {
        let mut out = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let name_end = line
                .find(['{', ' '])
                .unwrap_or_else(|| panic!("bad line {line:?}"));
            let name = &line[..name_end];
            let (labels, rest) = parse_labels(&line[name_end..], line);
            let mut fields = rest.split_whitespace();
            let v = fields.next().unwrap_or_else(|| panic!("no value {line:?}"));
            assert!(
                fields.next().is_none(),
                "a sample with a timestamp: {line:?}"
            );
            let v: f64 = match v {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                other => other
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value {line:?}")),
            };
            let prev = out.insert((name.to_owned(), labels), v);
            assert!(prev.is_none(), "duplicate series {line:?}");
        }
        Self(out)
    }

    /// The value of the series with exactly these labels.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.0.get(&(name.to_owned(), want)).copied()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no series {name}{labels:?}; have:\n{}", self.names(name)))
    }

    /// The sum over every series of `name` whose labels include `filter`.
    fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && filter
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, v)| v)
            .sum()
    }

    fn names(&self, prefix: &str) -> String {
        self.0
            .iter()
            .filter(|((n, _), _)| n.starts_with(prefix))
            .map(|((n, l), v)| format!("  {n}{l:?} {v}\n"))
            .collect()
    }
}

/// Equal texts, or a panic naming the lines that differ.
fn assert_same_text(got: &str, want: &str, what: &str) {
    if got != want {
        let diff: Vec<_> = got
            .lines()
            .zip(want.lines())
            .filter(|(a, b)| a != b)
            .collect();
        panic!(
            "{what}: texts differ ({} vs {} lines): {diff:#?}",
            got.lines().count(),
            want.lines().count()
        );
    }
}

/// `promtool check metrics` on `text`: parse errors and lint warnings fail.
fn promtool_check_metrics(promtool: &Path, text: &str) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = crate::util::output_of(child, "promtool check metrics");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {:?}\n{}{}\n--- text ---\n{text}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------
// The nodes: util's fixture with these mappings

/// A mapping with five levels. `mission-critical` also asks for an
/// out-of-range value of a real kernel file (a process's `oom_score_adj`,
/// reached through a symlinked directory), which the kernel refuses with
/// EINVAL: a genuine write failure after the journal, so the run rolls back
/// and the restore succeeds. `scavenger` names a VL the SM does not map its SL
/// to: misaligned. `fabric_check: warn`, so jobs still start.
const MAPPING: &str = r#"default_level: normal
fabric_check: warn
on_failure: continue
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    virtual_lane: 3
    traffic_class: 106
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: "106"
      - path: /proc/sys/qoslane-probe/oom_score_adj
        value: "5000"
  - name: high
    qos: [high]
    service_level: 2
    virtual_lane: 2
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: "74"
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
  - name: low
    qos: [low, standby]
    service_level: 1
    virtual_lane: 1
  - name: scavenger
    qos: [scavenger]
    service_level: 4
    virtual_lane: 6
"#;

/// The same levels without the fabric or the kernel probe: fast, for the
/// concurrency and failure tests.
const SIMPLE_MAPPING: &str = r#"default_level: normal
fabric_check: off
on_failure: continue
levels:
  - name: mission-critical
    qos: [mission-critical]
    service_level: 3
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: "106"
  - name: high
    qos: [high]
    service_level: 2
    node_settings:
      - path: /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos
        value: "74"
  - name: normal
    qos: [normal]
    service_level: 0
  - name: low
    qos: [low]
    service_level: 1
"#;

/// A node with [`MAPPING`]: an mlx5 InfiniBand port in sysfs that the fake
/// `smpquery` answers with real tables (SL n → VL n: tests/fixtures/smpquery/
/// qos-identity.*), and the kernel probe the mission-critical level writes.
fn fabric_node() -> Node {
    let n = Node::with_mapping(MAPPING);
    n.add_hca("qos-identity");
    n.add_kernel_probe();
    n
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Five real runs, one of them rolled back by the kernel refusing a value:
/// job 101 (high) applied, 102 (mission-critical) rolled back, 103 (low)
/// applied, epilog 101 reverted, epilog 102 unchanged (nothing granted).
fn scripted_node() -> (Node, f64) {
    let n = fabric_node();
    let oom_before = n.read("/proc/sys/qoslane-probe/oom_score_adj");
    let t0 = now().floor();
    ok(&n.prolog(101, "high"));
    assert_eq!(n.read(TOS).trim(), "74");
    ok(&n.prolog(102, "mission-critical"));
    let a = n.last_audit("prolog");
    assert_eq!(
        a["outcome"], "rolled_back",
        "the kernel should refuse 5000: {a}"
    );
    assert!(
        a["error"].as_str().unwrap_or("").contains("oom_score_adj"),
        "{a}"
    );
    assert_eq!(n.read(TOS).trim(), "74", "ToS restored");
    assert_eq!(n.read("/proc/sys/qoslane-probe/oom_score_adj"), oom_before);
    ok(&n.prolog(103, "low"));
    ok(&n.epilog(101));
    assert_eq!(n.read(TOS).trim(), "0", "baseline back");
    ok(&n.epilog(102));
    assert_eq!(n.last_audit("epilog")["outcome"], "unchanged");
    (n, t0)
}

/// What the scripted runs must show, through any reader.
fn assert_scripted_values(s: &Samples, n: &Node, t0: f64) {
    let runs = |event, outcome| {
        s.value(
            "qoslane_hook_runs_total",
            &[("event", event), ("outcome", outcome)],
        )
    };
    assert_eq!(runs("prolog", "applied"), 2.0);
    assert_eq!(runs("prolog", "rolled_back"), 1.0);
    assert_eq!(runs("prolog", "failed"), 0.0);
    assert_eq!(runs("prolog", "unchanged"), 0.0);
    assert_eq!(runs("epilog", "reverted"), 1.0);
    assert_eq!(runs("epilog", "unchanged"), 1.0);
    assert_eq!(runs("sync", "applied"), 0.0, "every event has zero series");
    assert_eq!(s.sum("qoslane_hook_runs_total", &[]), 5.0);

    assert_eq!(
        s.value("qoslane_rollbacks_total", &[("event", "prolog")]),
        1.0
    );
    assert_eq!(
        s.value("qoslane_rollbacks_total", &[("event", "epilog")]),
        0.0
    );

    let count = |event| s.value("qoslane_hook_duration_seconds_count", &[("event", event)]);
    assert_eq!(count("prolog"), 3.0);
    assert_eq!(count("epilog"), 2.0);
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_bucket",
            &[("event", "prolog"), ("le", "+Inf")]
        ),
        3.0
    );
    let sum = s.value("qoslane_hook_duration_seconds_sum", &[("event", "prolog")]);
    assert!(sum > 0.0 && sum < 30.0, "prolog duration sum {sum}");

    for (level, jobs) in [
        ("low", 1.0),
        ("high", 0.0),
        ("mission-critical", 0.0),
        ("normal", 0.0),
        ("scavenger", 0.0),
    ] {
        assert_eq!(
            s.value("qoslane_active_jobs", &[("level", level)]),
            jobs,
            "{level}"
        );
    }

    let aligned = |level| {
        s.value(
            "qoslane_fabric_aligned",
            &[("device", "mlx5_0"), ("port", "1"), ("level", level)],
        )
    };
    for level in ["mission-critical", "high", "normal", "low"] {
        assert_eq!(aligned(level), 1.0, "{level}");
    }
    assert_eq!(aligned("scavenger"), 0.0, "SL4 is on VL4, not VL6");

    let sha = qoslane::config::sha256_hex(n.read("/etc/qoslane/qos-network.yml").as_bytes());
    assert_eq!(s.value("qoslane_mapping_info", &[("sha256", &sha)]), 1.0);

    for event in ["prolog", "epilog"] {
        let t = s.value(
            "qoslane_last_success_timestamp_seconds",
            &[("event", event)],
        );
        assert!(
            t >= t0 && t <= now() + 1.0,
            "{event} last success {t}, started {t0}"
        );
    }
}

// ---------------------------------------------------------------------------
// The rendered text

fn fixed_counters() -> (Counters, Gauges) {
    let mut c = Counters::default();
    for (event, outcome, n) in [
        ("prolog", "applied", 7),
        ("prolog", "rolled_back", 1),
        ("prolog", "failed", 2),
        ("epilog", "reverted", 6),
        ("epilog", "unchanged", 1),
        ("sync", "applied", 1),
    ] {
        c.runs
            .entry(event.into())
            .or_default()
            .insert(outcome.into(), n);
    }
    c.rollbacks.insert("prolog".into(), 1);
    c.rollbacks.insert("recover".into(), 1);
    c.durations.insert(
        "prolog".into(),
        Histogram {
            counts: vec![0, 1, 3, 2, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1],
            sum: 12.75,
        },
    );
    c.durations.insert(
        "epilog".into(),
        Histogram {
            counts: vec![5, 2],
            sum: 0.0085,
        },
    );
    c.last_success.insert("prolog".into(), 1_767_225_600.125);
    c.last_success.insert("epilog".into(), 1_767_225_660.5);
    let al = |device: &str, port, level: &str, aligned| Alignment {
        device: device.into(),
        port,
        level: level.into(),
        aligned,
    };
    c.fabric = vec![
        al("mlx5_0", 1, "high", true),
        al("mlx5_0", 1, "low", false),
        al("mlx5_1", 1, "high", true),
        // The same port twice, once misaligned: one series, 0.
        al("mlx5_1", 1, "low", true),
        al("mlx5_1", 1, "low", false),
    ];
    let hop = |level: &str, verdict: &str, ports| qoslane::fabric::policy::HopCount {
        level: level.into(),
        verdict: verdict.into(),
        ports,
    };
    c.first_hop = vec![
        hop("high", "carried", 3),
        hop("low", "carried", 1),
        hop("low", "dropped", 2),
        // Two HCA ports' counts of one (level, verdict): one series, summed.
        hop("low", "dropped", 1),
    ];
    c.qos_fallbacks.insert("squeue_slow".into(), 3);
    c.health_warnings = 2;
    c.off_level_bytes.insert("high".into(), 4096);
    c.xmit_wait_ticks.insert("mlx5_0/1".into(), {
        let mut t = [0; 16];
        t[2] = 1500;
        t[7] = 3;
        t
    });
    let mut g = Gauges {
        mapping_sha256: Some(
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        ),
        mapping_valid: true,
        ..Default::default()
    };
    g.active_jobs.insert("high".into(), 2);
    g.active_jobs.insert("low".into(), 0);
    g.vl_levels.insert(2, "high".into());
    g.vl_levels.insert(1, "low".into());
    g.on_failure.insert("high".into(), "fail_job");
    g.on_failure.insert("low".into(), "continue");
    // Label values are escaped: backslash, double quote, newline.
    g.active_jobs
        .insert("odd \"name\" with \\ and\nnewline".into(), 1);
    (c, g)
}

#[test]
fn rendered_text_matches_the_golden_file() {
    let (c, g) = fixed_counters();
    let text = metrics::render(&c, &g);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/metrics.prom");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", golden.display()));
    assert_eq!(
        text, want,
        "render() changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"
    );

    // And it says what the counters say.
    let s = Samples::parse(&text);
    assert_eq!(
        s.value(
            "qoslane_active_jobs",
            &[("level", "odd \"name\" with \\ and\nnewline")]
        ),
        1.0
    );
    assert!(text.contains(r#"qoslane_active_jobs{level="odd \"name\" with \\ and\nnewline"} 1"#));
    assert_eq!(
        s.value(
            "qoslane_fabric_aligned",
            &[("device", "mlx5_1"), ("port", "1"), ("level", "low")]
        ),
        0.0
    );
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_bucket",
            &[("event", "prolog"), ("le", "0.005")]
        ),
        4.0
    );
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_bucket",
            &[("event", "prolog"), ("le", "10")]
        ),
        9.0
    );
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_count",
            &[("event", "prolog")]
        ),
        10.0
    );
    // A short (older) bucket vector renders as zeros, not a panic.
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_count",
            &[("event", "epilog")]
        ),
        7.0
    );
    assert_eq!(
        s.value("qoslane_hook_duration_seconds_count", &[("event", "sync")]),
        0.0
    );
    assert_eq!(
        s.value("qoslane_rollbacks_total", &[("event", "health")]),
        0.0
    );
    for family in [
        "qoslane_hook_runs_total counter",
        "qoslane_rollbacks_total counter",
        "qoslane_hook_duration_seconds histogram",
        "qoslane_active_jobs gauge",
        "qoslane_fabric_aligned gauge",
        "qoslane_mapping_info gauge",
        "qoslane_last_success_timestamp_seconds gauge",
    ] {
        let name = family.split(' ').next().unwrap();
        assert!(text.contains(&format!("# TYPE {family}\n")), "{family}");
        assert!(text.contains(&format!("# HELP {name} ")), "{name}");
    }
}

#[test]
fn counters_render_the_same_after_their_json_round_trip() {
    // Each run reads counters.json, adds itself, writes it back and renders;
    // `qoslane metrics` renders what it reads. Both must say the same.
    let mut c = Counters::default();
    let g = Gauges::default();
    for i in 0..2000u32 {
        let outcome = qoslane::report::Outcome::ALL[i as usize % 5];
        c.record(&metrics::Run {
            log_lines_dropped: 0,
            settings_gone: 0,
            event: qoslane::report::Event::COUNTED[i as usize % 3].as_str(),
            outcome,
            seconds: f64::from(i).mul_add(0.000_123_456_789_1, 0.000_987_654_321),
            rolled_back: i % 7 == 0,
            fabric: None,
            first_hop: None,
            succeeded: outcome.is_success(),
            qos_fallback: qoslane::job::qos::Fallback::ALL
                .get(i as usize % 7)
                .copied(),
            health_warnings: (i % 5 == 0).then_some(u64::from(i % 3)),
            node_lock_held_seconds: (i % 4 == 0).then_some(u64::from(i)),
            // An Epilog's whole job, its stretch never started.
            job_sent: (i % 6 == 0).then(|| metrics::JobSent {
                job: i.to_string(),
                level: "low",
                stage: metrics::Stage::End {
                    alone: Some((3, Vec::new())),
                    whole: Some(u64::from(i) * 4),
                },
                sent: Vec::new(),
                at_ms: u64::from(i),
            }),
            live_jobs: None,
            xmit_wait: vec![("mlx5_0/1".into(), [u64::from(i) * 3; 16])],
            xmit_wait_read_at_ms: Some(u64::from(i)),
        });
        let json = serde_json::to_vec(&c).unwrap();
        let back: Counters = serde_json::from_slice(&json).unwrap();
        assert_same_text(
            &metrics::render(&back, &g),
            &metrics::render(&c, &g),
            &format!("after {i} runs"),
        );
        c = back;
    }
    let s = Samples::parse(&metrics::render(&c, &g));
    assert_eq!(s.sum("qoslane_hook_runs_total", &[]), 2000.0);
    assert_eq!(s.sum("qoslane_hook_duration_seconds_count", &[]), 2000.0);
}

#[test]
fn rendered_text_passes_promtool_check_metrics() {
    let Some(promtool) = tool(&["promtool"]) else {
        return;
    };
    let (c, g) = fixed_counters();
    promtool_check_metrics(&promtool, &metrics::render(&c, &g));
    // Nothing at all yet (a fresh node) is valid too.
    promtool_check_metrics(
        &promtool,
        &metrics::render(&Counters::default(), &Gauges::default()),
    );
    // And what real runs write.
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "high"));
    promtool_check_metrics(&promtool, &n.textfile());
}

// ---------------------------------------------------------------------------
// Real readers: node_exporter and `qoslane metrics --listen`

/// node_exporter with only the textfile collector, on a free loopback port.
fn start_node_exporter(exe: &Path, dir: &Path) -> (Proc, SocketAddr) {
    for _ in 0..5 {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut p = Proc::spawn(
            "node_exporter",
            Command::new(exe)
                .arg("--collector.disable-defaults")
                .arg("--collector.textfile")
                .arg(format!("--collector.textfile.directory={}", dir.display()))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--web.disable-exporter-metrics")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        if wait_for_listener(addr, &mut p) {
            return (p, addr);
        }
        // Lost the port to someone else: try another.
    }
    panic!("node_exporter did not come up");
}

#[test]
fn node_exporter_textfile_collector_sees_the_scripted_runs() {
    let Some(exe) = tool(&["prometheus-node-exporter", "node_exporter"]) else {
        return;
    };
    let (n, t0) = scripted_node();
    // Written atomically: no temp file left, nothing else in the directory.
    let dir = n.path("/var/lib/prometheus/node-exporter");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["qoslane.prom"]);

    let (_exporter, addr) = start_node_exporter(&exe, &dir);
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200, "{}", r.head);
    let s = Samples::parse(&r.body);
    assert_eq!(
        s.value("node_textfile_scrape_error", &[]),
        0.0,
        "node_exporter rejected the file:\n{}",
        r.body
    );
    assert_scripted_values(&s, &n, t0);
    if let Some(promtool) = tool(&["promtool"]) {
        // The file as node_exporter serves it, through Prometheus' parser.
        let ours: String = r
            .body
            .lines()
            .filter(|l| l.contains("qoslane_"))
            .map(|l| format!("{l}\n"))
            .collect();
        promtool_check_metrics(&promtool, &ours);
    }
}

/// `qoslane metrics --listen 127.0.0.1:0`; the bound address is read from its
/// first log line.
fn start_endpoint(n: &Node) -> (Proc, SocketAddr) {
    let mut p = Proc::spawn(
        "qoslane metrics",
        n.cmd(&["metrics", "--listen", "127.0.0.1:0"], &[])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    // Its log is drained to its end by the reader's thread: it never blocks
    // on a full pipe.
    let lines = crate::util::LinesWithin::start(p.child.stderr.take().unwrap());
    let first = lines.next("qoslane metrics' first log line");
    let addr: SocketAddr = first
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {first:?}"));
    assert!(
        wait_for_listener(addr, &mut p),
        "qoslane metrics did not listen"
    );
    (p, addr)
}

#[test]
fn http_endpoint_serves_the_same_families() {
    let (n, t0) = scripted_node();
    let (_server, addr) = start_endpoint(&n);

    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(
        r.header("Content-Length"),
        Some(r.body.len().to_string().as_str())
    );
    // Exactly what the last run wrote for node_exporter.
    assert_same_text(&r.body, &n.textfile(), "endpoint vs textfile");
    assert_scripted_values(&Samples::parse(&r.body), &n, t0);
    // A query string is fine; HEAD has no body.
    assert_eq!(get(addr, "/metrics?x=1").status, 200);
    let head = http_raw(addr, b"HEAD /metrics HTTP/1.0\r\n\r\n");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());

    // Printed once, it is the same text.
    let out = n.run(&["metrics"], &[]);
    ok(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), r.body);

    let other = get(addr, "/other");
    assert_eq!(other.status, 404);
    assert!(!other.body.contains("qoslane_"));
    assert_eq!(get(addr, "/").status, 404);
    let post = http_raw(addr, b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(post.status, 405);
    assert_eq!(post.header("Allow"), Some("GET, HEAD"));
    assert_eq!(http_raw(addr, b"garbage\r\n\r\n").status, 400);

    // An oversized request is cut off at once, not read to its end.
    let started = Instant::now();
    let mut big = b"GET /metrics HTTP/1.0\r\nX-Filler: ".to_vec();
    big.resize(256 * 1024, b'a');
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server stops reading at 8 KiB: the rest may not all go through.
    let _ = s.write_all(&big);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 431 "), "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // A client that connects and says nothing does not block the others.
    let _silent = TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    assert_eq!(get(addr, "/metrics").status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn http_endpoint_bounds_slow_clients_and_connections() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    let (_server, addr) = start_endpoint(&n);

    // A client trickling its request is cut off after the request timeout
    // (5 s), however regularly it sends.
    let mut s = TcpStream::connect(addr).unwrap();
    let trickler = std::thread::spawn(move || {
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        for b in b"GET /metrics HTTP/1.0\r\nX-Slow: "
            .iter()
            .chain(std::iter::repeat(&b'a'))
        {
            if s.write_all(&[*b]).is_err() {
                break;
            }
            let mut buf = [0u8; 512];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => answer.extend_from_slice(&buf[..k]),
                Err(_) => {}
            }
            if !answer.is_empty() || started.elapsed() > Duration::from_secs(15) {
                break;
            }
        }
        (
            started.elapsed(),
            String::from_utf8_lossy(&answer).into_owned(),
        )
    });

    // Silent clients beside the trickler do not take the place of a scrape
    // (they used to: 16 of them, and every scrape got `503`).
    let idle: Vec<TcpStream> = (0..16).map(|_| TcpStream::connect(addr).unwrap()).collect();
    assert_eq!(get(addr, "/metrics").status, 200);
    drop(idle);

    let (took, answer) = trickler.join().unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 408 "),
        "{answer:?} after {took:?}"
    );
    assert!(
        took >= Duration::from_millis(4500) && took < Duration::from_secs(8),
        "trickling client held for {took:?}"
    );
}

// ---------------------------------------------------------------------------
// Counting under concurrency and failure

#[test]
fn concurrent_runs_lose_no_counts() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    let jobs = 32u32;
    let levels = ["mission-critical", "high", "normal", "low"];
    let codes: Vec<(Option<i32>, Option<i32>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|i| {
                let n = &n;
                s.spawn(move || {
                    let job = 1000 + i;
                    let qos = levels[i as usize % levels.len()];
                    // A generous deadline: 96 runs share 2 cores here.
                    let env = [("QOSLANE_TIMEOUT_MS", "20000")];
                    let p = n.prolog_env(job, qos, &env).status.code();
                    // A health check counts itself without the node lock
                    // when another run holds it.
                    let _ = n.run(&["health"], &env);
                    let e = n
                        .run(&["epilog"], &[("SLURM_JOB_ID", &job.to_string()), env[0]])
                        .status
                        .code();
                    (p, e)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(codes.iter().all(|c| *c == (Some(0), Some(0))), "{codes:?}");

    let s = Samples::parse(&n.textfile());
    let made = f64::from(jobs);
    assert_eq!(
        s.sum("qoslane_hook_runs_total", &[("event", "prolog")]),
        made,
        "{}",
        s.names("qoslane_hook_runs_total")
    );
    assert_eq!(
        s.sum("qoslane_hook_runs_total", &[("event", "epilog")]),
        made
    );
    assert_eq!(
        s.sum("qoslane_hook_runs_total", &[("event", "health")]),
        made
    );
    assert_eq!(s.sum("qoslane_hook_runs_total", &[]), 3.0 * made);
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_count",
            &[("event", "prolog")]
        ),
        made
    );
    assert_eq!(
        s.value(
            "qoslane_hook_duration_seconds_count",
            &[("event", "epilog")]
        ),
        made
    );
    assert_eq!(s.sum("qoslane_active_jobs", &[]), 0.0, "every job ended");
    assert_eq!(n.read(TOS).trim(), "0", "baseline back");
    // The textfile and the counters agree (the last writer wrote the totals).
    let counters: serde_json::Value =
        serde_json::from_str(&n.read("/var/lib/qoslane/counters.json")).unwrap();
    let total: u64 = counters["runs"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|o| o.as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 3 * u64::from(jobs));
}

/// Holds the lock file at `path` (a run that hangs holding it) until dropped.
fn hold_lock(n: &Node, path: &str) -> std::fs::File {
    let lock = std::fs::File::open(n.path(path)).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    lock
}

/// A run whose deadline is still ahead waits for the counters' lock until
/// then, not only `COUNTERS_LOCK_WAIT` (1 s): when hundreds of jobs start at
/// once a run can wait that long, and its count was lost (7 of 256 Prologs
/// in one storm of bench/cycle.sh on a slow day). Here the lock is held for
/// 1.6 s and the run's deadline is 6 s.
#[test]
fn a_run_waits_for_the_counters_until_its_deadline() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    ok(&n.epilog(1));
    let lock = hold_lock(&n, "/var/lib/qoslane/counters.lock");
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| n.prolog_env(2, "high", &[("QOSLANE_TIMEOUT_MS", "6000")]));
        std::thread::sleep(std::time::Duration::from_millis(1600));
        drop(lock);
        run.join().unwrap()
    });
    ok(&out);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("metrics"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Samples::parse(&n.textfile());
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "prolog"), ("outcome", "applied")]
        ),
        2.0,
        "{}",
        s.names("qoslane_hook_runs_total")
    );
}

#[test]
fn runs_that_cannot_get_the_node_lock_are_all_counted_too() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    ok(&n.epilog(1));
    // A hung run holds the node lock: every run below times out on it and
    // counts itself without it, all at once.
    let lock = hold_lock(&n, "/run/qoslane/lock");
    let jobs = 16u32;
    let outcomes: Vec<Option<i32>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|i| {
                let n = &n;
                s.spawn(move || {
                    n.prolog_env(100 + i, "high", &[("QOSLANE_TIMEOUT_MS", "300")])
                        .status
                        .code()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(lock);
    assert!(outcomes.iter().all(|c| *c == Some(0)), "{outcomes:?}");
    assert_eq!(n.read(TOS).trim(), "0", "nothing applied without the lock");
    let s = Samples::parse(&n.textfile());
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "prolog"), ("outcome", "failed")]
        ),
        f64::from(jobs),
        "{}",
        s.names("qoslane_hook_runs_total")
    );
    assert_eq!(s.sum("qoslane_hook_runs_total", &[]), f64::from(jobs) + 2.0);
}

#[test]
fn a_textfile_directory_that_is_a_file_never_fails_the_hook() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    let not_a_dir = n.path("/not-a-dir");
    std::fs::write(&not_a_dir, "x").unwrap();
    let out = n.prolog_env(
        1,
        "high",
        &[("QOSLANE_TEXTFILE_DIR", not_a_dir.to_str().unwrap())],
    );
    ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("metrics:"),
        "a warning is logged"
    );
    assert_eq!(n.read(TOS).trim(), "74", "the level was applied");
    assert_eq!(n.last_audit("prolog")["outcome"], "applied");
    // The count was kept: the next run publishes it.
    ok(&n.epilog(1));
    let s = Samples::parse(&n.textfile());
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "prolog"), ("outcome", "applied")]
        ),
        1.0
    );
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "epilog"), ("outcome", "reverted")]
        ),
        1.0
    );
}

#[test]
fn a_textfile_that_cannot_be_replaced_never_fails_the_hook() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    // The rename onto qoslane.prom fails: it is a non-empty directory.
    n.write(&format!("{TEXTFILE}/blocker"), "x");
    ok(&n.prolog(1, "high"));
    assert_eq!(n.read(TOS).trim(), "74");
    assert_eq!(n.last_audit("prolog")["outcome"], "applied");
    let dir = n.path("/var/lib/prometheus/node-exporter");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|f| f != "qoslane.prom")
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");

    // Without root, a read-only directory is the other way to fail.
    if !rustix::process::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::remove_dir_all(n.path(TEXTFILE)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        ok(&n.epilog(1));
        assert_eq!(n.read(TOS).trim(), "0");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn a_corrupt_counter_file_restarts_from_zero_without_failing_the_hook() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    n.write("/var/lib/qoslane/counters.json", "{ not json");
    // Readers say so rather than report zeros.
    let printed = n.run(&["metrics"], &[]);
    assert!(!printed.status.success());
    assert!(String::from_utf8_lossy(&printed.stderr).contains("counters.json"));
    {
        let (_server, addr) = start_endpoint(&n);
        let r = get(addr, "/metrics");
        assert_eq!(r.status, 500, "{}", r.body);
        assert!(r.body.contains("counters.json"), "{}", r.body);
    }
    // The next run starts over.
    let out = n.epilog(1);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("counting from zero"));
    let s = Samples::parse(&n.textfile());
    assert_eq!(s.sum("qoslane_hook_runs_total", &[]), 1.0);
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "epilog"), ("outcome", "unchanged")]
        ),
        1.0
    );
}

/// Regression (issue 23, item 2): Prometheus could not see an installed
/// mapping that was invalid (`qoslane_mapping_info` kept the last-known-good
/// hash), a QoS learnt by fallback, or a health run with warnings (counted a
/// success: the last-success time moved, even for "the fabric check could
/// not run"), nor which version runs. Each is a series now, from real runs.
#[test]
fn degraded_states_are_series_of_their_own() {
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    let s = Samples::parse(&n.textfile());
    assert_eq!(s.value("qoslane_mapping_valid", &[]), 1.0);
    assert_eq!(
        s.value(
            "qoslane_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("revision", ""),
                ("commit", "")
            ]
        ),
        1.0
    );
    for reason in ["squeue_slow", "squeue_failed", "squeue_answer"] {
        assert_eq!(
            s.value("qoslane_qos_fallbacks_total", &[("reason", reason)]),
            0.0
        );
    }

    // The QoS could not be learnt, three ways.
    ok(&n.prolog_env(2, "high", &[("FAKE_SQUEUE_FAIL", "1")]));
    ok(&n.prolog_env(
        3,
        "high",
        &[("FAKE_SQUEUE_SLEEP", "30"), ("QOSLANE_TIMEOUT_MS", "700")],
    ));
    ok(&n.prolog_env(4, "high", &[("FAKE_SQUEUE_LINE", "(null)")]));
    let s = Samples::parse(&n.textfile());
    for reason in ["squeue_slow", "squeue_failed", "squeue_answer"] {
        assert_eq!(
            s.value("qoslane_qos_fallbacks_total", &[("reason", reason)]),
            1.0,
            "{reason}"
        );
    }

    // An invalid mapping installed: the last-known-good copy is in force,
    // the installed file is not; health warns, which is not a success.
    n.write_mapping("levels: [");
    let out = n.run(&["health"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::stderr(&out));
    let s = Samples::parse(&n.textfile());
    assert_eq!(s.value("qoslane_mapping_valid", &[]), 0.0);
    // status renders the same fact, on one line.
    let st = String::from_utf8_lossy(&n.run(&["status"], &[]).stdout).into_owned();
    assert!(st.contains("Installed: NOT in force: invalid: "), "{st}");
    assert_eq!(s.value("qoslane_health_warnings", &[]), 1.0);
    assert_eq!(
        s.get(
            "qoslane_last_success_timestamp_seconds",
            &[("event", "health")]
        ),
        None,
        "a health run with a warning is not a success"
    );
    assert_eq!(
        s.value(
            "qoslane_hook_runs_total",
            &[("event", "health"), ("outcome", "unchanged")]
        ),
        1.0,
        "what it did to the node is still its outcome"
    );

    // Fixed: valid, in force, a clean health run is a success.
    n.write_mapping(crate::util::MAPPING);
    ok(&n.run(&["health"], &[]));
    let s = Samples::parse(&n.textfile());
    assert_eq!(s.value("qoslane_mapping_valid", &[]), 1.0);
    assert_eq!(s.value("qoslane_health_warnings", &[]), 0.0);
    assert!(
        s.get(
            "qoslane_last_success_timestamp_seconds",
            &[("event", "health")]
        )
        .is_some()
    );
}

// ---------------------------------------------------------------------------
// What ships in deploy/prometheus

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus")
}

fn promtool_ok(promtool: &Path, args: &[&str], cwd: &Path) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(cwd)
        .output_within();
    assert!(
        out.status.success(),
        "promtool {}: {:?}\n{}{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn alert_rules_check_and_pass_their_unit_tests() {
    let Some(promtool) = tool(&["promtool"]) else {
        return;
    };
    let dir = deploy_dir();
    promtool_ok(&promtool, &["check", "rules", "qoslane-alerts.yml"], &dir);
    promtool_ok(
        &promtool,
        &["test", "rules", "qoslane-alerts.test.yml"],
        &dir,
    );
}

#[test]
fn grafana_dashboard_is_valid_and_queries_our_families() {
    let text = std::fs::read_to_string(deploy_dir().join("grafana-qoslane.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let vars = d["templating"]["list"]
        .as_array()
        .expect("templating variables");
    assert!(
        vars.iter().any(|v| v["type"] == "datasource"
            && v["query"] == "prometheus"
            && v["name"] == "datasource"),
        "a Prometheus datasource variable"
    );
    let panels = d["panels"].as_array().expect("panels");
    assert!(
        panels
            .iter()
            .any(|p| p["type"] == "row" && p["title"] == "tier health"),
        "the tier health row"
    );
    let mut exprs = Vec::new();
    for p in panels {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{} has no targets", p["title"]));
        assert!(!targets.is_empty());
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}");
            exprs.push(t["expr"].as_str().expect("a PromQL expr").to_owned());
        }
    }
    let all = exprs.join("\n");
    for family in [
        "qoslane_hook_runs_total",
        "qoslane_rollbacks_total",
        "qoslane_hook_duration_seconds_bucket",
        "qoslane_active_jobs",
        "qoslane_fabric_aligned",
        "qoslane_xmit_wait_ticks_total",
        "qoslane_off_level_bytes_total",
        "qoslane_level_granted",
        "qoslane_fabric_audit_wait_ticks_max",
    ] {
        assert!(all.contains(family), "no panel shows {family}");
    }

    // Every query parses: as recording rules, with Grafana's variables filled.
    let Some(promtool) = tool(&["promtool"]) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, e) in exprs.iter().enumerate() {
        let e = e
            .replace("$__rate_interval", "5m")
            .replace("$__range", "1h")
            .replace("$instance", ".*");
        rules.push_str(&format!(
            "      - record: dashboard:q{i}\n        expr: {}\n",
            serde_json::to_string(&e).unwrap()
        ));
    }
    std::fs::write(dir.path().join("dashboard.yml"), rules).unwrap();
    promtool_ok(&promtool, &["check", "rules", "dashboard.yml"], dir.path());
}

// ---------------------------------------------------------------------------
// The endpoint under many idle connections (issue 12, item 9)

/// Reads what the server still sends on an idle connection, to its close;
/// `None` if it is still open after `within`.
fn closed_with(mut s: TcpStream, within: Duration) -> Option<String> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut answer = Vec::new();
    match s.read_to_end(&mut answer) {
        Ok(_) => Some(String::from_utf8_lossy(&answer).into_owned()),
        // A reset is a close too (the server may close with nothing sent).
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(String::new()),
        Err(_) => None,
    }
}

/// Regression: one thread per connection, at most 16: sixteen idle local
/// connections made every scrape a `503` (21 of 24 in the report) until they
/// timed out, and a client could keep reopening them. Now an idle
/// connection costs a file descriptor; it is closed at its own deadline.
#[test]
fn idle_connections_cannot_deny_a_scrape() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    let (_server, addr) = start_endpoint(&n);

    let opened = Instant::now();
    let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let scrapes = 24;
    let mut served = 0;
    for _ in 0..scrapes {
        let started = Instant::now();
        let r = get(addr, "/metrics");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a scrape hung for {:?}",
            started.elapsed()
        );
        if r.status == 200 {
            assert!(r.body.contains("qoslane_hook_runs_total"), "{}", r.body);
            served += 1;
        }
    }
    assert_eq!(
        served, scrapes,
        "scrapes answered 200 with 64 idle connections open"
    );

    // The idle ones are told so at their deadline (the 5 s head timeout) and
    // closed; none is held open.
    for s in idle {
        let answer = closed_with(s, Duration::from_secs(15)).unwrap_or_else(|| {
            panic!(
                "an idle connection still open {:?} after it was opened",
                opened.elapsed()
            )
        });
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.0 408 "),
            "{answer:?}"
        );
    }
    let took = opened.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "idle connections held for {took:?}"
    );
}

/// Beyond the bound on connections (1024), the oldest connection still
/// waiting for its request makes room: a new scrape is never refused.
#[test]
fn past_the_connection_bound_the_oldest_idle_connection_makes_room() {
    let n = Node::with_mapping(SIMPLE_MAPPING);
    ok(&n.prolog(1, "low"));
    let (_server, addr) = start_endpoint(&n);

    let bound = 1024;
    let mut idle: Vec<TcpStream> = Vec::with_capacity(bound + 8);
    for _ in 0..bound + 8 {
        match TcpStream::connect(addr) {
            Ok(s) => idle.push(s),
            // The test process's own descriptors ran out: enough said.
            Err(e) if e.raw_os_error() == Some(24) => break,
            Err(e) => panic!("connect: {e}"),
        }
    }
    if idle.len() <= bound {
        eprintln!("SKIP: only {} descriptors for connections", idle.len());
        return;
    }
    let started = Instant::now();
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(started.elapsed() < Duration::from_secs(10));
    // On a loaded machine connecting them all can take seconds: past the
    // server's 5 s head deadline they get 408 instead (closed either way).
    let slow = started.elapsed() > Duration::from_secs(3);
    // The first ones opened were closed to make room, long before their
    // deadline; the newest are still open.
    let first = idle.remove(0);
    let answer = closed_with(first, Duration::from_secs(3))
        .expect("the oldest idle connection was closed to make room");
    assert!(
        answer.is_empty()
            || answer.starts_with("HTTP/1.0 503 ")
            || answer.starts_with("HTTP/1.0 408 "),
        "{answer:?}"
    );
    if slow {
        return;
    }
    let mut newest = idle.pop().unwrap();
    newest.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(newest.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the newest connection is still open and unanswered"
    );
}

/// `qoslane_level_info` renders each level's `on_failure` as the mapping in
/// force sets it (a level's own, else the mapping's): what the alert
/// QoslaneLevelCarriedNowhere reads to tell a `fail_job` level from a
/// `continue` one (issue 34, item 5).
#[test]
fn each_levels_policy_is_the_mappings() {
    let n = Node::new();
    ok(&n.prolog(1, "high"));
    let text = n.textfile();
    for (level, policy) in [
        ("mission-critical", "fail_job"),
        ("high", "continue"),
        ("normal", "continue"),
        ("low", "continue"),
    ] {
        let line = format!("qoslane_level_info{{level=\"{level}\",on_failure=\"{policy}\"}} 1\n");
        assert!(text.contains(&line), "no {line} in:\n{text}");
    }
    assert_eq!(text.matches("\nqoslane_level_info{").count(), 4, "{text}");
}
