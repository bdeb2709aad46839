//! The page's views in headless Chromium, chosen by its address
//! (`#level=NAME&failing&by=wait`) as an admin's link would: the Details
//! panel follows the level chosen and names the HCAs a failing link
//! affects; the wait colours are one scale for the fabric with numbers on
//! the legend; the audit's time in the viewer's zone too; "only what fails"
//! hides what has no finding and counts it; labels keep a readable size at
//! 12 leaves and on the 1,008-HCA tree (the drawing scrolls instead).
//!
//! Chromium: skipped when absent, as in `page.rs`.

use crate::util::Within as _;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use qoslane::fabric::counters::pma::PortWait;
use qoslane::fabric::judge::lane::Lane;
use qoslane::fabric::read::parse::parse_topology;
use qoslane::fabric::sweep::page::{self, Page};
use qoslane::fabric::sweep::{InLane, LevelSweep, PortLanes, Sweep};
use qoslane::fabric::tables::{NodeType, Topology, VlRange};

use super::page::chromium;

/// A two-tier fat tree: `leaves` leaves of `hcas` HCAs (`node<lid> HCA-1`,
/// lid 1000 + leaf × hcas + n), `spines` spines (`spine<s>`, lid 10 + s);
/// leaf `l` (`leaf<l>`, lid 100 + l) port `hcas + s + 1` to spine `s` port
/// `l + 1`.
fn tree(leaves: u32, hcas: u32, spines: u32) -> Topology {
    let mut t = String::new();
    for l in 0..leaves {
        let ll = 100 + l;
        for h in 0..hcas {
            let hl = 1000 + l * hcas + h;
            let _ = writeln!(
                t,
                "SW {ll} {p} 0x2{l:015x} 4x EDR - CA {hl} 1 0x1{hl:015x} ( 'leaf{l}' - 'node{hl} HCA-1' )\n\
                 CA {hl} 1 0x1{hl:015x} 4x EDR - SW {ll} {p} 0x2{l:015x} ( 'node{hl} HCA-1' - 'leaf{l}' )",
                p = h + 1
            );
        }
        for s in 0..spines {
            let sl = 10 + s;
            let _ = writeln!(
                t,
                "SW {ll} {p} 0x2{l:015x} 4x EDR - SW {sl} {q} 0x3{s:015x} ( 'leaf{l}' - 'spine{s}' )\n\
                 SW {sl} {q} 0x3{s:015x} 4x EDR - SW {ll} {p} 0x2{l:015x} ( 'spine{s}' - 'leaf{l}' )",
                p = hcas + s + 1,
                q = l + 1
            );
        }
    }
    parse_topology(&t).unwrap()
}

/// A level: name, SL (= its VL), and the one egress port `(lid, port)`
/// that fails it, with how.
type Level<'a> = (&'a str, u8, Option<(u16, u32, Lane)>);

fn sweep(topology: Topology, levels: &[Level<'_>]) -> Sweep {
    let ports = |vl: u8, bad: Option<(u16, u32, Lane)>| -> Vec<PortLanes> {
        topology
            .ports
            .iter()
            .filter(|p| p.remote.is_some())
            .map(|p| {
                let lane = bad
                    .filter(|b| (b.0, b.1) == (p.end.lid, p.end.port))
                    .map_or(Lane::Carried, |b| b.2);
                PortLanes {
                    kind: p.end.kind,
                    guid: p.end.guid.clone(),
                    name: p.end.name.clone(),
                    lid: p.end.lid,
                    port: p.end.port,
                    oper_vls: VlRange::parse("VL0-7").unwrap(),
                    groups: vec![InLane {
                        vl: if lane == Lane::Dropped { 15 } else { vl },
                        lane,
                        weight: Some(64),
                        in_ports: Vec::new(),
                    }],
                }
            })
            .collect()
    };
    let levels = levels
        .iter()
        .map(|&(name, sl, bad)| LevelSweep {
            level: name.into(),
            sl,
            virtual_lane: Some(sl),
            pairs: BTreeMap::new(),
            findings: Vec::new(),
            ports: ports(sl, bad),
        })
        .collect();
    Sweep {
        switches: 0,
        hcas: 0,
        ports_read: topology.ports.len(),
        not_routed: None,
        unread: Vec::new(),
        levels,
        duration_ms: 1,
        workers: 1,
        reader: "in-process",
        fallback: None,
        topology,
        xmit_wait: Vec::new(),
        wait_levels: Vec::new(),
        xmit_wait_unread: Vec::new(),
        deadlock: qoslane::fabric::sweep::routes::Routes::default(),
        sm_policy: qoslane::fabric::sweep::sm_classes::ClassCheck::default(),
        cost: qoslane::fabric::sweep::Cost::default(),
        wait_ports: Vec::new(),
    }
}

fn render(s: &Sweep, waits: &[PortWait]) -> String {
    page::render(&Page {
        sweep: s,
        summary: "verdict: not carried\n",
        mapping: "/etc/qoslane/qos-network.yml",
        mapping_sha256: "0",
        time: "2026-12-03T13:00:00Z",
        verdict: "not_carried",
        waits,
    })
}

/// The DOM after the page's script ran, opened at `#hash` in time zone
/// `tz`, networking off.
fn dom(chromium: &Path, html: &str, hash: &str, tz: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.html");
    fs::write(&file, html).unwrap();
    let out = Command::new(chromium)
        .env("TZ", tz)
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
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("file://{}#{hash}", file.display()))
        .output_within();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(dom.contains("data-drawn=\""), "the script did not finish");
    dom
}

