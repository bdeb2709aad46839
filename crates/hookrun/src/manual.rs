//! The man pages: `hookrun(8)` from the clap definitions (section 8: it lives
//! in /usr/sbin), with the long help's epilogue (environment, exit codes),
//! FILES and SEE ALSO; and `hookrun.conf(5)`, the configuration file's page,
//! whose keys are [`crate::conffile::KEYS`] (a test holds the page to them) and
//! whose defaults are the constants of [`crate::config`]. Both are made with
//! the workspace's `manpage` crate, as qoslane's are. Pure: [`pages`] returns
//! the files' names and contents, `hookrun generate man` writes them.

use clap::CommandFactory;
use manpage::{Layout, Page, escape, item, section, see_also};

use crate::cli::Cli;
use crate::conffile::KEYS;
use crate::config;
use crate::phase::Phase;

/// Where the package installs hookrun.md, which the pages point to.
const DOC: &str = "/usr/share/doc/qoslane/hookrun.md";

/// Every page: `hookrun.8` and `hookrun.conf.5`.
///
/// # Errors
/// Only if rendering into memory fails, which clap_mangen reports as I/O.
pub fn pages() -> std::io::Result<Vec<Page>> {
    let layout = Layout {
        per_subcommand: false,
        epilogue: true,
    };
    let mut out = manpage::program_pages(Cli::command(), &source(), layout, &|_, _| files())?;
    let (name, text) = conf_page();
    out.push((name.to_owned(), text.into_bytes()));
    Ok(out)
}

/// The footer's source: `hookrun VERSION`.
fn source() -> String {
    format!("hookrun {}", env!("CARGO_PKG_VERSION"))
}

/// FILES and SEE ALSO of hookrun(8).
fn files() -> String {
    let dirs: Vec<&str> = Phase::ALL.iter().map(|p| p.dir_name()).collect();
    let mut text = section("FILES");
    text += &item(
        &format!("{}/{{{}}}/", config::DEFAULT_HOOK_DIR, dirs.join(",")),
        "The hooks of each phase, run in ascending file\\-name order.",
    );
    text += &item(
        &format!("{}/{}", config::DEFAULT_HOOK_DIR, config::CONFIG_FILE_NAME),
        &format!(
            "Site configuration (key = value lines; see {DOC}).\n\
             Read only when owned by root and not writable by group or others;\n\
             readable by every user (0644): the TaskProlog reads it as the job's user."
        ),
    );
    text += &item(
        &format!("{}/", config::DEFAULT_STATE_DIR),
        "The metric counters (metrics.json, replaced through the spare .metrics.json.spare\n\
         kept beside it); whether a drain of hookrun's may be in place\n\
         (drained: a passing health check reads the node's state only then).",
    );
    text += &item(
        &format!("{}/hookrun.prom", config::DEFAULT_TEXTFILE_DIR),
        "The metrics, for node_exporter's textfile collector.",
    );
    text + &see_also(
        &[("hookrun.conf", "5"), ("qoslane", "8"), ("slurm.conf", "5")],
        DOC,
    )
}

/// `hookrun.conf(5)`: the file name and roff text of the page.
pub fn conf_page() -> (&'static str, String) {
    let d = |v: std::time::Duration| humantime::format_duration(v).to_string();
    let keys: [(&str, String); 7] = [
        (
            "on_failure",
            "drain | requeue; default drain. What a failed required Prolog hook does. drain: \
             drain the node with the reason \"hookrun: prolog HOOK: CAUSE\" and exit \
             non-zero; Slurm requeues and holds the job. requeue: scontrol requeuehold the \
             job and exit 0, the node stays in service (if the requeue fails, drain after \
             all). A hook's refusal (exit 100: refuse this job, the node is fine) is not a \
             failure: under either policy the job is requeued, not held (its AdminComment \
             says why), or, if it cannot be (srun, salloc), left to the hook's TaskProlog; \
             the node is never drained for it."
                .into(),
        ),
        (
            "budget",
            format!(
                "A duration; default {}. Time for all hooks of one run; keep it under Slurm's \
                 PrologEpilogTimeout.",
                d(config::DEFAULT_BUDGET)
            ),
        ),
        (
            "hook_timeout",
            format!(
                "A duration; default {}. Time for one hook, inside the budget.",
                d(config::DEFAULT_HOOK_TIMEOUT)
            ),
        ),
        (
            "kill_grace",
            format!(
                "A duration, 0s allowed; default {}. Wait between SIGTERM and SIGKILL for an \
                 overdue hook.",
                d(config::DEFAULT_KILL_GRACE)
            ),
        ),
        (
            "scontrol",
            format!(
                "An absolute path; default {}. Run without a shell to requeue, drain and resume.",
                config::DEFAULT_SCONTROL
            ),
        ),
        (
            "scontrol_timeout",
            format!(
                "A duration; default {}. The deadline of each scontrol call.",
                d(config::DEFAULT_SCONTROL_TIMEOUT)
            ),
        ),
        (
            "textfile_dir",
            format!(
                "A directory, used as given; default {}. Where hookrun.prom is written (only \
                 when the directory exists).",
                config::DEFAULT_TEXTFILE_DIR
            ),
        ),
    ];
    debug_assert!(keys.iter().map(|(k, _)| *k).eq(KEYS.iter().copied()));
    let mut text = manpage::file_format_title("hookrun.conf", &source());
    text.push_str(&format!(
        ".SH NAME\nhookrun.conf \\- the configuration of hookrun\n\
         .SH SYNOPSIS\n.I {dir}/{file}\n\
         .SH DESCRIPTION\n\
         One key = value per line; # starts a comment; blank lines are allowed. An unknown or \
         repeated key, or an invalid value, is an error that names the file and line, and \
         hookrun exits 2 without running any hook (for a Prolog: the node drains, which is how \
         a broken configuration gets noticed). A missing file means the defaults. Durations \
         are written like 20s, 500ms, 1m 30s; zero is refused except for kill_grace.\n\
         .PP\n\
         A flag wins over its HOOKRUN_ variable, a variable over this file (hookrun(8)). The \
         file must be owned by root and not be writable by group or others: it names a \
         program hookrun runs as root. It must be readable by every user (0644): the \
         TaskProlog reads it as the job's user. One it cannot open gives the TaskProlog the \
         defaults; hookrun list reports it (exit 4) and the health check drains the node \
         until it is fixed.\n\
         .SH KEYS\n",
        dir = escape(config::DEFAULT_HOOK_DIR),
        file = config::CONFIG_FILE_NAME,
    ));
    for (key, what) in &keys {
        text.push_str(&item(key, &escape(what)));
    }
    text.push_str(
        ".SH EXAMPLE\n.PP\n.RS 4\n.nf\n\
         # /etc/slurm/hookrun.conf\non_failure = requeue\nbudget = 20s\nhook_timeout = 10s\n\
         .fi\n.RE\n",
    );
    text.push_str(&see_also(&[("hookrun", "8"), ("slurm.conf", "5")], DOC));
    ("hookrun.conf.5", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_key_and_its_example_parses() {
        let (name, text) = conf_page();
        assert_eq!(name, "hookrun.conf.5");
        for key in KEYS {
            assert!(text.contains(&format!(".TP\n.B {key}\n")), "{key} missing");
        }
        let example = "on_failure = requeue\nbudget = 20s\nhook_timeout = 10s\n";
        assert!(text.contains(example));
        assert!(
            crate::conffile::ConfFile::parse(std::path::Path::new("hookrun.conf"), example).is_ok()
        );
        assert!(text.lines().all(|l| !l.starts_with('.') || l.len() > 1));
    }
}
