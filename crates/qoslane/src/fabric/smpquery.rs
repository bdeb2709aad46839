//! The [`Probe`] that runs infiniband-diags' `smpquery` (an SMP query over
//! `/dev/infiniband/umadN`, as root) and parses its output strictly.
//!
//! Per port it runs three queries on the local port (`-D … 0`: directed route
//! of length 0), concurrently, so a probe costs one query's latency (10–15 ms
//! each on the simulated fabric):
//!
//! ```text
//! smpquery -C mlx5_0 -P 1 -D sl2vl 0      SL2VL table          (the check)
//! smpquery -C mlx5_0 -P 1 -D portinfo 0   OperVLs, VLCap, ...  (the check)
//! smpquery -C mlx5_0 -P 1 -D vlarb 0      VL arbitration       (a warning)
//! ```
//!
//! The formats are those of infiniband-diags 44 (libibmad's dump functions);
//! captured outputs live in `tests/fixtures/smpquery/`. Anything else is an
//! error quoting the line, so a format change cannot pass as "aligned".

use std::path::{Path, PathBuf};

use super::probe::{PortTables, Probe, Sl2Vl, VlArb, VlArbEntry, VlArbState, VlRange};
use super::sysfs::PortId;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exec;

/// Runs the `smpquery` program at an absolute path.
#[derive(Clone, Debug)]
pub struct Smpquery {
    program: PathBuf,
}

impl Smpquery {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
        }
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Runs `smpquery [-C DEV -P PORT] ARGS…` (ARGS: `-D sl2vl 0,1 7`, or
    /// `sl2vl LID 7`); its stdout, or the error with the arguments named.
    /// `via` is the local HCA port the SMPs leave from (the default port of
    /// the default device when `None`).
    pub fn run(&self, via: Option<&PortId>, args: &[&str], deadline: &Deadline) -> Result<String> {
        self.run_many(&[(via, args)], deadline)
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no smpquery result".into())))
    }

    /// [`Smpquery::run`] for several queries at once (one wait, no thread).
    pub fn run_many(
        &self,
        queries: &[(Option<&PortId>, &[&str])],
        deadline: &Deadline,
    ) -> Vec<Result<String>> {
        let ports: Vec<Option<String>> = queries
            .iter()
            .map(|(via, _)| via.map(|v| v.port.to_string()))
            .collect();
        let argvs: Vec<Vec<&str>> = queries
            .iter()
            .zip(&ports)
            .map(|((via, args), p)| {
                let mut argv: Vec<&str> = Vec::with_capacity(args.len() + 4);
                if let (Some(v), Some(p)) = (via, p.as_deref()) {
                    argv.extend(["-C", v.device.as_str(), "-P", p]);
                }
                argv.extend_from_slice(args);
                argv
            })
            .collect();
        let refs: Vec<&[&str]> = argvs.iter().map(Vec::as_slice).collect();
        exec::run_many(&self.program, &refs, deadline)
            .into_iter()
            .zip(&argvs)
            .map(|(r, argv)| match r {
                Ok(out) => String::from_utf8(out.stdout).map_err(|_| {
                    Error::Fabric(format!("smpquery {}: output is not UTF-8", argv.join(" ")))
                }),
                Err(Error::Program { program, detail }) => Err(Error::Program {
                    program,
                    detail: format!("{}: {detail}", argv.join(" ")),
                }),
                Err(e) => Err(e),
            })
            .collect()
    }
}

/// The three queries of a port's own tables (directed route of length 0).
const PORT_QUERIES: [&[&str]; 3] = [
    &["-D", "sl2vl", "0"],
    &["-D", "portinfo", "0"],
    &["-D", "vlarb", "0"],
];

impl Probe for Smpquery {
    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables> {
        self.probe_many(&[port], deadline)
            .pop()
            .unwrap_or_else(|| Err(Error::Internal("no probe result".into())))
    }

    /// Every port's three queries at once: a probe of any number of ports
    /// costs one query's latency, on this thread.
    fn probe_many(&self, ports: &[&PortId], deadline: &Deadline) -> Vec<Result<PortTables>> {
        let queries: Vec<(Option<&PortId>, &[&str])> = ports
            .iter()
            .flat_map(|p| PORT_QUERIES.iter().map(move |q| (Some(*p), *q)))
            .collect();
        let mut answers = self.run_many(&queries, deadline).into_iter();
        ports
            .iter()
            .map(|port| {
                let mut next = || {
                    answers.next().unwrap_or_else(|| {
                        Err(Error::Internal("smpquery answers out of step".into()))
                    })
                };
                let (sl2vl, portinfo, vlarb) = (next(), next(), next());
                tables_of(port, sl2vl, portinfo, vlarb)
            })
            .collect()
    }

    fn first_hop(&self, port: &PortId, deadline: &Deadline) -> super::first_hop::FirstHop {
        super::first_hop::read(self, port, deadline)
    }
}

