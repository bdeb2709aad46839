//! A [`Reader`] that remembers: `fabric watch`'s reader. It passes every
//! read to the reader it wraps and keeps what came back; once told which
//! nodes changed ([`Memo::only`]), it answers the audit's reads of every
//! other node from what it kept and passes on only those of the nodes
//! named (their egress ports' PortInfo, SL2VL rows and VLArb; a switch's
//! forwarding table), plus whatever it never had (a port the last read
//! could not read, a port new in the topology). So a re-audit is the same
//! sweep ([`crate::fabric::sweep::sweep`]), the same judges and the same
//! verdict as a full audit: only where the facts come from differs.
//!
//! Bounded: it keeps one answer per (node, port) of the fabric read last,
//! each replaced when read again; a full read ([`Memo::all`]) starts the
//! store afresh, so a port that left the fabric is forgotten.
//!
//! The SA's path records (whether the SM assigns SLs per path) and the
//! ports' transmit wait are read again only in a full read: neither moves
//! with a switch's tables, and the verdict uses neither.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::deadline::Deadline;
use crate::error::Result;
use crate::fabric::counters::pma::{Kind, PortWait, Reading};
use crate::fabric::counters::wait::WaitPort;
use crate::fabric::read::reader::Reader;
use crate::fabric::tables::{
    EgressPort, EgressRead, FirstHop, PortId, PortIdentity, PortTables, Topology,
};

/// A GUID as `ibnetdiscover` prints it (`0x0002c90300001234`), or as the
/// SM plugin records it, as a number.
pub fn guid_value(s: &str) -> Option<u64> {
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u64::from_str_radix(hex, 16).ok()
}

/// What the next reads pass on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum MemoScope {
    /// Everything (a full audit): the store starts afresh.
    All,
    /// The nodes of these GUIDs, and these switch LIDs' forwarding tables.
    Only {
        guids: BTreeSet<u64>,
        /// Nodes whose kept ports are checked (PortInfo, one SL2VL row,
        /// VLArb) and read whole only when they differ.
        checked: BTreeSet<u64>,
        lids: BTreeSet<u16>,
    },
}

/// How a port is answered in a re-audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Read,
    Check,
    Keep,
}

/// The key of a port in the store.
fn key(p: &EgressPort) -> (u64, u32, u16) {
    (guid_value(&p.guid).unwrap_or(0), p.port, p.lid)
}

/// A sentinel read agrees with what was kept: the same PortInfo fields,
/// VLArb and SL2VL row of the in port read.
fn agrees(r: &EgressRead, kept: &EgressRead, first: Option<u32>) -> bool {
    let row = |e: &EgressRead| {
        e.rows
            .iter()
            .find(|(i, _)| first.is_none_or(|f| *i == f))
            .map(|(_, t)| *t)
    };
    r.active == kept.active
        && r.oper_vls == kept.oper_vls
        && r.vlarb == kept.vlarb
        && row(r) == row(kept)
}

/// The kept read holds the row of every in port asked (an Active port's;
/// a port not Active has none to hold).
fn covers(kept: &EgressRead, ins: &[u32]) -> bool {
    !kept.active || ins.iter().all(|i| kept.rows.iter().any(|(n, _)| n == i))
}

/// What was kept.
#[derive(Debug, Default)]
struct MemoStore {
    egress: HashMap<(u64, u32, u16), EgressRead>,
    /// The forwarding tables, read up to this top LID.
    top: Option<u16>,
    lft: HashMap<u16, Vec<u8>>,
    paths: HashMap<(u16, u16), u8>,
    waits: HashMap<(u16, u32), PortWait>,
}

/// What was passed on since [`Memo::counted`] was last asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passed {
    /// Egress ports read whole, checked by a sentinel read, and answered
    /// from the store (checked ones that agreed included).
    pub egress: usize,
    pub egress_checked: usize,
    pub egress_kept: usize,
    /// Switches whose forwarding table was read (and kept).
    pub forwarding: usize,
    pub forwarding_kept: usize,
}

/// The remembering reader (see the module's text).
pub struct Memo<R: Reader + ?Sized> {
    inner: Box<R>,
    scope: RefCell<MemoScope>,
    store: RefCell<MemoStore>,
    passed: RefCell<Passed>,
}

