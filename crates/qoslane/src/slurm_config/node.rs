//! The node's side of placement, decided (pure): its active features from
//! its grants ([`our_active`]), whether it sends them ([`due`]: changed, a
//! refresh past [`PLACEMENT_REFRESH_SECS`], the first run after boot; else
//! nothing), the node's own features read from `scontrol show node`. The
//! sending: `run/placement.rs`.

use super::levels::{ANY_NODE_FEATURE, FEATURE_PREFIX, placed_levels};
use crate::mapping::Mapping;

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
    /// Unchanged, but a job of a level this node does not carry landed
    /// here and its Prolog refused it: slurmctld's set is not the one last
    /// sent (a reconfigure, a restart without `-R`, another writer).
    Landed,
}

impl Due {
    /// Whether the node's own features are read again first: the record
    /// holds them, except the first time and at each refresh (a reconfigure
    /// may have changed them).
    pub fn reads_site_features(self) -> bool {
        matches!(self, Self::First | Self::Refresh | Self::Landed)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::No => "unchanged",
            Self::Changed => "changed",
            Self::Refresh => "refresh",
            Self::First => "first since boot",
            Self::Landed => "a job of a level not carried landed here",
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

/// The one node `scontrol show node -o NAME` answered for, and its
/// ActiveFeatures without `withdrawn` (the features of levels the fabric
/// verdict says it lost). `None` when it answered for no node or for more
/// than one — a name taken from a node description may be a host list,
/// `n[1-64]` or `a,b`, which scontrol expands, and whose update would give
/// every node of it one node's set — when the line has no ActiveFeatures, or
/// none of `withdrawn` is active (nothing to send). The name is Slurm's
/// (`NodeName=`): NAME may be its host name.
pub fn withdrawn(show_node: &str, withdrawn: &[String]) -> Option<(String, Vec<String>)> {
    let mut lines = show_node.lines().filter(|l| l.starts_with("NodeName="));
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    let node = line
        .split_whitespace()
        .next()
        .and_then(|w| w.strip_prefix("NodeName="))
        .filter(|n| !n.is_empty())?;
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ActiveFeatures="))?;
    let active: Vec<&str> = value
        .split(',')
        .filter(|f| !f.is_empty() && *f != "(null)")
        .collect();
    active
        .iter()
        .any(|f| withdrawn.iter().any(|w| w == f))
        .then(|| {
            let kept = active
                .iter()
                .filter(|f| !withdrawn.iter().any(|w| w == *f))
                .map(|f| (*f).to_owned())
                .collect();
            (node.to_owned(), kept)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_levels_feature_is_withdrawn_the_rest_kept() {
        let line = "NodeName=n3 AvailableFeatures=qoslane,qoslane_mc,gpu ActiveFeatures=qoslane,qoslane_mc,gpu State=IDLE";
        assert_eq!(
            withdrawn(line, &["qoslane_mc".into()]),
            Some(("n3".into(), vec!["qoslane".into(), "gpu".into()]))
        );
        assert_eq!(
            withdrawn(line, &["qoslane_high".into()]),
            None,
            "not active: nothing to send"
        );
        assert_eq!(
            withdrawn("NodeName=n3 State=IDLE", &["qoslane_mc".into()]),
            None
        );
    }

    #[test]
    fn a_hostlist_named_by_a_node_description_is_not_sent() {
        // `scontrol show node -o 'n[1-2]'` answers one line per node; the
        // update would set n1's set on both.
        let two = "NodeName=n1 AvailableFeatures=qoslane,qoslane_mc,gpu ActiveFeatures=qoslane,qoslane_mc,gpu State=IDLE\n\
                   NodeName=n2 AvailableFeatures=qoslane,qoslane_mc,rackB ActiveFeatures=qoslane,qoslane_mc,rackB State=IDLE\n";
        assert_eq!(withdrawn(two, &["qoslane_mc".into()]), None);
        let one = two.lines().nth(1).unwrap();
        assert_eq!(
            withdrawn(one, &["qoslane_mc".into()]),
            Some(("n2".into(), vec!["qoslane".into(), "rackB".into()])),
            "one node: Slurm's name for it (scontrol also answers for its host name)"
        );
        assert_eq!(
            withdrawn("Node n9 not found\n", &["qoslane_mc".into()]),
            None
        );
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
        assert!(
            Due::First.reads_site_features()
                && Due::Refresh.reads_site_features()
                && Due::Landed.reads_site_features()
        );
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
}
