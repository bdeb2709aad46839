//! The part of a source a diagnostic's snippet is rendered from: where each
//! line starts ([`Lines`]) and the lines its spans are on, long lines cut to a
//! window ([`Excerpt`]), the renderer's line numbers put right afterwards.

use super::super::yaml::Span;

/// Where each line of a source starts, found once per source.
pub(super) struct Lines<'a> {
    src: &'a str,
    /// Byte offset of each line's first byte; lines end after `\n`, as the
    /// snippet renderer counts them.
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(src: &'a str) -> Self {
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
    pub(super) fn of(&self, at: usize) -> usize {
        (self.starts.partition_point(|&s| s <= at) - 1).min(self.count() - 1)
    }

    /// Line `i`'s bytes, with its line ending.
    pub(super) fn full(&self, i: usize) -> std::ops::Range<usize> {
        self.starts[i]..self.starts.get(i + 1).copied().unwrap_or(self.src.len())
    }
}

/// A line longer than this is shown as a window around its annotations.
pub(super) const LONG_LINE: usize = 4096;
/// Bytes kept on each side of a long line's annotations: far more than the
/// renderer shows (it trims a line to 140 columns around the caret), so
/// what is shown is what the whole line would show.
const WINDOW: usize = 1024;

/// The source text a diagnostic's snippet is rendered from: the lines its
/// spans are on and nothing else.
///
/// The renderer shows only annotated lines (`fold`), the one line between
/// two of them when there is exactly one, and `...` for a longer gap. So a
/// gap of one line is kept as it is, and a longer one becomes two empty
/// lines; the renderer then numbers the lines after such a gap too low, so
/// its output is renumbered ([`Self::renumber`]). The numbering is chosen to
/// end at the real number of the last line: the gutter has the width the
/// whole file would give it. A line longer than [`LONG_LINE`] is cut to
/// [`WINDOW`] bytes either side of its annotations, `...` marking a cut
/// (spaces where only indentation was cut, so that the renderer still trims
/// it as indentation).
///
/// What is rendered is what the whole source rendered before (the unit tests
/// compare both), except for a snippet of a long line and another line: the
/// renderer aligns the lines it shows, and the long line's window no longer
/// aligns with the other line.
pub(super) struct Excerpt {
    pub(super) text: String,
    /// The number the renderer gives the first line of `text`.
    pub(super) line_start: usize,
    /// Per kept line: its byte range in the source, the part of it kept
    /// (`from` onwards), and where that part starts in `text`.
    kept: Vec<Kept>,
    /// When a gap was shortened: (number in the excerpt, number in the
    /// file) of every line the renderer may show, in order.
    pub(super) numbers: Option<Vec<(usize, usize)>>,
}

struct Kept {
    line: std::ops::Range<usize>,
    from: usize,
    at: usize,
}

impl Excerpt {
    pub(super) fn new(lines: &Lines<'_>, spans: &[Span]) -> Self {
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
        let mut text = String::new();
        let mut kept = Vec::with_capacity(wanted.len());
        // (0-based line of `text`, 0-based line of the source).
        let mut numbers = Vec::with_capacity(wanted.len());
        let mut shortened = false;
        let mut at_line = 0;
        let mut previous: Option<usize> = None;
        for &i in &wanted {
            if let Some(p) = previous {
                match i - p - 1 {
                    0 => {}
                    1 => {
                        text.push_str(&src[lines.full(p + 1)]);
                        numbers.push((at_line, p + 1));
                        at_line += 1;
                    }
                    gap => {
                        shortened |= gap > 2;
                        text.push_str("\n\n");
                        at_line += 2;
                    }
                }
            }
            previous = Some(i);
            numbers.push((at_line, i));
            at_line += 1;
            kept.push(Self::keep(lines, i, spans, &mut text));
        }
        // The last line keeps its number in the file.
        let last = wanted.last().copied().unwrap_or(0);
        let line_start = last + 1 - numbers.last().map_or(0, |&(at, _)| at);
        Self {
            text,
            line_start,
            kept,
            numbers: shortened.then(|| {
                numbers
                    .into_iter()
                    .map(|(at, i)| (line_start + at, i + 1))
                    .collect()
            }),
        }
    }

    /// Appends line `i` of the source to `text`, whole or, when long, its
    /// window around the places `spans` mark on it.
    fn keep(lines: &Lines<'_>, i: usize, spans: &[Span], text: &mut String) -> Kept {
        let src = lines.src;
        let line = lines.full(i);
        let at = text.len();
        let content_end = line.start + src[line.clone()].trim_end_matches(['\n', '\r']).len();
        if content_end - line.start <= LONG_LINE {
            text.push_str(&src[line.clone()]);
            return Kept {
                from: line.start,
                line,
                at,
            };
        }
        let (lo, hi) = spans
            .iter()
            .flat_map(|s| [s.start.min(src.len()), s.end.min(src.len())])
            .filter(|&b| lines.of(b) == i)
            .fold((usize::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
        // A line inside a multi-line span has no mark of its own.
        let (lo, hi) = if lo > hi {
            (line.start, line.start)
        } else {
            (lo, hi)
        };
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
        Kept { line, from, at }
    }

    /// Where `span` is in [`Self::text`].
    pub(super) fn range(&self, span: Span) -> std::ops::Range<usize> {
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

    /// The renderer's output with each line's number in the gutter
    /// (`NN | code`, right-aligned) replaced by its number in the file.
    pub(super) fn renumber(&self, rendered: String) -> String {
        let Some(numbers) = &self.numbers else {
            return rendered;
        };
        let mut out = String::with_capacity(rendered.len());
        for line in rendered.split_inclusive('\n') {
            let gutter = line.find(" |").map(|g| &line[..g]);
            let real = gutter
                .and_then(|g| g.trim_start().parse::<usize>().ok())
                .and_then(|n| {
                    numbers
                        .binary_search_by_key(&n, |&(at, _)| at)
                        .ok()
                        .map(|k| numbers[k].1)
                });
            match (gutter, real) {
                (Some(g), Some(real)) if g.bytes().all(|b| b == b' ' || b.is_ascii_digit()) => {
                    out.push_str(&format!("{real:>width$}", width = g.len()));
                    out.push_str(&line[g.len()..]);
                }
                _ => out.push_str(line),
            }
        }
        out
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
