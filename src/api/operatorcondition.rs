//! `OperatorCondition` (operators.coreos.com v2, also served as v1): one per CSV, same name.
//! The operator reports conditions in it (operator-lib writes `spec.conditions`, which OLM
//! copies into `status.conditions` with the generation it saw); an administrator overrides
//! them in `spec.overrides`. `Upgradeable=False` holds back the CSV that would replace it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition type that gates upgrades.
pub const UPGRADEABLE: &str = "Upgradeable";

/// A condition as `metav1.Condition` has it. `lastTransitionTime` is optional here (upstream
/// requires it outside `overrides`; an operator that leaves it out is not refused).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionEntry {
    /// The condition's type, e.g. `Upgradeable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: String,
    /// The generation of the OperatorCondition this condition was set from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

fn is_empty(list: &[OperatorConditionEntry]) -> bool {
    list.is_empty()
}

/// Conditions as the operator and OLM see them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionStatus {
    /// `spec.conditions` as OLM observed them (each with the generation it saw).
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "is_empty"
    )]
    pub conditions: Vec<OperatorConditionEntry>,
}

pub mod v2 {
    use super::*;
    use kube::CustomResource;

    /// Who the operator is (its service accounts and Deployments, filled by OLM), what it
    /// reports, and what an administrator overrides.
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v2",
        kind = "OperatorCondition",
        doc = "Conditions an installed operator reports to OLM, one per ClusterServiceVersion and named after it; an `Upgradeable` condition that is False (reported, or set in `spec.overrides`) holds back the upgrade to the next version.",
        plural = "operatorconditions",
        namespaced,
        status = "OperatorConditionStatus",
        shortname = "condition",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorConditionSpec {
        /// The operator's service accounts (set by OLM from the CSV's permissions).
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub service_accounts: Vec<String>,
        /// The operator's Deployments (set by OLM from the CSV's install strategy).
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub deployments: Vec<String>,
        /// Conditions an administrator sets; they win over what the operator reports.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "is_empty"
        )]
        pub overrides: Vec<OperatorConditionEntry>,
        /// Conditions the operator reports (operator-lib writes these).
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "is_empty"
        )]
        pub conditions: Vec<OperatorConditionEntry>,
    }
}

/// The older served version: no `spec.conditions` (v1 operators write `status.conditions`).
pub mod v1 {
    use super::*;
    use kube::CustomResource;

    /// Who the operator is, and what an administrator overrides.
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "OperatorCondition",
        doc = "Conditions an installed operator reports to OLM, one per ClusterServiceVersion and named after it; an `Upgradeable` condition that is False (reported, or set in `spec.overrides`) holds back the upgrade to the next version.",
        plural = "operatorconditions",
        namespaced,
        status = "OperatorConditionStatus",
        shortname = "condition",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorConditionSpec {
        /// The operator's service accounts.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub service_accounts: Vec<String>,
        /// The operator's Deployments.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub deployments: Vec<String>,
        /// Conditions an administrator sets; they win over what the operator reports.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "is_empty"
        )]
        pub overrides: Vec<OperatorConditionEntry>,
    }
}

pub use v2::OperatorCondition;

/// Why the operator behind an OperatorCondition may not be replaced now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotUpgradeable {
    /// An administrator's override that is not "True".
    #[error("the operator is not upgradeable: {0}")]
    Overridden(String),
    /// The operator's own report, of the current generation, is "False".
    #[error("the operator is not upgradeable: {0}")]
    Reported(String),
    /// The operator's report is of an older generation (its status).
    #[error(
        "the operatorcondition status {:?}={status:?} is outdated",
        UPGRADEABLE
    )]
    Outdated { status: String },
}

/// Whether the operator behind `condition` may be replaced now: Err says why not, as
/// upstream decides it (an override wins; else the status copy, which must be of the
/// current generation; an absent condition allows it).
pub fn upgradeable(condition: &OperatorCondition) -> Result<(), NotUpgradeable> {
    let find = |list: &[OperatorConditionEntry]| -> Option<OperatorConditionEntry> {
        list.iter().find(|c| c.type_ == UPGRADEABLE).cloned()
    };
    if let Some(overridden) = find(&condition.spec.overrides) {
        return if overridden.status == "True" {
            Ok(())
        } else {
            Err(NotUpgradeable::Overridden(overridden.message))
        };
    }
    let reported = condition.status.as_ref().and_then(|s| find(&s.conditions));
    match reported {
        Some(c) if c.observed_generation != condition.metadata.generation => {
            Err(NotUpgradeable::Outdated { status: c.status })
        }
        Some(c) if c.status == "False" => Err(NotUpgradeable::Reported(c.message)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(value: serde_json::Value) -> OperatorCondition {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn upgradeable_follows_overrides_then_the_current_status() {
        let base = json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "op.v1", "namespace": "ns", "generation": 2}, "spec": {}});
        assert_eq!(upgradeable(&condition(base.clone())), Ok(()));
        let mut blocked = base;
        blocked["status"] = json!({"conditions": [{"type": "Upgradeable", "status": "False",
            "reason": "Migrating", "message": "migrating data", "observedGeneration": 2}]});
        assert_eq!(
            upgradeable(&condition(blocked.clone())),
            Err(NotUpgradeable::Reported("migrating data".into()))
        );
        assert_eq!(
            upgradeable(&condition(blocked.clone()))
                .unwrap_err()
                .to_string(),
            "the operator is not upgradeable: migrating data"
        );
        let mut stale = blocked.clone();
        stale["metadata"]["generation"] = json!(3);
        stale["status"]["conditions"][0]["status"] = json!("True");
        assert_eq!(
            upgradeable(&condition(stale)).unwrap_err().to_string(),
            "the operatorcondition status \"Upgradeable\"=\"True\" is outdated"
        );
        let mut overridden = blocked;
        overridden["spec"]["overrides"] = json!([{"type": "Upgradeable", "status": "True",
            "reason": "AdminSaysSo", "message": "go ahead"}]);
        assert_eq!(upgradeable(&condition(overridden.clone())), Ok(()));
        overridden["spec"]["overrides"][0]["status"] = json!("False");
        assert_eq!(
            upgradeable(&condition(overridden)).unwrap_err().to_string(),
            "the operator is not upgradeable: go ahead"
        );
    }
}
