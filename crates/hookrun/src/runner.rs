//! Runs the hooks of one phase in order, each under its own deadline inside the
//! phase budget, and reports what happened to each. Deciding what the results
//! mean for the job and the node is [`crate::app`]'s business.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use crate::builtin::BuiltIn;
use crate::child::{self, Dropped, Ending, Line, Program, Stream};
use crate::discover::Hook;
use crate::exit::HOOK_REFUSES_JOB;
use crate::log::{self, Priority};
use crate::phase::Phase;
use crate::protocol;
use crate::signals::Signals;

/// Variable set for every hook: which phase runs it (one script can serve several).
pub const ENV_PHASE: &str = "HOOKRUN_PHASE";

/// What became of one hook, as logged and counted (the metrics' `outcome`
/// label keeps its published name). Not qoslane's run outcome, which is what a
/// run did to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fate {
    /// Exited 0.
    Ok,
    /// Exited non-zero, died of a signal, or could not be started.
    Failed,
    /// Overstayed its deadline (hook timeout or what was left of the budget).
    Timeout,
    /// Not started: an earlier required hook failed (prolog, task-prolog), or
    /// the budget was spent.
    Skipped,
    /// hookrun was stopped (SIGTERM/SIGINT/SIGHUP) while the hook ran.
    Interrupted,
    /// A Prolog hook refused the job: it exited
    /// [`crate::exit::HOOK_REFUSES_JOB`] ("refuse this job, the node is
    /// fine"). Stops the Prolog like a failure; what it means for the job
    /// and the node is `app`'s.
    Refused,
}

impl Fate {
    /// Every fate, in metric order.
    pub const ALL: [Fate; 6] = [
        Fate::Ok,
        Fate::Failed,
        Fate::Timeout,
        Fate::Skipped,
        Fate::Interrupted,
        Fate::Refused,
    ];

    /// The `outcome` metric label and the word in the log line.
    pub fn label(self) -> &'static str {
        match self {
            Fate::Ok => "ok",
            Fate::Failed => "failed",
            Fate::Timeout => "timeout",
            Fate::Skipped => "skipped",
            Fate::Interrupted => "interrupted",
            Fate::Refused => "refused",
        }
    }

    pub fn from_label(label: &str) -> Option<Fate> {
        Fate::ALL.into_iter().find(|o| o.label() == label)
    }

    /// `failed`, `timed out`, … for sentences about a hook.
    pub fn verb(self) -> &'static str {
        match self {
            Fate::Ok => "succeeded",
            Fate::Failed => "failed",
            Fate::Timeout => "timed out",
            Fate::Skipped => "was not run",
            Fate::Interrupted => "was interrupted",
            Fate::Refused => "refused the job",
        }
    }

    pub fn is_failure(self) -> bool {
        !matches!(self, Fate::Ok)
    }
}

/// What happened to one hook.
#[derive(Debug, Clone)]
pub struct HookResult {
    pub name: String,
    pub required: bool,
    pub fate: Fate,
    /// `None` when the hook did not start.
    pub elapsed: Option<Duration>,
    /// Why it failed, one line; empty for `ok`.
    pub detail: String,
    /// First non-blank line of its stdout, else of its stderr.
    pub first_line: Option<String>,
}

/// What happened to a phase.
#[derive(Debug, Clone)]
pub struct PhaseReport {
    pub phase: Phase,
    pub results: Vec<HookResult>,
    /// The termination signal that stopped the run, if any.
    pub interrupted: Option<i32>,
    /// hook name → over-long output lines dropped (only hooks that had any).
    pub lines_dropped: BTreeMap<String, Dropped>,
}

impl PhaseReport {
    /// Over-long output lines of `hook` that were dropped whole.
    pub fn dropped(&self, hook: &str) -> Dropped {
        self.lines_dropped.get(hook).copied().unwrap_or_default()
    }

