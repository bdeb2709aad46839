//! The fabric's own counters (Performance Management attributes), as plain
//! data and the one judgement made of them: which counters qoslane reads
//! ([`Kind`]: per-SL data sent and received, per-VL transmit wait), a
//! port's readings ([`PortReading`]), and what two readings of one port
//! show ([`CounterChange`], [`PortCounterEvidence`], [`CounterEvidence`]). Pure: the readings come
//! from `perfquery` (`read/perfquery.rs`) or in-process PMA Gets.
//!
//! A counter of these attributes saturates at its width (it stops, it does
//! not wrap): a saturated reading is never a count, and a delta across a
//! saturated or a cleared counter is said as such, never as traffic.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize, Serializer};

use crate::fabric::tables::{NodeType, PortId};

/// A counter attribute qoslane reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// PortXmitDataSL (0x36): data sent per SL, in units of 4 octets.
    XmitDataSl,
    /// PortRcvDataSL (0x37): data received per SL, in units of 4 octets.
    RcvDataSl,
    /// PortVLXmitWaitCounters (0x1C): ticks a VL had data and could not send.
    VlXmitWait,
}

impl Kind {
    pub const ALL: [Self; 3] = [Self::XmitDataSl, Self::RcvDataSl, Self::VlXmitWait];

    /// The `perfquery` option that reads it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::XmitDataSl => "-X",
            Self::RcvDataSl => "-S",
            Self::VlXmitWait => "--vlxmitcounters",
        }
    }

    /// The attribute as `perfquery` titles it.
    pub fn attribute(self) -> &'static str {
        match self {
            Self::XmitDataSl => "PortXmitDataSL",
            Self::RcvDataSl => "PortRcvDataSL",
            Self::VlXmitWait => "PortVLXmitWaitCounters",
        }
    }

    /// The name of its sixteen fields, less the index.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::XmitDataSl => "XmtDataSL",
            Self::RcvDataSl => "RcvDataSL",
            Self::VlXmitWait => "PortVLXmitWait",
        }
    }

    /// The value a counter of this attribute stops at (its width: 32 bits
    /// for the data counters, 16 for the wait counters).
    pub fn saturated_at(self) -> u64 {
        match self {
            Self::XmitDataSl | Self::RcvDataSl => u64::from(u32::MAX),
            Self::VlXmitWait => u64::from(u16::MAX),
        }
    }

    /// What one unit of the counter is worth in what it reports (bytes for
    /// the data counters: a unit is 4 octets; ticks for the wait).
    pub fn unit(self) -> u64 {
        match self {
            Self::XmitDataSl | Self::RcvDataSl => 4,
            Self::VlXmitWait => 1,
        }
    }
}

/// One attribute of one port as read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    /// The sixteen counters as the port gave them.
    Values([u64; 16]),
    /// The port does not answer this attribute.
    Unsupported,
    /// It could not be read this time (why).
    Unread(String),
}

/// Every attribute qoslane reads of one port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortReading {
    pub port: PortId,
    pub readings: BTreeMap<Kind, Reading>,
    /// Which reader read it (`in-process`, `perfquery`); absent in what an
    /// older qoslane wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_by: Option<String>,
}

/// One counter's change between two readings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// In the attribute's reported unit (bytes, ticks).
    Count(u64),
    /// Saturated at either reading: how much passed is unknown.
    Saturated,
    /// Lower at the second reading: the counter was cleared meanwhile.
    Cleared,
}

impl Serialize for Delta {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Count(n) => s.serialize_u64(*n),
            Self::Saturated => s.serialize_str("saturated"),
            Self::Cleared => s.serialize_str("cleared"),
        }
    }
}

/// The change of one counter of `kind` from `before` to `after`.
pub fn delta(kind: Kind, before: u64, after: u64) -> Delta {
    let top = kind.saturated_at();
    if before >= top || after >= top {
        Delta::Saturated
    } else if after < before {
        Delta::Cleared
    } else {
        Delta::Count((after - before).saturating_mul(kind.unit()))
    }
}

/// What two readings of one attribute of a port show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterChange {
    /// The counters that moved (SL or VL → delta); none moved: empty.
    Moved(BTreeMap<u8, Delta>),
    /// The port does not answer this attribute.
    Unsupported,
    /// Not read at one end (why).
    Unread(String),
}

impl CounterChange {
    fn of(kind: Kind, before: Option<&Reading>, after: Option<&Reading>) -> Self {
        match (before, after) {
            (Some(Reading::Unsupported), _) | (_, Some(Reading::Unsupported)) => Self::Unsupported,
            (Some(Reading::Values(b)), Some(Reading::Values(a))) => Self::Moved(
                (0u8..)
                    .zip(b.iter().zip(a))
                    .map(|(i, (b, a))| (i, delta(kind, *b, *a)))
                    .filter(|(_, d)| *d != Delta::Count(0))
                    .collect(),
            ),
            (Some(Reading::Unread(why)), _) | (_, Some(Reading::Unread(why))) => {
                Self::Unread(why.clone())
            }
            (None, _) | (_, None) => Self::Unread("not read".into()),
        }
    }
}

