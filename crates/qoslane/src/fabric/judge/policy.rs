//! The fabric policy, judged in one place: `fabric_check: enforce | warn |
//! off` applied to an assessment, for one level (a Prolog) or for every
//! level (`sync`, `health`). Gather once ([`crate::fabric::gather::assess`]), then judge
//! here; the commands only read the [`Judgement`].
//!
//! - `off`: nothing is probed; nothing is refused.
//! - `warn`: problems and a failed assessment become notes; nothing is
//!   refused.
//! - `enforce`: for every level (the mapping's gate of `sync` and a
//!   Prolog), a problem of any level, or a failed assessment, refuses the
//!   mapping ([`Judgement::refusal`]).
//!
//! One level's fate is not decided here but in [`crate::grant::decide`],
//! from the [`Judgement::evidence`] of its own ports and first hop and the
//! other scopes the caller has (the persisted record, the settings check):
//! [`Judgement::grants`] for every level, a Prolog for its own.

use serde::{Deserialize, Serialize};

use crate::fabric::judge::assessment::{Assessment, FabricVerdict, ProbeMode};
use crate::fabric::first_hop::share::Scheduled;
use crate::fabric::gather::{AssessOptions, assess_with, ports_not_active};
use crate::fabric::read::probe::Probe;
use crate::fabric::read::smpquery::Smpquery;
use crate::fabric::tables::PortId;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::grant::{self, Evidence, Findings, Grant, ReadPort, ScopeRead};
use crate::mapping::{FabricCheck, Mapping};
use crate::paths::Paths;

/// What is judged: one level, or every level of the mapping.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    Level(&'a str),
    Every,
}

/// One (port, level) of an assessment: is the level's SL on its VL there?
/// (The `qoslane_fabric_aligned` gauge, kept in the counters.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alignment {
    pub device: String,
    pub port: u32,
    pub level: String,
    pub aligned: bool,
}

/// First-hop output ports of one level with one verdict (sum over the
/// node's HCA ports).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopCount {
    pub level: String,
    pub verdict: String,
    pub ports: u64,
}

/// The fabric policy's judgement of one assessment.
#[derive(Debug, Default)]
pub struct Judgement {
    /// For the audit log.
    pub verdict: FabricVerdict,
    /// For the `qoslane_fabric_aligned` gauge; `None` when nothing was probed.
    pub alignment: Option<Vec<Alignment>>,
    /// For the `qoslane_first_hop_ports` gauge; `None` when no first hop
    /// was read.
    pub first_hop: Option<Vec<HopCount>>,
    /// Warnings, and problems under `warn`, one line each.
    pub notes: Vec<String>,
    /// Under `enforce`: why the scope cannot be granted.
    pub refusal: Option<Error>,
    /// The ports that were ACTIVE, to verify after applying settings.
    pub active_ports: Vec<PortId>,
    /// The assessment, when there was one.
    pub assessment: Option<Assessment>,
    /// Why the assessment could not run, when it could not.
    pub error: Option<String>,
    pub check: Option<FabricCheck>,
}

/// Assesses the fabric per `mapping.fabric_check` and judges `scope`.
pub fn judge(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
    scope: Scope<'_>,
) -> Judgement {
    let probe = Smpquery::new(&paths.smpquery);
    judge_as(
        paths,
        mapping,
        deadline,
        mode,
        scope,
        &probe,
        Flags::default(),
    )
}

/// [`judge`] for `health`: every level, the own ports probed fresh, the
/// first hop shared with the other nodes of its switch as
/// `first_hop_share.rs` says (its own rows every run, the rest once per
/// period); what it read in full is kept for the next run. Beside it, the
/// transmit wait of each first hop's port toward this node, where read.
pub fn judge_health(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
) -> (Judgement, Vec<crate::fabric::counters::pma::PortWait>) {
    let smp = Smpquery::new(&paths.smpquery);
    let probe = Scheduled::new(&smp, paths);
    let j = judge_as(
        paths,
        mapping,
        deadline,
        ProbeMode::Fresh,
        Scope::Every,
        &probe,
        Flags::default(),
    );
    let waits = probe.take_waits();
    if let Err(e) = probe.store(paths) {
        crate::log::warn(&format!(
            "first-hop readings not kept (the next health reads in full): {e}"
        ));
    }
    (j, waits)
}

