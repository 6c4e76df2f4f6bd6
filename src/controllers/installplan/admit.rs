//! Which steps a plan may carry, decided (pure) before any step runs, so that a plan with
//! one step it may not take leaves nothing behind. Whoever can write a plan's status acts
//! with OLM's rights (or its group's account's), so this is upstream's fixed list: the kinds
//! its executor handles by name plus `supportedresources.go`'s; anything else, an
//! APIService or a webhook configuration say, is `UnsupportedResource`. A namespaced step
//! is always written into the plan's namespace (the executor sets it).

use kube::api::GroupVersionKind;
use serde_json::Value;

use super::error::StepError;
use crate::api::{Step, StepResource};
use crate::controllers::plan::steps::{BUNDLE_REFERENCE, KIND_CRD, KIND_CSV, KIND_SUBSCRIPTION};

/// A step the plan may not carry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Inadmissible {
    #[error(
        "step {index} {kind} {name}: {group}/{version} {kind} is not a kind an InstallPlan may create (UnsupportedResource)"
    )]
    Unsupported {
        index: usize,
        group: String,
        version: String,
        kind: String,
        name: String,
    },
    #[error("step {index} {kind} {name}: the manifest is not JSON: {message}")]
    NotJson {
        index: usize,
        kind: String,
        name: String,
        message: String,
    },
}

impl Inadmissible {
    /// The position of the step in `status.plan`.
    pub fn index(&self) -> usize {
        match self {
            Inadmissible::Unsupported { index, .. } | Inadmissible::NotJson { index, .. } => {
                *index - 1
            }
        }
    }
}

/// The group each supported kind must be of (the kinds `supportedresources.go` lists are
/// CRD-defined: a look-alike kind in a group of a tenant's own CRD is not it).
fn supported_group(kind: &str) -> Option<&'static str> {
    Some(match kind {
        KIND_CSV | KIND_SUBSCRIPTION => "operators.coreos.com",
        KIND_CRD => "apiextensions.k8s.io",
        "Secret" | "ConfigMap" | "ServiceAccount" | "Service" => "",
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => {
            "rbac.authorization.k8s.io"
        }
        "PrometheusRule" | "ServiceMonitor" => "monitoring.coreos.com",
        "PodDisruptionBudget" => "policy",
        "PriorityClass" => "scheduling.k8s.io",
        "VerticalPodAutoscaler" => "autoscaling.k8s.io",
        "NetworkPolicy" => "networking.k8s.io",
        "ConsoleYAMLSample" | "ConsoleQuickStart" | "ConsoleCLIDownload" | "ConsoleLink"
        | "ConsolePlugin" => "console.openshift.io",
        _ => return None,
    })
}

/// Whether a plan may create objects of `gvk`.
pub fn supported(gvk: &GroupVersionKind) -> bool {
    supported_group(&gvk.kind) == Some(gvk.group.as_str())
}

/// Why the step of `r` may not create `gvk` (a step read back from its catalog is checked
/// again as it runs); None when it may.
pub fn unsupported(r: &StepResource, gvk: &GroupVersionKind) -> Option<StepError> {
    (!supported(gvk)).then(|| StepError::Unsupported {
        kind: r.kind.clone(),
        name: r.name.clone(),
        api_version: gvk.api_version(),
        served_kind: gvk.kind.clone(),
    })
}

/// The first step of `steps` the plan may not carry. A step that refers to its bundle in
/// the catalog is the catalog's object, checked when its plan was made.
/// Steps of kinds off the list come back for the caller to refuse when the API server serves
/// their kind (an APIService, a webhook configuration, a tenant's look-alike CRD): one it
/// does not serve could create nothing, and fails at its turn as not found on the cluster
/// after the retry timeout, as upstream's executor fails it.
pub fn admit(steps: &[Step]) -> Result<Vec<Inadmissible>, Inadmissible> {
    let mut unlisted = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let r = &step.resource;
        let object: Value =
            serde_json::from_str(r.manifest.as_deref().unwrap_or("null")).map_err(|e| {
                Inadmissible::NotJson {
                    index: i + 1,
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    message: e.to_string(),
                }
            })?;
        if object.get(BUNDLE_REFERENCE).is_some() {
            continue;
        }
        let gvk = step_gvk(r, &object);
        if !supported(&gvk) {
            unlisted.push(Inadmissible::Unsupported {
                index: i + 1,
                group: gvk.group,
                version: gvk.version,
                kind: gvk.kind,
                name: r.name.clone(),
            });
        }
    }
    Ok(unlisted)
}

/// What a step creates: the manifest's own apiVersion and kind when it has them (clients
/// write steps with whatever version string), else the step's resource fields. The kinds
/// upstream's executor knows by name are found by name, as there: a manifest whose
/// apiVersion is not of the kind's group (upstream's own tests write CRDs as `v1`) gets the
/// kind's version. A CSV is always `operators.coreos.com/v1alpha1`, the only version there
/// is: published bundles write `v1alpha1`, `operators.coreos.com/v1` and others, which
/// upstream's typed decoding never notices.
pub fn step_gvk(r: &StepResource, object: &Value) -> GroupVersionKind {
    if r.kind == KIND_CSV {
        return GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", KIND_CSV);
    }
    let (group, version, kind) = match (object["apiVersion"].as_str(), object["kind"].as_str()) {
        (Some(api_version), Some(kind)) if !kind.is_empty() => {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            (group, version, kind)
        }
        _ => (r.group.as_str(), r.version.as_str(), r.kind.as_str()),
    };
    match known_kind(kind) {
        Some((known_group, _)) if known_group == group => {
            GroupVersionKind::gvk(group, version, kind)
        }
        Some((known_group, known_version)) => {
            GroupVersionKind::gvk(known_group, known_version, kind)
        }
        None => GroupVersionKind::gvk(group, version, kind),
    }
}

