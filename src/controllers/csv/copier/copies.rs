//! Copied CSVs, built (pure): where they go and what they hold. A copy tells users of a
//! target namespace which operator manages it; it is made cheap (upstream #2701: copies took
//! clusters down): an empty `spec.install` and no icon, only the phase/reason/message of the status,
//! and an `olm.copiedHash` annotation so a copy is written only when its source changes.

use super::names::{COPIED_HASH_ANNOTATION, Entry};
use serde_json::{Value, json};

use crate::api::{
    COPIED_FROM_LABEL, ClusterServiceVersion, CsvPhase, CsvReason, NamedInstallStrategy,
};
use crate::cluster::ownership::hash_json;

/// Whether copies follow this phase. The passage through Pending, InstallReady and
/// Installing is not copied: it would cost two writes per target namespace per phase.
pub fn settled(phase: Option<CsvPhase>) -> bool {
    matches!(phase, Some(CsvPhase::Succeeded | CsvPhase::Failed))
}

/// The namespaces that get a copy: every target but the operator's own; for an
/// AllNamespaces group every namespace, unless copies are disabled for those.
pub fn copy_namespaces(
    targets: &[String],
    operator_namespace: &str,
    all_namespaces: &[String],
    disabled_for_all_namespaces: bool,
) -> Vec<String> {
    let all = targets.len() == 1 && targets[0].is_empty();
    let mut out: Vec<String> = if all {
        if disabled_for_all_namespaces {
            vec![]
        } else {
            all_namespaces.to_vec()
        }
    } else {
        targets.to_vec()
    };
    out.retain(|ns| !ns.is_empty() && ns != operator_namespace);
    out.sort();
    out.dedup();
    out
}

/// The copy of `source` for `namespace`: the object to apply, its status, and the hash
/// its annotation carries.
pub fn build(source: &ClusterServiceVersion, namespace: &str) -> (Value, Value, String) {
    let operator_namespace = source.metadata.namespace.clone().unwrap_or_default();
    let mut spec = source.spec.clone();
    // An empty strategy, not none: upstream's typed clients read a copy and write it back
    // with `deployments: null` otherwise, which the CRD's schema refuses (its upstream e2e
    // "cleanup csvs with bad namespace annotation" updates a copy so).
    spec.install = NamedInstallStrategy {
        strategy: spec.install.strategy.clone(),
        spec: Some(crate::api::StrategyDetailsDeployment::default()),
    };
    spec.icon.clear();
    let mut labels = source.metadata.labels.clone().unwrap_or_default();
    // A copy is no component of the Operator (upstream disowns copies).
    labels.retain(|key, _| !key.starts_with(crate::api::OPERATOR_LABEL_PREFIX));
    labels.insert(COPIED_FROM_LABEL.into(), operator_namespace.clone());
    let mut annotations = source.metadata.annotations.clone().unwrap_or_default();
    annotations.remove(COPIED_HASH_ANNOTATION);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    // The group's targets belong to the operator's own namespace (upstream strips them).
    annotations.remove("olm.targetNamespaces");
    let status = source.status.clone().unwrap_or_default();
    let copied_status = json!({
        "phase": status.phase,
        "reason": CsvReason::Copied.as_str(),
        "message": format!("The operator is running in {operator_namespace} but is managing this namespace"),
        "lastUpdateTime": status.last_update_time,
        "lastTransitionTime": status.last_transition_time,
    });
    let hash = hash_json(&(&spec, &labels, &annotations, &copied_status));
    annotations.insert(COPIED_HASH_ANNOTATION.into(), hash.clone());
    let object = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": source.metadata.name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    });
    (object, copied_status, hash)
}

/// What a target namespace holds under the copy's name.
#[derive(Debug, PartialEq, Eq)]
pub enum Existing {
    /// This source's copy, as it would be written now.
    Current,
    /// Nothing, or this source's copy of an older state: write it.
    Stale,
    /// The namespace's own CSV, or another namespace's copy: never overwritten (upstream's
    /// copy fails to create there; a forced apply would turn a running operator into a copy).
    NotOurs,
}

/// Judges `existing` (what is known of the CSV of the copy's name in a target namespace)
/// against the copy of the source in `source_namespace` whose hash is `hash`.
pub fn existing_copy(existing: Option<&Entry>, source_namespace: &str, hash: &str) -> Existing {
    let Some(entry) = existing else {
        return Existing::Stale;
    };
    if entry.copied_from.as_deref() != Some(source_namespace) {
        return Existing::NotOurs;
    }
    if entry.hash.as_deref() == Some(hash) && !entry.drifted {
        Existing::Current
    } else {
        Existing::Stale
    }
}

#[cfg(test)]
mod tests {
    use super::super::names::status_drifted;
    use super::*;
    use crate::api::{ClusterServiceVersionStatus, Icon, StrategyDetailsDeployment};

