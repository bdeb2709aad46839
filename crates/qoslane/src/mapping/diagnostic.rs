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
    pub fn render(&self, file: &str, source: &str) -> String {
        let mut out = self.headline(file);
        out.push('\n');
        let level = match self.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let mut snippet = Snippet::source(source).line_start(1).fold(true).annotation(
            AnnotationKind::Primary
                .span(self.span.start..self.span.end)
                .label(self.label.as_deref()),
        );
        for (span, label) in &self.related {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(span.start..span.end)
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

/// The JSON form for tools: `[{severity, line, column, message}]`.
/// Every diagnostic of `diagnostics` rendered, in order (what `validate`
/// and `sync` print to stderr for an invalid file).
pub fn render_all(diagnostics: &[Diagnostic], file: &str, source: &str) -> String {
    diagnostics.iter().map(|d| d.render(file, source)).collect()
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
