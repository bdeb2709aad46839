//! A child's output split into whole lines, in bounded memory: a line is
//! passed on whole or not at all. One longer than the caller's limit is
//! dropped whole (reported as [`Line::Dropped`] and counted), never cut into
//! pieces — the rest of a cut line would read as a line of its own, and on a
//! TaskProlog's stdout text a hook merely echoed could become an instruction.
//!
//! Pure: bytes in, lines out; the pipes are [`super`]'s.

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// `stdout` / `stderr`: a metric label and the word in log lines.
    pub fn label(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a child's output pipe produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// One whole line, without its newline; at most the limit's bytes.
    Whole(&'a [u8]),
    /// A line longer than the limit was dropped whole; `bytes` is its length
    /// without the newline. Nothing of it was passed on.
    Dropped { bytes: usize },
}

/// Over-long lines dropped, per stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub stdout: u64,
    pub stderr: u64,
}

impl Dropped {
    pub fn of(&self, stream: Stream) -> u64 {
        match stream {
            Stream::Stdout => self.stdout,
            Stream::Stderr => self.stderr,
        }
    }

    pub(super) fn add(&mut self, stream: Stream, lines: u64) {
        match stream {
            Stream::Stdout => self.stdout += lines,
            Stream::Stderr => self.stderr += lines,
        }
    }
}

/// Where whole lines go.
pub type LineSink<'s> = dyn FnMut(Stream, Line<'_>) + 's;

/// One stream, split into whole lines.
///
/// `pending` holds the start of a line not yet ended, at most `max` bytes
/// past the last chunk; once it is longer the line is over-long: what has
/// arrived is discarded (`overlong` counts it) and so is the rest, up to the
/// next newline, where one [`Line::Dropped`] reports it. Memory stays bounded
/// however long a line is.
#[derive(Debug)]
pub(super) struct Splitter {
    stream: Stream,
    max: usize,
    pending: Vec<u8>,
    /// Bytes of an over-long line discarded so far; `None`: not in one.
    overlong: Option<usize>,
    /// Over-long lines dropped.
    dropped: u64,
}

impl Splitter {
    pub(super) fn new(stream: Stream, max: usize) -> Splitter {
        Splitter {
            stream,
            max,
            pending: Vec::new(),
            overlong: None,
            dropped: 0,
        }
    }

    pub(super) fn stream(&self) -> Stream {
        self.stream
    }

    pub(super) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Takes the next bytes read: passes on every line they end; keeps the
    /// unended rest, or starts discarding it once it is over-long.
    pub(super) fn feed(&mut self, bytes: &[u8], sink: &mut LineSink<'_>) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(offset) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            self.end_line(start, end, sink);
            start = end + 1;
        }
        let rest = self.pending.len() - start;
        if let Some(discarded) = self.overlong.as_mut() {
            *discarded += rest;
            self.pending.clear();
        } else if rest > self.max {
            self.overlong = Some(rest);
            self.pending.clear();
        } else {
            self.pending.drain(..start);
        }
    }

    /// `pending[start..end]` ends a line: the whole of it, or the end of an
    /// over-long one.
    fn end_line(&mut self, start: usize, end: usize, sink: &mut LineSink<'_>) {
        let length = self.overlong.take().unwrap_or(0) + (end - start);
        if length > self.max {
            self.dropped += 1;
            sink(self.stream, Line::Dropped { bytes: length });
        } else {
            sink(self.stream, Line::Whole(&self.pending[start..end]));
        }
    }

    /// The stream ended: passes on a last line that had no newline (or
    /// reports it dropped).
    pub(super) fn finish(&mut self, sink: &mut LineSink<'_>) {
        if !self.pending.is_empty() || self.overlong.is_some() {
            let end = self.pending.len();
            self.end_line(0, end, sink);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// hookrun's limit, which these cases were written for.
    const MAX_LINE: usize = 16 * 1024;

    #[derive(Debug, PartialEq, Eq)]
    enum Got {
        Line(Vec<u8>),
        Dropped(usize),
    }

    fn split(chunks: &[&[u8]]) -> (Vec<Got>, u64) {
        let mut splitter = Splitter::new(Stream::Stdout, MAX_LINE);
        let mut got = Vec::new();
        let mut sink = |_: Stream, line: Line<'_>| {
            got.push(match line {
                Line::Whole(line) => Got::Line(line.to_vec()),
                Line::Dropped { bytes } => Got::Dropped(bytes),
            });
        };
        for chunk in chunks {
            splitter.feed(chunk, &mut sink);
            assert!(splitter.pending.len() <= MAX_LINE, "pending stays bounded");
        }
        splitter.finish(&mut sink);
        (got, splitter.dropped)
    }

    fn line(text: &[u8]) -> Got {
        Got::Line(text.to_vec())
    }

    #[test]
    fn lines_split_across_reads() {
        assert_eq!(
            split(&[b"exp", b"ort A=1\nunset", b" B\nprint x"]).0,
            vec![line(b"export A=1"), line(b"unset B"), line(b"print x")]
        );
    }

    #[test]
    fn empty_lines_are_kept_and_overlong_lines_are_dropped_whole() {
        let long = vec![b'x'; MAX_LINE + 3];
        let (got, dropped) = split(&[b"\n", &long, b"\nexport A=1\n"]);
        assert_eq!(
            got,
            vec![line(b""), Got::Dropped(MAX_LINE + 3), line(b"export A=1")]
        );
        assert_eq!(dropped, 1);
    }

    #[test]
    fn no_piece_of_an_overlong_line_is_passed_on_however_it_arrives() {
        let tail = b"export LD_PRELOAD=/tmp/x.so";
        let mut text = vec![b'x'; MAX_LINE];
        text.extend_from_slice(tail);
        text.extend_from_slice(b"\nprint ok\n");
        let length = MAX_LINE + tail.len();
        for size in [1, 7, 4096, 8192, MAX_LINE, MAX_LINE + 1, text.len()] {
            let chunks: Vec<&[u8]> = text.chunks(size).collect();
            let (got, dropped) = split(&chunks);
            assert_eq!(
                got,
                vec![Got::Dropped(length), line(b"print ok")],
                "chunks of {size}"
            );
            assert_eq!(dropped, 1);
        }
    }

    #[test]
    fn a_line_of_exactly_the_limit_passes_and_one_byte_more_does_not() {
        let exact = vec![b'x'; MAX_LINE];
        let mut over = exact.clone();
        over.push(b'y');
        assert_eq!(split(&[&exact, b"\n"]).0, vec![Got::Line(exact.clone())]);
        assert_eq!(split(&[&exact]).0, vec![Got::Line(exact.clone())]);
        assert_eq!(split(&[&over, b"\n"]).0, vec![Got::Dropped(MAX_LINE + 1)]);
        // An over-long last line without a newline is dropped at EOF.
        assert_eq!(split(&[&over]).0, vec![Got::Dropped(MAX_LINE + 1)]);
        assert_eq!(
            split(&[&over, &over]).0,
            vec![Got::Dropped(2 * MAX_LINE + 2)]
        );
    }
}