    #[test]
    fn a_copy_is_written_only_over_nothing_or_its_own_older_self() {
        let copy = |source: Option<&str>, hash: Option<&str>, drifted: bool| Entry {
            copied_from: source.map(Into::into),
            hash: hash.map(Into::into),
            drifted,
        };
        assert_eq!(existing_copy(None, "op", "h1"), Existing::Stale);
        let current = copy(Some("op"), Some("h1"), false);
        assert_eq!(existing_copy(Some(&current), "op", "h1"), Existing::Current);
        assert_eq!(existing_copy(Some(&current), "op", "h2"), Existing::Stale);
        let drifted = copy(Some("op"), Some("h1"), true);
        assert_eq!(existing_copy(Some(&drifted), "op", "h1"), Existing::Stale);
        // The namespace's own CSV, and a copy from another operator namespace.
        let own = copy(None, None, false);
        assert_eq!(existing_copy(Some(&own), "op", "h1"), Existing::NotOurs);
        let other = copy(Some("elsewhere"), Some("h1"), false);
        assert_eq!(existing_copy(Some(&other), "op", "h1"), Existing::NotOurs);
    }

    #[test]
    fn copies_go_to_every_target_but_the_own_namespace() {
        let all = vec!["a".to_string(), "b".into(), "op".into()];
        assert_eq!(
            copy_namespaces(&["op".into()], "op", &all, false),
            Vec::<String>::new()
        );
        assert_eq!(
            copy_namespaces(&["a".into(), "op".into()], "op", &all, false),
            ["a"]
        );
        assert_eq!(
            copy_namespaces(&[String::new()], "op", &all, false),
            ["a", "b"]
        );
        assert!(copy_namespaces(&[String::new()], "op", &all, true).is_empty());
        // Disabling concerns AllNamespaces operators only.
        assert_eq!(
            copy_namespaces(&["a".into(), "b".into()], "op", &all, true),
            ["a", "b"]
        );
    }

    #[test]
    fn only_settled_phases_are_copied() {
        assert!(settled(Some(CsvPhase::Succeeded)));
        assert!(settled(Some(CsvPhase::Failed)));
        for transient in [
            CsvPhase::Pending,
            CsvPhase::InstallReady,
            CsvPhase::Installing,
        ] {
            assert!(!settled(Some(transient)));
        }
        assert!(!settled(None));
    }

    #[test]
    fn a_copy_drops_install_and_icon_and_mirrors_the_phase() {
        let mut source = ClusterServiceVersion::new("op.v1", Default::default());
        source.metadata.namespace = Some("op".into());
        source.spec.install.strategy = "deployment".into();
        source.spec.install.spec = Some(StrategyDetailsDeployment::default());
        source.spec.icon = vec![Icon::default()];
        source.status = Some(ClusterServiceVersionStatus {
            phase: Some(CsvPhase::Succeeded),
            ..Default::default()
        });
        let (object, status, hash) = build(&source, "a");
        assert_eq!(
            object["spec"]["install"]["spec"],
            serde_json::json!({"deployments": []})
        );
        assert!(object["spec"]["icon"].is_null());
        assert_eq!(object["metadata"]["labels"]["olm.copiedFrom"], "op");
        assert_eq!(
            object["metadata"]["annotations"][COPIED_HASH_ANNOTATION],
            hash.as_str()
        );
        assert_eq!(status["phase"], "Succeeded");
        assert_eq!(status["reason"], "Copied");
        // The hash moves with the source's phase, not with the target namespace.
        assert_eq!(build(&source, "b").2, hash);
        source.status.as_mut().unwrap().phase = Some(CsvPhase::Failed);
        assert_ne!(build(&source, "a").2, hash);
    }

    /// A status another writer changed after ours is drift; ours written after theirs is
    /// not (their entry may stay, with fields of their own).
    #[test]
    fn status_drift_is_another_writers_newer_status_write() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
        let entry = |manager: &str, subresource: Option<&str>, second: i64| ManagedFieldsEntry {
            manager: Some(manager.into()),
            subresource: subresource.map(str::to_string),
            time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(second).unwrap(),
            )),
            ..ManagedFieldsEntry::default()
        };
        let ours = "olm-csv";
        let clean = [entry(ours, None, 10), entry(ours, Some("status"), 10)];
        assert!(!status_drifted(&clean, ours));
        let edited = [
            entry(ours, Some("status"), 10),
            entry("e2e.test", Some("status"), 12),
        ];
        assert!(status_drifted(&edited, ours));
        let set_back = [
            entry(ours, Some("status"), 13),
            entry("e2e.test", Some("status"), 12),
        ];
        assert!(!status_drifted(&set_back, ours));
        // Another writer's spec or labels are not the status.
        let labelled = [entry(ours, Some("status"), 10), entry("kubectl", None, 20)];
        assert!(!status_drifted(&labelled, ours));
        // A copy whose status only others wrote.
        assert!(status_drifted(&[entry("someone", Some("status"), 1)], ours));
    }
}
