//! `qoslane fabric watch`: the fabric verdict kept current from the OpenSM
//! event plugin's records (`smplugin/`), on the SM host.
//!
//! Every `--poll-ms` the spool file is taken (`nodeio::spool`: rename,
//! bounded read, the late tail read at the next round), its records decoded
//! and followed (`fabric/sweep/events.rs`: what they ask for); when the
//! SM's sweep ended (`SUBNET_UP`, `UCAST_ROUTING_DONE`), or records came
//! and then nothing for `--quiet-ms`, the watcher acts:
//!
//! - a **full audit** (the same sweep as `fabric audit`), at start and
//!   when the records ask for one (the SM restarted, records were lost or
//!   did not check, a heavy sweep no trap started), when the mapping in
//!   force changed, and every `--full-every` seconds when asked;
//! - else a **re-audit**: the topology read again when a trap was seen,
//!   and only the switches the SM changed (`LFT_CHANGE`) and the nodes
//!   whose links changed read again — their PortInfo, SL2VL rows, VLArb
//!   and forwarding tables — through the remembering reader
//!   (`fabric/read/memo.rs`), everything else answered from the last
//!   reading. The sweep, the judges and the verdict are the audit's own:
//!   one decision, whatever read the facts.
//!
//! Then the verdict is written where `fabric audit --verdict` writes it
//! (atomically), so the nodes' `health`/`sync` take it in, and one JSON line
//! says what was done: why, what was read and kept, SMPs sent, and the time
//! from the SM's record to the verdict written. A re-audit also reuses the
//! last act's judgements where their inputs are the same (`sweep::Judged`:
//! a port's levels when its reading is the last one's, the deadlock check
//! when no forwarding table, SL2VL row or cable changed); a full audit
//! judges afresh. Memory stays bounded: per port of the fabric one reading
//! (the memo's, and the judgements' copy) and each level's groups, the
//! records of one round (at most [`READ_LIMIT`] bytes), a bounded set of
//! switches named.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nodeio::spool::Spool;

mod acted;
mod placement;

use acted::{Acted, Counts};
use placement::place;

use super::{Ctx, mapping, reader, via, write_verdict};
use crate::cli::WatchArgs;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::read::memo::{Memo, guid_value};
use crate::fabric::read::smp_batch;
use crate::fabric::sweep::events::{self, Action, Tracker, Why};
use crate::fabric::sweep::{self, Judged, Sweep, verdict};
use crate::fabric::tables::Topology;
use crate::fabric::{PortId, Reader};
use crate::log;

/// The live file the plugin appends to, and the name a reader renames it to.
pub const LIVE: &str = "events";
pub const TAKEN: &str = "taken";
/// The most bytes of records read in one round (the plugin's default cap
/// is 1 MiB; more than this is a full audit).
pub const READ_LIMIT: usize = 8 << 20;
/// How long after a failed audit the next is tried.
const RETRY: Duration = Duration::from_secs(5);

/// What the watcher remembers between acts.
struct Last {
    /// The last audit found SL2VL rows that differ by port pair.
    per_pair: bool,
    /// Per Slurm node, the placed levels' features `fabric watch` took
    /// off its ActiveFeatures (sent again only when more are lost).
    withdrawn: BTreeMap<String, BTreeSet<String>>,
    topology: Topology,
    /// The nodes where the last audit found a level not carried (or a
    /// port unread): read again at every re-audit, since the SM's sweep
    /// may have repaired them (see [`problem_nodes`]).
    problems: BTreeSet<u64>,
    mapping_sha256: String,
    full_at: Instant,
}

/// Where an act writes its verdict and sends its SMPs from.
struct Target<'a> {
    verdict: &'a std::path::Path,
    via: Option<&'a PortId>,
}

