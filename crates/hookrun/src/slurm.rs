//! Talking to Slurm through `scontrol`: by absolute path, without a shell, under
//! a deadline (Slurm hooks run without PATH, and a busy controller can take
//! seconds to answer).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::child::{self, Ending, Env, Line, Program, Stream};
use crate::log;
use crate::runner::describe_status;
use crate::signals::Signals;

/// Drain reasons hookrun sets start with this; only such drains are hookrun's
/// to resume.
pub const REASON_PREFIX: &str = "hookrun:";

/// Most output lines kept from one scontrol call.
const MAX_OUTPUT_LINES: usize = 1000;

/// A configured scontrol.
#[derive(Debug, Clone, Copy)]
pub struct Scontrol<'a> {
    pub path: &'a Path,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub signals: &'a Signals,
    /// For log lines.
    pub phase: &'a str,
    /// No call runs past it (the Prolog's decision: every call it makes
    /// shares one `scontrol_timeout`, so the run stays inside Slurm's
    /// PrologEpilogTimeout); `None`: each call has its own `timeout`.
    pub end: Option<Instant>,
}

impl<'a> Scontrol<'a> {
    /// This scontrol with every call from now on inside one `timeout`.
    #[must_use]
    pub fn sharing_one_timeout(self) -> Scontrol<'a> {
        Scontrol {
            end: Some(Instant::now() + self.timeout),
            ..self
        }
    }

    /// `scontrol requeuehold JOBID`
    pub fn requeue_hold(&self, job_id: &str) -> Result<(), String> {
        self.call(&["requeuehold", job_id]).map(drop)
    }

    /// `scontrol requeue JOBID`: the job goes back to pending, not held
    /// (Slurm delays its next start by `cred_expire`). Only a batch job can
    /// be requeued: for an srun's or salloc's job slurmctld answers `Only
    /// batch jobs are accepted or processed`.
    pub fn requeue(&self, job_id: &str) -> Result<(), String> {
        self.call(&["requeue", job_id]).map(drop)
    }

    /// `scontrol update JobId=JOBID AdminComment=TEXT`: a field the job's
    /// owner reads in `scontrol show job` (and `sacct`), which the job's own
    /// `Comment` is not overwritten by.
    pub fn set_admin_comment(&self, job_id: &str, text: &str) -> Result<(), String> {
        let job = format!("JobId={job_id}");
        let comment = format!("AdminComment={text}");
        self.call(&["update", &job, &comment]).map(drop)
    }

    /// `scontrol show node -o NAME`, parsed.
    pub fn show_node(&self, node: &str) -> Result<NodeState, String> {
        let lines = self.call(&["show", "node", "-o", node])?;
        let text = lines.join(" ");
        NodeState::parse(&text).ok_or_else(|| {
            format!(
                "scontrol show node -o {node}: no State= in its output: {:?}",
                truncate(&text, 200)
            )
        })
    }

    /// `scontrol update nodename=NODE state=drain reason=REASON`
    pub fn drain(&self, node: &str, reason: &str) -> Result<(), String> {
        let nodename = format!("nodename={node}");
        let reason = format!("reason={reason}");
        self.call(&["update", &nodename, "state=drain", &reason])
            .map(drop)
    }

    /// `scontrol update nodename=NODE state=resume`
    pub fn resume(&self, node: &str) -> Result<(), String> {
        let nodename = format!("nodename={node}");
        self.call(&["update", &nodename, "state=resume"]).map(drop)
    }

    /// Runs scontrol with `args`; its stdout lines on success, a one-line
    /// description of what went wrong otherwise. stderr goes to the log.
    fn call(&self, args: &[&str]) -> Result<Vec<String>, String> {
        let command = format!("{} {}", self.path.display(), args.join(" "));
        let program = Program::new(self.path, Env::tool()).args(args);
        let mut stdout = Vec::new();
        let mut first_error: Option<String> = None;
        let mut sink = |stream: Stream, line: Line<'_>| {
            // An over-long line is dropped whole: nothing of it is kept.
            let Line::Whole(line) = line else { return };
            let text = String::from_utf8_lossy(line).into_owned();
            match stream {
                Stream::Stdout if stdout.len() < MAX_OUTPUT_LINES => stdout.push(text),
                Stream::Stdout => {}
                Stream::Stderr => {
                    log::hook_output(self.phase, "scontrol", line);
                    if first_error.is_none() && !text.trim().is_empty() {
                        first_error = Some(text.trim().to_owned());
                    }
                }
            }
        };
        let now = Instant::now();
        let deadline = self
            .end
            .map_or(now + self.timeout, |end| end.min(now + self.timeout));
        if deadline <= now {
            return Err(format!(
                "`{command}` not run: no time left of scontrol_timeout ({})",
                humantime::format_duration(self.timeout)
            ));
        }
        let finished = child::run(&program, deadline, self.kill_grace, self.signals, &mut sink)
            .map_err(|error| format!("could not start {}: {error}", self.path.display()))?;
        let failure = match finished.ending {
            Ending::Exited(status) if status.success() => return Ok(stdout),
            Ending::Exited(status) => describe_status(status),
            Ending::TooLarge => "printed more than its output limit".to_owned(),
            Ending::TimedOut | Ending::Stuck => format!(
                "no answer within {}",
                humantime::format_duration(self.timeout)
            ),
            Ending::Interrupted => "interrupted".to_owned(),
        };
        Err(match first_error {
            Some(message) => format!("`{command}` failed: {failure}: {message}"),
            None => format!("`{command}` failed: {failure}"),
        })
    }
}

