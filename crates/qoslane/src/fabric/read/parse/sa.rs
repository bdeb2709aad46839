//! `saquery -p` (a PathRecord query to the SA) as infiniband-diags prints
//! it: the SL the Subnet Manager answered with — what its QoS policy gave
//! a query carrying a level's `sm_traffic` (`fabric/judge/sm_policy.rs`).

use super::lines::{NumberedLines, ParseError, bad};

/// The `sl` of the first record of `saquery -p`'s `PathRecord dump:`
/// (`\t\tsl......................0x3`); an error when there is no record.
pub fn parse_path_record_sl(text: &str) -> Result<u8, ParseError> {
    let mut lines = NumberedLines::new(text);
    const TITLE: &str = "`PathRecord dump:`";
    let (n, l) = lines.expect(TITLE)?;
    if l.trim() != "PathRecord dump:" {
        return Err(bad(n, TITLE, l));
    }
    const LINE: &str = "`sl.....0xN`, SL 0 to 15";
    while let Some((n, l)) = lines.next() {
        let Some((name, value)) = l.trim().split_once("..") else {
            if l.trim() == "PathRecord dump:" {
                break;
            }
            return Err(bad(n, "`name....value`", l));
        };
        if name == "sl" {
            let v = value.trim_start_matches('.');
            return v
                .strip_prefix("0x")
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|sl| *sl <= 15)
                .ok_or_else(|| bad(n, LINE, l));
        }
    }
    Err(ParseError {
        line: 0,
        expected: "an `sl` field".into(),
        found: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As saquery 2.x printed it on the rig (OpenSM 3.3.23, ibsim).
    const RECORD: &str = "PathRecord dump:\n\t\tservice_id..............0x0000000000000000\n\
        \t\tdgid....................fe80::10:3\n\t\tsgid....................fe80::10:1\n\
        \t\tdlid....................5\n\t\tslid....................1\n\
        \t\thop_flow_raw............0x0\n\t\ttclass..................0x0\n\
        \t\tnum_path_revers.........0x80\n\t\tpkey....................0xFFFF\n\
        \t\tqos_class...............0x0\n\t\tsl......................0x3\n\
        \t\tmtu.....................0x84\n";

    #[test]
    fn the_sl_of_the_record_not_of_slid() {
        assert_eq!(parse_path_record_sl(RECORD), Ok(3));
    }

    #[test]
    fn no_record_or_a_bad_sl_is_an_error_naming_its_line() {
        assert_eq!(parse_path_record_sl("").map_err(|e| e.line), Err(0));
        let e = parse_path_record_sl(&RECORD.replace("0x3\n", "0x1f\n")).unwrap_err();
        assert_eq!(e.line, 12, "{e}");
        let e = parse_path_record_sl(&RECORD.replace("\t\tsl......................0x3\n", ""))
            .unwrap_err();
        assert_eq!((e.line, e.expected.as_str()), (0, "an `sl` field"));
        assert!(parse_path_record_sl("ERROR: no path\n").is_err());
    }
}
