//! What a flag's value may be: durations as the flags write them, and the range of every
//! numeric flag.

use std::time::Duration;

pub(super) const ZERO: Duration = Duration::ZERO;
pub(super) const SECOND: Duration = Duration::from_secs(1);
pub(super) const MINUTE: Duration = Duration::from_secs(60);
pub(super) const HOUR: Duration = Duration::from_secs(3600);
pub(super) const DAY: Duration = Duration::from_secs(86_400);
pub(super) const KIB: u64 = 1 << 10;
pub(super) const MIB: u64 = 1 << 20;
pub(super) const TIB: u64 = 1 << 40;
/// The least `--max-answer-memory`: what it keeps open to every caller (seven eighths)
/// holds a whole page, 8 MiB of items (`store/page.rs`), with room for others' answers.
pub(super) const PAGE: u64 = 16 * MIB;

/// A duration from `min` to `max`. Every duration flag has its range: zero where zero
/// means nothing (a timeout, a retention pass without pause), and no more than any use
/// could want, so that a typo stops the server at start (exit 2, the flag named) rather
/// than runs it broken.
pub(super) fn duration_between(
    min: Duration,
    max: Duration,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| {
        let duration = parse_duration(text)?;
        if duration < min {
            return Err(format!("{text:?} is shorter than {}", shown(min)));
        }
        if duration > max {
            return Err(format!("{text:?} is longer than {}", shown(max)));
        }
        Ok(duration)
    }
}

/// A count, or a size in bytes, from `min` to `max`, as every such flag takes it.
pub(super) fn count_between(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// A duration as the flags write it, in its largest whole unit.
fn shown(duration: Duration) -> String {
    let millis = duration.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if millis > 0 && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// A duration such as `500ms`, `90s`, `15m`, `24h`, `7d` or `1h30m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || format!("{text:?} is not a duration like 90s, 15m, 24h or 7d");
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            _ => return Err(invalid()),
        };
        total += unit * u32::try_from(number).map_err(|_| invalid())?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::{SECOND, ZERO, duration_between, parse_duration, shown};
    use std::time::Duration;

    #[test]
    fn durations_read_like_kubernetes_flags() {
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "10", "h", "5x", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let batch_wait = duration_between(ZERO, SECOND);
        assert_eq!(batch_wait("0ms"), Ok(Duration::ZERO));
        assert_eq!(batch_wait("2s"), Err("\"2s\" is longer than 1s".to_owned()));
        assert_eq!(shown(Duration::from_secs(3650 * 86_400)), "3650d");
        assert_eq!(shown(Duration::from_millis(100)), "100ms");
        assert_eq!(shown(Duration::ZERO), "0ms");
    }
}
