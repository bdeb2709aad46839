//! Time as qoslane writes and reads it: RFC 3339 in UTC for every line and
//! file it writes (the audit log, job records); the forms an admin may type
//! (`qoslane log --since`), the one date parser, read in the local zone
//! (`TZ`, else /etc/localtime) unless they name one; and a written time as
//! an admin reads it, in the local zone ([`local`]). A leaf: it uses nothing
//! of qoslane.

use std::time::{Duration, SystemTime};

use jiff::tz::TimeZone;
use jiff::{Timestamp, civil};

/// The zone a time is shown and read in: the system's (`TZ` honoured), or
/// UTC (`qoslane log --utc`).
pub fn zone(utc: bool) -> TimeZone {
    if utc {
        TimeZone::UTC
    } else {
        TimeZone::system()
    }
}

/// A time as written (`2026-12-01T23:18:44.625Z`) in `tz`, to the
/// millisecond, with its offset (`2026-12-02T00:18:44.625+01:00`); an offset
/// of zero is `Z`, as RFC 3339 writes UTC. A text that is not such a time is
/// returned as it is.
pub fn local(written: &str, tz: &TimeZone) -> String {
    let Ok(t) = written.parse::<Timestamp>() else {
        return written.to_owned();
    };
    let z = t.to_zoned(tz.clone());
    let offset = if z.offset().seconds() == 0 {
        "Z".to_owned()
    } else {
        z.strftime("%:z").to_string()
    };
    format!("{}{offset}", z.strftime("%Y-%m-%dT%H:%M:%S%.3f"))
}

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

/// `--since`/`--until` in the system's zone ([`parse_time_in`]).
pub fn parse_time(s: &str, now: SystemTime) -> Option<SystemTime> {
    parse_time_in(s, now, &TimeZone::system())
}

/// `--since`/`--until`: RFC 3339 with a zone ([`parse_rfc3339`]); a date and
/// time or a date alone (its midnight) in `tz`; `today`, `yesterday`,
/// `tomorrow` (midnight in `tz`), `now`; or relative: a duration ago (`90m`,
/// `2h`, `3d`, `1w`, `-1h`, `2 hours ago`) or ahead (`+1h`).
pub fn parse_time_in(s: &str, now: SystemTime, tz: &TimeZone) -> Option<SystemTime> {
    let s = s.trim();
    let word = s.to_ascii_lowercase();
    let midnight = |days_back: i64| -> Option<SystemTime> {
        let today = Timestamp::try_from(now).ok()?.to_zoned(tz.clone()).date();
        let day = today.checked_sub(jiff::Span::new().days(days_back)).ok()?;
        Some(SystemTime::from(day.to_zoned(tz.clone()).ok()?.timestamp()))
    };
    match word.as_str() {
        "now" => return Some(now),
        "today" => return midnight(0),
        "yesterday" => return midnight(1),
        "tomorrow" => return midnight(-1),
        _ => {}
    }
    if names_a_zone(s) {
        return parse_rfc3339(s);
    }
    if let Ok(t) = s.parse::<civil::DateTime>() {
        return Some(SystemTime::from(t.to_zoned(tz.clone()).ok()?.timestamp()));
    }
    if let Ok(d) = s.parse::<civil::Date>() {
        return Some(SystemTime::from(d.to_zoned(tz.clone()).ok()?.timestamp()));
    }
    let (span, ahead) = if let Some(r) = word.strip_suffix(" ago") {
        (r, false)
    } else if let Some(r) = word.strip_prefix('-') {
        (r, false)
    } else if let Some(r) = word.strip_prefix('+') {
        (r, true)
    } else {
        (word.as_str(), false)
    };
    let d = humantime::parse_duration(span.trim()).ok()?;
    if ahead {
        now.checked_add(d)
    } else {
        now.checked_sub(d)
    }
}

/// Whether a time of day ends with its zone: `Z`, or an offset (`+02:00`,
/// `-0500`) after a `T` or a space.
fn names_a_zone(s: &str) -> bool {
    if !s.is_ascii() || !s.contains(['T', 't', ' ']) {
        return false;
    }
    if s.ends_with(['Z', 'z']) {
        return true;
    }
    let tail = |n: usize| s.len().checked_sub(n).map(|i| &s[i..]);
    let offset = |t: &str, colon: bool| {
        let b = t.as_bytes();
        matches!(b[0], b'+' | b'-')
            && if colon {
                b[3] == b':' && [1, 2, 4, 5].iter().all(|&i| b[i].is_ascii_digit())
            } else {
                b[1..].iter().all(u8::is_ascii_digit)
            }
    };
    tail(6).is_some_and(|t| offset(t, true)) || tail(5).is_some_and(|t| offset(t, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forms of the tests below, in UTC (no zone on the test machine).
    fn parse_time(s: &str, now: SystemTime) -> Option<SystemTime> {
        parse_time_in(s, now, &TimeZone::UTC)
    }

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

    /// Issue 25: `today`, `yesterday`, relative times and a zone-less time
    /// are read in the local zone; a written time is shown in it.
    #[test]
    fn days_and_relative_times_in_the_local_zone() {
        let now = humantime::parse_rfc3339("2026-12-01T10:30:00Z").unwrap();
        let paris = TimeZone::get("Europe/Paris").expect("tzdata");
        let at = |s: &str| humantime::parse_rfc3339(s).unwrap();
        let cases = [
            ("today", "2026-11-30T23:00:00Z"),
            ("yesterday", "2026-11-29T23:00:00Z"),
            ("Yesterday", "2026-11-29T23:00:00Z"),
            ("2026-12-01", "2026-11-30T23:00:00Z"),
            ("2026-12-01 09:00:00", "2026-12-01T08:00:00Z"),
            ("2026-12-01T09:00:00Z", "2026-12-01T09:00:00Z"),
            ("-1h", "2026-12-01T09:30:00Z"),
            ("1h", "2026-12-01T09:30:00Z"),
            ("2 hours ago", "2026-12-01T08:30:00Z"),
            ("+30m", "2026-12-01T11:00:00Z"),
            ("now", "2026-12-01T10:30:00Z"),
        ];
        for (typed, want) in cases {
            assert_eq!(parse_time_in(typed, now, &paris), Some(at(want)), "{typed}");
        }
        assert_eq!(
            local("2026-12-01T23:18:44.625Z", &paris),
            "2026-12-02T00:18:44.625+01:00"
        );
        assert_eq!(
            local("2026-12-01T23:18:44.625Z", &TimeZone::UTC),
            "2026-12-01T23:18:44.625Z"
        );
        assert_eq!(local("not a time", &paris), "not a time");
    }
}
