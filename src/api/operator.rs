//! `Operator` (operators.coreos.com/v1, cluster-scoped): one installed package in one
//! namespace, named `<package>.<namespace>`, and the objects that make it up. Every
//! component carries the label `operators.coreos.com/<package>.<namespace>`; the status
//! lists them, so clients (kubectl-operator's `list-operands` and `uninstall`, consoles)
//! find what an install made without knowing how OLM made it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The prefix of the component label; the rest is the Operator's name.
pub const OPERATOR_LABEL_PREFIX: &str = "operators.coreos.com/";
/// Upstream truncates component label names to a label name's 63 characters.
const LABEL_NAME_MAX: usize = 63;

/// Empty: OLM creates the Operator and everything about it is in the status.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "Operator",
    doc = "An operator installed by OLM: one package in one namespace, named `<package>.<namespace>`. Its status lists the objects the install is made of, found by the label `operators.coreos.com/<package>.<namespace>`.",
    plural = "operators",
    status = "OperatorStatus",
    category = "olm"
)]
pub struct OperatorSpec {}

/// What the Operator is made of.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// The objects labelled as this Operator's components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// Selects the components: the Operator's label exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Each component, sorted by kind, apiVersion, namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<RichReference>,
}

/// A reference to a component with the conditions it reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RichReference {
    /// Kind of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Namespace of the component; unset for a cluster-scoped one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// API version of the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The component's own conditions; for a CSV, its phase as a condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ComponentCondition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// Type of the condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason of the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The name of the Operator of `package` installed in `namespace`.
pub fn operator_name(package: &str, namespace: &str) -> String {
    format!("{package}.{namespace}")
}

/// The component label of the Operator `name` (its value is empty): upstream truncates the
/// name to 63 characters and drops trailing `.`, `_` and `-`.
pub fn operator_label(name: &str) -> String {
    // Package and namespace names are DNS labels: ASCII, so any byte is a char boundary.
    let name = name.get(..LABEL_NAME_MAX).unwrap_or(name);
    let name = name.trim_end_matches(['.', '_', '-']);
    format!("{OPERATOR_LABEL_PREFIX}{name}")
}

/// The Operators an object's labels make it a component of.
pub fn operator_names<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<String> {
    labels
        .into_iter()
        .filter_map(|(key, _)| key.strip_prefix(OPERATOR_LABEL_PREFIX))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn labels_name_the_operator_and_are_truncated_as_upstream() {
        assert_eq!(
            operator_label(&operator_name("etcd", "ops")),
            "operators.coreos.com/etcd.ops"
        );
        // 62 + ".ns": cut at 63 characters, the trailing dot dropped.
        let long = operator_name(&"a".repeat(62), "ns");
        assert_eq!(
            operator_label(&long),
            format!("operators.coreos.com/{}", "a".repeat(62))
        );
        let labels = BTreeMap::from([
            ("operators.coreos.com/etcd.ops".to_string(), String::new()),
            ("olm.managed".to_string(), "true".to_string()),
        ]);
        assert_eq!(operator_names(&labels), ["etcd.ops"]);
    }
}
