use std::collections::BTreeMap;

use super::model;
use super::{Page, escape, render};
use crate::fabric::counters::pma::PortWait;
use crate::fabric::judge::lane::Lane;
use crate::fabric::read::parse::parse_topology;
use crate::fabric::sweep::{InLane, LevelSweep, PortLanes, Sweep};
use crate::fabric::tables::{NodeType, VlRange};

/// spine1 -- leaf1 (ports 3/1) with node1 on leaf1 port 1; a second switch
/// named to attack the page.
const TOPO: &str = "\
SW     2  1 0x0000000000200001 4x QDR - SW     5  3 0x0000000000200003 ( 'spine1' - 'leaf1' )
SW     5  3 0x0000000000200003 4x QDR - SW     2  1 0x0000000000200001 ( 'leaf1' - 'spine1' )
SW     5  1 0x0000000000200003 4x QDR - CA    10  1 0x0000000000100001 ( 'leaf1' - 'node1 HCA-1' )
CA    10  1 0x0000000000100001 4x QDR - SW     5  1 0x0000000000200003 ( 'node1 HCA-1' - 'leaf1' )
SW     6  1 0x0000000000200006 4x QDR - SW     2  2 0x0000000000200001 ( '</script><img src=x onerror=alert(1)>' - 'spine1' )
SW     2  2 0x0000000000200001 4x QDR - SW     6  1 0x0000000000200006 ( 'spine1' - '</script><img src=x onerror=alert(1)>' )
";

fn at(
    kind: NodeType,
    guid: &str,
    name: &str,
    lid: u16,
    port: u32,
    groups: Vec<InLane>,
) -> PortLanes {
    PortLanes {
        kind,
        guid: guid.into(),
        name: name.into(),
        lid,
        port,
        oper_vls: VlRange::parse("VL0-7").unwrap(),
        groups,
    }
}

fn lane(vl: u8, lane: Lane, weight: Option<u32>, in_ports: &[u32]) -> InLane {
    InLane {
        vl,
        lane,
        weight,
        in_ports: in_ports.to_vec(),
    }
}

/// SL 3: spine1 port 1 (toward leaf1) drops it from in port 2, carries it
/// from the rest; everything else carries it; leaf1 port 3 was not read.
fn sweep() -> Sweep {
    let topology = parse_topology(TOPO).unwrap();
    let ports = vec![
        at(
            NodeType::Switch,
            "0x0000000000200001",
            "spine1",
            2,
            1,
            vec![lane(15, Lane::Dropped, Some(0), &[2])],
        ),
        at(
            NodeType::Switch,
            "0x0000000000200001",
            "spine1",
            2,
            2,
            vec![lane(3, Lane::Carried, Some(32), &[1])],
        ),
        at(
            NodeType::Switch,
            "0x0000000000200003",
            "leaf1",
            5,
            1,
            vec![lane(3, Lane::Carried, Some(32), &[3])],
        ),
        at(
            NodeType::Hca,
            "0x0000000000100001",
            "node1 HCA-1",
            10,
            1,
            vec![lane(3, Lane::Carried, Some(32), &[0])],
        ),
        at(
            NodeType::Switch,
            "0x0000000000200006",
            "</script><img src=x onerror=alert(1)>",
            6,
            1,
            vec![lane(3, Lane::Starved, Some(0), &[])],
        ),
    ];
    Sweep {
        switches: 3,
        hcas: 1,
        ports_read: ports.len(),
        not_routed: None,
        unread: Vec::new(),
        levels: vec![LevelSweep {
            level: "gold".into(),
            sl: 3,
            virtual_lane: Some(3),
            pairs: BTreeMap::new(),
            findings: Vec::new(),
            ports,
        }],
        duration_ms: 1,
        workers: 1,
        reader: "smpquery",
        fallback: None,
        topology,
        xmit_wait: Vec::new(),
        wait_levels: Vec::new(),
        xmit_wait_unread: Vec::new(),
        deadlock: crate::fabric::sweep::routes::Routes::default(),
        sm_policy: crate::fabric::sweep::sm_classes::ClassCheck::default(),
        cost: crate::fabric::sweep::Cost::default(),
        wait_ports: Vec::new(),
    }
}

