//! What Slurm answers the cluster view, parsed (pure): every node's line of
//! `scontrol show node -o` (its name, state, AvailableFeatures and
//! ActiveFeatures) and the pending jobs' lines of `squeue` in the format
//! [`SQUEUE_FORMAT`] asks for. Tested on outputs captured from real Slurm
//! (`tests/fixtures/slurm/`).

/// A node as `scontrol show node -o` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmNode {
    pub name: String,
    /// `State=`: `IDLE`, `MIXED`, `IDLE+DRAIN`, `DOWN*`, `FUTURE`…
    pub state: String,
    /// The features slurm.conf (or an admin's `scontrol update`) gave it.
    pub available: Vec<String>,
    /// The features it has active now (what the scheduler places by).
    pub active: Vec<String>,
}

/// A pending job as [`SQUEUE_FORMAT`] prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedJob {
    /// `%i`: `123`, `123_4`, `123_[1-9]`, `123+0`.
    pub id: String,
    /// `PD`…
    pub state: String,
    pub user: String,
    pub qos: String,
    /// Slurm's reason it waits: `BeginTime`, `Resources`, `JobHeldAdmin`…
    pub reason: String,
    /// Its constraint (`--constraint` with what job_submit.lua added), or
    /// empty.
    pub features: String,
    /// Its `AdminComment`, or `None` when it has none.
    pub admin_comment: Option<String>,
}

/// squeue's `-O` format: each field whole (size 0) and ended by a tab —
/// no field before the last holds one: an id, a state, a user and QoS name,
/// Slurm's reason (its own words) and a constraint (feature names and
/// operators; a feature name holds no blank). The AdminComment, the one
/// free text, is last and takes the rest of the line. `AdminComment` is no
/// field name of squeue (22.05, 24.11 and 26.05 refuse it); `admin_comment`
/// is.
pub const SQUEUE_FORMAT: &str =
    "JobArrayID:\t,StateCompact:\t,UserName:\t,QOS:\t,Reason:\t,Feature:\t,admin_comment:";

/// squeue's arguments: every pending job (held ones too: they pend), in
/// every partition (hidden ones too), without a header.
pub const SQUEUE_ARGS: [&str; 6] = ["-h", "-a", "-t", "PD", "-O", SQUEUE_FORMAT];

/// scontrol's arguments: every node, one line each.
pub const SCONTROL_ARGS: [&str; 3] = ["show", "node", "-o"];

/// What Slurm prints for a field with no value.
fn value(v: &str) -> Option<&str> {
    let v = v.trim();
    (!v.is_empty() && v != "(null)" && v != "N/A").then_some(v)
}

fn features(v: &str) -> Vec<String> {
    value(v)
        .map(|v| {
            v.split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The nodes of `scontrol show node -o`'s output, one per line that starts
/// with `NodeName=`. A field is the first `KEY=` word of its line (every
/// field this reads comes before the free texts an admin sets: `Reason=`,
/// `Comment=`, `Extra=`).
///
/// # Errors
/// When no line is a node's: what the output said instead (its first line).
pub fn nodes(text: &str) -> Result<Vec<SlurmNode>, String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("NodeName=") else {
            continue;
        };
        let field = |key: &str| {
            line.split(' ')
                .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
                .unwrap_or("")
        };
        out.push(SlurmNode {
            name: rest.split(' ').next().unwrap_or("").to_owned(),
            state: field("State").to_owned(),
            available: features(field("AvailableFeatures")),
            active: features(field("ActiveFeatures")),
        });
    }
    if out.is_empty() {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(if first.is_empty() {
            "it printed nothing".to_owned()
        } else {
            format!(
                "no node's line (NodeName=…) in what it printed: {:?}",
                cut(first)
            )
        });
    }
    Ok(out)
}

/// The jobs of squeue's output in [`SQUEUE_FORMAT`].
///
/// # Errors
/// A line that does not have the format's fields: squeue printed something
/// else (another version's format, an error on stdout).
pub fn jobs(text: &str) -> Result<Vec<QueuedJob>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.splitn(7, '\t').collect();
        let [id, state, user, qos, reason, features, comment] = f[..] else {
            return Err(format!(
                "a line without the 7 tab-separated fields asked for: {:?}",
                cut(line)
            ));
        };
        let id = id.trim();
        if id.is_empty() || !id.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "a line whose first field is no job id: {:?}",
                cut(line)
            ));
        }
        out.push(QueuedJob {
            id: id.to_owned(),
            state: state.trim().to_owned(),
            user: user.trim().to_owned(),
            qos: qos.trim().to_owned(),
            reason: reason.trim().to_owned(),
            features: value(features).unwrap_or("").to_owned(),
            admin_comment: value(comment).map(str::to_owned),
        });
    }
    Ok(out)
}

