//! Over-long output lines (issue 12, item 8): hookrun never passes on part of
//! a line. A line longer than the limit (16 KiB) is dropped whole, logged and
//! counted — before, it was cut at 16 KiB and the rest became a line of its
//! own, so text a hook echoed (a job name is the user's text) could turn into
//! a TaskProlog instruction, and a long legitimate export was silently cut.

use crate::util::{Fixture, Run};

/// hookrun's line limit (`child::MAX_LINE`).
const LIMIT: usize = 16 * 1024;

/// Shell that sets `$fill` to `n` bytes of `x` (no external programs: hooks
/// run without PATH).
fn fill(n: usize) -> String {
    format!(
        r#"fill=''
i=0
while [ "$i" -lt {n} ]; do fill="${{fill}}x"; i=$((i + 1)); done"#
    )
}

fn dropped(fx: &Fixture, phase: &str, hook: &str, stream: &str) -> Option<f64> {
    fx.sample(&format!(
        "hookrun_lines_dropped_total{{phase=\"{phase}\",hook=\"{hook}\",stream=\"{stream}\"}}"
    ))
}

fn no_protocol_line_on_stderr(run: &Run) {
    for line in run.stderr.lines() {
        for prefix in ["export ", "unset ", "print "] {
            assert!(
                !line.starts_with(prefix),
                "protocol-looking stderr line {line:?}"
            );
        }
    }
}

/// The attack: a job name echoed by a hook, long enough that what follows the
/// first 16 KiB is an instruction of the user's choosing.
#[test]
fn the_tail_of_an_overlong_line_never_becomes_a_protocol_line() {
    let fx = Fixture::new();
    let head = "print job name: ";
    fx.hook(
        "task-prolog",
        "10-echo-name",
        &format!(
            "{}\nprintf '%s%s%s\\n' '{head}' \"$fill\" 'export LD_PRELOAD=/tmp/x.so'\necho 'export AFTER=1'",
            fill(LIMIT - head.len())
        ),
    );
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        !run.stdout.contains("LD_PRELOAD"),
        "a piece of the line became an instruction:\n{}",
        &run.stdout[run.stdout.len().saturating_sub(200)..]
    );
    // No part of it at all, and the next line is read as it should be.
    assert_eq!(run.stdout, "export AFTER=1\n");
    assert!(
        run.has_line(&format!(
            "hookrun[task-prolog] 10-echo-name: dropped an over-long stdout line ({} bytes",
            LIMIT + "export LD_PRELOAD=/tmp/x.so".len()
        )),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("LD_PRELOAD"), "{}", run.stderr);
    no_protocol_line_on_stderr(&run);
    assert_eq!(
        dropped(&fx, "task-prolog", "10-echo-name", "stdout"),
        Some(1.0),
        "{}",
        fx.prom()
    );
    assert_eq!(
        dropped(&fx, "task-prolog", "10-echo-name", "stderr"),
        Some(0.0)
    );
}

/// A legitimate export longer than the limit is dropped whole, never cut to a
/// value nobody wrote.
#[test]
fn a_long_legitimate_export_is_dropped_whole_not_truncated() {
    let fx = Fixture::new();
    fx.hook(
        "task-prolog",
        "10-big",
        &format!(
            "{}\nprintf 'export BIG=%s\\n' \"$fill\"\necho 'export SMALL=1'",
            fill(LIMIT + 100)
        ),
    );
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "export SMALL=1\n");
    assert!(!run.stderr.contains("xxxxxxxx"), "a piece was logged");
    assert!(
        run.has_line("10-big: dropped an over-long stdout line"),
        "{}",
        run.stderr
    );
    assert_eq!(dropped(&fx, "task-prolog", "10-big", "stdout"), Some(1.0));
}

/// A line of exactly the limit passes whole; so does everything around an
/// over-long one, and a last line without a newline.
#[test]
fn lines_up_to_the_limit_still_pass() {
    let fx = Fixture::new();
    let head = "export EXACT=";
    fx.hook(
        "task-prolog",
        "10-exact",
        &format!(
            "{}\necho 'export BEFORE=1'\nprintf '%s%s\\n' '{head}' \"$fill\"\nprintf '%s%s\\n' '{head}' \"${{fill}}y\"\nprintf 'export LAST=1'",
            fill(LIMIT - head.len())
        ),
    );
    let run = fx.hookrun().args(["task-prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "{:?}",
        lines.iter().map(|l| l.len()).collect::<Vec<_>>()
    );
    assert_eq!(lines[0], "export BEFORE=1");
    assert_eq!(lines[1].len(), LIMIT);
    assert!(lines[1].starts_with(head) && lines[1].ends_with('x'));
    assert_eq!(lines[2], "export LAST=1");
    assert_eq!(dropped(&fx, "task-prolog", "10-exact", "stdout"), Some(1.0));
}

/// Hook stderr forwarded to the log obeys the same rule, in every phase.
#[test]
fn an_overlong_stderr_line_is_dropped_whole_and_counted() {
    let fx = Fixture::new();
    fx.hook(
        "prolog",
        "10-noisy",
        &format!(
            "{}\nprintf '%s%s\\n' \"$fill\" 'export LD_PRELOAD=/tmp/x.so' >&2\necho 'short line' >&2",
            fill(LIMIT)
        ),
    );
    let run = fx.hookrun().args(["prolog"]).run();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stderr.contains("LD_PRELOAD"), "{}", run.stderr);
    assert!(!run.stderr.contains("xxxxxxxx"), "a piece was logged");
    assert!(
        run.has_line("hookrun[prolog] 10-noisy> short line"),
        "{}",
        run.stderr
    );
    assert!(
        run.has_line("hookrun[prolog] 10-noisy: dropped an over-long stderr line"),
        "{}",
        run.stderr
    );
    assert_eq!(dropped(&fx, "prolog", "10-noisy", "stderr"), Some(1.0));
    assert_eq!(dropped(&fx, "prolog", "10-noisy", "stdout"), Some(0.0));
    // Counts add up across runs.
    assert_eq!(fx.hookrun().args(["prolog"]).run().code, Some(0));
    assert_eq!(dropped(&fx, "prolog", "10-noisy", "stderr"), Some(2.0));
}
