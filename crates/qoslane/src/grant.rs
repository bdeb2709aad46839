//! The node's one decision per level: a [`Grant`]. Decided here, from every
//! scope that applies — the node's own ports (the Prolog's probe, or the
//! fresh one of `sync`/`health`), the first hop (the switch each port is
//! cabled to, read by `sync`/`health`, or by a Prolog of a `fail_job` level
//! when no fresh reading is recorded), the fabric path (the fabric audit's
//! verdict, `qoslane fabric audit --verdict`, read by `sync`/`health` from
//! the site's shared file) and the level's node settings (can they be
//! written) — under the mapping's `fabric_check` and the level's
//! `on_failure`. Persisted as a [`Record`] (`/run/qoslane/grants.json`,
//! `state::grants`); the Prolog obeys it, and `health`, `status`, `explain`
//! and the metrics render it, never judging again. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::mapping::{FabricCheck, OnFailure};

/// How old the first-hop and settings scopes of a record may be for a
/// Prolog to rely on them (two missed `health` runs at Slurm's usual
/// five-minute `HealthCheckInterval`). Past it, a `fail_job` level under
/// `enforce` reads its first hop itself; any other level notes the age.
pub const MAX_RECORD_AGE_MS: u64 = 600_000;

/// What a job of the level starting now gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Its SL, nothing found against it.
    Granted,
    /// Its SL, with warnings (`fabric_check: warn` problems, a fabric scope
    /// that could not be read under `warn`, a node setting that is gone).
    GrantedWithWarnings,
    /// No SL: the job runs on the baseline (`on_failure: continue`).
    Baseline,
    /// No SL: the job is refused (`on_failure: fail_job`).
    Refused,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Granted => "granted",
            Self::GrantedWithWarnings => "granted_with_warnings",
            Self::Baseline => "baseline",
            Self::Refused => "refused",
        }
    }

    /// A job of the level starting now gets its SL (`qoslane_level_granted`).
    pub fn gets_its_sl(self) -> bool {
        matches!(self, Self::Granted | Self::GrantedWithWarnings)
    }

    /// What the decision means for the level's jobs: the one wording of
    /// `health`, `status` and `explain`.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Granted => "its jobs get their SL",
            Self::GrantedWithWarnings => "its jobs get their SL (with warnings)",
            Self::Baseline => {
                "its jobs run on the baseline, without their SL (on_failure: continue)"
            }
            Self::Refused => "its jobs are refused and requeued (on_failure: fail_job)",
        }
    }
}

/// Where a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// The node's own HCA ports.
    OwnPorts,
    /// The switch port each of them is cabled to.
    FirstHop,
    /// The level's node settings.
    Settings,
    /// The fabric beyond the first hop, as the last fabric audit judged it
    /// (its verdict: the egress ports this node's traffic takes).
    FabricPath,
}

impl GrantScope {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OwnPorts => "own ports",
            Self::FirstHop => "first hop",
            Self::Settings => "node settings",
            Self::FabricPath => "fabric path",
        }
    }
}

/// What one scope found for one level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// What would stop the level (a misaligned lane, a setting that cannot
    /// be written), one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Why the scope could not be looked at, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
    /// The level takes each path record's SL, not its pinned one (the
    /// fabric path: `path_sl: path_record` on a fabric whose SM gives paths
    /// their own SLs, its pinned SL closing a credit loop).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_record_sl: bool,
}

/// One scope's finding for a level, and when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub scope: GrantScope,
    /// ms since the Unix epoch.
    pub at_ms: u64,
    pub found: Findings,
}

/// A scope a grant was decided from, and when it was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub scope: GrantScope,
    pub at_ms: u64,
}

/// Why a level is not granted: a line that names its place (a port, a
/// first hop, a setting), and the scope it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub scope: GrantScope,
    pub line: String,
}

/// The decision for one level, with its reasons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub decision: Decision,
    /// Why the level is not granted (empty when it is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<Reason>,
    /// What does not stop it but should be fixed, one line each, as a
    /// run's notes say it (`fabric (warn): …`, a setting that is gone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// What the scopes noted (`fabric: …`: RoCE ports, a `devices` entry
    /// that matches nothing): said, not a warning.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The scopes it was decided from.
    pub scopes: Vec<Seen>,
    /// Granted with each path record's SL instead of the level's pinned
    /// one (the fabric path said so): the TaskProlog exports the
    /// path-record switches, no SL.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_record_sl: bool,
}