    /// Required hooks that did not succeed, in run order.
    pub fn required_failures(&self) -> impl Iterator<Item = &HookResult> {
        self.results
            .iter()
            .filter(|r| r.required && r.fate.is_failure())
    }

    /// `3 hooks: 2 ok, 1 failed`
    pub fn summary(&self) -> String {
        let mut text = format!(
            "{} hook{}",
            self.results.len(),
            if self.results.len() == 1 { "" } else { "s" }
        );
        let mut parts = Vec::new();
        for fate in Fate::ALL {
            let count = self.results.iter().filter(|r| r.fate == fate).count();
            if count > 0 {
                parts.push(format!("{count} {}", fate.label()));
            }
        }
        if !parts.is_empty() {
            text.push_str(": ");
            text.push_str(&parts.join(", "));
        }
        text
    }
}

/// Timing limits for a phase run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// No hook runs past this instant (start + budget).
    pub budget_end: Instant,
    pub budget: Duration,
    pub hook_timeout: Duration,
    pub kill_grace: Duration,
}

/// Runs `hooks` in order; a hook that is the running binary runs `built_in`
/// (see [`crate::builtin`]).
pub fn run_phase(
    phase: Phase,
    hooks: &[Hook],
    limits: Limits,
    signals: &Signals,
    built_in: Option<&BuiltIn>,
) -> PhaseReport {
    let mut report = PhaseReport {
        phase,
        results: Vec::with_capacity(hooks.len()),
        interrupted: None,
        lines_dropped: BTreeMap::new(),
    };
    let mut stop_reason: Option<String> = None;
    for hook in hooks {
        if let Some(signal) = signals.termination() {
            report.interrupted = Some(signal);
            break;
        }
        let now = Instant::now();
        if stop_reason.is_none() && now >= limits.budget_end {
            stop_reason = Some(format!(
                "budget of {} spent",
                humantime::format_duration(limits.budget)
            ));
        }
        if let Some(reason) = &stop_reason {
            let priority = if hook.required {
                Priority::Warning
            } else {
                Priority::Info
            };
            log::hook(
                priority,
                phase.name(),
                &hook.name,
                &format!("skipped: {reason}"),
            );
            report.results.push(HookResult {
                name: hook.name.clone(),
                required: hook.required,
                fate: Fate::Skipped,
                elapsed: None,
                detail: reason.clone(),
                first_line: None,
            });
            continue;
        }

        let hook_end = now + limits.hook_timeout;
        let (deadline, limit) = if limits.budget_end < hook_end {
            (limits.budget_end, "what was left of the budget")
        } else {
            (hook_end, "hook_timeout")
        };
        let allowed = format!(
            "{} ({limit})",
            humantime::format_duration(round_ms(deadline - now))
        );
        let entry = built_in.filter(|b| b.runs(hook)).map(|b| b.entry);
        let (result, dropped) = run_hook(
            phase,
            hook,
            Run {
                deadline,
                allowed: &allowed,
                limits,
                signals,
                entry,
            },
        );
        if dropped != Dropped::default() {
            report.lines_dropped.insert(hook.name.clone(), dropped);
        }
        log_result(phase, &result);
        let fate = result.fate;
        let failed_required = result.required && fate.is_failure();
        report.results.push(result);
        if let Fate::Interrupted = fate {
            report.interrupted = signals.termination();
            break;
        }
        if failed_required && phase.stops_at_required_failure() {
            stop_reason = Some(format!("required hook {} {}", hook.name, fate.verb()));
        }
    }
    report
}

/// How one hook runs: until when, and built in or exec'd.
struct Run<'a> {
    deadline: Instant,
    /// The deadline in words, for the log line of a timeout.
    allowed: &'a str,
    limits: Limits,
    signals: &'a Signals,
    /// The running binary's entry, when the hook is that binary.
    entry: Option<child::Entry>,
}

