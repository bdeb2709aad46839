//! The fabric verdict (`qoslane fabric audit --verdict FILE`), pure: per
//! level, the HCA ports whose traffic takes an egress port the level is not
//! carried on ([`reach`]), each with the line that names the place — the
//! document the audit host writes on a shared filesystem — and what a node
//! takes from it for its grants ([`take_in`]: the `fabric path` scope).
//!
//! The document is versioned ([`VERSION`]) and deterministic: levels in the
//! mapping's order, ports by GUID and port, lines sorted; only `made`,
//! `made_ms` and `host` tell two audits of the same fabric apart. A port
//! the audit could not read is listed as unread for every level, never as
//! a loss; a link that is not Active is no loss either (the routes go
//! round it; the audit's own output says it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Sweep;
use super::reach::{HcaPort, Reach};
use crate::fabric::judge::lane::{self, Lane};
use crate::fabric::tables::{NodeType, Topology};
use crate::grant::{Findings, PathRead};

/// The schema this qoslane writes and reads.
pub const VERSION: u32 = 1;

/// The document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathVerdict {
    pub version: u32,
    /// When the audit started (RFC 3339, and ms since the Unix epoch).
    pub made: String,
    pub made_ms: u64,
    /// The host the audit ran on.
    pub host: String,
    /// The mapping the levels are of.
    pub mapping_sha256: String,
    /// Every HCA port of the audited topology: a node that finds none of
    /// its ports here was not in the audit's fabric.
    pub hcas: Vec<PathPort>,
    pub levels: Vec<PathLevel>,
}

/// An HCA port named by the verdict.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathPort {
    /// The GUID `ibnetdiscover -p` prints for it (the HCA's node GUID).
    pub guid: String,
    pub port: u32,
    /// The node description (`node3 HCA-1`).
    pub node: String,
}

/// One level: the HCA ports that lose it, and those the audit could not
/// judge for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathLevel {
    pub level: String,
    pub sl: u8,
    pub lost: Vec<PathLoss>,
    pub unread: Vec<PathLoss>,
    /// The level's routes close a credit loop on its SL (the deadlock
    /// check, `routes.rs`): every HCA of the fabric loses it, the loop
    /// named switch by switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credit_loop: Option<String>,
    /// On a fabric whose SM gives paths their own SLs: what it means for
    /// the level (deadlock-free on its SL, or switched), a note on the
    /// nodes' grants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_note: Option<String>,
    /// The level takes each path record's SL (`path_sl: path_record`, its
    /// pinned SL closing a credit loop): the nodes grant it so, their
    /// TaskProlog exporting the path-record switches and no SL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_record_sl: bool,
}

/// An HCA port and the lines that name where its traffic is not carried
/// (or not read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathLoss {
    #[serde(flatten)]
    pub at: PathPort,
    pub lines: Vec<String>,
}

impl PathPort {
    fn of(h: &HcaPort) -> Self {
        Self {
            guid: h.guid.clone(),
            port: h.port,
            node: h.name.clone(),
        }
    }
}

/// Who made the verdict, and when.
#[derive(Debug)]
pub struct Made<'a> {
    pub time: &'a str,
    pub ms: u64,
    pub host: &'a str,
    pub mapping_sha256: &'a str,
}

