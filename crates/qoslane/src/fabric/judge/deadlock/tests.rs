use super::*;

/// Every SL on VL `vl`.
fn all_on(vl: u8) -> Sl2Vl {
    Sl2Vl::new([vl; 16]).unwrap()
}

/// The identity layout (SL n on VL n mod 8), as OpenSM's QoS default.
fn identity() -> Sl2Vl {
    let mut t = [0u8; 16];
    for (sl, vl) in t.iter_mut().enumerate() {
        *vl = u8::try_from(sl % 8).unwrap();
    }
    Sl2Vl::new(t).unwrap()
}

/// Cables switch `a` port `pa` to switch `b` port `pb`.
fn cable(f: &mut Fabric, a: usize, pa: u32, b: usize, pb: u32) {
    f.switches[a].peers.insert(pa, Peer::Switch(b, pb));
    f.switches[b].peers.insert(pb, Peer::Switch(a, pa));
}

/// An HCA of LID `lid` on switch `s` port `p`.
fn hca(f: &mut Fabric, s: usize, p: u32, lid: u16) {
    let idx = f.hcas.len();
    f.hcas.push(Hca {
        name: format!("node{lid}"),
        lid,
        switch: Some((s, p)),
        sl2vl: Some(identity()),
    });
    f.switches[s].peers.insert(p, Peer::Hca(idx));
}

fn switch(name: &str, lid: u16) -> Switch {
    Switch {
        name: name.into(),
        lid,
        lft: vec![NO_PORT; 64],
        ..Switch::default()
    }
}

/// Every (in, out) pair of data ports of every switch: `row`.
fn every_row(f: &mut Fabric, row: Sl2Vl) {
    for s in &mut f.switches {
        let ports: Vec<u32> = s.peers.keys().copied().collect();
        for &i in &ports {
            for &o in &ports {
                if i != o {
                    s.sl2vl.insert((i, o), row);
                }
            }
        }
    }
}

/// A 2-level fat tree: `leaves` leaves of `hcas` HCAs (ports 1..=hcas),
/// `spines` spines (leaf port hcas+1+k to spine k, spine port 1+l to leaf
/// l); up/down routing, the spine chosen by the destination LID.
fn fat_tree(leaves: usize, hcas: usize, spines: usize) -> Fabric {
    let mut f = Fabric::default();
    let lid_of = |l: usize, h: usize| u16::try_from(1 + l * hcas + h).unwrap();
    let top = usize::from(lid_of(leaves, 0)) + 1;
    for l in 0..leaves {
        f.switches.push(switch(&format!("leaf{l}"), 0));
    }
    for k in 0..spines {
        f.switches.push(switch(&format!("spine{k}"), 0));
    }
    for s in &mut f.switches {
        s.lft = vec![NO_PORT; top];
    }
    for l in 0..leaves {
        for h in 0..hcas {
            hca(&mut f, l, u32::try_from(1 + h).unwrap(), lid_of(l, h));
        }
        for k in 0..spines {
            let (lp, sp) = (
                u32::try_from(hcas + 1 + k).unwrap(),
                u32::try_from(1 + l).unwrap(),
            );
            cable(&mut f, l, lp, leaves + k, sp);
        }
    }
    for dl in 0..leaves {
        for h in 0..hcas {
            let lid = lid_of(dl, h);
            let spine = usize::from(lid) % spines;
            for l in 0..leaves {
                f.switches[l].lft[usize::from(lid)] = if l == dl {
                    u8::try_from(1 + h).unwrap()
                } else {
                    u8::try_from(hcas + 1 + spine).unwrap()
                };
            }
            for k in 0..spines {
                f.switches[leaves + k].lft[usize::from(lid)] = u8::try_from(1 + dl).unwrap();
            }
        }
    }
    every_row(&mut f, identity());
    f
}

/// A ring of `n` switches (port 1 its HCA, port 2 clockwise, port 3
/// counter-clockwise), shortest paths, ties clockwise.
fn ring(n: usize) -> Fabric {
    let mut f = Fabric::default();
    for s in 0..n {
        f.switches
            .push(switch(&format!("sw{s}"), u16::try_from(100 + s).unwrap()));
    }
    for s in 0..n {
        cable(&mut f, s, 2, (s + 1) % n, 3);
        hca(&mut f, s, 1, u16::try_from(1 + s).unwrap());
    }
    for s in 0..n {
        for d in 0..n {
            let lid = 1 + d;
            let ahead = (d + n - s) % n;
            f.switches[s].lft[lid] = match ahead {
                0 => 1,
                a if a <= n / 2 => 2,
                _ => 3,
            };
        }
    }
    f
}