/// The parts of `scontrol show node -o` hookrun needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// e.g. `IDLE+DRAIN`, `MIXED+DRAIN`, `DOWN+DRAIN+NOT_RESPONDING`.
    pub state: String,
    /// The reason text, without Slurm's ` [user@time]` suffix.
    pub reason: Option<String>,
}

/// Fields that can follow `Reason=` on the one-line output (Slurm 22.05–25.x
/// print Comment, Extra, InstanceId/InstanceType, ReservationName after it).
const FIELDS_AFTER_REASON: [&str; 5] = [
    " Comment=",
    " Extra=",
    " InstanceId=",
    " InstanceType=",
    " ReservationName=",
];

impl NodeState {
    /// Parses one-line node output. The reason is free text with spaces, so it
    /// runs to the next known field or the end of the line, and the
    /// ` [user@2024-05-01T10:00:00]` Slurm appends is cut off.
    pub fn parse(text: &str) -> Option<NodeState> {
        let state = field_value(text, "State=")?;
        let state = state
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        let reason = field_value(text, "Reason=").map(|rest| {
            let end = FIELDS_AFTER_REASON
                .iter()
                .filter_map(|field| rest.find(field))
                .min()
                .unwrap_or(rest.len());
            let mut reason = rest[..end].trim_end();
            if reason.ends_with(']')
                && let Some(open) = reason.rfind(" [")
                && reason[open..].contains('@')
            {
                reason = reason[..open].trim_end();
            }
            reason.to_owned()
        });
        Some(NodeState { state, reason })
    }

    /// Drained or draining: a DRAIN flag in the state.
    pub fn is_drained(&self) -> bool {
        self.state
            .split('+')
            .any(|flag| flag.trim().to_ascii_uppercase().starts_with("DRAIN"))
    }

    /// Drained, with a reason hookrun set.
    pub fn drained_by_hookrun(&self) -> bool {
        self.is_drained()
            && self
                .reason
                .as_deref()
                .is_some_and(|reason| reason.starts_with(REASON_PREFIX))
    }
}

/// The text after `KEY` where `KEY` starts a field (line start or after a space).
fn field_value<'t>(text: &'t str, key: &str) -> Option<&'t str> {
    let mut from = 0;
    while let Some(offset) = text[from..].find(key) {
        let at = from + offset;
        if at == 0 || text[..at].ends_with(char::is_whitespace) {
            return Some(&text[at + key.len()..]);
        }
        from = at + key.len();
    }
    None
}

/// Cuts `text` to at most `max` bytes on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shape of Slurm 22.05's `scontrol show node -o` (one line).
    const IDLE: &str = "NodeName=c1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 CPULoad=0.15 \
        AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=c1 NodeHostName=c1 \
        Version=22.05.8 OS=Linux 6.1.0 #1 SMP RealMemory=1000 AllocMem=0 FreeMem=812 Sockets=2 \
        Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A \
        Partitions=debug BootTime=2024-05-01T09:00:00 SlurmdStartTime=2024-05-01T09:01:00 \
        LastBusyTime=2024-05-01T09:30:00 CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= \
        CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s";

    fn drained(reason: &str, tail: &str) -> String {
        format!(
            "{} Reason={reason} [root@2024-05-01T10:00:00]{tail}",
            IDLE.replace("State=IDLE ", "State=IDLE+DRAIN ")
        )
    }

    #[test]
    fn idle_node_has_no_reason() {
        let node = NodeState::parse(IDLE).expect("parses");
        assert_eq!(node.state, "IDLE");
        assert_eq!(node.reason, None);
        assert!(!node.is_drained());
    }

    #[test]
    fn reason_with_spaces_and_user_suffix() {
        let node =
            NodeState::parse(&drained("hookrun: 10-ib: port mlx5_0/1 DOWN", "")).expect("parses");
        assert_eq!(node.state, "IDLE+DRAIN");
        assert_eq!(
            node.reason.as_deref(),
            Some("hookrun: 10-ib: port mlx5_0/1 DOWN")
        );
        assert!(node.drained_by_hookrun());
    }

    #[test]
    fn reason_stops_at_the_next_field() {
        let node = NodeState::parse(&drained(
            "disk replacement",
            " Comment=ticket 42 ReservationName=maint",
        ))
        .expect("parses");
        assert_eq!(node.reason.as_deref(), Some("disk replacement"));
        assert!(node.is_drained());
        assert!(!node.drained_by_hookrun(), "an admin's drain is not ours");
    }

    #[test]
    fn draining_and_multi_flag_states() {
        for state in [
            "MIXED+DRAIN",
            "ALLOCATED+DRAIN",
            "DOWN+DRAIN+NOT_RESPONDING",
            "DRAINED",
        ] {
            let node = NodeState {
                state: state.to_owned(),
                reason: None,
            };
            assert!(node.is_drained(), "{state}");
        }
        for state in ["IDLE", "MIXED", "DOWN+NOT_RESPONDING", "IDLE+CLOUD"] {
            let node = NodeState {
                state: state.to_owned(),
                reason: None,
            };
            assert!(!node.is_drained(), "{state}");
        }
    }

    #[test]
    fn a_drained_node_whose_reason_was_not_hookruns() {
        let node = NodeState::parse(&drained("Prolog error", "")).expect("parses");
        assert_eq!(node.reason.as_deref(), Some("Prolog error"));
        assert!(!node.drained_by_hookrun());
    }

    #[test]
    fn field_keys_must_start_a_field() {
        let text = "NodeName=x Comment=MyState=odd State=IDLE";
        assert_eq!(
            NodeState::parse(text).map(|n| n.state).as_deref(),
            Some("IDLE")
        );
        assert_eq!(NodeState::parse("Node c9 not found"), None);
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("hello", 10), "hello");
    }
}
