//! Version ranges in the syntax of `github.com/blang/semver/v4` (`ParseRange`), which OLM
//! uses for a bundle's `olm.skipRange` and for `olm.package.required` `versionRange`, and
//! blang's strict `Parse` for versions.
//!
//! The parser follows blang's algorithm step by step, quirks included, so that a range
//! means here exactly what it means to OLM and `opm`:
//!
//! * Terms are split on the space character only, except that a space right after `>`, `<`
//!   or `=` does not split (`>= 1.0.0` is one term). Spaces inside a term are then dropped,
//!   and other whitespace (a tab) is only tolerated between an operator and its version.
//!   A term of a single character is silently ignored (`>=1.0.0 x` is `>=1.0.0`).
//! * Operators: `=`, `==`, none (all equality), `!=`, `!`, `>`, `>=`, `<`, `<=`. Terms
//!   separated by spaces are ANDed; `||` separates ORed groups. No `~`, `^`, `-` ranges and
//!   no brackets.
//! * Wildcards: only a lowercase `x`, expanded textually the way blang does it:
//!   `1.2.x` is `>=1.2.0 <1.3.0`, `1.x` is `>=1.0.0 <2.0.0`, `>1.2.x` is `>=1.3.0`,
//!   `<=1.x` is `<2.0.0`, and `!=1.2.x` becomes the AND `<1.2.0 >=1.3.0`, which matches
//!   nothing. Blang's textual rewriting has odd corners that are kept: `1.x.x` means
//!   `>=1.0.0 <1.1.0`; any `x` anywhere in a term
//!   (even in a pre-release such as `1.0.0-x`) triggers the rewrite, which then usually
//!   fails; and a term with an `x` and an unknown operator loses the operator (`~1.x` is
//!   `=1.0.0`). `X` and `*` are not wildcards and are rejected like any other bad version.
//! * Versions are strict semver 2.0.0 (`major.minor.patch[-pre][+build]`, no leading `v`,
//!   no leading zeros, numeric pre-release identifiers must fit in 64 bits).
//! * Comparison is semver precedence; build metadata is ignored.
//!
//! One deliberate difference: blang accepts an empty group between two `||` (`1.0.0 || ||
//! 2.0.0`) and then panics when a version reaches it; this parser rejects it.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use semver::{BuildMetadata, Prerelease, Version};

/// A parsed blang range: an OR of AND-groups of comparisons.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionRange {
    text: String,
    groups: Vec<Vec<Comparison>>,
}

#[derive(Clone, Debug, PartialEq)]
struct Comparison {
    op: Op,
    version: Version,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// Why a range could not be parsed; the message names the range and the offending part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid range {range:?}: {problem}")]
pub struct RangeError {
    /// The range text as given.
    pub range: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The longest range text accepted (`olm.skipRange`, `versionRange`); real ones are tens
/// of bytes.
pub const MAX_RANGE_BYTES: usize = 4096;

impl VersionRange {
    /// Parses a range the way blang's `ParseRange` does.
    pub fn parse(s: &str) -> Result<VersionRange, RangeError> {
        if s.len() > MAX_RANGE_BYTES {
            let shown: String = s.chars().take(40).collect();
            return Err(RangeError {
                range: format!("{shown}…"),
                problem: format!(
                    "{} bytes, longer than the limit of {MAX_RANGE_BYTES}",
                    s.len()
                ),
            });
        }
        let fail = |problem: String| RangeError {
            range: s.to_string(),
            problem,
        };

        let terms = split_and_trim(s);
        if terms.is_empty() {
            return Err(fail("it contains no version constraint".into()));
        }
        let or_groups = split_or_parts(&terms).map_err(fail)?;
        let expanded = expand_wildcards(&or_groups).map_err(fail)?;

        let mut groups = Vec::with_capacity(expanded.len());
        for group in expanded {
            let mut comparisons = Vec::with_capacity(group.len());
            for term in group {
                let describe = |problem: String| {
                    if term.original == term.text {
                        fail(format!("{:?}: {problem}", term.text))
                    } else {
                        fail(format!(
                            "{:?} (wildcard expanded to {:?}): {problem}",
                            term.original, term.text
                        ))
                    }
                };
                let (op_text, version_text) = split_comparator_version(&term.text)
                    .ok_or_else(|| describe(NO_VERSION.into()))?;
                let op = parse_op(op_text)
                    .ok_or_else(|| describe(format!("{op_text:?} is not a comparison operator")))?;
                let version = blang_parse(version_text)
                    .map_err(|e| describe(format!("{version_text:?} is not a version: {e}")))?;
                comparisons.push(Comparison { op, version });
            }
            groups.push(comparisons);
        }
        Ok(VersionRange {
            text: s.to_string(),
            groups,
        })
    }

