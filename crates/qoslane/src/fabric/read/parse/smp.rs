//! The parsers of `smpquery`'s answers: a port's SL2VL, PortInfo and
//! VLArb tables, a switch's SL2VL rows, and NodeInfo, NodeDescription and a
//! LID (the first hop).

use crate::fabric::read::parse::lines::{
    NumberedLines, ParseError, bad, cells, dotted_fields, field,
};
use crate::fabric::tables::{NodeInfo, NodeType, PortInfoVls, Sl2Vl, VlArb, VlArbEntry, VlRange};

/// The title and the SL header of an SL2VL table (a CA's or a switch's).
fn sl2vl_head(lines: &mut NumberedLines<'_>) -> Result<(), ParseError> {
    const TITLE: &str = "`# SL2VL table: …`";
    let (n, l) = lines.expect(TITLE)?;
    if !l.starts_with("# SL2VL table:") {
        return Err(bad(n, TITLE, l));
    }
    const HEADER: &str = "`#                 SL: | 0| 1|…|15|`";
    let (n, l) = lines.expect(HEADER)?;
    let header_ok = l
        .strip_prefix('#')
        .and_then(|r| r.trim_start().strip_prefix("SL:"))
        .and_then(cells)
        .is_some_and(|c| c.len() == 16 && c.iter().enumerate().all(|(i, s)| *s == i.to_string()));
    if header_ok {
        Ok(())
    } else {
        Err(bad(n, HEADER, l))
    }
}

/// `ports: in  1, out  2: | 0| 1|…| 7|` → (in, out, table).
fn sl2vl_row(l: &str) -> Option<(u32, u32, Sl2Vl)> {
    let (ports, rest) = l.strip_prefix("ports: in ")?.split_once(": |")?;
    let (i, o) = ports.split_once(", out ")?;
    let vls = cells(&format!("|{rest}"))?
        .iter()
        .map(|c| c.parse::<u8>().ok().filter(|&v| v <= 15))
        .collect::<Option<Vec<u8>>>()?;
    let table = Sl2Vl::new(<[u8; 16]>::try_from(vls).ok()?)?;
    Some((i.trim().parse().ok()?, o.trim().parse().ok()?, table))
}

/// `smpquery -D sl2vl 0` on a CA port:
///
/// ```text
/// # SL2VL table: DR path slid 65535; dlid 65535; 0
/// #                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
/// ports: in  0, out  0: | 7| 6| 5| 4| 3| 2| 1| 0| 0| 1| 2| 3| 4| 5| 6| 7|
/// ```
pub fn parse_sl2vl(text: &str) -> Result<Sl2Vl, ParseError> {
    let mut lines = NumberedLines::new(text);
    sl2vl_head(&mut lines)?;
    const ROW: &str = "`ports: in  0, out  0: |` and 16 VLs 0..=15";
    let (n, l) = lines.expect(ROW)?;
    let (_, _, table) = sl2vl_row(l).ok_or_else(|| bad(n, ROW, l))?;
    if let Some((n, l)) = lines.next() {
        // A switch prints one row per input port; a CA port has one table.
        return Err(bad(n, "the end of the table (one row, a CA port)", l));
    }
    Ok(table)
}

/// `smpquery -D portinfo 0`: a title, then `Name:` dot-padded to column 33
/// and the value; capability flags on tab-indented continuation lines.
pub fn parse_portinfo(text: &str) -> Result<PortInfoVls, ParseError> {
    let f = dotted_fields(
        text,
        "# Port info:",
        &[
            "LocalPort",
            "LinkState",
            "VLCap",
            "OperVLs",
            "VLArbHighCap",
            "VLArbLowCap",
        ],
    )?;
    const RANGE: &str = "VL0, VL0-1, VL0-3, VL0-7 or VL0-14";
    Ok(PortInfoVls {
        local_port: field(&f, "LocalPort", "a port number", |s| s.parse().ok())?,
        link_state: field(&f, "LinkState", "a state name", |s| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic())).then(|| s.to_owned())
        })?,
        vl_cap: field(&f, "VLCap", RANGE, VlRange::parse)?,
        oper_vls: field(&f, "OperVLs", RANGE, VlRange::parse)?,
        vlarb_high_cap: field(&f, "VLArbHighCap", "a number", |s| s.parse().ok())?,
        vlarb_low_cap: field(&f, "VLArbLowCap", "a number", |s| s.parse().ok())?,
    })
}