pub fn run(ctx: &Ctx, args: &WatchArgs) -> Result<ExitClass> {
    let verdict_file = args
        .verdict
        .clone()
        .or_else(|| ctx.paths.fabric_verdict.clone())
        .ok_or_else(|| {
            Error::Usage(
                "fabric watch: no verdict to write: give --verdict FILE or set \
                 QOSLANE_FABRIC_VERDICT"
                    .into(),
            )
        })?;
    let via = via(&args.read);
    let (inner, fallback, _) = reader(ctx, &args.read, via.as_ref())?;
    if let Some(why) = fallback {
        log::warn(&format!(
            "fabric watch: reading by smpquery (in process unavailable: {why})"
        ));
    }
    let memo = Memo::new(inner);
    let spool_dir = args.spool.clone().unwrap_or_else(|| ctx.paths.sm_spool());
    let mut spool = Spool::new(&ctx.paths.root, &spool_dir);
    let mut tracker = Tracker::new();
    let mut spool_failing = false;
    let mut last: Option<Last> = None;
    let mut kept = Judged::default();
    let mut heard = Instant::now().checked_sub(Duration::from_millis(args.quiet_ms));
    let mut not_before = Instant::now();
    let mut counts = Counts::default();
    let poll = Duration::from_millis(args.poll_ms);
    let quiet = Duration::from_millis(args.quiet_ms);
    log::info(&format!(
        "fabric watch: following {} (every {} ms), verdict {}",
        spool_dir.display(),
        args.poll_ms,
        verdict_file.display()
    ));
    loop {
        let round = take(&mut spool, &mut tracker, &mut spool_failing);
        if round {
            heard = Some(Instant::now());
        }
        if let (Some(l), true) = (&last, args.full_every > 0)
            && l.full_at.elapsed() >= Duration::from_secs(args.full_every)
        {
            tracker.insist(Why::Timer);
        }
        let is_quiet = heard.is_none_or(|h| h.elapsed() >= quiet);
        if tracker.due(is_quiet) && Instant::now() >= not_before {
            let (action, batch) = tracker.take();
            let to = Target {
                verdict: &verdict_file,
                via: via.as_ref(),
            };
            match act(
                ctx,
                args,
                &memo,
                &to,
                (&mut last, &mut kept),
                &action,
                &batch,
            ) {
                Ok((acted, sweep)) => {
                    counts.add(&acted);
                    say(&acted);
                    if let Some(file) = &args.textfile {
                        let text = format!(
                            "{}{}",
                            super::render(Some(&sweep), SystemTime::now()),
                            counts.render(&acted)
                        );
                        if let Err(e) = publish(ctx, file, &text) {
                            log::warn(&format!("fabric watch: the textfile: {e}"));
                        }
                    }
                    if args.once {
                        return Ok(ExitClass::Ok);
                    }
                }
                Err(e) => {
                    counts.failed += 1;
                    log::error(&format!("fabric watch: the audit failed: {e}"));
                    if args.once {
                        return Err(e);
                    }
                    // Nothing of this batch is lost: the next act is a
                    // full audit, after a pause.
                    tracker.insist(Why::Failed);
                    not_before = Instant::now() + RETRY;
                }
            }
        }
        std::thread::sleep(poll);
    }
}

/// One round of the spool: its records fed to the tracker; whether any
/// came. A spool that cannot be taken (`failing`: since the last round
/// that could) asks one full audit when it starts failing and is no record
/// heard: the watcher still goes quiet and acts (its full audit, `--once`,
/// `--full-every`) while it fails.
fn take(spool: &mut Spool, tracker: &mut Tracker, failing: &mut bool) -> bool {
    match spool.take(LIVE, TAKEN, READ_LIMIT) {
        Ok(round) => {
            if std::mem::take(failing) {
                log::info("fabric watch: the spool is read again");
            }
            // The last file's tail, then the file taken now: each decoded
            // from its own start (a record never spans the two), fed as
            // one round (a hole the tail leaves open may be closed by a
            // record late into the file taken now).
            let (mut records, bad_a) = events::decode_all(&round.bytes[..round.start]);
            let (b, bad_b) = events::decode_all(&round.bytes[round.start..]);
            records.extend(b);
            if round.truncated {
                tracker.insist(Why::TooMuch);
            }
            tracker.feed(&records, bad_a + bad_b);
            !records.is_empty() || bad_a + bad_b > 0
        }
        Err(e) => {
            if !std::mem::replace(failing, true) {
                log::warn(&format!(
                    "fabric watch: the spool: {e} (a full audit; said once until it is read again)"
                ));
                tracker.insist(Why::Unreadable);
            }
            false
        }
    }
}

