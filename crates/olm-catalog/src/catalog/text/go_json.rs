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
    // Line breaks are rare (they cost a copy); most data decodes as it is.
    if memchr::memchr2(b'\r', b'\n', s.as_bytes()).is_none() {
        return GO_STD.decode(s);
    }
    let cleaned: Vec<u8> = s.bytes().filter(|&b| b != b'\r' && b != b'\n').collect();
    GO_STD.decode(cleaned)
}

/// `value` encoded as Go's `json.Marshal` encodes the same data (what opm writes into an
/// `olm.bundle.object`): object keys sorted, `<`, `>`, `&`, U+2028 and U+2029 escaped, and
/// floats in Go's format (`1` for 1.0, `1e+21`), so the bytes, and with them the content
/// digests, match upstream's.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    serde::Serialize::serialize(&SortedKeys(value), &mut ser).expect("JSON value serializes");
    out
}

/// Serializes a value with object keys in sorted order, whatever order the map keeps.
struct SortedKeys<'a>(&'a Value);

impl serde::Serialize for SortedKeys<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&SortedKeys(item))?;
                }
                seq.end()
            }
            // serde_json's map is sorted already, unless a dependency turns on its
            // `preserve_order` feature: checking costs less than sorting.
            Value::Object(map) if map.keys().is_sorted() => {
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, &SortedKeys(v))?;
                }
                m.end()
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                let mut m = s.serialize_map(Some(keys.len()))?;
                for k in keys {
                    m.serialize_entry(k, &SortedKeys(&map[k]))?;
                }
                m.end()
            }
            other => other.serialize(s),
        }
    }
}

struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let bytes = fragment.as_bytes();
        let (mut start, mut from) = (0, 0);
        // The next 0xE2 (which starts U+2028 and U+2029), looked for again only once passed.
        let mut e2 = memchr::memchr(0xe2, bytes);
        loop {
            if e2.is_some_and(|e| e < from) {
                e2 = memchr::memchr(0xe2, &bytes[from..]).map(|i| from + i);
            }
            let html = memchr::memchr3(b'<', b'>', b'&', &bytes[from..]).map(|i| from + i);
            let Some(i) = [html, e2].into_iter().flatten().min() else {
                break;
            };
            let (escaped, len) = match bytes[i] {
                b'<' => ("\\u003c", 1),
                b'>' => ("\\u003e", 1),
                b'&' => ("\\u0026", 1),
                _ => match bytes.get(i + 1..i + 3) {
                    Some([0x80, 0xa8]) => ("\\u2028", 3),
                    Some([0x80, 0xa9]) => ("\\u2029", 3),
                    _ => {
                        from = i + 1;
                        continue;
                    }
                },
            };
            writer.write_all(&bytes[start..i])?;
            writer.write_all(escaped.as_bytes())?;
            start = i + len;
            from = start;
        }
        writer.write_all(&bytes[start..])
    }

    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }
}

/// Go's encoding of a float64: shortest digits, exponent form only below 1e-6 or from 1e21.
fn go_float(value: f64) -> String {
    let abs = value.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format!("{value:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp:0>2}"),
            _ => s,
        }
    } else {
        format!("{value}")
    }
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
    fn encodes_as_go_marshal_does() {
        let value = json!({"b": [1.0, 2.5, 1e21, 1.5e-7, -3], "a": "<x> & \u{2028}\n\"q\""});
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            r#"{"a":"\u003cx\u003e \u0026 \u2028\n\"q\"","b":[1,2.5,1e+21,1.5e-7,-3]}"#
        );
    }

    #[test]
    fn only_what_go_escapes_is_escaped() {
        // Other characters that start with 0xE2 (an en dash, curly quotes) stay as they are.
        let value = json!("– “q” <<&>>\u{2029}\u{2028}x\u{2027}€");
        assert_eq!(
            String::from_utf8(to_vec(&value)).unwrap(),
            "\"– “q” \\u003c\\u003c\\u0026\\u003e\\u003e\\u2029\\u2028x\u{2027}€\""
        );
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
