//! The parsers of `fabric/read/parse/` on real and broken outputs: each error
//! names its line and what was expected. (Unit tests of a pure file, kept
//! here so `parse.rs` stays one job under 600 lines; the fuzz target covers
//! the same parsers on any text: `reliability::fuzz_on_stable`.)

use qoslane::fabric::read::parse::{
    parse_lid, parse_nodedesc, parse_nodeinfo, parse_portinfo, parse_sl2vl, parse_switch_sl2vl,
    parse_topology, parse_vlarb,
};
use qoslane::fabric::tables::{NodeInfo, NodeType};

/// Real output (infiniband-diags 44.0 on ibsim, captured on rigs/ibsim_rig.sh).
const SL2VL: &str = "\
# SL2VL table: DR path slid 65535; dlid 65535; 0
#                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
ports: in  0, out  0: | 7| 6| 5| 4| 3| 2| 1| 0| 0| 1| 2| 3| 4| 5| 6| 7|
";

#[test]
fn sl2vl_reads_the_row() {
    let t = parse_sl2vl(SL2VL).unwrap();
    assert_eq!(
        t.as_array(),
        &[7, 6, 5, 4, 3, 2, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(t.vl(3), 4);
}

#[test]
fn sl2vl_garbage_quotes_the_line() {
    let e = parse_sl2vl(&SL2VL.replace("| 4| 5| 6| 7|\n", "| 4| 5| 6|\n")).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(
        e.to_string()
            .starts_with("line 3: expected `ports: in  0, out  0: |`"),
        "{e}"
    );
    assert!(
        e.to_string().contains("found `ports: in  0, out  0: | 7|"),
        "{e}"
    );
    let e = parse_sl2vl("hello\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1: expected `# SL2VL table: …`, found `hello`"
    );
    let e = parse_sl2vl("").unwrap_err();
    assert_eq!(e.to_string(), "output ended, expected `# SL2VL table: …`");
    let e = parse_sl2vl(&SL2VL.replace("| 6| 7|\n", "| 6|16|\n")).unwrap_err();
    assert_eq!(e.line, 3);
}

#[test]
fn sl2vl_refuses_a_switch_table() {
    let switch =
        format!("{SL2VL}ports: in  1, out  0: | 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|\n");
    let e = parse_sl2vl(&switch).unwrap_err();
    assert_eq!(e.line, 4);
    assert!(e.expected.contains("one row"), "{e}");
}

const PORTINFO: &str = "\
# Port info: DR path slid 65535; dlid 65535; 0 port 0
Mkey:............................<not displayed>
Lid:.............................3
CapMask:.........................0x50c048
\t\t\t\tIsTrapSupported
\t\t\t\tIsSLMappingSupported
LocalPort:.......................1
LinkState:.......................Active
VLCap:...........................VL0-7
VLArbHighCap:....................8
VLArbLowCap:.....................8
OperVLs:.........................VL0-3
McastPkeyTrapSuppressionEnabled:.0
";

#[test]
fn portinfo_reads_the_vl_fields() {
    let p = parse_portinfo(PORTINFO).unwrap();
    assert_eq!(p.local_port, 1);
    assert_eq!(p.link_state, "Active");
    assert_eq!(p.vl_cap.as_str(), "VL0-7");
    assert_eq!(p.oper_vls.data_vls(), 4);
    assert_eq!((p.vlarb_high_cap, p.vlarb_low_cap), (8, 8));
}

#[test]
fn portinfo_refuses_odd_values_and_lines() {
    let e = parse_portinfo(&PORTINFO.replace("VL0-3", "No change")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 12: expected OperVLs VL0, VL0-1, VL0-3, VL0-7 or VL0-14, \
         found `OperVLs:.........................No change`"
    );
    let e = parse_portinfo(&PORTINFO.replace("OperVLs:", "Oper VLs:")).unwrap_err();
    assert_eq!(e.line, 12);
    let e = parse_portinfo(&PORTINFO.replace("OperVLs:.........................VL0-3\n", ""))
        .unwrap_err();
    assert_eq!(e.to_string(), "output ended, expected a `OperVLs` field");
    let e = parse_portinfo(&format!(
        "{PORTINFO}OperVLs:.........................VL0-7\n"
    ))
    .unwrap_err();
    assert_eq!(e.line, 14);
}

const VLARB: &str = "\
# VLArbitration tables: DR path slid 65535; dlid 65535; 0 port 0 LowCap 8 HighCap 8
# Low priority VL Arbitration Table:
VL    : |0x0 |0x1 |0x2 |0x4 |0x5 |0x6 |0x7 |0x0 |
WEIGHT: |0x20|0x20|0x20|0x20|0x20|0x20|0x20|0x0 |
# High priority VL Arbitration Table:
VL    : |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
WEIGHT: |0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
";

#[test]
fn vlarb_sums_weights_per_vl() {
    let a = parse_vlarb(VLARB).unwrap();
    assert_eq!(a.low.len(), 8);
    assert_eq!(a.high.len(), 8);
    assert_eq!(a.weight(0), 0x20 + 4);
    assert_eq!(a.weight(3), 0);
    assert_eq!(a.weight(7), 0x20);
}

#[test]
fn vlarb_reads_two_blocks_and_uppercase_hex() {
    let row = |cell: &str, n: usize| format!("|{}|\n", vec![cell; n].join("|"));
    let text = format!(
        "# VLArbitration tables: Lid 3 port 1 LowCap 40 HighCap 0\n\
         # Low priority VL Arbitration Table:\n\
         VL    : {}WEIGHT: {}VL    : {}WEIGHT: {}",
        row("0x1 ", 32),
        row("0xFF", 32),
        row("0x2 ", 8),
        row("0x10", 8),
    );
    let a = parse_vlarb(&text).unwrap();
    assert_eq!(a.low.len(), 40);
    assert!(a.high.is_empty());
    assert_eq!(a.weight(1), 32 * 0xff);
    assert_eq!(a.weight(2), 8 * 0x10);
}

#[test]
fn vlarb_garbage_quotes_the_line() {
    let e = parse_vlarb(&VLARB.replace("WEIGHT: |0x4 |", "WEIGHT: |0x4|0x5 |")).unwrap_err();
    assert_eq!(e.line, 7);
    let e = parse_vlarb(&VLARB.replace("LowCap 8", "LowCap 9")).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    let e = parse_vlarb(&VLARB.replace("LowCap 8", "LowCap 7")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 3: expected 7 more entries (Low cap 7), \
         found `VL    : |0x0 |0x1 |0x2 |0x4 |0x5 |0x6 |0x7 |0x0 |`"
    );
    let e = parse_vlarb("# No VLArbitration tables (BSP0): Lid 1 port 0\n").unwrap_err();
    assert_eq!(e.line, 1);
}

fn switch_fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/smpquery-switch/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn a_switch_sl2vl_has_a_row_per_in_port() {
    let rows = parse_switch_sl2vl(&switch_fixture("spine1.lid.sl2vl.2-vl15.txt"), 2).unwrap();
    assert_eq!(rows.len(), 9, "in ports 0..=8");
    assert!(rows.iter().all(|(_, t)| t.vl(3) == 15 && t.vl(2) == 2));
    let dr = parse_switch_sl2vl(&switch_fixture("leaf1.dr.sl2vl.7.txt"), 7).unwrap();
    assert_eq!(
        dr.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..=8).collect::<Vec<_>>()
    );
    // Rows of another out port are not this table.
    let e = parse_switch_sl2vl(&switch_fixture("leaf1.dr.sl2vl.7.txt"), 8).unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    // A CA's single table parses as one row for in port 0.
    assert_eq!(parse_switch_sl2vl(SL2VL, 0).unwrap().len(), 1);
    assert!(parse_switch_sl2vl("# SL2VL table: Lid 2\n#  SL: | 0|\n", 2).is_err());
}

#[test]
fn node_info_desc_and_lid_of_the_first_switch() {
    let info = parse_nodeinfo(&switch_fixture("leaf1.dr.nodeinfo.txt")).unwrap();
    assert_eq!(
        info,
        NodeInfo {
            node_type: NodeType::Switch,
            num_ports: 8,
            local_port: 2,
            guid: "0x0000000000200002".into(),
        }
    );
    let ca = parse_nodeinfo(&switch_fixture("node1.lid.nodeinfo.txt")).unwrap();
    assert_eq!(ca.node_type, NodeType::Hca);
    assert_eq!(
        parse_nodedesc("Node Description:...........................leaf1\n").unwrap(),
        "leaf1"
    );
    assert!(parse_nodedesc("leaf1\n").is_err());
    assert_eq!(
        parse_lid(&switch_fixture("leaf1.dr.portinfo.0.txt")).unwrap(),
        4
    );
    let pi = parse_portinfo(&switch_fixture("leaf1.dr.portinfo.5-down.txt")).unwrap();
    assert_eq!(pi.link_state, "Down");
    let e = parse_nodeinfo("# Node info: Lid 1\nNodeType:.....Hub\nNumPorts:...1\n").unwrap_err();
    assert!(e.to_string().contains("NodeType"), "{e}");
}

#[test]
fn a_zero_weight_on_a_switch_port_reads_as_zero() {
    let arb = parse_vlarb(&switch_fixture("leaf3.lid.vlarb.2-zero.txt")).unwrap();
    assert_eq!(arb.weight(3), 0);
    assert_eq!(arb.weight(2), 64);
}

#[test]
fn lines_of_every_shape() {
    let t = parse_topology(
        "CA    11  1 0x000000000010000b 4x QDR - SW     7  2 0x0000000000200004 ( 'node6 HCA-1' - 'leaf3' )\n\
         SW     7  8 0x0000000000200004 4x QDR - SW     3  3 0x0000000000200001 ( 'leaf3' - 'spine2' )\n\
         SW     7  6 0x0000000000200004 4x SDR                                    'leaf3'\n",
    )
    .unwrap();
    assert_eq!(t.ports.len(), 3);
    let p = &t.ports[0];
    assert_eq!((p.end.kind, p.end.lid, p.end.port), (NodeType::Hca, 11, 1));
    assert_eq!(p.end.name, "node6 HCA-1");
    let r = p.remote.as_ref().unwrap();
    assert_eq!(
        (r.kind, r.lid, r.port, r.name.as_str()),
        (NodeType::Switch, 7, 2, "leaf3")
    );
    assert!(t.ports[2].remote.is_none());
    assert_eq!(t.data_ports("0x0000000000200004"), [8]);
    assert_eq!((t.count(NodeType::Switch), t.count(NodeType::Hca)), (1, 1));
}

#[test]
fn the_real_two_level_fabric() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ibnetdiscover/2level.p.txt"
    ))
    .unwrap();
    let t = parse_topology(&text).unwrap();
    assert_eq!((t.count(NodeType::Switch), t.count(NodeType::Hca)), (5, 6));
    // leaf1: two HCAs, two uplinks
    assert_eq!(t.data_ports("0x0000000000200002"), [1, 2, 7, 8]);
    assert_eq!(t.connected(NodeType::Hca).count(), 6);
}

