//! The fabric's topology, as `ibnetdiscover -p` prints it: one line per
//! port of every switch and HCA, with the node and port at the other end of
//! the cable when there is one (infiniband-diags 44):
//!
//! ```text
//! CA    11  1 0x000000000010000b 4x QDR - SW     7  2 0x0000000000200004 ( 'node6 HCA-1' - 'leaf3' )
//! SW     7  8 0x0000000000200004 4x QDR - SW     3  3 0x0000000000200001 ( 'leaf3' - 'spine2' )
//! SW     7  6 0x0000000000200004 4x SDR                                    'leaf3'
//! ```
//!
//! Columns: type, LID, port, node GUID, width, speed; then `-` and the
//! remote's type, LID, port and GUID, and both names in quotes. A line with
//! no `-` is an unconnected port. Anything else is an error naming the line.

use serde::Serialize;

use super::smpquery::ParseError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Switch,
    Hca,
    Router,
}

impl Kind {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "SW" => Some(Self::Switch),
            "CA" => Some(Self::Hca),
            "RT" => Some(Self::Router),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Switch => "switch",
            Self::Hca => "HCA",
            Self::Router => "router",
        }
    }
}

/// One end of a link: a port of a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct End {
    pub kind: Kind,
    pub lid: u16,
    pub port: u32,
    pub guid: String,
    pub name: String,
}

/// One port as discovered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    pub end: End,
    /// The other end of the cable; `None`: nothing is connected.
    pub remote: Option<End>,
}

/// Every port of the fabric, in discovery order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Topology {
    pub ports: Vec<Port>,
}

impl Topology {
    /// Connected ports of `kind`.
    pub fn connected(&self, kind: Kind) -> impl Iterator<Item = &Port> {
        self.ports
            .iter()
            .filter(move |p| p.end.kind == kind && p.remote.is_some())
    }

    /// Nodes of `kind`, counted by GUID.
    pub fn count(&self, kind: Kind) -> usize {
        let mut guids: Vec<&str> = self
            .ports
            .iter()
            .filter(|p| p.end.kind == kind)
            .map(|p| p.end.guid.as_str())
            .collect();
        guids.sort_unstable();
        guids.dedup();
        guids.len()
    }

    /// The connected ports of the switch with GUID `guid`.
    pub fn data_ports(&self, guid: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .ports
            .iter()
            .filter(|p| p.end.guid == guid && p.remote.is_some())
            .map(|p| p.end.port)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn bad(line: usize, l: &str) -> ParseError {
    ParseError {
        line,
        expected: "`TYPE LID PORT GUID WIDTH SPEED [- TYPE LID PORT GUID ( 'NAME' - 'NAME' )]` \
                   or `TYPE LID PORT GUID WIDTH SPEED 'NAME'`"
            .to_owned(),
        found: Some(l.to_owned()),
    }
}

/// Parses `ibnetdiscover -p`.
pub fn parse(text: &str) -> Result<Topology, ParseError> {
    let mut topo = Topology::default();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        let port = parse_line(l).ok_or_else(|| bad(n, l))?;
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

fn end(kind: &str, lid: &str, port: &str, guid: &str, name: String) -> Option<End> {
    let guid_ok = guid
        .strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    guid_ok.then_some(())?;
    Some(End {
        kind: Kind::parse(kind)?,
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

fn parse_line(l: &str) -> Option<Port> {
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
            Some(Port {
                end: end(cols[0], cols[1], cols[2], cols[3], name)?,
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
            Some(Port {
                end: end(cols[0], cols[1], cols[2], cols[3], quoted(&a)?.to_owned())?,
                remote: Some(end(rc[0], rc[1], rc[2], rc[3], quoted(&b)?.to_owned())?),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_every_shape() {
        let t = parse(
            "CA    11  1 0x000000000010000b 4x QDR - SW     7  2 0x0000000000200004 ( 'node6 HCA-1' - 'leaf3' )\n\
             SW     7  8 0x0000000000200004 4x QDR - SW     3  3 0x0000000000200001 ( 'leaf3' - 'spine2' )\n\
             SW     7  6 0x0000000000200004 4x SDR                                    'leaf3'\n",
        )
        .unwrap();
        assert_eq!(t.ports.len(), 3);
        let p = &t.ports[0];
        assert_eq!((p.end.kind, p.end.lid, p.end.port), (Kind::Hca, 11, 1));
        assert_eq!(p.end.name, "node6 HCA-1");
        let r = p.remote.as_ref().unwrap();
        assert_eq!(
            (r.kind, r.lid, r.port, r.name.as_str()),
            (Kind::Switch, 7, 2, "leaf3")
        );
        assert!(t.ports[2].remote.is_none());
        assert_eq!(t.data_ports("0x0000000000200004"), [8]);
        assert_eq!((t.count(Kind::Switch), t.count(Kind::Hca)), (1, 1));
    }

    #[test]
    fn the_real_two_level_fabric() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/ibnetdiscover/2level.p.txt"
        ))
        .unwrap();
        let t = parse(&text).unwrap();
        assert_eq!((t.count(Kind::Switch), t.count(Kind::Hca)), (5, 6));
        // leaf1: two HCAs, two uplinks
        assert_eq!(t.data_ports("0x0000000000200002"), [1, 2, 7, 8]);
        assert_eq!(t.connected(Kind::Hca).count(), 6);
    }

    #[test]
    fn a_line_it_does_not_know_names_its_number() {
        let e = parse("SW 7 8 0x02 4x QDR 'leaf3'\nwhat is this\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse("").is_err());
    }
}
