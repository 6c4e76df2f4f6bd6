//! The pure half of the Operator controller: the components found → `status.components`,
//! as upstream shows them (a label selector, and one reference per object with the
//! conditions it reports, sorted so that an unchanged set writes nothing).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::{
    ClusterServiceVersion, ComponentCondition, Components, InstallPlan, OperatorCondition,
    OperatorStatus, RichReference, Subscription,
};

/// A reference to a component of kind `kind`.
pub fn reference(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    conditions: Vec<ComponentCondition>,
) -> RichReference {
    RichReference {
        kind: Some(kind.to_string()),
        namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_string),
        name: Some(name.to_string()),
        api_version: Some(api_version.to_string()),
        conditions,
    }
}

/// A CSV reports its phase as a condition (upstream's convention).
pub fn csv_conditions(csv: &ClusterServiceVersion) -> Vec<ComponentCondition> {
    let Some(status) = &csv.status else {
        return Vec::new();
    };
    let Some(phase) = serde_json::to_value(status.phase)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
    else {
        return Vec::new();
    };
    vec![ComponentCondition {
        type_: phase,
        status: "True".into(),
        reason: status.reason.clone().filter(|r| !r.is_empty()),
        message: status.message.clone().filter(|m| !m.is_empty()),
        last_update_time: status.last_update_time.clone(),
        last_transition_time: status.last_transition_time.clone(),
    }]
}

pub fn subscription_conditions(sub: &Subscription) -> Vec<ComponentCondition> {
    sub.status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| ComponentCondition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: None,
            last_transition_time: c.last_transition_time.clone(),
        })
        .collect()
}

pub fn install_plan_conditions(plan: &InstallPlan) -> Vec<ComponentCondition> {
    plan.status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| ComponentCondition {
            type_: c.type_.clone().unwrap_or_default(),
            status: c.status.clone().unwrap_or_default(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_update_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
        .collect()
}

pub fn deployment_conditions(deployment: &Deployment) -> Vec<ComponentCondition> {
    deployment
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| ComponentCondition {
            type_: c.type_.clone().unwrap_or_default(),
            status: c.status.clone().unwrap_or_default(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_update_time: c.last_update_time.clone(),
            last_transition_time: c.last_transition_time.clone(),
        })
        .collect()
}

/// A condition of a kind without `lastUpdateTime`; an empty reason or message is left out,
/// as upstream's copy (`omitempty`) shows it.
pub fn condition(
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    last_transition_time: Option<&Time>,
) -> ComponentCondition {
    let text = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
    ComponentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: text(reason),
        message: text(message),
        last_update_time: None,
        last_transition_time: last_transition_time.cloned(),
    }
}

/// [`condition`] of a kind whose reason, message and time are optional fields.
fn optional(
    type_: &str,
    status: &str,
    reason: &Option<String>,
    message: &Option<String>,
    time: &Option<Time>,
) -> ComponentCondition {
    condition(
        type_,
        status,
        reason.as_deref(),
        message.as_deref(),
        time.as_ref(),
    )
}

pub fn service_conditions(service: &Service) -> Vec<ComponentCondition> {
    service
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            let time = Some(&c.last_transition_time);
            condition(&c.type_, &c.status, Some(&c.reason), Some(&c.message), time)
        })
        .collect()
}

pub fn namespace_conditions(namespace: &Namespace) -> Vec<ComponentCondition> {
    namespace
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            let (reason, message) = (&c.reason, &c.message);
            optional(
                &c.type_,
                &c.status,
                reason,
                message,
                &c.last_transition_time,
            )
        })
        .collect()
}

pub fn api_service_conditions(api_service: &APIService) -> Vec<ComponentCondition> {
    api_service
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            let (reason, message) = (&c.reason, &c.message);
            optional(
                &c.type_,
                &c.status,
                reason,
                message,
                &c.last_transition_time,
            )
        })
        .collect()
}

pub fn operator_condition_conditions(
    condition_object: &OperatorCondition,
) -> Vec<ComponentCondition> {
    condition_object
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| {
            condition(
                &c.type_,
                &c.status,
                Some(&c.reason),
                Some(&c.message),
                c.last_transition_time.as_ref(),
            )
        })
        .collect()
}

