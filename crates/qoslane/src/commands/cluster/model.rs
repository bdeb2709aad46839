//! The cluster view decided (pure): from the nodes and pending jobs Slurm
//! listed, which node carries which placed level, how many carry each, the
//! levels carried nowhere, the jobs qoslane turned away and the jobs that
//! wait for a level carried nowhere. It judges nothing of the fabric: a
//! node's ActiveFeatures are what its own `qoslane health` sent (its grant,
//! decided there). The JSON form is this, serialised (`"schema": 1`).

use std::collections::BTreeSet;

use serde::Serialize;

use super::parse::{QueuedJob, SlurmNode, constraint_features};
use crate::slurm_config::{FEATURE_PREFIX, PLACEHOLDER_NAME};

/// The prefix of the reason qoslane gives a job it refused
/// (`qoslane: level L (QoS Q) refused on NODE: WHY`, its `AdminComment`).
pub const REFUSAL_PREFIX: &str = "qoslane:";

/// Whether a node carries a level, by its features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carriage {
    /// The level's feature is active: Slurm places the level's jobs here.
    Carried,
    /// Available but not active: the node does not grant the level now.
    NotCarried,
    /// Not among its AvailableFeatures: its slurm.conf line lacks the
    /// level's feature (or it was reconfigured without it).
    NotConfigured,
}

impl Carriage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Carried => "carried",
            Self::NotCarried => "NOT carried",
            Self::NotConfigured => "not configured",
        }
    }
}

/// A node and its levels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeView {
    pub name: String,
    pub state: String,
    /// Whether Slurm may start jobs on it (not down, drained, failing, not
    /// responding or FUTURE).
    pub in_service: bool,
    /// Per placed level, in [`ClusterView::levels`]' order.
    pub levels: Vec<NodeLevel>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeLevel {
    pub level: String,
    pub carries: Carriage,
}

/// A placed level across the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LevelCarriers {
    pub level: String,
    pub feature: String,
    /// The nodes whose ActiveFeatures hold the level's feature.
    pub carried_on: Vec<String>,
    /// Of them, the nodes in service.
    pub carried_in_service: usize,
    /// The nodes that list the feature but do not have it active.
    pub not_carried_on: Vec<String>,
    /// The nodes that do not list it at all.
    pub not_configured_on: Vec<String>,
    /// No node in service carries it: its jobs pend (never rejected, with
    /// the placeholder nodes) until one does.
    pub carried_nowhere: bool,
}

/// A pending job qoslane refused: its `AdminComment` starts with
/// [`REFUSAL_PREFIX`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnedAway {
    pub job: String,
    pub state: String,
    /// Slurm's reason it pends now.
    pub reason: String,
    pub user: String,
    pub qos: String,
    /// The level and node the comment names, when it has qoslane's form.
    pub level: Option<String>,
    pub node: Option<String>,
    /// The `AdminComment`, whole.
    pub admin_comment: String,
}

/// A pending job whose constraint asks for a level carried nowhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Waiting {
    pub job: String,
    pub state: String,
    pub reason: String,
    pub user: String,
    pub qos: String,
    /// The levels it asks for that no node in service carries.
    pub levels: Vec<String>,
}

/// The view, and its JSON form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterView {
    pub schema: u32,
    /// The placed levels (a `qoslane_<level>` feature listed by some node),
    /// by name.
    pub levels: Vec<LevelCarriers>,
    /// The real nodes (placeholders left out), in scontrol's order.
    pub nodes: Vec<NodeView>,
    /// The FUTURE placeholder nodes `qoslane slurm-config` adds (they list
    /// every feature and never run a job: not counted).
    pub placeholders: usize,
    pub pending_jobs: usize,
    pub turned_away: Vec<TurnedAway>,
    pub waiting: Vec<Waiting>,
}

impl ClusterView {
    /// Whether some placed level is carried nowhere (exit 1).
    pub fn needs_attention(&self) -> bool {
        self.levels.iter().any(|l| l.carried_nowhere)
    }
}

