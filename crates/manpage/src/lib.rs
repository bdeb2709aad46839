//! The man pages of both binaries, made one way: a program's section-8 pages
//! from its clap definitions ([`program_pages`]: clap_mangen's sections in one
//! order, the sections each program writes by hand inserted before VERSION),
//! the pages' date, and the roff those hand-written sections are built from
//! ([`section`], [`item`], [`see_also`], [`escape`]). Pure: pages are returned
//! as (file name, roff); each program's `generate man` writes them.
//!
//! qoslane and hookrun depend on nothing of each other; this crate is theirs
//! alike, and depends on neither.

use std::io;

use clap::Command;

pub mod table;

/// Both programs live in /usr/sbin: section 8, the system administration manual.
const SECTION: &str = "8";
const MANUAL: &str = "System Administration";

/// One page: its file name (`qoslane-sync.8`) and its roff.
pub type Page = (String, Vec<u8>);

/// Which pages a program gets, and which of clap's sections they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// A page per visible subcommand too (`qoslane-sync.8`), each written
    /// before its parent's; else only the program's own page.
    pub per_subcommand: bool,
    /// clap's long-help epilogue (`after_long_help`) as a section of the page.
    /// hookrun's epilogue is its environment and exit codes; qoslane writes
    /// those as ENVIRONMENT and EXIT STATUS by hand instead.
    pub epilogue: bool,
}

/// The section-8 pages of the program `cmd`. `source` is the footer's
/// `NAME VERSION`. Each page holds clap's title, NAME, SYNOPSIS, DESCRIPTION,
/// OPTIONS and SUBCOMMANDS (each of the last two only when there is a visible
/// one), the epilogue (see [`Layout`]), then the roff `written` returns for
/// that command (`true` for the program's own page), then VERSION when the
/// command has one.
///
/// # Errors
/// Only if rendering into memory fails, which clap_mangen reports as I/O.
pub fn program_pages(
    cmd: Command,
    source: &str,
    layout: Layout,
    written: &dyn Fn(&Command, bool) -> String,
) -> io::Result<Vec<Page>> {
    let mut cmd = globals_once(cmd).disable_help_subcommand(true);
    cmd.build();
    let date = date();
    let mut out = Vec::new();
    let page = Render {
        source,
        date: &date,
        layout,
        written,
    };
    page.tree(&cmd, true, &mut out)?;
    Ok(out)
}

/// What every page of one program shares.
struct Render<'a> {
    source: &'a str,
    date: &'a str,
    layout: Layout,
    written: &'a dyn Fn(&Command, bool) -> String,
}

impl Render<'_> {
    fn tree(&self, cmd: &Command, top: bool, out: &mut Vec<Page>) -> io::Result<()> {
        if self.layout.per_subcommand {
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                self.tree(sub, false, out)?;
            }
        }
        out.push(self.page(cmd, top)?);
        Ok(())
    }

    fn page(&self, cmd: &Command, top: bool) -> io::Result<Page> {
        let man = clap_mangen::Man::new(cmd.clone())
            .section(SECTION)
            .date(self.date)
            .source(self.source)
            .manual(MANUAL);
        let mut roff = Vec::new();
        man.render_title(&mut roff)?;
        man.render_name_section(&mut roff)?;
        roff.extend_from_slice(synopsis(cmd).as_bytes());
        man.render_description_section(&mut roff)?;
        if cmd.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut roff)?;
        }
        if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
            man.render_subcommands_section(&mut roff)?;
        }
        if self.layout.epilogue
            && (cmd.get_after_long_help().is_some() || cmd.get_after_help().is_some())
        {
            man.render_extra_section(&mut roff)?;
        }
        roff.extend_from_slice((self.written)(cmd, top).as_bytes());
        if cmd.get_version().is_some() {
            man.render_version_section(&mut roff)?;
        }
        Ok((man.get_filename(), roff))
    }
}

