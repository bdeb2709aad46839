//! How the parsers read a tool's output: numbered non-empty lines, the
//! error that quotes the line ([`ParseError`]), table cells and dotted
//! `Name:....value` fields.

/// Where and why an output did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based; 0 when the output ended early.
    pub line: usize,
    pub expected: String,
    pub found: Option<String>,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.found {
            Some(l) => write!(
                f,
                "line {}: expected {}, found `{l}`",
                self.line, self.expected
            ),
            None => write!(f, "output ended, expected {}", self.expected),
        }
    }
}

impl std::error::Error for ParseError {}

/// Numbered, non-empty lines.
#[derive(Debug)]
pub(super) struct NumberedLines<'a> {
    it: std::iter::Peekable<std::iter::Enumerate<std::str::Lines<'a>>>,
}

impl<'a> NumberedLines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Self {
            it: text.lines().enumerate().peekable(),
        }
    }

    pub(super) fn next(&mut self) -> Option<(usize, &'a str)> {
        self.it
            .by_ref()
            .find(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
    }

    pub(super) fn peek(&mut self) -> Option<(usize, &'a str)> {
        while let Some((_, l)) = self.it.peek() {
            if l.trim().is_empty() {
                self.it.next();
            } else {
                break;
            }
        }
        self.it.peek().map(|&(i, l)| (i + 1, l))
    }

    /// The next line, or an error naming what was expected.
    pub(super) fn expect(&mut self, expected: &str) -> Result<(usize, &'a str), ParseError> {
        self.next().ok_or_else(|| ParseError {
            line: 0,
            expected: expected.to_owned(),
            found: None,
        })
    }
}

/// An error at line `line`: `expected`, `found` there.
pub(super) fn bad(line: usize, expected: &str, found: &str) -> ParseError {
    ParseError {
        line,
        expected: expected.to_owned(),
        found: Some(found.to_owned()),
    }
}

/// The cells of `| a| b|…|`: each trimmed; the text must start and end with `|`.
pub(super) fn cells(s: &str) -> Option<Vec<&str>> {
    let inner = s.trim().strip_prefix('|')?.strip_suffix('|')?;
    let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
    cells.iter().all(|c| !c.is_empty()).then_some(cells)
}

/// `Name:....value` lines after a `# … info:` title: the value of each
/// wanted field, by name.
pub(super) fn dotted_fields<'a>(
    text: &'a str,
    title: &str,
    wanted: &[&str],
) -> Result<Vec<(String, usize, &'a str, &'a str)>, ParseError> {
    let mut lines = NumberedLines::new(text);
    let expected_title = format!("`{title} …`");
    let (n, l) = lines.expect(&expected_title)?;
    if !l.starts_with(title) {
        return Err(bad(n, &expected_title, l));
    }
    let mut out: Vec<(String, usize, &'a str, &'a str)> = Vec::new();
    const LINE: &str = "`Name:....value` or a tab-indented flag";
    let mut seen_field = false;
    while let Some((n, l)) = lines.next() {
        if l.starts_with('\t') {
            // A flag continues a field's value (CapMask's names).
            if !seen_field {
                return Err(bad(n, LINE, l));
            }
            continue;
        }
        let (name, rest) = l.split_once(':').ok_or_else(|| bad(n, LINE, l))?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad(n, LINE, l));
        }
        seen_field = true;
        if wanted.contains(&name) {
            if out.iter().any(|(f, ..)| f == name) {
                return Err(bad(n, &format!("one `{name}` field"), l));
            }
            out.push((
                name.to_owned(),
                n,
                l,
                rest.trim_start_matches('.').trim_end(),
            ));
        }
    }
    Ok(out)
}

/// The value of field `name` of `fields`, parsed by `parse`; an error
/// naming the field and what was `expected` when absent or unparsable.
pub(super) fn field<'a, T>(
    fields: &[(String, usize, &'a str, &'a str)],
    name: &str,
    expected: &str,
    parse: impl FnOnce(&'a str) -> Option<T>,
) -> Result<T, ParseError> {
    let (_, n, l, v) = fields
        .iter()
        .find(|(f, ..)| f == name)
        .ok_or_else(|| ParseError {
            line: 0,
            expected: format!("a `{name}` field"),
            found: None,
        })?;
    parse(v).ok_or_else(|| bad(*n, &format!("{name} {expected}"), l))
}
