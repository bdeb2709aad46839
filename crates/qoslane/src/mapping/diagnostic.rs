//! Diagnostics about a mapping file and how they are shown: `FILE:LINE:COL:
//! error: …` with a source snippet (human), or a JSON array (for the Omnia role).

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use serde::Serialize;

use super::yaml::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
        }
    }
}

/// One problem, at one place, possibly pointing at a second place
/// (the first definition of a duplicate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    /// Short text under the caret.
    pub label: Option<String>,
    pub related: Vec<(Span, String)>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            span,
            message: message.into(),
            label: None,
            related: Vec::new(),
            help: None,
        }
    }

    pub fn warning(span: Span, message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(span, message)
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    pub fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// `FILE:LINE:COL: error: message`: the one-line form, for logs and audit.
    pub fn headline(&self, file: &str) -> String {
        format!(
            "{file}:{}:{}: {}: {}",
            self.span.line,
            self.span.col,
            self.severity.as_str(),
            self.message
        )
    }

    /// The headline, then the offending line(s) with a caret under the value.
    ///
    /// Indexes `source` first (one pass over it); to render many diagnostics
    /// of one source, [`render_all`] indexes it once.
    pub fn render(&self, file: &str, source: &str) -> String {
        self.render_in(file, &Lines::new(source))
    }

    /// The snippet is made of this diagnostic's lines only (see [`Excerpt`]),
    /// never of the whole source: rendering against the whole file made
    /// `validate` quadratic in its size (issue 12).
    fn render_in(&self, file: &str, lines: &Lines<'_>) -> String {
        let mut out = self.headline(file);
        out.push('\n');
        let level = match self.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let spans: Vec<Span> = std::iter::once(self.span)
            .chain(self.related.iter().map(|(s, _)| *s))
            .collect();
        let excerpt = Excerpt::new(lines, &spans);
        let mut snippet = Snippet::source(excerpt.text.as_str())
            .line_start(excerpt.line_start)
            .fold(true)
            .annotation(
                AnnotationKind::Primary
                    .span(excerpt.range(self.span))
                    .label(self.label.as_deref()),
            );
        for (span, label) in &self.related {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(excerpt.range(*span))
                    .label(label.as_str()),
            );
        }
        let mut group = Group::with_level(level).element(snippet);
        if let Some(help) = &self.help {
            group = group.element(Level::HELP.message(help.as_str()));
        }
        out.push_str(&Renderer::plain().render(&[group]));
        out.push('\n');
        out
    }
}

/// How many diagnostics [`render_all`] renders with a snippet; the rest are
/// counted in one closing line. A file with thousands of problems (a
/// megabyte of `levels: [a, a, …]` has 300,000) would otherwise print
/// hundreds of megabytes; `validate --format json` still lists every one.
pub const MAX_RENDERED: usize = 100;

/// Every diagnostic of `diagnostics` rendered, in order (what `validate`
/// and `sync` print to stderr for an invalid file), up to [`MAX_RENDERED`];
/// then, if there were more, one line that counts the rest.
pub fn render_all(diagnostics: &[Diagnostic], file: &str, source: &str) -> String {
    let lines = Lines::new(source);
    let mut out: String = diagnostics
        .iter()
        .take(MAX_RENDERED)
        .map(|d| d.render_in(file, &lines))
        .collect();
    if let Some(rest) = diagnostics.get(MAX_RENDERED..).filter(|r| !r.is_empty()) {
        let errors = rest.iter().filter(|d| d.severity == Severity::Error).count();
        let warnings = rest.len() - errors;
        let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
        out.push_str(&format!(
            "{file}: {} not shown ({}, {}); `qoslane validate --format json {file}` lists every one\n",
            n(rest.len(), "more diagnostic"),
            n(errors, "error"),
            n(warnings, "warning"),
        ));
    }
    out
}

/// Where each line of a source starts, found once per source.
struct Lines<'a> {
    src: &'a str,
    /// Byte offset of each line's first byte; lines end after `\n`, as the
    /// snippet renderer counts them.
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(src: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { src, starts }
    }

    /// The renderer's lines: text after a final `\n` is a line only if it is
    /// not empty.
    fn count(&self) -> usize {
        match self.starts.last() {
            Some(&last) if last == self.src.len() && self.starts.len() > 1 => self.starts.len() - 1,
            _ => self.starts.len(),
        }
    }

    /// The 0-based line of byte `at`; a place past the last line (the end
    /// of a file ending with `\n`) is on the last line, as the renderer has it.
    fn of(&self, at: usize) -> usize {
        (self.starts.partition_point(|&s| s <= at) - 1).min(self.count() - 1)
    }

    /// Line `i`'s bytes, with its line ending.
    fn full(&self, i: usize) -> std::ops::Range<usize> {
        self.starts[i]..self.starts.get(i + 1).copied().unwrap_or(self.src.len())
    }
}