/// The command line as both programs parse it, print its help and render
/// its pages: a global flag (`--root`, …) is said once, on the program's own
/// help and page, not again in every subcommand's (where it is still
/// accepted: a hidden copy in each, which clap's propagation of the global
/// then leaves alone, and whose value reaches the program's field as the
/// global's does). Each subcommand's help ends pointing to the program's.
#[must_use]
pub fn globals_once(cmd: Command) -> Command {
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().hide(true))
        .collect();
    if globals.is_empty() {
        return cmd;
    }
    let names: Vec<String> = globals
        .iter()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    let note = format!(
        "Global options ({}): see `{} --help`.",
        names.join(", "),
        cmd.get_name()
    );
    with_hidden_copies(cmd, &globals, &note)
}

fn with_hidden_copies(cmd: Command, globals: &[clap::Arg], note: &str) -> Command {
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    subs.into_iter().fold(cmd, |cmd, name| {
        cmd.mut_subcommand(name, |sub| {
            let said = sub
                .get_after_help()
                .map_or_else(|| note.to_owned(), |h| format!("{h}\n{note}"));
            let sub = sub.after_help(said);
            with_hidden_copies(sub.args(globals.iter().cloned()), globals, note)
        })
    })
}

/// SYNOPSIS: the command's path in bold, then each visible argument with its
/// value's placeholder in italics (`[\-\-job \fIID\fR]`, `\-\-format
/// \fIhuman|json\fR`), optional ones in brackets, a repeatable one followed
/// by `...`; then `COMMAND` when it has visible subcommands.
fn synopsis(cmd: &Command) -> String {
    let mut line = format!(
        "\\fB{}\\fR",
        escape(cmd.get_bin_name().unwrap_or(cmd.get_name()))
    );
    let visible = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"));
    for a in visible {
        let value = placeholder(a);
        let mut piece = match (a.get_long(), a.get_short()) {
            (Some(long), _) => format!("\\fB\\-\\-{}\\fR", escape(long)),
            (None, Some(short)) => format!("\\fB\\-{short}\\fR"),
            (None, None) => String::new(),
        };
        if let Some(value) = value {
            if !piece.is_empty() {
                piece.push(' ');
            }
            piece += &format!("\\fI{}\\fR", escape(&value));
        }
        if matches!(a.get_action(), clap::ArgAction::Append) {
            piece += "...";
        }
        if !a.is_required_set() {
            piece = format!("[{piece}]");
        }
        line.push(' ');
        line += &piece;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        line += if cmd.is_subcommand_required_set() {
            " \\fICOMMAND\\fR"
        } else {
            " [\\fICOMMAND\\fR]"
        };
    }
    format!("{}{line}\n", section("SYNOPSIS"))
}

/// What a value is written as: its few possible values (`human|json`), else
/// its value name (`FILE`), else its id in capitals; `None` for a flag.
fn placeholder(a: &clap::Arg) -> Option<String> {
    if !a.get_action().takes_values() {
        return None;
    }
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    if !possible.is_empty() && possible.len() <= 4 {
        return Some(possible.join("|"));
    }
    Some(a.get_value_names().map_or_else(
        || a.get_id().as_str().to_uppercase(),
        |names| {
            names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        },
    ))
}

/// The pages' date: `SOURCE_DATE_EPOCH` when the build sets it (packaging/
/// build.sh does: reproducible packages), else today. clap_mangen drops an
/// empty date from `.TH`, which shifts the source and manual into the wrong
/// places of the page's header and footer.
pub fn date() -> String {
    date_of(std::env::var("SOURCE_DATE_EPOCH").ok().as_deref())
}

/// `YYYY-MM-DD` of `epoch` (seconds, as `SOURCE_DATE_EPOCH` has them), today
/// when it is absent or not a number.
fn date_of(epoch: Option<&str>) -> String {
    let when = epoch
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or_else(std::time::SystemTime::now, |secs| {
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)
        });
    humantime::format_rfc3339(when).to_string()[..10].to_owned()
}

/// The title line of a page of file formats (section 5) written by hand:
/// `name` as the page is called, `source` the footer's `NAME VERSION`.
pub fn file_format_title(name: &str, source: &str) -> String {
    format!(".TH {name} 5 \"\" \"{source}\" \"File Formats\"\n")
}

