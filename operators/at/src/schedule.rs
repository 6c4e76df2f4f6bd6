//! The seed's schedule format: a UTC time written exactly as `2006-01-02T15:04:05Z`.

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::civil::DateTime;
use k8s_openapi::jiff::tz::TimeZone;

pub const FORMAT: &str = "YYYY-MM-DDTHH:MM:SSZ";

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("schedule {input:?} is not a UTC time written {FORMAT}: {problem}")]
pub struct Error {
    pub input: String,
    pub problem: String,
}

pub fn parse(input: &str) -> Result<Timestamp, Error> {
    let fail = |problem: String| Error {
        input: input.to_string(),
        problem,
    };
    let bytes = input.as_bytes();
    if bytes.len() != FORMAT.len() {
        return Err(fail(format!(
            "{} characters, expected {}",
            bytes.len(),
            FORMAT.len()
        )));
    }
    for (i, (&got, want)) in bytes.iter().zip(FORMAT.bytes()).enumerate() {
        let ok = match want {
            b'Y' | b'M' | b'D' | b'H' | b'S' => got.is_ascii_digit(),
            other => got == other,
        };
        if !ok {
            let expected = if want.is_ascii_uppercase() && !matches!(want, b'T' | b'Z') {
                "a digit".to_string()
            } else {
                format!("{:?}", want as char)
            };
            return Err(fail(format!(
                "character {} is {:?}, expected {expected}",
                i + 1,
                got as char
            )));
        }
    }
    let number = |from: usize, to: usize| -> i16 { input[from..to].parse().unwrap_or_default() };
    let (year, month, day) = (number(0, 4), number(5, 7), number(8, 10));
    let (hour, minute, second) = (number(11, 13), number(14, 16), number(17, 19));
    let datetime = DateTime::new(
        year,
        month as i8,
        day as i8,
        hour as i8,
        minute as i8,
        second as i8,
        0,
    )
    .map_err(|e| fail(e.to_string()))?;
    datetime
        .to_zoned(TimeZone::UTC)
        .map(|z| z.timestamp())
        .map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_seed_format() {
        let t = parse("2020-01-30T10:02:00Z").unwrap();
        assert_eq!(t.to_string(), "2020-01-30T10:02:00Z");
        assert_eq!(
            parse("2024-02-29T23:59:59Z").unwrap().to_string(),
            "2024-02-29T23:59:59Z"
        );
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        for (input, problem) in [
            ("", "0 characters, expected 20"),
            ("tomorrow", "8 characters"),
            ("2020-01-30 10:02:00Z", "character 11 is ' ', expected 'T'"),
            ("2020-01-30T10:02:00+", "character 20 is '+', expected 'Z'"),
            ("2020-01-30T10:02:00.5Z", "22 characters"),
            (
                "2020-1-30T10:02:00ZZ",
                "character 7 is '-', expected a digit",
            ),
            ("2020-13-01T00:00:00Z", "month"),
            ("2023-02-29T00:00:00Z", "day"),
            ("2020-01-30T24:00:00Z", "hour"),
            ("2020-01-30T10:60:00Z", "minute"),
            ("２0２0-01-30T10:02:00Z", "characters"),
        ] {
            let error = parse(input).unwrap_err();
            assert_eq!(error.input, input);
            assert!(error.problem.contains(problem), "{input:?}: {error}");
            assert!(
                error.to_string().contains("YYYY-MM-DDTHH:MM:SSZ"),
                "{error}"
            );
        }
    }
}