#[test]
fn a_line_it_does_not_know_names_its_number() {
    let e = parse_topology("SW 7 8 0x02 4x QDR 'leaf3'\nwhat is this\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(parse_topology("").is_err());
}

fn perfquery_fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/perfquery/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// `perfquery --vlxmitcounters` as ibsim answers it (captured), and the
/// per-SL data counters in the same format (ibsim has none).
#[test]
fn perfquery_counters_read_all_sixteen() {
    use qoslane::fabric::counters::pma::Kind;
    use qoslane::fabric::read::parse::parse_perfquery;
    let k = Kind::VlXmitWait;
    let v = parse_perfquery(
        &perfquery_fixture("vlxmit-ibsim.txt"),
        k.attribute(),
        k.prefix(),
    )
    .unwrap();
    assert_eq!(v[3], 500);
    assert_eq!(v.iter().sum::<u64>(), 500);
    let k = Kind::XmitDataSl;
    let v = parse_perfquery(
        &perfquery_fixture("xmtsl-saturated.txt"),
        k.attribute(),
        k.prefix(),
    )
    .unwrap();
    assert_eq!(
        v[3],
        k.saturated_at(),
        "read as printed; saturation is pma's word"
    );
    // The wrong attribute is refused at its title, naming it.
    let e = parse_perfquery(
        &perfquery_fixture("xmtsl-after.txt"),
        "PortRcvDataSL",
        "RcvDataSL",
    )
    .unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.to_string().contains("# PortRcvDataSL counters:"), "{e}");
    // A missing counter is named.
    let cut: String = perfquery_fixture("rcvsl-after.txt")
        .lines()
        .filter(|l| !l.starts_with("RcvDataSL15:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = parse_perfquery(&cut, "PortRcvDataSL", "RcvDataSL").unwrap_err();
    assert!(e.to_string().contains("`RcvDataSL15`"), "{e}");
}

/// A port's readings: a saturated counter is no count, a port that does not
/// answer is `unsupported` (perfquery's exit 255 and its `cannot query`).
#[test]
fn perfquery_answers_as_readings() {
    use qoslane::fabric::PortId;
    use qoslane::fabric::counters::pma::{CounterChange, Kind, PortReading, Reading, evidence};
    use qoslane::fabric::read::perfquery::reading_of;
    use std::os::unix::process::ExitStatusExt;
    let ok = |name: &str| {
        Ok(std::process::Output {
            status: std::process::ExitStatus::from_raw(0),
            stdout: perfquery_fixture(name).into_bytes(),
            stderr: Vec::new(),
        })
    };
    let failed = |name: &str| {
        Ok(std::process::Output {
            status: std::process::ExitStatus::from_raw(255 << 8),
            stdout: perfquery_fixture(&format!("{name}.stdout.txt")).into_bytes(),
            stderr: perfquery_fixture(&format!("{name}.stderr.txt")).into_bytes(),
        })
    };
    let no_answer = || failed("xmtsl-ibsim");
    assert_eq!(
        reading_of(Kind::RcvDataSl, no_answer(), "-S"),
        Reading::Unsupported
    );
    // No HCA to ask is not a port that does not answer: not remembered.
    assert_eq!(
        reading_of(Kind::XmitDataSl, failed("no-device"), "-X"),
        Reading::Unread(
            "perfquery -X: exit status: 255 (perfquery: iberror: failed: Failed to open '(null)' port '0')"
                .into()
        )
    );
    let port = PortId::new("mlx5_0", 1);
    let read = |x: &str, r: Option<&str>, v: &str| PortReading {
        port: port.clone(),
        readings: [
            (Kind::XmitDataSl, reading_of(Kind::XmitDataSl, ok(x), "-X")),
            (
                Kind::RcvDataSl,
                r.map_or_else(
                    || reading_of(Kind::RcvDataSl, no_answer(), "-S"),
                    |r| reading_of(Kind::RcvDataSl, ok(r), "-S"),
                ),
            ),
            (
                Kind::VlXmitWait,
                reading_of(Kind::VlXmitWait, ok(v), "--vlxmitcounters"),
            ),
        ]
        .into_iter()
        .collect(),
        read_by: None,
    };
    let before = read(
        "xmtsl-before.txt",
        Some("rcvsl-before.txt"),
        "vlxmit-before.txt",
    );
    let after = read(
        "xmtsl-after.txt",
        Some("rcvsl-after.txt"),
        "vlxmit-ibsim.txt",
    );
    let e = evidence(
        std::slice::from_ref(&before),
        &[after],
        Some(3),
        true,
        &std::collections::BTreeSet::new(),
    );
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(
        json["ports"][0]["sent_bytes_per_sl"]["moved"],
        serde_json::json!({"0": 4096, "3": 1_000_000}),
        "counter x 4 bytes"
    );
    assert_eq!(
        json["ports"][0]["received_bytes_per_sl"]["moved"]["3"],
        80_000
    );
    assert_eq!(
        json["ports"][0]["xmit_wait_ticks_per_vl"]["moved"]["3"],
        500
    );
    assert_eq!(e.off_level_bytes, Some(4096));
    let saturated = read("xmtsl-saturated.txt", None, "vlxmit-ibsim.txt");
    let e = evidence(
        &[before],
        &[saturated],
        Some(3),
        true,
        &std::collections::BTreeSet::new(),
    );
    assert_eq!(e.ports[0].received_bytes_per_sl, CounterChange::Unsupported);
    let json = serde_json::to_value(&e).unwrap();
    assert_eq!(
        json["ports"][0]["sent_bytes_per_sl"]["moved"]["3"],
        "saturated"
    );
    assert_eq!(e.off_level_bytes, Some(0), "nothing counted off the level");
}
