//! The mapping keys' documentation, rendered from their declarations
//! ([`super::keys`]): the man page's sections (qoslane-mapping(5)), the
//! admin guide's tables (§2) and the fuzz dictionary's words. Each file
//! keeps its generated parts between two marker lines (`keys: PLACE` …
//! `/keys`, in the file's comment syntax) and everything else by hand;
//! [`regenerate`] rewrites the parts between the markers and nothing else.
//! `qoslane generate keys DIR` writes [`FILES`] under a checkout, and an
//! integration test fails while a committed file differs from what it
//! would write. Pure.
//!
//! The declarations' markup is a small part of Markdown: `` `x` `` (a
//! value, a name, a command as written) and `**x**` (stressed).

use super::keys::{Form, KEYS, Key, Place, at};

/// A file's comment syntax, which its markers are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// roff: `.\" keys: top`.
    Roff,
    /// Markdown: `<!-- keys: top -->`.
    Markdown,
    /// A libFuzzer dictionary: `# keys: words`.
    Dict,
}

/// The files with generated parts, relative to the repository's top.
pub const FILES: &[(&str, Style)] = &[
    ("crates/qoslane/man/qoslane-mapping.5", Style::Roff),
    ("docs/admin-guide.md", Style::Markdown),
    ("crates/qoslane/fuzz/validate.dict", Style::Dict),
];

/// The command that writes them, for messages.
pub const COMMAND: &str = "cargo run -p qoslane -- generate keys .";

impl Style {
    fn marker(self, what: &str) -> String {
        match self {
            Self::Roff => format!(".\\\" {what}"),
            Self::Markdown => format!("<!-- {what} -->"),
            Self::Dict => format!("# {what}"),
        }
    }

    /// What a part named `name` holds, or `None` for a name this style
    /// does not know.
    fn part(self, name: &str) -> Option<String> {
        let place = match name {
            "top" => Place::Top,
            "level" => Place::Level,
            "node setting" => Place::NodeSetting,
            "exports" => Place::Exports,
            "export entry" => Place::ExportEntry,
            "words" if self == Self::Dict => return Some(dict_words()),
            "libraries" if self == Self::Markdown => return Some(libraries_table()),
            _ => return None,
        };
        match self {
            Self::Roff => Some(man_entries(place)),
            Self::Markdown => Some(guide_table(place)),
            Self::Dict => None,
        }
    }
}

/// `text` with every generated part rewritten; an error names a marker
/// without its end, or a part this style does not know.
///
/// # Errors
/// A marker that opens and never closes, or names no part.
pub fn regenerate(text: &str, style: Style) -> Result<String, String> {
    let close = style.marker("/keys");
    let mut out = String::new();
    let mut lines = text.split_inclusive('\n');
    while let Some(line) = lines.next() {
        out.push_str(line);
        let Some(name) = part_name(line.trim_end(), style) else {
            continue;
        };
        let body = style
            .part(name)
            .ok_or_else(|| format!("no generated part is called `{name}`"))?;
        out.push_str(&body);
        let end = lines
            .by_ref()
            .find(|l| l.trim_end() == close)
            .ok_or_else(|| format!("the part `{name}` has no `{close}` line"))?;
        out.push_str(end);
    }
    Ok(out)
}

/// The part a marker line opens (`keys: top` → `top`).
fn part_name(line: &str, style: Style) -> Option<&str> {
    let (head, tail) = match style {
        Style::Roff => (".\\\" keys:", ""),
        Style::Markdown => ("<!-- keys:", "-->"),
        Style::Dict => ("# keys:", ""),
    };
    let name = line.strip_prefix(head)?.strip_suffix(tail)?.trim();
    (!name.is_empty()).then_some(name)
}

/// The parts a file of `style` must hold: every place's keys (the man page,
/// the guide) or the words (the dictionary).
pub fn parts(style: Style) -> &'static [&'static str] {
    match style {
        Style::Roff => &["top", "level", "node setting", "exports", "export entry"],
        Style::Markdown => &[
            "top",
            "level",
            "node setting",
            "exports",
            "export entry",
            "libraries",
        ],
        Style::Dict => &["words"],
    }
}

