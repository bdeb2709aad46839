//! `qoslane cluster`'s human form, from the [`ClusterView`] alone: a
//! headline, the levels (where each is carried, "CARRIED NOWHERE" first in
//! its line), the nodes × levels table, the jobs qoslane turned away and the
//! jobs waiting for a level carried nowhere. Only words: every judgement is
//! in the model.

use std::fmt::Write as _;

use super::model::{Carriage, ClusterView};

/// A text from Slurm on one line, its control characters shown as `?`
/// (an AdminComment or a node name cannot move the terminal's cursor).
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn human(v: &ClusterView) -> String {
    let mut s = String::new();
    headline(&mut s, v);
    if v.levels.is_empty() {
        return s;
    }
    levels(&mut s, v);
    nodes(&mut s, v);
    jobs(&mut s, v);
    s
}

fn headline(s: &mut String, v: &ClusterView) {
    let nowhere: Vec<&str> = v
        .levels
        .iter()
        .filter(|l| l.carried_nowhere)
        .map(|l| l.level.as_str())
        .collect();
    let _ = writeln!(
        s,
        "{} qoslane cluster: {}, {} placed, {} pending ({} turned away by qoslane){}",
        if nowhere.is_empty() { "●" } else { "×" },
        plural(v.nodes.len(), "node", "nodes"),
        plural(v.levels.len(), "level", "levels"),
        plural(v.pending_jobs, "job", "jobs"),
        v.turned_away.len(),
        if nowhere.is_empty() {
            String::new()
        } else {
            format!(
                "; CARRIED NOWHERE: {} (its jobs pend until a node in service carries it)",
                clean(&nowhere.join(", "))
            )
        }
    );
    if v.levels.is_empty() {
        let _ = writeln!(
            s,
            "no node lists a qoslane_<level> feature: placement is not configured \
             (`qoslane slurm-config`, the admin guide's \"Telling Slurm where each tier is carried\")"
        );
    }
}

fn levels(s: &mut String, v: &ClusterView) {
    let w = v
        .levels
        .iter()
        .map(|l| l.level.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(s, "\n{:<w$}  carried on", "level");
    for l in &v.levels {
        let total = v.nodes.len();
        let where_ = if l.carried_on.is_empty() {
            format!("CARRIED NOWHERE (0 of {total} nodes)")
        } else if l.carried_nowhere {
            format!(
                "CARRIED NOWHERE in service: {} of {total} nodes, none in service: {}",
                l.carried_on.len(),
                clean(&l.carried_on.join(","))
            )
        } else {
            format!(
                "{} of {total} nodes ({} in service): {}",
                l.carried_on.len(),
                l.carried_in_service,
                clean(&l.carried_on.join(","))
            )
        };
        let _ = writeln!(s, "{:<w$}  {where_}", clean(&l.level));
    }
}

fn nodes(s: &mut String, v: &ClusterView) {
    let nw = v
        .nodes
        .iter()
        .map(|n| n.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let sw = v
        .nodes
        .iter()
        .map(|n| n.state.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let cw: Vec<usize> = v
        .levels
        .iter()
        .map(|l| {
            l.level
                .chars()
                .count()
                .max(Carriage::NotConfigured.as_str().len())
        })
        .collect();
    let mut head = format!("\n{:<nw$}  {:<sw$}", "node", "state");
    for (l, w) in v.levels.iter().zip(&cw) {
        let _ = write!(head, "  {:<w$}", clean(&l.level));
    }
    let _ = writeln!(s, "{}", head.trim_end());
    for n in &v.nodes {
        let mut line = format!("{:<nw$}  {:<sw$}", clean(&n.name), clean(&n.state));
        for (c, w) in n.levels.iter().zip(&cw) {
            let _ = write!(line, "  {:<w$}", c.carries.as_str());
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    if v.placeholders > 0 {
        let _ = writeln!(
            s,
            "({} left out: FUTURE, they list every feature and never run a job)",
            plural(v.placeholders, "placeholder node", "placeholder nodes")
        );
    }
}

fn jobs(s: &mut String, v: &ClusterView) {
    if v.turned_away.is_empty() {
        let _ = writeln!(s, "\nno pending job was turned away by qoslane");
    } else {
        let _ = writeln!(
            s,
            "\npending jobs qoslane turned away (their AdminComment; `scontrol show job ID`):"
        );
        for t in &v.turned_away {
            let _ = writeln!(
                s,
                "  job {} ({}, QoS {}) pending: {}\n    {}",
                clean(&t.job),
                clean(&t.user),
                clean(&t.qos),
                clean(&t.reason),
                clean(&t.admin_comment)
            );
        }
    }
    if !v.waiting.is_empty() {
        let _ = writeln!(s, "\npending jobs waiting for a level carried nowhere:");
        for w in &v.waiting {
            let _ = writeln!(
                s,
                "  job {} ({}, QoS {}) waits for {}: {}",
                clean(&w.job),
                clean(&w.user),
                clean(&w.qos),
                clean(&w.levels.join(", ")),
                clean(&w.reason)
            );
        }
    }
}
