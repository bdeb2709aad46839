//! The man pages: `qoslane(8)` and one page per subcommand from the clap
//! definitions (section 8: the program lives in /usr/sbin), with FILES,
//! ENVIRONMENT, EXIT STATUS and EXAMPLES written here beside them, and the
//! mapping format, `qoslane-mapping(5)`. Rendered with the workspace's
//! `manpage` crate, as hookrun's are. Pure: [`pages`] returns the files' names
//! and contents, `qoslane generate man` writes them.

use clap::{Command, CommandFactory};
use manpage::{Layout, Page, item, section};

use crate::cli::Cli;
use crate::exit_code;
use crate::paths::defaults;

/// The mapping format's page: written by hand, but for its keys' sections
/// (every key, its value, default and meaning), which `qoslane generate
/// keys` renders from `mapping/keys.rs` (`mapping/keydocs.rs`).
pub const MAPPING_PAGE: &str = include_str!("../man/qoslane-mapping.5");

/// Where the package installs the documentation the pages point to.
pub const DOC_DIR: &str = "/usr/share/doc/qoslane";

/// The completion script for `shell`, from the command line's definition;
/// for `--qos` it offers the QoS names of the mapping in force, from `qoslane
/// complete qos` at completion time (bash, zsh and fish; the other shells
/// complete nothing there, as before), instead of file names.
pub fn completions(shell: clap_complete::Shell, mut cmd: Command) -> Vec<u8> {
    use clap_complete::Shell;
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut cmd, "qoslane", &mut text);
    let text = String::from_utf8_lossy(&text);
    let names = "qoslane complete qos 2>/dev/null";
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let patched = match shell {
            // `--qos)` then its COMPREPLY line.
            Shell::Bash if line.trim() == "--qos)" => {
                out += line;
                out.push('\n');
                let Some(next) = lines.next() else { break };
                let indent = &next[..next.len() - next.trim_start().len()];
                format!("{indent}COMPREPLY=($(compgen -W \"$({names})\" -- \"${{cur}}\"))")
            }
            Shell::Zsh if line.trim_start().starts_with("'--qos=") => line.replace(
                ":_default'",
                &format!(":{{compadd -- ${{(f)\"$({names})\"}}}}'"),
            ),
            Shell::Fish if line.contains(" -l qos ") => {
                format!("{line} -f -a \"({names})\"")
            }
            _ => line.to_owned(),
        };
        out += &patched;
        out.push('\n');
    }
    out.into_bytes()
}

/// Every page: (file name, roff).
///
/// # Errors
/// Only if rendering into memory fails, which clap_mangen reports as I/O.
pub fn pages() -> std::io::Result<Vec<Page>> {
    let layout = Layout {
        per_subcommand: true,
        epilogue: false,
    };
    let source = format!("qoslane {}", env!("CARGO_PKG_VERSION"));
    let mut out = manpage::program_pages(Cli::command(), &source, layout, &written)?;
    out.push((
        "qoslane-mapping.5".to_owned(),
        MAPPING_PAGE.as_bytes().to_vec(),
    ));
    Ok(out)
}

/// The sections written here, after clap's: on the program's own page
/// (`top`) FILES, ENVIRONMENT, EXIT STATUS, EXAMPLES and SEE ALSO; on a
/// subcommand's EXIT STATUS and SEE ALSO.
fn written(_: &Command, top: bool) -> String {
    let mut s = String::new();
    if top {
        s += &files();
        s += ENVIRONMENT;
    }
    s += &exit_status();
    if top {
        s += EXAMPLES;
    }
    s + &see_also(top)
}