/// Whether `text` holds the part `name` between its markers.
pub fn holds_part(text: &str, style: Style, name: &str) -> bool {
    let open = style.marker(&format!("keys: {name}"));
    text.lines().any(|l| l.trim_end() == open)
}

// ------------------------------------------------------------ the markup

/// A piece of a declaration's text.
#[derive(Debug, PartialEq, Eq)]
enum Markup<'a> {
    Plain(&'a str),
    /// `` `x` ``: as written.
    Code(&'a str),
    /// `**x**`.
    Strong(&'a str),
}

fn spans(text: &str) -> Vec<Markup<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let code = rest.find('`');
        let strong = rest.find("**");
        let (at, open, close) = match (code, strong) {
            (Some(c), Some(s)) if s < c => (s, "**", "**"),
            (Some(c), _) => (c, "`", "`"),
            (None, Some(s)) => (s, "**", "**"),
            (None, None) => {
                out.push(Markup::Plain(rest));
                break;
            }
        };
        if at > 0 {
            out.push(Markup::Plain(&rest[..at]));
        }
        let inner = &rest[at + open.len()..];
        let end = inner.find(close).unwrap_or(inner.len());
        out.push(if open == "`" {
            Markup::Code(&inner[..end])
        } else {
            Markup::Strong(&inner[..end])
        });
        rest = inner.get(end + close.len()..).unwrap_or("");
    }
    out
}

/// The text without its markup (a roff macro's quoted argument).
fn plain(text: &str) -> String {
    spans(text)
        .into_iter()
        .map(|s| match s {
            Markup::Plain(t) | Markup::Code(t) | Markup::Strong(t) => t,
        })
        .collect()
}

/// roff's escapes for text: the backslash, and a hyphen as a minus sign
/// where it is written as typed (`as_typed`: a name, an option, a path).
fn roff_escape(text: &str, as_typed: bool) -> String {
    let text = text.replace('\\', "\\e");
    if as_typed {
        text.replace('-', "\\-")
    } else {
        text
    }
}

/// A declaration's text as roff lines: one sentence a line (a sentence ends
/// at `. ` before a capital), fonts inline, no line taken for a request.
fn roff_text(text: &str) -> String {
    let mut body = String::new();
    for span in spans(text) {
        match span {
            Markup::Plain(t) => body.push_str(&roff_escape(t, false)),
            Markup::Code(t) | Markup::Strong(t) => {
                body.push_str(&format!("\\fB{}\\fR", roff_escape(t, true)));
            }
        }
    }
    let mut lines = Vec::new();
    let mut from = 0;
    let bytes = body.as_bytes();
    for (i, _) in body.match_indices(". ") {
        let abbreviation = ["e.g", "i.e"].iter().any(|a| body[..i].ends_with(a));
        if !abbreviation
            && bytes
                .get(i + 2)
                .is_some_and(|b| b.is_ascii_uppercase() || *b == b'\\')
        {
            lines.push(&body[from..=i]);
            from = i + 2;
        }
    }
    lines.push(&body[from..]);
    let mut out = String::new();
    for line in lines {
        if line.starts_with(['.', '\'']) {
            out.push_str("\\&");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// What a key's value is, in the markup (a choice: its words).
fn value_of(key: &Key, code: fn(&str) -> String, or: &str) -> String {
    match key.form {
        Form::Choice(words) => words.iter().map(|w| code(w)).collect::<Vec<_>>().join(or),
        _ => key.value.to_owned(),
    }
}

// ------------------------------------------------------------ the parts

/// One `.TP` entry per key of `place`: `.BR name " (value; default: …)"`,
/// then what it is for.
pub fn man_entries(place: Place) -> String {
    let mut out = String::new();
    for key in at(place) {
        let value = plain(&value_of(key, str::to_owned, " | "));
        let head = match key.default {
            None => format!("{value}, required"),
            Some(d) => format!("{value}; default: {}", plain(d)),
        };
        out.push_str(&format!(
            ".TP\n.BR {} \" ({})\"\n{}",
            roff_escape(key.name, true),
            roff_escape(&head, false).replace('"', "\\(dq"),
            roff_text(key.about)
        ));
    }
    out
}

/// The guide's table of the keys of `place`.
pub fn guide_table(place: Place) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out =
        String::from("| key | type | default | required | meaning |\n|---|---|---|---|---|\n");
    for key in at(place) {
        let value = value_of(key, |w| format!("`{w}`"), " | ");
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            key.name,
            cell(&value),
            cell(key.default.unwrap_or("—")),
            if key.required { "yes" } else { "no" },
            cell(key.about)
        ));
    }
    out
}