/// The verdict of a sweep.
pub fn build(sweep: &Sweep, made: &Made<'_>) -> PathVerdict {
    let topo = &sweep.topology;
    let reach = Reach::new(topo);
    let mut unread: BTreeMap<PathPort, Vec<String>> = BTreeMap::new();
    for u in &sweep.unread {
        let Some(guid) = guid_of(topo, u.kind, u.lid, u.port) else {
            continue;
        };
        let line = format!(
            "{}: not read ({})",
            place(&reach, u.kind, &u.name, guid, u.port, &[]),
            u.error
        );
        for h in reach.of_egress(u.kind, guid, u.port, &[]) {
            unread
                .entry(PathPort::of(&h))
                .or_default()
                .push(line.clone());
        }
    }
    let levels = sweep
        .levels
        .iter()
        .map(|l| {
            let mut lost: BTreeMap<PathPort, Vec<String>> = BTreeMap::new();
            for f in l.problems().filter(|f| f.lane != Lane::LinkDown) {
                let what = lane::short(f.sl, f.vl, f.lane, l.virtual_lane, f.oper_vls);
                let ins: &[u32] = if f.every_in { &[] } else { &f.in_ports };
                for &out in &f.out_ports {
                    let Some(guid) = guid_of(topo, f.kind, f.lid, out) else {
                        continue;
                    };
                    let line =
                        format!("{}: {what}", place(&reach, f.kind, &f.name, guid, out, ins));
                    for h in reach.of_egress(f.kind, guid, out, ins) {
                        lost.entry(PathPort::of(&h)).or_default().push(line.clone());
                    }
                }
            }
            PathLevel {
                level: l.level.clone(),
                sl: l.sl,
                lost: losses(lost),
                unread: losses(unread.clone()),
                credit_loop: credit_loop(sweep, &l.level),
                path_note: safety_of(sweep, &l.level).and_then(|x| sweep.deadlock.path_note(x)),
                path_record_sl: safety_of(sweep, &l.level)
                    .is_some_and(|x| sweep.deadlock.switched(x)),
            }
        })
        .collect();
    PathVerdict {
        version: VERSION,
        made: made.time.to_owned(),
        made_ms: made.ms,
        host: made.host.to_owned(),
        mapping_sha256: made.mapping_sha256.to_owned(),
        hcas: reach.hcas().iter().map(PathPort::of).collect(),
        levels,
    }
}

/// The level's credit loop, in the deadlock check's words, when it has one
/// and runs on it (not switched to each path record's SL).
fn credit_loop(sweep: &Sweep, level: &str) -> Option<String> {
    safety_of(sweep, level)
        .filter(|l| sweep.deadlock.refuses(l))
        .and_then(|l| l.safety.as_ref())
        .map(crate::fabric::judge::deadlock::Safety::words)
}

fn safety_of<'a>(sweep: &'a Sweep, level: &str) -> Option<&'a super::routes::LevelSafety> {
    sweep.deadlock.levels.iter().find(|l| l.level == level)
}

fn losses(m: BTreeMap<PathPort, Vec<String>>) -> Vec<PathLoss> {
    m.into_iter()
        .map(|(at, mut lines)| {
            lines.sort();
            lines.dedup();
            PathLoss { at, lines }
        })
        .collect()
}

/// The GUID of the node of `kind` with `lid` that has `port`.
fn guid_of(topo: &Topology, kind: NodeType, lid: u16, port: u32) -> Option<&str> {
    topo.ports
        .iter()
        .find(|p| p.end.kind == kind && p.end.lid == lid && p.end.port == port)
        .map(|p| p.end.guid.as_str())
}

/// Where: `fabric path: spine1 port 2 -> leaf2` (`(from port 1)` when only
/// some in ports), an HCA's own port `fabric path: node3 HCA-1 port 1`.
fn place(
    reach: &Reach<'_>,
    kind: NodeType,
    name: &str,
    guid: &str,
    port: u32,
    ins: &[u32],
) -> String {
    if kind == NodeType::Hca {
        return format!("fabric path: {name} port {port}");
    }
    let to = reach
        .remote(guid, port)
        .map_or_else(String::new, |e| format!(" -> {}", e.name));
    let from = if ins.is_empty() {
        String::new()
    } else {
        format!(" (from port {})", lane::join_ports(ins))
    };
    format!("fabric path: {name} port {port}{to}{from}")
}

/// The document as the file holds it (pretty JSON, a newline at the end).
pub fn render(v: &PathVerdict) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// One of this node's IB ports, as the verdict names ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnPort {
    /// `0x…`, 16 hex digits (sysfs `node_guid`).
    pub guid: String,
    pub port: u32,
}

