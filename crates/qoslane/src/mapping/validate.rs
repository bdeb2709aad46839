//! From a YAML tree to a [`Mapping`], reporting every problem at once.
//!
//! Two stages, like the rest of the program: shape and types first (keys,
//! scalars, ranges: [`super::shape`], the keys from [`super::keys`]), then
//! meaning across the file (uniqueness, references), here. Nothing here
//! touches the node.

use std::collections::HashMap;
use std::time::Instant;

use super::diagnostic::{Diagnostic, Severity};
use super::keys::{self, Place};
use super::once::{ListWords, Named};
use super::shape::{Cx, MAX_NAME_LEN, is_name_byte, nearest};
use super::types::{
    DeviceSelector, FabricCheck, Level, Mapping, OnFailure, OnUnknownQos, PathSl, ServiceLevel,
    SmTraffic, TrafficClass, VirtualLane,
};
use super::yaml::{self, Budget, Node, NodeKind, Span};

/// The outcome of validating a file: the mapping when there is no error,
/// and every diagnostic (warnings too) in source order.
#[derive(Debug)]
pub struct Validation {
    pub mapping: Option<Mapping>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Validation {
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
    }
}

/// Validates the text of a mapping file.
pub fn validate_str(src: &str) -> Validation {
    let Some(v) = validate_within(src, Budget::unlimited()) else {
        unreachable!("an unlimited budget is never spent")
    };
    v
}

/// [`validate_str`], giving up once `until` has passed: `None` then. For a
/// run with a deadline (the Prolog), so that a huge file cannot take all of
/// it: a megabyte of diagnostics takes a tenth of a second or more to check.
pub fn validate_str_until(src: &str, until: Instant) -> Option<Validation> {
    validate_within(src, Budget::until(until))
}

/// The `on_unknown_qos` a mapping file says even when the file is otherwise
/// invalid — what a node with no usable mapping (no last-known-good copy
/// either) refuses by. Only a YAML mapping whose top-level key holds one of
/// the key's words counts; anything else (not YAML, the key absent, another
/// word, parsing past `until`) is the default, `default_level`.
pub fn on_unknown_qos_of(src: &str, until: Option<Instant>) -> OnUnknownQos {
    let mut budget = until.map_or_else(Budget::unlimited, Budget::until);
    let Ok(Some(root)) = yaml::parse_within(src, &mut budget) else {
        return OnUnknownQos::DefaultLevel;
    };
    let NodeKind::Map(entries) = &root.kind else {
        return OnUnknownQos::DefaultLevel;
    };
    entries
        .iter()
        .find_map(|(k, v)| match (&k.kind, &v.kind) {
            (NodeKind::Scalar { value: key, .. }, NodeKind::Scalar { value, .. })
                if key == keys::ON_UNKNOWN_QOS.name =>
            {
                OnUnknownQos::parse(value)
            }
            _ => None,
        })
        .unwrap_or(OnUnknownQos::DefaultLevel)
}

fn validate_within(src: &str, budget: Budget) -> Option<Validation> {
    let mut cx = Cx {
        diags: Vec::new(),
        budget,
    };
    let parsed = yaml::parse_within(src, &mut cx.budget);
    if cx.budget.spent() {
        return None;
    }
    let mapping = match parsed {
        Err(e) => {
            let mut d = e
                .related
                .into_iter()
                .fold(Diagnostic::error(e.span, e.message), |d, (span, label)| {
                    d.related(span, label)
                });
            if let Some(h) = e.help {
                d = d.help(h);
            }
            cx.diags.push(d);
            None
        }
        Ok(None) => {
            cx.diags.push(
                Diagnostic::error(
                    Span {
                        line: 1,
                        col: 1,
                        start: 0,
                        end: 0,
                    },
                    if src.trim().is_empty() {
                        "the mapping file is empty"
                    } else {
                        "the mapping file has only comments: no YAML document"
                    },
                )
                .help("a mapping needs `default_level` and at least one entry under `levels`"),
            );
            None
        }
        Ok(Some(root)) => cx.mapping(&root),
    };
    if cx.budget.spent() {
        return None;
    }
    let mut diagnostics = cx.diags;
    diagnostics.sort_by_key(|d| (d.span.start, d.severity == Severity::Warning));
    let has_error = diagnostics.iter().any(|d| d.severity == Severity::Error);
    Some(Validation {
        mapping: if has_error { None } else { mapping },
        diagnostics,
    })
}