impl Grant {
    /// The reasons, one line each.
    pub fn reason_lines(&self) -> Vec<&str> {
        self.reasons.iter().map(|r| r.line.as_str()).collect()
    }

    /// The error a refused grant fails a Prolog with: an assessment that
    /// could not run is its own error; the fabric's reasons are a fabric
    /// check's, a setting's are the node settings'.
    pub fn refusal(&self, could_not_run: Option<Error>) -> Error {
        if let Some(e) = could_not_run {
            return e;
        }
        let lines = self.reason_lines().join("; ");
        if self.reasons.iter().any(|r| r.scope == GrantScope::Settings) {
            Error::Settings(lines)
        } else {
            Error::Fabric(lines)
        }
    }

    /// One line: the decision's meaning and its first reason or warning.
    pub fn summary(&self) -> String {
        let first = self
            .reasons
            .first()
            .map(|r| r.line.as_str())
            .or(self.warnings.first().map(String::as_str));
        match first {
            Some(why) => format!("{}: {why}", self.decision.meaning()),
            None => self.decision.meaning().to_owned(),
        }
    }
}

/// Decides one level from its evidence under the mapping's policy.
///
/// - Fabric scopes (own ports, first hop): not looked at under `off`; under
///   `enforce` a problem (or a scope that could not be read) stops the
///   level; under `warn` it is a warning.
/// - Node settings: a setting that cannot be written stops the level under
///   every policy (its transaction would roll back); one that is gone or
///   could not be checked is a warning.
/// - A scope's own warnings (RoCE ports, a `devices` entry matching
///   nothing) are notes: they do not make it a grant with warnings.
/// - The fabric path is a fabric scope, but one that could not be looked at
///   (no verdict, an unreadable, stale or other mapping's one, a port the
///   audit did not read) is a warning under every policy but `off`: the
///   audit's file is on a shared filesystem, and its absence never costs a
///   grant.
///
/// A stopped level is refused (`on_failure: fail_job`) or runs on the
/// baseline (`continue`).
pub fn decide(check: FabricCheck, on_failure: OnFailure, evidence: &[Evidence]) -> Grant {
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let mut scopes = Vec::new();
    let mut path_record_sl = false;
    for e in evidence {
        let fabric = e.scope != GrantScope::Settings;
        if fabric && check == FabricCheck::Off {
            continue;
        }
        path_record_sl |= e.scope == GrantScope::FabricPath && e.found.path_record_sl;
        scopes.push(Seen {
            scope: e.scope,
            at_ms: e.at_ms,
        });
        let stops = !fabric || check == FabricCheck::Enforce;
        let reason = |line: &str| Reason {
            scope: e.scope,
            line: line.to_owned(),
        };
        for p in &e.found.problems {
            if stops {
                reasons.push(reason(p));
            } else {
                warnings.push(format!("fabric (warn): {p}"));
            }
        }
        if let Some(why) = &e.found.unread {
            if e.scope == GrantScope::FabricPath {
                warnings.push(format!("fabric path not checked: {why}"));
            } else if fabric && check == FabricCheck::Enforce {
                reasons.push(reason(&format!(
                    "{} could not be checked: {why}",
                    e.scope.as_str()
                )));
            } else if fabric {
                warnings.push(format!("fabric check could not run: {why}"));
            } else {
                warnings.push(format!("node settings could not be checked: {why}"));
            }
        }
        if fabric {
            notes.extend(e.found.warnings.iter().map(|w| format!("fabric: {w}")));
        } else {
            warnings.extend(
                e.found
                    .warnings
                    .iter()
                    .map(|w| format!("node settings: {w}")),
            );
        }
    }
    let decision = if !reasons.is_empty() {
        match on_failure {
            OnFailure::FailJob => Decision::Refused,
            OnFailure::Continue => Decision::Baseline,
        }
    } else if warnings.is_empty() {
        Decision::Granted
    } else {
        Decision::GrantedWithWarnings
    };
    Grant {
        decision,
        reasons,
        warnings,
        notes,
        scopes,
        path_record_sl,
    }
}

