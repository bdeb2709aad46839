//! `fabric watch`'s placement send: a node the verdict says lost a placed
//! level gets its ActiveFeatures without that level's feature at once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::super::Ctx;
use crate::deadline::Deadline;
use crate::fabric::sweep::verdict;
use crate::log;

/// Nodes sent per act at most; the rest follow at their own `health` run.
pub const MAX_PLACEMENT_SENDS: usize = 64;

/// With `QOSLANE_SCONTROL`: each Slurm node (the first word of its HCA's
/// node description, the host name the kernel gives it) the verdict says
/// lost a placed level gets its ActiveFeatures without that level's feature
/// at once (`run/placement.rs`, `withdraw`), so that slurmctld stops placing
/// the level there within seconds, not at the node's next `health` run;
/// sent again only when it loses more. Never a feature added: the node's
/// own `health` run gives it back with its grant. Returns what is withdrawn
/// now, the nodes sent and the sends that failed.
pub(super) fn place(
    ctx: &Ctx,
    mapping: &crate::mapping::Mapping,
    v: &verdict::PathVerdict,
    before: BTreeMap<String, BTreeSet<String>>,
) -> (BTreeMap<String, BTreeSet<String>>, usize, usize) {
    let Some(scontrol) = &ctx.paths.scontrol else {
        return (BTreeMap::new(), 0, 0);
    };
    let placed = crate::slurm_config::placed_levels(mapping);
    let mut now: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in &v.levels {
        let Some(p) = placed.iter().find(|p| p.level == l.level) else {
            continue;
        };
        for loss in &l.lost {
            if let Some(node) = loss.at.node.split_whitespace().next() {
                let host = node.split('.').next().unwrap_or(node);
                now.entry(host.to_owned())
                    .or_default()
                    .insert(p.feature.clone());
            }
        }
    }
    let deadline = Deadline::after(Duration::from_secs(15));
    let (mut sent, mut failed) = (0, 0);
    let mut kept = BTreeMap::new();
    for (node, features) in now {
        let known = before.get(&node);
        if known.is_some_and(|k| features.is_subset(k)) {
            kept.insert(node, features);
            continue;
        }
        if sent + failed >= MAX_PLACEMENT_SENDS {
            continue;
        }
        let list: Vec<String> = features.iter().cloned().collect();
        match crate::run::placement::withdraw(scontrol, &node, &list, &deadline) {
            Ok(_) => {
                sent += 1;
                kept.insert(node, features);
            }
            Err(e) => {
                failed += 1;
                log::warn(&format!(
                    "fabric watch: placement of {node} not sent ({e}): its health run sends it"
                ));
            }
        }
    }
    (kept, sent, failed)
}