/// A port's tables from its three answers (sl2vl, portinfo, vlarb).
fn tables_of(
    port: &PortId,
    sl2vl: Result<String>,
    portinfo: Result<String>,
    vlarb: Result<String>,
) -> Result<PortTables> {
    let in_port = |op: &'static str| {
        move |e: ParseError| Error::Fabric(format!("{port}: smpquery {op}: {e}"))
    };
    let sl2vl = parse_sl2vl(&sl2vl?).map_err(in_port("sl2vl"))?;
    let info = parse_portinfo(&portinfo?).map_err(in_port("portinfo"))?;
    if info.local_port != port.port {
        return Err(Error::Fabric(format!(
            "{port}: smpquery portinfo answered for port {}, not port {}",
            info.local_port, port.port
        )));
    }
    let vlarb = vlarb_state(vlarb)?;
    Ok(PortTables {
        sl2vl,
        oper_vls: info.oper_vls,
        vl_cap: info.vl_cap,
        link_state: info.link_state,
        vlarb,
    })
}

/// A `smpquery vlarb` answer as the checks keep it: the tables only decide
/// `starved`, so a failed or unparsable answer is recorded, not fatal; a
/// deadline is the run's, not the warning's, and gives up the read.
pub fn vlarb_state(answer: Result<String>) -> Result<VlArbState> {
    Ok(match answer {
        Err(e @ Error::Deadline { .. }) => return Err(e),
        Err(e) => VlArbState::Unavailable(e.to_string()),
        Ok(text) => match parse_vlarb(&text) {
            Ok(t) => VlArbState::Read(t),
            Err(e) => VlArbState::Unavailable(format!("smpquery vlarb: {e}")),
        },
    })
}

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
struct Lines<'a> {
    it: std::iter::Peekable<std::iter::Enumerate<std::str::Lines<'a>>>,
}

impl<'a> Lines<'a> {
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

/// `smpquery -D sl2vl 0` on a CA port:
///
/// ```text
/// # SL2VL table: DR path slid 65535; dlid 65535; 0
/// #                 SL: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|
/// ports: in  0, out  0: | 7| 6| 5| 4| 3| 2| 1| 0| 0| 1| 2| 3| 4| 5| 6| 7|
/// ```
pub fn parse_sl2vl(text: &str) -> Result<Sl2Vl, ParseError> {
    let mut lines = Lines::new(text);
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
    if !header_ok {
        return Err(bad(n, HEADER, l));
    }
    const ROW: &str = "`ports: in  0, out  0: |` and 16 VLs 0..=15";
    let (n, l) = lines.expect(ROW)?;
    let table = l
        .strip_prefix("ports: in ")
        .and_then(|r| r.split_once(": |"))
        .and_then(|(ports, rest)| {
            ports.split_once(", out ")?;
            let vls = cells(&format!("|{rest}"))?
                .iter()
                .map(|c| c.parse::<u8>().ok().filter(|&v| v <= 15))
                .collect::<Option<Vec<u8>>>()?;
            <[u8; 16]>::try_from(vls).ok()
        })
        .and_then(Sl2Vl::new)
        .ok_or_else(|| bad(n, ROW, l))?;
    if let Some((n, l)) = lines.next() {
        // A switch prints one row per input port; a CA port has one table.
        return Err(bad(n, "the end of the table (one row, a CA port)", l));
    }
    Ok(table)
}

/// The PortInfo fields the check needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfoVls {
    pub local_port: u32,
    pub link_state: String,
    pub vl_cap: VlRange,
    pub oper_vls: VlRange,
    pub vlarb_high_cap: u8,
    pub vlarb_low_cap: u8,
}