/// The group and version of a kind upstream's executor handles by name.
fn known_kind(kind: &str) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        KIND_CRD => ("apiextensions.k8s.io", "v1"),
        KIND_SUBSCRIPTION => ("operators.coreos.com", "v1alpha1"),
        "Secret" | "ConfigMap" | "ServiceAccount" | "Service" => ("", "v1"),
        "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" => {
            ("rbac.authorization.k8s.io", "v1")
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::StepStatus;
    use crate::controllers::plan::steps::KIND_CSV;

    fn step(kind: &str, manifest: &Value) -> Step {
        Step {
            resolving: "op.v1".into(),
            resource: StepResource {
                kind: kind.into(),
                name: "x".into(),
                manifest: Some(manifest.to_string()),
                ..StepResource::default()
            },
            optional: None,
            status: StepStatus::Unknown,
        }
    }

    #[test]
    fn upstreams_kinds_pass_and_any_other_is_named_for_the_caller_to_refuse() {
        let ok = [
            step(
                "ClusterRole",
                &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}),
            ),
            step(
                "ConfigMap",
                &json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            ),
            step(
                "ServiceMonitor",
                &json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor"}),
            ),
            // Upstream's own tests write CRDs as `v1`: the kind's group is found by name.
            step(KIND_CRD, &json!({"apiVersion": "v1", "kind": KIND_CRD})),
        ];
        assert_eq!(admit(&ok), Ok(vec![]));
        for (kind, api_version) in [
            ("APIService", "apiregistration.k8s.io/v1"),
            (
                "ValidatingWebhookConfiguration",
                "admissionregistration.k8s.io/v1",
            ),
            ("Namespace", "v1"),
            ("ServiceMonitor", "evil.example.com/v1"),
        ] {
            let mut steps = ok.to_vec();
            steps.push(step(
                kind,
                &json!({"apiVersion": api_version, "kind": kind}),
            ));
            // For the caller to refuse when served.
            let unlisted = admit(&steps).unwrap();
            assert_eq!(unlisted.len(), 1, "{unlisted:?}");
            assert_eq!(unlisted[0].index(), 4, "{}", unlisted[0]);
            assert!(
                unlisted[0].to_string().contains("UnsupportedResource"),
                "{}",
                unlisted[0]
            );
        }
    }

    #[test]
    fn the_manifests_kind_decides_not_the_steps_label() {
        let disguised = step(
            "ConfigMap",
            &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService"}),
        );
        assert!(
            matches!(&admit(&[disguised]).unwrap()[..], [Inadmissible::Unsupported { kind, .. }] if kind == "APIService")
        );
        let broken = step("ConfigMap", &json!(null));
        let mut broken = broken;
        broken.resource.manifest = Some("{".into());
        assert!(matches!(
            admit(&[broken]),
            Err(Inadmissible::NotJson { .. })
        ));
    }

    #[test]
    fn a_step_is_dispatched_on_its_manifests_kind_whatever_version_the_step_says() {
        let resource = StepResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1beta1".into(),
            kind: "CustomResourceDefinition".into(),
            name: "things.example.com".into(),
            ..StepResource::default()
        };
        let manifest =
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"});
        let gvk = step_gvk(&resource, &manifest);
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str()),
            ("apiextensions.k8s.io", "v1")
        );
        let core = step_gvk(&resource, &json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert_eq!(
            (
                core.group.as_str(),
                core.version.as_str(),
                core.kind.as_str()
            ),
            ("", "v1", "ConfigMap")
        );
        let bare = step_gvk(&resource, &json!({}));
        assert_eq!(bare.version, "v1beta1");
        // Upstream's tests write CRDs as plain `v1`: a kind known by name gets its group.
        let plain = step_gvk(
            &resource,
            &json!({"apiVersion": "v1", "kind": "CustomResourceDefinition"}),
        );
        assert_eq!(plain.api_version(), "apiextensions.k8s.io/v1");
        let role = step_gvk(&resource, &json!({"apiVersion": "v1", "kind": "Role"}));
        assert_eq!(role.api_version(), "rbac.authorization.k8s.io/v1");
        // Kinds it does not know keep what they say.
        let other = step_gvk(
            &resource,
            &json!({"apiVersion": "example.com/v2", "kind": "Thing"}),
        );
        assert_eq!(other.api_version(), "example.com/v2");
    }

    #[test]
    fn a_csv_is_v1alpha1_whatever_version_its_bundle_wrote() {
        let resource = StepResource {
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: KIND_CSV.into(),
            name: "k8gb.v0.11.4".into(),
            ..StepResource::default()
        };
        for written in [
            "v1alpha1",
            "operators.coreos.com/v1",
            "operators.coreos.com/v1beta1",
        ] {
            let manifest = json!({"apiVersion": written, "kind": KIND_CSV});
            let gvk = step_gvk(&resource, &manifest);
            assert_eq!(
                gvk.api_version(),
                "operators.coreos.com/v1alpha1",
                "{written}"
            );
        }
    }
}