/// A port the first hop was read from, as it was then: a reading stands for
/// the port only while these are unchanged (a recabled port, a new SM).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadPort {
    /// `device/port`.
    pub port: String,
    pub node_guid: String,
    pub lid: u16,
    pub sm_lid: u16,
}

/// A scope read by `sync`/`health` for every level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeRead {
    /// ms since the Unix epoch.
    pub at_ms: u64,
    /// The ports read (the first hop's), empty for the settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ReadPort>,
    /// Level → what was found.
    pub levels: BTreeMap<String, Findings>,
}

/// The fabric audit's verdict as `sync`/`health` took it in for this node
/// (`fabric/sweep/verdict.rs`), for the Prologs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRead {
    /// When the audit made the verdict (ms since the Unix epoch); when it
    /// could not be used, when it was looked at.
    pub at_ms: u64,
    /// How old it may grow and still stand (the site's bound when it was
    /// read): a Prolog past it uses it no more.
    pub max_age_ms: u64,
    /// Level → what the verdict says of this node's ports.
    pub levels: BTreeMap<String, Findings>,
}

/// The persisted grants of the node (`/run/qoslane/grants.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The mapping the grants are of.
    pub mapping_sha256: String,
    /// The run that wrote it last (`health`, `sync`, `prolog`) and when
    /// (RFC 3339).
    pub by: String,
    pub time: String,
    /// The first hop as `sync`/`health` read it, when they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_hop: Option<ScopeRead>,
    /// The node settings' check of `sync`/`health`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<ScopeRead>,
    /// The fabric audit's verdict as `sync`/`health` read it, when the site
    /// names one (`QOSLANE_FABRIC_VERDICT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_path: Option<PathRead>,
    /// Level → its grant.
    pub grants: BTreeMap<String, Grant>,
}

/// What a Prolog may take from a record for its level.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The first hop's and the settings' evidence, when fresh and of these
    /// ports.
    pub evidence: Vec<Evidence>,
    /// The first hop has no fresh reading of these ports.
    pub first_hop_missing: bool,
    /// Why a recorded scope was not used (for the run's notes).
    pub notes: Vec<String>,
}