/// The text of the element whose start tag holds `marker`, tags dropped.
fn text_of(dom: &str, marker: &str) -> String {
    let start = dom.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let tag = dom[..start].rfind('<').unwrap();
    let name: String = dom[tag + 1..]
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let end = start + dom[start..].find(&format!("</{name}>")).unwrap();
    let mut out = String::new();
    let mut inside = false;
    for c in dom[dom[start..].find('>').unwrap() + start + 1..end].chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
}

/// The `class` of the cable `ends` (`spine0:1 leaf0:3`) in `level`'s view.
fn cable_class(dom: &str, level: &str, ends: &str) -> String {
    let view = dom
        .split("<g class=\"view")
        .find(|v| v.contains(&format!("data-level=\"{level}\"")))
        .unwrap_or_else(|| panic!("no view of {level}"));
    let at = view
        .find(&format!("data-ends=\"{ends}\""))
        .unwrap_or_else(|| panic!("no cable {ends} in {level}"));
    let tag = &view[view[..at].rfind("<line").unwrap()..];
    let class = tag.split_once("class=\"").unwrap().1;
    class.split_once('"').unwrap().0.to_owned()
}

/// 3 leaves of 2 HCAs, 2 spines; gold (SL 3) dropped by spine0 toward
/// leaf1 (its port 2), silver (SL 2) carried everywhere.
fn small() -> Sweep {
    sweep(
        tree(3, 2, 2),
        &[
            ("gold", 3, Some((10, 2, Lane::Dropped))),
            ("silver", 2, None),
        ],
    )
}

/// Opened: gold's failing cable in the details, with the HCAs of leaf1
/// its traffic reaches.
#[test]
fn page_details_name_the_hcas_a_failing_link_affects() {
    let Some(chromium) = chromium() else { return };
    let d = text_of(
        &dom(&chromium, &render(&small(), &[]), "", "UTC"),
        "id=\"details\"",
    );
    assert!(d.contains("level gold: dropped"), "{d}");
    assert!(
        d.contains("spine0 port 2 affects 2 HCAs: node1002 HCA-1, node1003 HCA-1"),
        "{d}"
    );
}

/// Silver chosen after gold's failing cable was shown: the same cable,
/// described for silver.
#[test]
fn page_details_follow_the_level_chosen() {
    let Some(chromium) = chromium() else { return };
    let d = text_of(
        &dom(&chromium, &render(&small(), &[]), "level=silver", "UTC"),
        "id=\"details\"",
    );
    assert!(d.contains("Link spine0 ↔ leaf1"), "{d}");
    assert!(d.contains("level silver: carried"), "{d}");
    assert!(!d.contains("gold") && !d.contains("affects"), "{d}");
}

