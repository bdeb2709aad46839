//! `qoslane fabric audit`: every level of a mapping judged on every data
//! port of the fabric ([`crate::fabric::sweep`]), for a control node. Reads
//! the fabric, changes nothing on it or on this host (but the textfile, when
//! asked for one).

use std::io::Write;

use nodeio::prom::{Kind as PromKind, Writer};

use super::Ctx;
use crate::cli::{AuditArgs, AuditFormat, FabricReader, ReadArgs};
use crate::config::{self, Source};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::judge::lane::Lane;
use crate::fabric::read::{discover, umad};
use crate::fabric::sweep::page::{self, Page};
use crate::fabric::sweep::{self, Sweep, verdict};
use crate::fabric::{InProcess, PortId, Reader, Smpquery};

pub mod watch;

pub fn run(ctx: &Ctx, args: &AuditArgs) -> Result<ExitClass> {
    let (loaded, from) = mapping(ctx)?;
    let via = via(&args.read);
    let deadline = Deadline::after(std::time::Duration::from_secs(args.read.timeout));
    let started = std::time::SystemTime::now();
    let (reader, fallback, walks) = reader(ctx, &args.read, via.as_ref())?;
    let discovering = std::time::Instant::now();
    let result = reader
        .topology(&ctx.paths.ibnetdiscover, via.as_ref(), &deadline)
        .map(|topo| {
            let topology_ms = u64::try_from(discovering.elapsed().as_millis()).unwrap_or(u64::MAX);
            let mut s = sweep::sweep(
                &topo,
                reader.as_ref(),
                &loaded.mapping,
                usize::from(args.read.workers),
                &deadline,
            );
            s.fallback = fallback;
            s.cost.topology_ms = topology_ms;
            s.cost.topology_from = if walks { "in-process" } else { "ibnetdiscover" };
            if args.reset_wait {
                // Every wait counter that was read, cleared by the same reader;
                // what could not be, with the counters not read.
                let failed = reader.clear_xmit_wait(&s.wait_ports, &s.xmit_wait, &deadline);
                s.xmit_wait_unread
                    .extend(failed.into_iter().map(|e| format!("not cleared: {e}")));
            }
            s
        });
    if let Some(file) = &args.textfile {
        write_textfile(ctx, file, result.as_ref().ok(), started)?;
    }
    // Whatever kept the topology from being read (the tool failed, hung past
    // the deadline, printed what we cannot parse): the fabric is unreadable.
    let sweep = result.map_err(|e| match e {
        e @ Error::Program { .. } => e,
        e => Error::Program {
            program: if walks {
                umad::LIBRARY.into()
            } else {
                ctx.paths.ibnetdiscover.clone()
            },
            detail: format!("the fabric could not be read: {e}"),
        },
    })?;
    if let Some(file) = &args.verdict {
        write_verdict(ctx, file, &sweep, &loaded.sha256, started)?;
    }
    let text = match args.format {
        AuditFormat::Json => {
            let v = serde_json::json!({
                "mapping": from,
                "mapping_sha256": loaded.sha256,
                "report": sweep,
                "verdict": verdict_word(&sweep),
            });
            format!("{v:#}\n")
        }
        AuditFormat::Human => human(&sweep, &from),
        AuditFormat::Html => page::render(&Page {
            sweep: &sweep,
            summary: &human(&sweep, &from),
            mapping: &from,
            mapping_sha256: &loaded.sha256,
            time: &humantime::format_rfc3339_seconds(started).to_string(),
            verdict: verdict_word(&sweep),
            waits: &sweep.xmit_wait,
        }),
    };
    write_output(ctx, args.output.as_deref(), &text)?;
    Ok(if sweep.any_problem() {
        ExitClass::Failed
    } else if !sweep.unread.is_empty() {
        ExitClass::Unavailable
    } else {
        ExitClass::Ok
    })
}

/// The mapping to judge and where it came from: `--config FILE` (or its
/// older spelling `--mapping`, folded into it by `Cli::one_mapping`) is
/// read as a draft; else the mapping in force.
fn mapping(ctx: &Ctx) -> Result<(config::Loaded, String)> {
    let loaded = if ctx.config_given {
        config::read_for_dry_run(&ctx.paths.config)?
    } else {
        config::load(&ctx.paths)?
    };
    let from = match loaded.source {
        Source::Config => ctx.paths.config.display().to_string(),
        Source::LastKnownGood => format!(
            "{} (the configured file is unusable: {})",
            ctx.paths.last_known_good().display(),
            loaded.problem.as_deref().unwrap_or("?")
        ),
    };
    Ok((loaded, from))
}

