//! A level's `sm_traffic`: the traffic the Subnet Manager must answer
//! with the level's SL beyond the job's own, typed ([`SmTraffic`]: one
//! field of a path record query and the range it covers). Its checks in
//! the validator are `traffic_check.rs`; the SM's policy file is written
//! from it by `fabric/judge/sm_policy.rs`.

use std::fmt;

/// Which field of a path record query a [`SmTraffic`] matches: ranges of
/// one field are compared with each other, never with another field's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrafficField {
    /// The partition key, membership bit (0x8000) ignored.
    Pkey,
    ServiceId,
    /// The path record's QoS class: what rdma_cm puts there is the
    /// connection's ToS (`rdma_set_option(RDMA_OPTION_ID_TOS)`).
    QosClass,
    /// The target port GUID (SRP).
    TargetPortGuid,
}

impl TrafficField {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pkey => "pkey",
            Self::ServiceId => "service-id",
            Self::QosClass => "qos-class",
            Self::TargetPortGuid => "target-port-guid",
        }
    }

    /// The largest value of the field: PKey 15 bits (the membership bit
    /// is not part of it), QoS class 12 bits, the others 64.
    pub fn max(self) -> u64 {
        match self {
            Self::Pkey => 0x7fff,
            Self::QosClass => 0xfff,
            Self::ServiceId | Self::TargetPortGuid => u64::MAX,
        }
    }
}

/// One entry of a level's `sm_traffic`: what OpenSM's QoS policy matches a
/// path record query by, as the admin wrote it, and the range of one path
/// record field it covers (OpenSM doc/QoS_management_in_OpenSM.txt §6: a
/// ULP keyword is a service ID or PKey match).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmTraffic {
    /// As the mapping writes it, blanks made single.
    pub written: String,
    /// The qos-ulps rule's left side (`ipoib`, `rds`, `any, service-id
    /// 0x…`); a QoS class has none (OpenSM matches it only in
    /// qos-match-rules).
    pub rule: String,
    pub field: TrafficField,
    /// Inclusive, within [`TrafficField::max`] (a PKey without its
    /// membership bit).
    pub first: u64,
    pub last: u64,
}

impl SmTraffic {
    /// The ULP keywords and what each one matches.
    pub const ULPS: &[(&str, TrafficField, u64, u64)] = &[
        // IPoIB's default partition, PKey 0x7fff.
        ("ipoib", TrafficField::Pkey, 0x7fff, 0x7fff),
        // SDP: 0x000000000001PPPP, any TCP port.
        ("sdp", TrafficField::ServiceId, 0x1_0000, 0x1_ffff),
        // RDS: port 0x48CA (18634).
        ("rds", TrafficField::ServiceId, 0x0106_48ca, 0x0106_48ca),
        // iSER: port 0x0CBC (3260).
        ("iser", TrafficField::ServiceId, 0x0106_0cbc, 0x0106_0cbc),
    ];

