//! `qoslane fabric audit`: every level of a mapping judged on every data
//! port of the fabric ([`crate::fabric::sweep`]), for a control node. Reads
//! the fabric, changes nothing on it or on this host (but the textfile, when
//! asked for one).

use std::io::Write;

use nodeio::prom::{Kind as PromKind, Writer};

use super::Ctx;
use crate::cli::{AuditArgs, FabricReader, Format};
use crate::config::{self, Source};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::fabric::lane::Lane;
use crate::fabric::sweep::{self, Reader, Sweep};
use crate::fabric::umad::{self, Umad};
use crate::fabric::{PortId, Smpquery};

pub fn run(ctx: &Ctx, args: &AuditArgs) -> Result<ExitClass> {
    // `--config FILE` (or its older spelling `--mapping`, folded into it
    // by `Cli::one_mapping`) is read as a draft; else the mapping in force.
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
    let via = match (&args.ca, args.ca_port) {
        (Some(device), Some(port)) => Some(PortId {
            device: device.clone(),
            port,
        }),
        _ => None,
    };
    let deadline = Deadline::after(std::time::Duration::from_secs(args.timeout));
    let started = std::time::SystemTime::now();
    let (mut reader, fallback) = reader(ctx, args.reader, via.as_ref())?;
    let result = sweep::discover(&ctx.paths.ibnetdiscover, via.as_ref(), &deadline).map(|topo| {
        let mut s = sweep::sweep(
            &topo,
            &mut reader,
            via.as_ref(),
            &loaded.mapping,
            usize::from(args.workers),
            &deadline,
        );
        s.fallback = fallback;
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
            program: ctx.paths.ibnetdiscover.clone(),
            detail: format!("the fabric could not be read: {e}"),
        },
    })?;
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    match args.format {
        Format::Json => {
            let v = serde_json::json!({
                "mapping": from,
                "mapping_sha256": loaded.sha256,
                "report": sweep,
                "verdict": verdict_word(&sweep),
            });
            writeln!(out, "{v:#}").map_err(w)?;
        }
        Format::Human => out.write_all(human(&sweep, &from).as_bytes()).map_err(w)?,
    }
    Ok(if sweep.any_problem() {
        ExitClass::Failed
    } else if !sweep.unread.is_empty() {
        ExitClass::Unavailable
    } else {
        ExitClass::Ok
    })
}

/// The reader asked for: in process when it can start (`auto`: else
/// smpquery, and why), or the one named.
fn reader(
    ctx: &Ctx,
    asked: FabricReader,
    via: Option<&PortId>,
) -> Result<(Reader, Option<String>)> {
    let smpquery = || Reader::Smpquery(Smpquery::new(&ctx.paths.smpquery));
    Ok(match asked {
        FabricReader::Smpquery => (smpquery(), None),
        FabricReader::InProcess => (
            Reader::InProcess(Umad::open(via).map_err(|e| Error::Program {
                program: umad::LIBRARY.into(),
                detail: format!("--reader in-process: {e}"),
            })?),
            None,
        ),
        FabricReader::Auto => match Umad::open(via) {
            Ok(u) => (Reader::InProcess(u), None),
            Err(e) => (smpquery(), Some(e)),
        },
    })
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
            "in-process" => format!("in process ({} SMPs in flight)", sweep::window(r.workers)),
            _ => format!("by {} smpquery workers", r.workers),
        },
        r.duration_ms
    );
    if let Some(why) = &r.fallback {
        let _ = writeln!(s, "reader: smpquery (in process unavailable: {why})");
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
    let failing: Vec<&str> = r
        .levels
        .iter()
        .filter(|l| !l.carried())
        .map(|l| l.level.as_str())
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
            "verdict: {} of {} levels not carried: {}",
            failing.len(),
            r.levels.len(),
            failing.join(", ")
        )
    };
    s
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
    w.finish()
}

fn write_textfile(
    ctx: &Ctx,
    file: &std::path::Path,
    r: Option<&Sweep>,
    started: std::time::SystemTime,
) -> Result<()> {
    let text = render(r, started);
    // Rewritten by every audit: visible is enough.
    let _visible = nodeio::atomic::replace(
        &ctx.paths.root,
        file,
        text.as_bytes(),
        crate::state::PUBLIC,
        nodeio::walk::Judge::NoFollow,
        false,
        nodeio::atomic::Durability::Visible,
    )?;
    Ok(())
}