/// A line longer than this is shown as a window around its annotations.
const LONG_LINE: usize = 4096;
/// Bytes kept on each side of a long line's annotations: far more than the
/// renderer shows (it trims a line to 140 columns around the caret), so
/// what is shown is what the whole line would show.
const WINDOW: usize = 1024;

/// The source text a diagnostic's snippet is rendered from: the lines its
/// spans are on, numbered as in the file, and nothing else. The renderer
/// shows only annotated lines (`fold`) and `...` for a gap of two lines or
/// more, so a gap is kept as that many empty lines (a gap of one line is
/// shown, so it is kept as it is). A line longer than [`LONG_LINE`] is cut
/// to [`WINDOW`] bytes either side of its annotations, `...` marking a cut
/// (spaces where only whitespace was cut, so that the renderer still trims
/// it as indentation).
struct Excerpt {
    text: String,
    line_start: usize,
    /// Per kept line: its byte range in the source, the part of it kept
    /// (`from` onwards), and where that part starts in `text`.
    kept: Vec<Kept>,
}

struct Kept {
    line: std::ops::Range<usize>,
    from: usize,
    at: usize,
}

impl Excerpt {
    fn new(lines: &Lines<'_>, spans: &[Span]) -> Self {
        let src = lines.src;
        let clamp = |b: usize| b.min(src.len());
        // The lines each span covers, merged.
        let mut ranges: Vec<(usize, usize)> = spans
            .iter()
            .map(|s| {
                let start = clamp(s.start);
                (lines.of(start), lines.of(clamp(s.end).max(start)))
            })
            .collect();
        ranges.sort_unstable();
        let mut wanted: Vec<usize> = Vec::new();
        for (lo, hi) in ranges {
            let from = wanted.last().map_or(lo, |&l| lo.max(l + 1));
            wanted.extend(from..=hi);
        }
        let first = wanted.first().copied().unwrap_or(0);
        let mut text = String::new();
        let mut kept = Vec::with_capacity(wanted.len());
        let mut previous: Option<usize> = None;
        for &i in &wanted {
            if let Some(p) = previous {
                match i - p - 1 {
                    0 => {}
                    1 => text.push_str(&src[lines.full(p + 1)]),
                    gap => text.extend(std::iter::repeat_n('\n', gap)),
                }
            }
            previous = Some(i);
            let line = lines.full(i);
            let at = text.len();
            let content_end = line.start + src[line.clone()].trim_end_matches(['\n', '\r']).len();
            if content_end - line.start <= LONG_LINE {
                text.push_str(&src[line.clone()]);
                kept.push(Kept {
                    line: line.clone(),
                    from: line.start,
                    at,
                });
                continue;
            }
            // The annotated places on this line.
            let points = spans
                .iter()
                .flat_map(|s| [clamp(s.start), clamp(s.end)])
                .filter(|&b| lines.of(b) == i);
            let (lo, hi) = points.fold((usize::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
            let (lo, hi) = if lo > hi { (line.start, line.start) } else { (lo, hi) };
            let from = floor_boundary(src, lo.saturating_sub(WINDOW).max(line.start));
            let to = ceil_boundary(src, (hi + WINDOW).min(content_end));
            if from > line.start {
                let cut = &src[line.start..from];
                text.push_str(if cut.chars().all(char::is_whitespace) {
                    "                                "
                } else {
                    "..."
                });
            }
            let at = text.len();
            text.push_str(&src[from..to]);
            if to < content_end {
                text.push_str("...");
            }
            text.push_str(&src[content_end..line.end]);
            kept.push(Kept {
                line: line.clone(),
                from,
                at,
            });
        }
        Self {
            text,
            line_start: first + 1,
            kept,
        }
    }

    /// Where `span` is in [`Self::text`].
    fn range(&self, span: Span) -> std::ops::Range<usize> {
        let place = |b: usize| {
            let k = self
                .kept
                .iter()
                .rfind(|k| k.line.start <= b)
                .unwrap_or(&self.kept[0]);
            k.at + b.clamp(k.from, k.line.end) - k.from
        };
        let start = place(span.start);
        start..place(span.end).max(start)
    }
}

fn floor_boundary(s: &str, mut b: usize) -> usize {
    while !s.is_char_boundary(b) {
        b -= 1;
    }
    b
}

fn ceil_boundary(s: &str, mut b: usize) -> usize {
    while !s.is_char_boundary(b) {
        b += 1;
    }
    b
}

#[derive(Debug, Serialize)]
pub struct JsonDiagnostic<'a> {
    pub severity: Severity,
    pub line: usize,
    pub column: usize,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<&'a str>,
}

impl<'a> From<&'a Diagnostic> for JsonDiagnostic<'a> {
    fn from(d: &'a Diagnostic) -> Self {
        let mut message = d.message.clone();
        for (span, label) in &d.related {
            message.push_str(&format!(
                " ({label} at line {}, column {})",
                span.line, span.col
            ));
        }
        Self {
            severity: d.severity,
            line: d.span.line,
            column: d.span.col,
            message,
            help: d.help.as_deref(),
        }
    }
}
