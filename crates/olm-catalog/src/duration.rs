//! Go's `time.ParseDuration` syntax, which upstream fields such as
//! `spec.updateStrategy.registryPoll.interval` use: `45s`, `10m`, `1h30m`, `1.5h`, `300ms`.
//!
//! The arithmetic is integer nanoseconds with overflow checks (Go's own rule), and a
//! duration longer than [`MAX_DURATION`] is refused: anything longer is a typo, and timers
//! and deadlines built from such a value would overflow (`Instant + d`, tokio's timer wheel
//! tops out near two years). Objects are written by strangers; no value here may panic.

use std::fmt;
use std::time::Duration;

/// The longest interval any setting or field accepts: 8760h (365 days).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// The longest duration text accepted (`2562047h47m16.854775807s` is 24 bytes).
pub const MAX_DURATION_TEXT: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is not a duration such as 10s, 2m or 1h30m")]
    Syntax(String),
    #[error("{0:?} is not positive")]
    NotPositive(String),
    #[error("{text:?} is longer than the maximum of {}", HumanDuration(*.max))]
    TooLong { text: String, max: Duration },
    #[error(
        "{text:?}… is {len} bytes, longer than the limit of {MAX_DURATION_TEXT} for a duration"
    )]
    TextTooLong { text: String, len: usize },
}

/// What Go's `time.ParseDuration` says of `text` when its syntax is wrong (upstream puts that
/// text in statuses, and clients compare it): `time: unknown unit "mError" in duration
/// "45mError.code"`, `time: missing unit in duration "45"`, `time: invalid duration "x"`.
/// None when the syntax is Go's (the value may still be out of range).
pub fn go_syntax_error(text: &str) -> Option<String> {
    let quote = |s: &str| format!("\"{s}\"");
    let invalid = || Some(format!("time: invalid duration {}", quote(text)));
    let mut rest = text;
    if let Some(unsigned) = rest.strip_prefix(['-', '+']) {
        rest = unsigned;
    }
    if rest == "0" {
        return None;
    }
    if rest.is_empty() {
        return invalid();
    }
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return invalid();
        }
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let whole = digits(rest);
        rest = &rest[whole..];
        let mut fraction = 0;
        if let Some(after_dot) = rest.strip_prefix('.') {
            fraction = digits(after_dot);
            rest = &after_dot[fraction..];
        }
        if whole == 0 && fraction == 0 {
            return invalid();
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if unit.is_empty() {
            return Some(format!("time: missing unit in duration {}", quote(text)));
        }
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&unit) {
            return Some(format!(
                "time: unknown unit {} in duration {}",
                quote(unit),
                quote(text)
            ));
        }
        rest = &rest[unit_len..];
    }
    None
}

/// Parses a positive Go duration of at most [`MAX_DURATION`].
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    if text.len() > MAX_DURATION_TEXT {
        return Err(DurationError::TextTooLong {
            text: text.chars().take(MAX_DURATION_TEXT).collect(),
            len: text.len(),
        });
    }
    let syntax = || DurationError::Syntax(text.to_string());
    let too_long = || DurationError::TooLong {
        text: text.to_string(),
        max: MAX_DURATION,
    };
    let mut rest = text.trim();
    if let Some(unsigned) = rest.strip_prefix('+') {
        rest = unsigned;
    } else if rest.starts_with('-') {
        return Err(DurationError::NotPositive(text.to_string()));
    }
    if rest == "0" {
        return Err(DurationError::NotPositive(text.to_string()));
    }
    if rest.is_empty() {
        return Err(syntax());
    }
    let max_nanos = MAX_DURATION.as_nanos();
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (whole, after_whole) = rest.split_at(whole_end);
        let (fraction, after_number) = match after_whole.strip_prefix('.') {
            Some(after_dot) => {
                let end = after_dot
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after_dot.len());
                after_dot.split_at(end)
            }
            None => ("", after_whole),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(syntax());
        }
        let unit_end = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, next) = after_number.split_at(unit_end);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(syntax()),
        };
        // Whole part: digit by digit, stopping as soon as it cannot fit.
        let mut whole_value: u128 = 0;
        for digit in whole.bytes() {
            whole_value = whole_value * 10 + u128::from(digit - b'0');
            if whole_value.saturating_mul(unit_nanos) > max_nanos {
                return Err(too_long());
            }
        }
        // Fraction: Go keeps the digits that matter for nanosecond precision.
        let mut fraction_nanos: u128 = 0;
        let mut scale: u128 = 1;
        for digit in fraction.bytes().take(18) {
            fraction_nanos = fraction_nanos * 10 + u128::from(digit - b'0');
            scale *= 10;
        }
        let component = whole_value * unit_nanos + fraction_nanos * unit_nanos / scale;
        total = total.saturating_add(component);
        if total > max_nanos {
            return Err(too_long());
        }
        rest = next;
    }
    if total == 0 {
        return Err(DurationError::NotPositive(text.to_string()));
    }
    let nanos = u64::try_from(total).map_err(|_| too_long())?;
    Ok(Duration::from_nanos(nanos))
}

