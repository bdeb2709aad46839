//! From a YAML tree to a [`Mapping`], reporting every problem at once.
//!
//! Two stages, like the rest of the program: shape and types first (keys,
//! scalars, ranges), then meaning across the file (uniqueness, references).
//! Nothing here touches the node.

use std::collections::HashMap;
use std::time::Instant;

use super::diagnostic::Diagnostic;
use super::types::{
    DeviceSelector, FabricCheck, Level, Mapping, NodeSetting, OnFailure, ServiceLevel, SettingPath,
    TrafficClass, VirtualLane,
};
use super::yaml::{self, Budget, Node, NodeKind, Span};

const TOP_KEYS: &[&str] = &[
    "default_level",
    "fabric_check",
    "fail_job_max_probe_age",
    "on_failure",
    "devices",
    "levels",
];
const LEVEL_KEYS: &[&str] = &[
    "name",
    "qos",
    "service_level",
    "virtual_lane",
    "traffic_class",
    "on_failure",
    "node_settings",
];
const SETTING_KEYS: &[&str] = &["path", "value"];
/// Every key the file may have (top level, level, node setting), for the
/// man page's test: qoslane-mapping(5) documents each.
pub const KEYS: [&[&str]; 3] = [TOP_KEYS, LEVEL_KEYS, SETTING_KEYS];

/// The longest name accepted for a level or a QoS (they end up in metric
/// labels and environment values).
const MAX_NAME_LEN: usize = 64;

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
            .filter(|d| d.severity == super::Severity::Error)
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
    diagnostics.sort_by_key(|d| (d.span.start, d.severity == super::Severity::Warning));
    let has_error = diagnostics
        .iter()
        .any(|d| d.severity == super::Severity::Error);
    Some(Validation {
        mapping: if has_error { None } else { mapping },
        diagnostics,
    })
}

struct Cx {
    diags: Vec<Diagnostic>,
    /// Spent: every loop stops, and the caller gets no answer.
    budget: Budget,
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
}

/// The first occurrence of each known key of a YAML mapping.
struct Fields<'n> {
    node: &'n Node,
    found: HashMap<&'n str, (&'n Node, &'n Node)>,
    /// Known keys an unknown key was taken for (`servce_level`): their
    /// absence is already reported, as that key's "did you mean".
    suggested: Vec<&'static str>,
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.found
            .get(key)
            .map(|(_, v)| *v)
            .filter(|v| !v.is_null())
    }
}

impl Cx {
    fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    // ---------------------------------------------------------------- shape

