//! Upstream's record of which CSVs a CRD was installed alongside: one annotation per CSV,
//! `operatorframework.io/installed-alongside-<fnv64a of "namespace/name" in hex>` with the
//! value `namespace/name`. Upstream's tools read it (its e2e suite removes the CRDs that
//! carry one after each spec), and a CRD that several operators install keeps one per
//! CSV that still exists.

use std::collections::BTreeMap;

pub const ANNOTATION_PREFIX: &str = "operatorframework.io/installed-alongside-";

/// The annotation naming `namespace`/`csv`.
pub fn key(namespace: &str, csv: &str) -> String {
    format!(
        "{ANNOTATION_PREFIX}{:x}",
        fnv64a(format!("{namespace}/{csv}").as_bytes())
    )
}

fn fnv64a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The alongside annotations a CRD step writes: those the CRD already has for CSVs that
/// still exist (`exists(namespace, name)`; copies do not count), and its own CSV's.
pub fn annotations(
    existing: Option<&BTreeMap<String, String>>,
    namespace: &str,
    csv: &str,
    exists: impl Fn(&str, &str) -> bool,
) -> BTreeMap<String, String> {
    let mut kept: BTreeMap<String, String> = existing
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(ANNOTATION_PREFIX))
        .filter_map(|(_, v)| v.split_once('/'))
        .filter(|(ns, name)| (*ns, *name) != (namespace, csv) && exists(ns, name))
        .map(|(ns, name)| (key(ns, name), format!("{ns}/{name}")))
        .collect();
    kept.insert(key(namespace, csv), format!("{namespace}/{csv}"));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_upstreams() {
        // FNV-1a 64 of the empty input is its offset basis; of "a" a known vector.
        assert_eq!(fnv64a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            key("ns", "csv"),
            format!("{ANNOTATION_PREFIX}{:x}", fnv64a(b"ns/csv"))
        );
    }

    #[test]
    fn other_csvs_stay_while_they_exist() {
        let existing: BTreeMap<String, String> = [
            (key("a", "one"), "a/one".to_string()),
            (key("a", "gone"), "a/gone".to_string()),
            ("unrelated".to_string(), "x".to_string()),
            (format!("{ANNOTATION_PREFIX}junk"), "no-slash".to_string()),
        ]
        .into();
        let got = annotations(Some(&existing), "b", "two", |_, name| name != "gone");
        let values: Vec<&str> = got.values().map(String::as_str).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            values.contains(&"a/one") && values.contains(&"b/two"),
            "{got:?}"
        );
        // Applying again for the same CSV changes nothing.
        assert_eq!(annotations(Some(&got), "b", "two", |_, _| true), got);
    }
}
