//! The parser of `perfquery`'s counters.

use crate::fabric::read::parse::lines::{ParseError, dotted_fields, field};

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
