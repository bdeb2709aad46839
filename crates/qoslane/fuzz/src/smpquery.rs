//! The body of the `smpquery` fuzz target, apart from libFuzzer so the stable
//! test suite runs the same checks (`tests/integration/reliability/fuzz_on_stable.rs` includes this file
//! as a module).
//!
//! `qoslane::fabric::read::parse` holds every parser of what the fabric tools
//! print (smpquery's tables, `ibnetdiscover -p`, perfquery's counters), listed in
//! `parse::PARSERS`; the fabric check and the sweep stand on them. Every
//! parser of that list runs on every input ([`check_parser`] panics on a name
//! it does not know, and `fuzz_on_stable` fails when a `pub fn` of parse.rs
//! is not listed). For any text (`Smpquery` refuses output that is not
//! UTF-8 before parsing):
//!
//! - no panic, no hang, errors render and name a line that exists;
//! - what parses is in range: SL2VL entries 0..=15 (a switch's rows: one per
//!   in port), OperVLs/VLCap one of the five ranges, arbitration VLs 0..=15
//!   with exactly the announced number of entries per table, GUIDs `0x` and
//!   hex, a node description trimmed, a topology of at least one port whose
//!   counts agree;
//! - round trip: a table rendered the way smpquery prints it parses back to
//!   the same values (from bytes, for the fuzzer: `check_roundtrip`).

use qoslane::fabric::read::parse::{
    PARSERS, ParseError, parse_forwarding, parse_lid, parse_nodedesc, parse_nodeinfo,
    parse_path_record_sl, parse_perfquery, parse_portinfo, parse_sl2vl, parse_switch_sl2vl,
    parse_topology, parse_vlarb,
};
use qoslane::fabric::tables::{NodeType, VlArbEntry, VlRange};

fn check_error(text: &str, e: &ParseError) {
    let lines = text.lines().count();
    assert!(e.line <= lines, "error line {} of {lines}: {e}", e.line);
    assert!(!e.to_string().is_empty());
}

