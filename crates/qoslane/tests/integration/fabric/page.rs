//! `qoslane fabric audit --format html` opened in a real headless Chromium:
//! the page of the multi-switch rig (aligned, a spine dropping a level, a
//! leaf starving one) after its script ran names every switch and marks
//! the failing links in the right level's view; a screenshot is not blank;
//! with name resolution and the proxy pointed nowhere, and Chromium's own
//! network log kept, the page is whole and asked for nothing. A switch
//! named to attack the page stays text.
//!
//! Chromium: skipped when absent, unless CI (`CI=true`) or
//! `QOSLANE_REQUIRE_TOOLS=1`, where it must be installed
//! (`scripts/install-deps.sh`).

use crate::util::Within as _;
use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use qoslane::fabric::counters::pma::PortWait;
use qoslane::fabric::judge::lane::Lane;
use qoslane::fabric::read::parse::parse_topology;
use qoslane::fabric::sweep::page::{self, Page};
use qoslane::fabric::sweep::{InLane, LevelSweep, PortLanes, Sweep};
use qoslane::fabric::tables::{NodeType, VlRange};

use super::MAPPING;
use super::path::{PathRig, audit, write};
use super::rig::rig_wanted;

/// Chromium, or `None` (the test skips) when absent outside CI.
pub(super) fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let required = std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("QOSLANE_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        found.is_some() || !required,
        "chromium not installed and CI or QOSLANE_REQUIRE_TOOLS=1 (scripts/install-deps.sh installs it)"
    );
    if found.is_none() {
        eprintln!("SKIP: chromium not installed (scripts/install-deps.sh)");
    }
    found
}

/// What Chromium made of a page: the DOM after its scripts, a screenshot,
/// and every URL its network log saw.
struct Opened {
    dom: String,
    png: Vec<u8>,
    urls: Vec<String>,
}