/// What the counters of one port showed while a job ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortCounterEvidence {
    pub device: String,
    pub port: u32,
    /// Bytes sent per SL (PortXmitDataSL × 4).
    pub sent_bytes_per_sl: CounterChange,
    /// Bytes received per SL (PortRcvDataSL × 4).
    pub received_bytes_per_sl: CounterChange,
    /// Ticks each VL waited to send (PortVLXmitWait).
    pub xmit_wait_ticks_per_vl: CounterChange,
    /// Which reader read the port at the Epilog (`in-process`,
    /// `perfquery`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_by: Option<String>,
    /// What the counters cannot say, in words: the port serves no per-SL
    /// data ([`PER_SL_UNSUPPORTED`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<String>,
}

/// The words of a port that serves neither PortXmitDataSL nor
/// PortRcvDataSL (the simulator's, some older HCAs'): no bytes per SL can be
/// counted there, and that is no failure.
pub const PER_SL_UNSUPPORTED: &str = "per-SL data unsupported by this port";

/// What the job's ports' counters showed between its Prolog and its Epilog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CounterEvidence {
    /// No other job ran on the node meanwhile: the counters are this job's.
    pub alone: bool,
    /// The SL of the job's level (none: it ran on the baseline).
    pub sl: Option<u8>,
    pub ports: Vec<PortCounterEvidence>,
    /// When alone: bytes sent on other SLs than the level's and those of
    /// the node's own traffic, counted where the counters say how much
    /// (saturated or cleared ones are not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_level_bytes: Option<u64>,
    /// The SLs the mapping gives the node's own traffic (IPoIB, storage:
    /// `Mapping::sm_traffic_sls`), the job's own left out: what is sent
    /// there is not the job's to answer for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sm_traffic_sls: Vec<u8>,
    /// When alone: the bytes sent on `sm_traffic_sls`, apart from
    /// `off_level_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sm_traffic_bytes: Option<u64>,
}

/// The evidence of two readings of the same ports (a port read only once
/// is `unread` at the other end); bytes on `sm_traffic_sls` (the node's
/// own traffic's SLs) are counted apart from the off-level bytes.
pub fn evidence(
    before: &[PortReading],
    after: &[PortReading],
    sl: Option<u8>,
    alone: bool,
    sm_traffic_sls: &BTreeSet<u8>,
) -> CounterEvidence {
    let ports: Vec<PortCounterEvidence> = after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.port == a.port);
            let seen = |k: Kind| {
                CounterChange::of(k, b.and_then(|b| b.readings.get(&k)), a.readings.get(&k))
            };
            let (sent, received) = (seen(Kind::XmitDataSl), seen(Kind::RcvDataSl));
            let said = (sent == CounterChange::Unsupported
                && received == CounterChange::Unsupported)
                .then(|| PER_SL_UNSUPPORTED.to_owned());
            PortCounterEvidence {
                device: a.port.device.clone(),
                port: a.port.port,
                sent_bytes_per_sl: sent,
                received_bytes_per_sl: received,
                xmit_wait_ticks_per_vl: seen(Kind::VlXmitWait),
                read_by: a.read_by.clone(),
                said,
            }
        })
        .collect();
    let node_sls: Vec<u8> = sm_traffic_sls
        .iter()
        .copied()
        .filter(|s| Some(*s) != sl)
        .collect();
    let mut read_any = false;
    let (mut off, mut node) = (0u64, 0u64);
    for p in &ports {
        if let CounterChange::Moved(m) = &p.sent_bytes_per_sl {
            read_any = true;
            for (s, d) in m.iter().filter(|(s, _)| Some(**s) != sl) {
                let Delta::Count(n) = d else { continue };
                let total = if node_sls.contains(s) {
                    &mut node
                } else {
                    &mut off
                };
                *total = total.saturating_add(*n);
            }
        }
    }
    let counted = alone && read_any && sl.is_some();
    CounterEvidence {
        alone,
        sl,
        ports,
        off_level_bytes: counted.then_some(off),
        sm_traffic_bytes: (counted && !node_sls.is_empty()).then_some(node),
        sm_traffic_sls: node_sls,
    }
}