fn hex_guid(g: &str) -> bool {
    g.strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Any text through every parser of `parse::PARSERS`.
pub fn check_text(text: &str) {
    for name in PARSERS {
        check_parser(name, text);
    }
}

/// Any text through one parser, by its name in `parse::PARSERS`.
pub fn check_parser(name: &str, text: &str) {
    match name {
        "parse_sl2vl" => match parse_sl2vl(text) {
            Ok(t) => assert!(t.as_array().iter().all(|&vl| vl <= 15)),
            Err(e) => check_error(text, &e),
        },
        "parse_switch_sl2vl" => {
            // The out port the first row names (or 0): the rows must agree.
            let out = text
                .lines()
                .find_map(|l| {
                    l.split_once(", out ")?
                        .1
                        .split_once(':')?
                        .0
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0);
            match parse_switch_sl2vl(text, out) {
                Ok(rows) => {
                    assert!(!rows.is_empty());
                    let mut ins: Vec<u32> = rows.iter().map(|(i, _)| *i).collect();
                    ins.sort_unstable();
                    ins.dedup();
                    assert_eq!(ins.len(), rows.len(), "one row per in port");
                    assert!(
                        rows.iter()
                            .all(|(_, t)| t.as_array().iter().all(|&v| v <= 15))
                    );
                }
                Err(e) => check_error(text, &e),
            }
        }
        "parse_portinfo" => match parse_portinfo(text) {
            Ok(p) => {
                for r in [p.oper_vls, p.vl_cap] {
                    assert!([1, 2, 4, 8, 15].contains(&r.data_vls()), "{r}");
                    assert_eq!(VlRange::parse(r.as_str()), Some(r));
                }
                assert!(!p.link_state.is_empty());
            }
            Err(e) => check_error(text, &e),
        },
        "parse_vlarb" => match parse_vlarb(text) {
            Ok(a) => {
                assert!(a.low.iter().chain(&a.high).all(|e| e.vl <= 15));
                if let Some((low, high)) = announced_caps(text) {
                    assert_eq!((a.low.len(), a.high.len()), (low, high), "{text:?}");
                }
            }
            Err(e) => check_error(text, &e),
        },
        "parse_nodeinfo" => match parse_nodeinfo(text) {
            Ok(n) => {
                assert!(hex_guid(&n.guid), "{}", n.guid);
                assert!(!n.node_type.smp_name().is_empty());
            }
            Err(e) => check_error(text, &e),
        },
        "parse_nodedesc" => match parse_nodedesc(text) {
            Ok(d) => assert!(d == d.trim() && !d.contains('\n'), "{d:?}"),
            Err(e) => check_error(text, &e),
        },
        "parse_lid" => {
            if let Err(e) = parse_lid(text) {
                check_error(text, &e);
            }
        }
        "parse_topology" => match parse_topology(text) {
            Ok(t) => {
                assert!(!t.ports.is_empty());
                let ends = t
                    .ports
                    .iter()
                    .flat_map(|p| [Some(&p.end), p.remote.as_ref()]);
                assert!(ends.flatten().all(|e| hex_guid(&e.guid)));
                for kind in [NodeType::Switch, NodeType::Hca, NodeType::Router] {
                    assert!(t.count(kind) <= t.ports.len());
                    assert!(t.connected(kind).all(|p| p.remote.is_some()));
                }
            }
            Err(e) => check_error(text, &e),
        },
        "parse_perfquery" => check_perfquery(text),
        "parse_path_record_sl" => match parse_path_record_sl(text) {
            Ok(sl) => assert!(sl <= 15),
            Err(e) => check_error(text, &e),
        },
        "parse_forwarding" => match parse_forwarding(text) {
            // Every pair is one line of the text.
            Ok(pairs) => assert!(pairs.len() <= text.lines().count()),
            Err(e) => check_error(text, &e),
        },
        other => panic!("parser {other} of fabric::parse::PARSERS is not fuzzed: add it here"),
    }
}

/// `LowCap N HighCap M` of a vlarb title line, as the parser should read it.
fn announced_caps(text: &str) -> Option<(usize, usize)> {
    let title = text.lines().find(|l| !l.trim().is_empty())?;
    let (rest, high) = title.rsplit_once(" HighCap ")?;
    let (_, low) = rest.rsplit_once(" LowCap ")?;
    Some((low.parse().ok()?, high.trim().parse().ok()?))
}

/// `smpquery -D sl2vl 0` for a CA port.
pub fn render_sl2vl(table: &[u8; 16]) -> String {
    let cells = |f: &dyn Fn(usize) -> String| (0..16).map(f).collect::<String>();
    format!(
        "# SL2VL table: DR path slid 65535; dlid 65535; 0\n\
         #                 SL: |{}\n\
         ports: in  0, out  0: |{}\n",
        cells(&|i| format!("{i:2}|")),
        cells(&|i| format!("{:2}|", table[i]))
    )
}

/// `smpquery -D portinfo 0`, the fields the check reads among others.
pub fn render_portinfo(port: u32, state: &str, cap: VlRange, oper: VlRange) -> String {
    let field =
        |name: &str, value: &str| format!("{name}:{}{value}\n", ".".repeat(32 - name.len()));
    [
        "# Port info: DR path slid 65535; dlid 65535; 0 port 0\n".to_owned(),
        field("Mkey", "<not displayed>"),
        field("CapMask", "0x50c048"),
        "\t\t\t\tIsTrapSupported\n".to_owned(),
        field("LocalPort", &port.to_string()),
        field("LinkState", state),
        field("VLCap", cap.as_str()),
        field("VLArbHighCap", "8"),
        field("VLArbLowCap", "8"),
        field("OperVLs", oper.as_str()),
        field("McastPkeyTrapSuppressionEnabled", "0"),
    ]
    .concat()
}

/// `smpquery -D vlarb 0`: rows of at most 32 entries (one MAD block each).
pub fn render_vlarb(low: &[VlArbEntry], high: &[VlArbEntry]) -> String {
    let mut s = format!(
        "# VLArbitration tables: DR path slid 65535; dlid 65535; 0 port 0 LowCap {} HighCap {}\n",
        low.len(),
        high.len()
    );
    for (name, table) in [("Low", low), ("High", high)] {
        if table.is_empty() {
            continue;
        }
        s.push_str(&format!("# {name} priority VL Arbitration Table:\n"));
        for block in table.chunks(32) {
            s.push_str("VL    : |");
            for e in block {
                s.push_str(&format!("{:<4}|", format!("0x{:x}", e.vl)));
            }
            s.push_str("\nWEIGHT: |");
            for e in block {
                s.push_str(&format!("{:<4}|", format!("0x{:x}", e.weight)));
            }
            s.push('\n');
        }
    }
    s
}

/// Tables from bytes, rendered, parsed back: the same values.
pub fn check_roundtrip(data: &[u8]) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let mut table = [0u8; 16];
    for (i, t) in table.iter_mut().enumerate() {
        *t = byte(i) & 0x0f;
    }
    let t = parse_sl2vl(&render_sl2vl(&table)).expect("rendered sl2vl parses");
    assert_eq!(t.as_array(), &table);

    let range = |b: u8| VlRange::from_code(1 + b % 5).expect("1..=5");
    let (cap, oper) = (range(byte(16)), range(byte(17)));
    let port = u32::from(byte(18)) + 1;
    let p = parse_portinfo(&render_portinfo(port, "Active", cap, oper)).expect("portinfo parses");
    assert_eq!((p.local_port, p.vl_cap, p.oper_vls), (port, cap, oper));

    let rest = data.get(19..).unwrap_or(&[]);
    let low_len = usize::from(byte(19) % 65);
    let entries: Vec<VlArbEntry> = rest
        .chunks(2)
        .map(|c| VlArbEntry {
            vl: c[0] & 0x0f,
            weight: c.get(1).copied().unwrap_or(0),
        })
        .collect();
    let (low, high) = entries.split_at(low_len.min(entries.len()));
    let high = &high[..high.len().min(64)];
    let a = parse_vlarb(&render_vlarb(low, high)).expect("rendered vlarb parses");
    assert_eq!((a.low.as_slice(), a.high.as_slice()), (low, high));
}

/// The fuzz entry.
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text);
    }
    check_roundtrip(data);
}

/// `parse_perfquery` on any text, as two attributes: what parses is the
/// sixteen counters, each the value of the line naming it.
fn check_perfquery(text: &str) {
    for (attribute, prefix) in [
        ("PortXmitDataSL", "XmtDataSL"),
        ("PortVLXmitWaitCounters", "PortVLXmitWait"),
    ] {
        match parse_perfquery(text, attribute, prefix) {
            Ok(v) => {
                for (i, n) in v.iter().enumerate() {
                    let named = text.lines().any(|l| {
                        l.strip_prefix(&format!("{prefix}{i}:")).is_some_and(|r| {
                            r.trim_start_matches('.').trim_end().parse::<u64>().ok() == Some(*n)
                        })
                    });
                    assert!(named, "{prefix}{i} = {n} from no line");
                }
            }
            Err(e) => check_error(text, &e),
        }
    }
}
