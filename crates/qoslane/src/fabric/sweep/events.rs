//! The OpenSM event plugin's records (`smplugin/`, `libqoslane_sm.so`), pure:
//! the 64-byte record decoded and checked ([`decode`], the format of
//! smplugin/README.md "SmRecord format (version 1)"), and what `qoslane
//! fabric watch` makes of a stream of them ([`Tracker`]): a full audit, a
//! re-audit of the switches named, or nothing yet.
//!
//! What each record asks for (smplugin/README.md "What a reader does with
//! them", and qoslane's policy on what the README leaves to it):
//!
//! - `START`, `OVERFLOW`, a `dropped` count larger than the last one seen,
//!   a sequence number missing (a gap still open one round later), a
//!   stretch of bytes that does not check, another format, or a new
//!   `instance` → a **full audit** (something happened that was not told);
//! - `LFT_CHANGE` names a switch: re-read it (its LFT, SL2VL, VLArb) and
//!   judge again the paths through it;
//! - `TRAP` (a port changed state): the sweep that follows may change the
//!   links, so the topology is read again (walked in process, else one
//!   `ibnetdiscover`) and the
//!   nodes whose links changed are re-read too;
//! - `SUBNET_UP`, `UCAST_ROUTING_DONE`: the SM finished its sweep: act on
//!   what was gathered since the last act. A heavy sweep that rerouted
//!   (`LFT_CHANGE`) reads the topology again too (a relinked port's sweep
//!   comes with no trap of its own on the rig). **A heavy sweep that no
//!   `TRAP` started and that changed no forwarding table** (a SIGHUP,
//!   which may reload the QoS options and rewrite every port's tables;
//!   OpenSM's own heavy sweep) → a full audit: OpenSM
//!   names no port whose SL2VL or VLArb it set, and re-reading every
//!   switch's QoS tables is most of a full audit's SMPs anyway (the switch
//!   ports' SL2VL rows are 94% of them on the 1,008-HCA tree);
//! - `STOP`, `STATE_CHANGE`, `SA_DB_DUMPED`, `HEAVY_SWEEP_START`: nothing
//!   by themselves; a kind this reader does not know is skipped.

use std::collections::BTreeSet;

/// `Q L S M` as the record's first four bytes.
pub const MAGIC: u32 = 0x4d53_4c51;
/// The one record format this reader knows.
pub const FORMAT: u16 = 1;
/// Bytes per record.
pub const SIZE: usize = 64;
/// Holes (sequence numbers not yet seen) kept while waiting for a late
/// write; more is a full audit.
pub const MAX_HOLES: usize = 4096;
/// Switches named before the batch is a full audit anyway.
pub const MAX_NAMED: usize = 65_536;

/// The kinds of record (smplugin/src/record.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmKind {
    SubnetUp,
    HeavySweepStart,
    HeavySweepDone,
    UcastRoutingDone,
    StateChange,
    LftChange,
    SaDbDumped,
    Trap,
    Start,
    Overflow,
    Stop,
    /// A kind a later plugin writes: skipped.
    Unknown(u16),
}

impl SmKind {
    pub fn of(n: u16) -> Self {
        match n {
            1 => Self::SubnetUp,
            2 => Self::HeavySweepStart,
            3 => Self::HeavySweepDone,
            4 => Self::UcastRoutingDone,
            5 => Self::StateChange,
            6 => Self::LftChange,
            7 => Self::SaDbDumped,
            8 => Self::Trap,
            64 => Self::Start,
            65 => Self::Overflow,
            66 => Self::Stop,
            n => Self::Unknown(n),
        }
    }
}

/// One record, decoded and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmRecord {
    pub kind: SmKind,
    pub seq: u64,
    pub instance: u64,
    pub time_ns: u64,
    pub guid: u64,
    pub block: u32,
    pub lft_top: u16,
    pub flags: u8,
    pub port: u8,
    pub dropped: u64,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// FNV-1a (32 bits) of bytes 0..60.
pub fn check(b: &[u8]) -> u32 {
    b[..SIZE - 4].iter().fold(2_166_136_261u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(16_777_619)
    })
}

/// Why 64 bytes are no record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    Short,
    Magic,
    Format(u16),
    Check,
}