/// The guide's table of what the job's libraries read
/// ([`crate::libraries::TABLE`]): library, variable, what it carries, the
/// link layers it is exported on, where its meaning was read.
pub fn libraries_table() -> String {
    let mut out = String::from(
        "| library | variable | carries | exported on | read from |\n|---|---|---|---|---|\n",
    );
    for e in crate::libraries::TABLE {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} |\n",
            e.library,
            e.variable,
            match e.carries {
                crate::libraries::Carries::ServiceLevel => "the level's `service_level`",
                crate::libraries::Carries::TrafficClass => "the level's `traffic_class`",
                crate::libraries::Carries::PathRecord => {
                    "`1` when the level takes each path record's SL (`path_sl`)"
                }
            },
            e.layers,
            e.source
        ));
    }
    out
}

/// Every key's name and every choice's word, once each, quoted for
/// libFuzzer.
pub fn dict_words() -> String {
    let mut words: Vec<&str> = Vec::new();
    for key in KEYS {
        let choices = match key.form {
            Form::Choice(c) => c,
            _ => &[],
        };
        for w in std::iter::once(&key.name).chain(choices) {
            if !words.contains(w) {
                words.push(w);
            }
        }
    }
    words.iter().map(|w| format!("\"{w}\"\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_markup_reads_code_and_stress() {
        assert_eq!(
            spans("a `b-c` **d** e"),
            [
                Markup::Plain("a "),
                Markup::Code("b-c"),
                Markup::Plain(" "),
                Markup::Strong("d"),
                Markup::Plain(" e"),
            ]
        );
        assert_eq!(plain("`x` and **y**"), "x and y");
    }

    #[test]
    fn roff_text_breaks_at_sentences_and_escapes() {
        let r = roff_text("One `a-b` c. Two e.g. `x`. `y` z. .dot\\ here.");
        assert_eq!(
            r,
            "One \\fBa\\-b\\fR c.\nTwo e.g. \\fBx\\fR.\n\\fBy\\fR z. .dot\\e here.\n"
        );
        assert_eq!(roff_text(".x"), "\\&.x\n");
    }

    #[test]
    fn regenerate_rewrites_only_between_the_markers() {
        let text = "head\n<!-- keys: node setting -->\nstale\n<!-- /keys -->\ntail\n";
        let new = regenerate(text, Style::Markdown).expect("regenerates");
        assert!(new.starts_with("head\n<!-- keys: node setting -->\n| key |"));
        assert!(new.ends_with("|\n<!-- /keys -->\ntail\n"), "{new}");
        assert!(!new.contains("stale"));
        assert_eq!(regenerate(&new, Style::Markdown).as_ref(), Ok(&new));
        assert!(regenerate("<!-- keys: nowhere -->\n", Style::Markdown).is_err());
        assert!(regenerate("<!-- keys: top -->\nno end\n", Style::Markdown).is_err());
        assert!(regenerate("# keys: top\n# /keys\n", Style::Dict).is_err());
    }

    #[test]
    fn every_choice_word_and_key_is_in_the_dictionary_once() {
        let words = dict_words();
        for key in KEYS {
            assert_eq!(
                words.matches(&format!("\"{}\"\n", key.name)).count(),
                1,
                "{}",
                key.name
            );
        }
        assert!(words.contains("\"fail_job\"\n") && words.contains("\"enforce\"\n"));
    }
}