/// A duration the way Go prints it (`8760h0m0s`, `1m30s`, `250ms`), for messages.
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(1) {
            return write!(f, "{}ms", d.as_millis());
        }
        let secs = d.as_secs();
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h{m}m{s}s")
        } else if m > 0 {
            write!(f, "{m}m{s}s")
        } else {
            write!(f, "{s}s")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_go_reads() {
        let ok = |text: &str| parse_go_duration(text).unwrap();
        assert_eq!(ok("45s"), Duration::from_secs(45));
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("300ms"), Duration::from_millis(300));
        assert_eq!(ok("1m0s"), Duration::from_secs(60));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("1.s"), Duration::from_secs(1));
        assert_eq!(ok("+2us"), Duration::from_micros(2));
        assert_eq!(ok("1µs"), Duration::from_micros(1));
        assert_eq!(ok("8760h"), MAX_DURATION);
    }

    #[test]
    fn rejects_what_go_rejects_or_a_poll_cannot_use() {
        for bad in ["", "10", "m", "10x", "1h-5m", ".", ".s", "1..5s", "h1"] {
            assert_eq!(
                parse_go_duration(bad),
                Err(DurationError::Syntax(bad.into())),
                "{bad:?}"
            );
        }
        for not_positive in ["-5m", "0", "0s", "0h0m", "-0"] {
            assert_eq!(
                parse_go_duration(not_positive),
                Err(DurationError::NotPositive(not_positive.into())),
                "{not_positive:?}"
            );
        }
    }

    /// The CatalogSource that used to panic `olm run` (Duration::from_secs_f64 overflow).
    #[test]
    fn huge_values_are_refused_never_overflow() {
        for huge in [
            "99999999999999999999h",
            "8761h",
            "8760h1ns",
            "5000h5000h",
            "1e400h",
            "184467440737095516160000000000000000000000000000ns",
            "525601m",
        ] {
            let error = parse_go_duration(huge).unwrap_err();
            assert!(
                matches!(
                    error,
                    DurationError::TooLong { .. } | DurationError::Syntax(_)
                ),
                "{huge:?}: {error}"
            );
        }
        let message = parse_go_duration("99999999999999999999h")
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "\"99999999999999999999h\" is longer than the maximum of 8760h0m0s"
        );
    }

    #[test]
    fn prints_as_go_does() {
        assert_eq!(HumanDuration(Duration::from_secs(90)).to_string(), "1m30s");
        assert_eq!(
            HumanDuration(Duration::from_millis(250)).to_string(),
            "250ms"
        );
        assert_eq!(HumanDuration(MAX_DURATION).to_string(), "8760h0m0s");
    }

    #[test]
    fn syntax_errors_are_worded_as_gos() {
        assert_eq!(
            go_syntax_error("45mError.code").as_deref(),
            Some(r#"time: unknown unit "mError" in duration "45mError.code""#)
        );
        assert_eq!(
            go_syntax_error("45").as_deref(),
            Some(r#"time: missing unit in duration "45""#)
        );
        assert_eq!(
            go_syntax_error("h").as_deref(),
            Some(r#"time: invalid duration "h""#)
        );
        assert_eq!(
            go_syntax_error("").as_deref(),
            Some(r#"time: invalid duration """#)
        );
        for fine in ["45m", "1h30m", "1.5h", ".5s", "0", "300µs"] {
            assert_eq!(go_syntax_error(fine), None, "{fine}");
        }
    }
}