fn run_hook(phase: Phase, hook: &Hook, run: Run<'_>) -> (HookResult, Dropped) {
    let Run {
        deadline,
        allowed,
        limits,
        signals,
        entry,
    } = run;
    if let Some(why) = &hook.refused {
        let result = HookResult {
            name: hook.name.clone(),
            required: hook.required,
            fate: Fate::Failed,
            elapsed: None,
            detail: format!("refusing to run it: {why}"),
            first_line: None,
        };
        return (result, Dropped::default());
    }
    let mut first_stdout: Option<String> = None;
    let mut first_stderr: Option<String> = None;
    let mut stdout_error: Option<std::io::Error> = None;
    let protocol_channel = phase == Phase::TaskProlog;
    let mut sink = |stream: Stream, line: Line<'_>| {
        let line = match line {
            Line::Whole(line) => line,
            Line::Dropped { bytes } => {
                // Never a piece of it: the rest of a cut line would read as
                // a line of its own (on the TaskProlog's stdout, possibly an
                // instruction made of text the hook merely echoed).
                log::hook(
                    Priority::Warning,
                    phase.name(),
                    &hook.name,
                    &format!(
                        "dropped an over-long {} line ({bytes} bytes; the limit is {}): no part of it was passed on",
                        stream.label(),
                        child::MAX_LINE
                    ),
                );
                return;
            }
        };
        let first = match stream {
            Stream::Stdout => &mut first_stdout,
            Stream::Stderr => &mut first_stderr,
        };
        if first.is_none() && !line.trim_ascii().is_empty() {
            *first = Some(String::from_utf8_lossy(line.trim_ascii()).into_owned());
        }
        if protocol_channel && stream == Stream::Stdout && protocol::is_protocol_line(line) {
            // The one place hookrun writes to stdout: Slurm's TaskProlog channel.
            if stdout_error.is_none() {
                let mut out = std::io::stdout().lock();
                let written = out
                    .write_all(line)
                    .and_then(|()| out.write_all(b"\n"))
                    .and_then(|()| out.flush());
                stdout_error = written.err();
            }
        } else {
            log::hook_output(phase.name(), &hook.name, line);
        }
    };
    // A hook's path is its directory's joined with its name: never looked
    // up in PATH; one under a relative directory is run from where hookrun
    // runs, as before.
    let path = std::path::absolute(&hook.path).unwrap_or_else(|_| hook.path.clone());
    let mut program = Program::new(path, child::HOOK_ENV).var(ENV_PHASE, phase.name());
    if let Some(entry) = entry {
        program = program.built_in(entry);
    }
    let run = child::run(&program, deadline, limits.kill_grace, signals, &mut sink);
    let (fate, elapsed, detail, dropped) = match run {
        Err(error) => (
            Fate::Failed,
            Duration::ZERO,
            format!("could not start {}: {error}", hook.path.display()),
            Dropped::default(),
        ),
        Ok(finished) => {
            let (fate, detail) = judge_ending(phase, finished.ending, allowed, signals);
            (fate, finished.elapsed, detail, finished.dropped)
        }
    };
    if let Some(error) = stdout_error {
        log::hook(
            Priority::Error,
            phase.name(),
            &hook.name,
            &format!("failed to write TaskProlog protocol lines to stdout: {error}"),
        );
    }
    let result = HookResult {
        name: hook.name.clone(),
        required: hook.required,
        fate,
        elapsed: Some(elapsed),
        detail,
        first_line: first_stdout.or(first_stderr),
    };
    (result, dropped)
}

