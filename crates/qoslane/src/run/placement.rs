//! The node's placement sync: slurmctld learns which `fail_job` levels this
//! node carries through its ActiveFeatures, which the node keeps as its
//! grants say (`scontrol update NodeName=N ActiveFeatures=...`, one RPC).
//! What to send and when is decided in [`crate::slurm_config`] (pure); this
//! runs scontrol and keeps the record of the last send
//! (`/run/qoslane/placement.json`, written only after scontrol succeeded:
//! a failed send is tried again by the next run; one refused with the
//! node's own features of the record reads them again and sends once more). Owned by `health`; a
//! Prolog that refuses its level sends too, so that Slurm stops placing the
//! level here before the next health run.
//!
//! Never under the node lock: a run calls it after it let the lock go (the
//! lock is the transaction's; slurmctld may answer slowly). Nothing happens
//! without `QOSLANE_SCONTROL` (placement off: slurm.conf must list the
//! features first, or slurmctld refuses the update).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::deadline::Deadline;
use crate::error::Error;
use crate::exec;
use crate::grant::Record;
use crate::mapping::Mapping;
use crate::paths::Paths;
use crate::slurm_config::{self, Due, Sent};
use crate::state::{PUBLIC, fsutil};

/// What the sync did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Synced {
    /// Placement is off (no `QOSLANE_SCONTROL`).
    Off,
    /// The features were sent before and have not changed: nothing sent.
    Unchanged { active: Vec<String> },
    /// Sent (why, what, how many scontrol calls).
    Sent {
        due: Due,
        active: Vec<String>,
        calls: u32,
    },
    /// scontrol failed (or the record could not be written): the next run
    /// sends again.
    Failed { due: Due, error: String },
}

/// Sends the node's active features when they changed, are due for a
/// refresh, or were never sent since the boot; `record`: the grants just
/// decided (by `health`, or a Prolog's refusal merged in). `refused`: a
/// Prolog refused its job's level here — slurmctld placed the job as if the
/// node carried it, so its set is not the one last sent (a reconfigure or a
/// restart gave the node all of slurm.conf's features back), and the node
/// sends even when its grants did not change ([`Due::Landed`]).
pub fn sync(
    paths: &Paths,
    mapping: &Mapping,
    record: &Record,
    deadline: &Deadline,
    refused: bool,
) -> Synced {
    let Some(scontrol) = &paths.scontrol else {
        return Synced::Off;
    };
    let node = crate::audit::node_name();
    let ours = slurm_config::our_active(mapping, |level| {
        record
            .grants
            .get(level)
            .is_some_and(|g| g.decision.gets_its_sl())
    });
    // A record that cannot be read is one never written: send.
    let last: Option<Sent> = fsutil::read_json(paths, &paths.placement()).ok().flatten();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let due = match slurm_config::due(last.as_ref(), &node, &ours, now) {
        Due::No if refused => Due::Landed,
        due => due,
    };
    if due == Due::No {
        return Synced::Unchanged {
            active: last.map(|l| l.active).unwrap_or_default(),
        };
    }
    let failed = |error: String| Synced::Failed { due, error };
    let mut calls = 0;
    let read_site = |calls: &mut u32| {
        *calls += 1;
        let line = exec::run(scontrol, &["show", "node", "-o", &node], deadline)
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        match line.as_deref().map(slurm_config::site_features) {
            Ok(Some(site)) => Ok(site),
            Ok(None) => Err(format!(
                "`scontrol show node {node}` lists no AvailableFeatures: is this node's \
                 Slurm name {node}?"
            )),
            Err(e) => Err(e.to_string()),
        }
    };
    let send = |site: &[String], calls: &mut u32| {
        let active = slurm_config::active_set(&ours, site);
        let arg_node = format!("NodeName={node}");
        let arg_active = format!("ActiveFeatures={}", active.join(","));
        *calls += 1;
        exec::run(scontrol, &["update", &arg_node, &arg_active], deadline)
            .map(|_| active)
            .map_err(|e| e.to_string())
    };
    let fresh = |calls: &mut u32| {
        read_site(calls).map(|site| {
            let sent = send(&site, calls);
            (site, sent)
        })
    };
    // The node's own features as last read, unless this send reads them:
    // an admin may have changed slurm.conf's since (a reconfigure), and
    // slurmctld refuses a set that is not a subset of the available
    // features. Refused, they are read again and the set sent once more;
    // else every later run would send the same refused set until a reboot.
    let recorded = last.filter(|_| !due.reads_site_features()).map(|l| l.site);
    let (site, sent) = match recorded.map(|site| (send(&site, &mut calls), site)) {
        Some((Ok(active), site)) => (site, Ok(active)),
        _ => match fresh(&mut calls) {
            Ok(read) => read,
            Err(e) => return failed(e),
        },
    };
    let active = match sent {
        Ok(active) => active,
        Err(e) => return failed(e),
    };
    let sent = Sent {
        node,
        site,
        active: active.clone(),
        at_unix: now,
    };
    let stored = fsutil::ensure_dir(paths, &paths.run_dir)
        .and_then(|()| fsutil::write_json(paths, &paths.placement(), &sent, PUBLIC));
    match stored {
        Ok(()) => Synced::Sent { due, active, calls },
        Err(e) => failed(format!(
            "sent, but {} could not be written ({}): the next run sends again",
            paths.display(&paths.placement()),
            Error::with_causes(&e)
        )),
    }
}

/// What `fabric watch` sends for a node the fabric verdict says lost a
/// placed level: its ActiveFeatures less the lost levels' features (never
/// one added: what a node carries is its own `health` run's to say, and
/// it sends them back when its grants give them back). One `scontrol show
/// node` and, when a feature is to go, one `scontrol update`, as [`sync`]
/// sends. `Ok(None)`: nothing of it was active, or scontrol answered for
/// no node or for several (`node` a host list: never sent).
///
/// # Errors
/// scontrol failed or did not answer within the deadline.
pub fn withdraw(
    scontrol: &std::path::Path,
    node: &str,
    features: &[String],
    deadline: &Deadline,
) -> Result<Option<Vec<String>>, String> {
    let line = exec::run(scontrol, &["show", "node", "-o", node], deadline)
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .map_err(|e| e.to_string())?;
    // The node Slurm answered for (one, never a host list), by Slurm's name.
    let Some((node, active)) = slurm_config::withdrawn(&line, features) else {
        return Ok(None);
    };
    let arg_node = format!("NodeName={node}");
    let arg_active = format!("ActiveFeatures={}", active.join(","));
    exec::run(scontrol, &["update", &arg_node, &arg_active], deadline)
        .map_err(|e| e.to_string())?;
    Ok(Some(active))
}