#[test]
fn page_colours_wait_ticks_on_one_scale_for_the_fabric_with_numbers() {
    let Some(chromium) = chromium() else { return };
    let s = small();
    let wait = |lid: u16, port: u32, vl: usize, n: u64| {
        let mut ticks = vec![Some(0); 16];
        ticks[vl] = Some(n);
        PortWait {
            kind: NodeType::Switch,
            name: String::new(),
            lid,
            port,
            ticks,
        }
    };
    // gold's VL 3 waits 800 at leaf0 toward spine0; silver's VL 2 20,000
    // at spine1 toward leaf2.
    let waits = [wait(100, 3, 3, 800), wait(11, 3, 2, 20_000)];
    let dom = dom(&chromium, &render(&s, &waits), "by=wait", "UTC");
    assert_eq!(
        cable_class(&dom, "silver", "spine1:3 leaf2:4"),
        "link s-carried w4"
    );
    assert_eq!(
        cable_class(&dom, "gold", "spine0:1 leaf0:3"),
        "link s-carried w1"
    );
    assert!(dom.contains("class=\"by-wait\""), "colour by wait chosen");
    let legend = text_of(&dom, "class=\"wait-legend\"");
    assert!(
        legend.contains("wait ticks: 0 1–5,000 5,001–10,000 10,001–15,000 15,001–20,000"),
        "{legend}"
    );
    assert!(
        legend.contains("the fabric's most, 20,000 ticks"),
        "{legend}"
    );
}

#[test]
fn page_shows_the_audit_time_in_utc_and_the_viewers_zone() {
    let Some(chromium) = chromium() else { return };
    let dom = dom(&chromium, &render(&small(), &[]), "", "Asia/Tokyo");
    assert!(
        dom.contains(">2026-12-03T13:00:00Z</time> (UTC)<br>"),
        "{dom}"
    );
    assert_eq!(
        text_of(&dom, "id=\"local-time\""),
        "2026-12-03 22:00:00 (your local time, UTC+09:00)"
    );
}

#[test]
fn page_only_what_fails_hides_the_rest_and_counts_it() {
    let Some(chromium) = chromium() else { return };
    let dom = dom(&chromium, &render(&small(), &[]), "failing", "UTC");
    assert!(
        dom.contains("class=\"only-failing\""),
        "the drawing filters"
    );
    assert_eq!(
        text_of(&dom, "id=\"hidden-count\""),
        "hidden, no finding in level gold: 8 links, 3 switches, 2 groups of HCAs"
    );
    assert_eq!(
        cable_class(&dom, "gold", "spine0:2 leaf1:3"),
        "link s-dropped"
    );
    assert_eq!(
        cable_class(&dom, "gold", "spine0:1 leaf0:3"),
        "link s-carried quiet"
    );
    for (name, quiet) in [
        ("spine0", false),
        ("spine1", true),
        ("leaf0", true),
        ("leaf1", false),
    ] {
        let tag = format!("data-name=\"{name}\"");
        let at = dom.find(&tag).unwrap();
        let start = dom[..at].rfind("<g").unwrap();
        assert_eq!(
            dom[start..at].contains("quiet"),
            quiet,
            "{name}: {}",
            &dom[start..at]
        );
    }
}

#[test]
fn page_labels_keep_their_size_at_12_leaves_and_on_the_1008_hca_tree() {
    let Some(chromium) = chromium() else { return };
    for (leaves, hcas, spines) in [(12, 18, 6), (56, 18, 18)] {
        let s = sweep(
            tree(leaves, hcas, spines),
            &[
                ("mission-critical", 3, Some((13, 41, Lane::Dropped))),
                ("high", 2, Some((140, 5, Lane::Starved))),
                ("normal", 0, None),
                ("low", 1, None),
            ],
        );
        let started = Instant::now();
        let html = render(&s, &[]);
        let ms = started.elapsed().as_millis();
        let dom = dom(&chromium, &html, "", "UTC");
        let drawn = dom
            .split_once("data-drawn-ms=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(v, _)| v.to_owned())
            .unwrap();
        eprintln!(
            "ft:{leaves}:{hcas}:{spines}: {} bytes, rendered in {ms} ms (debug build), \
             drawn in {drawn} ms",
            html.len()
        );
        let px: f64 = dom
            .split_once("data-label-px=\"")
            .and_then(|(_, r)| r.split_once('"'))
            .map(|(v, _)| v.parse().unwrap())
            .expect("the script measured its labels");
        assert!(px >= 10.9, "ft:{leaves}:{hcas}:{spines}: labels {px} px");
        eprintln!("ft:{leaves}:{hcas}:{spines}: labels {px} px");
    }
}