    /// Reads one entry: a ULP keyword (`ipoib`, `sdp`, `rds`, `iser`),
    /// `ipoib pkey P`, `pkey R`, `service-id R`, `qos-class R` or
    /// `srp target-port-guid R`, where `R` is `N` or `N-M` (hex `0x…` or
    /// decimal). The error is a message fragment for a diagnostic.
    pub fn parse(s: &str) -> Result<Self, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let written = words.join(" ");
        let ranged = |rule: &str, field: TrafficField, r: &str| -> Result<Self, String> {
            let (first, last) = parse_range(r, field)?;
            Ok(Self {
                written: written.clone(),
                rule: if field == TrafficField::QosClass {
                    String::new()
                } else {
                    format!("{rule} {r}")
                },
                field,
                first,
                last,
            })
        };
        match words.as_slice() {
            [w] if !matches!(*w, "pkey" | "service-id" | "qos-class" | "srp") => Self::ULPS
                .iter()
                .find(|(u, ..)| u == w)
                .map(|&(u, field, first, last)| Self {
                    written: written.clone(),
                    rule: u.to_owned(),
                    field,
                    first,
                    last,
                })
                .ok_or_else(|| format!("`{w}` is not one of {}", Self::ulp_words())),
            ["ipoib", "pkey", r] => {
                let t = ranged("ipoib, pkey", TrafficField::Pkey, r)?;
                if t.first == t.last {
                    Ok(t)
                } else {
                    Err(format!(
                        "`ipoib pkey {r}`: IPoIB takes one PKey, not a range"
                    ))
                }
            }
            ["pkey", r] => ranged("any, pkey", TrafficField::Pkey, r),
            ["service-id", r] => ranged("any, service-id", TrafficField::ServiceId, r),
            ["qos-class", r] => ranged("qos-class", TrafficField::QosClass, r),
            ["srp", "target-port-guid", r] => {
                ranged("srp, target-port-guid", TrafficField::TargetPortGuid, r)
            }
            _ => Err(format!(
                "`{s}` is not SM traffic: write a ULP ({}), `ipoib pkey P`, `pkey R`, \
                 `service-id R`, `qos-class R` or `srp target-port-guid R` (R: N or N-M)",
                Self::ulp_words()
            )),
        }
    }

    fn ulp_words() -> String {
        Self::ULPS
            .iter()
            .map(|(u, ..)| format!("`{u}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether two entries match some path record query in common.
    pub fn overlaps(&self, other: &Self) -> bool {
        self.field == other.field && self.first <= other.last && other.first <= self.last
    }
}

impl fmt::Display for SmTraffic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

/// `N` or `N-M` (hex `0x…` or decimal) within `field`'s bound; a PKey's
/// membership bit dropped.
fn parse_range(r: &str, field: TrafficField) -> Result<(u64, u64), String> {
    let num = |n: &str| -> Result<u64, String> {
        let v = match n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
            Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
            None if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => n.parse().ok(),
            Some(_) | None => None,
        }
        .ok_or_else(|| format!("`{n}` is not a number (hex 0x… or decimal)"))?;
        let v = if field == TrafficField::Pkey && v <= 0xffff {
            v & 0x7fff
        } else {
            v
        };
        if v > field.max() || (field == TrafficField::Pkey && v == 0) {
            return Err(format!(
                "{} `{n}` is out of range (1 to {:#x}{})",
                field.as_str(),
                field.max(),
                if field == TrafficField::Pkey {
                    ", the membership bit 0x8000 aside"
                } else {
                    ""
                }
            ));
        }
        Ok(v)
    };
    let (a, b) = if let Some((a, b)) = r.split_once('-') {
        (num(a)?, num(b)?)
    } else {
        let a = num(r)?;
        (a, a)
    };
    if a > b {
        return Err(format!("range `{r}` runs backwards"));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SmTraffic {
        SmTraffic::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn each_form_reads_into_its_field_and_range() {
        let t = p("ipoib");
        assert_eq!(
            (t.field, t.first, t.last),
            (TrafficField::Pkey, 0x7fff, 0x7fff)
        );
        let t = p("pkey 0x8001");
        assert_eq!(
            (t.field, t.first, t.rule.as_str()),
            (TrafficField::Pkey, 1, "any, pkey 0x8001")
        );
        let t = p("service-id  0x10000-0x1000f");
        assert_eq!(
            (t.first, t.last, t.written.as_str()),
            (0x10000, 0x1000f, "service-id 0x10000-0x1000f")
        );
        let t = p("qos-class 3-7");
        assert_eq!(
            (t.field, t.first, t.last, t.rule.as_str()),
            (TrafficField::QosClass, 3, 7, "")
        );
        assert_eq!(p("ipoib pkey 0x8002").rule, "ipoib, pkey 0x8002");
        assert_eq!(
            p("srp target-port-guid 0x2c9030000abcd").field,
            TrafficField::TargetPortGuid
        );
        assert_eq!(p("rds").rule, "rds");
    }

    #[test]
    fn wrong_entries_are_refused_with_their_reason() {
        for (s, why) in [
            ("lustre", "not one of"),
            ("pkey 0x8000", "out of range"),
            ("pkey 0x10000", "out of range"),
            ("qos-class 4096", "out of range"),
            ("service-id 9-3", "backwards"),
            ("service-id 0x", "not a number"),
            ("service-id -3", "not a number"),
            ("ipoib pkey 1-3", "one PKey"),
            ("pkey", "is not SM traffic"),
        ] {
            let e = SmTraffic::parse(s).expect_err(s);
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn overlap_is_within_one_field_and_ignores_the_membership_bit() {
        assert!(p("ipoib").overlaps(&p("pkey 0xffff")));
        assert!(p("pkey 0x8001").overlaps(&p("pkey 0x0001-0x0003")));
        assert!(p("rds").overlaps(&p("service-id 0x1060000-0x106ffff")));
        assert!(p("sdp").overlaps(&p("service-id 0x1ffff")));
        assert!(!p("sdp").overlaps(&p("rds")));
        assert!(!p("qos-class 1").overlaps(&p("pkey 1")));
        assert!(!p("qos-class 1-3").overlaps(&p("qos-class 4")));
    }
}
