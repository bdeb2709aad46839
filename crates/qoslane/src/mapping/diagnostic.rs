//! Diagnostics about a mapping file and how they are shown: `FILE:LINE:COL:
//! error: …` with a source snippet (human), or a JSON array (for the Omnia
//! role). Which source lines a snippet shows: `diagnostic/excerpt.rs`.

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use serde::Serialize;

use super::yaml::Span;

mod excerpt;
#[cfg(test)]
use excerpt::LONG_LINE;
use excerpt::{Excerpt, Lines};

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

    /// `FILE:LINE:COL: message`, for an error carrying this diagnostic (its
    /// severity is the error's: never `error: FILE:…: error: …`).
    pub fn located(&self, file: &str) -> String {
        let (line, col) = (self.span.line, self.span.col);
        format!("{file}:{line}:{col}: {}", self.message)
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
        out.push_str(&excerpt.renumber(Renderer::plain().render(&[group])));
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
        let errors = rest
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count();
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

/// The JSON form for tools: `[{severity, line, column, message}]`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::validate_str;

    /// The rendering before issue 12: the snippet is the whole source.
    fn render_whole(d: &Diagnostic, file: &str, source: &str) -> String {
        let mut out = d.headline(file);
        out.push('\n');
        let level = match d.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let mut snippet = Snippet::source(source).line_start(1).fold(true).annotation(
            AnnotationKind::Primary
                .span(d.span.start..d.span.end)
                .label(d.label.as_deref()),
        );
        for (span, label) in &d.related {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(span.start..span.end)
                    .label(label.as_str()),
            );
        }
        let mut group = Group::with_level(level).element(snippet);
        if let Some(help) = &d.help {
            group = group.element(Level::HELP.message(help.as_str()));
        }
        out.push_str(&Renderer::plain().render(&[group]));
        out.push('\n');
        out
    }

    /// Every `step`-th diagnostic of `src` renders from its excerpt exactly
    /// as it did from the whole source; except one that shows a long line
    /// and another line: the renderer aligns the lines it shows, and a long
    /// line cut to its window no longer aligns with the whole of another.
    /// Such a snippet is never longer than the whole source's (which can
    /// run to the full width of the long line).
    fn same_as_whole(src: &str, step: usize) -> usize {
        let v = validate_str(src);
        assert!(!v.diagnostics.is_empty(), "{src:.200}");
        let lines = Lines::new(src);
        for d in v.diagnostics.iter().step_by(step) {
            let (excerpt, whole) = (d.render_in("f.yml", &lines), render_whole(d, "f.yml", src));
            let shown: Vec<usize> = std::iter::once(d.span)
                .chain(d.related.iter().map(|(s, _)| *s))
                .flat_map(|s| [lines.of(s.start), lines.of(s.end)])
                .collect();
            let one_line = shown.iter().all(|&l| l == shown[0]);
            let long = shown.iter().any(|&l| lines.full(l).len() > LONG_LINE);
            if one_line || !long {
                assert_eq!(excerpt, whole, "{d:?}");
            } else {
                assert!(excerpt.starts_with(&d.headline("f.yml")));
                assert!(excerpt.len() <= whole.len(), "{excerpt}");
            }
        }
        v.diagnostics.len()
    }

    #[test]
    fn excerpts_render_as_the_whole_source_did() {
        let level = |i: usize, sl: usize| {
            format!("  - name: l{i}\n    qos: [q{i}]\n    service_level: {sl}\n")
        };
        // Far-apart duplicates (`...` between), adjacent ones, a gap of one
        // line (shown), CRLF, a final line without `\n`, an error at EOF.
        let mut far = String::from("default_level: l0\nlevels:\n");
        for i in 0..40 {
            far.push_str(&level(i, i % 16));
        }
        same_as_whole(&far, 1);
        // The gutter widens from one digit to four between the two places.
        let mut wide = String::from("default_level: l0\nlevels:\n");
        for i in 0..400 {
            wide.push_str(&level(i, i % 16));
        }
        assert_eq!(same_as_whole(&wide, 7), 384);
        let d = &validate_str(&wide).diagnostics[383];
        let excerpt = Excerpt::new(&Lines::new(&wide), &[d.related[0].0, d.span]);
        assert!(excerpt.numbers.is_some(), "the gap was shortened");
        assert!(excerpt.text.len() < 200, "{:?}", excerpt.text);
        same_as_whole(&far.replace('\n', "\r\n"), 1);
        same_as_whole("levels:\n  - name: a\n  - name: a\n  - x\n", 1);
        same_as_whole("a: 1\nb: 2\na: 3\nc: [", 1);
        same_as_whole("default_level: x\nlevels: [{name: a}, {name: a}]", 1);
        same_as_whole(
            "default_level: x\nlevels:\n  - name: \"a\n    b\"\n    qos: 3\n",
            1,
        );
        same_as_whole("", 1);
        same_as_whole("\u{feff}levels: 3\n", 1);
        same_as_whole("default_level: normal\nf", 1);
    }

    #[test]
    fn long_lines_render_as_the_whole_line_did() {
        // A one-line list past the window: the caret at the start, the
        // middle and the end of the line.
        let list = format!(
            "default_level: a\nlevels: [{}]\n",
            vec!["a"; 4000].join(", ")
        );
        assert_eq!(same_as_whole(&list, 97), 4000);
        // Wide characters, and a long run of indentation before the value.
        let wide = format!(
            "default_level: a\nlevels: [{}]\n",
            vec!["é字"; 3000].join(", ")
        );
        same_as_whole(&wide, 101);
        let indented = format!("default_level: a\nlevels: [{}x]\n", " ".repeat(9000));
        same_as_whole(&indented, 1);
        let mid = format!(
            "default_level: a\nlevels: [{}x, {}y]\n",
            " ".repeat(3000),
            "z, ".repeat(3000)
        );
        same_as_whole(&mid, 1);
        // A line that is only indentation before the value: cut as such.
        let block = format!("default_level: a\nlevels:\n{}- x\n", " ".repeat(9000));
        assert_eq!(same_as_whole(&block, 1), 1);
        let flow = format!("default_level: a\nlevels: [\n{}x, y]\n", " ".repeat(9000));
        assert_eq!(same_as_whole(&flow, 1), 2);
        // A long line shown with another (the `[` still open).
        let tab = format!("default_level: a\nlevels: [\n{}x, y]\n", "\t ".repeat(3000));
        same_as_whole(&tab, 1);
    }

    #[test]
    fn render_all_counts_what_it_does_not_show() {
        let src = format!(
            "default_level: a\nlevels: [{}]\n",
            vec!["a"; 250].join(", ")
        );
        let v = validate_str(&src);
        assert_eq!(v.diagnostics.len(), 250);
        let out = render_all(&v.diagnostics, "f.yml", &src);
        assert_eq!(out.matches(": error: ").count(), MAX_RENDERED);
        assert!(
            out.ends_with(
                "f.yml: 150 more diagnostics not shown (150 errors, 0 warnings); \
                 `qoslane validate --format json f.yml` lists every one\n"
            ),
            "{}",
            &out[out.len() - 300..]
        );
        let few = render_all(&v.diagnostics[..3], "f.yml", &src);
        let each: String = v.diagnostics[..3]
            .iter()
            .map(|d| d.render("f.yml", &src))
            .collect();
        assert_eq!(few, each);
    }
}
