//! A drain reason's shape: one printable line within [`MAX_REASON`] bytes.
//! What does not fit is cut at a word boundary (a character boundary when a
//! single word is too long) and the cut is shown with `…`, so that what is
//! kept reads as written and the admin sees that there was more (the whole
//! text is in hookrun's log line).

/// Longest drain reason hookrun sets, in bytes, the `…` of a cut included:
/// what `sinfo -R` and `scontrol show node` show in full on one line.
pub const MAX_REASON: usize = 200;

/// The mark of a cut reason.
pub const CUT: char = '…';

/// `text` as a reason: control characters (a newline, a tab) become spaces,
/// runs of spaces one, the ends trimmed; past [`MAX_REASON`] bytes cut
/// after the last whole word that fits with [`CUT`], its trailing
/// punctuation dropped.
pub fn fit(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(4 * MAX_REASON));
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        if c == ' ' && (line.is_empty() || line.ends_with(' ')) {
            continue;
        }
        line.push(c);
    }
    let line = line.trim_end();
    if line.len() <= MAX_REASON {
        return line.to_owned();
    }
    let room = MAX_REASON - CUT.len_utf8();
    let mut end = room;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    // The last space at or before the cut, unless that leaves almost
    // nothing (one word longer than the field: cut inside it).
    let head = &line[..end];
    let kept = if line[end..].starts_with(' ') {
        head
    } else {
        match head.rfind(' ') {
            Some(space) if space >= room / 2 => &head[..space],
            _ => head,
        }
    };
    let kept = kept.trim_end_matches([' ', ',', ';', ':']);
    format!("{kept}{CUT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_that_fits_is_kept_as_one_line() {
        assert_eq!(fit("port\tmlx5_0/1\nDOWN  now "), "port mlx5_0/1 DOWN now");
    }

    #[test]
    fn a_long_reason_is_cut_after_a_whole_word_with_an_ellipsis() {
        let text = format!("{} mapping", "word ".repeat(40));
        assert!(text.len() > MAX_REASON);
        let reason = fit(&text);
        assert!(reason.len() <= MAX_REASON, "{}", reason.len());
        assert!(reason.ends_with("word…"), "{reason}");
        assert!(
            !reason.contains("wor…") && !reason.ends_with(" …"),
            "{reason}"
        );
    }

    #[test]
    fn one_word_longer_than_the_field_is_cut_at_a_character_boundary() {
        let text = "é".repeat(300);
        let reason = fit(&text);
        assert!(reason.len() <= MAX_REASON, "{}", reason.len());
        assert!(reason.ends_with(CUT), "{reason}");
        assert!(reason.trim_end_matches(CUT).chars().all(|c| c == 'é'));
    }

    #[test]
    fn a_cut_drops_the_punctuation_it_lands_on() {
        let text = format!("{}; then more", "a".repeat(196));
        assert_eq!(fit(&text), format!("{}{CUT}", "a".repeat(196)));
    }
}