/// What the verdict read (or why it could not be) says of `mine` for each
/// of `levels`: a loss is a problem (the level's grant follows its
/// policy), an unread port is unread; a verdict of another mapping, older
/// than `max_age_ms` at `now_ms`, of another version or that names none of
/// `mine` is unread for every level (said, never a loss).
pub fn take_in(
    read: Result<PathVerdict, String>,
    mine: &[OwnPort],
    mapping_sha256: &str,
    levels: &[&str],
    now_ms: u64,
    max_age_ms: u64,
) -> PathRead {
    let unread = |at_ms: u64, why: String| PathRead {
        at_ms,
        max_age_ms,
        levels: levels
            .iter()
            .map(|l| {
                let found = Findings {
                    unread: Some(why.clone()),
                    ..Findings::default()
                };
                ((*l).to_owned(), found)
            })
            .collect(),
    };
    let v = match read {
        Ok(v) => v,
        Err(why) => {
            return unread(
                now_ms,
                format!("the fabric verdict could not be read: {why}"),
            );
        }
    };
    if let Some((at_ms, why)) = ignored(&v, mine, mapping_sha256, now_ms, max_age_ms) {
        return unread(at_ms, why);
    }
    let of = format!("the fabric verdict of {} ({})", v.host, v.made);
    let is_mine = |p: &PathPort| is_mine(mine, p);
    let mut out = PathRead {
        at_ms: v.made_ms,
        max_age_ms,
        levels: BTreeMap::new(),
    };
    for l in levels {
        let mut found = Findings::default();
        match v.levels.iter().find(|x| x.level == *l) {
            None => found.unread = Some(format!("{of} does not judge level {l}")),
            Some(x) => {
                if let Some(cycle) = &x.credit_loop {
                    found.problems.push(format!(
                        "fabric path: SL {} (every route of the level): {cycle}",
                        x.sl
                    ));
                }
                if let Some(note) = &x.path_note {
                    found.warnings.push(format!("fabric path: {note}"));
                }
                found.path_record_sl = x.path_record_sl;
                for loss in x.lost.iter().filter(|e| is_mine(&e.at)) {
                    found.problems.extend(loss.lines.iter().cloned());
                }
                let unread: Vec<&str> = x
                    .unread
                    .iter()
                    .filter(|e| is_mine(&e.at))
                    .flat_map(|e| e.lines.iter().map(String::as_str))
                    .collect();
                if !unread.is_empty() {
                    found.unread = Some(unread.join("; "));
                }
            }
        }
        found.problems.dedup();
        out.levels.insert((*l).to_owned(), found);
    }
    out
}

/// Whether `mine` is one of `p`.
fn is_mine(mine: &[OwnPort], p: &PathPort) -> bool {
    mine.iter()
        .any(|m| m.port == p.port && m.guid.eq_ignore_ascii_case(&p.guid))
}

/// Why the verdict says nothing of this node (and the time to record):
/// another schema version, another mapping, too old, no ports of ours to
/// look for, or none of them in the audited fabric.
fn ignored(
    v: &PathVerdict,
    mine: &[OwnPort],
    mapping_sha256: &str,
    now_ms: u64,
    max_age_ms: u64,
) -> Option<(u64, String)> {
    let of = format!("the fabric verdict of {} ({})", v.host, v.made);
    if v.version != VERSION {
        return Some((
            now_ms,
            format!(
                "{of} is of schema version {}; this qoslane reads {VERSION}: ignored",
                v.version
            ),
        ));
    }
    if v.mapping_sha256 != mapping_sha256 {
        return Some((
            now_ms,
            format!(
                "{of} is of mapping sha256 {}, not of the one in force ({}): ignored",
                short_sha(&v.mapping_sha256),
                short_sha(mapping_sha256)
            ),
        ));
    }
    let age = now_ms.saturating_sub(v.made_ms);
    if age > max_age_ms {
        return Some((
            now_ms,
            format!(
                "{of} is {} s old (more than {} s): ignored; is the audit still running?",
                age / 1000,
                max_age_ms / 1000
            ),
        ));
    }
    if mine.is_empty() {
        return Some((now_ms, "this node's IB ports could not be read".to_owned()));
    }
    if !v.hcas.iter().any(|p| is_mine(mine, p)) {
        let guids: Vec<String> = mine
            .iter()
            .map(|m| format!("{} port {}", m.guid, m.port))
            .collect();
        return Some((
            v.made_ms,
            format!(
                "{of} names none of this node's ports ({}): not in the audited fabric",
                guids.join(", ")
            ),
        ));
    }
    None
}

