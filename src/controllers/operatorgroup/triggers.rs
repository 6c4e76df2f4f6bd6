//! What wakes a group's round: a change of a namespace it concerns, or of a CSV in its
//! namespace.

use kube::Resource;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::api::OperatorGroup;

/// Whether a change of the namespace `namespace` (created, relabelled, deleted) can change
/// what `group` holds: its own namespace, a namespace it names as a target, and any
/// namespace for a group that selects them by label or spans all of them. Waking every
/// group on every namespace change made a thousand OwnNamespace groups a million wake-ups,
/// each reading its CRDs (68,884 reconciles for 1,000 installs).
fn woken_by_namespace(group: &OperatorGroup, namespace: &str) -> bool {
    if group.metadata.namespace.as_deref() == Some(namespace) {
        return true;
    }
    match group.spec.target_namespaces.as_deref() {
        Some(targets) if !targets.is_empty() => targets.iter().any(|t| t == namespace),
        // A selector, or neither (every namespace).
        _ => true,
    }
}

/// The groups a change of `namespace` concerns (see [`woken_by_namespace`]).
pub(super) fn groups_for_namespace(
    groups: &Store<DeserializeGuard<OperatorGroup>>,
    namespace: &str,
) -> Vec<ObjectRef<DeserializeGuard<OperatorGroup>>> {
    groups
        .state()
        .iter()
        .filter(|g| match &g.0 {
            Ok(group) => woken_by_namespace(group, namespace),
            // Unreadable: its own namespace only (its error is reported there).
            Err(_) => g.meta().namespace.as_deref() == Some(namespace),
        })
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

/// Every OperatorGroup in `namespace` (None: all of them).
pub(super) fn groups_in(
    groups: &Store<DeserializeGuard<OperatorGroup>>,
    namespace: Option<&str>,
) -> Vec<ObjectRef<DeserializeGuard<OperatorGroup>>> {
    groups
        .state()
        .iter()
        .filter(|g| namespace.is_none() || g.meta().namespace.as_deref() == namespace)
        .map(|g| ObjectRef::from_obj(g.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(namespace: &str, spec: serde_json::Value) -> OperatorGroup {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": namespace},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_namespace_change_wakes_only_the_groups_it_concerns() {
        let own = group(
            "team-a",
            serde_json::json!({"targetNamespaces": ["team-a"]}),
        );
        assert!(woken_by_namespace(&own, "team-a"));
        assert!(
            !woken_by_namespace(&own, "team-b"),
            "another tenant's namespace"
        );
        let multi = group("ops", serde_json::json!({"targetNamespaces": ["a", "b"]}));
        assert!(woken_by_namespace(&multi, "ops"));
        assert!(woken_by_namespace(&multi, "b"));
        assert!(!woken_by_namespace(&multi, "c"));
        // By label, or every namespace: any namespace may join or leave.
        let selected = group(
            "ops",
            serde_json::json!({"selector": {"matchLabels": {"team": "x"}}}),
        );
        assert!(woken_by_namespace(&selected, "c"));
        let all = group("ops", serde_json::json!({}));
        assert!(woken_by_namespace(&all, "c"));
        let empty_targets = group("ops", serde_json::json!({"targetNamespaces": []}));
        assert!(woken_by_namespace(&empty_targets, "c"));
    }
}