/// One record from 64 bytes: magic, format and check verified.
pub fn decode(b: &[u8]) -> Result<SmRecord, Bad> {
    if b.len() < SIZE {
        return Err(Bad::Short);
    }
    if le32(b, 0) != MAGIC {
        return Err(Bad::Magic);
    }
    if le32(b, 60) != check(b) {
        return Err(Bad::Check);
    }
    let format = le16(b, 4);
    if format != FORMAT {
        return Err(Bad::Format(format));
    }
    Ok(SmRecord {
        kind: SmKind::of(le16(b, 6)),
        seq: le64(b, 8),
        instance: le64(b, 16),
        time_ns: le64(b, 24),
        guid: le64(b, 32),
        block: le32(b, 40),
        lft_top: le16(b, 44),
        flags: b[46],
        port: b[47],
        dropped: le64(b, 48),
    })
}

/// The records of a stretch of bytes read from a spool file, in file
/// order, and how many stretches did not check (each skipped to the next
/// offset where a record checks: a torn write, garbage).
pub fn decode_all(bytes: &[u8]) -> (Vec<SmRecord>, usize) {
    let mut out = Vec::with_capacity(bytes.len() / SIZE);
    let mut bad = 0;
    let mut at = 0;
    let mut in_bad = false;
    while at + SIZE <= bytes.len() {
        if let Ok(r) = decode(&bytes[at..at + SIZE]) {
            out.push(r);
            at += SIZE;
            in_bad = false;
        } else {
            if !in_bad {
                bad += 1;
                in_bad = true;
            }
            at += 1;
        }
    }
    if at < bytes.len() && !in_bad {
        // A tail shorter than a record: a write under way, or torn.
        bad += 1;
    }
    (out, bad)
}

/// Why a full audit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The watcher started: nothing is known.
    Startup,
    /// The plugin was loaded (the SM started or restarted).
    Start,
    /// Another plugin instance than the one followed.
    NewInstance,
    /// The spool was full: records were dropped.
    Overflow,
    /// The plugin counts more dropped events than before.
    Dropped { before: u64, now: u64 },
    /// Sequence numbers never seen.
    Gap { missing: u64 },
    /// Bytes that do not check (or another format).
    BadRecords(usize),
    /// The spool could not be taken (refused, or an I/O error): what
    /// happened meanwhile is unknown.
    Unreadable,
    /// A heavy sweep no trap started: QoS tables may be rewritten anywhere.
    UntoldSweep,
    /// More switches named than the bound (or the file was larger than
    /// what is read at once).
    TooMuch,
    /// `--full-every` passed since the last full audit.
    Timer,
    /// The last audit failed: the next is whole.
    Failed,
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Startup => f.write_str("the watcher started"),
            Self::Start => f.write_str("the SM (re)started: START"),
            Self::NewInstance => f.write_str("records of another plugin instance"),
            Self::Overflow => f.write_str("the spool was full: OVERFLOW"),
            Self::Dropped { before, now } => {
                write!(f, "the plugin dropped events ({before} -> {now})")
            }
            Self::Gap { missing } => write!(f, "{missing} sequence numbers missing"),
            Self::BadRecords(n) => write!(f, "{n} stretches of the spool did not check"),
            Self::Unreadable => f.write_str("the spool could not be read"),
            Self::UntoldSweep => {
                f.write_str("a heavy sweep no trap started (SIGHUP, the SM's own)")
            }
            Self::TooMuch => f.write_str("more changes than the watcher keeps"),
            Self::Timer => f.write_str("--full-every passed"),
            Self::Failed => f.write_str("the last audit failed"),
        }
    }
}

/// What to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Full(Why),
    /// Re-read these switches (node GUIDs); `topology`: read the topology
    /// again (a trap was seen) and re-read the nodes whose links changed.
    Switches {
        guids: BTreeSet<u64>,
        topology: bool,
    },
}

/// What a batch of records asked for, until it is acted on.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub full: Option<Why>,
    pub named: BTreeSet<u64>,
    pub trap: bool,
    pub heavy: bool,
    /// The sweep ended (SUBNET_UP, UCAST_ROUTING_DONE): act now.
    pub done: bool,
    /// The SM's time of the first record of the batch (what the latency
    /// is measured from) and of the sweep's end.
    pub first_ns: Option<u64>,
    pub done_ns: Option<u64>,
    pub records: u64,
}

impl Batch {
    fn is_empty(&self) -> bool {
        // A trap alone waits for its sweep.
        self.full.is_none() && self.named.is_empty() && !self.heavy
    }

    fn full(&mut self, why: Why) {
        if self.full.is_none() {
            self.full = Some(why);
        }
    }
}

