//! Every parser of what the fabric tools print: `smpquery`'s tables and
//! `ibnetdiscover -p`'s topology, strictly. Pure (text in, [`crate::fabric::tables`]
//! out, no I/O); the runner (`smpquery.rs`) and the sweep call them.
//!
//! The formats are those of infiniband-diags 44 (libibmad's dump functions);
//! captured outputs live in `tests/fixtures/smpquery/`,
//! `tests/fixtures/smpquery-switch/` and `tests/fixtures/ibnetdiscover/`.
//! Anything else is an error quoting the line, so a format change cannot pass
//! as "aligned".
//!
//! Every `pub fn` here is a parser named in [`PARSERS`]; the fuzz target
//! (`fuzz/src/smpquery.rs`, on stable in `reliability::fuzz_on_stable`) runs
//! each, and a test there fails when a `pub fn` of this file is not listed.

use crate::fabric::tables::{
    DiscoveredPort, LinkEnd, NodeInfo, NodeType, PortInfoVls, Sl2Vl, Topology, VlArb, VlArbEntry,
    VlRange,
};

/// Every parser of this file, by name: the fuzz target runs each (and
/// panics on a name it does not know).
pub const PARSERS: [&str; 9] = [
    "parse_sl2vl",
    "parse_switch_sl2vl",
    "parse_portinfo",
    "parse_vlarb",
    "parse_nodeinfo",
    "parse_nodedesc",
    "parse_lid",
    "parse_topology",
    "parse_perfquery",
];

/// Where and why an output did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based; 0 when the output ended early.
    pub line: usize,
    pub expected: String,
    pub found: Option<String>,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.found {
            Some(l) => write!(
                f,
                "line {}: expected {}, found `{l}`",
                self.line, self.expected
            ),
            None => write!(f, "output ended, expected {}", self.expected),
        }
    }
}

impl std::error::Error for ParseError {}

/// Numbered, non-empty lines.
struct NumberedLines<'a> {
    it: std::iter::Peekable<std::iter::Enumerate<std::str::Lines<'a>>>,
}

impl<'a> NumberedLines<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            it: text.lines().enumerate().peekable(),
        }
    }

    fn next(&mut self) -> Option<(usize, &'a str)> {
        self.it
            .by_ref()
            .find(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
    }

    fn peek(&mut self) -> Option<(usize, &'a str)> {
        while let Some((_, l)) = self.it.peek() {
            if l.trim().is_empty() {
                self.it.next();
            } else {
                break;
            }
        }
        self.it.peek().map(|&(i, l)| (i + 1, l))
    }

    /// The next line, or an error naming what was expected.
    fn expect(&mut self, expected: &str) -> Result<(usize, &'a str), ParseError> {
        self.next().ok_or_else(|| ParseError {
            line: 0,
            expected: expected.to_owned(),
            found: None,
        })
    }
}

fn bad(line: usize, expected: &str, found: &str) -> ParseError {
    ParseError {
        line,
        expected: expected.to_owned(),
        found: Some(found.to_owned()),
    }
}

/// The cells of `| a| b|…|`: each trimmed; the text must start and end with `|`.
fn cells(s: &str) -> Option<Vec<&str>> {
    let inner = s.trim().strip_prefix('|')?.strip_suffix('|')?;
    let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
    cells.iter().all(|c| !c.is_empty()).then_some(cells)
}

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

/// `Name:....value` lines after a `# … info:` title: the value of each
/// wanted field, by name.
fn dotted_fields<'a>(
    text: &'a str,
    title: &str,
    wanted: &[&str],
) -> Result<Vec<(String, usize, &'a str, &'a str)>, ParseError> {
    let mut lines = NumberedLines::new(text);
    let expected_title = format!("`{title} …`");
    let (n, l) = lines.expect(&expected_title)?;
    if !l.starts_with(title) {
        return Err(bad(n, &expected_title, l));
    }
    let mut out: Vec<(String, usize, &'a str, &'a str)> = Vec::new();
    const LINE: &str = "`Name:....value` or a tab-indented flag";
    let mut seen_field = false;
    while let Some((n, l)) = lines.next() {
        if l.starts_with('\t') {
            // A flag continues a field's value (CapMask's names).
            if !seen_field {
                return Err(bad(n, LINE, l));
            }
            continue;
        }
        let (name, rest) = l.split_once(':').ok_or_else(|| bad(n, LINE, l))?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad(n, LINE, l));
        }
        seen_field = true;
        if wanted.contains(&name) {
            if out.iter().any(|(f, ..)| f == name) {
                return Err(bad(n, &format!("one `{name}` field"), l));
            }
            out.push((
                name.to_owned(),
                n,
                l,
                rest.trim_start_matches('.').trim_end(),
            ));
        }
    }
    Ok(out)
}