#[test]
fn a_fat_tree_with_up_down_routes_is_deadlock_free() {
    let f = fat_tree(4, 3, 2);
    for sl in 0..16 {
        let v = judge(&f, sl);
        assert!(!v.is_cycle(), "SL {sl}: {v:?}");
        let Safety::DeadlockFree {
            channels,
            dependencies,
            unknown_rows,
        } = v
        else {
            unreachable!()
        };
        // Every leaf's up ports and every spine's down ports carry it.
        assert!(channels >= 4 * 2 + 2 * 4, "{channels}");
        assert!(dependencies > 0 && unknown_rows == 0);
    }
    assert!(
        judge(&f, 3)
            .words()
            .starts_with("deadlock-free on this routing")
    );
}

#[test]
fn a_ring_on_one_vl_is_a_credit_loop_named_switch_by_switch() {
    let mut f = ring(4);
    every_row(&mut f, all_on(0));
    let v = judge(&f, 5);
    let Safety::Cycle { hops, .. } = &v else {
        panic!("no cycle: {v:?}");
    };
    // The clockwise loop: each switch's port 2 on VL 0, each once.
    assert_eq!(hops.len(), 4, "{hops:?}");
    assert!(hops.iter().all(|h| h.port == 2 && h.vl == 0), "{hops:?}");
    let mut names: Vec<&str> = hops.iter().map(|h| h.switch.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["sw0", "sw1", "sw2", "sw3"]);
    let w = v.words();
    assert!(w.starts_with("credit loop (deadlock risk): sw"), "{w}");
    assert!(w.ends_with(" on VL 0"), "{w}");
    // Consecutive hops follow the cables: sw(i) port 2 leads to sw(i+1).
    for pair in hops.windows(2) {
        let a: usize = pair[0].switch[2..].parse().unwrap();
        let b: usize = pair[1].switch[2..].parse().unwrap();
        assert_eq!((a + 1) % 4, b, "{hops:?}");
    }

    // A ring of three: every path is one hop, no dependency between
    // switch ports: no loop.
    let mut f3 = ring(3);
    every_row(&mut f3, all_on(0));
    assert!(!judge(&f3, 0).is_cycle());
}

#[test]
fn the_same_ring_with_a_dateline_vl_is_deadlock_free() {
    let mut f = ring(4);
    every_row(&mut f, all_on(0));
    // Traffic that crossed the dateline (sw3 -> sw0) goes on on VL 1.
    f.switches[0].sl2vl.insert((3, 2), all_on(1));
    let v = judge(&f, 0);
    assert!(!v.is_cycle(), "{v:?}");
    // The same dateline for another SL only: SL 0 still loops.
    let mut t = [0u8; 16];
    t[4] = 1;
    f.switches[0].sl2vl.insert((3, 2), Sl2Vl::new(t).unwrap());
    assert!(judge(&f, 0).is_cycle());
    assert!(!judge(&f, 4).is_cycle());
}

#[test]
fn dropped_unread_and_looping_routes_end_the_walk() {
    // The ring's loop on VL 15 is no loop: the level is dropped there.
    let mut f = ring(4);
    every_row(&mut f, all_on(Sl2Vl::VL15));
    assert!(!judge(&f, 0).is_cycle());
    // No rows read: nothing judged, said.
    let f = ring(4);
    let v = judge(&f, 0);
    assert!(matches!(v, Safety::DeadlockFree { unknown_rows, .. } if unknown_rows > 0));
    assert!(v.words().contains("not judged"), "{}", v.words());
    // A forwarding loop (sw0 and sw1 send LID 3 to each other) ends.
    let mut f = ring(4);
    every_row(&mut f, all_on(0));
    f.switches[1].lft[3] = 3;
    f.switches[0].lft[3] = 2;
    let _ = judge(&f, 0);
}

#[test]
fn the_search_is_iterative_on_a_long_chain() {
    // 200,000 vertices in one chain closing on itself: no stack overflow.
    let n = 200_000u32;
    let edges: Vec<Vec<u32>> = (0..n).map(|v| vec![(v + 1) % n]).collect();
    assert_eq!(find_cycle(&edges).map(|c| c.len()), Some(n as usize));
    let open: Vec<Vec<u32>> = (0..n)
        .map(|v| if v + 1 < n { vec![v + 1] } else { Vec::new() })
        .collect();
    assert_eq!(find_cycle(&open), None);
}