/// The local port to send from (`--ca`, `--ca-port`), when given.
fn via(read: &ReadArgs) -> Option<PortId> {
    match (&read.ca, read.ca_port) {
        (Some(device), Some(port)) => Some(PortId {
            device: device.clone(),
            port,
        }),
        _ => None,
    }
}

/// The reader asked for: in process when it can start (`auto`: else
/// smpquery, and why), or the one named; and whether it walks the
/// topology itself (in process, when no node-name-map or `ibdiag.conf`
/// setting of `ibnetdiscover`'s is in force: `discover::names_in_force`;
/// else `ibnetdiscover -p`). The program reader reads the transmit wait by
/// `perfquery` when it has one (`QOSLANE_PERFQUERY`).
fn reader(
    ctx: &Ctx,
    read: &ReadArgs,
    via: Option<&PortId>,
) -> Result<(Box<dyn Reader>, Option<String>, bool)> {
    let (kind, workers) = (read.reader, usize::from(read.workers));
    let smpquery = || -> Box<dyn Reader> {
        Box::new(
            Smpquery::new(&ctx.paths.smpquery)
                .via(via.cloned())
                .perfquery(ctx.paths.perfquery.clone())
                .ibroute(Some(ctx.paths.ibroute.clone()))
                .with_window(workers),
        )
    };
    let walks = discover::names_in_force(&ctx.paths.root).is_none();
    let in_process = || {
        InProcess::open(via, sweep::window(workers))
            .map(|r| if walks { r.discovering() } else { r })
    };
    Ok(match kind {
        FabricReader::Smpquery => (smpquery(), None, false),
        FabricReader::InProcess => (
            Box::new(in_process().map_err(|e| Error::Program {
                program: umad::LIBRARY.into(),
                detail: format!("--reader in-process: {e}"),
            })?),
            None,
            walks,
        ),
        FabricReader::Auto => match in_process() {
            Ok(r) => (Box::new(r), None, walks),
            Err(e) => (smpquery(), Some(e), false),
        },
    })
}

/// Per level, deadlock-free on this routing or its credit loop named;
/// what kept it from being judged; the routing engine's note.
fn deadlock_lines(r: &Sweep, s: &mut String) {
    use std::fmt::Write as _;
    let d = &r.deadlock;
    for l in &d.levels {
        let mark = if d.refuses(l) { "FAIL " } else { "" };
        let _ = writeln!(s, "deadlock: {mark}{}", l.words());
        if let Some(note) = d.path_note(l) {
            let _ = writeln!(s, "  note: {note}");
        }
    }
    if let Some(first) = d.unjudged.first() {
        let _ = writeln!(
            s,
            "deadlock: not judged: {}",
            d.unjudged[1..]
                .iter()
                .fold(first.clone(), |a, b| format!("{a}; {b}"))
        );
    }
    for note in d.routing_notes() {
        let _ = writeln!(s, "routing: {note}");
    }
}

/// Per declared `sm_traffic` entry, the SL the SA answered its path
/// record with (`FAIL` when not the level's).
fn sm_policy_lines(r: &Sweep, s: &mut String) {
    use crate::fabric::sweep::sm_classes::ClassVerdict;
    use std::fmt::Write as _;
    for c in &r.sm_policy.classes {
        let mark = match c.verdict {
            ClassVerdict::Mismatch => "FAIL ",
            _ => "",
        };
        let _ = writeln!(s, "sm policy: {mark}{}", c.words());
    }
}

/// Per level, where its lane waited most (and where it is saturated).
fn wait_lines(r: &Sweep, s: &mut String) {
    use std::fmt::Write as _;
    if r.xmit_wait.is_empty() {
        let _ = writeln!(
            s,
            "transmit wait: not read (the in-process reader reads it; with smpquery, set QOSLANE_PERFQUERY)"
        );
        return;
    }
    for l in &r.wait_levels {
        let _ = match &l.most {
            Some(at) => writeln!(
                s,
                "wait: level {} (SL {}) waited most at {}",
                l.level,
                l.sl,
                at.words()
            ),
            None => writeln!(
                s,
                "wait: level {} (SL {}): its lane never waited",
                l.level, l.sl
            ),
        };
        for at in &l.saturated {
            let _ = writeln!(
                s,
                "wait: level {}: saturated (65535 ticks or more) at {}",
                l.level,
                at.words()
            );
        }
    }
    if !r.xmit_wait_unread.is_empty() {
        let _ = writeln!(
            s,
            "wait: {} ports not read: {}",
            r.xmit_wait_unread.len(),
            r.xmit_wait_unread.first().map_or("", String::as_str)
        );
    }
}

fn verdict_word(r: &Sweep) -> &'static str {
    if r.any_problem() {
        "not_carried"
    } else if !r.unread.is_empty() {
        "incomplete"
    } else {
        "carried"
    }
}