/// The stream followed: one plugin instance, its sequence numbers, its
/// drops; what the records since the last act asked for.
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    instance: Option<u64>,
    /// The highest sequence number seen of the instance.
    high: u64,
    /// Numbers below `high` not seen yet: a write racing the reader's
    /// rename may land in the file taken next round.
    holes: BTreeSet<u64>,
    /// Holes already open at the end of the previous round.
    old_holes: BTreeSet<u64>,
    dropped: u64,
    /// A trap came after the last sweep started: the next sweep is its
    /// (it may come in the next batch).
    trap_unswept: bool,
    pending: Batch,
}

impl Tracker {
    /// A tracker that knows nothing: its first act is a full audit.
    pub fn new() -> Self {
        let mut t = Self::default();
        t.pending.full(Why::Startup);
        t
    }

    pub fn pending(&self) -> &Batch {
        &self.pending
    }

    /// The next act is a full audit (the first reason given stays).
    pub fn insist(&mut self, why: Why) {
        self.pending.full(why);
    }

    /// Feeds one round's records (one read of the spool) and the count
    /// of stretches that did not check.
    pub fn feed(&mut self, records: &[SmRecord], bad: usize) {
        if bad > 0 {
            self.pending.full(Why::BadRecords(bad));
        }
        for r in records {
            self.record(r);
        }
        // A hole open at the end of the previous round and still open
        // now is a lost event.
        let lost = self.old_holes.intersection(&self.holes).count();
        if lost > 0 {
            self.pending.full(Why::Gap {
                missing: u64::try_from(lost).unwrap_or(u64::MAX),
            });
            for h in &self.old_holes {
                self.holes.remove(h);
            }
        }
        self.old_holes.clone_from(&self.holes);
    }

    fn record(&mut self, r: &SmRecord) {
        if matches!(r.kind, SmKind::Unknown(_)) {
            self.sequence(r);
            return;
        }
        self.pending.records += 1;
        self.pending.first_ns.get_or_insert(r.time_ns);
        match r.kind {
            SmKind::Start => {
                // Nothing before it is known: a new stream.
                self.instance = Some(r.instance);
                self.high = r.seq;
                self.holes.clear();
                self.old_holes.clear();
                self.dropped = r.dropped;
                self.pending.full(Why::Start);
                return;
            }
            SmKind::Overflow => self.pending.full(Why::Overflow),
            SmKind::LftChange => {
                if self.pending.named.len() >= MAX_NAMED {
                    self.pending.full(Why::TooMuch);
                } else {
                    self.pending.named.insert(r.guid);
                }
            }
            SmKind::Trap => {
                self.pending.trap = true;
                self.trap_unswept = true;
            }
            SmKind::HeavySweepStart => {
                self.pending.heavy = true;
                self.trap_unswept = false;
            }
            SmKind::HeavySweepDone => self.pending.heavy = true,
            SmKind::SubnetUp | SmKind::UcastRoutingDone => {
                self.pending.heavy = true;
                self.pending.done = true;
                self.pending.done_ns = Some(r.time_ns);
            }
            SmKind::StateChange | SmKind::SaDbDumped | SmKind::Stop | SmKind::Unknown(_) => {}
        }
        self.sequence(r);
    }

    /// The instance, the sequence numbers and the drop count of `r`.
    fn sequence(&mut self, r: &SmRecord) {
        if self.instance != Some(r.instance) {
            if self.instance.is_some() {
                self.pending.full(Why::NewInstance);
            } else {
                // The first record seen since the watcher started: the
                // startup's full audit covers what came before.
                self.pending.full(Why::Startup);
            }
            self.instance = Some(r.instance);
            self.high = r.seq;
            self.holes.clear();
            self.old_holes.clear();
            self.dropped = r.dropped;
            return;
        }
        if r.dropped > self.dropped {
            self.pending.full(Why::Dropped {
                before: self.dropped,
                now: r.dropped,
            });
            self.dropped = r.dropped;
        }
        if r.seq > self.high {
            let skipped = r.seq - self.high - 1;
            if usize::try_from(skipped).map_or(true, |n| n + self.holes.len() > MAX_HOLES) {
                self.pending.full(Why::Gap { missing: skipped });
            } else {
                self.holes.extend(self.high + 1..r.seq);
            }
            self.high = r.seq;
        } else {
            self.holes.remove(&r.seq);
        }
    }

    /// Whether to act now: the sweep ended, or something came and nothing
    /// more for `quiet_for` (nanoseconds since the last round that brought
    /// records, measured by the caller).
    pub fn due(&self, quiet: bool) -> bool {
        !self.pending.is_empty() && (self.pending.done || quiet)
    }