fn page(s: &Sweep, summary: &str, waits: &[PortWait]) -> String {
    render(&Page {
        sweep: s,
        summary,
        mapping: "/etc/qoslane/<mapping>.yml",
        mapping_sha256: "ab12",
        time: "2026-12-03T13:00:00Z",
        verdict: "not_carried",
        waits,
    })
}

#[test]
fn every_string_from_the_fabric_is_escaped() {
    let html = page(&sweep(), "  FAIL level gold: at switch <b>x</b>\n", &[]);
    // The only script elements are the page's two.
    assert_eq!(html.matches("<script").count(), 2, "{html}");
    assert_eq!(html.matches("</script>").count(), 2);
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>x</b>"));
    assert!(html.contains("<td>FAIL</td><td>level gold: at switch &lt;b&gt;x&lt;/b&gt;</td>"));
    assert!(html.contains("/etc/qoslane/&lt;mapping&gt;.yml"));
    // In the data: the name as \u escapes, the same string to JSON.parse.
    assert!(html.contains("\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e"));
    assert_eq!(escape("a&b<'\">"), "a&amp;b&lt;&#39;&quot;&gt;");
}

#[test]
fn the_script_is_admitted_by_its_hash_and_nothing_may_be_fetched() {
    let html = page(&sweep(), "", &[]);
    let csp = html
        .split("Content-Security-Policy\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    let hash = super::base64(&sha2::Sha256::digest(super::SCRIPT.as_bytes()));
    assert!(
        csp.contains(&format!("script-src 'sha256-{hash}'")),
        "{csp}"
    );
    assert_eq!(super::base64(b"ab"), "YWI=");
    assert_eq!(super::base64(b"abc"), "YWJj");
    assert_eq!(super::base64(b"a"), "YQ==");
    for attr in ["src=\"", "href=\"", "url("] {
        assert!(!html.contains(attr), "{attr} in the page");
    }
}

use sha2::Digest as _;

#[test]
fn tiers_links_and_each_ends_verdict_come_from_the_sweep() {
    let s = sweep();
    let m = model::build(&s, &[]);
    let names: Vec<(&str, u32)> = m.nodes.iter().map(|n| (n.name.as_str(), n.tier)).collect();
    assert_eq!(
        names,
        [
            ("</script><img src=x onerror=alert(1)>", 3),
            ("spine1", 2),
            ("leaf1", 1),
            ("node1 HCA-1", 0),
        ]
    );
    assert_eq!(m.nodes[3].leaf, Some(2));
    assert_eq!(m.links.len(), 3);
    let ends: Vec<(String, &str, &str)> = m
        .links
        .iter()
        .zip(&m.levels[0].ends)
        .map(|(l, [a, b])| {
            (
                format!(
                    "{}:{}-{}:{}",
                    m.nodes[l.a].name, l.ap, m.nodes[l.b].name, l.bp
                ),
                a.s,
                b.s,
            )
        })
        .collect();
    assert_eq!(
        ends,
        [
            (
                "</script><img src=x onerror=alert(1)>:1-spine1:2".to_owned(),
                "starved",
                "carried"
            ),
            ("spine1:1-leaf1:3".to_owned(), "dropped", model::UNREAD),
            ("leaf1:1-node1 HCA-1:1".to_owned(), "carried", "carried"),
        ]
    );
    assert!(m.levels[0].ends[1][0].w.is_none());
    assert!(!m.waits);
}

#[test]
fn wait_ticks_are_those_of_the_vl_the_level_lands_on_at_each_end() {
    let s = sweep();
    let mut ticks = vec![None; 16];
    ticks[3] = Some(1200);
    ticks[15] = Some(7);
    ticks[0] = Some(99_999);
    let waits = [
        PortWait {
            kind: NodeType::Switch,
            name: "leaf1".into(),
            lid: 5,
            port: 1,
            ticks: ticks.clone(),
        },
        PortWait {
            kind: NodeType::Switch,
            name: "spine1".into(),
            lid: 2,
            port: 1,
            ticks,
        },
    ];
    let m = model::build(&s, &waits);
    assert!(m.waits);
    // leaf1 port 1 -> node1: SL 3 lands on VL 3 there: VL 3's ticks.
    assert_eq!(m.levels[0].ends[2][0].w, Some(1200));
    // spine1 port 1: SL 3 lands on VL 15: its ticks.
    assert_eq!(m.levels[0].ends[1][0].w, Some(7));
    // Not given: none.
    assert_eq!(m.levels[0].ends[2][1].w, None);
    let html = page(&s, "", &waits);
    assert!(html.contains("\"w\":1200"), "{html}");
}

#[test]
fn the_findings_table_is_the_text_line_for_line() {
    let text = "mapping: m.yml\nlevel gold (SL 3 -> VL 3): NOT CARRIED on 1 of 4 port pairs (1 dropped)\n  \
                FAIL level gold: SL 3 -> VL 15 (dropped) at switch spine1 (lid 2) every in port -> 1\n\
                verdict: 1 of 1 levels fail: gold (not carried)\n";
    let html = page(&sweep(), text, &[]);
    let rows: Vec<String> = html
        .split("<tr")
        .skip(2)
        .map(|r| {
            let cells: Vec<&str> = r
                .split("<td>")
                .skip(1)
                .map(|c| c.split("</td>").next().unwrap())
                .collect();
            if cells[0].is_empty() {
                cells[1].to_owned()
            } else {
                format!("  {} {}", cells[0], cells[1])
            }
        })
        .collect();
    let unescaped = rows.join("\n").replace("&gt;", ">");
    assert_eq!(unescaped + "\n", text);
}

#[test]
fn names_sort_with_their_numbers_as_numbers() {
    let mut v = vec!["leaf10", "leaf2", "leaf1", "leaf02x", "spine"];
    v.sort_by(|a, b| model::natural(a, b));
    assert_eq!(v, ["leaf1", "leaf2", "leaf02x", "leaf10", "spine"]);
}

/// A failing end names the HCAs its level's traffic reaches (the sweep's
/// reach rules); a carried or unread end names none.
#[test]
fn a_failing_end_names_the_hcas_it_reaches() {
    let s = sweep();
    let m = model::build(&s, &[]);
    let reached: Vec<(&str, Vec<&str>)> = m.levels[0]
        .ends
        .iter()
        .flatten()
        .map(|e| (e.s, e.r.iter().map(|&i| m.nodes[i].name.as_str()).collect()))
        .collect();
    assert_eq!(
        reached,
        [
            ("starved", vec!["node1 HCA-1"]),
            ("carried", vec![]),
            ("dropped", vec!["node1 HCA-1"]),
            (model::UNREAD, vec![]),
            ("carried", vec![]),
            ("carried", vec![]),
        ]
    );
    let html = page(&s, "", &[]);
    assert!(html.contains("\"r\":[3]"), "{html}");
}

/// The header says the audit's time is UTC, and leaves the viewer's local
/// time to the script; the wait legend says what a tick is and that one
/// scale covers the fabric; "only what fails" is offered.
#[test]
fn the_header_and_legend_say_what_they_show() {
    let html = page(&sweep(), "", &[]);
    assert!(
        html.contains(
            "<time id=\"audit-time\" datetime=\"2026-12-03T13:00:00Z\">2026-12-03T13:00:00Z</time> (UTC)"
        ),
        "{html}"
    );
    assert!(html.contains("<span id=\"local-time\"></span>"));
    assert!(html.contains("one scale for the whole fabric and every level"));
    assert!(html.contains("A wait tick is a unit of the port's own clock"));
    assert!(html.contains("<input type=\"checkbox\" id=\"only-failing\">"));
}