impl<R: Reader + ?Sized> std::fmt::Debug for Memo<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl<R: Reader + ?Sized> Memo<R> {
    pub fn new(inner: Box<R>) -> Self {
        Self {
            inner,
            scope: RefCell::new(MemoScope::All),
            store: RefCell::new(MemoStore::default()),
            passed: RefCell::new(Passed::default()),
        }
    }

    /// The next reads pass everything on and keep it (a full audit).
    pub fn all(&self) {
        *self.scope.borrow_mut() = MemoScope::All;
    }

    /// The next reads pass on the nodes of `guids` whole, check those of
    /// `checked` (PortInfo, one SL2VL row and VLArb per port, read whole
    /// when they differ from what was kept), read the forwarding tables
    /// of the switches among both (by `topo`'s LIDs), and answer the rest
    /// from the store.
    pub fn only(&self, guids: &BTreeSet<u64>, checked: &BTreeSet<u64>, topo: &Topology) {
        let lids = topo
            .ports
            .iter()
            .filter(|p| {
                guid_value(&p.end.guid).is_some_and(|g| guids.contains(&g) || checked.contains(&g))
            })
            .map(|p| p.end.lid)
            .collect();
        *self.scope.borrow_mut() = MemoScope::Only {
            guids: guids.clone(),
            checked: checked.clone(),
            lids,
        };
    }

    /// Whether the store holds a full read (a re-audit can start from it).
    pub fn primed(&self) -> bool {
        !self.store.borrow().egress.is_empty()
    }

    /// What was passed on and kept since last asked.
    pub fn counted(&self) -> Passed {
        std::mem::take(&mut *self.passed.borrow_mut())
    }

    fn is_all(&self) -> bool {
        *self.scope.borrow() == MemoScope::All
    }

    /// The egress read of `ports` (see the module's text): what is kept
    /// answered from the store, the sentinels checked, and the ports to
    /// read whole given to `read` (not called when there are none).
    fn egress_reading(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        deadline: &Deadline,
        read: impl FnOnce(&[EgressPort], &[Vec<u32>]) -> Vec<Result<EgressRead>>,
    ) -> Vec<Result<EgressRead>> {
        if self.is_all() {
            self.store.borrow_mut().egress.clear();
        }
        let how: Vec<How> = {
            let store = self.store.borrow();
            let scope = self.scope.borrow();
            ports
                .iter()
                .zip(ins)
                .map(|(p, ins)| {
                    let kept = store.egress.get(&key(p));
                    let g = guid_value(&p.guid);
                    match (&*scope, kept) {
                        (_, None) | (MemoScope::All, _) => How::Read,
                        // A pair a route takes now whose row was not kept
                        // (the sweep reads the routed pairs only).
                        (_, Some(k)) if !covers(k, ins) => How::Read,
                        (MemoScope::Only { guids, .. }, Some(_))
                            if g.is_none_or(|g| guids.contains(&g)) =>
                        {
                            How::Read
                        }
                        (MemoScope::Only { checked, .. }, Some(_))
                            if g.is_some_and(|g| checked.contains(&g)) =>
                        {
                            How::Check
                        }
                        (_, Some(_)) => How::Keep,
                    }
                })
                .collect()
        };
        // The sentinel: PortInfo, the first in port's SL2VL row and VLArb,
        // against what was kept; a port that differs is read whole.
        let check: Vec<usize> = (0..ports.len()).filter(|&i| how[i] == How::Check).collect();
        let mut how = how;
        if !check.is_empty() {
            let sub: Vec<EgressPort> = check.iter().map(|&i| ports[i].clone()).collect();
            let first: Vec<Vec<u32>> = check
                .iter()
                .map(|&i| ins[i].first().map(|&p| vec![p]).unwrap_or_default())
                .collect();
            let read = self.inner.egress(&sub, &first, deadline);
            let store = self.store.borrow();
            for ((&i, r), first) in check.iter().zip(read).zip(&first) {
                let same = match (r, store.egress.get(&key(&ports[i]))) {
                    (Ok(r), Some(k)) => agrees(&r, k, first.first().copied()),
                    _ => false,
                };
                how[i] = if same { How::Keep } else { How::Read };
            }
        }
        let ask: Vec<usize> = (0..ports.len()).filter(|&i| how[i] == How::Read).collect();
        let sub: Vec<EgressPort> = ask.iter().map(|&i| ports[i].clone()).collect();
        let sub_ins: Vec<Vec<u32>> = ask.iter().map(|&i| ins[i].clone()).collect();
        let read = if sub.is_empty() {
            Vec::new()
        } else {
            read(&sub, &sub_ins)
        };
        let mut store = self.store.borrow_mut();
        let mut out: Vec<Option<Result<EgressRead>>> = ports
            .iter()
            .zip(&how)
            .map(|(p, h)| match h {
                How::Keep => store.egress.get(&key(p)).cloned().map(Ok),
                _ => None,
            })
            .collect();
        for (&i, r) in ask.iter().zip(read) {
            match &r {
                Ok(got) => {
                    store.egress.insert(key(&ports[i]), got.clone());
                }
                Err(_) => {
                    store.egress.remove(&key(&ports[i]));
                }
            }
            out[i] = Some(r);
        }
        let mut passed = self.passed.borrow_mut();
        passed.egress += ask.len();
        passed.egress_checked += check.len();
        passed.egress_kept += ports.len() - ask.len();
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(crate::error::Error::Internal("memo: unread".into()))))
            .collect()
    }

    /// The path records kept (a full read starts afresh), and the indices
    /// of `pairs` to ask.
    fn paths_kept(&self, pairs: &[(u16, u16)]) -> (Vec<Option<Result<u8>>>, Vec<usize>) {
        let all = self.is_all();
        let mut store = self.store.borrow_mut();
        if all {
            store.paths.clear();
        }
        let out: Vec<Option<Result<u8>>> = pairs
            .iter()
            .map(|p| store.paths.get(p).copied().map(Ok))
            .collect();
        let ask = (0..pairs.len()).filter(|&i| out[i].is_none()).collect();
        (out, ask)
    }

    /// The answers to the pairs asked (`read`, in `ask`'s order) kept, and
    /// every pair's SL.
    fn paths_keep(
        &self,
        pairs: &[(u16, u16)],
        mut out: Vec<Option<Result<u8>>>,
        ask: &[usize],
        read: Vec<Result<u8>>,
    ) -> Vec<Result<u8>> {
        let mut store = self.store.borrow_mut();
        for (&i, r) in ask.iter().zip(read) {
            if let Ok(sl) = &r {
                store.paths.insert(pairs[i], *sl);
            }
            out[i] = Some(r);
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(crate::error::Error::Internal("memo: unread".into()))))
            .collect()
    }
}