/// What a re-audit reads, set on the memo.
struct Scoped {
    topology: Topology,
    /// How long the topology took to read (0: kept).
    topology_ms: u64,
    named: usize,
    topology_read: bool,
    nodes: usize,
    problems: usize,
}

/// The memo's scope for this act, and the topology to sweep: everything
/// (a full audit: `previous` is `None`), or what a re-audit reads.
fn scope(
    ctx: &Ctx,
    memo: &Memo<dyn Reader>,
    via: Option<&PortId>,
    deadline: &Deadline,
    action: &Action,
    previous: Option<Last>,
) -> Result<Scoped> {
    let started = Instant::now();
    let (Action::Switches { guids, topology }, Some(p)) = (action, previous) else {
        memo.all();
        return Ok(Scoped {
            topology: memo.topology(&ctx.paths.ibnetdiscover, via, deadline)?,
            topology_ms: millis(started),
            named: 0,
            topology_read: true,
            nodes: 0,
            problems: 0,
        });
    };
    let topo = if *topology {
        memo.topology(&ctx.paths.ibnetdiscover, via, deadline)?
    } else {
        p.topology.clone()
    };
    let topology_ms = if *topology { millis(started) } else { 0 };
    // Read whole: the ends of links that changed, where the last audit
    // found a problem, and — when the SL2VL layout varies by port pair
    // (one row is no sentinel then) — the switches named.
    let mut read: BTreeSet<u64> = changed_nodes(&p.topology, &topo);
    read.extend(p.problems.iter().copied());
    if p.per_pair {
        read.extend(guids.iter().copied());
    }
    // The switches the SM rerouted: their forwarding tables read, their
    // ports checked (PortInfo, one SL2VL row, VLArb) and read whole where
    // they differ.
    let checked: BTreeSet<u64> = guids.difference(&read).copied().collect();
    memo.only(&read, &checked, &topo);
    Ok(Scoped {
        topology: topo,
        topology_ms,
        named: guids.len(),
        topology_read: *topology,
        nodes: read.len() + checked.len(),
        problems: p.problems.len(),
    })
}