fn short_sha(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::sweep::judge::{Finding, LevelSweep};
    use crate::fabric::sweep::reach::tests::rig;
    use crate::fabric::sweep::{Sweep, Unread};
    use crate::fabric::tables::VlRange;

    fn finding(t: &Topology, switch: &str, ins: &[u32], out: u32, lane: Lane) -> Finding {
        let end = &t.ports.iter().find(|p| p.end.name == switch).unwrap().end;
        Finding {
            lane,
            sl: 3,
            vl: 15,
            kind: end.kind,
            name: end.name.clone(),
            lid: end.lid,
            oper_vls: VlRange::from_code(4).unwrap(),
            every_in: ins.is_empty(),
            in_ports: ins.to_vec(),
            out_ports: vec![out],
            message: String::new(),
        }
    }

    fn sweep(t: Topology, findings: Vec<Finding>, unread: Vec<Unread>) -> Sweep {
        let level = |name: &str, sl: u8, findings: Vec<Finding>| LevelSweep {
            level: name.to_owned(),
            sl,
            virtual_lane: None,
            pairs: BTreeMap::new(),
            findings,
            ports: Vec::new(),
        };
        Sweep {
            switches: 5,
            hcas: 6,
            ports_read: 0,
            not_routed: None,
            unread,
            levels: vec![
                level("mission-critical", 3, findings),
                level("bulk", 1, Vec::new()),
            ],
            duration_ms: 0,
            workers: 1,
            reader: "smpquery",
            fallback: None,
            topology: t,
            xmit_wait: Vec::new(),
            wait_levels: Vec::new(),
            deadlock: super::super::routes::Routes::default(),
            sm_policy: super::super::sm_classes::ClassCheck::default(),
            cost: super::super::Cost::default(),
            xmit_wait_unread: Vec::new(),
            wait_ports: Vec::new(),
        }
    }

    const MADE: Made<'static> = Made {
        time: "2026-12-06T05:00:00Z",
        ms: 1_000_000,
        host: "sm1",
        mapping_sha256: "abcdef0123456789",
    };

    fn nodes(v: &PathLevel) -> Vec<&str> {
        v.lost.iter().map(|l| l.at.node.as_str()).collect()
    }

    #[test]
    fn a_spine_dropping_a_level_toward_leaf2_costs_leaf2s_hcas_that_level_only() {
        let t = rig("net.2level");
        let f = finding(&t, "spine1", &[], 2, Lane::Dropped);
        let v = build(&sweep(t, vec![f], Vec::new()), &MADE);
        assert_eq!(nodes(&v.levels[0]), ["node3 HCA-1", "node4 HCA-1"]);
        assert_eq!(
            v.levels[0].lost[0].lines,
            [
                "fabric path: spine1 port 2 -> leaf2: SL 3 -> VL 15 (dropped: VL 15 is the management lane)"
            ]
        );
        assert!(v.levels[1].lost.is_empty() && v.levels[1].unread.is_empty());
        assert_eq!(v.hcas.len(), 6);
        // Deterministic: the same sweep, the same bytes.
        let t = rig("net.2level");
        let f = finding(&t, "spine1", &[], 2, Lane::Dropped);
        assert_eq!(
            render(&build(&sweep(t, vec![f], Vec::new()), &MADE)),
            render(&v)
        );
        let back: PathVerdict = serde_json::from_str(&render(&v)).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn a_link_down_is_no_loss_and_an_unread_port_is_unread_for_every_level() {
        let t = rig("net.2level");
        let down = finding(&t, "spine1", &[], 2, Lane::LinkDown);
        let leaf3 = t
            .ports
            .iter()
            .find(|p| p.end.name == "leaf3")
            .unwrap()
            .end
            .clone();
        let u = Unread {
            kind: NodeType::Switch,
            name: "leaf3".into(),
            lid: leaf3.lid,
            port: 3,
            error: "timeout".into(),
        };
        let v = build(&sweep(t, vec![down], vec![u]), &MADE);
        for l in &v.levels {
            assert!(l.lost.is_empty());
            let who: Vec<&str> = l.unread.iter().map(|u| u.at.node.as_str()).collect();
            assert_eq!(who, ["node5 HCA-1", "node6 HCA-1"]);
            assert_eq!(
                l.unread[0].lines,
                ["fabric path: leaf3 port 3 -> spine1: not read (timeout)"]
            );
        }
    }

    #[test]
    fn a_credit_loop_on_a_levels_sl_costs_every_node_that_level() {
        use crate::fabric::judge::deadlock::{Hop, Safety};
        use crate::fabric::sweep::routes::LevelSafety;
        let t = rig("net.ring5");
        let mut s = sweep(t, Vec::new(), Vec::new());
        let hop = |switch: &str, port: u32| Hop {
            switch: switch.to_owned(),
            lid: 1,
            port,
            vl: 0,
        };
        s.deadlock.levels.push(LevelSafety {
            level: "mission-critical".into(),
            sl: 3,
            safety: Some(Safety::Cycle {
                hops: vec![hop("sw1", 2), hop("sw2", 2), hop("sw3", 2)],
                unknown_rows: 0,
            }),
            path_sl: crate::mapping::PathSl::Pinned,
        });
        let v = build(&s, &MADE);
        let cycle = v.levels[0].credit_loop.clone().unwrap();
        assert!(cycle.contains("sw1"), "{cycle}");
        assert_eq!(v.levels[1].credit_loop, None);
        assert!(
            !render(&v).contains("\"credit_loop\": null"),
            "absent, not null"
        );
        let levels = ["mission-critical", "bulk"];
        for h in &v.hcas {
            let mine = [OwnPort {
                guid: h.guid.clone(),
                port: h.port,
            }];
            let got = take_in(
                Ok(v.clone()),
                &mine,
                MADE.mapping_sha256,
                &levels,
                MADE.ms,
                60_000,
            );
            assert_eq!(
                got.levels["mission-critical"].problems,
                [format!(
                    "fabric path: SL 3 (every route of the level): {cycle}"
                )]
            );
            assert_eq!(got.levels["bulk"], Findings::default());
        }
    }

    /// On a fabric whose SM gives paths their own SLs (its path records
    /// disagree): a pinned level with a loop is refused as before, with
    /// `path_sl: path_record` it is switched (no problem, the nodes told to
    /// take each path record's SL), and an acyclic one is granted with a
    /// note that the SM routes by path SLs.
    #[test]
    fn on_sl_per_path_routing_a_loop_refuses_a_pinned_level_switches_the_other_and_notes_the_free()
    {
        use crate::fabric::judge::deadlock::{Hop, Safety};
        use crate::fabric::sweep::routes::LevelSafety;
        use crate::mapping::PathSl;
        let t = rig("net.ring5");
        let mut s = sweep(t, Vec::new(), Vec::new());
        let hops: Vec<Hop> = ["sw1", "sw2", "sw3"]
            .iter()
            .map(|n| Hop {
                switch: (*n).to_owned(),
                lid: 1,
                port: 2,
                vl: 0,
            })
            .collect();
        let cycle = Safety::Cycle {
            hops,
            unknown_rows: 0,
        };
        let free = Safety::DeadlockFree {
            channels: 5,
            dependencies: 4,
            unknown_rows: 0,
        };
        let mut level = |name: &str, safety: &Safety, path_sl| {
            s.deadlock.levels.push(LevelSafety {
                level: name.into(),
                sl: 3,
                safety: Some(safety.clone()),
                path_sl,
            });
        };
        level("mission-critical", &cycle, PathSl::PathRecord);
        level("bulk", &free, PathSl::Pinned);
        // One SL on every path: the loop refuses even a path_record level.
        s.deadlock.path_sls.insert(0, 10);
        let v = build(&s, &MADE);
        assert!(v.levels[0].credit_loop.is_some() && !v.levels[0].path_record_sl);
        assert_eq!(v.levels[1].path_note, None);
        // The SM assigns SLs per path.
        s.deadlock.path_sls.insert(1, 4);
        let v = build(&s, &MADE);
        let (mc, bulk) = (&v.levels[0], &v.levels[1]);
        assert_eq!(mc.credit_loop, None);
        assert!(mc.path_record_sl);
        assert!(
            mc.path_note
                .as_deref()
                .is_some_and(|n| n.contains("credit loop")
                    && n.contains("sw1 port 2")
                    && n.contains("path_sl: path_record")),
            "{mc:?}"
        );
        assert_eq!(
            bulk.path_note.as_deref(),
            Some(
                "the SM routes by path SLs: SL 3 of level bulk is deadlock-free on this \
                 routing, granted on it"
            )
        );
        assert!(!s.any_problem(), "a switched level is no failure");
        let mine = [OwnPort {
            guid: v.hcas[0].guid.clone(),
            port: v.hcas[0].port,
        }];
        let got = take_in(
            Ok(v.clone()),
            &mine,
            MADE.mapping_sha256,
            &["mission-critical", "bulk"],
            MADE.ms,
            60_000,
        );
        let mc = &got.levels["mission-critical"];
        assert!(mc.problems.is_empty() && mc.path_record_sl, "{mc:?}");
        assert_eq!(got.levels["bulk"].warnings.len(), 1);
        assert!(!got.levels["bulk"].path_record_sl);
        // The same loop on a pinned level: refused, named.
        s.deadlock.levels[0].path_sl = PathSl::Pinned;
        let v = build(&s, &MADE);
        assert!(v.levels[0].credit_loop.is_some() && !v.levels[0].path_record_sl);
        assert!(s.any_problem());
    }

    fn own(v: &PathVerdict, name: &str) -> Vec<OwnPort> {
        let h = v.hcas.iter().find(|h| h.node == name).unwrap();
        vec![OwnPort {
            guid: h.guid.to_uppercase().replace("0X", "0x"),
            port: h.port,
        }]
    }

    #[test]
    fn a_node_takes_its_own_losses_and_ignores_a_stale_or_foreign_verdict() {
        let t = rig("net.2level");
        let f = finding(&t, "spine1", &[], 2, Lane::Dropped);
        let v = build(&sweep(t, vec![f], Vec::new()), &MADE);
        let levels = ["mission-critical", "bulk"];
        let sha = MADE.mapping_sha256;
        let now = MADE.ms + 60_000;
        let got = take_in(
            Ok(v.clone()),
            &own(&v, "node3 HCA-1"),
            sha,
            &levels,
            now,
            3_600_000,
        );
        assert_eq!(got.at_ms, MADE.ms);
        let mc = &got.levels["mission-critical"];
        assert_eq!(mc.problems.len(), 1);
        assert!(mc.problems[0].starts_with("fabric path: spine1 port 2 -> leaf2: SL 3 -> VL 15"));
        assert_eq!(got.levels["bulk"], Findings::default());
        let got = take_in(
            Ok(v.clone()),
            &own(&v, "node1 HCA-1"),
            sha,
            &levels,
            now,
            3_600_000,
        );
        assert!(got.levels.values().all(|f| *f == Findings::default()));
        // Stale, another mapping, unreadable, not in the fabric: unread.
        for (read, mine, sha, now) in [
            (
                Ok(v.clone()),
                own(&v, "node3 HCA-1"),
                sha,
                MADE.ms + 3_600_001,
            ),
            (Ok(v.clone()), own(&v, "node3 HCA-1"), "0000", now),
            (Err("gone".to_owned()), own(&v, "node3 HCA-1"), sha, now),
            (
                Ok(v.clone()),
                vec![OwnPort {
                    guid: "0x9".into(),
                    port: 1,
                }],
                sha,
                now,
            ),
            (Ok(v.clone()), Vec::new(), sha, now),
        ] {
            let got = take_in(read, &mine, sha, &levels, now, 3_600_000);
            for f in got.levels.values() {
                assert!(f.problems.is_empty() && f.unread.is_some(), "{got:?}");
            }
        }
        let got = take_in(
            Ok(v.clone()),
            &own(&v, "node3 HCA-1"),
            sha,
            &levels,
            MADE.ms + 3_600_001,
            3_600_000,
        );
        assert!(
            got.levels["bulk"]
                .unread
                .as_deref()
                .unwrap()
                .contains("3600 s old (more than 3600 s)")
        );
    }
}
