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
    assert_eq!(
        find_cycle(&Graph::of_lists(&edges, 0)).map(|c| c.len()),
        Some(n as usize)
    );
    let open: Vec<Vec<u32>> = (0..n)
        .map(|v| if v + 1 < n { vec![v + 1] } else { Vec::new() })
        .collect();
    assert_eq!(find_cycle(&Graph::of_lists(&open, 0)), None);
}

/// The benchmark: the 1,008-HCA fat tree (56 leaves of 18 HCAs, 18
/// spines: `ft:56:18:18`), the four SLs of `examples/qos-network.yml`
/// judged as the audit judges them. A figure, not a test:
/// `cargo test --release -p qoslane --lib deadlock_bench -- --ignored --nocapture`.
#[test]
#[ignore = "a benchmark: run it by name"]
fn deadlock_bench_on_a_1008_hca_fat_tree() {
    let f = fat_tree(56, 18, 18);
    let sls = [0u8, 1, 2, 3];
    let time = |what: &str, run: &dyn Fn() -> Vec<Safety>| {
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let v = run();
            runs.push(t.elapsed().as_secs_f64() * 1e3);
            assert!(v.iter().all(|s| !s.is_cycle()));
        }
        runs.sort_by(f64::total_cmp);
        eprintln!(
            "deadlock check, 1,008 HCAs, 4 SLs, {what}: median {:.1} ms (min {:.1}, max {:.1}; 5 runs)",
            runs[2], runs[0], runs[4]
        );
    };
    time("per SL, the reference (hash maps)", &|| {
        sls.iter().map(|&sl| reference::judge(&f, sl)).collect()
    });
    time("per SL, dense", &|| {
        sls.iter().map(|&sl| judge(&f, sl)).collect()
    });
    time("shared (judge_all)", &|| judge_all(&f, &sls));
}

/// The check as it was before the dense arrays (per-SL, hash maps): the
/// reference the dense and shared paths are held to, verdict for verdict
/// and loop for loop.
mod reference {
    use std::collections::HashSet;

    use super::super::{Fabric, Hop, NO_PORT, Peer, Safety};
    use crate::fabric::tables::Sl2Vl;

    pub fn judge(f: &Fabric, sl: u8) -> Safety {
        let mut base = Vec::new();
        let mut n = 0usize;
        for s in &f.switches {
            base.push(n);
            n += s.peers.keys().max().map_or(0, |&p| p as usize + 1) * 16;
        }
        base.push(n);
        let id = |s: usize, p: u32, vl: u8| {
            u32::try_from(base[s] + p as usize * 16 + usize::from(vl)).unwrap()
        };
        let mut edges: HashSet<(u32, u32)> = HashSet::new();
        let mut unknown_rows = 0;
        let mut walked: Vec<usize> = vec![0; n / 16];
        for (stamp, dst) in f.hcas.iter().enumerate().map(|(i, d)| (i + 1, d)) {
            for src in &f.hcas {
                if src.lid == dst.lid {
                    continue;
                }
                let Some((mut sw, mut in_port)) = src.switch else {
                    continue;
                };
                if src.sl2vl.is_some_and(|t| t.vl(sl) == Sl2Vl::VL15) {
                    continue;
                }
                let mut prev: Option<u32> = None;
                for _ in 0..=f.switches.len() * 2 + 2 {
                    let s = &f.switches[sw];
                    let out = s.lft.get(usize::from(dst.lid)).copied().unwrap_or(NO_PORT);
                    if out == NO_PORT || u32::from(out) == in_port || out == 0 {
                        break;
                    }
                    let out = u32::from(out);
                    let Some(row) = s.sl2vl.get(&(in_port, out)) else {
                        unknown_rows += 1;
                        break;
                    };
                    let vl = row.vl(sl);
                    if vl == Sl2Vl::VL15 {
                        break;
                    }
                    let ch = id(sw, out, vl);
                    if let Some(p) = prev {
                        edges.insert((p, ch));
                    }
                    match walked.get_mut(base[sw] / 16 + in_port as usize) {
                        Some(w) if *w == stamp => break,
                        Some(w) => *w = stamp,
                        None => break,
                    }
                    match s.peers.get(&out) {
                        Some(Peer::Switch(next, port)) => {
                            prev = Some(ch);
                            (sw, in_port) = (*next, *port);
                        }
                        _ => break,
                    }
                }
            }
        }
        let mut adj: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (a, b) in edges {
            adj[a as usize].push(b);
        }
        for e in &mut adj {
            e.sort_unstable();
        }
        let hop = |i: u32| {
            let i = i as usize;
            let s = base.partition_point(|&b| b <= i) - 1;
            let off = i - base[s];
            Hop {
                switch: f.switches[s].name.clone(),
                lid: f.switches[s].lid,
                port: u32::try_from(off / 16).unwrap(),
                vl: u8::try_from(off % 16).unwrap(),
            }
        };
        match super::super::find_cycle(&super::super::Graph::of_lists(&adj, 0)) {
            Some(ids) => Safety::Cycle {
                hops: ids.into_iter().map(hop).collect(),
                unknown_rows,
            },
            None => Safety::DeadlockFree {
                channels: adj.iter().filter(|e| !e.is_empty()).count(),
                dependencies: adj.iter().map(Vec::len).sum(),
                unknown_rows,
            },
        }
    }
}