    /// What the batch asks for, and a fresh batch (the stream followed is
    /// kept).
    pub fn take(&mut self) -> (Action, Batch) {
        let p = std::mem::take(&mut self.pending);
        // A trap after the last sweep started explains the sweep to come.
        self.pending.trap = self.trap_unswept;
        let action = if let Some(why) = p.full.clone() {
            Action::Full(why)
        } else if p.heavy && !p.trap && p.named.is_empty() {
            Action::Full(Why::UntoldSweep)
        } else {
            Action::Switches {
                guids: p.named.clone(),
                topology: p.trap || p.heavy,
            }
        };
        (action, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INST: u64 = 0xfeed_0000_0000_0001;

    fn encode(kind: u16, seq: u64, instance: u64, guid: u64, dropped: u64) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&FORMAT.to_le_bytes());
        b[6..8].copy_from_slice(&kind.to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&instance.to_le_bytes());
        b[24..32].copy_from_slice(&(1_000 + seq).to_le_bytes());
        b[32..40].copy_from_slice(&guid.to_le_bytes());
        b[40..44].copy_from_slice(&7u32.to_le_bytes());
        b[46] = 2;
        b[48..56].copy_from_slice(&dropped.to_le_bytes());
        let c = check(&b);
        b[60..64].copy_from_slice(&c.to_le_bytes());
        b
    }

    fn rec(kind: u16, seq: u64) -> SmRecord {
        decode(&encode(kind, seq, INST, 0, 0)).unwrap()
    }

    fn lft(seq: u64, guid: u64) -> SmRecord {
        decode(&encode(6, seq, INST, guid, 0)).unwrap()
    }

    /// A tracker that followed INST up to seq 1 and acted.
    fn following() -> Tracker {
        let mut t = Tracker::new();
        t.feed(&[rec(64, 1)], 0);
        let (a, _) = t.take();
        assert_eq!(a, Action::Full(Why::Startup), "the first reason stays");
        t
    }

    #[test]
    fn a_record_decodes_field_for_field() {
        let b = encode(6, 42, INST, 0x0002_c903_0000_1234, 3);
        let r = decode(&b).unwrap();
        assert_eq!(r.kind, SmKind::LftChange);
        assert_eq!(
            (
                r.seq, r.instance, r.time_ns, r.guid, r.block, r.flags, r.dropped
            ),
            (42, INST, 1_042, 0x0002_c903_0000_1234, 7, 2, 3)
        );
    }

    #[test]
    fn the_check_is_the_plugins_fnv1a() {
        // FNV-1a of 60 zero bytes, as smplugin/src/record.h computes it.
        let h = (0..60).fold(2_166_136_261u32, |h, _| h.wrapping_mul(16_777_619));
        assert_eq!(check(&[0u8; SIZE]), h);
    }

    #[test]
    fn torn_garbage_and_other_formats_do_not_decode() {
        let b = encode(1, 1, INST, 0, 0);
        assert_eq!(decode(&b[..40]), Err(Bad::Short));
        let mut flipped = b;
        flipped[20] ^= 1;
        assert_eq!(decode(&flipped), Err(Bad::Check));
        let mut magic = b;
        magic[0] = b'X';
        assert_eq!(decode(&magic), Err(Bad::Magic));
        let mut v2 = b;
        v2[4] = 2;
        let c = check(&v2);
        v2[60..64].copy_from_slice(&c.to_le_bytes());
        assert_eq!(decode(&v2), Err(Bad::Format(2)));
    }