/// A level as far as it could be read.
#[derive(Default)]
struct LevelParts {
    /// The whole level, when every part of it is valid.
    level: Option<Level>,
    name: Option<(String, Span)>,
    /// The valid QoS names.
    qos: Vec<(String, Span)>,
    service_level: Option<(u8, Span)>,
    /// The valid `sm_traffic` entries.
    sm_traffic: Vec<(SmTraffic, Span)>,
}

impl Cx {
    fn mapping(&mut self, root: &Node) -> Option<Mapping> {
        let f = self.fields(root, Place::Top)?;
        let default_level = f
            .get(&keys::DEFAULT_LEVEL)
            .and_then(|n| self.name(n, "`default_level`").map(|s| (s, n.span)));
        let fabric_check = match f.get(&keys::FABRIC_CHECK) {
            None => Some(FabricCheck::Enforce),
            Some(n) => self.choice(n, &keys::FABRIC_CHECK, FabricCheck::parse),
        };
        let on_failure = match f.get(&keys::ON_FAILURE) {
            None => Some(OnFailure::Continue),
            Some(n) => self.choice(n, &keys::ON_FAILURE, OnFailure::parse),
        };
        let on_unknown_qos = match f.get(&keys::ON_UNKNOWN_QOS) {
            None => Some(OnUnknownQos::DefaultLevel),
            Some(n) => self.choice(n, &keys::ON_UNKNOWN_QOS, OnUnknownQos::parse),
        };
        let max_probe_age = match f.get(&keys::FAIL_JOB_MAX_PROBE_AGE) {
            None => Some(Mapping::DEFAULT_FAIL_JOB_MAX_PROBE_AGE),
            Some(n) => self
                .integer(
                    n,
                    keys::FAIL_JOB_MAX_PROBE_AGE.name,
                    Mapping::MAX_FAIL_JOB_MAX_PROBE_AGE.as_secs(),
                )
                .map(std::time::Duration::from_secs),
        };
        let devices = match f.get(&keys::DEVICES) {
            None => Some(Vec::new()),
            Some(n) => self.devices(n),
        };
        let exports = match f.get(&keys::EXPORTS) {
            None => Some(super::types::ExportsEdit::default()),
            Some(n) => self.exports(n),
        };
        let (levels, names) = f
            .get(&keys::LEVELS)
            .map_or((None, None), |n| self.levels(n));

        let (default_name, default_span) = default_level?;
        // Checked whenever every level has a valid name, even if some other
        // part of a level is wrong: all faults at once.
        if let Some(names) = names.filter(|n| !n.contains(&default_name)) {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut d = Diagnostic::error(
                default_span,
                format!("`default_level` names `{default_name}`, which is not a level"),
            )
            .label("no such level");
            d = match nearest(&default_name, &names) {
                Some(n) => d.help(format!("did you mean `{n}`?")),
                None => d.help(format!("levels: {}", names.join(", "))),
            };
            self.err(d);
            return None;
        }
        let levels = levels?;
        let default_index = levels.iter().position(|l| l.name == default_name)?;
        let mut m =
            Mapping::new_validated(default_index, fabric_check?, on_failure?, devices?, levels);
        m.fail_job_max_probe_age = max_probe_age?;
        m.on_unknown_qos = on_unknown_qos?;
        m.exports = exports?;
        Some(m)
    }

    fn devices(&mut self, node: &Node) -> Option<Vec<DeviceSelector>> {
        let words = ListWords {
            what: "`devices`",
            verb: "listed",
            twice: |name| format!("device `{name}` is listed twice"),
        };
        self.named_list(node, &words, |cx, item| {
            let s = cx.string(item, "a device")?;
            let (dev, port) = match s.split_once('/') {
                None => (s, None),
                Some((d, p)) => (d, Some(p)),
            };
            let port = match port.map(|p| p.parse::<u32>().ok().filter(|n| (1..=255).contains(n))) {
                Some(None) => {
                    cx.err(
                        Diagnostic::error(
                            item.span,
                            format!(
                                "device `{s}`: the port after `/` must be a number from 1 to 255"
                            ),
                        )
                        .label("bad port"),
                    );
                    return None;
                }
                Some(Some(p)) => Some(p),
                None => None,
            };
            if dev.is_empty() || dev.len() > MAX_NAME_LEN || !dev.bytes().all(is_name_byte) {
                cx.err(
                    Diagnostic::error(
                        item.span,
                        format!(
                            "device `{}` is not an HCA name such as `mlx5_0` or `mlx5_0/1`",
                            s.escape_debug()
                        ),
                    )
                    .label("bad device"),
                );
                return None;
            }
            Some(Named {
                value: DeviceSelector {
                    device: dev.to_owned(),
                    port,
                },
                name: s.to_owned(),
                span: item.span,
            })
        })
    }