/// What a judgement reads beyond its mode, and whether it writes nothing.
#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    /// The first hop too, though the mode is `Cached` (a Prolog's).
    first_hop: bool,
    /// Nothing written, not even the cache.
    dry_run: bool,
}

/// [`judge`] for a dry run (`explain --fabric`): a fresh probe and the
/// first hop, the same rules, and nothing written (not even the cache).
pub fn judge_dry(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    scope: Scope<'_>,
) -> Judgement {
    judge_as(
        paths,
        mapping,
        deadline,
        ProbeMode::Fresh,
        scope,
        &Smpquery::new(&paths.smpquery),
        Flags {
            first_hop: true,
            dry_run: true,
        },
    )
}

/// A Prolog's judgement of its level: the cached probe of its own ports,
/// and the first hop too when `first_hop` (a `fail_job` level under
/// `enforce` with no fresh first-hop reading recorded).
pub fn judge_level(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    level: &str,
    first_hop: bool,
) -> Judgement {
    judge_as(
        paths,
        mapping,
        deadline,
        ProbeMode::Cached,
        Scope::Level(level),
        &Smpquery::new(&paths.smpquery),
        Flags {
            first_hop,
            dry_run: false,
        },
    )
}

fn judge_as(
    paths: &Paths,
    mapping: &Mapping,
    deadline: &Deadline,
    mode: ProbeMode,
    scope: Scope<'_>,
    probe: &dyn Probe,
    Flags { first_hop, dry_run }: Flags,
) -> Judgement {
    let check = mapping.fabric_check;
    let mut j = Judgement {
        check: Some(check),
        ..Judgement::default()
    };
    if check == FabricCheck::Off {
        j.verdict = FabricVerdict::Off;
        return j;
    }
    // A `fail_job` level is granted only on a probe younger than the
    // mapping's bound (default 15 s): the jobs that care most never rely on
    // an old cache entry.
    let mut opts = AssessOptions::default();
    if let Scope::Level(name) = scope
        && mapping
            .level(name)
            .is_some_and(|l| mapping.on_failure_for(l) == crate::mapping::OnFailure::FailJob)
    {
        opts.max_cache_age = opts.max_cache_age.min(mapping.fail_job_max_probe_age);
    }
    // `sync` and `health` (a fresh assessment) also prove the first hop.
    opts.first_hop = mode == ProbeMode::Fresh || first_hop;
    opts.store_cache = !dry_run;
    let assessment = match assess_with(paths, mapping, deadline, mode, probe, &opts) {
        Ok(r) => r,
        Err(e) => {
            j.verdict = FabricVerdict::CouldNotRun {
                policy: check.as_str(),
                error: e.to_string(),
            };
            j.error = Some(e.to_string());
            if check == FabricCheck::Enforce {
                j.refusal = Some(e);
            } else if matches!(scope, Scope::Every) {
                // One level's notes are its grant's warnings.
                j.notes.push(format!("fabric check could not run: {e}"));
            }
            return j;
        }
    };
    j.alignment = Some(alignments(&assessment));
    j.first_hop = assessment.first_hop_counts().map(|c| {
        c.into_iter()
            .map(|(level, verdict, ports)| HopCount {
                level,
                verdict,
                ports,
            })
            .collect()
    });
    j.active_ports = assessment.active_ports();
    match scope {
        // One level is decided by its grant (the caller adds the scopes it
        // has): its problems and warnings are the evidence's.
        Scope::Level(level) => {
            j.verdict = FabricVerdict::Level(assessment.level_verdict(level));
        }
        Scope::Every => {
            j.verdict = FabricVerdict::Levels(
                mapping
                    .levels()
                    .iter()
                    .map(|l| (l.name.clone(), assessment.level_verdict(&l.name)))
                    .collect(),
            );
            let problems: Vec<String> = mapping
                .levels()
                .iter()
                .flat_map(|l| {
                    assessment
                        .problems(&l.name)
                        .into_iter()
                        .map(move |p| format!("level `{}`: {p}", l.name))
                })
                .collect();
            if !problems.is_empty() {
                let msg = problems.join("; ");
                match check {
                    FabricCheck::Enforce => j.refusal = Some(Error::Fabric(msg)),
                    _ => j
                        .notes
                        .extend(problems.into_iter().map(|p| format!("fabric (warn): {p}"))),
                }
            }
        }
    }
    j.assessment = Some(assessment);
    j
}

