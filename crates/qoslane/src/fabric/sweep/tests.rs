//! The sweep again on what the last one judged: the same levels, findings
//! and deadlock verdicts as a fresh sweep, judging again only what changed.

use std::cell::RefCell;
use std::collections::HashMap;

use super::*;
use crate::error::Result;
use crate::fabric::read::parse::parse_topology;
use crate::fabric::tables::{Sl2Vl, VlArbState, VlRange};
use crate::mapping::validate_str;

/// Two leaves (LIDs 2, 3) of two HCAs each (ports 1, 2; LIDs 10–13), one
/// spine (LID 1; port 1 to leaf 2, port 2 to leaf 3; the leaves' port 3).
const TOPO: &str = "\
SW 2 1 0x0000000000000002 4x EDR - CA 10 1 0x0000000000000010 ( 'leafA' - 'node10 HCA-1' )
CA 10 1 0x0000000000000010 4x EDR - SW 2 1 0x0000000000000002 ( 'node10 HCA-1' - 'leafA' )
SW 2 2 0x0000000000000002 4x EDR - CA 11 1 0x0000000000000011 ( 'leafA' - 'node11 HCA-1' )
CA 11 1 0x0000000000000011 4x EDR - SW 2 2 0x0000000000000002 ( 'node11 HCA-1' - 'leafA' )
SW 3 1 0x0000000000000003 4x EDR - CA 12 1 0x0000000000000012 ( 'leafB' - 'node12 HCA-1' )
CA 12 1 0x0000000000000012 4x EDR - SW 3 1 0x0000000000000003 ( 'node12 HCA-1' - 'leafB' )
SW 3 2 0x0000000000000003 4x EDR - CA 13 1 0x0000000000000013 ( 'leafB' - 'node13 HCA-1' )
CA 13 1 0x0000000000000013 4x EDR - SW 3 2 0x0000000000000003 ( 'node13 HCA-1' - 'leafB' )
SW 2 3 0x0000000000000002 4x EDR - SW 1 1 0x0000000000000001 ( 'leafA' - 'spine' )
SW 1 1 0x0000000000000001 4x EDR - SW 2 3 0x0000000000000002 ( 'spine' - 'leafA' )
SW 3 3 0x0000000000000003 4x EDR - SW 1 2 0x0000000000000001 ( 'leafB' - 'spine' )
SW 1 2 0x0000000000000001 4x EDR - SW 3 3 0x0000000000000003 ( 'spine' - 'leafB' )
";

const MAPPING: &str = "\
default_level: normal
levels:
  - name: high
    qos: [high]
    service_level: 3
    virtual_lane: 3
  - name: normal
    qos: [normal]
    service_level: 0
    virtual_lane: 0
";

/// Every table from two maps: (LID, port, in port) → an SL2VL row other
/// than the identity, LID → a forwarding table other than up/down's.
#[derive(Default)]
struct Tables {
    rows: RefCell<HashMap<(u16, u32, u32), Sl2Vl>>,
    lfts: RefCell<HashMap<u16, Vec<u8>>>,
}

fn identity() -> Sl2Vl {
    Sl2Vl::new(std::array::from_fn(|sl| u8::try_from(sl % 8).unwrap())).unwrap()
}

impl Reader for Tables {
    fn egress(
        &self,
        ports: &[EgressPort],
        ins: &[Vec<u32>],
        _d: &Deadline,
    ) -> Vec<Result<EgressRead>> {
        let rows = self.rows.borrow();
        ports
            .iter()
            .zip(ins)
            .map(|(p, ins)| {
                let ins = if ins.is_empty() { vec![0] } else { ins.clone() };
                Ok(EgressRead {
                    active: true,
                    oper_vls: VlRange::from_code(4).unwrap(),
                    rows: ins
                        .iter()
                        .map(|&i| {
                            (
                                i,
                                rows.get(&(p.lid, p.port, i))
                                    .copied()
                                    .unwrap_or_else(identity),
                            )
                        })
                        .collect(),
                    vlarb: VlArbState::Unavailable("not read".into()),
                })
            })
            .collect()
    }