fn millis(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A full audit or a re-audit, and the verdict written. `kept`: the last
/// sweep's judgements (a full audit starts without them).
fn act(
    ctx: &Ctx,
    args: &WatchArgs,
    memo: &Memo<dyn Reader>,
    to: &Target<'_>,
    (last, kept): (&mut Option<Last>, &mut Judged),
    action: &Action,
    batch: &events::Batch,
) -> Result<(Acted, Sweep)> {
    let via = to.via;
    let started = Instant::now();
    let started_at = SystemTime::now();
    let smps = smp_batch::sent();
    let deadline = Deadline::after(Duration::from_secs(args.read.timeout));
    let (loaded, _) = mapping(ctx)?;
    let previous = last.take();
    let withdrawn_before = previous
        .as_ref()
        .map(|p| p.withdrawn.clone())
        .unwrap_or_default();
    let full_before = previous.as_ref().map(|p| p.full_at);
    let (why, previous) = reason(action, previous, &loaded.sha256);
    let scoped = scope(ctx, memo, via, &deadline, action, previous)?;
    let (topology, named, topology_read, nodes, problems_read) = (
        scoped.topology,
        scoped.named,
        scoped.topology_read,
        scoped.nodes,
        scoped.problems,
    );
    let full = why.is_some();
    if full {
        *kept = Judged::default();
    }
    let sweep = sweep::sweep_again(
        &topology,
        memo,
        &loaded.mapping,
        usize::from(args.read.workers),
        &deadline,
        kept,
    );
    let passed = memo.counted();
    write_verdict(ctx, to.verdict, &sweep, &loaded.sha256, started_at)?;
    let sm_to_verdict_ms = since_sm(batch);
    let v = verdict::build(
        &sweep,
        &verdict::Made {
            time: "",
            ms: 0,
            host: "",
            mapping_sha256: &loaded.sha256,
        },
    );
    let mut acted = Acted {
        audit: if full { "full" } else { "switches" },
        why,
        records: batch.records,
        switches_named: named,
        topology_read,
        nodes_read: nodes,
        problem_nodes: problems_read,
        egress_read: passed.egress,
        egress_checked: passed.egress_checked,
        egress_kept: passed.egress_kept,
        forwarding_read: passed.forwarding,
        forwarding_kept: passed.forwarding_kept,
        smps: smp_batch::sent() - smps,
        topology_ms: scoped.topology_ms,
        ports_judged: sweep.cost.ports_judged,
        judge_ms: sweep.cost.judge_ms,
        deadlock_kept: sweep.deadlock.kept,
        deadlock_ms: sweep.deadlock.judge_ms,
        audit_ms: millis(started),
        sm_to_verdict_ms,
        lost: v
            .levels
            .iter()
            .map(|l| (l.level.clone(), l.lost.len()))
            .collect(),
        unread: sweep.unread.len(),
        placement_sent: 0,
        placement_failed: 0,
    };
    let problems = problem_nodes(&sweep, &topology);
    let (withdrawn, placement_sent, placement_failed) =
        place(ctx, &loaded.mapping, &v, withdrawn_before);
    acted.placement_sent = placement_sent;
    acted.placement_failed = placement_failed;
    *last = Some(Last {
        per_pair: !sweep.deadlock.per_pair_sl2vl.is_empty(),
        withdrawn,
        problems,
        topology,
        mapping_sha256: loaded.sha256.clone(),
        // a re-audit keeps the last full audit's time (the timer counts
        // from it)
        full_at: full_before.filter(|_| !full).unwrap_or_else(Instant::now),
    });
    Ok((acted, sweep))
}

/// Why a full audit (`None`: a re-audit), and the last audit's memory a
/// re-audit starts from: none at the first act or when the mapping in
/// force changed.
fn reason(action: &Action, previous: Option<Last>, sha256: &str) -> (Option<String>, Option<Last>) {
    let why = match action {
        Action::Full(why) => Some(why.to_string()),
        Action::Switches { .. } => None,
    };
    match previous {
        Some(p) if p.mapping_sha256 != sha256 => {
            (Some("the mapping in force changed".into()), None)
        }
        None => (why.or_else(|| Some("no audit yet".into())), None),
        Some(_) if why.is_some() => (why, None),
        p => (None, p),
    }
}

/// Milliseconds from the SM's record (the sweep's end, else the batch's
/// first record) to now, the verdict just written.
fn since_sm(batch: &events::Batch) -> Option<f64> {
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    #[expect(
        clippy::cast_precision_loss,
        reason = "nanoseconds between two records of one day fit an f64 to the microsecond"
    )]
    batch
        .done_ns
        .or(batch.first_ns)
        .filter(|&t| t > 0 && u128::from(t) <= now_ns)
        .map(|t| (now_ns - u128::from(t)) as f64 / 1e6)
}