/// Chromium headless, networking off: every host resolves to nothing, the
/// proxy is a closed port, no background traffic.
fn open(chromium: &Path, html: &Path) -> Opened {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", html.display());
    let run = |extra: &[String]| {
        let out = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-default-apps",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=127.0.0.1:9",
                "--window-size=1400,1000",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .args(extra)
            .arg(&url)
            .output_within();
        assert!(
            out.status.success(),
            "chromium {extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let netlog = dir.path().join("net.json");
    let dom = String::from_utf8(run(&[
        "--dump-dom".to_owned(),
        format!("--log-net-log={}", netlog.display()),
    ]))
    .unwrap();
    let shot = dir.path().join("shot.png");
    run(&[format!("--screenshot={}", shot.display())]);
    let urls = page_requests(&fs::read_to_string(&netlog).unwrap());
    Opened {
        dom,
        png: fs::read(&shot).unwrap(),
        urls,
    }
}

/// The URLs a page asked for, from Chromium's network log: the requests
/// whose initiator is an origin (a `file://` page's is `null`); the
/// browser's own (updates, time) have none.
fn page_requests(netlog: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(netlog).unwrap();
    let start = &v["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"];
    assert!(
        start.is_u64(),
        "no URL_REQUEST_START_JOB in the net log's constants"
    );
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| &e["type"] == start && e["params"]["initiator"] != "not an origin")
        .filter_map(|e| e["params"]["url"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The attributes of each `<line class="link ...">` of each level's view.
fn views(dom: &str) -> BTreeMap<String, Vec<BTreeMap<String, String>>> {
    let mut out = BTreeMap::new();
    for chunk in dom.split("<g class=\"view").skip(1) {
        let (_, named) = chunk.split_once("data-level=\"").unwrap();
        let (name, rest) = named.split_once('"').unwrap();
        let rest = rest.split("<g class=\"nodes\"").next().unwrap();
        let links = rest
            .split("<line ")
            .skip(1)
            .map(|l| attrs(l.split('>').next().unwrap()))
            .collect();
        out.insert(name.to_owned(), links);
    }
    out
}

fn attrs(tag: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut rest = tag;
    while let Some((name, after)) = rest.split_once("=\"") {
        let (value, tail) = after.split_once('"').unwrap();
        m.insert(name.trim().to_owned(), value.to_owned());
        rest = tail;
    }
    m
}

/// The links of a level's view whose state is not `carried`:
/// (`data-ends` or `data-group` + `data-failing`, state).
fn failing(dom: &str, level: &str) -> Vec<(String, String)> {
    views(dom)[level]
        .iter()
        .filter(|l| l["data-state"] != "carried")
        .map(|l| {
            let at = l
                .get("data-ends")
                .cloned()
                .unwrap_or_else(|| format!("{} -> {}", l["data-group"], l["data-failing"]));
            (at, l["data-state"].clone())
        })
        .collect()
}

/// A PNG's pixels are not all one colour: its IDAT inflated and unfiltered
/// (8-bit RGB or RGBA, as Chromium writes them); the share of pixels
/// unlike the first.
fn not_blank(png: &[u8]) -> f64 {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut at, mut idat) = (8, Vec::new());
    let (mut width, mut height, mut bpp) = (0usize, 0usize, 0usize);
    while at + 8 <= png.len() {
        let len = usize::try_from(u32::from_be_bytes(png[at..at + 4].try_into().unwrap())).unwrap();
        let kind = &png[at + 4..at + 8];
        let data = &png[at + 8..at + 8 + len];
        if kind == b"IHDR" {
            width = usize::try_from(u32::from_be_bytes(data[0..4].try_into().unwrap())).unwrap();
            height = usize::try_from(u32::from_be_bytes(data[4..8].try_into().unwrap())).unwrap();
            assert_eq!(data[8], 8, "bit depth");
            bpp = match data[9] {
                2 => 3,
                6 => 4,
                t => panic!("colour type {t}"),
            };
        } else if kind == b"IDAT" {
            idat.extend_from_slice(data);
        }
        at += 12 + len;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&idat[..])
        .read_to_end(&mut raw)
        .unwrap();
    let stride = width * bpp;
    let mut prev = vec![0u8; stride];
    let mut px: Vec<u8> = Vec::with_capacity(stride * height);
    for row in raw.chunks(stride + 1).take(height) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for i in 0..stride {
            let a = if i >= bpp { cur[i - bpp] } else { 0 };
            let b = prev[i];
            let c = if i >= bpp { prev[i - bpp] } else { 0 };
            let p = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => u8::midpoint(a, b),
                4 => {
                    let (ia, ib, ic) = (i16::from(a), i16::from(b), i16::from(c));
                    let p = ia + ib - ic;
                    let (pa, pb, pc) = ((p - ia).abs(), (p - ib).abs(), (p - ic).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("filter {f}"),
            };
            cur[i] = line[i].wrapping_add(p);
        }
        px.extend_from_slice(&cur);
        prev = cur;
    }
    let first = &px[..bpp];
    let differ = px.chunks(bpp).filter(|p| *p != first).count();
    #[expect(clippy::cast_precision_loss, reason = "a share of pixels")]
    let share = differ as f64 / (width * height) as f64;
    share
}

/// Opened in Chromium: whole (every node drawn, every switch named), asked
/// for nothing but itself, and drawn.
fn check_whole(o: &Opened, switches: &[&str]) {
    assert!(
        o.dom.contains("data-drawn=\""),
        "the script did not finish:\n{}",
        o.dom
    );
    for s in switches {
        assert!(
            o.dom.contains(&format!("data-name=\"{s}\"")),
            "{s} not drawn"
        );
    }
    assert_eq!(
        o.urls,
        Vec::<String>::new(),
        "the page asked for more than itself"
    );
    let share = not_blank(&o.png);
    assert!(share > 0.01, "screenshot is blank ({share})");
}

const SWITCHES: [&str; 5] = ["spine1", "spine2", "leaf1", "leaf2", "leaf3"];

#[test]
fn page_of_the_rig_marks_the_failing_links_of_the_right_level() {
    if !rig_wanted("page_rig") {
        return;
    }
    let Some(chromium) = chromium() else { return };
    let rig = PathRig::start(&[]);
    let node = rig.node2();
    let m = write(rig.dir.path(), "m.yml", MAPPING);
    let page_of = |name: &str, code: i32| {
        let file = rig.dir.path().join(name);
        let out = audit(
            &node,
            &m,
            &["--format", "html", "--output", file.to_str().unwrap()],
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "--output: nothing on stdout");
        let o = open(&chromium, &file);
        check_whole(&o, &SWITCHES);
        (o, fs::read_to_string(&file).unwrap())
    };

    // Aligned: every link of every level carried.
    let (o, html) = page_of("aligned.html", 0);
    let v = views(&o.dom);
    assert_eq!(v.len(), 4, "one view per level");
    for level in ["mission-critical", "high", "normal", "low"] {
        assert_eq!(
            failing(&o.dom, level),
            Vec::<(String, String)>::new(),
            "{level}"
        );
        // 6 leaf-spine cables + the HCAs of 3 leaves (joined per leaf)
        assert_eq!(v[level].len(), 6 + 3, "{level}");
    }
    // The findings table is the text output, line for line (but the time
    // the sweep took).
    let text = String::from_utf8(audit(&node, &m, &[]).stdout).unwrap();
    let ms = |s: &str| {
        s.lines()
            .map(|l| l.split(" in ").next().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let rows: Vec<String> = html
        .split("<tr")
        .skip(2)
        .map(|r| {
            let c: Vec<&str> = r
                .split("<td>")
                .skip(1)
                .map(|c| c.split("</td>").next().unwrap())
                .collect();
            let line = if c[0].is_empty() {
                c[1].to_owned()
            } else {
                format!("  {} {}", c[0], c[1])
            };
            line.replace("&gt;", ">")
                .replace("&lt;", "<")
                .replace("&amp;", "&")
        })
        .collect();
    assert_eq!(ms(&rows.join("\n")), ms(&text));

    // A spine drops mission-critical (SL 3 -> VL 15) toward one leaf: that
    // one cable, in that level's view only.
    rig.lever("misalign", &["spine1", "2", "3", "15"]);
    let (o, _) = page_of("spine.html", 1);
    let bad = failing(&o.dom, "mission-critical");
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0].1, "dropped");
    assert!(
        bad[0].0.split(' ').any(|end| end == "spine1:2"),
        "the cable at spine1 port 2: {bad:?}"
    );
    for level in ["high", "normal", "low"] {
        assert_eq!(
            failing(&o.dom, level),
            Vec::<(String, String)>::new(),
            "{level}"
        );
    }
    assert!(
        o.dom
            .contains("class=\"node switch bad\" data-name=\"spine1\""),
        "spine1 marked"
    );

    // A fresh SM, then a leaf starves mission-critical toward node6.
    rig.lever("restart-sm", &[]);
    rig.lever("zero-weight", &["leaf3", "2", "3"]);
    let (o, _) = page_of("leaf.html", 1);
    assert_eq!(
        failing(&o.dom, "mission-critical"),
        [("leaf3 -> node6 HCA-1:1".to_owned(), "starved".to_owned())]
    );
    for level in ["high", "normal", "low"] {
        assert_eq!(
            failing(&o.dom, level),
            Vec::<(String, String)>::new(),
            "{level}"
        );
    }
}

/// The DOM without its attribute values (which Chromium may serialise with
/// a bare `<`): what is left that looks like a tag is one.
fn markup(dom: &str) -> String {
    let mut out = String::with_capacity(dom.len());
    let mut rest = dom;
    while let Some((before, after)) = rest.split_once("=\"") {
        out.push_str(before);
        out.push_str("=\"\"");
        rest = after.split_once('"').map_or("", |(_, tail)| tail);
    }
    out.push_str(rest);
    out
}

const ATTACK: &str = "<img src=x onerror=\"document.title='pwned'\">";
const ATTACK2: &str = "</script><script>document.title='pwned'</script>";

/// Two switches named to attack the page (one starving level 3 toward the
/// other), an HCA, one level named so too.
fn attack_sweep() -> Sweep {
    let topo = format!(
        "SW 2 1 0x0000000000200001 4x QDR - SW 5 3 0x0000000000200003 ( '{ATTACK}' - '{ATTACK2}' )\n\
         SW 5 3 0x0000000000200003 4x QDR - SW 2 1 0x0000000000200001 ( '{ATTACK2}' - '{ATTACK}' )\n\
         SW 5 1 0x0000000000200003 4x QDR - CA 10 1 0x0000000000100001 ( '{ATTACK2}' - 'node1' )\n\
         CA 10 1 0x0000000000100001 4x QDR - SW 5 1 0x0000000000200003 ( 'node1' - '{ATTACK2}' )\n"
    );
    let port = |name: &str, lid: u16, port: u32, guid: &str, lane: Lane| PortLanes {
        kind: NodeType::Switch,
        guid: guid.into(),
        name: name.into(),
        lid,
        port,
        oper_vls: VlRange::parse("VL0-7").unwrap(),
        groups: vec![InLane {
            vl: 3,
            lane,
            weight: Some(0),
            in_ports: Vec::new(),
        }],
    };
    Sweep {
        switches: 2,
        hcas: 1,
        ports_read: 2,
        not_routed: None,
        unread: Vec::new(),
        levels: vec![LevelSweep {
            level: ATTACK2.into(),
            sl: 3,
            virtual_lane: Some(3),
            pairs: BTreeMap::new(),
            findings: Vec::new(),
            ports: vec![
                port(ATTACK, 2, 1, "0x0000000000200001", Lane::Starved),
                port(ATTACK2, 5, 3, "0x0000000000200003", Lane::Carried),
            ],
        }],
        duration_ms: 1,
        workers: 1,
        reader: "smpquery",
        fallback: None,
        topology: parse_topology(&topo).unwrap(),
        xmit_wait: Vec::new(),
        wait_levels: Vec::new(),
        xmit_wait_unread: Vec::new(),
        deadlock: qoslane::fabric::sweep::routes::Routes::default(),
        sm_policy: qoslane::fabric::sweep::sm_classes::ClassCheck::default(),
        cost: qoslane::fabric::sweep::Cost::default(),
        wait_ports: Vec::new(),
    }
}

#[test]
fn page_a_switch_named_to_attack_the_page_stays_text() {
    let Some(chromium) = chromium() else { return };
    let sweep = attack_sweep();
    let render = |waits: &[PortWait]| {
        page::render(&Page {
            sweep: &sweep,
            summary: &format!("  FAIL at switch {ATTACK}\n"),
            mapping: ATTACK2,
            mapping_sha256: "0",
            time: "2026-12-03T13:00:00Z",
            verdict: "not_carried",
            waits,
        })
    };
    let html = render(&[]);
    let dir = tempfile::tempdir().unwrap();
    // The network check sees a page that asks (and this one does not).
    let asks = dir.path().join("asks.html");
    fs::write(&asks, "<p>x</p><img src=\"http://example.com/x.png\">").unwrap();
    assert_eq!(open(&chromium, &asks).urls, ["http://example.com/x.png"]);
    let file = dir.path().join("attack.html");
    fs::write(&file, &html).unwrap();
    let o = open(&chromium, &file);
    assert!(o.dom.contains("data-drawn=\"3\""), "{}", o.dom);
    assert!(!o.dom.contains("pwned</title>"), "a name ran as script");
    assert!(
        o.dom
            .contains("<title>qoslane fabric audit: not carried</title>")
    );
    let tags = markup(&o.dom);
    assert!(!tags.contains("<img"), "a name became markup: {tags}");
    assert_eq!(tags.matches("<script").count(), 2, "{tags}");
    // Drawn, the name whole as an attribute's text.
    assert!(
        o.dom.contains("onerror=&quot;document.title='pwned'&quot;"),
        "{}",
        o.dom
    );
    // No wait ticks: no colouring by them offered.
    assert!(
        o.dom.contains("<label id=\"by-label\" hidden=\"\">"),
        "{}",
        o.dom
    );

    // Wait ticks of the level's VL (3) at one end of the switch-to-switch
    // cable: offered, and that cable in the top band of the scale.
    let mut ticks = vec![Some(1); 16];
    ticks[3] = Some(5000);
    let waits = [PortWait {
        kind: NodeType::Switch,
        name: ATTACK.into(),
        lid: 2,
        port: 1,
        ticks,
    }];
    let file = dir.path().join("waits.html");
    fs::write(&file, render(&waits)).unwrap();
    let o = open(&chromium, &file);
    assert!(o.dom.contains("<label id=\"by-label\">"), "{}", o.dom);
    let views = views(&o.dom);
    assert_eq!(views.len(), 1, "one level");
    let cable: Vec<_> = views
        .values()
        .flatten()
        .filter(|l| l.contains_key("data-ends"))
        .map(|l| l["class"].clone())
        .collect();
    assert_eq!(cable, ["link s-starved w4"]);
}

/// `html` is a format of `fabric audit` only: elsewhere a usage error (64)
/// that names the formats the command has.
#[test]
fn page_html_is_a_format_of_fabric_audit_only() {
    let commands: [&[&str]; 6] = [
        &["validate", "/nonexistent.yml"],
        &["explain", "--qos", "high"],
        &["health"],
        &["status"],
        &["log"],
        &["fabric", "sm-config"],
    ];
    for args in commands {
        let out = Command::new(crate::util::BIN)
            .env_clear()
            .env("QOSLANE_NO_JOURNAL", "1")
            .args(args)
            .args(["--format", "html"])
            .output_within();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(
            err.contains("invalid value 'html' for '--format <FORMAT>'")
                && err.contains("[possible values: human, json]"),
            "{args:?}: {err}"
        );
    }
    let out = Command::new(crate::util::BIN)
        .args(["fabric", "audit", "--help"])
        .output_within();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("html"), "{help}");
}