/// A small deterministic generator (xorshift), for the random fabrics.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap()
    }
}

/// A random fabric: switches cabled at random (now and then one way
/// only), HCAs on some ports, forwarding tables at random (loops, dead
/// ends and uncabled ports included), SL2VL rows at random from a few
/// VLs and VL 15, some not read.
fn random_fabric(r: &mut Rng) -> Fabric {
    let n = 2 + r.below(6);
    let ports = 3 + r.below(4);
    let mut f = Fabric::default();
    for s in 0..n {
        f.switches
            .push(switch(&format!("sw{s}"), u16::try_from(200 + s).unwrap()));
    }
    for _ in 0..n * 2 {
        let (a, b) = (r.below(n), r.below(n));
        let (pa, pb) = (
            u32::try_from(1 + r.below(ports)).unwrap(),
            u32::try_from(1 + r.below(ports)).unwrap(),
        );
        if a == b || f.switches[a].peers.contains_key(&pa) || f.switches[b].peers.contains_key(&pb)
        {
            continue;
        }
        if r.below(10) == 0 {
            f.switches[a].peers.insert(pa, Peer::Switch(b, pb));
        } else {
            cable(&mut f, a, pa, b, pb);
        }
    }
    let mut lid = 1u16;
    for s in 0..n {
        for p in 1..=u32::try_from(ports).unwrap() {
            if !f.switches[s].peers.contains_key(&p) && r.below(2) == 0 {
                hca(&mut f, s, p, lid);
                lid += 1;
            }
        }
    }
    let vls = [0u8, 1, 2, 3, 5, 7, Sl2Vl::VL15];
    for h in &mut f.hcas {
        h.sl2vl = match r.below(3) {
            0 => None,
            _ => Some(Sl2Vl::new(std::array::from_fn(|_| vls[r.below(vls.len() - 1)])).unwrap()),
        };
        if r.below(8) == 0 {
            h.sl2vl = Some(all_on(Sl2Vl::VL15));
        }
    }
    for s in 0..n {
        for d in 0..usize::from(lid) {
            f.switches[s].lft[d] = match r.below(8) {
                0 => NO_PORT,
                _ => u8::try_from(r.below(ports + 2)).unwrap(),
            };
        }
        let cabled: Vec<u32> = f.switches[s].peers.keys().copied().collect();
        for &i in &cabled {
            for &o in &cabled {
                if i == o || r.below(12) == 0 {
                    continue;
                }
                // Mostly one VL per SL everywhere; now and then its own.
                let row = match r.below(4) {
                    0 => Sl2Vl::new(std::array::from_fn(|_| vls[r.below(vls.len())])).unwrap(),
                    1 => all_on(vls[r.below(3)]),
                    _ => identity(),
                };
                f.switches[s].sl2vl.insert((i, o), row);
            }
        }
    }
    f
}

#[test]
fn the_dense_and_shared_checks_give_the_reference_verdicts_and_loops() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let sls: Vec<u8> = (0..16).collect();
    let mut cycles = 0;
    for _ in 0..400 {
        let f = random_fabric(&mut r);
        let shared = judge_all(&f, &sls);
        for (&sl, got) in sls.iter().zip(&shared) {
            let want = reference::judge(&f, sl);
            assert_eq!(judge(&f, sl), want, "SL {sl} of {f:#?}");
            assert_eq!(*got, want, "SL {sl}, shared, of {f:#?}");
            cycles += usize::from(want.is_cycle());
        }
    }
    assert!(
        cycles > 100,
        "the fabrics close loops now and then: {cycles}"
    );
}

#[test]
fn levels_on_uniform_vls_share_one_graph_and_name_their_own_vls() {
    // A ring with its loop: SL 5 on VL 0 everywhere, SL 6 on VL 3
    // everywhere, SL 7 with a dateline: the shared path gives what the
    // per-SL path gives, the loops named on each SL's own VL.
    let mut f = ring(4);
    let mut row = [0u8; 16];
    row[6] = 3;
    row[7] = 4;
    every_row(&mut f, Sl2Vl::new(row).unwrap());
    let mut dateline = row;
    dateline[7] = 5;
    f.switches[0]
        .sl2vl
        .insert((3, 2), Sl2Vl::new(dateline).unwrap());
    let sls = [5, 6, 7, 5];
    let shared = judge_all(&f, &sls);
    for (&sl, got) in sls.iter().zip(&shared) {
        assert_eq!(*got, judge(&f, sl), "SL {sl}");
        assert_eq!(*got, reference::judge(&f, sl), "SL {sl}");
    }
    let Safety::Cycle { hops, .. } = &shared[1] else {
        panic!("SL 6 loops: {:?}", shared[1]);
    };
    assert!(hops.iter().all(|h| h.vl == 3), "{hops:?}");
    assert!(!shared[2].is_cycle(), "{:?}", shared[2]);
    // A fat tree: every SL of the identity layout alike.
    let f = fat_tree(4, 3, 2);
    let sls: Vec<u8> = (0..16).collect();
    for (&sl, got) in sls.iter().zip(judge_all(&f, &sls)) {
        assert_eq!(got, judge(&f, sl), "SL {sl}");
        assert_eq!(got, reference::judge(&f, sl), "SL {sl}");
    }
}
