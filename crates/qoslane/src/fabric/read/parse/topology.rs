//! The parser of `ibnetdiscover -p`: the fabric's topology, a line per
//! port.

use crate::fabric::read::parse::lines::ParseError;
use crate::fabric::tables::{DiscoveredPort, LinkEnd, NodeType, Topology};

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