fn field<'a, T>(
    fields: &[(String, usize, &'a str, &'a str)],
    name: &str,
    expected: &str,
    parse: impl FnOnce(&'a str) -> Option<T>,
) -> Result<T, ParseError> {
    let (_, n, l, v) = fields
        .iter()
        .find(|(f, ..)| f == name)
        .ok_or_else(|| ParseError {
            line: 0,
            expected: format!("a `{name}` field"),
            found: None,
        })?;
    parse(v).ok_or_else(|| bad(*n, &format!("{name} {expected}"), l))
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

/// One counter attribute as `perfquery` prints it (`-X`: `PortXmitDataSL`
/// with `XmtDataSL0..15`; `-S`: `PortRcvDataSL`, `RcvDataSL0..15`;
/// `--vlxmitcounters`: `PortVLXmitWaitCounters`, `PortVLXmitWait0..15`):
/// `# ATTRIBUTE counters: Lid L port P`, then `Name:.....value` lines; the
/// sixteen values of `PREFIX0..15`, in order.
pub fn parse_perfquery(text: &str, attribute: &str, prefix: &str) -> Result<[u64; 16], ParseError> {
    let names: Vec<String> = (0..16).map(|i| format!("{prefix}{i}")).collect();
    let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
    let f = dotted_fields(text, &format!("# {attribute} counters:"), &wanted)?;
    let mut out = [0u64; 16];
    for (slot, name) in out.iter_mut().zip(&names) {
        *slot = field(&f, name, "a counter", |v| v.parse().ok())?;
    }
    Ok(out)
}

/// The type column of `ibnetdiscover -p`.
fn node_type_column(s: &str) -> Option<NodeType> {
    match s {
        "SW" => Some(NodeType::Switch),
        "CA" => Some(NodeType::Hca),
        "RT" => Some(NodeType::Router),
        _ => None,
    }
}

fn bad_topology_line(line: usize, l: &str) -> ParseError {
    ParseError {
        line,
        expected: "`TYPE LID PORT GUID WIDTH SPEED [- TYPE LID PORT GUID ( 'NAME' - 'NAME' )]` \
                   or `TYPE LID PORT GUID WIDTH SPEED 'NAME'`"
            .to_owned(),
        found: Some(l.to_owned()),
    }
}

/// `ibnetdiscover -p`: one line per port of every switch and HCA, with the
/// node and port at the other end of the cable when there is one
/// (infiniband-diags 44):
///
/// ```text
/// CA    11  1 0x000000000010000b 4x QDR - SW     7  2 0x0000000000200004 ( 'node6 HCA-1' - 'leaf3' )
/// SW     7  8 0x0000000000200004 4x QDR - SW     3  3 0x0000000000200001 ( 'leaf3' - 'spine2' )
/// SW     7  6 0x0000000000200004 4x SDR                                    'leaf3'
/// ```
///
/// Columns: type, LID, port, node GUID, width, speed; then `-` and the
/// remote's type, LID, port and GUID, and both names in quotes. A line with
/// no `-` is an unconnected port. Anything else is an error naming the line.
pub fn parse_topology(text: &str) -> Result<Topology, ParseError> {
    let mut topo = Topology::default();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let port = topology_line(l).ok_or_else(|| bad_topology_line(n, l))?;
        topo.ports.push(port);
    }
    if topo.ports.is_empty() {
        return Err(ParseError {
            line: 0,
            expected: "at least one port".to_owned(),
            found: None,
        });
    }
    Ok(topo)
}

fn link_end(kind: &str, lid: &str, port: &str, guid: &str, name: String) -> Option<LinkEnd> {
    let guid_ok = guid
        .strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    guid_ok.then_some(())?;
    Some(LinkEnd {
        kind: node_type_column(kind)?,
        lid: lid.parse().ok()?,
        port: port.parse().ok()?,
        guid: guid.to_owned(),
        name,
    })
}

/// `'NAME'` → NAME, with the ` HCA-1` suffix ibsim and mlx firmware put
/// on HCA node descriptions kept (it is the node's description).
fn quoted(s: &str) -> Option<&str> {
    s.trim().strip_prefix('\'')?.strip_suffix('\'')
}

fn topology_line(l: &str) -> Option<DiscoveredPort> {
    // Split the names off first: they may hold spaces.
    let q = l.find('\'')?;
    let (head, names) = l.split_at(q);
    let head = head.trim_end();
    let (local, remote_cols) = match head.split_once(" - ") {
        Some((a, b)) => (a, Some(b)),
        None => (head, None),
    };
    let cols: Vec<&str> = local.split_whitespace().collect();
    if cols.len() < 4 {
        return None;
    }
    match remote_cols {
        None => {
            let name = quoted(names)?.to_owned();
            Some(DiscoveredPort {
                end: link_end(cols[0], cols[1], cols[2], cols[3], name)?,
                remote: None,
            })
        }
        Some(r) => {
            // `( 'local' - 'remote' )`
            let inner = names.trim_end().strip_suffix(')')?.trim_end();
            let (a, b) = inner.split_once("' - '")?;
            let a = format!("{a}'");
            let b = format!("'{b}");
            let rc: Vec<&str> = r
                .trim_end()
                .trim_end_matches('(')
                .split_whitespace()
                .collect();
            if rc.len() < 4 {
                return None;
            }
            Some(DiscoveredPort {
                end: link_end(cols[0], cols[1], cols[2], cols[3], quoted(&a)?.to_owned())?,
                remote: Some(link_end(
                    rc[0],
                    rc[1],
                    rc[2],
                    rc[3],
                    quoted(&b)?.to_owned(),
                )?),
            })
        }
    }
}