fn files() -> String {
    let at = |p: &str| format!("/{p}");
    let mut s = section("FILES");
    s += &item(
        &at(defaults::CONFIG),
        "The mapping, see \\fBqoslane\\-mapping\\fR(5).",
    );
    s += &item(
        &at(defaults::LIB_DIR),
        "Persistent state: \\fBlast\\-known\\-good.yml\\fR (the mapping in force), \
         \\fBrejected.json\\fR (a valid mapping not put in force, and why), \
         \\fBcounters.json\\fR (the metric counters).",
    );
    s += &item(
        &at(defaults::RUN_DIR),
        "State that ends with the boot (tmpfs): \\fBjobs/\\fR (one record per job holding \
         a level), \\fBnotices/\\fR, \\fBnode.json\\fR (the settings' baseline), \
         \\fBjournal.json\\fR (an unfinished transaction), \\fBfabric.json\\fR (the cached \
         fabric probe), \\fBlock\\fR.",
    );
    s += &item(
        &at(defaults::AUDIT_LOG),
        "The audit log: one JSON line per run. Rotated by \\fB/etc/logrotate.d/qoslane\\fR \
         into \\fBaudit.jsonl.1\\fR and \\fBaudit.jsonl.\\fIN\\fB.gz\\fR.",
    );
    s += &item(
        &format!("/{}/qoslane.prom", defaults::TEXTFILE_DIR),
        "The metrics, for node_exporter's textfile collector.",
    );
    s += &item(
        "/etc/default/qoslane",
        "Site options (QOSLANE_* variables) of the hooks and of qoslane itself \
         outside the TaskProlog, below flags and the environment; read only when a regular \
         file owned by root and not writable by group or others, else refused (exit 74).",
    );
    s += &item(
        "/usr/lib/qoslane/hooks",
        "The hooks for \\fBhookrun\\fR(8), each a link to qoslane: prolog.d, epilog.d, task\\-prolog.d, health.d.",
    );
    s += &item(
        "/usr/lib/qoslane/hookrun",
        "A link to qoslane named hookrun, the program slurm.conf names as Prolog, Epilog, \
         TaskProlog and HealthCheckProgram: run so, qoslane is \\fBhookrun\\fR(8), and a hook \
         that is this binary (the links above) runs in a fork of it, without a second exec.",
    );
    s += &item(
        DOC_DIR,
        "The admin guide (admin\\-guide.md), fabric.md, hookrun.md, metrics.md, omnia.md; \
         the Prometheus alert rules and Grafana dashboard are in \\fB/usr/share/qoslane\\fR.",
    );
    s
}

