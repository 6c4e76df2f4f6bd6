//! Go's `time.ParseDuration` syntax, which upstream fields such as
//! `spec.updateStrategy.registryPoll.interval` use: `45s`, `10m`, `1h30m`, `1.5h`, `300ms`.

use std::time::Duration;

/// `None` for anything Go would reject, and for negative or zero durations, which a poll
/// interval cannot use.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    if let Some(unsigned) = rest.strip_prefix('+') {
        rest = unsigned;
    }
    if rest == "0" || rest.starts_with('-') {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * seconds;
        rest = next;
    }
    (total > 0.0 && total.is_finite()).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_go_reads() {
        assert_eq!(parse_go_duration("45s"), Some(Duration::from_secs(45)));
        assert_eq!(parse_go_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("1m0s"), Some(Duration::from_secs(60)));
    }

    #[test]
    fn rejects_what_go_rejects_or_a_poll_cannot_use() {
        for bad in ["", "10", "m", "10x", "-5m", "0", "0s", "1h-5m", "."] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }
}