/// `smpquery -D portinfo 0`: a title, then `Name:` dot-padded to column 33
/// and the value; capability flags on tab-indented continuation lines.
pub fn parse_portinfo(text: &str) -> Result<PortInfoVls, ParseError> {
    /// A field line: its number, its text, its value.
    struct Field<'a> {
        line: usize,
        text: &'a str,
        value: &'a str,
    }
    const WANTED: [&str; 6] = [
        "LocalPort",
        "LinkState",
        "VLCap",
        "OperVLs",
        "VLArbHighCap",
        "VLArbLowCap",
    ];
    let mut lines = Lines::new(text);
    const TITLE: &str = "`# Port info: …`";
    let (n, l) = lines.expect(TITLE)?;
    if !l.starts_with("# Port info:") {
        return Err(bad(n, TITLE, l));
    }
    let mut fields: Vec<(&str, Field<'_>)> = Vec::new();
    let mut seen_field = false;
    const LINE: &str = "`Name:....value` or a tab-indented flag";
    while let Some((n, l)) = lines.next() {
        if l.starts_with('\t') {
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
        if let Some(name) = WANTED.iter().find(|w| **w == name) {
            if fields.iter().any(|(f, _)| f == name) {
                return Err(bad(n, &format!("one `{name}` field"), l));
            }
            let value = rest.trim_start_matches('.').trim_end();
            fields.push((
                name,
                Field {
                    line: n,
                    text: l,
                    value,
                },
            ));
        }
    }
    fn get<T>(
        fields: &[(&str, Field<'_>)],
        name: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<T, ParseError> {
        let (_, f) = fields
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| ParseError {
                line: 0,
                expected: format!("a `{name}` field"),
                found: None,
            })?;
        parse(f.value).ok_or_else(|| bad(f.line, &format!("{name} {expected}"), f.text))
    }
    const RANGE: &str = "VL0, VL0-1, VL0-3, VL0-7 or VL0-14";
    Ok(PortInfoVls {
        local_port: get(&fields, "LocalPort", "a port number", |s| s.parse().ok())?,
        link_state: get(&fields, "LinkState", "a state name", |s| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic())).then(|| s.to_owned())
        })?,
        vl_cap: get(&fields, "VLCap", RANGE, VlRange::parse)?,
        oper_vls: get(&fields, "OperVLs", RANGE, VlRange::parse)?,
        vlarb_high_cap: get(&fields, "VLArbHighCap", "a number", |s| s.parse().ok())?,
        vlarb_low_cap: get(&fields, "VLArbLowCap", "a number", |s| s.parse().ok())?,
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
    let mut lines = Lines::new(text);
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
    let mut lines = Lines::new(text);
    const TITLE: &str = "`# SL2VL table: …`";
    let (n, l) = lines.expect(TITLE)?;
    if !l.starts_with("# SL2VL table:") {
        return Err(bad(n, TITLE, l));
    }
    const HEADER: &str = "`#                 SL: | 0| 1|…|15|`";
    let (n, l) = lines.expect(HEADER)?;
    if !l.trim_start_matches('#').trim_start().starts_with("SL:") {
        return Err(bad(n, HEADER, l));
    }
    let row_text = format!("`ports: in  N, out {out:2}: |` and 16 VLs 0..=15");
    let mut rows: Vec<(u32, Sl2Vl)> = Vec::new();
    while let Some((n, l)) = lines.next() {
        let row = l
            .strip_prefix("ports: in ")
            .and_then(|r| r.split_once(": |"))
            .and_then(|(ports, rest)| {
                let (i, o) = ports.split_once(", out ")?;
                let (i, o) = (i.trim().parse::<u32>().ok()?, o.trim().parse::<u32>().ok()?);
                if o != out {
                    return None;
                }
                let vls = cells(&format!("|{rest}"))?
                    .iter()
                    .map(|c| c.parse::<u8>().ok().filter(|&v| v <= 15))
                    .collect::<Option<Vec<u8>>>()?;
                Some((i, Sl2Vl::new(<[u8; 16]>::try_from(vls).ok()?)?))
            })
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

/// The kind of node at the other end of a directed route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    ChannelAdapter,
    Switch,
    Router,
}

impl std::fmt::Display for NodeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ChannelAdapter => "Channel Adapter",
            Self::Switch => "Switch",
            Self::Router => "Router",
        })
    }
}

/// The NodeInfo fields a path check needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub node_type: NodeType,
    pub num_ports: u32,
    /// The port the SMP entered the node through.
    pub local_port: u32,
    pub guid: String,
}

/// `Name:....value` lines after a `# … info:` title: the value of each
/// wanted field, by name.
fn dotted_fields<'a>(
    text: &'a str,
    title: &str,
    wanted: &[&str],
) -> Result<Vec<(String, usize, &'a str, &'a str)>, ParseError> {
    let mut lines = Lines::new(text);
    let expected_title = format!("`{title} …`");
    let (n, l) = lines.expect(&expected_title)?;
    if !l.starts_with(title) {
        return Err(bad(n, &expected_title, l));
    }
    let mut out: Vec<(String, usize, &'a str, &'a str)> = Vec::new();
    while let Some((n, l)) = lines.next() {
        if l.starts_with('\t') {
            continue;
        }
        let Some((name, rest)) = l.split_once(':') else {
            return Err(bad(n, "`Name:....value`", l));
        };
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
                "Channel Adapter" => Some(NodeType::ChannelAdapter),
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
    let mut lines = Lines::new(text);
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let switch = format!(
            "{SL2VL}ports: in  1, out  0: | 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|\n"
        );
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
        assert_eq!(ca.node_type, NodeType::ChannelAdapter);
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
        let e =
            parse_nodeinfo("# Node info: Lid 1\nNodeType:.....Hub\nNumPorts:...1\n").unwrap_err();
        assert!(e.to_string().contains("NodeType"), "{e}");
    }

    #[test]
    fn a_zero_weight_on_a_switch_port_reads_as_zero() {
        let arb = parse_vlarb(&switch_fixture("leaf3.lid.vlarb.2-zero.txt")).unwrap();
        assert_eq!(arb.weight(3), 0);
        assert_eq!(arb.weight(2), 64);
    }
}
