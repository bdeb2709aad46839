//! `qoslane fabric audit --format html`: the audit as one self-contained
//! page — inline CSS, script and SVG, nothing fetched (its Content Security
//! Policy forbids any request, and admits only its own script by hash).
//!
//! The page shows what the sweep decided, never judging again: the
//! topology by tier with every cable coloured (and patterned, and marked
//! with a letter) by the verdict of the level chosen, or by its VL's wait
//! ticks when given ([`model`]); the text output line for line as the
//! findings table; the mapping, its sha256, the time and the fabric's size.
//!
//! Every string from the fabric (node descriptions are whatever a host or a
//! switch says of itself) reaches the page either escaped as HTML text or
//! inside the JSON the script reads with `textContent`, and the script only
//! ever sets text and attributes, never markup.

pub mod model;

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::fabric::counters::pma::PortWait;
use crate::fabric::sweep::Sweep;

const CSS: &str = include_str!("assets/page.css");
const SCRIPT: &str = include_str!("assets/page.js");

/// What the page is made of.
#[derive(Debug)]
pub struct Page<'a> {
    pub sweep: &'a Sweep,
    /// The audit's text output (`fabric_audit::human`), shown line for line.
    pub summary: &'a str,
    /// Where the mapping came from, as the text names it.
    pub mapping: &'a str,
    pub mapping_sha256: &'a str,
    /// When the audit ran (RFC 3339).
    pub time: &'a str,
    /// The verdict word of the JSON output (`carried`, `not_carried`,
    /// `incomplete`).
    pub verdict: &'a str,
    /// Per egress port per VL wait ticks, when they were read.
    pub waits: &'a [PortWait],
}

/// Text as HTML text or an attribute value.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// JSON that cannot end the `<script>` element it sits in: `<`, `>` and `&`
/// as `\u` escapes (the same string to `JSON.parse`).
fn script_json(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "{}".to_owned())
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The page.
pub fn render(p: &Page<'_>) -> String {
    let model = model::build(p.sweep, p.waits);
    let hash = base64(&Sha256::digest(SCRIPT.as_bytes()));
    let r = p.sweep;
    let mut s = String::with_capacity(1 << 16);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'sha256-{hash}'; img-src data:; \
         form-action 'none'; base-uri 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>qoslane fabric audit: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        escape(&p.verdict.replace('_', " "))
    );
    let _ = write!(
        s,
        "<header>\n<h1>Fabric audit <span class=\"verdict v-{v}\">{vt}</span></h1>\n<dl>\n\
         <dt>mapping</dt><dd>{m}</dd>\n<dt>sha256</dt><dd><code>{sha}</code></dd>\n\
         <dt>time</dt><dd><time id=\"audit-time\" datetime=\"{t}\">{t}</time> (UTC)\
         <br><span id=\"local-time\"></span></dd>\n<dt>fabric</dt><dd id=\"size\">{sw} switches, {hc} HCAs, \
         {pr} egress ports read, {un} not read</dd>\n</dl>\n</header>\n",
        v = escape(p.verdict),
        vt = escape(&p.verdict.replace('_', " ")),
        m = escape(p.mapping),
        sha = escape(p.mapping_sha256),
        t = escape(p.time),
        sw = r.switches,
        hc = r.hcas,
        pr = r.ports_read,
        un = r.unread.len(),
    );
    s.push_str(SHELL);
    legend(&mut s);
    summary(&mut s, p.summary);
    let _ = write!(
        s,
        "<script type=\"application/json\" id=\"data\">{}</script>\n<script>{SCRIPT}</script>\n\
         </body>\n</html>\n",
        script_json(&model)
    );
    s
}