    /// Checks that `node` is a mapping with only `known` keys, each once.
    fn fields<'n>(
        &mut self,
        node: &'n Node,
        known: &[&'static str],
        what: &str,
    ) -> Option<Fields<'n>> {
        let NodeKind::Map(entries) = &node.kind else {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!(
                        "expected {what} (a mapping of keys), found {}",
                        node.describe()
                    ),
                )
                .label(format!("expected {what}")),
            );
            return None;
        };
        let mut found: HashMap<&'n str, (&'n Node, &'n Node)> = HashMap::new();
        let mut suggested = Vec::new();
        for (k, v) in entries {
            if self.budget.step() {
                break;
            }
            let NodeKind::Scalar { value: key, .. } = &k.kind else {
                self.err(Diagnostic::error(
                    k.span,
                    format!("keys of {what} must be plain names"),
                ));
                continue;
            };
            if let Some((first, _)) = found.get(key.as_str()) {
                self.err(
                    Diagnostic::error(k.span, format!("duplicate key `{key}` in {what}"))
                        .label("defined again here")
                        .related(first.span, "first defined here"),
                );
                continue;
            }
            if !known.contains(&key.as_str()) {
                let mut d = Diagnostic::error(k.span, format!("unknown key `{key}` in {what}"))
                    .label("unknown key");
                d = match nearest(key, known) {
                    Some(s) => {
                        suggested.push(s);
                        d.help(format!("did you mean `{s}`?"))
                    }
                    None => d.help(format!("known keys: {}", known.join(", "))),
                };
                self.err(d);
                continue;
            }
            found.insert(key.as_str(), (k, v));
        }
        Some(Fields {
            node,
            found,
            suggested,
        })
    }

    fn required<'n>(&mut self, f: &Fields<'n>, key: &str, what: &str) -> Option<&'n Node> {
        let v = f.get(key);
        // A misspelt key is reported once, as unknown with a suggestion,
        // not a second time as a missing one.
        if v.is_none() && !f.suggested.contains(&key) {
            let span = f.found.get(key).map_or(f.node.span, |(k, _)| k.span);
            self.err(
                Diagnostic::error(span, format!("{what} has no `{key}`"))
                    .label(format!("`{key}` is required here")),
            );
        }
        v
    }

    fn seq<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [Node]> {
        if let NodeKind::Seq(items) = &node.kind {
            Some(items)
        } else {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!("expected a list for {what}, found {}", node.describe()),
                )
                .label("expected a list"),
            );
            None
        }
    }

    /// A string value. Plain scalars that YAML 1.1 (and so Ansible) reads as
    /// booleans or null are refused: they mean something else to the tools
    /// around this file.
    fn string<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n str> {
        match &node.kind {
            NodeKind::Scalar {
                value,
                plain: false,
            } => Some(value),
            NodeKind::Scalar { value, plain: true } => {
                if yaml::is_null(value) {
                    self.err(
                        Diagnostic::error(
                            node.span,
                            format!("expected a string for {what}, found null"),
                        )
                        .label("empty value"),
                    );
                    None
                } else if is_yaml11_bool(value) {
                    self.err(
                        Diagnostic::error(
                            node.span,
                            format!("`{value}` is a boolean in YAML 1.1 (Ansible reads it as one), not a string"),
                        )
                        .label("ambiguous value")
                        .help(format!("quote it if you mean the string: \"{value}\"")),
                    );
                    None
                } else {
                    Some(value)
                }
            }
            _ => {
                self.err(
                    Diagnostic::error(
                        node.span,
                        format!("expected a string for {what}, found {}", node.describe()),
                    )
                    .label("expected a string"),
                );
                None
            }
        }
    }

    /// A decimal integer in `0..=max`, written plainly.
    fn integer(&mut self, node: &Node, key: &str, max: u64) -> Option<u64> {
        let range = format!("`{key}` must be an integer from 0 to {max}");
        let value = match &node.kind {
            NodeKind::Scalar { value, plain: true } if !yaml::is_null(value) => value,
            NodeKind::Scalar {
                value,
                plain: false,
            } => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found the string \"{value}\""))
                        .label("quoted")
                        .help("write the number without quotes"),
                );
                return None;
            }
            _ => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found {}", node.describe()))
                        .label("expected an integer"),
                );
                return None;
            }
        };
        let digits = value.strip_prefix('-').unwrap_or(value);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            self.err(
                Diagnostic::error(node.span, format!("{range}, found `{value}`"))
                    .label("not a decimal integer"),
            );
            return None;
        }
        if digits.len() > 1 && digits.starts_with('0') {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!("{range}, found `{value}` with a leading zero"),
                )
                .label("leading zero")
                .help(
                    "YAML 1.1 (Ansible) reads a leading zero as octal; write the number without it",
                ),
            );
            return None;
        }
        match (value.starts_with('-'), value.parse::<u64>()) {
            (false, Ok(n)) if n <= max => Some(n),
            _ => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found {value}"))
                        .label("out of range"),
                );
                None
            }
        }
    }

    fn choice<T: Copy>(
        &mut self,
        node: &Node,
        key: &str,
        names: &[&str],
        parse: fn(&str) -> Option<T>,
    ) -> Option<T> {
        // `off` is a documented value of `fabric_check`: take the plain word
        // even though YAML 1.1 would read it as a boolean.
        let s = match &node.kind {
            NodeKind::Scalar { value, .. } if !node.is_null() => value.as_str(),
            _ => {
                self.err(
                    Diagnostic::error(
                        node.span,
                        format!(
                            "`{key}` must be one of {}, found {}",
                            names.join(", "),
                            node.describe()
                        ),
                    )
                    .label("expected a word"),
                );
                return None;
            }
        };
        let v = parse(s);
        if v.is_none() {
            let mut d = Diagnostic::error(
                node.span,
                format!("`{key}` must be one of {}, found `{s}`", names.join(", ")),
            )
            .label("unknown value");
            if let Some(n) = nearest(s, names) {
                d = d.help(format!("did you mean `{n}`?"));
            }
            self.err(d);
        }
        v
    }

    fn name(&mut self, node: &Node, what: &str) -> Option<String> {
        let s = self.string(node, what)?;
        if s.is_empty() || s.len() > MAX_NAME_LEN || !s.bytes().all(is_name_byte) {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!(
                        "{what} `{}` must be 1 to {MAX_NAME_LEN} letters, digits, `_`, `-` or `.`",
                        s.escape_debug()
                    ),
                )
                .label("invalid name"),
            );
            return None;
        }
        Some(s.to_owned())
    }

    // ---------------------------------------------------------------- meaning

    fn mapping(&mut self, root: &Node) -> Option<Mapping> {
        let f = self.fields(root, TOP_KEYS, "the mapping file")?;
        let default_level = self
            .required(&f, "default_level", "the mapping file")
            .and_then(|n| self.name(n, "`default_level`").map(|s| (s, n.span)));
        let fabric_check = match f.get("fabric_check") {
            None => Some(FabricCheck::Enforce),
            Some(n) => self.choice(n, "fabric_check", FabricCheck::NAMES, FabricCheck::parse),
        };
        let on_failure = match f.get("on_failure") {
            None => Some(OnFailure::Continue),
            Some(n) => self.choice(n, "on_failure", OnFailure::NAMES, OnFailure::parse),
        };
        let max_probe_age = match f.get("fail_job_max_probe_age") {
            None => Some(Mapping::DEFAULT_FAIL_JOB_MAX_PROBE_AGE),
            Some(n) => self
                .integer(
                    n,
                    "fail_job_max_probe_age",
                    Mapping::MAX_FAIL_JOB_MAX_PROBE_AGE.as_secs(),
                )
                .map(std::time::Duration::from_secs),
        };
        let devices = match f.get("devices") {
            None => Some(Vec::new()),
            Some(n) => self.devices(n),
        };
        let (levels, names) = self
            .required(&f, "levels", "the mapping file")
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
        Some(m)
    }

    fn devices(&mut self, node: &Node) -> Option<Vec<DeviceSelector>> {
        let items = self.seq(node, "`devices`")?;
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen: HashMap<String, Span> = HashMap::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(s) = self.string(item, "a device") else {
                ok = false;
                continue;
            };
            let (dev, port) = match s.split_once('/') {
                None => (s, None),
                Some((d, p)) => (d, Some(p)),
            };
            let port = match port.map(|p| p.parse::<u32>().ok().filter(|n| (1..=255).contains(n))) {
                Some(None) => {
                    self.err(
                        Diagnostic::error(
                            item.span,
                            format!(
                                "device `{s}`: the port after `/` must be a number from 1 to 255"
                            ),
                        )
                        .label("bad port"),
                    );
                    ok = false;
                    continue;
                }
                Some(Some(p)) => Some(p),
                None => None,
            };
            if dev.is_empty() || dev.len() > MAX_NAME_LEN || !dev.bytes().all(is_name_byte) {
                self.err(
                    Diagnostic::error(
                        item.span,
                        format!(
                            "device `{}` is not an HCA name such as `mlx5_0` or `mlx5_0/1`",
                            s.escape_debug()
                        ),
                    )
                    .label("bad device"),
                );
                ok = false;
                continue;
            }
            if let Some(first) = seen.get(s) {
                self.err(
                    Diagnostic::error(item.span, format!("device `{s}` is listed twice"))
                        .label("listed again here")
                        .related(*first, "first listed here"),
                );
                ok = false;
                continue;
            }
            seen.insert(s.to_owned(), item.span);
            out.push(DeviceSelector {
                device: dev.to_owned(),
                port,
            });
        }
        ok.then_some(out)
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
            level_names.push(name);
        }
        (ok.then_some(levels), names_ok.then_some(level_names))
    }

    /// One level: the whole of it when valid, and every valid part.
    fn level(&mut self, node: &Node) -> LevelParts {
        let Some(f) = self.fields(node, LEVEL_KEYS, "a level") else {
            return LevelParts::default();
        };
        let name = self
            .required(&f, "name", "this level")
            .and_then(|n| Some((self.name(n, "level name")?, n.span)));
        let (qos, qos_ok) = self
            .required(&f, "qos", "this level")
            .map_or((Vec::new(), false), |n| self.qos_list(n));
        let sl = self
            .required(&f, "service_level", "this level")
            .and_then(|n| {
                let v = self.integer(n, "service_level", u64::from(ServiceLevel::MAX))?;
                Some((ServiceLevel::new(v)?, n.span))
            });
        let vl = match f.get("virtual_lane") {
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
                .integer(n, "virtual_lane", u64::from(VirtualLane::MAX))
                .and_then(VirtualLane::new)
                .map(Some),
        };
        let tc = match f.get("traffic_class") {
            None => Some(None),
            Some(n) => self
                .integer(n, "traffic_class", u64::from(TrafficClass::MAX))
                .and_then(TrafficClass::new)
                .map(Some),
        };
        let on_failure = match f.get("on_failure") {
            None => Some(None),
            Some(n) => self
                .choice(n, "on_failure", OnFailure::NAMES, OnFailure::parse)
                .map(Some),
        };
        let node_settings = match f.get("node_settings") {
            None => Some(Vec::new()),
            Some(n) => self.node_settings(n),
        };
        let level = match (&name, qos_ok, sl, vl, tc, on_failure, node_settings) {
            (Some((name, _)), true, Some((sl, _)), Some(vl), Some(tc), Some(of), Some(ns)) => {
                Some(Level {
                    name: name.clone(),
                    qos: qos.iter().map(|(q, _)| q.clone()).collect(),
                    service_level: sl,
                    virtual_lane: vl,
                    traffic_class: tc,
                    on_failure: of,
                    node_settings: ns,
                })
            }
            _ => None,
        };
        LevelParts {
            level,
            name,
            qos,
            service_level: sl.map(|(sl, span)| (sl.get(), span)),
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

    fn node_settings(&mut self, node: &Node) -> Option<Vec<NodeSetting>> {
        let items = self.seq(node, "`node_settings`")?;
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen: HashMap<String, Span> = HashMap::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(f) = self.fields(item, SETTING_KEYS, "a node setting") else {
                ok = false;
                continue;
            };
            let path_node = self.required(&f, "path", "this node setting");
            let path = path_node.and_then(|n| {
                let s = self.string(n, "`path`")?;
                match SettingPath::new(s) {
                    Ok(p) => Some(p),
                    Err(msg) => {
                        self.err(
                            Diagnostic::error(n.span, msg)
                                .label("bad path")
                                .help("node settings are absolute, normalised paths under /sys/ or /proc/sys/"),
                        );
                        None
                    }
                }
            });
            let value = self
                .required(&f, "value", "this node setting")
                .and_then(|n| {
                    let s = self.string(n, "`value`")?;
                    // A plain number with a leading zero is octal to YAML 1.1
                    // (Ansible, which templates this file) and decimal here.
                    let plain = matches!(n.kind, NodeKind::Scalar { plain: true, .. });
                    if plain
                        && s.len() > 1
                        && s.starts_with('0')
                        && s.bytes().all(|b| b.is_ascii_digit())
                    {
                        self.err(
                            Diagnostic::error(
                                n.span,
                                format!("`value: {s}` has a leading zero: YAML 1.1 (Ansible) reads it as octal"),
                            )
                            .label("leading zero")
                            .help(format!("quote it to write it as it is (\"{s}\"), or write the number without the zero")),
                        );
                        return None;
                    }
                    if s.contains(['\n', '\r', '\0']) {
                        self.err(
                            Diagnostic::error(
                                n.span,
                                "a node setting value must be one line with no NUL",
                            )
                            .label("multi-line value"),
                        );
                        return None;
                    }
                    Some(s.to_owned())
                });
            let (Some(path), Some(value)) = (path, value) else {
                ok = false;
                continue;
            };
            let span = path_node.map_or(item.span, |n| n.span);
            if let Some(first) = seen.get(path.as_str()) {
                self.err(
                    Diagnostic::error(
                        span,
                        format!("node setting `{path}` is listed twice in this level"),
                    )
                    .label("listed again here")
                    .related(*first, "first listed here"),
                );
                ok = false;
                continue;
            }
            seen.insert(path.as_str().to_owned(), span);
            out.push(NodeSetting { path, value });
        }
        ok.then_some(out)
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Plain words YAML 1.1 resolves to booleans.
fn is_yaml11_bool(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "y" | "yes" | "n" | "no" | "true" | "false" | "on" | "off"
    )
}

/// The known word closest to `word`, when it is close enough to be a typo.
/// A word whose length differs by more than the distance allowed is skipped
/// unmeasured (the distance is at least the difference): `default_level`
/// is looked up among every level name.
fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let chars = word.chars().count();
    known
        .iter()
        .filter(|k| k.chars().count().abs_diff(chars) <= (k.len() / 3).max(2))
        .map(|k| (strsim::damerau_levenshtein(word, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
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

    #[test]
    fn nearest_skips_words_of_another_length_only_when_they_cannot_be_near() {
        assert_eq!(nearest("normla", &["normal", "high"]), Some("normal"));
        assert_eq!(nearest("hig", &["normal", "high"]), Some("high"));
        assert_eq!(
            nearest("mission-critcal", &["mission-critical"]),
            Some("mission-critical")
        );
        assert_eq!(nearest("x", &["mission-critical"]), None);
    }
}
