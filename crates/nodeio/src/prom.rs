//! The Prometheus text exposition format, classic (0.0.4): `# HELP` and
//! `# TYPE` once per family, label values escaped, no timestamps, histograms
//! as cumulative `_bucket{le=…}` series ending in `+Inf`, then `_sum` and
//! `_count`. Both `qoslane.prom` and `hookrun.prom` are written by this.

use std::fmt::{Display, Write as _};

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// Builds one exposition text.
#[derive(Debug, Default)]
pub struct Writer {
    out: String,
    /// The `le` labels of the last histogram's bounds: every histogram of a
    /// family has the same bounds, formatted once.
    les: (Vec<f64>, Vec<String>),
}

impl Writer {
    pub fn new() -> Self {
        Self {
            // A node's textfile is ~15 KB: grown a few times, not a dozen.
            out: String::with_capacity(16 << 10),
            les: (Vec::new(), Vec::new()),
        }
    }

    /// Starts a family: its help (one line) and type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut Self {
        for part in ["# HELP ", name, " "] {
            self.out.push_str(part);
        }
        if help.contains(['\\', '\n']) {
            self.out.push_str(&escape_help(help));
        } else {
            self.out.push_str(help);
        }
        for part in ["\n# TYPE ", name, " ", kind.as_str(), "\n"] {
            self.out.push_str(part);
        }
        self
    }

    /// One sample: `name{labels} value`.
    pub fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        value: impl Display,
    ) -> &mut Self {
        self.suffixed(name, "", labels, value)
    }

    /// A histogram's series from per-bucket counts (not cumulative; one more
    /// count than bounds, the last for observations above every bound).
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) -> &mut Self {
        if self.les.0.as_slice() != bounds {
            self.les = (
                bounds.to_vec(),
                bounds.iter().map(ToString::to_string).collect(),
            );
        }
        let les = std::mem::take(&mut self.les);
        let mut cumulative = 0u64;
        for (i, le) in les.1.iter().enumerate() {
            cumulative += counts.get(i).copied().unwrap_or(0);
            self.bucket(name, labels, le, cumulative);
        }
        self.les = les;
        cumulative += counts
            .get(bounds.len()..)
            .map_or(0, |rest| rest.iter().sum());
        self.bucket(name, labels, "+Inf", cumulative);
        self.suffixed(name, "_sum", labels, sum);
        self.suffixed(name, "_count", labels, cumulative)
    }

    fn bucket(&mut self, name: &str, labels: &[(&str, &str)], le: &str, count: u64) {
        self.out.push_str(name);
        self.out.push_str("_bucket");
        self.labels(labels, Some(le));
        self.out.push(' ');
        push_u64(&mut self.out, count);
        self.out.push('\n');
    }

    fn suffixed(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        value: impl Display,
    ) -> &mut Self {
        self.out.push_str(name);
        self.out.push_str(suffix);
        self.labels(labels, None);
        let _ = writeln!(self.out, " {value}");
        self
    }

    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let mut first = true;
        for (k, v) in labels.iter().copied().chain(le.map(|le| ("le", le))) {
            if !first {
                self.out.push(',');
            }
            first = false;
            self.out.push_str(k);
            self.out.push_str("=\"");
            escape_into(&mut self.out, v);
            self.out.push('"');
        }
        self.out.push('}');
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// Escapes a label value: backslash, double quote, newline.
pub fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    escape_into(&mut escaped, value);
    escaped
}

fn escape_into(out: &mut String, value: &str) {
    if !value.contains(['\\', '"', '\n']) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `n` in decimal, as `Display` writes it, without the formatting machinery
/// (a textfile has hundreds of counts).
fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[i..] {
        out.push(char::from(*d));
    }
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_samples_and_histograms() {
        let mut w = Writer::new();
        w.family("x_total", Kind::Counter, "Things.")
            .sample("x_total", &[("a", "q\"\\\n")], 3)
            .family("d_seconds", Kind::Histogram, "Durations.")
            .histogram("d_seconds", &[("e", "p")], &[0.5, 1.0], &[1, 0, 2], 7.25);
        assert_eq!(
            w.finish(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"q\\\"\\\\\\n\"} 3\n\
             # HELP d_seconds Durations.\n# TYPE d_seconds histogram\n\
             d_seconds_bucket{e=\"p\",le=\"0.5\"} 1\nd_seconds_bucket{e=\"p\",le=\"1\"} 1\n\
             d_seconds_bucket{e=\"p\",le=\"+Inf\"} 3\nd_seconds_sum{e=\"p\"} 7.25\nd_seconds_count{e=\"p\"} 3\n"
        );
    }

    #[test]
    fn counts_are_written_as_display_writes_them() {
        for n in [0, 7, 10, 99, 1_000_000, u64::MAX] {
            let mut s = String::new();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
        let mut w = Writer::new();
        w.family("h", Kind::Gauge, "a\\b\nc");
        assert_eq!(w.finish(), "# HELP h a\\\\b\\nc\n# TYPE h gauge\n");
    }
}