/// The status listing `refs` under the selector of `label`.
pub fn status(label: &str, mut refs: Vec<RichReference>) -> OperatorStatus {
    refs.sort_by(|a, b| {
        (&a.kind, &a.api_version, &a.namespace, &a.name).cmp(&(
            &b.kind,
            &b.api_version,
            &b.namespace,
            &b.name,
        ))
    });
    refs.dedup_by(|a, b| {
        (&a.kind, &a.api_version, &a.namespace, &a.name)
            == (&b.kind, &b.api_version, &b.namespace, &b.name)
    });
    OperatorStatus {
        components: Some(Components {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: label.to_string(),
                    operator: "Exists".into(),
                    values: None,
                }]),
                match_labels: None,
            }),
            refs,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_sorted_and_unique_under_the_exists_selector() {
        let refs = vec![
            reference("v1", "ServiceAccount", Some("ns"), "b", vec![]),
            reference("apps/v1", "Deployment", Some("ns"), "op", vec![]),
            reference("v1", "ServiceAccount", Some("ns"), "a", vec![]),
            reference("v1", "ServiceAccount", Some("ns"), "a", vec![]),
            reference(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                "things.example.com",
                vec![],
            ),
        ];
        let status = status("operators.coreos.com/op.ns", refs);
        let components = status.components.unwrap();
        let names: Vec<String> = components
            .refs
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r.kind.as_deref().unwrap(),
                    r.name.as_deref().unwrap()
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "CustomResourceDefinition/things.example.com",
                "Deployment/op",
                "ServiceAccount/a",
                "ServiceAccount/b"
            ]
        );
        let selector = serde_json::to_value(components.label_selector).unwrap();
        assert_eq!(
            selector,
            serde_json::json!({"matchExpressions": [{"key": "operators.coreos.com/op.ns", "operator": "Exists"}]})
        );
    }

    #[test]
    fn conditions_are_copied_from_each_kind_as_upstream_shows_them() {
        let api_service: APIService = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "v1.example.com"},
            "spec": {"groupPriorityMinimum": 10, "versionPriority": 10},
            "status": {"conditions": [{
                "type": "Available", "status": "True", "reason": "Local",
                "message": "Local APIServices are always available",
                "lastTransitionTime": "2026-11-28T10:00:00Z",
            }]},
        }))
        .unwrap();
        let available = &api_service_conditions(&api_service)[0];
        assert_eq!(
            (available.type_.as_str(), available.status.as_str()),
            ("Available", "True")
        );
        assert_eq!(available.reason.as_deref(), Some("Local"));
        assert!(available.last_transition_time.is_some());
        assert!(available.last_update_time.is_none());

        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ns"},
            "status": {"phase": "Terminating", "conditions": [{
                "type": "NamespaceDeletionContentFailure", "status": "True",
                "reason": "ContentDeletionFailed", "message": "",
            }]},
        }))
        .unwrap();
        let failure = &namespace_conditions(&namespace)[0];
        assert_eq!(failure.type_, "NamespaceDeletionContentFailure");
        assert_eq!(failure.message, None, "an empty message is left out");

        // metav1.Condition: reason and message are plain strings; empty ones are left out.
        let condition: OperatorCondition = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "op.v1", "namespace": "ns"},
            "spec": {},
            "status": {"conditions": [{
                "type": "Upgradeable", "status": "False", "reason": "Migrating",
                "message": "", "lastTransitionTime": "2026-11-28T10:00:00Z",
            }]},
        }))
        .unwrap();
        let upgradeable = &operator_condition_conditions(&condition)[0];
        assert_eq!(upgradeable.reason.as_deref(), Some("Migrating"));
        assert_eq!(upgradeable.message, None);

        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "svc", "namespace": "ns"},
            "status": {"conditions": [{
                "type": "LoadBalancerReady", "status": "True", "reason": "Ready",
                "message": "ready", "lastTransitionTime": "2026-11-28T10:00:00Z",
            }]},
        }))
        .unwrap();
        assert_eq!(
            service_conditions(&service)[0].message.as_deref(),
            Some("ready")
        );
        // Kinds without conditions, or without status, give none.
        assert!(service_conditions(&Service::default()).is_empty());
        assert!(namespace_conditions(&Namespace::default()).is_empty());
    }
}
