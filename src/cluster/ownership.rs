//! How objects OLM creates are traced back to what made them: upstream's owner labels
//! (`olm.owner`, `olm.owner.namespace`, `olm.owner.kind`), `olm.managed`, stable short
//! hashes for names and change detection, name truncation, and label-selector matching.
//! Used by the CSV and OperatorGroup controllers alike; nothing here does I/O.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};

pub const MANAGED_LABEL: &str = "olm.managed";
pub const OWNER_LABEL: &str = "olm.owner";
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
pub const PERMISSIONS_HASH_LABEL: &str = "olm.permissions.hash";
pub const DEPLOYMENT_SPEC_HASH_LABEL: &str = "olm.deployment-spec-hash";

/// The label an OperatorGroup puts on each of its target namespaces (upstream's
/// `olm.operatorgroup.uid/<uid>`, value empty): webhooks select namespaces by it.
pub fn operator_group_namespace_label(uid: &str) -> String {
    format!("olm.operatorgroup.uid/{uid}")
}

/// The labels that name an object's owner (`kind` is `ClusterServiceVersion` or
/// `OperatorGroup`), plus `olm.managed=true`.
pub fn owner_labels(kind: &str, name: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_LABEL.to_string(), "true".to_string()),
        (OWNER_LABEL.to_string(), name.to_string()),
        (OWNER_NAMESPACE_LABEL.to_string(), namespace.to_string()),
        (OWNER_KIND_LABEL.to_string(), kind.to_string()),
    ])
}

/// The label selector matching [`owner_labels`].
pub fn owner_selector(kind: &str, name: &str, namespace: &str) -> String {
    format!("{OWNER_KIND_LABEL}={kind},{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace}")
}

/// 64-bit FNV-1a: stable across processes, versions and platforms (names derived from it
/// must be the same after a restart or an upgrade of OLM, or objects would be duplicated).
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        for byte in (part.len() as u64).to_le_bytes().iter().chain(part.iter()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// A short hash (base-36, ≤ 13 chars) of `parts`, valid in names and label values.
pub fn short_hash(parts: &[&[u8]]) -> String {
    let mut value = fnv64(parts);
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(digits[(value % 36) as usize]);
        value /= 36;
        if value == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The hash of a JSON-serialisable value (serde_json writes maps in key order, so equal
/// values hash equally).
pub fn hash_json<T: serde::Serialize>(value: &T) -> String {
    let text = serde_json::to_vec(value).unwrap_or_default();
    short_hash(&[&text])
}

/// `<base>-<hash>`, with `base` cut so the whole stays within `limit` characters and does
/// not end in a character a name cannot end with.
pub fn name_with_hash(base: &str, hash: &str, limit: usize) -> String {
    let room = limit.saturating_sub(hash.len() + 1);
    let mut cut: String = base.chars().take(room).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    format!("{cut}-{hash}")
}

/// Whether `labels` match `selector` (matchLabels and matchExpressions, as the API server
/// evaluates them), by kube's [`Selector`]. An empty selector matches everything; one kube
/// cannot convert (an unknown operator, or `In` or `NotIn` with no `values` at all, which
/// the API server refuses too) matches nothing.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    Selector::try_from(selector.clone()).is_ok_and(|selector| selector.matches(labels))
}

/// Whether `selector` selects nothing in particular (no labels, no expressions).
pub fn selector_is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn hashes_are_stable_and_names_fit() {
        // Fixed value: a change here renames every object OLM created.
        assert_eq!(
            short_hash(&[b"reverse-words.v0.3.0"]),
            short_hash(&[b"reverse-words.v0.3.0"])
        );
        assert_eq!(fnv64(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(short_hash(&[b"ab", b"c"]), short_hash(&[b"a", b"bc"]));
        let name = name_with_hash(&"x".repeat(100), "abc123", 63);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-abc123"));
        assert_eq!(name_with_hash("a-b-", "h", 4), "a-h");
    }

    #[test]
    fn selectors_match_as_the_api_server_does() {
        let labels = BTreeMap::from([("team".to_string(), "a".to_string())]);
        let mut selector = LabelSelector::default();
        assert!(selector_is_empty(&selector) && selector_matches(&selector, &labels));
        selector.match_labels = Some(BTreeMap::from([("team".into(), "a".into())]));
        assert!(selector_matches(&selector, &labels));
        selector.match_expressions = Some(vec![LabelSelectorRequirement {
            key: "env".into(),
            operator: "DoesNotExist".into(),
            values: None,
        }]);
        assert!(selector_matches(&selector, &labels));
        selector.match_expressions = Some(vec![LabelSelectorRequirement {
            key: "team".into(),
            operator: "NotIn".into(),
            values: Some(vec!["a".into()]),
        }]);
        assert!(!selector_matches(&selector, &labels));
        let only = |key: &str, operator: &str, values: Option<&[&str]>| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: values.map(|v| v.iter().map(std::string::ToString::to_string).collect()),
            }]),
        };
        for (selector, expected) in [
            (only("team", "In", Some(&["b", "a"])), true),
            (only("team", "In", Some(&["b"])), false),
            (only("env", "In", Some(&["a"])), false),
            (only("env", "NotIn", Some(&["a"])), true),
            (only("team", "Exists", None), true),
            (only("env", "Exists", None), false),
            (only("team", "DoesNotExist", None), false),
            // What the API server refuses to convert matches nothing.
            (only("team", "Equals", Some(&["a"])), false),
            (only("env", "NotIn", None), false),
        ] {
            assert_eq!(
                selector_matches(&selector, &labels),
                expected,
                "{selector:?}"
            );
        }
        // matchLabels and matchExpressions must all hold.
        let mut both = only("team", "Exists", None);
        both.match_labels = Some(BTreeMap::from([("team".into(), "b".into())]));
        assert!(!selector_matches(&both, &labels));
    }
}