/// A hook's fate and the detail logged with it, from how its process ended.
fn judge_ending(phase: Phase, ending: Ending, allowed: &str, signals: &Signals) -> (Fate, String) {
    match ending {
        Ending::Exited(status) if status.success() => (Fate::Ok, String::new()),
        Ending::Exited(status) if status.code() == Some(HOOK_REFUSES_JOB) => {
            if phase == Phase::Prolog {
                (
                    Fate::Refused,
                    format!("exit status {HOOK_REFUSES_JOB} (refuses the job; the node is fine)"),
                )
            } else {
                (
                    Fate::Failed,
                    format!(
                        "exit status {HOOK_REFUSES_JOB} (a refusal only means something in the prolog: a failure here)"
                    ),
                )
            }
        }
        Ending::Exited(status) => (Fate::Failed, describe_status(status)),
        Ending::TimedOut => (
            Fate::Timeout,
            format!("deadline of {allowed} reached; process group killed"),
        ),
        Ending::Stuck => (
            Fate::Timeout,
            format!("deadline of {allowed} reached; still alive after SIGKILL, left behind"),
        ),
        // Only a capped capture ends so; hooks' output is streamed.
        Ending::TooLarge => (
            Fate::Failed,
            "printed more than its output limit; process group killed".to_owned(),
        ),
        Ending::Interrupted => (
            Fate::Interrupted,
            format!(
                "hookrun received {}; process group killed",
                signals.termination().map_or("a stop signal", signal_name)
            ),
        ),
    }
}

fn round_ms(duration: Duration) -> Duration {
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

fn log_result(phase: Phase, result: &HookResult) {
    // A hook that was not started (refused) has no time to report.
    let mut line = match result.elapsed {
        Some(elapsed) => format!("{} in {}", result.fate.label(), log::duration(elapsed)),
        None => result.fate.label().to_owned(),
    };
    if !result.detail.is_empty() {
        line.push_str(": ");
        line.push_str(&result.detail);
    }
    if result.fate.is_failure() && !result.required {
        line.push_str(" (optional hook: not acted on)");
    }
    let priority = if result.fate.is_failure() {
        Priority::Warning
    } else {
        Priority::Info
    };
    log::hook(priority, phase.name(), &result.name, &line);
}

/// `exit status 3`, `killed by signal 11 (SIGSEGV)`.
pub fn describe_status(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal} ({})", signal_name(signal)),
        (None, None) => status.to_string(),
    }
}

/// The usual name of a signal number, for log lines ("signal" for a
/// number that names none).
pub fn signal_name(signal: i32) -> &'static str {
    nix::sys::signal::Signal::try_from(signal).map_or("signal", |s| s.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, required: bool, fate: Fate) -> HookResult {
        HookResult {
            name: name.to_owned(),
            required,
            fate,
            elapsed: None,
            detail: String::new(),
            first_line: None,
        }
    }

    #[test]
    fn fate_labels_round_trip() {
        for fate in Fate::ALL {
            assert_eq!(Fate::from_label(fate.label()), Some(fate));
        }
    }

    #[test]
    fn optional_failures_are_not_required_failures() {
        let report = PhaseReport {
            phase: Phase::Epilog,
            results: vec![
                result("10-a", true, Fate::Ok),
                result("20-b.optional", false, Fate::Failed),
                result("30-c", true, Fate::Timeout),
                result("40-d", true, Fate::Skipped),
            ],
            interrupted: None,
            lines_dropped: BTreeMap::new(),
        };
        let failed: Vec<_> = report
            .required_failures()
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(failed, ["30-c", "40-d"]);
        assert_eq!(
            report.summary(),
            "4 hooks: 1 ok, 1 failed, 1 timeout, 1 skipped"
        );
    }

    #[test]
    fn exit_statuses_are_described() {
        use std::process::ExitStatus;
        assert_eq!(
            describe_status(ExitStatus::from_raw(3 << 8)),
            "exit status 3"
        );
        assert_eq!(
            describe_status(ExitStatus::from_raw(11)),
            "killed by signal 11 (SIGSEGV)"
        );
    }

    #[test]
    fn a_signal_number_is_named_as_the_kernel_names_it() {
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(17), "SIGCHLD");
        assert_eq!(signal_name(24), "SIGXCPU");
        // No name: 0, a real-time signal, a number past them.
        for unnamed in [0, 34, 64, 200, -1] {
            assert_eq!(signal_name(unnamed), "signal", "{unnamed}");
        }
    }
}