/// The nodes (GUIDs) where the sweep found a level not carried, or a port
/// it could not read. OpenSM names no port whose SL2VL or VLArb it set,
/// and its heavy sweep writes every port's tables from one configuration:
/// with the options unchanged (a change is a restart, START, or a SIGHUP,
/// a sweep no trap started: both full audits), a port where every level
/// was carried stays so, and what a sweep can change is where the fabric
/// differed from the SM's configuration — where the last audit found a
/// problem (a table broken behind the SM's back, OperVLs that did not
/// follow `max_op_vls` until the link retrained), besides the links that
/// changed and the switches it rerouted. Measured on the rig
/// (tests/e2e/smreader.sh, b): a bounce's sweep rewrote the SL2VL of a
/// spine it named in no `LFT_CHANGE`, one the last audit had found wrong.
pub fn problem_nodes(sweep: &Sweep, topo: &Topology) -> BTreeSet<u64> {
    let guid = |kind, lid| {
        topo.ports
            .iter()
            .find(|p| p.end.kind == kind && p.end.lid == lid)
            .and_then(|p| guid_value(&p.end.guid))
    };
    let findings = sweep
        .levels
        .iter()
        .flat_map(|l| l.findings.iter())
        .filter(|f| f.lane.is_problem())
        .filter_map(|f| guid(f.kind, f.lid));
    let unread = sweep.unread.iter().filter_map(|u| guid(u.kind, u.lid));
    findings.chain(unread).collect()
}

/// The nodes (GUIDs) with a link in one topology and not in the other:
/// both ends of a cable added, removed or moved.
pub fn changed_nodes(old: &Topology, new: &Topology) -> BTreeSet<u64> {
    let links = |t: &Topology| -> BTreeSet<(String, u32, String, u32)> {
        t.ports
            .iter()
            .filter_map(|p| {
                p.remote
                    .as_ref()
                    .map(|r| (p.end.guid.clone(), p.end.port, r.guid.clone(), r.port))
            })
            .collect()
    };
    let (a, b) = (links(old), links(new));
    a.symmetric_difference(&b)
        .flat_map(|(g, _, r, _)| [guid_value(g), guid_value(r)])
        .flatten()
        .collect()
}

/// The act's JSON line on stdout, and its words in the log.
fn say(a: &Acted) {
    let line = serde_json::to_string(a).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    let lost: Vec<String> = a
        .lost
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(l, n)| format!("{l} lost on {n} HCA ports"))
        .collect();
    log::info(&format!(
        "fabric watch: {} audit{} ({} switches named, {} nodes re-read): {} egress ports read, \
         {} checked, {} kept; {} forwarding tables read, {} kept; {} SMPs; {} ms{}; {}",
        a.audit,
        a.why
            .as_deref()
            .map_or_else(String::new, |w| format!(" ({w})")),
        a.switches_named,
        a.nodes_read,
        a.egress_read,
        a.egress_checked,
        a.egress_kept,
        a.forwarding_read,
        a.forwarding_kept,
        a.smps,
        a.audit_ms,
        a.sm_to_verdict_ms.map_or_else(String::new, |ms| format!(
            ", {ms:.0} ms after the SM's record"
        )),
        if lost.is_empty() {
            "every level carried".to_owned()
        } else {
            lost.join(", ")
        }
    ));
}

