use super::*;
use crate::fabric::tables::Sl2Vl;

/// SL n on VL n mod 8 (OpenSM's QoS default), or every SL on `vl`.
fn row(vl: Option<u8>) -> Sl2Vl {
    let mut t = [0u8; 16];
    for (sl, v) in t.iter_mut().enumerate() {
        *v = vl.unwrap_or(u8::try_from(sl % 8).unwrap());
    }
    Sl2Vl::new(t).unwrap()
}

/// Two leaves (LIDs 1, 2; HCAs on ports 1-2, LIDs 10 + 2l + h; up ports 3-4)
/// and two spines (LIDs 3, 4; port l+1 to leaf l), up/down routes, the
/// spine by the destination LID; every pair's row the default layout.
fn two_leaves() -> Forwarding {
    let mut f = Fabric::default();
    for (name, lid) in [("leaf0", 1), ("leaf1", 2), ("spine0", 3), ("spine1", 4)] {
        f.switches.push(Switch {
            name: name.into(),
            lid,
            lft: vec![deadlock::NO_PORT; 16],
            ..Switch::default()
        });
    }
    for l in 0..2usize {
        for h in 0..2u32 {
            let lid = u16::try_from(10 + 2 * l).unwrap() + u16::try_from(h).unwrap();
            f.switches[l].peers.insert(h + 1, Peer::Hca(f.hcas.len()));
            f.hcas.push(Hca {
                name: format!("node{lid}"),
                lid,
                switch: Some((l, h + 1)),
                sl2vl: Some(row(None)),
            });
        }
        for k in 0..2usize {
            let (lp, sp) = (3 + u32::try_from(k).unwrap(), 1 + u32::try_from(l).unwrap());
            f.switches[l].peers.insert(lp, Peer::Switch(2 + k, sp));
            f.switches[2 + k].peers.insert(sp, Peer::Switch(l, lp));
        }
    }
    for d in &f.hcas.clone() {
        let (dl, dp) = d.switch.unwrap();
        let up = 3 + u8::try_from(d.lid % 2).unwrap();
        for l in 0..2 {
            f.switches[l].lft[usize::from(d.lid)] = if l == dl {
                u8::try_from(dp).unwrap()
            } else {
                up
            };
        }
        for k in 2..4 {
            f.switches[k].lft[usize::from(d.lid)] = u8::try_from(dl + 1).unwrap();
        }
    }
    for s in &mut f.switches {
        let ports: Vec<u32> = s.peers.keys().copied().collect();
        for &i in &ports {
            for &o in ports.iter().filter(|&&o| o != i) {
                s.sl2vl.insert((i, o), row(None));
            }
        }
    }
    let by_lid = f
        .switches
        .iter()
        .enumerate()
        .map(|(i, s)| (s.lid, i))
        .collect();
    Forwarding {
        fabric: f,
        read_all: true,
        unjudged: Vec::new(),
        read_ms: 0,
        by_lid,
    }
}

/// The pairs read are those a route takes: a leaf's HCA→HCA, HCA→up and
/// up→HCA pairs, a spine's leaf→leaf pairs; never a leaf's up→up pair.
#[test]
fn the_pairs_read_are_those_a_route_takes() {
    let f = two_leaves();
    let r = routed(&f);
    // leaf0 (lid 1): out 3 (up) from the HCAs only; out 1 (LID 10) from
    // the other HCA and spine 0 (LID 10's), out 2 (LID 11) from spine 1.
    assert_eq!(r.ins(1, 3, &[1, 2, 4]), [1, 2]);
    assert_eq!(r.ins(1, 1, &[2, 3, 4]), [2, 3]);
    assert_eq!(r.ins(1, 2, &[1, 3, 4]), [1, 4]);
    // spine0 (lid 3): leaf 0 -> leaf 1 and back.
    assert_eq!(r.ins(3, 2, &[1]), [1]);
    assert_eq!(r.ins(3, 1, &[2]), [2]);
    // A switch the tables do not know: every in port.
    assert_eq!(r.ins(99, 1, &[2, 3]), [2, 3]);
    // Every hop the deadlock check walks is among them: its verdict on the
    // routed rows alone is the verdict on every row.
    let mut only = f.fabric.clone();
    for (s, sw) in only.switches.iter_mut().enumerate() {
        sw.sl2vl.retain(|&(i, o), _| r.taken(s, i, o));
    }
    assert!(only.switches[0].sl2vl.len() < f.fabric.switches[0].sl2vl.len());
    for sl in 0..4 {
        assert_eq!(
            format!("{:?}", deadlock::judge(&only, sl)),
            format!("{:?}", deadlock::judge(&f.fabric, sl))
        );
    }
}

/// SLs on VLs that are each other's renamed share a graph in
/// `deadlock::judge_all`; one that merges two VLs, or drops where the other
/// does not, does not: each gets the verdict judged alone.
#[test]
fn judge_all_gives_each_sl_its_own_verdict_where_vls_are_renamed_or_not() {
    let alone = |f: &deadlock::Fabric, sls: &[u8]| {
        let all: Vec<String> = deadlock::judge_all(f, sls)
            .iter()
            .map(|s| format!("{s:?}"))
            .collect();
        let each: Vec<String> = sls
            .iter()
            .map(|&sl| format!("{:?}", deadlock::judge(f, sl)))
            .collect();
        assert_eq!(all, each);
    };
    let mut f = two_leaves().fabric;
    alone(&f, &[0, 1, 2, 3]);
    // One row puts SL 1 and SL 2 on one VL: not a renaming.
    let mut t = *row(None).as_array();
    t[2] = 1;
    f.switches[2].sl2vl.insert((1, 2), Sl2Vl::new(t).unwrap());
    alone(&f, &[1, 2]);
    // SL 3 dropped on one row only.
    let mut t = *row(None).as_array();
    t[3] = Sl2Vl::VL15;
    t[4] = 3;
    f.switches[2].sl2vl.insert((1, 2), Sl2Vl::new(t).unwrap());
    alone(&f, &[3, 4]);
    // Every SL on one VL: any two are the same graph.
    let mut g = two_leaves().fabric;
    for s in &mut g.switches {
        for r in s.sl2vl.values_mut() {
            *r = row(Some(0));
        }
    }
    for h in &mut g.hcas {
        h.sl2vl = Some(row(Some(0)));
    }
    alone(&g, &[0, 5]);
}
