//! Time as qoslane writes and reads it: RFC 3339 in UTC for every line and
//! file it writes (the audit log, job records), and the forms an admin may
//! type (`qoslane log --since`). A leaf: it uses nothing of qoslane.

use std::time::{Duration, SystemTime};

/// Now, as the audit log and the state files write it (milliseconds, UTC).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Now, in milliseconds since the Unix epoch (the fabric cache's and the
/// grants' timestamps).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `t` to the second, UTC (`qoslane status`: when a file was written).
pub fn rfc3339_seconds(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// RFC 3339: `2026-12-01T10:00:00Z`, fractions allowed, `T` or a space,
/// a `Z` or an offset (`+02:00`, `-0500`); without a zone, UTC.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let s = s.trim();
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Some(t);
    }
    // An offset (humantime knows only `Z`): `±HH:MM` or `±HHMM` at the end,
    // after the time of day.
    if !s.is_ascii() {
        return None;
    }
    let (head, tail) = s.split_at(s.len().checked_sub(6)?);
    let (head, off) = if tail.starts_with(['+', '-']) && tail.as_bytes().get(3) == Some(&b':') {
        (head, tail)
    } else {
        let (h, t) = s.split_at(s.len().checked_sub(5)?);
        (h, t)
    };
    if !head.contains(['T', 't', ' ']) {
        return None;
    }
    let sign = off.chars().next()?;
    let digits: String = off[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || !matches!(sign, '+' | '-')
    {
        return None;
    }
    let hours: u64 = digits[..2].parse().ok()?;
    let minutes: u64 = digits[2..].parse().ok()?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    let local = humantime::parse_rfc3339_weak(head.trim_end()).ok()?;
    let shift = Duration::from_secs(hours * 3600 + minutes * 60);
    // 10:00+02:00 is 08:00Z.
    if sign == '+' {
        local.checked_sub(shift)
    } else {
        local.checked_add(shift)
    }
}

/// `--since`/`--until`: RFC 3339 ([`parse_rfc3339`]), a date alone (its
/// midnight, UTC), or a duration ago (`90m`, `2h`, `3d`, `1w`).
pub fn parse_time(s: &str, now: SystemTime) -> Option<SystemTime> {
    parse_rfc3339(s)
        .or_else(|| humantime::parse_rfc3339_weak(&format!("{s} 00:00:00")).ok())
        .or_else(|| {
            humantime::parse_duration(s)
                .ok()
                .and_then(|d| now.checked_sub(d))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_with_any_offset_a_date_or_a_duration_ago() {
        let now = humantime::parse_rfc3339("2026-12-01T10:30:00Z").unwrap();
        let z = parse_time("2026-12-01T08:00:00Z", now).unwrap();
        for same in [
            "2026-12-01T10:00:00+02:00",
            "2026-12-01T10:00:00+0200",
            "2026-12-01 03:00:00-05:00",
            "2026-12-01T08:00:00.000Z",
            "2026-12-01 08:00:00",
            "2h30m",
        ] {
            assert_eq!(parse_time(same, now), Some(z), "{same}");
        }
        assert_eq!(
            parse_time("2026-12-01", now),
            parse_time("2026-12-01T00:00:00Z", now)
        );
        assert_eq!(
            parse_time("3d", now),
            parse_time("2026-11-28T10:30:00Z", now)
        );
        for bad in [
            "yesterday-ish",
            "2026-12-01T10:00:00+25:00",
            "10:00+02:00",
            "",
        ] {
            assert_eq!(parse_time(bad, now), None, "{bad}");
        }
    }
}
