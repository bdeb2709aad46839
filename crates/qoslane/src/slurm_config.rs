//! The Slurm side of placement (`qoslane slurm-config`): what slurmctld
//! needs so that a `fail_job` level's jobs go only to the nodes that carry
//! the level. Pure: a mapping and the admin's sizes in, the slurm.conf lines
//! to include and `job_submit.lua` out, or every reason the mapping cannot be
//! expressed. The facts behind each line: docs/dev/slurm-placement.md.
//!
//! - every node lists the any-node feature [`ANY_NODE_FEATURE`] (kept active
//!   always) and `qoslane_<level>` of every `fail_job` level; a node keeps a
//!   level's feature active while it carries the level;
//! - `JobSubmitPlugins=lua` and the script, rendered from
//!   `deploy/slurm/job_submit.lua.in`: the QoS → feature table is the only
//!   generated part;
//! - FUTURE placeholder nodes carrying every feature, so that a job of a level
//!   carried nowhere pends instead of being rejected at submit.

use std::fmt::Write as _;

use crate::mapping::{Mapping, OnFailure};

/// The feature every node keeps active: what a job's constraint becomes when
/// its QoS changes to one without a level feature (Slurm reads an empty value
/// set from Lua as "no change").
pub const ANY_NODE_FEATURE: &str = "qoslane";
/// A level's node feature is this prefix and its name.
pub const FEATURE_PREFIX: &str = "qoslane_";
/// The placeholder nodes' name: `qoslane-wait1`…
pub const PLACEHOLDER_NAME: &str = "qoslane-wait";
/// The template of `job_submit.lua`.
pub const LUA_TEMPLATE: &str = include_str!("../../../deploy/slurm/job_submit.lua.in");
/// The first line of every script this module writes: how a script of
/// qoslane's is told from a site's own.
pub const LUA_FIRST_LINE: &str = "-- job_submit.lua: qoslane placement.";
/// The file names `--output DIR` writes.
pub const CONF_FILE: &str = "qoslane.conf";
pub const LUA_FILE: &str = "job_submit.lua";

/// The admin's sizes of the placeholder nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholders {
    /// How many: the most nodes one job of these levels asks for.
    pub placeholders: u32,
    /// The largest node's CPUs.
    pub cpus: u32,
    /// The largest node's RealMemory, in MB.
    pub memory_mb: u64,
    /// The largest node's Gres (slurm.conf's form), if any.
    pub gres: Option<String>,
    /// The site's own node features, which jobs may ask for besides the level's.
    pub features: Vec<String>,
}

/// One level placed: its feature and the QoS names that take it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlacedLevel {
    pub level: String,
    pub feature: String,
    pub qos: Vec<String>,
}

/// The generated files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmConfig {
    pub levels: Vec<PlacedLevel>,
    /// The slurm.conf lines to include, with comments.
    pub conf: String,
    /// `job_submit.lua`.
    pub lua: String,
}

/// A level's node feature.
pub fn feature_of(level: &str) -> String {
    format!("{FEATURE_PREFIX}{level}")
}

/// Why `name` cannot be a Slurm node feature, or `None` when it can: letters,
/// digits, `_`, `-` and `.` only (the operators of a constraint — `&`, `|`,
/// `,`, `*`, `!`, brackets, parentheses — and `=`, `:` or a blank would split
/// it or mean something else).
pub fn feature_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("an empty name".into());
    }
    let bad: String = name
        .chars()
        .filter(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "`{}` holds {:?}: a Slurm node feature takes letters, digits, `_`, `-` and `.` only",
            name.escape_debug(),
            bad
        )
    })
}

/// Why a QoS name cannot be a key of the script's table, or `None`.
fn qos_problem(name: &str) -> Option<String> {
    // The script splits a --qos list at commas; a quote or a backslash would
    // need escaping in the Lua literal: refused rather than escaped, since
    // Slurm's own QoS names hold none of them.
    let bad: String = name
        .chars()
        .filter(|c| matches!(c, ',' | '"' | '\\') || c.is_whitespace() || c.is_control())
        .collect();
    (!bad.is_empty() || name.is_empty()).then(|| {
        format!(
            "QoS `{}` cannot be named in job_submit.lua ({})",
            name.escape_debug(),
            if bad.is_empty() {
                "empty".to_owned()
            } else {
                format!("{bad:?}")
            }
        )
    })
}

/// The levels placed: every level whose policy is `fail_job`, in the
/// mapping's order, with its feature and QoS names (as Slurm stores them: in
/// lower case).
pub fn placed_levels(mapping: &Mapping) -> Vec<PlacedLevel> {
    mapping
        .levels()
        .iter()
        .filter(|l| mapping.on_failure_for(l) == OnFailure::FailJob)
        .map(|l| PlacedLevel {
            level: l.name.clone(),
            feature: feature_of(&l.name),
            qos: l.qos.iter().map(|q| q.to_ascii_lowercase()).collect(),
        })
        .collect()
}