/// Whether `name` is one of the placeholder nodes (`qoslane-wait1`…).
fn is_placeholder(n: &SlurmNode) -> bool {
    n.name
        .strip_prefix(PLACEHOLDER_NAME)
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        || n.state.split('+').next() == Some("FUTURE")
}

/// Whether Slurm may start a job on a node in `state` (`IDLE`, `MIXED+DRAIN`,
/// `DOWN*`…): its base state is not DOWN, FUTURE or UNKNOWN, no flag says
/// drain, fail or not responding (`*`). A powered-down cloud node is in
/// service (Slurm powers it up for a job).
pub fn in_service(state: &str) -> bool {
    if state.is_empty() || state.contains('*') {
        return false;
    }
    let mut parts = state.split('+');
    let base = parts.next().unwrap_or("");
    !matches!(
        base,
        "DOWN" | "FUTURE" | "UNKNOWN" | "DRAINED" | "DRAINING" | "FAIL" | "FAILING"
    ) && !parts.any(|f| {
        matches!(
            f,
            "DRAIN" | "DRAINED" | "DRAINING" | "FAIL" | "NOT_RESPONDING"
        )
    })
}

/// `qoslane: level L (QoS Q) refused on NODE: WHY` → (L, NODE).
fn refusal_parts(comment: &str) -> (Option<String>, Option<String>) {
    let level = comment
        .strip_prefix("qoslane: level ")
        .and_then(|r| r.split_once(" (QoS "))
        .map(|(l, _)| l.to_owned());
    let node = comment
        .split_once(") refused on ")
        .and_then(|(_, r)| r.split_once(": "))
        .map(|(n, _)| n.to_owned());
    (level, node)
}

/// The view of what Slurm listed.
pub fn view(nodes: &[SlurmNode], jobs: &[QueuedJob]) -> ClusterView {
    let (placeholders, real): (Vec<&SlurmNode>, Vec<&SlurmNode>) =
        nodes.iter().partition(|n| is_placeholder(n));
    let names: BTreeSet<&str> = real
        .iter()
        .flat_map(|n| n.available.iter().chain(&n.active))
        .filter_map(|f| f.strip_prefix(FEATURE_PREFIX))
        .filter(|l| !l.is_empty())
        .collect();
    let levels: Vec<LevelCarriers> = names.iter().map(|l| carriers(l, &real)).collect();
    let node_views = real
        .iter()
        .map(|n| NodeView {
            name: n.name.clone(),
            state: n.state.clone(),
            in_service: in_service(&n.state),
            levels: levels
                .iter()
                .map(|l| NodeLevel {
                    level: l.level.clone(),
                    carries: carries(n, &l.feature),
                })
                .collect(),
        })
        .collect();
    let (turned_away, waiting) = pending(jobs, &levels);
    ClusterView {
        schema: 1,
        levels,
        nodes: node_views,
        placeholders: placeholders.len(),
        pending_jobs: jobs.len(),
        turned_away,
        waiting,
    }
}

/// Where `level` is carried among the real nodes.
fn carriers(level: &str, real: &[&SlurmNode]) -> LevelCarriers {
    let feature = format!("{FEATURE_PREFIX}{level}");
    let mut l = LevelCarriers {
        level: level.to_owned(),
        feature: feature.clone(),
        carried_on: Vec::new(),
        carried_in_service: 0,
        not_carried_on: Vec::new(),
        not_configured_on: Vec::new(),
        carried_nowhere: false,
    };
    for n in real {
        match carries(n, &feature) {
            Carriage::Carried => {
                l.carried_on.push(n.name.clone());
                l.carried_in_service += usize::from(in_service(&n.state));
            }
            Carriage::NotCarried => l.not_carried_on.push(n.name.clone()),
            Carriage::NotConfigured => l.not_configured_on.push(n.name.clone()),
        }
    }
    l.carried_nowhere = l.carried_in_service == 0;
    l
}

