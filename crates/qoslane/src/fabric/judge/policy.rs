//! The fabric policy, judged in one place and pure: `fabric_check:
//! enforce | warn | off` applied to what was gathered ([`Gathered`]: the
//! assessment, or why it could not run), for one level (a Prolog) or for
//! every level (`sync`, `health`): [`judge_gathered`]. The gather step and
//! the commands' entry points (`judge`, `judge_level`, `judge_health`,
//! `judge_dry`: gather, then judge here) are `gather/policy.rs`; the
//! commands only read the [`Judgement`].
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

use crate::error::Error;
use crate::fabric::judge::assessment::{Assessment, FabricVerdict};
use crate::fabric::tables::PortId;
use crate::grant::{self, Evidence, Findings, Grant, ReadPort, ScopeRead};
use crate::mapping::{FabricCheck, Mapping};

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
    /// When it was found that it could not (milliseconds since the epoch).
    pub error_at_ms: u64,
    pub check: Option<FabricCheck>,
}

/// What the gather step brought for the policy to judge.
#[derive(Debug)]
pub enum Gathered {
    /// `fabric_check: off`: nothing was read.
    Nothing,
    /// The assessment of the node's ports (and first hops when read).
    Assessment(Assessment),
    /// The assessment could not run: why, and when (ms since the epoch).
    Failed { error: Error, at_ms: u64 },
}

/// The fabric policy (`mapping.fabric_check`) on what was gathered, for
/// `scope`. Pure: reads nothing.
pub fn judge_gathered(mapping: &Mapping, scope: Scope<'_>, gathered: Gathered) -> Judgement {
    let check = mapping.fabric_check;
    let mut j = Judgement {
        check: Some(check),
        ..Judgement::default()
    };
    let assessment = match gathered {
        Gathered::Assessment(a) if check != FabricCheck::Off => a,
        Gathered::Failed { error: e, at_ms } if check != FabricCheck::Off => {
            j.error_at_ms = at_ms;
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
        // `off` (nothing read): nothing judged.
        _ => {
            j.verdict = FabricVerdict::Off;
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
    /// The fabric's evidence for one level: its own ports, and the first hop
    /// when this assessment read it. Empty when the fabric was not looked at.
    pub fn evidence(&self, level: &str) -> Vec<Evidence> {
        if let Some(e) = &self.error {
            return vec![Evidence {
                scope: grant::GrantScope::OwnPorts,
                at_ms: self.error_at_ms,
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
                path_record_sl: false,
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
                    path_record_sl: false,
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
                        path_record_sl: false,
                    };
                    (l.name.clone(), found)
                })
                .collect(),
        })
    }

    /// Every level's grant from this judgement, the settings' check and
    /// the fabric audit's verdict (`sync`, `health`).
    pub fn grants(
        &self,
        mapping: &Mapping,
        settings: Option<&ScopeRead>,
        path: Option<&grant::PathRead>,
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
                if let Some(p) = path {
                    evidence.push(Evidence {
                        scope: grant::GrantScope::FabricPath,
                        at_ms: p.at_ms,
                        found: p.levels.get(&l.name).cloned().unwrap_or_default(),
                    });
                }
                let g = grant::decide(mapping.fabric_check, mapping.on_failure_for(l), &evidence);
                (l.name.clone(), g)
            })
            .collect()
    }
}