/// For metrics: one alignment per (port, level).
fn alignments(assessment: &Assessment) -> Vec<Alignment> {
    assessment
        .alignment()
        .into_iter()
        .map(|(device, port, level, aligned)| Alignment {
            device,
            port,
            level,
            aligned,
        })
        .collect()
}

impl Judgement {
    /// After applying settings: the ports that were ACTIVE still are (a
    /// setting must never take a link down).
    pub fn ports_still_active(&self, paths: &Paths) -> crate::error::Result<()> {
        if self.active_ports.is_empty() {
            return Ok(());
        }
        let down = ports_not_active(paths, &self.active_ports)?;
        if down.is_empty() {
            Ok(())
        } else {
            Err(Error::Fabric(format!(
                "port(s) no longer ACTIVE after applying settings: {}",
                down.join(", ")
            )))
        }
    }
}

impl Judgement {
    /// The fabric's evidence for one level: its own ports, and the first hop
    /// when this assessment read it. Empty when the fabric was not looked at.
    pub fn evidence(&self, level: &str) -> Vec<Evidence> {
        if let Some(e) = &self.error {
            return vec![Evidence {
                scope: grant::GrantScope::OwnPorts,
                at_ms: crate::fabric::read::cache::now_ms(),
                found: Findings {
                    unread: Some(e.clone()),
                    ..Findings::default()
                },
            }];
        }
        let Some(a) = &self.assessment else {
            return Vec::new();
        };
        let mut out = vec![Evidence {
            scope: grant::GrantScope::OwnPorts,
            at_ms: a.assessed_at_ms,
            found: Findings {
                problems: a.own_problems(level),
                warnings: a.own_warnings(level),
                unread: None,
            },
        }];
        if a.read_first_hop() {
            out.push(Evidence {
                scope: grant::GrantScope::FirstHop,
                at_ms: a.first_hop_at_ms(),
                found: Findings {
                    problems: a.hop_problems(level),
                    warnings: a.hop_warnings(level),
                    unread: None,
                },
            });
        }
        out
    }

    /// The node's IB ports as this assessment found them: what a recorded
    /// first-hop reading must have been read on.
    pub fn ports(&self) -> Vec<ReadPort> {
        self.assessment.as_ref().map_or_else(Vec::new, |a| {
            a.ib_ports
                .iter()
                .map(|p| ReadPort {
                    port: p.port.to_string(),
                    node_guid: p.identity.node_guid.clone(),
                    lid: p.identity.lid,
                    sm_lid: p.identity.sm_lid,
                })
                .collect()
        })
    }

    /// The first hop as this assessment read it, for every level of
    /// `mapping` (the persisted record's scope); `None` when not read.
    pub fn first_hop_read(&self, mapping: &Mapping) -> Option<ScopeRead> {
        let a = self.assessment.as_ref().filter(|a| a.read_first_hop())?;
        Some(ScopeRead {
            at_ms: a.first_hop_at_ms(),
            ports: self.ports(),
            levels: mapping
                .levels()
                .iter()
                .map(|l| {
                    let found = Findings {
                        problems: a.hop_problems(&l.name),
                        warnings: a.hop_warnings(&l.name),
                        unread: None,
                    };
                    (l.name.clone(), found)
                })
                .collect(),
        })
    }

    /// Every level's grant from this judgement and the settings' check
    /// (`sync`, `health`).
    pub fn grants(
        &self,
        mapping: &Mapping,
        settings: Option<&ScopeRead>,
    ) -> std::collections::BTreeMap<String, Grant> {
        mapping
            .levels()
            .iter()
            .map(|l| {
                let mut evidence = self.evidence(&l.name);
                if let Some(s) = settings {
                    evidence.push(Evidence {
                        scope: grant::GrantScope::Settings,
                        at_ms: s.at_ms,
                        found: s.levels.get(&l.name).cloned().unwrap_or_default(),
                    });
                }
                let g = grant::decide(mapping.fabric_check, mapping.on_failure_for(l), &evidence);
                (l.name.clone(), g)
            })
            .collect()
    }
}