/// The parts the script fills: level tabs, controls, the drawing, details.
const SHELL: &str = "<nav aria-label=\"levels\"><div id=\"levels\" role=\"tablist\"></div></nav>\n\
<div id=\"controls\">\n\
<label>Find a node or switch <input id=\"find\" type=\"search\" autocomplete=\"off\"></label>\n\
<span id=\"found\" role=\"status\"></span>\n\
<button type=\"button\" id=\"zoom-in\" aria-label=\"zoom in\">+</button>\n\
<button type=\"button\" id=\"zoom-out\" aria-label=\"zoom out\">&minus;</button>\n\
<button type=\"button\" id=\"zoom-fit\">fit</button>\n\
<label><input type=\"checkbox\" id=\"only-failing\"> only what fails</label>\n\
<span id=\"hidden-count\" role=\"status\"></span>\n\
<label id=\"by-label\" hidden>Colour by <select id=\"by\"><option value=\"verdict\">verdict</option>\
<option value=\"wait\">wait ticks</option></select></label>\n\
</div>\n\
<main>\n<div id=\"drawing\"><svg id=\"fabric\" xmlns=\"http://www.w3.org/2000/svg\" role=\"group\" \
aria-label=\"the fabric by tier: spines at the top, HCAs grouped per leaf at the bottom\" \
tabindex=\"0\"></svg></div>\n\
<aside id=\"details\" aria-live=\"polite\"><h2>Details</h2><p>Hover, click or press Enter on a \
switch, a group of HCAs or a link.</p></aside>\n</main>\n\
<noscript><p>The drawing needs JavaScript; the findings below are the audit's text.</p></noscript>\n";

/// What each state looks like: a line sample (colour, dash pattern) and
/// the letter drawn on such a link.
fn legend(s: &mut String) {
    s.push_str("<section id=\"legend\"><h2>Legend</h2><ul>\n");
    for state in model::STATES {
        let _ = writeln!(
            s,
            "<li><svg width=\"48\" height=\"12\" aria-hidden=\"true\"><line class=\"link s-{state}\" \
             x1=\"2\" y1=\"6\" x2=\"46\" y2=\"6\"/></svg> <b class=\"mark\">{m}</b> {w}</li>",
            m = mark(state),
            w = state.replace('_', " "),
        );
    }
    s.push_str(
        "<li class=\"wait-legend\" hidden>wait ticks: <span class=\"w w0\">0</span> \
         <span class=\"w w1\"></span> <span class=\"w w2\"></span> <span class=\"w w3\"></span> \
         <span class=\"w w4\"></span><br>A link's colour is the most wait ticks on the level's VL \
         at either of its ends (the counters since they were last cleared), on one scale for the \
         whole fabric and every level: the top band ends at the fabric's most, <span id=\"wait-most\">\
         </span> ticks. A wait tick is a unit of the port's own clock during which it had data queued \
         on that VL and could not send it (no credit from the far end, or the arbiter served another \
         VL); device-specific: compare ports of the same hardware.</li>\n",
    );
    s.push_str("</ul></section>\n");
}

/// The letter a link of `state` carries (none when carried).
pub fn mark(state: &str) -> &'static str {
    match state {
        "link_down" => "L",
        "dropped" => "D",
        "not_operational" => "N",
        "starved" => "S",
        "other_vl" => "V",
        model::UNREAD => "U",
        "arbitration_unknown" => "A",
        _ => "",
    }
}

/// The text output as a table, a row per line: `FAIL`/`warn` in a column
/// of its own, the rest of the line as written.
fn summary(s: &mut String, text: &str) {
    s.push_str(
        "<section id=\"summary\"><h2>Findings</h2>\n<table>\n\
         <thead><tr><th scope=\"col\">mark</th><th scope=\"col\">line</th></tr></thead>\n<tbody>\n",
    );
    for line in text.lines() {
        let (mark, rest) = ["FAIL", "warn"]
            .iter()
            .find_map(|m| {
                line.strip_prefix("  ")
                    .and_then(|l| l.strip_prefix(m))
                    .and_then(|l| l.strip_prefix(' '))
                    .map(|rest| (*m, rest))
            })
            .unwrap_or(("", line));
        let class = match mark {
            "FAIL" => " class=\"fail\"",
            "warn" => " class=\"warn\"",
            _ if line.starts_with("level ") => " class=\"level\"",
            _ => "",
        };
        let _ = writeln!(
            s,
            "<tr{class}><td>{mark}</td><td>{}</td></tr>",
            escape(rest)
        );
    }
    s.push_str("</tbody>\n</table>\n</section>\n");
}

/// Standard base64 with padding (the CSP hash).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(c.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(c.get(2).copied().unwrap_or(0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                o.push(char::from(
                    A[usize::try_from((n >> shift) & 63).unwrap_or(0)],
                ));
            } else {
                o.push('=');
            }
        }
    }
    o
}

#[cfg(test)]
mod tests;