fn publish(ctx: &Ctx, file: &std::path::Path, text: &str) -> Result<()> {
    let file = std::path::absolute(file).map_err(Error::io("resolve", file))?;
    crate::state::fsutil::publish(&ctx.paths, &file, text, crate::state::PUBLIC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::tables::{DiscoveredPort, LinkEnd, NodeType};

    fn link(a: u64, ap: u32, b: u64, bp: u32) -> DiscoveredPort {
        let end = |g: u64, p: u32| LinkEnd {
            kind: NodeType::Switch,
            lid: 1,
            port: p,
            guid: format!("{g:#018x}"),
            name: String::new(),
        };
        DiscoveredPort {
            end: end(a, ap),
            remote: Some(end(b, bp)),
        }
    }

    /// A record of the plugin's format (smplugin/README.md).
    fn record(kind: u16, seq: u64, guid: u64) -> [u8; events::SIZE] {
        let mut b = [0u8; events::SIZE];
        b[0..4].copy_from_slice(&events::MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&events::FORMAT.to_le_bytes());
        b[6..8].copy_from_slice(&kind.to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        b[16..24].copy_from_slice(&0xfeed_u64.to_le_bytes());
        b[32..40].copy_from_slice(&guid.to_le_bytes());
        let c = events::check(&b);
        b[60..64].copy_from_slice(&c.to_le_bytes());
        b
    }

    fn spool_dir(mode: u32) -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    fn append(dir: &std::path::Path, records: &[[u8; events::SIZE]]) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(LIVE))
            .unwrap();
        for r in records {
            f.write_all(r).unwrap();
        }
    }

    #[test]
    fn a_record_late_into_the_next_file_closes_its_hole() {
        // seq 3's SM thread took its number before the reader's rename and
        // wrote after it, into the plugin's next file: the round that takes
        // that file closes the hole (the old file's empty tail, read first
        // in the same round, is no round of its own: it said Gap)
        let d = spool_dir(0o755);
        let mut spool = Spool::new(std::path::Path::new("/"), d.path());
        let mut tracker = Tracker::new();
        let mut failing = false;
        append(
            d.path(),
            &[record(64, 1, 0), record(6, 2, 0xa), record(6, 4, 0xb)],
        );
        assert!(take(&mut spool, &mut tracker, &mut failing));
        assert!(matches!(tracker.take().0, Action::Full(_)));
        append(d.path(), &[record(6, 3, 0xc), record(1, 5, 0)]);
        assert!(take(&mut spool, &mut tracker, &mut failing));
        assert_eq!(
            tracker.take().0,
            Action::Switches {
                guids: [0xc].into(),
                topology: true
            }
        );
        // a number that never comes is still a gap, one round later
        append(d.path(), &[record(6, 7, 0xa)]);
        assert!(take(&mut spool, &mut tracker, &mut failing));
        append(d.path(), &[record(1, 8, 0)]);
        assert!(take(&mut spool, &mut tracker, &mut failing));
        assert_eq!(tracker.take().0, Action::Full(Why::Gap { missing: 1 }));
    }

    #[test]
    fn a_spool_that_cannot_be_read_asks_one_full_audit_and_lets_the_watcher_act() {
        // a spool directory others may write to is refused at every round:
        // that is no record heard (the watcher must go quiet and act: its
        // full audit, `--once`, `--full-every`), and one full audit asked,
        // not one a round
        let d = spool_dir(0o777);
        let mut spool = Spool::new(std::path::Path::new("/"), d.path());
        let mut tracker = Tracker::new();
        let mut failing = false;
        let _ = tracker.take();
        assert!(!take(&mut spool, &mut tracker, &mut failing));
        assert_eq!(tracker.pending().full, Some(Why::Unreadable));
        assert!(tracker.due(true));
        let _ = tracker.take();
        assert!(!take(&mut spool, &mut tracker, &mut failing));
        assert_eq!(
            tracker.pending().full,
            None,
            "asked again while still failing"
        );
        // readable again: records are heard; a later failure asks again
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        append(d.path(), &[record(64, 1, 0)]);
        assert!(take(&mut spool, &mut tracker, &mut failing));
        let _ = tracker.take();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        assert!(!take(&mut spool, &mut tracker, &mut failing));
        assert_eq!(tracker.pending().full, Some(Why::Unreadable));
    }

    #[test]
    fn a_cable_gone_names_both_ends() {
        let old = Topology {
            ports: vec![link(1, 3, 2, 1), link(2, 1, 1, 3), link(1, 4, 3, 1)],
        };
        let new = Topology {
            ports: vec![link(1, 4, 3, 1)],
        };
        assert_eq!(changed_nodes(&old, &new), [1, 2].into());
        assert!(changed_nodes(&old, &old).is_empty());
    }
}
