//! Label selectors in Kubernetes' text form (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) and the
//! one field selector upstream supports (`metadata.name`).

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// Why a label or field selector was refused (the text of the 400 that answers it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unbalanced ')' in label selector {0:?}")]
    UnbalancedParenthesis(String),
    #[error("unclosed '(' in label selector {0:?}")]
    UnclosedParenthesis(String),
    #[error("unknown operator in label selector requirement {0:?}")]
    UnknownOperator(String),
    #[error("expected a parenthesised list of values in {0:?}")]
    NoValueList(String),
    #[error("invalid label key {key:?} in label selector requirement {requirement:?}")]
    InvalidKey { key: String, requirement: String },
    #[error("invalid label value {value:?} in label selector requirement {requirement:?}")]
    InvalidValue { value: String, requirement: String },
    #[error("field selector {0:?}: only metadata.name=VALUE is supported")]
    FieldRequirement(String),
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| SelectorError::UnbalancedParenthesis(text.to_string()))?;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::UnclosedParenthesis(text.to_string()));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, SelectorError> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_of(key.trim(), part)?));
    }
    for (op, make) in [
        (
            "!=",
            Requirement::NotEquals as fn(String, String) -> Requirement,
        ),
        ("==", Requirement::Equals),
        ("=", Requirement::Equals),
    ] {
        if let Some((key, value)) = part.split_once(op) {
            return Ok(make(
                key_of(key.trim(), part)?,
                value_of(value.trim(), part)?,
            ));
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = key_of(words[0], part)?;
        let rest = words[1].trim_start();
        let (notin, rest) = if let Some(r) = rest.strip_prefix("notin") {
            (true, r)
        } else if let Some(r) = rest.strip_prefix("in") {
            (false, r)
        } else {
            return Err(SelectorError::UnknownOperator(part.to_string()));
        };
        let values = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| SelectorError::NoValueList(part.to_string()))?;
        let values = values
            .split(',')
            .map(|v| value_of(v.trim(), part))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(if notin {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(key_of(part, part)?))
}

/// A label key: `[prefix/]name`, name of alphanumerics, '-', '_', '.'.
fn key_of(key: &str, part: &str) -> Result<String, SelectorError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let valid_name = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let valid_prefix = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    if valid_name && valid_prefix {
        Ok(key.to_string())
    } else {
        Err(SelectorError::InvalidKey {
            key: key.to_string(),
            requirement: part.to_string(),
        })
    }
}

fn value_of(value: &str, part: &str) -> Result<String, SelectorError> {
    let valid = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && (value.is_empty()
            || (value.starts_with(|c: char| c.is_ascii_alphanumeric())
                && value.ends_with(|c: char| c.is_ascii_alphanumeric())));
    if valid {
        Ok(value.to_string())
    } else {
        Err(SelectorError::InvalidValue {
            value: value.to_string(),
            requirement: part.to_string(),
        })
    }
}

/// The name a field selector asks for: `metadata.name=X` (or `==`); an empty selector asks
/// for none. Any other field is refused, as upstream.
pub fn name_from_field_selector(text: &str) -> Result<Option<String>, SelectorError> {
    let mut name = None;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (field, value) = part
            .split_once("==")
            .or_else(|| part.split_once('='))
            .filter(|(f, _)| !f.ends_with('!'))
            .ok_or_else(|| SelectorError::FieldRequirement(part.to_string()))?;
        if field.trim() != "metadata.name" {
            return Err(SelectorError::UnsupportedField(field.trim().to_string()));
        }
        name = Some(value.trim().to_string());
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_operator_selects_as_kubernetes_does() {
        let l = labels(&[
            ("catalog", "ops"),
            ("catalog-namespace", "olm"),
            ("operatorframework.io/arch.amd64", "supported"),
        ]);
        for (selector, expected) in [
            ("", true),
            ("catalog=ops", true),
            ("catalog==ops", true),
            ("catalog=other", false),
            ("catalog!=other", true),
            ("catalog in (a, ops)", true),
            ("catalog notin (a,ops)", false),
            ("missing notin (a)", true),
            ("operatorframework.io/arch.amd64", true),
            ("!operatorframework.io/arch.arm64", true),
            ("!catalog", false),
            ("catalog=ops,catalog-namespace=olm", true),
            ("catalog=ops, catalog-namespace=x", false),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).unwrap().matches(&l),
                expected,
                "{selector}"
            );
        }
    }

    #[test]
    fn malformed_selectors_are_refused_naming_the_requirement() {
        for bad in ["a in (x", "a=(", "a b (x)", "=x", "a=b c", "bad key=x"] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert!(!err.to_string().is_empty(), "{bad}");
        }
        assert_eq!(
            LabelSelector::parse("a in (x").unwrap_err().to_string(),
            r#"unclosed '(' in label selector "a in (x""#
        );
        assert_eq!(
            LabelSelector::parse("bad key=x").unwrap_err().to_string(),
            r#"invalid label key "bad key" in label selector requirement "bad key=x""#
        );
    }

    #[test]
    fn only_metadata_name_is_a_field_selector() {
        assert_eq!(name_from_field_selector("").unwrap(), None);
        assert_eq!(
            name_from_field_selector("metadata.name=at").unwrap(),
            Some("at".into())
        );
        assert_eq!(
            name_from_field_selector("metadata.name==at").unwrap(),
            Some("at".into())
        );
        assert_eq!(
            name_from_field_selector("status.catalogSource=x"),
            Err(SelectorError::UnsupportedField(
                "status.catalogSource".into()
            ))
        );
        assert_eq!(
            name_from_field_selector("status.catalogSource=x")
                .unwrap_err()
                .to_string(),
            "field label not supported: status.catalogSource"
        );
        assert!(name_from_field_selector("metadata.name!=x").is_err());
    }
}