const ENVIRONMENT: &str = "\
.SH ENVIRONMENT
A flag wins over its variable, and a variable over the same line of \
/etc/default/qoslane (under the root prefix), which wins over the default. \
The TaskProlog ignores every QOSLANE_* variable and that file: \
it runs with the job user's environment.
.TP
.B QOSLANE_ROOT
Resolve every system path under this directory (default: /).
.TP
.B QOSLANE_CONFIG
The mapping file.
.TP
.B QOSLANE_AUDIT_LOG
The audit log.
.TP
.B QOSLANE_TEXTFILE_DIR
node_exporter's textfile directory.
.TP
.B QOSLANE_SMPQUERY
Absolute path of smpquery (default: /usr/sbin/smpquery).
.TP
.B QOSLANE_IBNETDISCOVER
Absolute path of ibnetdiscover (default: /usr/sbin/ibnetdiscover).
.TP
.B QOSLANE_IBROUTE
Absolute path of ibroute, which the smpquery reader of fabric audit reads the switches' forwarding tables with (default: /usr/sbin/ibroute).
.TP
.B QOSLANE_FABRIC_READER
How fabric audit sends its SMP queries: auto (in process through libibumad.so.3 when it can start, else smpquery; the default), in-process, or smpquery.
.TP
.B QOSLANE_SQUEUE
Absolute path of squeue (default: /usr/bin/squeue); also cluster's (its \\-\\-squeue wins).
.TP
.B QOSLANE_COUNTERS
on (the default) or off: the Prolog, the Epilog and health read the node's ports' per-SL data and per-VL transmit wait counters (the Epilog's audit line: evidence; health: the live wait and a lone job's off-level bytes), in process where the port opens (PMA Gets through libibumad.so.3, no program). off: not read.
.TP
.B QOSLANE_PERFQUERY
Absolute path of perfquery: the fallback for a port that does not open in process (no umad device, no libibumad); fabric audit with the smpquery reader reads the switch ports' wait with it. Unset (the default): such a port is not read.
.TP
.B QOSLANE_SCONTROL
Absolute path of scontrol: placement on. health keeps this node's qoslane features active in slurmctld as its grants say (scontrol update NodeName=... ActiveFeatures=..., sent only when they change, every 30 minutes and at the first run after boot). Unset (the default): placement off. Set it only once slurm.conf lists the features (qoslane slurm-config). cluster asks it for every node's features (its \\-\\-scontrol wins; default /usr/bin/scontrol).
.TP
.B QOSLANE_FABRIC_VERDICT
The fabric audit's verdict (fabric audit --verdict FILE, on a filesystem the nodes share): health and sync take it into each level's grant (the fabric path scope: a level not carried on the way of this node's traffic is lost as on its own port). Missing, unreadable, hung, stale or of another mapping: a warning, never a loss. Unset (the default): not read.
.TP
.B QOSLANE_FABRIC_VERDICT_MAX_AGE
Seconds: a fabric verdict older than this is ignored, with a warning (default: 3600).
.TP
.B QOSLANE_SACCTMGR
Absolute path of sacctmgr, which slurm-config --check-qos asks for Slurm's QoS names (default: /usr/bin/sacctmgr).
.TP
.B QOSLANE_TIMEOUT_MS
The deadline of one run in milliseconds (default: 3000).
.TP
.B QOSLANE_NO_JOURNAL
When set, log to stderr only, not to journald or syslog.
.TP
.B HOOKRUN_PHASE
With no subcommand: prolog, epilog, task-prolog or health (as hookrun sets it for its hooks)
chooses the phase, over SLURM_SCRIPT_CONTEXT (hookrun health run from the Epilog runs the health
check); the packaged hooks are links to qoslane. Ignored in the TaskProlog (prolog_task), whose
environment is the job user's.
.TP
.B SLURM_SCRIPT_CONTEXT
With no subcommand and no HOOKRUN_PHASE: prolog_slurmd, epilog_slurmd or prolog_task chooses the phase.
.TP
.BR SLURM_JOB_ID \", \" SLURM_JOB_QOS \", \" SLURM_JOB_USER \", \" SLURMD_NODENAME
The job's facts, as slurmd passes them to the hooks.
";

fn exit_status() -> String {
    let rows = [
        (
            exit_code::OK,
            "Success; for a hook also a failure rolled back under \\fBon_failure: continue\\fR.",
        ),
        (
            exit_code::FAILED,
            "The run failed: a hook under \\fBfail_job\\fR that could not leave the node consistent, an Epilog under \\fBfail_job\\fR, an unhealthy node, a failed sync, a level the fabric does not carry; for \\fBstatus\\fR, something needs attention; for \\fBcluster\\fR, a placed level carried nowhere.",
        ),
        (
            exit_code::INVALID_MAPPING,
            "The mapping file is invalid (hookrun: its \\fBhookrun.conf\\fR; one table for both programs).",
        ),
        (
            exit_code::USAGE,
            "Bad command line or environment (hookrun: the same).",
        ),
        (
            exit_code::NO_INPUT,
            "An input file (the mapping; for \\fBlog\\fR, the audit log) is missing or unreadable.",
        ),
        (
            exit_code::UNAVAILABLE,
            "A program qoslane needs (smpquery, squeue, scontrol, ibnetdiscover) is missing or failed, or the fabric could not be read.",
        ),
        (exit_code::INTERNAL, "A bug: an invariant did not hold."),
        (
            exit_code::IO,
            "Reading or writing state, the audit log or a node setting failed.",
        ),
        (
            exit_code::TEMPFAIL,
            "Gave up waiting for the node lock or at the run's deadline; try again.",
        ),
        (
            exit_code::REFUSED,
            "The Prolog refused its job by policy (a \\fBfail_job\\fR level it could not grant) and left the node as it was: hookrun's \\(lqrefuse this job, the node is fine\\(rq status, which requeues and holds the job and keeps the node in service (see \\fBhookrun\\fR(8)).",
        ),
        (
            exit_code::BROKEN_PIPE,
            "The reader of the output went away (\\fBqoslane log | head \\-1\\fR): nothing more is written and nothing said; 128 + SIGPIPE, as a shell reports a program a broken pipe ended.",
        ),
    ];
    let mut s = section("EXIT STATUS");
    for (code, text) in rows {
        s += &item(&code.to_string(), text);
    }
    s
}

const EXAMPLES: &str = "\
.SH EXAMPLES
Check the installed mapping, then a new one:
.PP
.nf
.RS
qoslane validate
qoslane validate \\-\\-config /tmp/qos\\-network.yml
.RE
.fi
.PP
What a job of QoS high would get, without touching the node:
.PP
.nf
.RS
qoslane explain \\-\\-qos high
.RE
.fi
.PP
Put an edited mapping in force, after a dry run:
.PP
.nf
.RS
qoslane sync \\-\\-dry\\-run
qoslane sync
.RE
.fi
.PP
Which level job 120 got, and why (the audit log, rotated files included):
.PP
.nf
.RS
qoslane log \\-\\-job 120
.RE
.fi
.PP
The node's state, and the health check as Slurm runs it:
.PP
.nf
.RS
qoslane status
qoslane health \\-\\-json
.RE
.fi
.PP
Which nodes carry which fail_job level as Slurm knows it, and the pending jobs qoslane turned away (any host with Slurm's client commands; no root):
.PP
.nf
.RS
qoslane cluster
.RE
.fi
.PP
Judge every level on every port of the fabric, from a control node:
.PP
.nf
.RS
qoslane fabric audit \\-\\-format json
.RE
.fi
";

fn see_also(top: bool) -> String {
    let others = [
        ("qoslane-mapping", "5"),
        ("hookrun", "8"),
        ("slurm.conf", "5"),
    ];
    let pages: Vec<(&str, &str)> = (!top)
        .then_some(("qoslane", "8"))
        .into_iter()
        .chain(others)
        .collect();
    manpage::see_also(
        &pages,
        &format!("{DOC_DIR}/admin-guide.md (admin-guide.md.gz in the .deb)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: clap_mangen dropped the empty date from `.TH`, so the
    /// footer showed the manual's name where the source belongs.
    #[test]
    fn every_title_line_has_all_five_arguments() {
        for (name, text) in pages().unwrap() {
            let text = String::from_utf8(text).unwrap();
            let th = text.lines().find(|l| l.starts_with(".TH ")).unwrap();
            assert!(!th.contains("  "), "{name}: {th}");
            if name.ends_with(".8") {
                assert!(
                    th.ends_with(&format!(
                        "\"qoslane {}\" \"System Administration\"",
                        env!("CARGO_PKG_VERSION")
                    )),
                    "{name}: {th}"
                );
            }
        }
    }

    fn text(name: &str) -> String {
        let pages = pages().expect("render");
        let (_, roff) = pages.iter().find(|(n, _)| n == name).expect(name);
        String::from_utf8(roff.clone()).expect("utf-8")
    }

    #[test]
    fn the_program_page_is_section_8_with_every_section() {
        let page = text("qoslane.8");
        assert!(page.contains(".TH qoslane 8"), "{page}");
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "SUBCOMMANDS",
            "FILES",
            "ENVIRONMENT",
            "\"EXIT STATUS\"",
            "EXAMPLES",
            "\"SEE ALSO\"",
        ] {
            assert!(page.contains(&format!(".SH {section}")), "no {section}");
        }
    }

    #[test]
    fn subcommands_get_section_8_pages_and_generate_none() {
        let names: Vec<String> = pages()
            .expect("render")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        for n in [
            "qoslane-validate.8",
            "qoslane-sync.8",
            "qoslane-fabric-audit.8",
            "qoslane-mapping.5",
        ] {
            assert!(names.contains(&n.to_owned()), "{n} missing from {names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.contains("generate") || n.ends_with(".1")),
            "{names:?}"
        );
    }

    #[test]
    fn every_exit_code_and_environment_variable_is_documented() {
        let page = text("qoslane.8");
        for code in 0..=255 {
            let documented = page.contains(&format!(".TP\n.B {code}\n"));
            let real = exit_code::ExitClass::from_code(code).code() == code;
            assert_eq!(documented, real, "exit code {code}");
        }
        let cli = include_str!("cli.rs");
        for var in cli
            .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .filter(|w| w.starts_with("QOSLANE_"))
        {
            assert!(
                page.contains(&format!(".B {var}\n")),
                "{var} not in ENVIRONMENT"
            );
        }
    }

    #[test]
    fn the_mapping_page_names_every_key_and_choice_the_validator_knows() {
        use crate::mapping::types::{FabricCheck, OnFailure};
        let page = MAPPING_PAGE.replace("\\-", "-");
        for word in FabricCheck::NAMES.iter().chain(OnFailure::NAMES) {
            // In bold, as a request or inline (the keys' sections are
            // rendered from their declarations: mapping/keydocs.rs).
            assert!(
                page.contains(&format!(".B {word}\n"))
                    || page.contains(&format!("\\fB{word}\\fR:")),
                "{word} not explained in qoslane-mapping(5)"
            );
        }
        for key in crate::mapping::keys::KEYS.iter().map(|k| k.name) {
            assert!(
                page.contains(&format!(".BR {key} \"")),
                "key {key} has no entry with its type"
            );
        }
    }
}
