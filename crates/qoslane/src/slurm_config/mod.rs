//! The Slurm side of placement (`qoslane slurm-config`): what slurmctld
//! needs so that a `fail_job` level's jobs go only to the nodes that carry
//! the level. Pure: a mapping and the admin's sizes in, the slurm.conf lines
//! to include and `job_submit.lua` out, or every reason the mapping cannot be
//! expressed. The facts behind each line: docs/dev/slurm-placement.md.
//!
//! - every node lists the any-node feature [`ANY_NODE_FEATURE`] (kept active
//!   always) and `qoslane_<level>` of every `fail_job` level; a node keeps a
//!   level's feature active while it carries the level;
//! - `JobSubmitPlugins=lua` and the script (`lua.rs`): the placement module
//!   `qoslane_placement.lua` from `deploy/slurm/qoslane_placement.lua.in`
//!   (the QoS → feature table its only generated part), and `job_submit.lua`
//!   for a site without one of its own, the module inlined; a site's own
//!   script calls the module;
//! - FUTURE placeholder nodes carrying every feature, so that a job of a level
//!   carried nowhere pends instead of being rejected at submit.
//!
//! What cannot be expressed is an [`Inexpressible`] at a place of the mapping ([`Where`]),
//! which the command turns into a diagnostic naming the line. The QoS names
//! compared with Slurm's: `qos_check.rs`. The node's side: `node.rs`.

use std::fmt::Write as _;

use crate::mapping::{Mapping, OnFailure};

mod levels;
mod lua;
mod node;
mod qos_check;

pub use levels::{ANY_NODE_FEATURE, FEATURE_PREFIX, PlacedLevel, feature_of, placed_levels};

pub use lua::{
    LUA_FILE, LUA_FIRST_LINE, LUA_TEMPLATE, MODULE_FILE, MODULE_FIRST_LINE, MODULE_TEMPLATE,
    SiteScript, site_lines, site_script,
};
pub use node::{
    Due, PLACEMENT_REFRESH_SECS, Sent, active_set, due, our_active, site_features, withdrawn,
};
pub use qos_check::{QosCheck, compare_qos, slurm_qos_names};

/// The placeholder nodes' name: `qoslane-wait1`…
pub const PLACEHOLDER_NAME: &str = "qoslane-wait";
/// The slurm.conf lines' file `--output DIR` writes.
pub const CONF_FILE: &str = "qoslane.conf";

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

/// The generated files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmConfig {
    pub levels: Vec<PlacedLevel>,
    /// The slurm.conf lines to include, with comments.
    pub conf: String,
    /// `qoslane_placement.lua`, the module a site's own script calls.
    pub module: String,
    /// `job_submit.lua` for a site without one: the module inlined.
    pub lua: String,
}

/// Where a problem is, for its diagnostic to name the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Where {
    /// The mapping as a whole (its `levels` key).
    Levels,
    /// `default_level`.
    DefaultLevel,
    /// A level's name.
    Level(String),
    /// A QoS entry (any case).
    Qos(String),
    /// A command-line option: no line of the mapping.
    Option,
}

/// One thing Slurm cannot be told, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inexpressible {
    pub place: Where,
    pub message: String,
}

impl Inexpressible {
    fn at(place: Where, message: impl Into<String>) -> Self {
        Self {
            place,
            message: message.into(),
        }
    }
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

/// The Slurm configuration for `mapping`, or every reason it cannot be made.
/// `source` names the mapping in the files' headers.
///
/// # Errors
/// Every problem, each at its place: a level name or a site feature that
/// cannot be a node feature, a QoS the script cannot name, a default level
/// under `fail_job`, nothing to place, a size that cannot be.
pub fn generate(
    mapping: &Mapping,
    opts: &Placeholders,
    source: &str,
    sha256: &str,
) -> Result<SlurmConfig, Vec<Inexpressible>> {
    let mut problems = expressible(mapping);
    problems.extend(option_problems(opts));
    if !problems.is_empty() {
        return Err(problems);
    }
    let levels = placed_levels(mapping);
    let module = lua::module_text(&levels);
    Ok(SlurmConfig {
        conf: conf_text(&levels, opts, source, sha256),
        lua: lua::standalone_text(&module),
        module,
        levels,
    })
}

/// What in the mapping Slurm cannot be told (no option involved).
pub fn expressible(mapping: &Mapping) -> Vec<Inexpressible> {
    let mut problems = Vec::new();
    let levels = placed_levels(mapping);
    if levels.is_empty() {
        problems.push(Inexpressible::at(
            Where::Levels,
            format!(
                "no level of the mapping has `on_failure: fail_job` (levels: {}): nothing to \
                 place; Slurm needs nothing from qoslane for `continue` levels",
                mapping
                    .levels()
                    .iter()
                    .map(|l| format!("{} {}", l.name, mapping.on_failure_for(l).as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    for l in &levels {
        if let Some(p) = feature_problem(&l.feature) {
            problems.push(Inexpressible::at(
                Where::Level(l.level.clone()),
                format!("level `{}`: its feature {p}", l.level),
            ));
        }
        for q in &l.qos {
            if let Some(p) = qos_problem(q) {
                problems.push(Inexpressible::at(
                    Where::Qos(q.clone()),
                    format!("level `{}`: {p}", l.level),
                ));
            }
        }
    }
    let default = mapping.default_level();
    if mapping.on_failure_for(default) == OnFailure::FailJob {
        problems.push(Inexpressible::at(
            Where::DefaultLevel,
            format!(
                "`default_level` `{}` is `fail_job`: a job whose QoS no level lists gets it, and \
                 job_submit.lua places only the QoS names the mapping lists; give that level \
                 `on_failure: continue`, or list every QoS",
                default.name
            ),
        ));
    }
    problems
}

/// What in the options cannot be.
fn option_problems(opts: &Placeholders) -> Vec<Inexpressible> {
    let mut problems = Vec::new();
    let mut say = |m: String| problems.push(Inexpressible::at(Where::Option, m));
    for f in &opts.features {
        if let Some(p) = feature_problem(f) {
            say(format!("--features: {p}"));
        }
        if f == ANY_NODE_FEATURE || f.starts_with(FEATURE_PREFIX) {
            say(format!(
                "--features: `{f}` is qoslane's own (`{ANY_NODE_FEATURE}`, `{FEATURE_PREFIX}*`)"
            ));
        }
    }
    if opts.placeholders == 0 {
        say("--placeholders 0: at least one (the most nodes one job asks for)".into());
    }
    if opts.cpus == 0 {
        say("--cpus 0: the largest node's CPUs".into());
    }
    if opts.memory_mb == 0 {
        say("--memory 0: the largest node's RealMemory in MB".into());
    }
    if let Some(g) = &opts.gres
        && (g.is_empty() || g.chars().any(|c| c.is_whitespace() || c == '#'))
    {
        say(format!(
            "--gres `{}`: slurm.conf's Gres= form, without blanks (gpu:4, gpu:a100:2,nic:1)",
            g.escape_debug()
        ));
    }
    problems
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn one_placeholder_is_named_without_a_range() {
        assert_eq!(placeholder_nodes(1), "qoslane-wait1");
        assert_eq!(placeholder_nodes(4), "qoslane-wait[1-4]");
    }
}