    #[test]
    fn decode_all_skips_garbage_to_the_next_record() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&encode(64, 1, INST, 0, 0));
        bytes.extend_from_slice(b"garbage that is not a record!"); // 29 bytes
        bytes.extend_from_slice(&encode(6, 2, INST, 9, 0));
        bytes.extend_from_slice(&encode(1, 3, INST, 0, 0)[..30]); // torn tail
        let (recs, bad) = decode_all(&bytes);
        assert_eq!(recs.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(bad, 2, "the garbage and the torn tail");
    }

    #[test]
    fn the_first_act_is_a_full_audit() {
        let mut t = Tracker::new();
        assert!(t.due(true));
        assert_eq!(t.take().0, Action::Full(Why::Startup));
        // the first record of a running SM (no START seen): full too
        let mut t = Tracker::new();
        t.take();
        t.feed(&[lft(10, 5), rec(1, 11)], 0);
        assert_eq!(t.take().0, Action::Full(Why::Startup));
    }

    #[test]
    fn a_trap_driven_sweep_names_its_switches() {
        let mut t = following();
        t.feed(
            &[rec(8, 2), rec(3, 3), lft(4, 0xa), lft(5, 0xb), lft(6, 0xa)],
            0,
        );
        assert!(!t.due(false), "the sweep has not ended");
        t.feed(&[rec(4, 7), rec(1, 8)], 0);
        assert!(t.due(false));
        let (a, p) = t.take();
        assert_eq!(
            a,
            Action::Switches {
                guids: [0xa, 0xb].into(),
                topology: true
            }
        );
        assert_eq!(p.first_ns, Some(1_002));
        assert_eq!(p.done_ns, Some(1_008));
        assert!(!t.due(true), "a fresh batch");
    }

    #[test]
    fn lft_changes_without_an_end_act_after_a_quiet_period() {
        let mut t = following();
        t.feed(&[rec(8, 2), lft(3, 0xa)], 0);
        assert!(!t.due(false));
        assert!(t.due(true));
        assert!(matches!(t.take().0, Action::Switches { .. }));
    }

    #[test]
    fn a_sweep_no_trap_started_is_a_full_audit() {
        let mut t = following();
        t.feed(&[rec(2, 2), rec(3, 3), rec(4, 4), rec(1, 5)], 0);
        assert_eq!(t.take().0, Action::Full(Why::UntoldSweep));
    }

    #[test]
    fn start_overflow_drops_bad_bytes_and_new_instances_are_full_audits() {
        let mut t = following();
        t.feed(&[rec(65, 2)], 0);
        assert_eq!(t.take().0, Action::Full(Why::Overflow));

        let mut t = following();
        t.feed(&[decode(&encode(8, 2, INST, 0, 5)).unwrap()], 0);
        assert_eq!(t.take().0, Action::Full(Why::Dropped { before: 0, now: 5 }));

        let mut t = following();
        t.feed(&[rec(8, 2)], 1);
        assert_eq!(t.take().0, Action::Full(Why::BadRecords(1)));

        let mut t = following();
        t.feed(&[decode(&encode(8, 1, INST + 1, 0, 0)).unwrap()], 0);
        assert_eq!(t.take().0, Action::Full(Why::NewInstance));

        let mut t = following();
        t.feed(
            &[rec(66, 2), decode(&encode(64, 1, INST + 1, 0, 0)).unwrap()],
            0,
        );
        assert_eq!(t.take().0, Action::Full(Why::Start));
    }

    #[test]
    fn a_late_record_closes_its_hole_a_lost_one_is_a_gap() {
        // seq 3 written after 4 (two SM threads), landing in the next file
        let mut t = following();
        t.feed(&[rec(8, 2), lft(4, 0xa)], 0);
        t.feed(&[lft(3, 0xb), rec(1, 5)], 0);
        assert_eq!(
            t.take().0,
            Action::Switches {
                guids: [0xa, 0xb].into(),
                topology: true
            }
        );
        // seq 7 never comes: a gap, once a round has passed
        t.feed(&[rec(8, 6), lft(8, 0xa)], 0);
        t.feed(&[rec(1, 9)], 0);
        assert_eq!(t.take().0, Action::Full(Why::Gap { missing: 1 }));
        // a jump past the bound is a gap at once
        t.feed(&[rec(8, 10 + MAX_HOLES as u64 + 5)], 0);
        assert!(matches!(t.take().0, Action::Full(Why::Gap { .. })));
    }

    #[test]
    fn a_trap_explains_the_sweep_that_follows_in_the_next_batch() {
        let mut t = following();
        // unlink: trap, sweep, done; the relink's trap before the act
        t.feed(
            &[rec(8, 2), rec(2, 3), lft(4, 0xa), rec(1, 5), rec(8, 6)],
            0,
        );
        assert!(matches!(t.take().0, Action::Switches { .. }));
        // the relink's sweep, in the next batch: still trap-driven
        t.feed(&[rec(2, 7), lft(8, 0xb), rec(1, 9)], 0);
        assert_eq!(
            t.take().0,
            Action::Switches {
                guids: [0xb].into(),
                topology: true
            }
        );
        // and the sweep after that, with no trap: a full audit
        t.feed(&[rec(2, 10), rec(1, 11)], 0);
        assert_eq!(t.take().0, Action::Full(Why::UntoldSweep));
    }

    #[test]
    fn an_unknown_kind_is_skipped_but_counted_in_the_sequence() {
        let mut t = following();
        t.feed(&[rec(8, 2), rec(99, 3), lft(4, 0xc), rec(1, 5)], 0);
        assert_eq!(
            t.take().0,
            Action::Switches {
                guids: [0xc].into(),
                topology: true
            }
        );
    }
}