/// Text as roff prints it literally: a backslash is `\e`, a hyphen `\-` (the
/// minus sign that options and paths are written with; a plain `-` may print
/// as a typographic hyphen, which cannot be copied into a shell).
pub fn escape(text: &str) -> String {
    text.replace('\\', "\\e").replace('-', "\\-")
}

/// A section heading: `.SH FILES`, `.SH "EXIT STATUS"`.
pub fn section(title: &str) -> String {
    if title.contains(' ') {
        format!(".SH \"{title}\"\n")
    } else {
        format!(".SH {title}\n")
    }
}

/// One entry of a tagged list: `term` in bold (escaped here), then `roff`, a
/// paragraph that is already roff.
pub fn item(term: &str, roff: &str) -> String {
    format!(".TP\n.B {}\n{roff}\n", escape(term))
}

/// SEE ALSO: the `pages` (name, section) in order, then the document `doc`.
pub fn see_also(pages: &[(&str, &str)], doc: &str) -> String {
    let mut text = section("SEE ALSO");
    for (name, number) in pages {
        text.push_str(&format!(".BR {} ({number}),\n", escape(name)));
    }
    text.push_str(&format!(".B {}\n", escape(doc)));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn program() -> Command {
        Command::new("prog")
            .version("1.2.3")
            .about("Does a thing")
            .after_long_help("Exit codes: 0 ok.")
            .arg(Arg::new("root").long("root").action(ArgAction::Set))
            .subcommand(
                Command::new("sync").about("Sync it").arg(
                    Arg::new("dry-run")
                        .long("dry-run")
                        .action(ArgAction::SetTrue),
                ),
            )
            .subcommand(Command::new("hidden").hide(true))
    }

    fn text(pages: &[Page], name: &str) -> String {
        let (_, roff) = pages.iter().find(|(n, _)| n == name).expect(name);
        String::from_utf8(roff.clone()).expect("utf-8")
    }

    #[test]
    fn written_sections_come_after_clap_and_before_version() {
        let layout = Layout {
            per_subcommand: false,
            epilogue: true,
        };
        let pages = program_pages(program(), "prog 1.2.3", layout, &|_, top| {
            assert!(top, "only the program's own page");
            format!("{}{}", section("FILES"), item("/etc/prog-x", "Its file."))
        })
        .expect("render");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["prog.8"]);
        let page = text(&pages, "prog.8");
        let th = page.lines().find(|l| l.starts_with(".TH ")).expect("title");
        assert!(
            th.starts_with(".TH prog 8 ")
                && th.ends_with(" \"prog 1.2.3\" \"System Administration\""),
            "{th}"
        );
        let at = |what: &str| {
            page.find(what)
                .unwrap_or_else(|| panic!("{what} in {page}"))
        };
        assert!(at(".SH OPTIONS") < at(".SH SUBCOMMANDS"));
        assert!(at(".SH SUBCOMMANDS") < at("Exit codes: 0 ok."));
        assert!(at("Exit codes: 0 ok.") < at(".SH FILES\n.TP\n.B /etc/prog\\-x\nIts file.\n"));
        assert!(at(".SH FILES") < at(".SH VERSION"));
        assert!(!page.contains("hidden"), "{page}");
    }

    #[test]
    fn per_subcommand_pages_come_before_their_parent_and_skip_the_epilogue() {
        let layout = Layout {
            per_subcommand: true,
            epilogue: false,
        };
        let pages = program_pages(program(), "prog 1.2.3", layout, &|cmd, top| {
            format!("{}{} {top}\n", section("EXIT STATUS"), cmd.get_name())
        })
        .expect("render");
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["prog-sync.8", "prog.8"]);
        let sync = text(&pages, "prog-sync.8");
        assert!(sync.contains(".SH \"EXIT STATUS\"\nsync false\n"), "{sync}");
        assert!(!sync.contains(".SH SUBCOMMANDS"), "{sync}");
        let top = text(&pages, "prog.8");
        assert!(top.contains("prog true\n"), "{top}");
        assert!(!top.contains("Exit codes"), "{top}");
    }

    #[test]
    fn the_date_is_the_build_s_when_it_sets_one_else_today() {
        assert_eq!(date_of(Some("1700000000\n")), "2023-11-14");
        assert_eq!(date_of(Some("0")), "1970-01-01");
        let today =
            || humantime::format_rfc3339(std::time::SystemTime::now()).to_string()[..10].to_owned();
        for unset in [None, Some("soon")] {
            let before = today();
            let date = date_of(unset);
            // The day may turn between two readings.
            assert!(date == before || date == today(), "{date}");
        }
    }

    /// Issue 25: the SYNOPSIS said `[--root]`, not what it takes.
    #[test]
    fn the_synopsis_names_each_value() {
        let cmd = program().subcommand(
            Command::new("log")
                .arg(Arg::new("job").long("job").value_name("ID").required(true))
                .arg(
                    Arg::new("format")
                        .long("format")
                        .value_parser(["human", "json"]),
                )
                .arg(Arg::new("event").long("event").action(ArgAction::Append)),
        );
        let layout = Layout {
            per_subcommand: true,
            epilogue: false,
        };
        let pages =
            program_pages(cmd, "prog 1.2.3", layout, &|_, _| String::new()).expect("rendered");
        let log = text(&pages, "prog-log.8");
        assert!(
            log.contains(
                ".SH SYNOPSIS\n\\fBprog log\\fR \\fB\\-\\-job\\fR \\fIID\\fR \
                 [\\fB\\-\\-format\\fR \\fIhuman|json\\fR] \
                 [\\fB\\-\\-event\\fR \\fIEVENT\\fR...]\n"
            ),
            "{log}"
        );
        let top = text(&pages, "prog.8");
        assert!(
            top.contains(
                ".SH SYNOPSIS\n\\fBprog\\fR [\\fB\\-\\-root\\fR \\fIROOT\\fR] [\\fICOMMAND\\fR]\n"
            ),
            "{top}"
        );
    }

    /// Issue 25: every subcommand's help repeated the global flags.
    #[test]
    fn a_global_flag_is_said_once_and_taken_everywhere() {
        let cmd = Command::new("prog")
            .arg(Arg::new("root").long("root").global(true))
            .subcommand(Command::new("sync").subcommand(Command::new("deep")));
        let mut cmd = globals_once(cmd);
        cmd.build();
        let sync = cmd.find_subcommand_mut("sync").expect("sync");
        let help = sync.render_help().to_string();
        assert!(!help.contains("--root <root>"), "{help}");
        assert!(
            help.contains("Global options (--root): see `prog --help`"),
            "{help}"
        );
        let top = cmd.render_help().to_string();
        assert!(top.contains("--root <root>"), "{top}");
        for line in [
            &["prog", "sync", "--root", "/r"][..],
            &["prog", "--root", "/r", "sync"],
            &["prog", "sync", "deep", "--root", "/r"],
        ] {
            let m = globals_once(
                Command::new("prog")
                    .arg(Arg::new("root").long("root").global(true))
                    .subcommand(Command::new("sync").subcommand(Command::new("deep"))),
            )
            .try_get_matches_from(line)
            .expect("parsed");
            assert_eq!(
                m.get_one::<String>("root").map(String::as_str),
                Some("/r"),
                "{line:?}"
            );
        }
    }

    #[test]
    fn roff_pieces() {
        assert_eq!(escape(r"a-b\c"), r"a\-b\ec");
        assert_eq!(section("FILES"), ".SH FILES\n");
        assert_eq!(section("SEE ALSO"), ".SH \"SEE ALSO\"\n");
        assert_eq!(
            item("task-prolog.d", "Its hooks."),
            ".TP\n.B task\\-prolog.d\nIts hooks.\n"
        );
        assert_eq!(
            see_also(
                &[("qoslane-mapping", "5"), ("slurm.conf", "5")],
                "/doc/admin-guide.md"
            ),
            ".SH \"SEE ALSO\"\n.BR qoslane\\-mapping (5),\n.BR slurm.conf (5),\n.B /doc/admin\\-guide.md\n"
        );
        assert_eq!(
            file_format_title("prog.conf", "prog 1.2.3"),
            ".TH prog.conf 5 \"\" \"prog 1.2.3\" \"File Formats\"\n"
        );
    }
}
