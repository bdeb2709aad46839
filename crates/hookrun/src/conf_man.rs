//! `hookrun.conf(5)`: the configuration file's page, written by `hookrun
//! generate man` beside hookrun(8). Its keys are [`crate::conffile::KEYS`]
//! (a test holds the page to them) and its defaults the constants of
//! [`crate::settings`].

use crate::conffile::KEYS;
use crate::settings;

/// The file name and roff text of the page.
pub fn page() -> (&'static str, String) {
    let d = |v: std::time::Duration| humantime::format_duration(v).to_string();
    let keys: [(&str, String); 7] = [
        (
            "on_failure",
            "drain | requeue; default drain. What a failed required Prolog hook does. drain: \
             exit non-zero; Slurm requeues and holds the job and drains the node. requeue: \
             scontrol requeuehold the job and exit 0, the node stays in service (if the \
             requeue fails, drain after all)."
                .into(),
        ),
        (
            "budget",
            format!(
                "A duration; default {}. Time for all hooks of one run; keep it under Slurm's \
                 PrologEpilogTimeout.",
                d(settings::DEFAULT_BUDGET)
            ),
        ),
        (
            "hook_timeout",
            format!(
                "A duration; default {}. Time for one hook, inside the budget.",
                d(settings::DEFAULT_HOOK_TIMEOUT)
            ),
        ),
        (
            "kill_grace",
            format!(
                "A duration, 0s allowed; default {}. Wait between SIGTERM and SIGKILL for an \
                 overdue hook.",
                d(settings::DEFAULT_KILL_GRACE)
            ),
        ),
        (
            "scontrol",
            format!(
                "An absolute path; default {}. Run without a shell to requeue, drain and resume.",
                settings::DEFAULT_SCONTROL
            ),
        ),
        (
            "scontrol_timeout",
            format!(
                "A duration; default {}. The deadline of each scontrol call.",
                d(settings::DEFAULT_SCONTROL_TIMEOUT)
            ),
        ),
        (
            "textfile_dir",
            format!(
                "A directory, used as given; default {}. Where hookrun.prom is written (only \
                 when the directory exists).",
                settings::DEFAULT_TEXTFILE_DIR
            ),
        ),
    ];
    debug_assert!(keys.iter().map(|(k, _)| *k).eq(KEYS.iter().copied()));
    let mut text = format!(
        ".TH hookrun.conf 5 \"\" \"hookrun {}\" \"File Formats\"\n",
        env!("CARGO_PKG_VERSION")
    );
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
         program hookrun runs as root.\n\
         .SH KEYS\n",
        dir = escape(settings::DEFAULT_HOOK_DIR),
        file = settings::CONFIG_FILE_NAME,
    ));
    for (key, what) in &keys {
        text.push_str(&format!(".TP\n.B {key}\n{}\n", escape(what)));
    }
    text.push_str(
        ".SH EXAMPLE\n.PP\n.RS 4\n.nf\n\
         # /etc/slurm/hookrun.conf\non_failure = requeue\nbudget = 20s\nhook_timeout = 10s\n\
         .fi\n.RE\n\
         .SH \"SEE ALSO\"\n.BR hookrun (8),\n.BR slurm.conf (5),\n\
         .B /usr/share/doc/qoslane/hookrun.md\n",
    );
    ("hookrun.conf.5", text)
}

/// Roff text: a hyphen is `\-`, and no line may start with a dot.
fn escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_key_and_its_example_parses() {
        let (name, text) = page();
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
