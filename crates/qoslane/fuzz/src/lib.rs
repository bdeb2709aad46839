//! The body of the `validate` fuzz target, kept apart from libFuzzer so the
//! stable test suite runs the very same checks (`tests/integration/validate.rs` includes
//! this file as a module).
//!
//! For any UTF-8 text, the parser and validator must not panic, and what they
//! return must hold together: a mapping exactly when there is no error,
//! diagnostics in source order whose spans lie on character boundaries inside
//! the text and whose line:column agree with those spans, and every
//! diagnostic renders (human and JSON) without panicking.

use qoslane::mapping::diagnostic::JsonDiagnostic;
use qoslane::mapping::yaml::Span;
use qoslane::mapping::{Severity, validate_str};

/// Runs the parser and validator on `src` and checks what comes back.
/// Panics on any broken invariant: that is the fuzzer's finding.
pub fn check(src: &str) {
    let v = validate_str(src);
    let errors = v
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    assert_eq!(
        v.mapping.is_some(),
        errors == 0,
        "a mapping must come out exactly when there is no error: {:?}",
        v.diagnostics
    );

    let mut previous = 0;
    for d in &v.diagnostics {
        assert!(!d.message.is_empty(), "empty message: {d:?}");
        check_span(src, d.span, &d.message);
        assert!(
            d.span.start >= previous,
            "diagnostics out of order: {:?}",
            v.diagnostics
        );
        previous = d.span.start;
        for (span, label) in &d.related {
            check_span(src, *span, label);
        }
        let rendered = d.render("fuzz.yml", src);
        assert!(rendered.starts_with(&d.headline("fuzz.yml")), "{rendered}");
        let json = JsonDiagnostic::from(d);
        assert_eq!((json.line, json.column), (d.span.line, d.span.col));
    }

    if let Some(m) = &v.mapping {
        let levels = m.levels();
        assert!(!levels.is_empty());
        assert!(levels.iter().any(|l| l.name == m.default_level().name));
        for (i, a) in levels.iter().enumerate() {
            assert!(!a.qos.is_empty(), "level `{}` has no QoS", a.name);
            for b in &levels[i + 1..] {
                assert_ne!(a.name, b.name, "level names are unique");
                assert_ne!(a.service_level, b.service_level, "SLs are distinct");
                for q in &a.qos {
                    assert!(
                        !b.qos.iter().any(|r| r.eq_ignore_ascii_case(q)),
                        "QoS `{q}` in two levels"
                    );
                }
            }
            assert!(a.virtual_lane.is_none_or(|vl| vl.get() <= 14));
        }
    }
}

fn check_span(src: &str, span: Span, what: &str) {
    assert!(
        span.start <= span.end && span.end <= src.len(),
        "span {span:?} outside the text ({} bytes) for {what:?}",
        src.len()
    );
    assert!(
        src.is_char_boundary(span.start) && src.is_char_boundary(span.end),
        "span {span:?} splits a character for {what:?}"
    );
    assert_eq!(
        (span.line, span.col),
        line_col(src, span.start),
        "line:col disagree with byte {} for {what:?}",
        span.start
    );
}

/// The 1-based line and character column of byte `at`: lines end at `\n`
/// (as an editor and the snippet show them); a leading byte order mark is
/// not a column.
fn line_col(src: &str, at: usize) -> (usize, usize) {
    let before = &src[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let mut col = before[line_start..].chars().count() + 1;
    if line_start == 0 && at > 0 && src.starts_with('\u{feff}') {
        col -= 1;
    }
    (before.matches('\n').count() + 1, col)
}
