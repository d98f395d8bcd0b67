//! Wall-clock times as the store keeps them (Unix milliseconds) and as the API shows them
//! (RFC 3339 in UTC with milliseconds).

use jiff::Timestamp;

pub fn now_millis() -> i64 {
    Timestamp::now().as_millisecond()
}

pub fn format_millis(millis: i64) -> String {
    let time = Timestamp::from_millisecond(millis).unwrap_or(Timestamp::UNIX_EPOCH);
    // RFC 3339 as jiff prints it, with exactly three fractional digits: `strftime`, which
    // interprets its format at every call, took about 7 % of a list's CPU.
    format!("{time:.3}")
}

/// Parses an RFC 3339 time with any offset, e.g. `2026-11-29T17:00:00Z` or `...+01:00`.
pub fn parse_rfc3339_millis(text: &str) -> Option<i64> {
    text.parse::<Timestamp>()
        .ok()
        .map(Timestamp::as_millisecond)
}

/// A claim's scheduled time as Argo writes it: seconds, or milliseconds when it has them.
pub fn format_scheduled(millis: i64) -> String {
    if millis % 1000 == 0 {
        Timestamp::from_millisecond(millis)
            .unwrap_or(Timestamp::UNIX_EPOCH)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    } else {
        format_millis(millis)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_in_utc() {
        assert_eq!(format_millis(1_764_436_363_120), "2025-11-29T17:12:43.120Z");
        assert_eq!(format_millis(1_764_435_600_000), "2025-11-29T17:00:00.000Z");
        assert_eq!(format_millis(7), "1970-01-01T00:00:00.007Z");
        assert_eq!(format_scheduled(1_764_435_600_000), "2025-11-29T17:00:00Z");
    }

    #[test]
    fn parses_offsets_to_the_same_instant() {
        assert_eq!(
            parse_rfc3339_millis("2026-11-29T18:00:00+01:00"),
            parse_rfc3339_millis("2026-11-29T17:00:00Z")
        );
        assert_eq!(parse_rfc3339_millis("yesterday"), None);
    }

    #[test]
    fn an_rfc_3339_time_parses_to_its_unix_milliseconds() {
        assert_eq!(
            parse_rfc3339_millis("2025-11-29T17:12:43.120Z"),
            Some(1_764_436_363_120)
        );
        assert_eq!(
            parse_rfc3339_millis("2025-11-29T18:00:00+01:00"),
            Some(1_764_435_600_000)
        );
    }

    #[test]
    fn now_is_the_system_clock_in_milliseconds() {
        let system = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_millis()
        };
        let before = i64::try_from(system()).expect("millis");
        let now = now_millis();
        let after = i64::try_from(system()).expect("millis");
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
    }
}