impl Record {
    /// The recorded first-hop and settings evidence of `level`, if the
    /// record is of `mapping_sha256`, younger than `max_age_ms` at `now_ms`
    /// and (for the first hop) was read on exactly `ports` (when given).
    pub fn recorded(
        record: Option<&Self>,
        mapping_sha256: &str,
        level: &str,
        ports: Option<&[ReadPort]>,
        now_ms: u64,
        max_age_ms: u64,
    ) -> Recorded {
        let mut out = Recorded {
            first_hop_missing: true,
            ..Recorded::default()
        };
        let Some(r) = record.filter(|r| r.mapping_sha256 == mapping_sha256) else {
            out.notes.push(
                "no first-hop or settings check of this mapping recorded (`qoslane health` or \
                 `sync` records one)"
                    .to_owned(),
            );
            return out;
        };
        let fresh = |s: &ScopeRead| now_ms.saturating_sub(s.at_ms) <= max_age_ms;
        let age = |s: &ScopeRead| now_ms.saturating_sub(s.at_ms) / 1000;
        match &r.first_hop {
            Some(s) if !fresh(s) => out.notes.push(format!(
                "the recorded first-hop check is {} s old (more than {} s)",
                age(s),
                max_age_ms / 1000
            )),
            Some(s) if ports.is_some_and(|p| s.ports != p) => out.notes.push(
                "the recorded first-hop check was read on other ports (or another LID or SM)"
                    .to_owned(),
            ),
            Some(s) => {
                out.first_hop_missing = false;
                out.evidence.push(Evidence {
                    scope: GrantScope::FirstHop,
                    at_ms: s.at_ms,
                    found: s.levels.get(level).cloned().unwrap_or_default(),
                });
            }
            None => out
                .notes
                .push("no first-hop check recorded (`qoslane health` records one)".to_owned()),
        }
        match &r.settings {
            Some(s) if fresh(s) => out.evidence.push(Evidence {
                scope: GrantScope::Settings,
                at_ms: s.at_ms,
                found: s.levels.get(level).cloned().unwrap_or_default(),
            }),
            Some(s) => out.notes.push(format!(
                "the recorded node-settings check is {} s old (more than {} s)",
                age(s),
                max_age_ms / 1000
            )),
            None => {}
        }
        match &r.fabric_path {
            Some(p) if now_ms.saturating_sub(p.at_ms) <= p.max_age_ms => {
                out.evidence.push(Evidence {
                    scope: GrantScope::FabricPath,
                    at_ms: p.at_ms,
                    found: p.levels.get(level).cloned().unwrap_or_default(),
                });
            }
            Some(p) => out.notes.push(format!(
                "the recorded fabric verdict is {} s old (more than {} s): not used",
                now_ms.saturating_sub(p.at_ms) / 1000,
                p.max_age_ms / 1000
            )),
            None => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(scope: GrantScope, problems: &[&str], warnings: &[&str]) -> Evidence {
        Evidence {
            scope,
            at_ms: 7,
            found: Findings {
                problems: problems.iter().map(|s| (*s).to_owned()).collect(),
                warnings: warnings.iter().map(|s| (*s).to_owned()).collect(),
                unread: None,
                path_record_sl: false,
            },
        }
    }

    /// The fabric path's switch to each path record's SL reaches the grant
    /// (the TaskProlog's exports follow it), not under `fabric_check: off`,
    /// and from no other scope.
    #[test]
    fn the_fabric_path_switches_a_level_to_the_path_record_sl() {
        let mut path = ev(GrantScope::FabricPath, &[], &["the SM routes by path SLs"]);
        path.found.path_record_sl = true;
        let g = decide(FabricCheck::Enforce, OnFailure::FailJob, &[path.clone()]);
        assert_eq!(g.decision, Decision::Granted);
        assert!(g.path_record_sl);
        assert_eq!(g.notes, ["fabric: the SM routes by path SLs"]);
        let g = decide(FabricCheck::Off, OnFailure::FailJob, &[path.clone()]);
        assert!(!g.path_record_sl);
        let mut own = path;
        own.scope = GrantScope::OwnPorts;
        assert!(!decide(FabricCheck::Enforce, OnFailure::FailJob, &[own]).path_record_sl);
    }

    #[test]
    fn a_first_hop_problem_refuses_a_fail_job_level_under_enforce_only() {
        let e = [
            ev(GrantScope::OwnPorts, &[], &[]),
            ev(GrantScope::FirstHop, &["SL 3 -> VL 15"], &[]),
        ];
        let g = decide(FabricCheck::Enforce, OnFailure::FailJob, &e);
        assert_eq!(g.decision, Decision::Refused);
        assert_eq!(g.reason_lines(), ["SL 3 -> VL 15"]);
        assert_eq!(g.reasons[0].scope, GrantScope::FirstHop);
        assert!(!g.decision.gets_its_sl());
        let g = decide(FabricCheck::Enforce, OnFailure::Continue, &e);
        assert_eq!(g.decision, Decision::Baseline);
        let g = decide(FabricCheck::Warn, OnFailure::FailJob, &e);
        assert_eq!(g.decision, Decision::GrantedWithWarnings);
        assert!(g.decision.gets_its_sl());
        let g = decide(FabricCheck::Off, OnFailure::FailJob, &e);
        assert_eq!((g.decision, g.scopes.len()), (Decision::Granted, 0));
    }

    #[test]
    fn a_setting_that_cannot_be_written_stops_the_level_under_every_policy() {
        let e = [ev(GrantScope::Settings, &["/proc/sys/x: read-only"], &[])];
        for check in [FabricCheck::Enforce, FabricCheck::Warn, FabricCheck::Off] {
            assert_eq!(
                decide(check, OnFailure::Continue, &e).decision,
                Decision::Baseline
            );
        }
    }

    #[test]
    fn a_scope_that_could_not_be_read_stops_only_under_enforce() {
        let e = [Evidence {
            scope: GrantScope::FirstHop,
            at_ms: 1,
            found: Findings {
                unread: Some("timeout".into()),
                ..Findings::default()
            },
        }];
        assert_eq!(
            decide(FabricCheck::Enforce, OnFailure::FailJob, &e).decision,
            Decision::Refused
        );
        assert_eq!(
            decide(FabricCheck::Warn, OnFailure::FailJob, &e).decision,
            Decision::GrantedWithWarnings
        );
    }

    #[test]
    fn a_fabric_path_loss_follows_the_policy_and_an_unread_verdict_never_stops_a_level() {
        let lost = [ev(
            GrantScope::FabricPath,
            &["fabric path: spine1 port 2 -> leaf2: SL 3 -> VL 15"],
            &[],
        )];
        let g = decide(FabricCheck::Enforce, OnFailure::FailJob, &lost);
        assert_eq!(g.decision, Decision::Refused);
        assert_eq!(g.reasons[0].scope, GrantScope::FabricPath);
        assert!(matches!(g.refusal(None), Error::Fabric(_)));
        let g = decide(FabricCheck::Enforce, OnFailure::Continue, &lost);
        assert_eq!(g.decision, Decision::Baseline);
        let g = decide(FabricCheck::Warn, OnFailure::FailJob, &lost);
        assert_eq!(g.decision, Decision::GrantedWithWarnings);
        assert_eq!(
            decide(FabricCheck::Off, OnFailure::FailJob, &lost).decision,
            Decision::Granted
        );
        let unread = [Evidence {
            scope: GrantScope::FabricPath,
            at_ms: 1,
            found: Findings {
                unread: Some("the fabric verdict is 4000 s old".into()),
                ..Findings::default()
            },
        }];
        for check in [FabricCheck::Enforce, FabricCheck::Warn] {
            let g = decide(check, OnFailure::FailJob, &unread);
            assert_eq!(g.decision, Decision::GrantedWithWarnings);
            assert_eq!(
                g.warnings,
                ["fabric path not checked: the fabric verdict is 4000 s old"]
            );
        }
    }

    #[test]
    fn a_recorded_fabric_verdict_stands_for_a_prolog_until_its_own_bound() {
        let mut levels = BTreeMap::new();
        levels.insert(
            "mc".to_owned(),
            Findings {
                problems: vec!["fabric path: x".into()],
                ..Findings::default()
            },
        );
        let r = Record {
            mapping_sha256: "abc".into(),
            fabric_path: Some(PathRead {
                at_ms: 1000,
                max_age_ms: 10_000,
                levels,
            }),
            ..Record::default()
        };
        let got = Record::recorded(Some(&r), "abc", "mc", None, 11_000, 5000);
        let path: Vec<&Evidence> = got
            .evidence
            .iter()
            .filter(|e| e.scope == GrantScope::FabricPath)
            .collect();
        assert_eq!(path.len(), 1, "{got:?}");
        assert_eq!(path[0].found.problems, ["fabric path: x"]);
        let got = Record::recorded(Some(&r), "abc", "mc", None, 11_001, 5000);
        assert!(
            got.evidence
                .iter()
                .all(|e| e.scope != GrantScope::FabricPath)
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.contains("fabric verdict is 10 s old"))
        );
    }

    #[test]
    fn a_record_stands_only_for_its_mapping_its_ports_and_its_age() {
        let port = ReadPort {
            port: "mlx5_0/1".into(),
            node_guid: "0x1".into(),
            lid: 3,
            sm_lid: 1,
        };
        let mut levels = BTreeMap::new();
        levels.insert(
            "mc".to_owned(),
            Findings {
                problems: vec!["dropped".into()],
                ..Findings::default()
            },
        );
        let r = Record {
            mapping_sha256: "abc".into(),
            first_hop: Some(ScopeRead {
                at_ms: 1000,
                ports: vec![port.clone()],
                levels,
            }),
            ..Record::default()
        };
        let ports = [port.clone()];
        let got = Record::recorded(Some(&r), "abc", "mc", Some(&ports), 2000, 5000);
        assert!(!got.first_hop_missing);
        assert_eq!(got.evidence[0].found.problems, ["dropped"]);
        for (sha, ports, now) in [
            ("other", vec![port.clone()], 2000),
            ("abc", vec![ReadPort { lid: 9, ..port }], 2000),
            ("abc", ports.to_vec(), 7000),
        ] {
            let got = Record::recorded(Some(&r), sha, "mc", Some(&ports), now, 5000);
            assert!(got.first_hop_missing && got.evidence.is_empty(), "{got:?}");
            assert_eq!(got.notes.len(), 1);
        }
        assert!(Record::recorded(None, "abc", "mc", None, 0, 1).first_hop_missing);
    }
}