    fn forwarding(&self, switches: &[u16], top: u16, _d: &Deadline) -> Vec<Result<Vec<u8>>> {
        let lfts = self.lfts.borrow();
        switches
            .iter()
            .map(|&s| {
                let mut t = vec![NO_PORT; usize::from(top) + 1];
                for (lid, out) in t.iter_mut().enumerate().skip(10).take(4) {
                    let leaf = if lid < 12 { 2 } else { 3 };
                    *out = match s {
                        1 => leaf - 1,
                        _ if s == u16::from(leaf) => u8::try_from(1 + (lid - 10) % 2).unwrap(),
                        _ => 3,
                    };
                }
                Ok(lfts.get(&s).cloned().unwrap_or(t))
            })
            .collect()
    }
}

const NO_PORT: u8 = crate::fabric::judge::deadlock::NO_PORT;

/// What a verdict is made of, as text: the levels, each port's groups, the
/// deadlock verdicts.
fn judged(s: &Sweep) -> String {
    let ports: Vec<String> = s.levels.iter().map(|l| format!("{:?}", l.ports)).collect();
    format!(
        "{}\n{ports:?}\n{}",
        serde_json::to_string(&s.levels).unwrap(),
        serde_json::to_string(&s.deadlock.levels).unwrap()
    )
}

#[test]
fn a_sweep_again_judges_only_what_changed_and_gives_a_fresh_sweeps_verdict() {
    let topo = parse_topology(TOPO).unwrap();
    let mapping = validate_str(MAPPING).mapping.unwrap();
    let reader = Tables::default();
    let d = Deadline::after(std::time::Duration::from_secs(5));
    let mut kept = Judged::default();
    let again = |kept: &mut Judged| sweep_again(&topo, &reader, &mapping, 1, &d, kept);
    let fresh = || sweep(&topo, &reader, &mapping, 1, &d);

    let first = again(&mut kept);
    assert_eq!(judged(&first), judged(&fresh()));
    assert_eq!(first.cost.ports_judged, 12, "every port, nothing kept");
    assert!(!first.deadlock.kept);
    assert!(first.deadlock.levels.iter().all(|l| l.safety.is_some()));

    // Nothing changed: nothing judged again.
    let same = again(&mut kept);
    assert_eq!(judged(&same), judged(&first));
    assert_eq!(same.cost.ports_judged, 0);
    assert!(same.deadlock.kept);

    // leafA's uplink drops SL 3 from in port 1: that port judged again,
    // the level not carried there, the deadlock check run again (a row
    // of a route changed).
    let mut row = *identity().as_array();
    row[3] = Sl2Vl::VL15;
    reader
        .rows
        .borrow_mut()
        .insert((2, 3, 1), Sl2Vl::new(row).unwrap());
    let dropped = again(&mut kept);
    assert_eq!(judged(&dropped), judged(&fresh()));
    assert_eq!(dropped.cost.ports_judged, 1);
    assert!(!dropped.deadlock.kept);
    assert!(!dropped.levels[0].carried() && dropped.levels[1].carried());

    // A forwarding table changed alone: the one port whose in ports a
    // route no longer takes judged again (the pairs read are the routed
    // ones), the deadlock check run again.
    let mut t = reader.forwarding(&[1], 13, &d).remove(0).unwrap();
    t[10] = NO_PORT;
    reader.lfts.borrow_mut().insert(1, t);
    let rerouted = again(&mut kept);
    assert_eq!(judged(&rerouted), judged(&fresh()));
    assert_eq!(rerouted.cost.ports_judged, 1);
    assert!(!rerouted.deadlock.kept);

    // The repair: judged again, carried, as fresh.
    reader.rows.borrow_mut().clear();
    let repaired = again(&mut kept);
    assert_eq!(judged(&repaired), judged(&fresh()));
    assert_eq!(repaired.cost.ports_judged, 1);
    assert!(repaired.levels.iter().all(LevelSweep::carried));
}