/// Findings shown per level in the human text.
const MAX_LINES: usize = 12;

/// The human text: the fabric, then each level (highest first) with its
/// findings, then what could not be read, then one verdict line.
pub fn human(r: &Sweep, from: &str) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "mapping: {from}");
    let _ = writeln!(
        s,
        "fabric: {} switches, {} HCAs; {} egress ports read {} in {} ms",
        r.switches,
        r.hcas,
        r.ports_read,
        match r.reader {
            "in-process" => format!(
                "in process ({} SMPs in flight per LID)",
                sweep::window(r.workers)
            ),
            _ => format!("by smpquery ({} programs at once)", r.workers),
        },
        r.duration_ms
    );
    if let Some(why) = &r.fallback {
        let _ = writeln!(s, "reader: smpquery (in process unavailable: {why})");
    }
    if let Some(n) = &r.not_routed {
        let _ = writeln!(
            s,
            "not read nor judged: {} port pairs of {} switches ({}{}): {}",
            n.pairs,
            n.switches,
            n.examples.join(", "),
            if n.switches > n.examples.len() {
                ", …"
            } else {
                ""
            },
            n.why
        );
    }
    for l in &r.levels {
        let total: u64 = l.pairs.values().sum();
        let bad: u64 = l
            .pairs
            .iter()
            .filter(|(lane, _)| lane.is_problem())
            .map(|(_, n)| n)
            .sum();
        let vl = l
            .virtual_lane
            .map_or_else(String::new, |v| format!(" -> VL {v}"));
        if bad == 0 {
            let _ = writeln!(
                s,
                "level {} (SL {}{vl}): carried on all {total} port pairs",
                l.level, l.sl
            );
        } else {
            let lanes: Vec<String> = l
                .pairs
                .iter()
                .filter(|(lane, _)| lane.is_problem())
                .map(|(lane, n)| format!("{n} {lane}"))
                .collect();
            let _ = writeln!(
                s,
                "level {} (SL {}{vl}): NOT CARRIED on {bad} of {total} port pairs ({})",
                l.level,
                l.sl,
                lanes.join(", ")
            );
        }
        for f in l.findings.iter().take(MAX_LINES) {
            let mark = if f.lane.is_problem() { "FAIL" } else { "warn" };
            let _ = writeln!(s, "  {mark} {}", f.message);
        }
        if l.findings.len() > MAX_LINES {
            let _ = writeln!(
                s,
                "  ... and {} more (--format json lists every one)",
                l.findings.len() - MAX_LINES
            );
        }
    }
    deadlock_lines(r, &mut s);
    sm_policy_lines(r, &mut s);
    wait_lines(r, &mut s);
    for u in &r.unread {
        let _ = writeln!(
            s,
            "not read: {} {} (lid {}) port {}: {}",
            u.kind.as_str(),
            u.name,
            u.lid,
            u.port,
            u.error
        );
    }
    verdict_line(r, &mut s);
    s
}

/// The audit's last line: every level carried, or which fail and why
/// (`Sweep::level_faults`).
fn verdict_line(r: &Sweep, s: &mut String) {
    use std::fmt::Write as _;
    let failing: Vec<String> = r
        .levels
        .iter()
        .filter_map(|l| {
            let faults = r.level_faults(l);
            (!faults.is_empty()).then(|| format!("{} ({})", l.level, faults.join(", ")))
        })
        .collect();
    let _ = if failing.is_empty() && r.unread.is_empty() {
        writeln!(s, "verdict: every level carried on every data port")
    } else if failing.is_empty() {
        writeln!(
            s,
            "verdict: incomplete: {} ports not read; every level carried on the rest",
            r.unread.len()
        )
    } else {
        writeln!(
            s,
            "verdict: {} of {} levels fail: {}",
            failing.len(),
            r.levels.len(),
            failing.join(", ")
        )
    };
}

