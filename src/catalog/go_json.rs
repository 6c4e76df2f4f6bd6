//! The parts of Go's `encoding/json` decoding that serde does not do and upstream's catalogs
//! rely on: object keys match struct field names without regard to case (an exact match
//! preferred), and `[]byte` fields are padded standard base64 in which newlines are ignored.

use base64::Engine;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};

/// The value Go would decode into the field `key`: `map[key]`, else the first entry whose
/// key equals `key` without regard to (ASCII) case.
pub fn get<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).or_else(|| {
        map.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

/// The field among `names` that Go decodes the JSON key `key` into: the one spelled exactly
/// so, else the first equal to it without regard to (ASCII) case.
pub fn field_name<'n>(names: &[&'n str], key: &str) -> Option<&'n str> {
    names
        .iter()
        .find(|n| **n == key)
        .or_else(|| names.iter().find(|n| n.eq_ignore_ascii_case(key)))
        .copied()
}

/// Go's decoding of a `[]byte` field: padded standard base64, `\r` and `\n` ignored,
/// non-zero trailing bits tolerated.
pub fn decode_bytes(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let cleaned: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    GO_STD.decode(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_match_exactly_first_then_without_case() {
        let value = json!({"Schema": "upper", "name": "exact", "NAME": "other"});
        let map = value.as_object().unwrap();
        assert_eq!(get(map, "schema"), Some(&json!("upper")));
        assert_eq!(get(map, "name"), Some(&json!("exact")));
        assert_eq!(get(map, "package"), None);

        let names = ["name", "Name", "skipRange"];
        assert_eq!(field_name(&names, "Name"), Some("Name"));
        assert_eq!(field_name(&names, "NAME"), Some("name"));
        assert_eq!(field_name(&names, "SKIPRANGE"), Some("skipRange"));
        assert_eq!(field_name(&names, "skips"), None);
    }

    #[test]
    fn bytes_decode_as_go_does() {
        assert_eq!(decode_bytes("aGVs\r\nbG8=").unwrap(), b"hello");
        // "aGk=" with the last character's unused bits set.
        assert_eq!(decode_bytes("aGl=").unwrap(), b"hi");
        assert!(decode_bytes("aGk").is_err(), "padding is required");
        assert!(decode_bytes(" aGk=").is_err(), "spaces are not ignored");
    }
}
