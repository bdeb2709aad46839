//! `ibroute LID` (a switch's linear forwarding table) as infiniband-diags
//! prints it: the out port of each destination LID the switch forwards,
//! what the program reader gives the deadlock check
//! (`Reader::forwarding`, `fabric/sweep/routes.rs`).

use super::lines::{NumberedLines, ParseError, bad};

/// The `(LID, out port)` pairs of `ibroute`'s table, in its order: the
/// `Unicast lids [0x0-0xN] of switch …:` title, the two header lines, one
/// `0xLLLL PPP : (…)` line per LID, then `N valid lids dumped`, whose
/// count must be the lines read.
pub fn parse_forwarding(text: &str) -> Result<Vec<(u16, u8)>, ParseError> {
    let mut lines = NumberedLines::new(text);
    const TITLE: &str = "`Unicast lids [0xA-0xB] of switch …`";
    let (n, l) = lines.expect(TITLE)?;
    if !l.starts_with("Unicast lids [") {
        return Err(bad(n, TITLE, l));
    }
    for header in ["`Lid  Out   Destination`", "`Port     Info`"] {
        let (n, l) = lines.expect(header)?;
        if l.trim() != header.trim_matches('`') {
            return Err(bad(n, header, l));
        }
    }
    const ENTRY: &str = "`0xLLLL PPP : (…)` or `N valid lids dumped`";
    let mut out = Vec::new();
    while let Some((n, l)) = lines.next() {
        if let Some(count) = l.trim().strip_suffix("valid lids dumped") {
            let count: usize = count.trim().parse().map_err(|_| bad(n, ENTRY, l))?;
            if count != out.len() {
                return Err(bad(
                    n,
                    &format!("{} valid lids dumped (the lines read)", out.len()),
                    l,
                ));
            }
            return Ok(out);
        }
        let mut words = l.split_whitespace();
        let lid = words
            .next()
            .and_then(|w| w.strip_prefix("0x"))
            .and_then(|h| u16::from_str_radix(h, 16).ok());
        let port = words.next().and_then(|w| w.parse::<u8>().ok());
        match (lid, port, words.next()) {
            (Some(lid), Some(port), Some(":")) => out.push((lid, port)),
            _ => return Err(bad(n, ENTRY, l)),
        }
    }
    Err(ParseError {
        line: 0,
        expected: "`N valid lids dumped`".into(),
        found: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As infiniband-diags' ibroute prints a switch of the rig (the header's
    /// trailing blank kept).
    const TABLE: &str = "Unicast lids [0x0-0x5] of switch Lid 1 guid 0x0000000000200000 (sw1):\n  \
        Lid  Out   Destination\n       Port     Info \n\
        0x0001 000 : (Switch portguid 0x0000000000200000: 'sw1')\n\
        0x0002 001 : (Channel Adapter portguid 0x0000000000100001: 'node1 HCA-1')\n\
        0x0005 003 : (Channel Adapter portguid 0x0000000000100004: 'node4 HCA-1')\n\
        3 valid lids dumped \n";

    #[test]
    fn each_lid_and_its_out_port() {
        let pairs = parse_forwarding(TABLE).unwrap();
        assert_eq!(pairs, [(1, 0), (2, 1), (5, 3)]);
    }

    #[test]
    fn a_short_count_a_bad_line_or_no_end_is_an_error_naming_its_line() {
        let e = parse_forwarding(&TABLE.replace("3 valid", "4 valid")).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        let e = parse_forwarding(&TABLE.replace("0x0002 001", "0x0002 1x")).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        let e = parse_forwarding(&TABLE.replace("3 valid lids dumped \n", "")).unwrap_err();
        assert_eq!(e.line, 0, "{e}");
        assert!(parse_forwarding("ibwarn: not a switch\n").is_err());
        assert!(parse_forwarding("").is_err());
    }
}