    /// Whether `v` satisfies the range (semver precedence, build metadata ignored).
    pub fn contains(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .any(|group| group.iter().all(|c| c.matches(v)))
    }

    /// The range text as it was given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl Comparison {
    fn matches(&self, v: &Version) -> bool {
        let ord = v.cmp_precedence(&self.version);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Ne => ord != Ordering::Equal,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
        }
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for VersionRange {
    type Err = RangeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(s)
    }
}

/// Parses a version by blang's strict `Parse` rules: `major.minor.patch`, optional
/// `-pre` and `+build`, no leading `v`, no surrounding whitespace, no leading zeros in
/// numeric parts, and numeric pre-release identifiers that fit in 64 bits.
///
/// A numeric pre-release identifier beyond `u64::MAX` is accepted by the `semver` crate but
/// rejected by blang; it is rejected here too, reported as a `semver` overflow error (the
/// crate has no error kind that names the pre-release for that).
pub fn parse_version(s: &str) -> Result<Version, semver::Error> {
    match blang_parse(s) {
        Ok(v) => Ok(v),
        Err(_) => {
            match Version::parse(s) {
                Err(e) => Err(e),
                Ok(_) => Err(Version::parse("18446744073709551616.0.0")
                    .expect_err("u64 overflow is an error")),
            }
        }
    }
}

/// Why a version does not parse, in blang's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("version string empty")]
    Empty,
    #[error("no Major.Minor.Patch elements found")]
    NoMajorMinorPatch,
    /// `part` is "major number", "minor number" or "patch number".
    #[error("invalid character(s) found in {part} {text:?}")]
    NumberCharacters { part: &'static str, text: String },
    #[error("{part} must not contain leading zeroes {text:?}")]
    NumberLeadingZeroes { part: &'static str, text: String },
    #[error("{part} is empty")]
    NumberEmpty { part: &'static str },
    #[error("{part} {text:?} is out of range")]
    NumberOutOfRange { part: &'static str, text: String },
    #[error("prerelease is empty")]
    PrereleaseEmpty,
    #[error("numeric prerelease version must not contain leading zeroes {0:?}")]
    PrereleaseLeadingZeroes(String),
    #[error("numeric prerelease version {0:?} is out of range")]
    PrereleaseOutOfRange(String),
    #[error("invalid character(s) found in prerelease {0:?}")]
    PrereleaseCharacters(String),
    #[error("build meta data is empty")]
    BuildEmpty,
    #[error("invalid character(s) found in build meta data {0:?}")]
    BuildCharacters(String),
    /// What the checks above let through and the `semver` crate still refuses (its error
    /// is neither `Clone` nor `Eq`, so its text).
    #[error("{0}")]
    Semver(String),
}

/// blang's `Parse`, with blang's error wording. Shared with the templates.
pub(crate) fn blang_parse(s: &str) -> Result<Version, VersionError> {
    if s.is_empty() {
        return Err(VersionError::Empty);
    }
    let parts: Vec<&str> = s.splitn(3, '.').collect();
    if parts.len() != 3 {
        return Err(VersionError::NoMajorMinorPatch);
    }
    let major = parse_number(parts[0], "major number")?;
    let minor = parse_number(parts[1], "minor number")?;

    let mut patch_str = parts[2];
    let mut build: Vec<&str> = Vec::new();
    let mut pre: Vec<&str> = Vec::new();
    if let Some(i) = patch_str.find('+') {
        build = patch_str[i + 1..].split('.').collect();
        patch_str = &patch_str[..i];
    }
    if let Some(i) = patch_str.find('-') {
        pre = patch_str[i + 1..].split('.').collect();
        patch_str = &patch_str[..i];
    }
    let patch = parse_number(patch_str, "patch number")?;
    check_identifiers(&pre, &build)?;

    let pre = if pre.is_empty() {
        Prerelease::EMPTY
    } else {
        Prerelease::new(&pre.join(".")).map_err(|e| VersionError::Semver(e.to_string()))?
    };
    let build = if build.is_empty() {
        BuildMetadata::EMPTY
    } else {
        BuildMetadata::new(&build.join(".")).map_err(|e| VersionError::Semver(e.to_string()))?
    };
    Ok(Version {
        major,
        minor,
        patch,
        pre,
        build,
    })
}

/// blang's checks of pre-release and build identifiers.
fn check_identifiers(pre: &[&str], build: &[&str]) -> Result<(), VersionError> {
    for id in pre {
        if id.is_empty() {
            return Err(VersionError::PrereleaseEmpty);
        }
        if id.bytes().all(|b| b.is_ascii_digit()) {
            if has_leading_zeroes(id) {
                return Err(VersionError::PrereleaseLeadingZeroes(id.to_string()));
            }
            if id.parse::<u64>().is_err() {
                return Err(VersionError::PrereleaseOutOfRange(id.to_string()));
            }
        } else if !is_alphanumeric(id) {
            return Err(VersionError::PrereleaseCharacters(id.to_string()));
        }
    }
    for id in build {
        if id.is_empty() {
            return Err(VersionError::BuildEmpty);
        }
        if !is_alphanumeric(id) {
            return Err(VersionError::BuildCharacters(id.to_string()));
        }
    }
    Ok(())
}

fn parse_number(s: &str, part: &'static str) -> Result<u64, VersionError> {
    let text = || s.to_string();
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VersionError::NumberCharacters { part, text: text() });
    }
    if has_leading_zeroes(s) {
        return Err(VersionError::NumberLeadingZeroes { part, text: text() });
    }
    if s.is_empty() {
        return Err(VersionError::NumberEmpty { part });
    }
    s.parse::<u64>()
        .map_err(|_| VersionError::NumberOutOfRange { part, text: text() })
}

fn has_leading_zeroes(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

fn is_alphanumeric(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// blang's `splitAndTrim`: split on ' ' unless the last non-space byte was `>`, `<` or `=`;
/// drop pieces shorter than two bytes; remove the spaces left inside the pieces.
fn split_and_trim(s: &str) -> Vec<String> {
    let bytes = s.as_bytes();
    let mut result = Vec::new();
    let mut last = 0usize;
    let mut last_char = 0u8;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < i {
                result.push(&s[last..i]);
            }
            last = i + 1;
        } else if b != b' ' {
            last_char = b;
        }
    }
    if last + 1 < bytes.len() {
        result.push(&s[last..]);
    }
    result.into_iter().map(|t| t.replace(' ', "")).collect()
}

/// blang's `splitORParts`, rejecting an empty group as well (blang panics on it later).
fn split_or_parts(terms: &[String]) -> Result<Vec<Vec<String>>, String> {
    let mut groups = Vec::new();
    let mut last = 0;
    for (i, t) in terms.iter().enumerate() {
        if t == "||" {
            if i == 0 {
                return Err("it starts with \"||\"".into());
            }
            if last == i {
                return Err("there is nothing between two \"||\"".into());
            }
            groups.push(terms[last..i].to_vec());
            last = i + 1;
        }
    }
    if last == terms.len() {
        return Err("it ends with \"||\"".into());
    }
    groups.push(terms[last..].to_vec());
    Ok(groups)
}

/// A term after wildcard expansion, with the term it came from.
struct Term {
    original: String,
    text: String,
}

/// What a range term without a version is told.
const NO_VERSION: &str = "no version found";

/// blang's `splitComparatorVersion`: the operator is everything before the first decimal
/// digit (Unicode category Nd, as Go's `unicode.IsDigit`), trimmed.
fn split_comparator_version(s: &str) -> Option<(&str, &str)> {
    let (i, _) = s.char_indices().find(|&(_, c)| is_go_digit(c))?;
    Some((s[..i].trim(), &s[i..]))
}

fn parse_op(s: &str) -> Option<Op> {
    Some(match s {
        "" | "=" | "==" => Op::Eq,
        "!" | "!=" => Op::Ne,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "<" => Op::Lt,
        "<=" => Op::Le,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wildcard {
    None,
    Minor,
    Patch,
}

/// blang's `getWildcardType`: decided only by the number of dot-separated parts when the
/// last one is exactly `x`.
fn wildcard_type(v: &str) -> Wildcard {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.last() != Some(&"x") {
        return Wildcard::None;
    }
    match parts.len() {
        2 => Wildcard::Minor,
        3 => Wildcard::Patch,
        _ => Wildcard::None, // 1 is blang's "major" wildcard, which is never incremented
    }
}

/// blang's `createVersionFromWildcard`: textual replacement of the first `.x.x` by `.x`,
/// then of the first `.x` by `.0`, then `.0` appended to a two-part result.
fn flatten_wildcard(v: &str) -> String {
    let v = v.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if v.split('.').count() == 2 {
        format!("{v}.0")
    } else {
        v
    }
}

/// blang's `incrementMajorVersion`/`incrementMinorVersion`: Go's `strconv.Atoi` on one
/// dot-separated part, plus one; an unparsable part gives the empty string.
fn increment_part(v: &str, index: usize) -> String {
    let mut parts: Vec<String> = v.split('.').map(str::to_string).collect();
    let Some(n) = parts.get(index).and_then(|p| go_atoi(p)) else {
        return String::new();
    };
    parts[index] = n.wrapping_add(1).to_string();
    parts.join(".")
}

/// Go's `strconv.Atoi`: optional sign, then decimal digits, within `i64`.
fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// blang's `expandWildcardVersion`, applied to every term containing an `x`.
fn expand_wildcards(groups: &[Vec<String>]) -> Result<Vec<Vec<Term>>, String> {
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut terms = Vec::new();
        for term in group {
            if !term.contains('x') {
                terms.push(Term {
                    original: term.clone(),
                    text: term.clone(),
                });
                continue;
            }
            let (op, v) =
                split_comparator_version(term).ok_or_else(|| format!("{term:?}: {NO_VERSION}"))?;
            let kind = wildcard_type(v);
            let flat = flatten_wildcard(v);
            let (result_op, increment) = match op {
                ">" => (">=", true),
                ">=" => (">=", false),
                "<" => ("<", false),
                "<=" => ("<", true),
                "" | "=" | "==" => {
                    terms.push(Term {
                        original: term.clone(),
                        text: format!(">={flat}"),
                    });
                    ("<", true)
                }
                "!=" | "!" => {
                    terms.push(Term {
                        original: term.clone(),
                        text: format!("<{flat}"),
                    });
                    (">=", true)
                }
                _ => ("", false),
            };
            let result_version = if increment {
                match kind {
                    Wildcard::Patch => increment_part(&flat, 1),
                    Wildcard::Minor => increment_part(&flat, 0),
                    Wildcard::None => String::new(),
                }
            } else {
                flat
            };
            terms.push(Term {
                original: term.clone(),
                text: format!("{result_op}{result_version}"),
            });
        }
        out.push(terms);
    }
    Ok(out)
}

/// Go's `unicode.IsDigit` (general category Nd, Unicode 15.0).
fn is_go_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    let c = c as u32;
    ND_RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

const ND_RANGES: &[(u32, u32)] = &[
    (0x0660, 0x0669),
    (0x06F0, 0x06F9),
    (0x07C0, 0x07C9),
    (0x0966, 0x096F),
    (0x09E6, 0x09EF),
    (0x0A66, 0x0A6F),
    (0x0AE6, 0x0AEF),
    (0x0B66, 0x0B6F),
    (0x0BE6, 0x0BEF),
    (0x0C66, 0x0C6F),
    (0x0CE6, 0x0CEF),
    (0x0D66, 0x0D6F),
    (0x0DE6, 0x0DEF),
    (0x0E50, 0x0E59),
    (0x0ED0, 0x0ED9),
    (0x0F20, 0x0F29),
    (0x1040, 0x1049),
    (0x1090, 0x1099),
    (0x17E0, 0x17E9),
    (0x1810, 0x1819),
    (0x1946, 0x194F),
    (0x19D0, 0x19D9),
    (0x1A80, 0x1A89),
    (0x1A90, 0x1A99),
    (0x1B50, 0x1B59),
    (0x1BB0, 0x1BB9),
    (0x1C40, 0x1C49),
    (0x1C50, 0x1C59),
    (0xA620, 0xA629),
    (0xA8D0, 0xA8D9),
    (0xA900, 0xA909),
    (0xA9D0, 0xA9D9),
    (0xA9F0, 0xA9F9),
    (0xAA50, 0xAA59),
    (0xABF0, 0xABF9),
    (0xFF10, 0xFF19),
    (0x104A0, 0x104A9),
    (0x10D30, 0x10D39),
    (0x11066, 0x1106F),
    (0x110F0, 0x110F9),
    (0x11136, 0x1113F),
    (0x111D0, 0x111D9),
    (0x112F0, 0x112F9),
    (0x11450, 0x11459),
    (0x114D0, 0x114D9),
    (0x11650, 0x11659),
    (0x116C0, 0x116C9),
    (0x11730, 0x11739),
    (0x118E0, 0x118E9),
    (0x11950, 0x11959),
    (0x11C50, 0x11C59),
    (0x11D50, 0x11D59),
    (0x11DA0, 0x11DA9),
    (0x11F50, 0x11F59),
    (0x16A60, 0x16A69),
    (0x16AC0, 0x16AC9),
    (0x16B50, 0x16B59),
    (0x1D7CE, 0x1D7FF),
    (0x1E140, 0x1E149),
    (0x1E2F0, 0x1E2F9),
    (0x1E4F0, 0x1E4F9),
    (0x1E950, 0x1E959),
    (0x1FBF0, 0x1FBF9),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    /// (range, versions that match, versions that don't)
    const MATCHES: &[(&str, &[&str], &[&str])] = &[
        // single operators (blang's TestParseRange)
        // no npm-style pre-release exclusion: 1.2.4-alpha is simply above 1.2.3
        (
            ">1.2.3",
            &["1.2.4", "2.0.0", "1.2.4-alpha"],
            &["1.2.2", "1.2.3"],
        ),
        (">=1.2.3", &["1.2.3", "1.2.4"], &["1.2.2", "1.2.3-rc.1"]),
        ("<1.2.3", &["1.2.2", "1.2.3-rc.1"], &["1.2.3", "1.2.4"]),
        ("<=1.2.3", &["1.2.2", "1.2.3"], &["1.2.4", "1.2.4-alpha"]),
        ("1.2.3", &["1.2.3"], &["1.2.2", "1.2.4", "1.2.3-alpha"]),
        ("=1.2.3", &["1.2.3"], &["1.2.2", "1.2.4"]),
        ("==1.2.3", &["1.2.3"], &["1.2.2", "1.2.4"]),
        ("!=1.2.3", &["1.2.2", "1.2.4"], &["1.2.3"]),
        ("!1.2.3", &["1.2.2", "1.2.4"], &["1.2.3"]),
        // spaces between operator and version, and around terms
        (">= 1.2.3", &["1.2.3"], &["1.2.2"]),
        (
            "  >=   1.2.3   <=  1.2.5  ",
            &["1.2.3", "1.2.5"],
            &["1.2.2", "1.2.6"],
        ),
        ("> =1.2.3", &["1.2.3"], &["1.2.2"]),
        (">=\t1.2.3", &["1.2.3"], &["1.2.2"]),
        // AND
        (">1.2.2 <1.2.4", &["1.2.3"], &["1.2.2", "1.2.4"]),
        ("<1.2.2 <1.2.4", &["1.2.1"], &["1.2.2", "1.2.3"]),
        (
            ">1.2.2 <1.2.5 !=1.2.4",
            &["1.2.3"],
            &["1.2.2", "1.2.4", "1.2.5"],
        ),
        (">1.2.2 <1.2.5 !1.2.4", &["1.2.3"], &["1.2.4"]),
        // OR, and AND binding tighter than OR
        (">1.2.2 || <1.2.4", &["1.2.2", "1.2.3", "1.2.4"], &[]),
        (
            "<1.2.2 || >1.2.4",
            &["1.2.1", "1.2.5"],
            &["1.2.2", "1.2.3", "1.2.4"],
        ),
        (
            ">1.2.2 <1.2.4 || >=2.0.0",
            &["1.2.3", "2.0.0", "2.0.1"],
            &["1.2.2", "1.2.4"],
        ),
        (
            ">1.2.2 <1.2.4 || >=2.0.0 <3.0.0",
            &["1.2.3", "2.0.0", "2.9.9"],
            &["1.2.2", "1.2.4", "3.0.0"],
        ),
        // wildcards
        (">1.x", &["2.0.0"], &["0.1.9", "1.2.6", "1.9.0"]),
        (">1.2.x", &["1.3.0"], &["1.1.9", "1.2.6"]),
        (">=1.2.x", &["1.2.0", "1.3.0"], &["1.1.9"]),
        ("<=1.2.x", &["1.2.9"], &["1.3.0"]),
        ("<1.2.x", &["1.1.9"], &["1.2.0"]),
        (">=1.x", &["1.0.0"], &["0.9.9"]),
        ("<=1.x", &["1.9.9"], &["2.0.0"]),
        ("<1.x", &["0.9.9"], &["1.0.0"]),
        ("1.2.x", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0"]),
        ("1.x", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        (
            "1.x || >=2.0.x <2.2.x",
            &["1.2.2", "2.0.0", "2.1.8"],
            &["0.9.2", "2.2.0"],
        ),
        // blang quirks: `1.x.x` is a patch wildcard on 1.0; `!=1.2.x` is an unsatisfiable
        // AND; an unknown operator next to a wildcard is dropped.
        ("1.x.x", &["1.0.0", "1.0.9"], &["1.1.0", "0.9.9"]),
        ("!=1.2.x", &[], &["1.1.0", "1.2.0", "1.3.0"]),
        ("~1.x", &["1.0.0"], &["1.1.0"]),
        (">1.+2.x", &["1.3.0"], &["1.2.5"]),
        // a one-character term is ignored
        (">=1.0.0 x", &["1.0.0", "9.0.0"], &["0.9.0"]),
        // pre-release ordering
        (
            ">=1.0.0-alpha <1.0.0",
            &["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0-rc.1"],
            &["1.0.0", "0.9.0"],
        ),
        (
            ">1.0.0-alpha.1",
            &["1.0.0-alpha.2", "1.0.0-alpha.beta", "1.0.0-beta"],
            &["1.0.0-alpha", "1.0.0-alpha.1"],
        ),
        (
            "<1.0.0-2",
            &["1.0.0-1", "1.0.0-0"],
            &["1.0.0-10", "1.0.0-a"],
        ),
        // build metadata is ignored on both sides
        ("1.0.0+build.1", &["1.0.0", "1.0.0+other"], &["1.0.1"]),
        (">1.0.0+zzz", &["1.0.1"], &["1.0.0+aaa", "1.0.0"]),
        ("!=1.0.0", &["1.0.1"], &["1.0.0+build"]),
        // a typical skipRange
        (
            ">=4.1.0 <4.2.3",
            &["4.1.0", "4.2.2", "4.2.3-rc.0"],
            &["4.0.9", "4.2.3"],
        ),
    ];

    #[test]
    fn ranges_match_like_blang() {
        for (range, yes, no) in MATCHES {
            let r = VersionRange::parse(range).unwrap_or_else(|e| panic!("{range:?}: {e}"));
            for s in *yes {
                assert!(r.contains(&v(s)), "{range:?} should contain {s}");
            }
            for s in *no {
                assert!(!r.contains(&v(s)), "{range:?} should not contain {s}");
            }
        }
    }

    #[test]
    fn rejects_what_blang_rejects() {
        for range in [
            "",
            "   ",
            "1",
            "||",
            ">>1.2.3",
            "<==1.2.3",
            "=>1.2.3",
            "~1.2.3",
            "^1.2.3",
            "1.0",
            ">=1.0 <2",
            "string",
            "fo.ob.ar.x",
            "v1.2.3",
            ">=v1.2.3",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-a..b",
            "1.2.3-a_b",
            "1.2.3-99999999999999999999",
            "1.X",
            "1.2.*",
            "*",
            "1.0.0-x",
            "1.2.x.x",
            "1.x.3",
            "|| 1.2.3",
            "1.2.3 ||",
            "1.2.3 || || 2.0.0",
            "1.2.3||2.0.0",
            ">=1.2.3,<2.0.0",
            ">=1.2.3\t<2.0.0",
            ">=1.2.3 <=",
            "1.2.3 >= ",
        ] {
            assert!(
                VersionRange::parse(range).is_err(),
                "{range:?} should be rejected"
            );
        }
    }

    #[test]
    fn accepts_odd_inputs_blang_accepts() {
        // `>=1.x.3` loses its `x` textually and becomes `>=1.0.3`.
        let r = VersionRange::parse(">=1.x.3").unwrap();
        assert!(r.contains(&v("1.0.3")) && !r.contains(&v("1.0.2")));
        // A trailing lone operator is a one-character term and is ignored.
        let r = VersionRange::parse(">=1.0.0 <").unwrap();
        assert!(r.contains(&v("5.0.0")));
        // `-` is a one-character term, so a hyphen range is an AND of two equalities.
        let r = VersionRange::parse("1.2.3 - 2.0.0").unwrap();
        assert!(!r.contains(&v("1.2.3")) && !r.contains(&v("1.5.0")));
        // Leading zeros survive blang's integer increment on `<=`.
        let r = VersionRange::parse("<=01.x").unwrap();
        assert!(r.contains(&v("1.9.0")) && !r.contains(&v("2.0.0")));
    }

    #[test]
    fn error_names_range_and_problem() {
        let e = VersionRange::parse(">=1.0 <2").unwrap_err();
        assert_eq!(e.range, ">=1.0 <2");
        let msg = e.to_string();
        assert!(
            msg.starts_with(r#"invalid range ">=1.0 <2": ">=1.0": "1.0" is not a version"#),
            "{msg}"
        );
        let msg = VersionRange::parse(">>1.0.0").unwrap_err().to_string();
        assert!(
            msg.contains(r#"">>" is not a comparison operator"#),
            "{msg}"
        );
        let msg = VersionRange::parse("1.0.0-x").unwrap_err().to_string();
        assert!(msg.contains("wildcard expanded to"), "{msg}");
        let msg = VersionRange::parse("1.0.0 ||").unwrap_err().to_string();
        assert!(msg.contains("ends with"), "{msg}");
    }

    #[test]
    fn display_gives_back_the_text() {
        for s in [">=1.0.0 <2.0.0", "  1.x ||  >= 3.0.0", ">1.2.3"] {
            let r: VersionRange = s.parse().unwrap();
            assert_eq!(r.to_string(), s);
            assert_eq!(r.as_str(), s);
        }
    }

    #[test]
    fn split_and_trim_matches_blang() {
        for (input, want) in [
            ("1.2.3 1.2.3", vec!["1.2.3", "1.2.3"]),
            ("     1.2.3     1.2.3     ", vec!["1.2.3", "1.2.3"]),
            ("  >=   1.2.3   <=  1.2.3   ", vec![">=1.2.3", "<=1.2.3"]),
            (
                "1.2.3 || >=1.2.3 <1.2.3",
                vec!["1.2.3", "||", ">=1.2.3", "<1.2.3"],
            ),
            (
                "      1.2.3      ||     >=1.2.3     <1.2.3    ",
                vec!["1.2.3", "||", ">=1.2.3", "<1.2.3"],
            ),
            ("a b", vec![]),
        ] {
            assert_eq!(split_and_trim(input), want, "{input:?}");
        }
    }

    #[test]
    fn wildcard_expansion_matches_blang() {
        for (input, want) in [
            (">=1.2.x", vec![">=1.2.0"]),
            ("<=1.2.x", vec!["<1.3.0"]),
            (">1.2.x", vec![">=1.3.0"]),
            ("<1.2.x", vec!["<1.2.0"]),
            ("!=1.2.x", vec!["<1.2.0", ">=1.3.0"]),
            (">=1.x", vec![">=1.0.0"]),
            ("<=1.x", vec!["<2.0.0"]),
            (">1.x", vec![">=2.0.0"]),
            ("<1.x", vec!["<1.0.0"]),
            ("!=1.x", vec!["<1.0.0", ">=2.0.0"]),
            ("1.2.x", vec![">=1.2.0", "<1.3.0"]),
            ("1.x", vec![">=1.0.0", "<2.0.0"]),
            ("1.x.x", vec![">=1.0.0", "<1.1.0"]),
        ] {
            let got = expand_wildcards(&[vec![input.to_string()]]).unwrap();
            let got: Vec<&str> = got[0].iter().map(|t| t.text.as_str()).collect();
            assert_eq!(got, want, "{input:?}");
        }
        assert!(expand_wildcards(&[vec!["foox".to_string()]]).is_err());
    }

    #[test]
    fn parse_version_follows_blang_parse() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "1.2.3-alpha.1",
            "1.2.3-0a",
            "1.2.3--",
            "1.2.3+build.01",
            "1.2.3-rc.1+b.2",
        ] {
            let parsed = parse_version(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(parsed.to_string(), ok);
        }
        for bad in [
            "",
            "1",
            "1.2",
            "v1.2.3",
            " 1.2.3",
            "1.2.3 ",
            "01.2.3",
            "1.2.3-01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3.4",
            "1.2.3-a+b+c",
            "1.2.3-é",
            "1.2.3-99999999999999999999",
            "18446744073709551616.0.0",
        ] {
            assert!(parse_version(bad).is_err(), "{bad:?} should be rejected");
            assert!(blang_parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
#[cfg(test)]
mod cross_check {
    /// Every string of up to six characters over a small alphabet: blang's rules and the
    /// `semver` crate agree on what is a version (they differ only on pre-release numbers
    /// beyond 64 bits, which need longer strings) and on its value.
    #[test]
    fn blang_parse_agrees_with_semver_crate() {
        let alphabet = ['0', '1', '.', '-', '+', 'a', '9'];
        for len in 1..=6 {
            let mut idx = vec![0usize; len];
            loop {
                let s: String = idx.iter().map(|&i| alphabet[i]).collect();
                match (super::blang_parse(&s), semver::Version::parse(&s)) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y, "{s}"),
                    (Err(_), Err(_)) => {}
                    (b, r) => panic!("{s}: blang {b:?}, semver crate {r:?}"),
                }
                let Some(k) = idx.iter().position(|&i| i + 1 < alphabet.len()) else {
                    break;
                };
                idx[k] += 1;
                idx[..k].fill(0);
            }
        }
    }
}
