//! A YAML document as a tree of nodes that remember where they were written.
//!
//! The parser (`saphyr-parser`, YAML 1.2) gives events with spans; this module
//! folds them into [`Node`]s, keeping every mapping entry in order — duplicates
//! included, so the validator can point at both. Anchors, aliases and tags are
//! refused: a mapping file has no use for them and aliases can blow up.

use std::time::Instant;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as YSpan};

/// A location in the source: 1-based line and column (in characters), and
/// the byte range for rendering snippets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub line: usize,
    pub col: usize,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `plain` is false for quoted and block scalars: `"3"` is a string.
    Scalar {
        value: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

impl Node {
    /// What the node is, for "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Scalar { value, plain: true } if is_null(value) => "null".into(),
            NodeKind::Scalar { value, plain: true } => format!("`{value}`"),
            NodeKind::Scalar {
                value,
                plain: false,
            } => format!("the string \"{value}\""),
            NodeKind::Seq(_) => "a list".into(),
            NodeKind::Map(_) => "a mapping".into(),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar { value, plain: true } if is_null(value))
    }
}

/// YAML 1.2 core-schema null.
pub fn is_null(plain: &str) -> bool {
    matches!(plain, "" | "~" | "null" | "Null" | "NULL")
}

/// A syntax error: where, and what; possibly a second place that explains
/// it (the `[` still open when the error was found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub span: Span,
    pub message: String,
    pub related: Vec<(Span, String)>,
    /// What to look at, when the parser's words alone do not say.
    pub help: Option<String>,
}

impl SyntaxError {
    fn new(span: Span, message: impl Into<String>) -> Self {
        Self {
            span,
            message: message.into(),
            related: Vec::new(),
            help: None,
        }
    }
}

/// Maps the parser's character indices to byte offsets, and byte offsets to
/// lines and columns.
///
/// Line and column are computed from the byte offset, not taken from the
/// parser's marker: at the end of the input the marker's line/column run one
/// line past the index (`key` + EOF is reported at line N+1, column 1), and
/// the headline must name the line the snippet shows.
struct Positions<'a> {
    src: &'a str,
    /// Byte offset of each char, only built for non-ASCII sources.
    char_bytes: Option<Vec<usize>>,
    /// Byte offset where each line starts; lines end at `\n`, as editors
    /// and the snippet renderer count them.
    line_starts: Vec<usize>,
}