/// The audit as a Prometheus textfile; on a failed read only the success
/// gauge (0) and the timestamp, so an alert sees the failure and the last
/// verdict never lingers.
pub fn render(r: Option<&Sweep>, started: std::time::SystemTime) -> String {
    let mut w = Writer::new();
    let ts = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    w.family(
        "qoslane_fabric_audit_last_run_timestamp_seconds",
        PromKind::Gauge,
        "Unix time the last fabric audit started.",
    );
    w.sample(
        "qoslane_fabric_audit_last_run_timestamp_seconds",
        &[],
        (ts * 1000.0).round() / 1000.0,
    );
    w.family(
        "qoslane_fabric_audit_success",
        PromKind::Gauge,
        "1 when the last fabric audit read the topology and every egress port, else 0.",
    );
    w.sample(
        "qoslane_fabric_audit_success",
        &[],
        u8::from(r.is_some_and(|r| r.unread.is_empty())),
    );
    let Some(r) = r else {
        return w.finish();
    };
    w.family(
        "qoslane_fabric_audit_duration_seconds",
        PromKind::Gauge,
        "How long the last fabric audit took to read and judge the fabric.",
    );
    #[expect(
        clippy::cast_precision_loss,
        reason = "milliseconds of one audit fit an f64 exactly"
    )]
    let secs = r.duration_ms as f64 / 1000.0;
    w.sample("qoslane_fabric_audit_duration_seconds", &[], secs);
    w.family(
        "qoslane_fabric_audit_ports_unread",
        PromKind::Gauge,
        "Egress ports the last fabric audit could not read.",
    );
    w.sample("qoslane_fabric_audit_ports_unread", &[], r.unread.len());
    w.family(
        "qoslane_fabric_audit_port_pairs",
        PromKind::Gauge,
        "Port pairs (switch in -> out, or an HCA port) by level and verdict in the last fabric audit.",
    );
    for l in &r.levels {
        for lane in Lane::ALL {
            let n = l.pairs.get(&lane).copied().unwrap_or(0);
            w.sample(
                "qoslane_fabric_audit_port_pairs",
                &[("level", &l.level), ("verdict", lane.as_str())],
                n,
            );
        }
    }
    w.family(
        "qoslane_fabric_audit_level_carried",
        PromKind::Gauge,
        "1 when the level is carried on every data port of the fabric (last audit), else 0.",
    );
    for l in &r.levels {
        w.sample(
            "qoslane_fabric_audit_level_carried",
            &[("level", &l.level)],
            u8::from(l.carried()),
        );
    }
    wait_families(&mut w, r);
    w.finish()
}

/// The output to stdout, or atomically into `file` (a relative name is
/// taken from the current directory).
fn write_output(ctx: &Ctx, file: Option<&std::path::Path>, text: &str) -> Result<()> {
    let Some(file) = file else {
        return std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .map_err(Error::output);
    };
    let file = std::path::absolute(file).map_err(Error::io("resolve", file))?;
    crate::state::fsutil::publish(&ctx.paths, &file, text, crate::state::PUBLIC)
}

/// The most a level's lane waited at one switch egress port, and how many
/// ports' counters are saturated for it (last audit).
fn wait_families(w: &mut Writer, r: &Sweep) {
    if r.xmit_wait.is_empty() {
        return;
    }
    w.family(
        "qoslane_fabric_audit_wait_ticks_max",
        PromKind::Gauge,
        "The most PortVLXmitWait ticks of the level's VL at one switch egress port (last fabric audit; since the counters were last cleared).",
    );
    for l in &r.wait_levels {
        w.sample(
            "qoslane_fabric_audit_wait_ticks_max",
            &[("level", &l.level)],
            l.most.as_ref().map_or(0, |m| m.ticks),
        );
    }
    w.family(
        "qoslane_fabric_audit_wait_saturated_ports",
        PromKind::Gauge,
        "Switch egress ports whose PortVLXmitWait counter of the level's VL is saturated (last fabric audit).",
    );
    for l in &r.wait_levels {
        w.sample(
            "qoslane_fabric_audit_wait_saturated_ports",
            &[("level", &l.level)],
            l.saturated.len(),
        );
    }
}

fn write_textfile(
    ctx: &Ctx,
    file: &std::path::Path,
    r: Option<&Sweep>,
    started: std::time::SystemTime,
) -> Result<()> {
    crate::state::fsutil::publish(&ctx.paths, file, &render(r, started), crate::state::PUBLIC)
}

/// The fabric verdict (`--verdict FILE`) of a sweep that read the topology:
/// the nodes' `fabric path` scope (`fabric/sweep/verdict.rs`). An audit
/// that could not read the fabric writes none: the last one ages out on
/// the nodes (`QOSLANE_FABRIC_VERDICT_MAX_AGE`).
fn write_verdict(
    ctx: &Ctx,
    file: &std::path::Path,
    sweep: &Sweep,
    sha256: &str,
    started: std::time::SystemTime,
) -> Result<()> {
    let ms = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let time = humantime::format_rfc3339_seconds(started).to_string();
    let host = crate::audit::node_name();
    let v = verdict::build(
        sweep,
        &verdict::Made {
            time: &time,
            ms,
            host: &host,
            mapping_sha256: sha256,
        },
    );
    let file = std::path::absolute(file).map_err(Error::io("resolve", file))?;
    crate::state::fsutil::publish(
        &ctx.paths,
        &file,
        &verdict::render(&v),
        crate::state::PUBLIC,
    )
}