/// The pending jobs qoslane turned away, and those whose constraint asks
/// for a level carried nowhere (also one no node lists).
fn pending(jobs: &[QueuedJob], levels: &[LevelCarriers]) -> (Vec<TurnedAway>, Vec<Waiting>) {
    let nowhere: BTreeSet<&str> = levels
        .iter()
        .filter(|l| l.carried_nowhere)
        .map(|l| l.feature.as_str())
        .collect();
    let mut turned_away = Vec::new();
    let mut waiting = Vec::new();
    for j in jobs {
        if let Some(c) = j
            .admin_comment
            .as_deref()
            .filter(|c| c.starts_with(REFUSAL_PREFIX))
        {
            let (level, node) = refusal_parts(c);
            turned_away.push(TurnedAway {
                job: j.id.clone(),
                state: j.state.clone(),
                reason: j.reason.clone(),
                user: j.user.clone(),
                qos: j.qos.clone(),
                level,
                node,
                admin_comment: c.to_owned(),
            });
        }
        // A level's feature carried nowhere, or that no node lists at all
        // (the job pends since before its level was renamed or unplaced:
        // no node will ever carry it).
        let asked: BTreeSet<&str> = constraint_features(&j.features)
            .filter(|f| {
                nowhere.contains(f)
                    || (f.len() > FEATURE_PREFIX.len()
                        && f.starts_with(FEATURE_PREFIX)
                        && !levels.iter().any(|l| l.feature == *f))
            })
            .collect();
        if !asked.is_empty() {
            waiting.push(Waiting {
                job: j.id.clone(),
                state: j.state.clone(),
                reason: j.reason.clone(),
                user: j.user.clone(),
                qos: j.qos.clone(),
                levels: asked
                    .iter()
                    .filter_map(|f| f.strip_prefix(FEATURE_PREFIX))
                    .map(str::to_owned)
                    .collect(),
            });
        }
    }
    (turned_away, waiting)
}