impl<'a> Positions<'a> {
    fn new(src: &'a str) -> Self {
        let char_bytes = (!src.is_ascii()).then(|| {
            let mut v: Vec<usize> = src.char_indices().map(|(b, _)| b).collect();
            v.push(src.len());
            v
        });
        let line_starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self {
            src,
            char_bytes,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of the char at byte `at`. A
    /// leading byte order mark is invisible in an editor: not a column.
    ///
    /// Two binary searches, never a scan of the line: a one-line file of a
    /// megabyte has a span every few bytes, and counting the characters from
    /// the line's start for each made parsing it quadratic (issue 12).
    fn line_col(&self, at: usize) -> (usize, usize) {
        let line = self.line_starts.partition_point(|&s| s <= at);
        let start = self.line_starts[line - 1];
        let mut col = match &self.char_bytes {
            None => at - start,
            Some(v) => v.partition_point(|&b| b < at) - v.partition_point(|&b| b < start),
        } + 1;
        if line == 1 && at > 0 && self.src.starts_with('\u{feff}') {
            col -= 1;
        }
        (line, col)
    }

    fn byte(&self, char_index: usize) -> usize {
        match &self.char_bytes {
            None => char_index.min(self.src.len()),
            Some(v) => v.get(char_index).copied().unwrap_or(self.src.len()),
        }
    }

    fn span(&self, s: YSpan) -> Span {
        let start = self.byte(s.start.index());
        let end = self.byte(s.end.index()).max(start);
        let (line, col) = self.line_col(start);
        Span {
            line,
            col,
            start,
            end,
        }
    }

    fn point(&self, m: saphyr_parser::Marker) -> Span {
        self.point_at(self.byte(m.index()))
    }

    /// The character at byte `start`.
    fn point_at(&self, start: usize) -> Span {
        // Underline one character where there is one.
        let end = self.src[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8());
        let (line, col) = self.line_col(start);
        Span {
            line,
            col,
            start,
            end,
        }
    }
}

/// The deepest nesting of lists and mappings accepted. A mapping file needs
/// five (file, `levels`, a level, `node_settings`, a setting); the bound keeps
/// the tree shallow, so building and dropping it cannot exhaust the stack
/// (`- - - …` nests one level per two bytes).
const MAX_DEPTH: usize = 32;

enum Frame {
    Seq(Vec<Node>, Span),
    Map(Vec<(Node, Node)>, Option<Node>, Span),
}

impl Frame {
    fn span(&self) -> Span {
        match self {
            Self::Seq(_, s) | Self::Map(_, _, s) => *s,
        }
    }
}

/// A scanner error, placed and worded for the person who wrote the file.
fn scan_error(pos: &Positions<'_>, stack: &[Frame], e: &ScanError) -> SyntaxError {
    let src = pos.src;
    let mut span = pos.point(*e.marker());
    let mut message = format!("invalid YAML: {}", e.info());
    // A tab is refused where YAML (or this parser) wants a space. The
    // scanner reports it at the tab, just after it, or at the start of the
    // token it was reading, which may be lines above the tab (a plain scalar
    // continues onto the next line): point at the tab itself.
    let before = src[..span.start].chars().next_back();
    let tab = if src[span.start..].starts_with('\t') {
        Some(span.start)
    } else if before == Some('\t') {
        Some(span.start - 1)
    } else if e.info().contains("tab") {
        src[span.start..].find('\t').map(|i| span.start + i)
    } else {
        None
    };
    if let Some(at) = tab {
        span = pos.point_at(at);
        let line_start = src[..at].rfind('\n').map_or(0, |i| i + 1);
        message = if src[line_start..at].bytes().all(|b| b == b' ' || b == b'\t') {
            "tab character in indentation: YAML indentation must use spaces".into()
        } else {
            format!("tab character: write a space instead ({})", e.info())
        };
    }
    // An unclosed quote is reported at the opening quote, as a problem
    // with whatever the string ran into: say what is likely missing.
    let rest_of_line = src[span.start..].split('\n').next().unwrap_or("");
    if let Some(q) = rest_of_line
        .chars()
        .next()
        .filter(|c| matches!(c, '"' | '\''))
        && e.info().contains("quoted scalar")
        && !rest_of_line[1..].contains(q)
    {
        message = format!("invalid YAML: {} (is the closing `{q}` missing?)", e.info());
    }
    // An unclosed `[` or `{` shows up as an error somewhere after it (often
    // on the next line): name the bracket that is still open.
    let mut related = Vec::new();
    if let Some((open, what)) = stack.iter().rev().find_map(|f| {
        let s = f.span();
        match src[s.start..].chars().next() {
            Some('[') => Some((s, "this `[` is still open")),
            Some('{') => Some((s, "this `{` is still open")),
            _ => None,
        }
    }) {
        related.push((open, what.to_owned()));
    }
    // The parser's structural errors are nearly always indentation: it
    // says what token it expected, not why.
    let help = ["did not find expected", "mapping values are not allowed"]
        .iter()
        .any(|w| e.info().contains(w))
        .then(|| {
            "check this line's indentation against the lines above it: a level's keys \
             (`qos:`, `service_level:`, …) line up under its `name:`, items of a list start \
             with `- ` at one depth, and indentation is spaces only"
                .to_owned()
        });
    SyntaxError {
        span,
        message,
        related,
        help,
    }
}

/// When reading and checking a file gives up: a Prolog must not spend its
/// deadline on a huge mapping. The clock is read once per [`Self::EVERY`]
/// steps (a step is a parser event or an item checked), not per step.
#[derive(Debug, Default)]
pub struct Budget {
    until: Option<Instant>,
    steps: u32,
    late: bool,
}

impl Budget {
    const EVERY: u32 = 1024;

    /// No limit: every file is read to its end.
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Gives up once `until` has passed.
    pub fn until(until: Instant) -> Self {
        Self {
            until: Some(until),
            ..Self::default()
        }
    }

    /// One step of work; true once the budget is spent, and from then on.
    pub fn step(&mut self) -> bool {
        if let Some(until) = self.until
            && !self.late
        {
            self.steps = self.steps.wrapping_add(1);
            if self.steps % Self::EVERY == 1 {
                self.late = Instant::now() >= until;
            }
        }
        self.late
    }

    /// Whether the work stopped short: what it returned is not the answer.
    pub fn spent(&self) -> bool {
        self.late
    }
}

/// Parses `src` into one document's root node. `Ok(None)` for a file with no
/// document (empty, or only comments).
pub fn parse(src: &str) -> Result<Option<Node>, SyntaxError> {
    parse_within(src, &mut Budget::unlimited())
}

/// [`parse`], stopping early when `budget` is spent (then the result means
/// nothing: check [`Budget::spent`]).
pub fn parse_within(src: &str, budget: &mut Budget) -> Result<Option<Node>, SyntaxError> {
    let pos = Positions::new(src);
    let mut parser = Parser::new_from_str(src);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;

    while let Some(ev) = parser.next_event() {
        if budget.step() {
            return Ok(None);
        }
        let (event, yspan) = ev.map_err(|e| scan_error(&pos, &stack, &e))?;
        let mut span = pos.span(yspan);
        let refuse = move |what: &str| {
            SyntaxError::new(
                span,
                format!("{what} are not supported in a mapping file; write the value out"),
            )
        };
        let node = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(SyntaxError::new(
                        span,
                        "a mapping file holds one YAML document; found a second",
                    ));
                }
                continue;
            }
            Event::Alias(_) => return Err(refuse("anchors and aliases")),
            Event::Scalar(_, _, anchor, _) if anchor != 0 => {
                return Err(refuse("anchors and aliases"));
            }
            Event::Scalar(_, _, _, Some(_)) => return Err(refuse("YAML tags")),
            Event::Scalar(value, style, _, None) => {
                // A block scalar's span runs on to the next token: keep the
                // caret on the text.
                span.end = span.start + src[span.start..span.end].trim_end().len();
                Node {
                    kind: NodeKind::Scalar {
                        value: value.into_owned(),
                        plain: style == ScalarStyle::Plain,
                    },
                    span,
                }
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)
                if anchor != 0 || tag.is_some() =>
            {
                return Err(refuse(if anchor != 0 {
                    "anchors and aliases"
                } else {
                    "YAML tags"
                }));
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(SyntaxError::new(
                    span,
                    format!(
                        "lists and mappings nested more than {MAX_DEPTH} deep; a mapping file needs 5"
                    ),
                ));
            }
            Event::SequenceStart(..) => {
                stack.push(Frame::Seq(Vec::new(), span));
                continue;
            }
            Event::MappingStart(..) => {
                stack.push(Frame::Map(Vec::new(), None, span));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items, start)) => Node {
                    kind: NodeKind::Seq(items),
                    span: start,
                },
                _ => unreachable!("parser emits balanced sequence events"),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(entries, _, start)) => Node {
                    kind: NodeKind::Map(entries),
                    span: start,
                },
                _ => unreachable!("parser emits balanced mapping events"),
            },
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(entries, pending, _)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => entries.push((key, node)),
            },
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(n: &Node) -> &str {
        match &n.kind {
            NodeKind::Scalar { value, .. } => value,
            _ => panic!("not a scalar"),
        }
    }

    #[test]
    fn keeps_duplicate_keys_in_order_with_positions() {
        let root = parse("a: 1\nb: x\na: \"2\"\n").unwrap().unwrap();
        let NodeKind::Map(entries) = root.kind else {
            panic!()
        };
        let keys: Vec<_> = entries
            .iter()
            .map(|(k, _)| (scalar(k), k.span.line, k.span.col))
            .collect();
        assert_eq!(keys, [("a", 1, 1), ("b", 2, 1), ("a", 3, 1)]);
        assert_eq!(
            entries[2].1.kind,
            NodeKind::Scalar {
                value: "2".into(),
                plain: false
            }
        );
        assert_eq!(entries[2].1.span.col, 4);
    }

    #[test]
    fn byte_spans_survive_non_ascii() {
        let src = "# é\nname: ü\nx: 1\n";
        let root = parse(src).unwrap().unwrap();
        let NodeKind::Map(entries) = root.kind else {
            panic!()
        };
        let x = &entries[1].1;
        assert_eq!(&src[x.span.start..x.span.end], "1");
        assert_eq!((x.span.line, x.span.col), (3, 4));
    }

    #[test]
    fn refuses_aliases_and_second_documents() {
        assert!(
            parse("a: &x 1\nb: *x\n")
                .unwrap_err()
                .message
                .contains("anchors")
        );
        assert!(
            parse("a: 1\n---\nb: 2\n")
                .unwrap_err()
                .message
                .contains("second")
        );
    }

    #[test]
    fn empty_and_comment_only_files_have_no_document() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# nothing\n").unwrap(), None);
    }
}