/// The Slurm configuration for `mapping`, or every reason it cannot be made.
/// `source` names the mapping in the files' headers.
///
/// # Errors
/// Every problem, each naming its place: a level name or a site feature that
/// cannot be a node feature, a QoS the script cannot name, a default level
/// under `fail_job`, nothing to place, a size that cannot be.
pub fn generate(
    mapping: &Mapping,
    opts: &Placeholders,
    source: &str,
    sha256: &str,
) -> Result<SlurmConfig, Vec<String>> {
    let mut problems = Vec::new();
    let levels = placed_levels(mapping);
    if levels.is_empty() {
        problems.push(format!(
            "no level of the mapping has `on_failure: fail_job` (levels: {}): nothing to place; \
             Slurm needs nothing from qoslane for `continue` levels",
            mapping
                .levels()
                .iter()
                .map(|l| format!("{} {}", l.name, mapping.on_failure_for(l).as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for l in &levels {
        if let Some(p) = feature_problem(&l.feature) {
            problems.push(format!("level `{}`: its feature {p}", l.level));
        }
        for q in &l.qos {
            if let Some(p) = qos_problem(q) {
                problems.push(format!("level `{}`: {p}", l.level));
            }
        }
    }
    let default = mapping.default_level();
    if mapping.on_failure_for(default) == OnFailure::FailJob {
        problems.push(format!(
            "`default_level` `{}` is `fail_job`: a job whose QoS no level lists gets it, and \
             job_submit.lua places only the QoS names the mapping lists; give that level \
             `on_failure: continue`, or list every QoS",
            default.name
        ));
    }
    for f in &opts.features {
        if let Some(p) = feature_problem(f) {
            problems.push(format!("--features: {p}"));
        }
        if f == ANY_NODE_FEATURE || f.starts_with(FEATURE_PREFIX) {
            problems.push(format!(
                "--features: `{f}` is qoslane's own (`{ANY_NODE_FEATURE}`, `{FEATURE_PREFIX}*`)"
            ));
        }
    }
    if opts.placeholders == 0 {
        problems.push("--placeholders 0: at least one (the most nodes one job asks for)".into());
    }
    if opts.cpus == 0 {
        problems.push("--cpus 0: the largest node's CPUs".into());
    }
    if opts.memory_mb == 0 {
        problems.push("--memory 0: the largest node's RealMemory in MB".into());
    }
    if let Some(g) = &opts.gres
        && (g.is_empty() || g.chars().any(|c| c.is_whitespace() || c == '#'))
    {
        problems.push(format!(
            "--gres `{}`: slurm.conf's Gres= form, without blanks (gpu:4, gpu:a100:2,nic:1)",
            g.escape_debug()
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(SlurmConfig {
        conf: conf_text(&levels, opts, source, sha256),
        lua: lua_text(&levels),
        levels,
    })
}

/// The placeholders' node list: `qoslane-wait1` or `qoslane-wait[1-K]`.
pub fn placeholder_nodes(k: u32) -> String {
    if k == 1 {
        format!("{PLACEHOLDER_NAME}1")
    } else {
        format!("{PLACEHOLDER_NAME}[1-{k}]")
    }
}

fn conf_text(levels: &[PlacedLevel], opts: &Placeholders, source: &str, sha256: &str) -> String {
    let ours: Vec<&str> = std::iter::once(ANY_NODE_FEATURE)
        .chain(levels.iter().map(|l| l.feature.as_str()))
        .collect();
    let node_features = ours.join(",");
    let all_features: Vec<&str> = ours
        .iter()
        .copied()
        .chain(opts.features.iter().map(String::as_str))
        .collect();
    let nodes = placeholder_nodes(opts.placeholders);
    let mut s = String::new();
    let _ = writeln!(s, "# Slurm placement for the qoslane mapping {source}");
    let _ = writeln!(s, "# mapping sha256 {sha256}");
    let _ = writeln!(
        s,
        "# generated by `qoslane slurm-config`. Put {LUA_FILE} beside slurm.conf FIRST (slurmctld \
         does\n# not start with JobSubmitPlugins=lua and no script), then include this file in \
         slurm.conf\n# BEFORE the compute nodes' NodeName lines: Include /etc/slurm/{CONF_FILE}"
    );
    let _ = writeln!(
        s,
        "#\n# levels placed (on_failure: fail_job): a node keeps a level's feature active \
         while it\n# carries the level (qoslane health sends it to slurmctld when it changes)"
    );
    for l in levels {
        let _ = writeln!(
            s,
            "#   {:<20} feature {:<28} QoS {}",
            l.level,
            l.feature,
            l.qos.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\n# Every node lists `{ANY_NODE_FEATURE}` (always active) and every level's feature. A \
         NodeName line\n# with its own Feature= replaces this default: add these to it."
    );
    let _ = writeln!(s, "NodeName=DEFAULT Feature={node_features}");
    let _ = writeln!(
        s,
        "\n# The job_submit/lua plugin adds a level's feature to its jobs' constraints. A site \
         with\n# other job_submit plugins lists them too (JobSubmitPlugins=lua,OTHER) and merges \
         a\n# job_submit.lua of its own by hand."
    );
    let _ = writeln!(s, "JobSubmitPlugins=lua");
    let _ = writeln!(
        s,
        "\n# Placeholders: never started (State=FUTURE, hidden from sinfo), they carry every \
         feature,\n# so that a job of a level carried nowhere (or by fewer nodes than it asks \
         for) pends\n# instead of being rejected at submit. Each is as big as the largest node; \
         there are as\n# many as the most nodes one job asks for."
    );
    let mut line = format!(
        "NodeName={nodes} State=FUTURE CPUs={} RealMemory={}",
        opts.cpus, opts.memory_mb
    );
    if let Some(g) = &opts.gres {
        let _ = write!(line, " Gres={g}");
    }
    let _ = writeln!(s, "{line} Feature={}", all_features.join(","));
    let _ = writeln!(
        s,
        "# Partitions: every partition these levels' jobs use must hold the placeholders:\n# \
         Nodes=ALL, or add {nodes} to its Nodes= list."
    );
    s
}

fn lua_text(levels: &[PlacedLevel]) -> String {
    let mut table = String::new();
    for l in levels {
        for q in &l.qos {
            let _ = writeln!(table, "   [\"{q}\"] = \"{}\",", l.feature);
        }
    }
    let table = table.trim_end_matches('\n');
    let mut out = String::with_capacity(LUA_TEMPLATE.len() + table.len());
    for line in LUA_TEMPLATE.lines() {
        if line == "@QOS_FEATURES@" {
            out.push_str(table);
        } else {
            out.push_str(&line.replace("@ANY_NODE_FEATURE@", ANY_NODE_FEATURE));
        }
        out.push('\n');
    }
    out
}

// ------------------------------------------------------------ the node's side

/// How long a node's active features, once sent, are trusted to be
/// slurmctld's: a reconfigure or a restart without `-R` gives every node all
/// of slurm.conf's features back, unseen by the node; past this age the node
/// sends its set again even when it has not changed (1,000 nodes: 0.6
/// updates a second).
pub const PLACEMENT_REFRESH_SECS: u64 = 30 * 60;

/// What a node last sent slurmctld (`/run/qoslane/placement.json`, written
/// only after `scontrol` succeeded; gone at reboot, so the first run after a
/// boot sends).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sent {
    /// The Slurm node name it was sent for.
    pub node: String,
    /// The node's own features (slurm.conf's, not qoslane's), as its
    /// AvailableFeatures listed them when last read: kept active.
    pub site: Vec<String>,
    /// The ActiveFeatures sent.
    pub active: Vec<String>,
    /// When, in seconds since the Unix epoch.
    pub at_unix: u64,
}

/// Whether a node sends its features now, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// The set is the one last sent, recently enough: nothing to send.
    No,
    /// The set changed since it was last sent.
    Changed,
    /// Unchanged, but sent longer ago than [`PLACEMENT_REFRESH_SECS`].
    Refresh,
    /// Never sent since the boot (no record), or for another node name.
    First,
}

impl Due {
    /// Whether the node's own features are read again first: the record
    /// holds them, except the first time and at each refresh (a reconfigure
    /// may have changed them).
    pub fn reads_site_features(self) -> bool {
        matches!(self, Self::First | Self::Refresh)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::No => "unchanged",
            Self::Changed => "changed",
            Self::Refresh => "refresh",
            Self::First => "first since boot",
        }
    }
}

/// qoslane's features a node has active: the any-node feature, then the
/// feature of every placed level it grants now (`granted(level)`), in the
/// mapping's order.
pub fn our_active(mapping: &Mapping, granted: impl Fn(&str) -> bool) -> Vec<String> {
    std::iter::once(ANY_NODE_FEATURE.to_owned())
        .chain(
            placed_levels(mapping)
                .into_iter()
                .filter(|l| granted(&l.level))
                .map(|l| l.feature),
        )
        .collect()
}

/// The ActiveFeatures to send: qoslane's, then the node's own.
pub fn active_set(ours: &[String], site: &[String]) -> Vec<String> {
    ours.iter().chain(site).cloned().collect()
}

/// Whether `ours` (qoslane's active features now) must be sent, against
/// the record of the last send.
pub fn due(last: Option<&Sent>, node: &str, ours: &[String], now_unix: u64) -> Due {
    let Some(last) = last.filter(|l| l.node == node) else {
        return Due::First;
    };
    if active_set(ours, &last.site) != last.active {
        Due::Changed
    } else if now_unix.saturating_sub(last.at_unix) >= PLACEMENT_REFRESH_SECS
        || now_unix < last.at_unix
    {
        Due::Refresh
    } else {
        Due::No
    }
}

/// The node's own features from `scontrol show node -o NAME`'s line: its
/// AvailableFeatures without qoslane's. `None` when the line has none.
pub fn site_features(show_node: &str) -> Option<Vec<String>> {
    let value = show_node
        .split_whitespace()
        .find_map(|w| w.strip_prefix("AvailableFeatures="))?;
    Some(
        value
            .split(',')
            .filter(|f| {
                !f.is_empty()
                    && *f != "(null)"
                    && *f != ANY_NODE_FEATURE
                    && !f.starts_with(FEATURE_PREFIX)
            })
            .map(str::to_owned)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_the_placeholders_this_module_fills() {
        assert!(LUA_TEMPLATE.starts_with(LUA_FIRST_LINE));
        assert_eq!(
            LUA_TEMPLATE
                .lines()
                .filter(|l| *l == "@QOS_FEATURES@")
                .count(),
            1
        );
        assert!(LUA_TEMPLATE.contains("\"@ANY_NODE_FEATURE@\""));
    }

    #[test]
    fn a_name_with_an_operator_cannot_be_a_feature() {
        assert_eq!(feature_problem("qoslane_mission-critical.v2"), None);
        for bad in [
            "a&b", "a|b", "a,b", "a b", "a*2", "(a)", "[a]", "!a", "a=b", "a:b", "",
        ] {
            assert!(feature_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_qos_the_script_cannot_name_is_refused() {
        assert_eq!(qos_problem("mission-critical"), None);
        for bad in ["a,b", "a\"b", "a\\b", "a b", ""] {
            assert!(qos_problem(bad).is_some(), "{bad}");
        }
    }

    fn sent(active: &[&str], site: &[&str], at_unix: u64) -> Sent {
        Sent {
            node: "n1".into(),
            site: site.iter().map(|s| (*s).to_owned()).collect(),
            active: active.iter().map(|s| (*s).to_owned()).collect(),
            at_unix,
        }
    }

    #[test]
    fn a_node_sends_on_a_change_a_refresh_and_first_only() {
        let ours = vec!["qoslane".to_owned(), "qoslane_mc".to_owned()];
        let last = sent(&["qoslane", "qoslane_mc", "rackA"], &["rackA"], 1000);
        assert_eq!(due(None, "n1", &ours, 1000), Due::First);
        assert_eq!(due(Some(&last), "n2", &ours, 1000), Due::First);
        assert_eq!(due(Some(&last), "n1", &ours, 1000 + 60), Due::No);
        assert_eq!(
            due(Some(&last), "n1", &ours, 1000 + PLACEMENT_REFRESH_SECS),
            Due::Refresh
        );
        assert_eq!(
            due(Some(&last), "n1", &ours, 10),
            Due::Refresh,
            "clock back"
        );
        assert_eq!(due(Some(&last), "n1", &ours[..1], 1000 + 60), Due::Changed);
        assert!(Due::First.reads_site_features() && Due::Refresh.reads_site_features());
        assert!(!Due::Changed.reads_site_features());
    }

    #[test]
    fn the_site_features_are_the_available_ones_without_qoslanes() {
        let line = "NodeName=n1 Arch=x86_64 CoresPerSocket=1 AvailableFeatures=qoslane,qoslane_mc,rackA,ib ActiveFeatures=qoslane,rackA,ib Gres=(null)";
        assert_eq!(
            site_features(line),
            Some(vec!["rackA".to_owned(), "ib".to_owned()])
        );
        assert_eq!(
            site_features("NodeName=n1 AvailableFeatures=(null) ActiveFeatures=(null)"),
            Some(vec![])
        );
        assert_eq!(site_features("Node n1 not found"), None);
    }

    #[test]
    fn one_placeholder_is_named_without_a_range() {
        assert_eq!(placeholder_nodes(1), "qoslane-wait1");
        assert_eq!(placeholder_nodes(4), "qoslane-wait[1-4]");
    }
}