fn carries(n: &SlurmNode, feature: &str) -> Carriage {
    if n.active.iter().any(|f| f == feature) {
        Carriage::Carried
    } else if n.available.iter().any(|f| f == feature) {
        Carriage::NotCarried
    } else {
        Carriage::NotConfigured
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: &str, available: &str, active: &str) -> SlurmNode {
        let list = |s: &str| {
            s.split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect()
        };
        SlurmNode {
            name: name.into(),
            state: state.into(),
            available: list(available),
            active: list(active),
        }
    }

    fn job(id: &str, features: &str, comment: Option<&str>) -> QueuedJob {
        QueuedJob {
            id: id.into(),
            state: "PD".into(),
            user: "alice".into(),
            qos: "mission-critical".into(),
            reason: "BeginTime".into(),
            features: features.into(),
            admin_comment: comment.map(str::to_owned),
        }
    }

    const ALL: &str = "qoslane,qoslane_mc,qoslane_high,rackA";

    #[test]
    fn each_level_says_where_it_is_carried_and_a_level_carried_nowhere_is_named() {
        let nodes = [
            node("n1", "IDLE", ALL, "qoslane,qoslane_high,rackA"),
            node("n2", "MIXED", ALL, "qoslane,qoslane_mc,qoslane_high,rackA"),
            node("n3", "IDLE+DRAIN", ALL, ALL),
            node("n4", "IDLE", "qoslane,rackA", "qoslane,rackA"),
            node("qoslane-wait1", "FUTURE", ALL, ALL),
        ];
        let v = view(&nodes, &[]);
        assert_eq!(v.placeholders, 1);
        assert_eq!(v.nodes.len(), 4);
        let high = &v.levels[0];
        assert_eq!(high.level, "high");
        assert_eq!(high.carried_on, ["n1", "n2", "n3"]);
        assert_eq!(high.carried_in_service, 2);
        assert_eq!(high.not_configured_on, ["n4"]);
        let mc = &v.levels[1];
        assert_eq!(
            (mc.carried_on.as_slice(), mc.carried_in_service),
            (&["n2".to_owned(), "n3".to_owned()][..], 1)
        );
        assert_eq!(mc.not_carried_on, ["n1"]);
        assert!(!v.needs_attention());
        assert_eq!(v.nodes[0].levels[1].carries, Carriage::NotCarried);
        assert_eq!(v.nodes[3].levels[1].carries, Carriage::NotConfigured);
        assert!(!v.nodes[2].in_service);

        // n2 loses mc: only the drained n3 has it active
        let mut nodes = nodes;
        nodes[1] = node("n2", "MIXED", ALL, "qoslane,qoslane_high,rackA");
        let v = view(&nodes, &[]);
        assert!(v.levels[1].carried_nowhere && !v.levels[0].carried_nowhere);
        assert!(v.needs_attention());
    }

    #[test]
    fn jobs_turned_away_and_jobs_waiting_for_a_level_carried_nowhere_are_listed() {
        let nodes = [
            node("n1", "IDLE", ALL, "qoslane,qoslane_high,rackA"),
            node("qoslane-wait1", "FUTURE", ALL, ALL),
        ];
        let refused = "qoslane: level mc (QoS mission-critical) refused on n1: fabric check: mlx5_0/1: SL 3 -> VL 15";
        let jobs = [
            job("10", "qoslane_mc", Some(refused)),
            job("11", "(rackA|rackB)&qoslane_mc", None),
            job("12", "qoslane_high", Some("site: moved by the admin")),
            job(
                "13",
                "",
                Some("qoslane: the job (QoS x) refused: no usable mapping"),
            ),
        ];
        let v = view(&nodes, &jobs);
        assert_eq!(v.pending_jobs, 4);
        assert_eq!(v.turned_away.len(), 2);
        let t = &v.turned_away[0];
        assert_eq!(
            (t.job.as_str(), t.level.as_deref(), t.node.as_deref()),
            ("10", Some("mc"), Some("n1"))
        );
        assert_eq!(t.admin_comment, refused);
        assert_eq!(
            (
                v.turned_away[1].level.as_deref(),
                v.turned_away[1].node.as_deref()
            ),
            (None, None)
        );
        let waiting: Vec<(&str, &[String])> = v
            .waiting
            .iter()
            .map(|w| (w.job.as_str(), w.levels.as_slice()))
            .collect();
        assert_eq!(
            waiting,
            [
                ("10", &["mc".to_owned()][..]),
                ("11", &["mc".to_owned()][..])
            ]
        );
    }

    /// A job that pends since before a level was renamed or made
    /// `continue` (slurm.conf and the script rendered again): no node lists
    /// its `qoslane_<level>` any more, so no node ever will carry it.
    #[test]
    fn a_job_waiting_for_a_level_no_node_lists_is_listed() {
        let nodes = [node("n1", "IDLE", ALL, ALL)];
        let jobs = [
            job("14", "rackA&qoslane_old", None),
            job("15", "rackA&qoslane_mc", None),
            job("16", "qoslane", None),
        ];
        let v = view(&nodes, &jobs);
        let waiting: Vec<(&str, &[String])> = v
            .waiting
            .iter()
            .map(|w| (w.job.as_str(), w.levels.as_slice()))
            .collect();
        assert_eq!(waiting, [("14", &["old".to_owned()][..])]);
        assert!(
            !v.needs_attention(),
            "a job's constraint is the user's: it does not fail the check"
        );
    }

    #[test]
    fn a_node_is_in_service_unless_down_drained_failing_or_not_responding() {
        for s in [
            "IDLE",
            "MIXED",
            "ALLOCATED",
            "COMPLETING",
            "IDLE+CLOUD",
            "MIXED+PLANNED",
            "IDLE+POWERED_DOWN",
        ] {
            assert!(in_service(s), "{s}");
        }
        for s in [
            "DOWN",
            "DOWN*",
            "IDLE*",
            "IDLE+DRAIN",
            "MIXED+DRAIN",
            "DRAINED",
            "DRAINING",
            "FUTURE",
            "IDLE+FAIL",
            "IDLE+NOT_RESPONDING",
            "",
        ] {
            assert!(!in_service(s), "{s}");
        }
    }
}
