//! The pure half of the Operator controller: the components found → `status.components`,
//! as upstream shows them (a label selector, and one reference per object with the
//! conditions it reports, sorted so that an unchanged set writes nothing).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::api::{
    ClusterServiceVersion, ComponentCondition, Components, InstallPlan, OperatorStatus,
    RichReference, Subscription,
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

/// Whether an uninstall is under way: the Subscription is gone but components remain, some
/// of kinds this controller does not watch (their deletion would go unseen).
pub fn settling(refs: &[RichReference], watched: &[&str]) -> bool {
    let has = |kind: &str| refs.iter().any(|r| r.kind.as_deref() == Some(kind));
    !has("Subscription")
        && refs
            .iter()
            .any(|r| !watched.contains(&r.kind.as_deref().unwrap_or_default()))
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
    fn an_uninstall_settles_until_unwatched_kinds_are_gone() {
        let watched = [
            "Subscription",
            "ClusterServiceVersion",
            "CustomResourceDefinition",
        ];
        let crd = reference(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "c",
            vec![],
        );
        let sa = reference("v1", "ServiceAccount", Some("ns"), "op", vec![]);
        let sub = reference(
            "operators.coreos.com/v1alpha1",
            "Subscription",
            Some("ns"),
            "op",
            vec![],
        );
        assert!(settling(&[crd.clone(), sa.clone()], &watched));
        assert!(
            !settling(std::slice::from_ref(&crd), &watched),
            "only watched kinds left"
        );
        assert!(!settling(&[sub, sa], &watched), "installed");
    }
}
