//! The parsers of `fabric/parse.rs` on real and broken outputs: each error
//! names its line and what was expected. (Unit tests of a pure file, kept
//! here so `parse.rs` stays one job under 600 lines; the fuzz target covers
//! the same parsers on any text: `reliability::fuzz_on_stable`.)

use qoslane::fabric::parse::{
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