/// The feature names a constraint names (its operators, counts and brackets
/// left out): `[(rackA&qoslane_mc)*1]&qoslane_mc` names `rackA` and
/// `qoslane_mc`.
pub fn constraint_features(constraint: &str) -> impl Iterator<Item = &str> {
    constraint
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .filter(|w| !w.is_empty() && !w.bytes().all(|b| b.is_ascii_digit()))
}

/// A line cut for a message.
fn cut(line: &str) -> String {
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_line_gives_its_name_state_and_both_feature_sets() {
        let n = nodes(
            "NodeName=n1 Arch=x86_64 CoresPerSocket=1 AvailableFeatures=qoslane,qoslane_mc,rackA \
             ActiveFeatures=qoslane,rackA Gres=(null) OS=Linux 6.1.0 #1 SMP State=IDLE+DRAIN \
             ThreadsPerCore=1 Reason=State=DOWN ActiveFeatures=x [root@2026-12-06T04:00:00]\n\
             NodeName=qoslane-wait1 CoresPerSocket=1 AvailableFeatures=(null) ActiveFeatures=(null) State=FUTURE\n",
        )
        .unwrap();
        assert_eq!(
            n[0],
            SlurmNode {
                name: "n1".into(),
                state: "IDLE+DRAIN".into(),
                available: vec!["qoslane".into(), "qoslane_mc".into(), "rackA".into()],
                active: vec!["qoslane".into(), "rackA".into()],
            }
        );
        assert_eq!(n[1].state, "FUTURE");
        assert!(n[1].available.is_empty() && n[1].active.is_empty());
    }

    #[test]
    fn output_with_no_node_line_is_an_error_quoting_it() {
        assert_eq!(
            nodes("No nodes in the system\n").unwrap_err(),
            "no node's line (NodeName=…) in what it printed: \"No nodes in the system\""
        );
        assert_eq!(nodes("").unwrap_err(), "it printed nothing");
    }

    #[test]
    fn a_job_line_keeps_its_reason_and_the_admin_comment_whole() {
        let j = jobs(
            "17\tPD\troot\tmission-critical\tReqNodeNotAvail, May be reserved for other job\t(rackA|rackB)&qoslane_mc\tqoslane: level mc (QoS mission-critical) refused on n1: a\tb\n\
             18_[1-2]\tPD\talice\tnormal\tPriority\t(null)\t(null)\n",
        )
        .unwrap();
        assert_eq!(j[0].id, "17");
        assert_eq!(
            j[0].reason,
            "ReqNodeNotAvail, May be reserved for other job"
        );
        assert_eq!(j[0].features, "(rackA|rackB)&qoslane_mc");
        assert_eq!(
            j[0].admin_comment.as_deref(),
            Some("qoslane: level mc (QoS mission-critical) refused on n1: a\tb")
        );
        assert_eq!(j[1].id, "18_[1-2]");
        assert_eq!((j[1].features.as_str(), &j[1].admin_comment), ("", &None));
        assert!(jobs("").unwrap().is_empty());
    }

    #[test]
    fn a_line_not_in_the_format_is_an_error() {
        assert!(jobs("17 PD root normal Priority").is_err());
        assert!(jobs("JOBID\tST\tUSER\tQOS\tREASON\tFEATURES\tADMIN_COMMENT").is_err());
    }

    #[test]
    fn a_constraint_names_its_features_without_operators_or_counts() {
        let f: Vec<&str> = constraint_features(
            "[(rackA&qoslane_mc)*1&(rackB&qoslane_mc)*12]&qoslane_mission-critical.v2",
        )
        .collect();
        assert_eq!(
            f,
            [
                "rackA",
                "qoslane_mc",
                "rackB",
                "qoslane_mc",
                "qoslane_mission-critical.v2"
            ]
        );
    }
}