/// `smpquery -D vlarb 0`:
///
/// ```text
/// # VLArbitration tables: DR path slid 65535; dlid 65535; 0 port 0 LowCap 8 HighCap 8
/// # Low priority VL Arbitration Table:
/// VL    : |0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |
/// WEIGHT: |0x20|0x20|0x20|0x20|0x20|0x20|0x20|0x20|
/// # High priority VL Arbitration Table:
/// VL    : |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
/// WEIGHT: |0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
/// ```
///
/// A table with a cap above 32 comes as two VL/WEIGHT pairs (two MAD blocks);
/// a table with cap 0 is not printed.
pub fn parse_vlarb(text: &str) -> Result<VlArb, ParseError> {
    let mut lines = NumberedLines::new(text);
    const TITLE: &str = "`# VLArbitration tables: … LowCap N HighCap N`";
    let (n, l) = lines.expect(TITLE)?;
    let caps = l
        .strip_prefix("# VLArbitration tables:")
        .and_then(|r| {
            let (r, high) = r.rsplit_once(" HighCap ")?;
            let (_, low) = r.rsplit_once(" LowCap ")?;
            Some((
                low.parse::<usize>().ok()?,
                high.trim().parse::<usize>().ok()?,
            ))
        })
        .ok_or_else(|| bad(n, TITLE, l))?;
    let (low_cap, high_cap) = caps;
    let mut out = VlArb::default();
    for (name, cap, table) in [
        ("Low", low_cap, &mut out.low),
        ("High", high_cap, &mut out.high),
    ] {
        if cap == 0 {
            continue;
        }
        let heading = format!("# {name} priority VL Arbitration Table:");
        let (n, l) = lines.expect(&format!("`{heading}`"))?;
        if l.trim_end() != heading {
            return Err(bad(n, &format!("`{heading}`"), l));
        }
        while table.len() < cap {
            const VL: &str = "`VL    : |0x.. |…|`";
            let (n, l) = lines.expect(VL)?;
            let vls = l
                .strip_prefix("VL")
                .and_then(|r| r.trim_start().strip_prefix(':'))
                .and_then(hex_cells)
                .filter(|v| v.iter().all(|&vl| vl <= 15))
                .ok_or_else(|| bad(n, VL, l))?;
            if table.len() + vls.len() > cap {
                let left = cap - table.len();
                return Err(bad(
                    n,
                    &format!("{left} more entries ({name} cap {cap})"),
                    l,
                ));
            }
            const WEIGHT: &str = "`WEIGHT: |0x.. |…|` with one weight per VL";
            let (n, l) = lines.expect(WEIGHT)?;
            let weights = l
                .strip_prefix("WEIGHT:")
                .and_then(hex_cells)
                .filter(|w| w.len() == vls.len())
                .ok_or_else(|| bad(n, WEIGHT, l))?;
            table.extend(
                vls.into_iter()
                    .zip(weights)
                    .map(|(vl, weight)| VlArbEntry { vl, weight }),
            );
        }
    }
    if let Some((n, l)) = lines.peek() {
        return Err(bad(n, "the end of the tables", l));
    }
    Ok(out)
}

/// `|0x0 |0x20|` → [0, 0x20].
fn hex_cells(s: &str) -> Option<Vec<u8>> {
    cells(s)?
        .iter()
        .map(|c| {
            let h = c.strip_prefix("0x")?;
            u8::from_str_radix(h, 16).ok()
        })
        .collect()
}

/// A switch's SL2VL tables for one output port: one row per input port
/// (`smpquery sl2vl LID OUT` or `-D sl2vl PATH OUT`):
///
/// ```text
/// # SL2VL table: Lid 2
/// #                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
/// ports: in  0, out  2: | 0| 1| 2|15| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|
/// ports: in  1, out  2: | 0| 1| 2|15| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|
/// ```
///
/// Every row must name `out`; the rows are returned by input port.
pub fn parse_switch_sl2vl(text: &str, out: u32) -> Result<Vec<(u32, Sl2Vl)>, ParseError> {
    let mut lines = NumberedLines::new(text);
    sl2vl_head(&mut lines)?;
    let row_text = format!("`ports: in  N, out {out:2}: |` and 16 VLs 0..=15");
    let mut rows: Vec<(u32, Sl2Vl)> = Vec::new();
    while let Some((n, l)) = lines.next() {
        let row = sl2vl_row(l)
            .filter(|(_, o, _)| *o == out)
            .map(|(i, _, t)| (i, t))
            .ok_or_else(|| bad(n, &row_text, l))?;
        if rows.iter().any(|(i, _)| *i == row.0) {
            return Err(bad(n, &format!("one row for in port {}", row.0), l));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(ParseError {
            line: 0,
            expected: row_text,
            found: None,
        });
    }
    Ok(rows)
}

/// `smpquery nodeinfo` (`-D nodeinfo 0,1`: the node behind the local port).
pub fn parse_nodeinfo(text: &str) -> Result<NodeInfo, ParseError> {
    let f = dotted_fields(
        text,
        "# Node info:",
        &["NodeType", "NumPorts", "LocalPort", "Guid"],
    )?;
    Ok(NodeInfo {
        node_type: field(
            &f,
            "NodeType",
            "Switch, Channel Adapter or Router",
            |v| match v {
                "Switch" => Some(NodeType::Switch),
                "Channel Adapter" => Some(NodeType::Hca),
                "Router" => Some(NodeType::Router),
                _ => None,
            },
        )?,
        num_ports: field(&f, "NumPorts", "a number", |v| v.parse().ok())?,
        local_port: field(&f, "LocalPort", "a number", |v| v.parse().ok())?,
        guid: field(&f, "Guid", "a 0x GUID", |v| {
            v.strip_prefix("0x")
                .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| v.to_owned())
        })?,
    })
}

/// `smpquery nodedesc`: `Node Description:.....leaf1` (the name, trimmed).
pub fn parse_nodedesc(text: &str) -> Result<String, ParseError> {
    let mut lines = NumberedLines::new(text);
    const LINE: &str = "`Node Description:....NAME`";
    let (n, l) = lines.expect(LINE)?;
    let desc = l
        .strip_prefix("Node Description:")
        .map(|r| r.trim_start_matches('.').trim())
        .ok_or_else(|| bad(n, LINE, l))?;
    Ok(desc.to_owned())
}

/// The `Lid` field of `smpquery portinfo` (a switch's port 0 holds the
/// switch's LID).
pub fn parse_lid(text: &str) -> Result<u16, ParseError> {
    let f = dotted_fields(text, "# Port info:", &["Lid"])?;
    field(&f, "Lid", "a LID", |v| v.parse().ok())
}