    /// The levels, when all are valid; and their names, when every level
    /// has a valid one. The checks across levels (names, QoS, SLs) use every
    /// valid part of every level, so one wrong value in a level does not hide
    /// a duplicate elsewhere in it.
    fn levels(&mut self, node: &Node) -> (Option<Vec<Level>>, Option<Vec<String>>) {
        let Some(items) = self.seq(node, "`levels`") else {
            return (None, None);
        };
        if items.is_empty() {
            self.err(
                Diagnostic::error(
                    node.span,
                    "`levels` is empty: a mapping needs at least one level",
                )
                .label("no levels"),
            );
            return (None, None);
        }
        let mut levels = Vec::new();
        let mut level_names = Vec::new();
        let mut ok = true;
        let mut names_ok = true;
        // Cross-level uniqueness: first place each thing was seen.
        let mut names: HashMap<String, Span> = HashMap::new();
        let mut qos_seen: HashMap<String, (Span, String)> = HashMap::new();
        let mut sls: HashMap<u8, (Span, String)> = HashMap::new();
        let mut traffic = Vec::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let parts = self.level(item);
            match parts.level {
                Some(level) => levels.push(level),
                None => ok = false,
            }
            // Without its name, a level cannot be named in a message.
            let Some((name, name_span)) = parts.name else {
                names_ok = false;
                continue;
            };
            if let Some(first) = names.get(&name) {
                self.err(
                    Diagnostic::error(name_span, format!("level name `{name}` is used twice"))
                        .label("used again here")
                        .related(*first, "first used here"),
                );
                ok = false;
            } else {
                names.insert(name.clone(), name_span);
            }
            for (q, span) in &parts.qos {
                let key = q.to_ascii_lowercase();
                if let Some((first, other)) = qos_seen.get(&key) {
                    let msg = if *other == name {
                        format!("QoS `{q}` is listed twice in level `{name}`")
                    } else {
                        format!(
                            "QoS `{q}` is in two levels: `{other}` and `{name}`; a QoS maps to one level"
                        )
                    };
                    self.err(
                        Diagnostic::error(*span, msg)
                            .label("listed again here")
                            .related(*first, format!("first listed in level `{other}`")),
                    );
                    ok = false;
                } else {
                    qos_seen.insert(key, (*span, name.clone()));
                }
            }
            if let Some((sl, sl_span)) = parts.service_level {
                if let Some((first, other)) = sls.get(&sl) {
                    self.err(
                        Diagnostic::error(sl_span, format!("service_level {sl} is used by levels `{other}` and `{name}`; each level needs its own SL"))
                            .label("used again here")
                            .related(*first, format!("used by level `{other}`")),
                    );
                    ok = false;
                } else {
                    sls.insert(sl, (sl_span, name.clone()));
                }
            }
            ok &= self.traffic_overlaps(&mut traffic, &name, &parts.sm_traffic);
            level_names.push(name);
        }
        (ok.then_some(levels), names_ok.then_some(level_names))
    }

    /// One level: the whole of it when valid, and every valid part.
    fn level(&mut self, node: &Node) -> LevelParts {
        let Some(f) = self.fields(node, Place::Level) else {
            return LevelParts::default();
        };
        let name = f
            .get(&keys::NAME)
            .and_then(|n| Some((self.name(n, "level name")?, n.span)));
        let (qos, qos_ok) = f
            .get(&keys::QOS)
            .map_or((Vec::new(), false), |n| self.qos_list(n));
        let sl = f.get(&keys::SERVICE_LEVEL).and_then(|n| {
            let v = self.integer(n, keys::SERVICE_LEVEL.name, u64::from(ServiceLevel::MAX))?;
            Some((ServiceLevel::new(v)?, n.span))
        });
        let vl = match f.get(&keys::VIRTUAL_LANE) {
            None => Some(None),
            // VL15 gets its own message; any other value the range message,
            // which must say 0 to 14, not 0 to 15.
            Some(n) if matches!(&n.kind, NodeKind::Scalar { value, plain: true } if value == "15") =>
            {
                self.err(
                    Diagnostic::error(
                        n.span,
                        "virtual_lane 15 is the management lane: traffic on it is dropped",
                    )
                    .label("VL15")
                    .help("data lanes are 0 to 14"),
                );
                None
            }
            Some(n) => self
                .integer(n, keys::VIRTUAL_LANE.name, u64::from(VirtualLane::MAX))
                .and_then(VirtualLane::new)
                .map(Some),
        };
        let tc = match f.get(&keys::TRAFFIC_CLASS) {
            None => Some(None),
            Some(n) => self
                .integer(n, keys::TRAFFIC_CLASS.name, u64::from(TrafficClass::MAX))
                .and_then(TrafficClass::new)
                .map(Some),
        };
        let on_failure = match f.get(&keys::LEVEL_ON_FAILURE) {
            None => Some(None),
            Some(n) => self
                .choice(n, &keys::LEVEL_ON_FAILURE, OnFailure::parse)
                .map(Some),
        };
        let path_sl = match f.get(&keys::PATH_SL) {
            None => Some(PathSl::default()),
            Some(n) => self.choice(n, &keys::PATH_SL, PathSl::parse),
        };
        let node_settings = match f.get(&keys::NODE_SETTINGS) {
            None => Some(Vec::new()),
            Some(n) => self.node_settings(n),
        };
        let (sm_traffic, traffic_ok) = f
            .get(&keys::SM_TRAFFIC)
            .map_or((Vec::new(), true), |n| self.sm_traffic(n));
        let level = match (&name, qos_ok, sl, vl, tc, on_failure, node_settings) {
            (Some((name, _)), true, Some((sl, _)), Some(vl), Some(tc), Some(of), Some(ns))
                if traffic_ok && path_sl.is_some() =>
            {
                Some(Level {
                    name: name.clone(),
                    qos: qos.iter().map(|(q, _)| q.clone()).collect(),
                    service_level: sl,
                    virtual_lane: vl,
                    traffic_class: tc,
                    on_failure: of,
                    path_sl: path_sl.unwrap_or_default(),
                    node_settings: ns,
                    sm_traffic: sm_traffic.iter().map(|(t, _)| t.clone()).collect(),
                })
            }
            _ => None,
        };
        LevelParts {
            level,
            name,
            qos,
            service_level: sl.map(|(sl, span)| (sl.get(), span)),
            sm_traffic,
        }
    }

    /// The valid QoS names with their places, and whether the whole list is
    /// valid.
    fn qos_list(&mut self, node: &Node) -> (Vec<(String, Span)>, bool) {
        let Some(items) = self.seq(node, "`qos`") else {
            return (Vec::new(), false);
        };
        if items.is_empty() {
            self.err(
                Diagnostic::error(
                    node.span,
                    "`qos` is empty: list the Slurm QoS names of this level",
                )
                .label("no QoS"),
            );
            return (Vec::new(), false);
        }
        let mut names = Vec::new();
        let mut ok = true;
        for item in items {
            if self.budget.step() {
                break;
            }
            match self.name(item, "QoS name") {
                Some(q) => {
                    if q.bytes().any(|b| b.is_ascii_uppercase()) {
                        self.err(
                            Diagnostic::warning(
                                item.span,
                                format!(
                                    "Slurm stores QoS names in lower case; `{q}` matches `{}`",
                                    q.to_ascii_lowercase()
                                ),
                            )
                            .label("upper case"),
                        );
                    }
                    names.push((q, item.span));
                }
                None => ok = false,
            }
        }
        (names, ok)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    const SRC: &str = "default_level: a\nlevels: [x, y]\n";

    #[test]
    fn with_time_left_validation_is_the_same() {
        let later = Instant::now() + Duration::from_secs(3600);
        let v = validate_str_until(SRC, later).expect("in time");
        assert_eq!(v.diagnostics, validate_str(SRC).diagnostics);
        assert_eq!(v.diagnostics.len(), 2);
    }

    #[test]
    fn past_the_deadline_there_is_no_answer() {
        assert!(validate_str_until(SRC, Instant::now()).is_none());
        // Given up part way: a big file, a deadline that passes meanwhile.
        let big = format!(
            "default_level: a\nlevels: [{}]\n",
            vec!["a"; 300_000].join(", ")
        );
        let until = Instant::now() + Duration::from_millis(5);
        let t = Instant::now();
        assert!(validate_str_until(&big, until).is_none());
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    }
}
