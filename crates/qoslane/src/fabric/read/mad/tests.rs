//! The encoder and decoders against the MADs real smpquery exchanged on the
//! simulated fabric, and against what the smpquery parsers read from the
//! same queries' text.

use super::*;
use crate::fabric::read::parse;
use crate::fabric::tables::VlArb;

/// A fixture's exchange: (`send` or `recv`, the 256 bytes), in order.
fn mads(name: &str) -> Vec<(bool, Vec<u8>)> {
    let path = format!(
        "{}/tests/fixtures/smp-mad/{name}.mads",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out: Vec<(bool, Vec<u8>)> = Vec::new();
    for l in text.lines() {
        match l {
            "send" => out.push((true, Vec::new())),
            "recv" => out.push((false, Vec::new())),
            hex => {
                let last = out.last_mut().expect("a MAD line before send/recv");
                for w in hex.split(' ') {
                    let v = u16::from_str_radix(w, 16).expect("hex");
                    last.1.extend(v.to_be_bytes());
                }
            }
        }
    }
    assert!(out.iter().all(|(_, m)| m.len() == MAD_SIZE), "{name}");
    out
}

fn text(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/smp-mad/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn answers(name: &str) -> Vec<Answer> {
    mads(name)
        .into_iter()
        .filter(|(send, _)| !send)
        .map(|(_, m)| decode_answer(&m).unwrap())
        .collect()
}

const FIXTURES: [&str; 8] = [
    "spine1.lid2.portinfo.2",
    "spine1.lid2.sl2vl.2",
    "leaf3.lid7.vlarb.2",
    "node2.lid5.portinfo.1",
    "node2.lid5.sl2vl",
    "node2.lid5.vlarb.1",
    "leaf1.lid4.nodeinfo",
    "leaf1.dr.portinfo.3",
];

#[test]
fn every_recorded_request_is_what_the_encoder_makes() {
    let mut n = 0;
    for name in FIXTURES {
        for (send, m) in mads(name) {
            if !send {
                continue;
            }
            let attr = [
                Attr::NodeInfo,
                Attr::PortInfo,
                Attr::SlToVl,
                Attr::VlArbitration,
            ]
            .into_iter()
            .find(|a| a.id() == u16::from_be_bytes([m[16], m[17]]));
            // smpquery also asks for SwitchInfo (vlarb of port 0): not ours.
            let Some(attr) = attr else { continue };
            let route = if m[1] == CLASS_DIRECTED {
                Route::Directed(m[129..129 + usize::from(m[7])].to_vec())
            } else {
                // The DLID is in the umad header (dropped): any LID encodes alike.
                Route::Lid(1)
            };
            let get = Get {
                route,
                attr,
                modifier: u32::from_be_bytes([m[20], m[21], m[22], m[23]]),
            };
            let tid = u64::from_be_bytes(m[8..16].try_into().unwrap());
            assert_eq!(encode_get(&get, tid).unwrap().to_vec(), m, "{name}: {get}");
            n += 1;
        }
    }
    assert!(n >= 17, "only {n} requests checked");
}

#[test]
fn the_requests_name_the_attribute_modifier_and_route() {
    let sent = mads("spine1.lid2.portinfo.2");
    let want = encode_get(
        &Get {
            route: Route::Lid(2),
            attr: Attr::PortInfo,
            modifier: 2,
        },
        u64::from_be_bytes(sent[0].1[8..16].try_into().unwrap()),
    )
    .unwrap();
    assert_eq!(want.to_vec(), sent[0].1);
    // smpquery sl2vl 2 2: NodeInfo, then in 0..=3 -> out 2.
    let mods: Vec<u32> = mads("spine1.lid2.sl2vl.2")
        .iter()
        .filter(|(s, m)| *s && m[17] == 0x17)
        .map(|(_, m)| u32::from_be_bytes([m[20], m[21], m[22], m[23]]))
        .collect();
    assert_eq!(
        mods,
        (0..=3).map(|i| sl2vl_modifier(i, 2)).collect::<Vec<_>>()
    );
    let dr = mads("leaf1.dr.portinfo.3");
    let want = encode_get(
        &Get {
            route: Route::Directed(vec![1]),
            attr: Attr::PortInfo,
            modifier: 3,
        },
        u64::from_be_bytes(dr[0].1[8..16].try_into().unwrap()),
    )
    .unwrap();
    assert_eq!(want.to_vec(), dr[0].1);
    // No hop: the sending port's own node (hop count 0); 64 hops: none.
    let own = |path: Vec<u8>| {
        encode_get(
            &Get {
                route: Route::Directed(path),
                attr: Attr::PortInfo,
                modifier: 0,
            },
            1,
        )
    };
    let local = own(Vec::new()).unwrap();
    assert_eq!((local[1], local[7]), (CLASS_DIRECTED, 0));
    assert_eq!(&local[32..36], &[0xff; 4]);
    assert!(own(vec![1; 63]).is_ok());
    assert!(own(vec![1; 64]).is_err());
    assert_eq!(Route::Directed(Vec::new()).to_string(), "directed route 0");
    assert_eq!(
        Route::Directed(vec![1, 3]).to_string(),
        "directed route 0,1,3"
    );
}

#[test]
fn port_info_reads_what_smpquery_prints() {
    for name in [
        "spine1.lid2.portinfo.2",
        "node2.lid5.portinfo.1",
        "leaf1.dr.portinfo.3",
    ] {
        let a = answers(name);
        assert_eq!(
            port_info(&a[0].data).unwrap(),
            parse::parse_portinfo(&text(name)).unwrap(),
            "{name}"
        );
        assert_eq!(
            port_lid(&a[0].data),
            parse::parse_lid(&text(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn the_node_description_reads_what_smpquery_prints() {
    let mut d = [0u8; SMP_DATA_SIZE];
    d[..12].copy_from_slice(b"leaf1 HCA-1 ");
    assert_eq!(node_desc(&d), "leaf1 HCA-1");
    assert_eq!(
        node_desc(&d),
        parse::parse_nodedesc("Node Description:.....leaf1 HCA-1\n").unwrap()
    );
    // 64 bytes with no NUL: all of them.
    let full = [b'x'; SMP_DATA_SIZE];
    assert_eq!(node_desc(&full).len(), 64);
}

#[test]
fn sl2vl_reads_what_smpquery_prints() {
    // A switch: one row per in port, SL 3 on VL 15 (the rig misaligned it).
    let rows: Vec<(u32, Sl2Vl)> = answers("spine1.lid2.sl2vl.2")
        .iter()
        .filter(|a| a.attr_id == Attr::SlToVl.id())
        .map(|a| (a.modifier >> 8, sl2vl(&a.data)))
        .collect();
    let want = parse::parse_switch_sl2vl(&text("spine1.lid2.sl2vl.2"), 2).unwrap();
    assert_eq!(rows, want);
    assert_eq!(rows[1].1.vl(3), Sl2Vl::VL15);
    // An HCA port.
    let a = answers("node2.lid5.sl2vl");
    let t = a.iter().find(|a| a.attr_id == Attr::SlToVl.id()).unwrap();
    assert_eq!(
        sl2vl(&t.data),
        parse::parse_sl2vl(&text("node2.lid5.sl2vl")).unwrap()
    );
}

#[test]
fn vlarb_reads_what_smpquery_prints() {
    for name in ["leaf3.lid7.vlarb.2", "node2.lid5.vlarb.1"] {
        let a = answers(name);
        let pi = port_info(&a[0].data).unwrap();
        let block = |b: u32| {
            &a.iter()
                .find(|x| x.attr_id == Attr::VlArbitration.id() && x.modifier >> 16 == b)
                .unwrap()
                .data
        };
        let low = usize::from(pi.vlarb_low_cap);
        let high = usize::from(pi.vlarb_high_cap);
        assert!(low <= 32 && high <= 32, "the rig's caps are 8");
        let got = VlArb {
            low: vlarb_block(block(VLARB_LOW[0]), low),
            high: vlarb_block(block(VLARB_HIGH[0]), high),
        };
        assert_eq!(got, parse::parse_vlarb(&text(name)).unwrap(), "{name}");
    }
    // leaf3 port 2: VL 3 weighs nothing (the rig zeroed it).
    let a = answers("leaf3.lid7.vlarb.2");
    let t = vlarb_block(&a[1].data, 8);
    assert_eq!(
        VlArb {
            low: t,
            high: Vec::new()
        }
        .weight(3),
        0
    );
}

#[test]
fn node_info_reads_what_smpquery_prints() {
    let a = answers("leaf1.lid4.nodeinfo");
    assert_eq!(
        node_info(&a[0].data).unwrap(),
        parse::parse_nodeinfo(&text("leaf1.lid4.nodeinfo")).unwrap()
    );
}

#[test]
fn a_bad_answer_is_an_error_naming_it() {
    let mut m = mads("spine1.lid2.portinfo.2")[1].1.clone();
    m[5] = 0x1c; // invalid attribute or modifier
    let e = decode_answer::<SmpData>(&m).unwrap_err().to_string();
    assert!(
        e.contains("0x001c") && e.contains("invalid attribute"),
        "{e}"
    );
    m[5] = 0;
    m[3] = 0x01;
    assert!(
        decode_answer::<SmpData>(&m)
            .unwrap_err()
            .0
            .contains("not GetResp")
    );
    assert!(decode_answer::<SmpData>(&m[..100]).is_err());
    // A directed-route answer's D bit is not a status.
    assert!(decode_answer::<SmpData>(&mads("leaf1.dr.portinfo.3")[1].1).is_ok());
    let mut d = [0u8; SMP_DATA_SIZE];
    d[37] = 0x60;
    d[43] = 0x40;
    assert!(port_info(&d).unwrap_err().0.contains("VLCap is 6"));
}

/// A PMA Get (PortVLXmitWaitCounters): class 0x04, modifier 0 on the wire,
/// the port in PortSelect; its answer's sixteen 16-bit counters.
#[test]
fn a_pma_get_carries_its_port_in_the_data_and_its_answer_reads_back() {
    let get = Get {
        route: Route::Perf(7),
        attr: Attr::VlXmitWait,
        modifier: 3,
    };
    let m = encode_get(&get, 0x42).unwrap();
    assert_eq!((m[1], m[3]), (CLASS_PERF, 0x01));
    assert_eq!(&m[16..18], &[0x00, 0x1c]);
    assert_eq!(&m[20..24], &[0; 4], "modifier 0");
    assert_eq!(m[DATA_OFFSET + 1], 3, "PortSelect");
    assert_eq!(get.route.dlid(), 7);
    assert_eq!(get.to_string(), "PMA Get vlxmitcounters 0x3 (PMA of lid 7)");
    let mut answer = m;
    answer[3] = 0x81;
    answer[DATA_OFFSET + 4 + 6..DATA_OFFSET + 4 + 8].copy_from_slice(&900u16.to_be_bytes());
    answer[DATA_OFFSET + 4 + 30..DATA_OFFSET + 4 + 32].copy_from_slice(&u16::MAX.to_be_bytes());
    let a = decode_answer(&answer).unwrap();
    assert_eq!(a.modifier, get.wire_modifier());
    let (select, ticks) = vl_xmit_wait(&a.data);
    assert_eq!((select, ticks[3], ticks[15], ticks[0]), (3, 900, 65535, 0));
    let clear = Get {
        attr: Attr::VlXmitWaitClear,
        ..get.clone()
    };
    let m = encode_get(&clear, 0x43).unwrap();
    assert_eq!(
        (m[3], &m[16..18]),
        (0x02, &[0x00, 0x1c][..]),
        "a Set of the same attribute"
    );
    assert_eq!(
        &m[DATA_OFFSET + 1..DATA_OFFSET + 4],
        &[3, 0xff, 0xff],
        "every VL"
    );
    let too_far = Get {
        modifier: 256,
        ..get
    };
    assert!(encode_get(&too_far, 1).is_err());
}

#[test]
fn an_sa_path_record_get_and_its_short_answer() {
    let get = Get {
        route: Route::Sa(1),
        attr: Attr::PathRecord,
        modifier: (0x16 << 16) | 0x52,
    };
    let m = encode_get(&get, 7).unwrap();
    assert_eq!((m[1], m[2], m[3]), (CLASS_SA, 2, 0x01));
    assert_eq!(&m[16..18], &[0x00, 0x35]);
    assert_eq!(&m[20..24], &[0, 0, 0, 0], "an SA Get's modifier is 0");
    assert_eq!(u64::from_be_bytes(m[48..56].try_into().unwrap()), 0x30);
    assert_eq!(&m[96..100], &[0, 82, 0, 22], "DLID, SLID");
    // The answer as the simulator hands it: header and one record.
    let mut a = m[..120].to_vec();
    a[3] = 0x81;
    a[109] = 0x35; // QoSClass bits, SL 5
    let ans = decode_answer(&a).unwrap();
    assert_eq!((ans.tid, path_record_sl(&ans.data)), (7, 5));
    // Short SMPs are still refused.
    let mut smp = a.clone();
    smp[1] = CLASS_LID_ROUTED;
    assert!(decode_answer::<SmpData>(&smp).is_err());
}

/// PortXmitDataSL and PortRcvDataSL (PMA attributes 0x36 and 0x37: libibmad's
/// `IB_GSI_PORT_XMIT_DATA_SL`, `IB_GSI_PORT_RCV_DATA_SL`): a Get to the
/// port's PMA with its number in PortSelect; the answer's sixteen 32-bit
/// counters from byte 4 of the data, SL 15's at bytes 64..68 (MAD bytes
/// 128..132): past an SMP's 64 bytes, read whole from the PMA's 192.
#[test]
fn per_sl_data_is_read_from_the_whole_pma_data_area() {
    for (attr, id, name) in [
        (Attr::XmitDataSl, 0x36u8, "xmtsl"),
        (Attr::RcvDataSl, 0x37, "rcvsl"),
    ] {
        let get = Get {
            route: Route::Perf(5),
            attr,
            modifier: 1,
        };
        let m = encode_get(&get, 0x51).unwrap();
        assert_eq!((m[0], m[1], m[2], m[3]), (1, CLASS_PERF, 1, 0x01));
        assert_eq!(&m[16..18], &[0x00, id]);
        assert_eq!(&m[20..24], &[0; 4], "modifier 0: the port is in the data");
        assert_eq!(m[DATA_OFFSET + 1], 1, "PortSelect");
        assert_eq!(
            get.to_string(),
            format!("PMA Get {name} 0x1 (PMA of lid 5)")
        );
        // The answer as a port sends it: GetResp, status 0, the counters
        // big-endian.
        let mut answer = m;
        answer[3] = 0x81;
        let at = |sl: usize| DATA_OFFSET + 4 + 4 * sl;
        answer[at(0)..at(0) + 4].copy_from_slice(&1200u32.to_be_bytes());
        answer[at(3)..at(3) + 4].copy_from_slice(&500_000u32.to_be_bytes());
        answer[at(15)..at(15) + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(at(15), 128, "SL 15 starts where an SMP's data ends");
        let a: Answer<PmaData> = decode_answer(&answer).unwrap();
        let (select, sl) = data_per_sl(&a.data);
        assert_eq!(select, 1);
        assert_eq!(
            (sl[0], sl[3], sl[15], sl[14]),
            (1200, 500_000, 0xffff_ffff, 0)
        );
        // An SMP's area of the same answer holds SL 0 to 14 only.
        let smp: Answer = decode_answer(&answer).unwrap();
        assert_eq!(smp.data.len(), SMP_DATA_SIZE);
        assert_eq!(a.data.0.len(), PMA_DATA_SIZE);
        assert_eq!(PMA_DATA_SIZE, 192);
    }
}

/// A port whose agent does not serve an attribute answers with MAD status
/// 0x000C (IBA 13.4.7: unsupported method/attribute combination): an error
/// naming it, never counters.
#[test]
fn an_unsupported_pma_attribute_is_an_error_not_counters() {
    let get = Get {
        route: Route::Perf(5),
        attr: Attr::XmitDataSl,
        modifier: 1,
    };
    let mut answer = encode_get(&get, 9).unwrap();
    answer[3] = 0x81;
    answer[5] = 0x0c;
    let e = decode_answer::<PmaData>(&answer).unwrap_err();
    assert!(
        e.0.contains("0x000c") && e.0.contains("method/attribute not supported"),
        "{e}"
    );
}

/// The PMA Gets real `perfquery` sends on the simulated fabric
/// (`rigs/record_smp_mads.sh`: `--vlxmitcounters 5 1` after the console set
/// node2's VL 3 wait to 500, and `-X 5 1`): the encoder makes the same
/// bytes (PortVLXmitWaitCounters 0x1C, PortXmitDataSL 0x36; class 0x04,
/// modifier 0, PortSelect in the data), and the recorded answer reads as
/// what perfquery printed.
#[test]
fn the_recorded_pma_gets_are_what_the_encoder_makes_and_the_answer_reads_back() {
    let vlxmit = mads("node2.lid5.vlxmit.1");
    let xmtsl = mads("node2.lid5.xmtsl.1");
    // perfquery asks ClassPortInfo (0x0001) first: not ours.
    let ours = |m: &[(bool, Vec<u8>)], id: u8| {
        m.iter()
            .find(|(send, b)| *send && b[16..18] == [0, id])
            .map(|(_, b)| b.clone())
            .unwrap()
    };
    for (sent, attr) in [
        (ours(&vlxmit, 0x1c), Attr::VlXmitWait),
        (ours(&xmtsl, 0x36), Attr::XmitDataSl),
    ] {
        let get = Get {
            route: Route::Perf(5),
            attr,
            modifier: 1,
        };
        let tid = u64::from_be_bytes(sent[8..16].try_into().unwrap());
        assert_eq!(encode_get(&get, tid).unwrap().to_vec(), sent, "{get}");
    }
    let answer = vlxmit.iter().rev().find(|(send, _)| !send).unwrap();
    let a: Answer<PmaData> = decode_answer(&answer.1).unwrap();
    assert_eq!(a.attr_id, 0x1c);
    let printed = parse::parse_perfquery(
        &text("node2.lid5.vlxmit.1"),
        "PortVLXmitWaitCounters",
        "PortVLXmitWait",
    )
    .unwrap();
    let (select, ticks) = vl_xmit_wait(&a.data);
    assert_eq!((select, ticks), (1, printed));
    assert_eq!(ticks[3], 500);
    // PortXmitDataSL: the simulator gives the request back (Get, not
    // GetResp), three times: never counters.
    let back: Vec<&Vec<u8>> = xmtsl
        .iter()
        .filter(|(send, b)| !*send && b[17] == 0x36)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(back.len(), 3);
    for b in back {
        let e = decode_answer::<PmaData>(b).unwrap_err();
        assert!(e.0.contains("not GetResp"), "{e}");
    }
    assert!(text("node2.lid5.xmtsl.1").contains("cannot query PortXmitDataSL"));
}

/// A path record query carrying a class, a service ID or a PKey: its
/// component mask bit and the field where IBA 15.2.5.16 puts it (the
/// bytes saquery sends for `--qos_class`, `--service_id`, `--pkey`).
#[test]
fn an_sa_path_record_get_carries_its_key() {
    let get = |key| Get {
        route: Route::Sa(1),
        attr: Attr::PathRecordBy(key),
        modifier: (0x16 << 16) | 0x52,
    };
    let mask = |m: &[u8; MAD_SIZE]| u64::from_be_bytes(m[48..56].try_into().unwrap());
    let m = encode_get(&get(PathKey::QosClass(106)), 1).unwrap();
    assert_eq!(mask(&m), 0x30 | (1 << 14));
    assert_eq!(&m[108..110], &[0x06, 0xa0], "QoSClass 106 above SL 0");
    assert_eq!(&m[96..100], &[0, 82, 0, 22], "DLID, SLID kept");
    let m = encode_get(&get(PathKey::ServiceId(0x0106_03db)), 1).unwrap();
    assert_eq!(mask(&m), 0x33);
    assert_eq!(&m[56..64], &[0, 0, 0, 0, 0x01, 0x06, 0x03, 0xdb]);
    let m = encode_get(&get(PathKey::Pkey(0xffff)), 1).unwrap();
    assert_eq!(mask(&m), 0x30 | (1 << 13));
    assert_eq!(&m[106..108], &[0xff, 0xff]);
    assert_eq!(Attr::PathRecordBy(PathKey::Pkey(1)).id(), 0x35);
}