impl CounterEvidence {
    /// One line for the job's user and the log: what left on other SLs.
    pub fn off_level_words(&self, level: &str) -> Option<String> {
        let bytes = self.off_level_bytes.filter(|n| *n > 0)?;
        let sl = self.sl?;
        let sls: Vec<String> = self
            .ports
            .iter()
            .filter_map(|p| match &p.sent_bytes_per_sl {
                CounterChange::Moved(m) => Some(
                    m.keys()
                        .filter(move |s| **s != sl && !self.sm_traffic_sls.contains(s)),
                ),
                _ => None,
            })
            .flatten()
            .map(|s| format!("SL {s}"))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        Some(format!(
            "qoslane: {bytes} bytes of this job left on {} instead of level {level}'s SL {sl} \
             (the job ran alone on the node; an application setting such as UCX_IB_SL \
             overrides the level)",
            sls.join(", "),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(values: [(Kind, Reading); 3]) -> PortReading {
        PortReading {
            port: PortId {
                device: "mlx5_0".into(),
                port: 1,
            },
            readings: values.into_iter().collect(),
            read_by: None,
        }
    }

    fn with(i: usize, v: u64) -> [u64; 16] {
        let mut a = [0; 16];
        a[i] = v;
        a
    }

    #[test]
    fn deltas_are_counts_saturations_or_clears() {
        assert_eq!(delta(Kind::XmitDataSl, 10, 15), Delta::Count(20));
        assert_eq!(delta(Kind::XmitDataSl, 10, 0xffff_ffff), Delta::Saturated);
        assert_eq!(delta(Kind::VlXmitWait, 0, 0xffff), Delta::Saturated);
        assert_eq!(delta(Kind::VlXmitWait, 0, 500), Delta::Count(500));
        assert_eq!(delta(Kind::RcvDataSl, 9, 3), Delta::Cleared);
    }

    #[test]
    fn off_level_bytes_only_when_alone_and_counted() {
        let before = port([
            (Kind::XmitDataSl, Reading::Values([0; 16])),
            (Kind::RcvDataSl, Reading::Unsupported),
            (Kind::VlXmitWait, Reading::Values([0; 16])),
        ]);
        let mut sent = with(3, 100);
        sent[0] = 7;
        sent[5] = 0xffff_ffff;
        let after = port([
            (Kind::XmitDataSl, Reading::Values(sent)),
            (Kind::RcvDataSl, Reading::Unsupported),
            (Kind::VlXmitWait, Reading::Values(with(3, 500))),
        ]);
        let e = evidence(
            std::slice::from_ref(&before),
            std::slice::from_ref(&after),
            Some(3),
            true,
            &BTreeSet::new(),
        );
        assert_eq!(
            e.off_level_bytes,
            Some(28),
            "SL 0's 7 units; SL 5 saturated"
        );
        let p = &e.ports[0];
        assert_eq!(p.received_bytes_per_sl, CounterChange::Unsupported);
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(
            json["ports"][0]["sent_bytes_per_sl"]["moved"],
            serde_json::json!({"0": 28, "3": 400, "5": "saturated"})
        );
        assert_eq!(
            json["ports"][0]["xmit_wait_ticks_per_vl"]["moved"]["3"],
            500
        );
        assert_eq!(json["ports"][0]["received_bytes_per_sl"], "unsupported");
        assert!(
            e.off_level_words("low")
                .unwrap()
                .contains("28 bytes of this job left on SL 0, SL 5 instead of level low's SL 3")
        );
        let shared = evidence(&[before], &[after], Some(3), false, &BTreeSet::new());
        assert_eq!(shared.off_level_bytes, None, "shared: not the job's");
        assert_eq!(shared.off_level_words("low"), None);
    }

    #[test]
    fn a_port_read_once_is_unread() {
        let after = port([
            (Kind::XmitDataSl, Reading::Unread("deadline".into())),
            (Kind::RcvDataSl, Reading::Values([0; 16])),
            (Kind::VlXmitWait, Reading::Values([0; 16])),
        ]);
        let e = evidence(&[], &[after], Some(1), true, &BTreeSet::new());
        assert_eq!(
            e.ports[0].sent_bytes_per_sl,
            CounterChange::Unread("deadline".into())
        );
        assert_eq!(
            e.ports[0].received_bytes_per_sl,
            CounterChange::Unread("not read".into())
        );
        assert_eq!(e.off_level_bytes, None);
    }
}

/// One egress port's transmit wait per VL as read, by the fabric audit
/// (`wait.rs`) and `health`'s first hop, drawn by the audit's page (index =
/// VL 0..=15; `None`: not read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortWait {
    pub kind: NodeType,
    pub name: String,
    pub lid: u16,
    pub port: u32,
    pub ticks: Vec<Option<u64>>,
}

impl PortWait {
    /// All 16 VLs' ticks, when every one was read.
    pub fn values(&self) -> Option<[u64; 16]> {
        let read: Option<Vec<u64>> = self.ticks.iter().copied().collect();
        read?.try_into().ok()
    }
}