impl<R: Reader + ?Sized> Reader for Memo<R> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn topology(
        &self,
        ibnetdiscover: &Path,
        via: Option<&PortId>,
        deadline: &Deadline,
    ) -> Result<Topology> {
        self.inner.topology(ibnetdiscover, via, deadline)
    }

    fn probe(&self, port: &PortId, deadline: &Deadline) -> Result<PortTables> {
        self.inner.probe(port, deadline)
    }

    fn first_hop(&self, port: &PortId, deadline: &Deadline) -> FirstHop {
        self.inner.first_hop(port, deadline)
    }

    fn first_hop_at(
        &self,
        port: &PortId,
        identity: &PortIdentity,
        deadline: &Deadline,
    ) -> (FirstHop, Option<u64>) {
        self.inner.first_hop_at(port, identity, deadline)
    }

    fn egress(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        deadline: &Deadline,
    ) -> Vec<Result<EgressRead>> {
        self.egress_reading(ports, ins, deadline, |sub, sub_ins| {
            self.inner.egress(sub, sub_ins, deadline)
        })
    }

    /// The path records not kept go to the wrapped reader in the same call
    /// as the egress ports it reads ([`Reader::egress_and_paths`]: in
    /// process, in flight beside them), as in a full audit.
    fn egress_and_paths(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        pairs: &[(u16, u16)],
        deadline: &Deadline,
    ) -> (Vec<Result<EgressRead>>, Vec<Result<u8>>) {
        let (kept, ask) = self.paths_kept(pairs);
        let asked: Vec<(u16, u16)> = ask.iter().map(|&i| pairs[i]).collect();
        let mut beside = None;
        let read = self.egress_reading(ports, ins, deadline, |sub, sub_ins| {
            let (read, paths) = self.inner.egress_and_paths(sub, sub_ins, &asked, deadline);
            beside = Some(paths);
            read
        });
        // No egress port read: the path records alone.
        let paths = match beside {
            Some(paths) => paths,
            None if asked.is_empty() => Vec::new(),
            None => self.inner.path_sls(&asked, deadline),
        };
        (read, self.paths_keep(pairs, kept, &ask, paths))
    }

    fn forwarding(&self, switches: &[u16], top: u16, deadline: &Deadline) -> Vec<Result<Vec<u8>>> {
        let all = self.is_all();
        let mut store = self.store.borrow_mut();
        if all || store.top != Some(top) {
            // Another top LID: every table is read to it again.
            store.lft.clear();
            store.top = Some(top);
        }
        let named = |lid: u16| match &*self.scope.borrow() {
            MemoScope::All => true,
            MemoScope::Only { lids, .. } => lids.contains(&lid),
        };
        let mut out: Vec<Option<Result<Vec<u8>>>> = switches
            .iter()
            .map(|&l| {
                (!named(l))
                    .then(|| store.lft.get(&l).cloned().map(Ok))
                    .flatten()
            })
            .collect();
        let ask: Vec<usize> = (0..switches.len()).filter(|&i| out[i].is_none()).collect();
        let lids: Vec<u16> = ask.iter().map(|&i| switches[i]).collect();
        let read = if lids.is_empty() {
            Vec::new()
        } else {
            self.inner.forwarding(&lids, top, deadline)
        };
        for (&i, r) in ask.iter().zip(read) {
            match &r {
                Ok(t) => {
                    store.lft.insert(switches[i], t.clone());
                }
                Err(_) => {
                    store.lft.remove(&switches[i]);
                }
            }
            out[i] = Some(r);
        }
        let mut passed = self.passed.borrow_mut();
        passed.forwarding += ask.len();
        passed.forwarding_kept += switches.len() - ask.len();
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(crate::error::Error::Internal("memo: unread".into()))))
            .collect()
    }

    fn path_sls(&self, pairs: &[(u16, u16)], deadline: &Deadline) -> Vec<Result<u8>> {
        let (kept, ask) = self.paths_kept(pairs);
        let asked: Vec<(u16, u16)> = ask.iter().map(|&i| pairs[i]).collect();
        let read = if asked.is_empty() {
            Vec::new()
        } else {
            self.inner.path_sls(&asked, deadline)
        };
        self.paths_keep(pairs, kept, &ask, read)
    }

    fn xmit_wait(&self, ports: &[WaitPort], deadline: &Deadline) -> (Vec<PortWait>, Vec<String>) {
        if self.is_all() {
            let (waits, unread) = self.inner.xmit_wait(ports, deadline);
            let mut store = self.store.borrow_mut();
            store.waits = waits.iter().map(|w| ((w.lid, w.port), w.clone())).collect();
            return (waits, unread);
        }
        let store = self.store.borrow();
        if store.waits.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let waits = ports
            .iter()
            .map(|p| {
                store
                    .waits
                    .get(&(p.lid, p.port))
                    .cloned()
                    .unwrap_or_else(|| PortWait {
                        kind: p.kind,
                        name: p.name.clone(),
                        lid: p.lid,
                        port: p.port,
                        ticks: vec![None; 16],
                    })
            })
            .collect();
        (waits, Vec::new())
    }

    fn port_counters(&self, asks: &[(&PortId, Kind)], deadline: &Deadline) -> Vec<Reading> {
        self.inner.port_counters(asks, deadline)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::fabric::tables::{DiscoveredPort, LinkEnd, NodeType, Sl2Vl, VlArbState, VlRange};

    /// A reader whose every answer says how often it was asked.
    #[derive(Default)]
    struct Counting {
        egress: Cell<usize>,
        lft: Cell<usize>,
        rows: Cell<u8>,
        /// Path records asked, and calls that asked them beside an egress read.
        paths: Cell<usize>,
        beside: Cell<usize>,
    }

    impl Reader for Counting {
        fn egress(
            &self,
            ports: &[EgressPort],
            ins: &[Vec<u32>],
            _d: &Deadline,
        ) -> Vec<Result<EgressRead>> {
            self.egress.set(self.egress.get() + ports.len());
            let vl = self.rows.get();
            let table = Sl2Vl::new([vl; 16]).unwrap();
            ins.iter()
                .map(|ins| {
                    let rows = if ins.is_empty() {
                        vec![(0, table)]
                    } else {
                        ins.iter().map(|&i| (i, table)).collect()
                    };
                    Ok(EgressRead {
                        active: true,
                        oper_vls: VlRange::from_code(4).unwrap(),
                        rows,
                        vlarb: VlArbState::Unavailable("not read".into()),
                    })
                })
                .collect()
        }
        fn path_sls(&self, pairs: &[(u16, u16)], _d: &Deadline) -> Vec<Result<u8>> {
            self.paths.set(self.paths.get() + pairs.len());
            pairs.iter().map(|&(s, _)| Ok((s % 16) as u8)).collect()
        }
        fn egress_and_paths(
            &self,
            ports: &[EgressPort],
            ins: &[Vec<u32>],
            pairs: &[(u16, u16)],
            d: &Deadline,
        ) -> (Vec<Result<EgressRead>>, Vec<Result<u8>>) {
            self.beside.set(self.beside.get() + 1);
            (self.egress(ports, ins, d), self.path_sls(pairs, d))
        }
        fn forwarding(&self, s: &[u16], top: u16, _d: &Deadline) -> Vec<Result<Vec<u8>>> {
            self.lft.set(self.lft.get() + s.len());
            s.iter()
                .map(|_| Ok(vec![self.rows.get(); usize::from(top) + 1]))
                .collect()
        }
    }

    fn end(kind: NodeType, guid: u64, lid: u16, port: u32) -> LinkEnd {
        LinkEnd {
            kind,
            lid,
            port,
            guid: format!("{guid:#018x}"),
            name: format!("n{guid}"),
        }
    }

    fn item(guid: u64, lid: u16, port: u32) -> EgressPort {
        EgressPort {
            kind: NodeType::Switch,
            guid: format!("{guid:#018x}"),
            name: format!("n{guid}"),
            lid,
            port,
        }
    }

    #[test]
    fn only_the_nodes_named_are_read_again_the_rest_is_kept() {
        let memo = Memo::new(Box::new(Counting::default()));
        let d = Deadline::after(std::time::Duration::from_secs(5));
        let ports = [item(0xa, 1, 1), item(0xa, 1, 2), item(0xb, 2, 1)];
        let ins = vec![Vec::new(); 3];
        let first = memo.egress(&ports, &ins, &d);
        assert_eq!(memo.inner.egress.get(), 3);
        assert!(memo.primed());
        memo.inner.rows.set(7);
        let topo = Topology {
            ports: vec![DiscoveredPort {
                end: end(NodeType::Switch, 0xb, 2, 1),
                remote: None,
            }],
        };
        memo.only(&[0xb].into(), &BTreeSet::new(), &topo);
        let again = memo.egress(&ports, &ins, &d);
        assert_eq!(memo.inner.egress.get(), 4, "only 0xb's port read");
        assert_eq!(again[0].as_ref().unwrap(), first[0].as_ref().unwrap());
        assert_eq!(
            again[2].as_ref().unwrap().rows[0].1,
            Sl2Vl::new([7; 16]).unwrap()
        );
        // forwarding: LID 2 (0xb) read again, LID 1 kept; another top: all
        memo.all();
        memo.forwarding(&[1, 2], 10, &d);
        memo.only(&[0xb].into(), &BTreeSet::new(), &topo);
        memo.forwarding(&[1, 2], 10, &d);
        assert_eq!(memo.inner.lft.get(), 3);
        memo.forwarding(&[1, 2], 11, &d);
        assert_eq!(memo.inner.lft.get(), 5, "a new top LID reads every table");
        let c = memo.counted();
        assert_eq!((c.egress, c.egress_kept), (4, 2));
        assert_eq!(memo.counted(), Passed::default());
    }

    #[test]
    fn path_records_not_kept_go_beside_the_egress_ports_read() {
        let memo = Memo::new(Box::new(Counting::default()));
        let d = Deadline::after(std::time::Duration::from_secs(5));
        let ports = [item(0xa, 1, 1), item(0xb, 2, 1)];
        let ins = vec![Vec::new(); 2];
        let (read, sls) = memo.egress_and_paths(&ports, &ins, &[(3, 4), (5, 6)], &d);
        assert_eq!((read.len(), memo.inner.egress.get()), (2, 2));
        assert_eq!(sls.into_iter().collect::<Result<Vec<_>>>().unwrap(), [3, 5]);
        assert_eq!((memo.inner.paths.get(), memo.inner.beside.get()), (2, 1));
        let topo = Topology {
            ports: vec![DiscoveredPort {
                end: end(NodeType::Switch, 0xb, 2, 1),
                remote: None,
            }],
        };
        // Nothing named: no egress port read; the new pair asked alone.
        memo.only(&BTreeSet::new(), &BTreeSet::new(), &topo);
        let (_, sls) = memo.egress_and_paths(&ports, &ins, &[(3, 4), (7, 8)], &d);
        assert_eq!(sls.into_iter().collect::<Result<Vec<_>>>().unwrap(), [3, 7]);
        assert_eq!(memo.inner.egress.get(), 2, "every port kept");
        assert_eq!((memo.inner.paths.get(), memo.inner.beside.get()), (3, 1));
        // 0xb named: its port read, the pair not kept asked in the same call.
        memo.only(&[0xb].into(), &BTreeSet::new(), &topo);
        memo.egress_and_paths(&ports, &ins, &[(3, 4), (9, 10)], &d);
        assert_eq!(memo.inner.egress.get(), 3, "0xb's port only");
        assert_eq!((memo.inner.paths.get(), memo.inner.beside.get()), (4, 2));
        // A full read asks every pair again, beside the whole read.
        memo.all();
        memo.egress_and_paths(&ports, &ins, &[(3, 4)], &d);
        assert_eq!((memo.inner.paths.get(), memo.inner.beside.get()), (5, 3));
    }

    #[test]
    fn a_port_never_read_is_read_whatever_the_scope() {
        let memo = Memo::new(Box::new(Counting::default()));
        let d = Deadline::after(std::time::Duration::from_secs(5));
        memo.egress(&[item(0xa, 1, 1)], &[Vec::new()], &d);
        memo.only(&BTreeSet::new(), &BTreeSet::new(), &Topology::default());
        memo.egress(
            &[item(0xa, 1, 1), item(0xc, 3, 1)],
            &[Vec::new(), Vec::new()],
            &d,
        );
        assert_eq!(memo.inner.egress.get(), 2, "the new port only");
    }

    #[test]
    fn a_checked_node_is_read_whole_only_where_the_sentinel_differs() {
        let memo = Memo::new(Box::new(Counting::default()));
        let d = Deadline::after(std::time::Duration::from_secs(5));
        let ports = [item(0xa, 1, 1), item(0xa, 1, 2)];
        let ins = vec![vec![2, 3], vec![1, 3]];
        memo.egress(&ports, &ins, &d);
        assert_eq!(memo.inner.egress.get(), 2);
        memo.counted();
        memo.only(&BTreeSet::new(), &[0xa].into(), &Topology::default());
        memo.egress(&ports, &ins, &d);
        assert_eq!(memo.inner.egress.get(), 4, "two sentinel reads, both agree");
        let c = memo.counted();
        assert_eq!((c.egress, c.egress_checked, c.egress_kept), (0, 2, 2));
        memo.inner.rows.set(5);
        let got = memo.egress(&ports, &ins, &d);
        assert_eq!(
            memo.inner.egress.get(),
            8,
            "two sentinels, then both read whole"
        );
        assert_eq!(
            got[1].as_ref().unwrap().rows[0].1,
            Sl2Vl::new([5; 16]).unwrap()
        );
        let c = memo.counted();
        assert_eq!((c.egress, c.egress_checked, c.egress_kept), (2, 2, 0));
    }

    /// The sweep reads the rows of the pairs some route takes: a pair a
    /// route starts taking (new forwarding tables) is read, though its
    /// node was not named; one no route takes any more is kept.
    #[test]
    fn a_pair_a_route_starts_taking_is_read_though_its_node_is_kept() {
        let memo = Memo::new(Box::new(Counting::default()));
        let d = Deadline::after(std::time::Duration::from_secs(5));
        let ports = [item(0xa, 1, 1), item(0xa, 1, 2)];
        memo.egress(&ports, &[vec![2], vec![1]], &d);
        memo.only(&BTreeSet::new(), &BTreeSet::new(), &Topology::default());
        let got = memo.egress(&ports, &[vec![2, 3], vec![1]], &d);
        assert_eq!(memo.inner.egress.get(), 3, "port 1 read again, port 2 kept");
        let rows: Vec<u32> = got[0].as_ref().unwrap().rows.iter().map(|r| r.0).collect();
        assert_eq!(rows, [2, 3]);
        memo.egress(&ports, &[vec![3], vec![1]], &d);
        assert_eq!(memo.inner.egress.get(), 3, "a pair left: nothing to read");
    }

    #[test]
    fn guids_read_as_numbers() {
        assert_eq!(
            guid_value("0x0002c90300001234"),
            Some(0x0002_c903_0000_1234)
        );
        assert_eq!(guid_value("0002c90300001234"), None);
    }
}
