//! RBAC the CSV controller makes for an installed CSV beyond the plan's steps (pure), named
//! and shaped here so that the InstallPlan preview predicts exactly what the CSV controller
//! writes:
//!
//! - the plan's Roles and RoleBindings spread to the OperatorGroup's targets
//!   ([`spread`]): upstream's `ensureRBACInTargetNamespace`/`ensureSingletonRBAC`;
//! - the Role and RoleBinding, named as the CSV, that let its ServiceAccounts read and
//!   write its OperatorCondition ([`condition_accounts`], [`condition_rules`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use crate::api::{COPIED_FROM_LABEL, StrategyDetailsDeployment};

/// Marks a ClusterRole or ClusterRoleBinding lifted from a Role for AllNamespaces, so that
/// it goes when the group stops being AllNamespaces.
pub const LIFTED_LABEL: &str = "olm.rbac.lifted";
const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// The rule a lifted ClusterRole gains over its Role.
fn namespaces_rule() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..PolicyRule::default()
    }
}

/// Whether an OperatorGroup's targets (`status.namespaces`) are all namespaces (`[""]`).
pub fn all_namespaces(targets: &[String]) -> bool {
    targets.len() == 1 && targets[0].is_empty()
}

/// The copies and lifts of `roles` and `bindings` (a CSV's, in its namespace `from`), given
/// its group's `targets`, as whole objects:
///
/// - Single/MultiNamespace: each again in every other target namespace, labelled
///   `olm.copiedFrom: <from>`.
/// - AllNamespaces: a same-named ClusterRole (the Role's rules plus get/list/watch on
///   namespaces) and ClusterRoleBinding, labelled [`LIFTED_LABEL`].
pub fn spread(
    roles: &[&Role],
    bindings: &[&RoleBinding],
    from: &str,
    targets: &[String],
) -> Vec<Value> {
    if all_namespaces(targets) {
        return lifted(roles, bindings);
    }
    let mut out = Vec::new();
    for namespace in targets.iter().filter(|ns| *ns != from) {
        for role in roles {
            let body = json!({ "rules": role.rules });
            out.push(copy("Role", &role.metadata, namespace, from, body));
        }
        for binding in bindings {
            let body = json!({ "roleRef": binding.role_ref, "subjects": binding.subjects });
            out.push(copy(
                "RoleBinding",
                &binding.metadata,
                namespace,
                from,
                body,
            ));
        }
    }
    out
}

fn lifted(roles: &[&Role], bindings: &[&RoleBinding]) -> Vec<Value> {
    let labels = |meta: &ObjectMeta| {
        let mut labels = meta.labels.clone().unwrap_or_default();
        labels.insert(LIFTED_LABEL.into(), "true".into());
        labels
    };
    let mut out = Vec::new();
    for role in roles {
        let mut rules = role.rules.clone().unwrap_or_default();
        rules.push(namespaces_rule());
        let body = json!({ "rules": rules });
        out.push(cluster_object(
            "ClusterRole",
            &role.metadata,
            &labels(&role.metadata),
            body,
        ));
    }
    for binding in bindings {
        let body = json!({
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": binding.role_ref.name },
            "subjects": binding.subjects,
        });
        let labels = labels(&binding.metadata);
        out.push(cluster_object(
            "ClusterRoleBinding",
            &binding.metadata,
            &labels,
            body,
        ));
    }
    out
}

fn copy(kind: &str, meta: &ObjectMeta, namespace: &str, from: &str, mut body: Value) -> Value {
    let name = meta.name.clone().unwrap_or_default();
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(COPIED_FROM_LABEL.into(), from.into());
    body["apiVersion"] = json!(RBAC_API);
    body["kind"] = json!(kind);
    body["metadata"] = json!({ "name": name, "namespace": namespace, "labels": labels });
    body
}

fn cluster_object(
    kind: &str,
    meta: &ObjectMeta,
    labels: &BTreeMap<String, String>,
    mut body: Value,
) -> Value {
    body["apiVersion"] = json!(RBAC_API);
    body["kind"] = json!(kind);
    body["metadata"] = json!({ "name": meta.name.clone().unwrap_or_default(), "labels": labels });
    body
}

/// The ServiceAccounts a CSV's OperatorCondition names and its Role grants: those of the
/// strategy's cluster permissions, then permissions, once each; `default` when none.
pub fn condition_accounts(strategy: &StrategyDetailsDeployment) -> Vec<String> {
    let mut accounts = Vec::new();
    let mut seen = BTreeSet::new();
    for permission in strategy
        .cluster_permissions
        .iter()
        .chain(&strategy.permissions)
    {
        let sa = permission.service_account_name.as_str();
        if !sa.is_empty() && seen.insert(sa) {
            accounts.push(sa.to_string());
        }
    }
    if accounts.is_empty() {
        accounts.push("default".into());
    }
    accounts
}

/// The rules of the OperatorCondition Role of the CSV `csv` (the Role and its RoleBinding
/// are named as the CSV).
pub fn condition_rules(csv: &str) -> Value {
    json!([{
        "apiGroups": ["operators.coreos.com"],
        // Upstream grants the object only; v1 readers report in its status.
        "resources": ["operatorconditions", "operatorconditions/status"],
        "verbs": ["get", "update", "patch"],
        "resourceNames": [csv],
    }])
}

/// The OperatorCondition Role and RoleBinding of `csv` in `namespace`, their content only
/// (the CSV controller adds labels and the owner reference).
pub fn condition_rbac(
    csv: &str,
    namespace: &str,
    strategy: &StrategyDetailsDeployment,
) -> [Value; 2] {
    let subjects: Vec<Value> = condition_accounts(strategy)
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa, "namespace": namespace}))
        .collect();
    let metadata = json!({ "name": csv, "namespace": namespace });
    [
        json!({
            "apiVersion": RBAC_API, "kind": "Role", "metadata": metadata,
            "rules": condition_rules(csv),
        }),
        json!({
            "apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": csv},
            "subjects": subjects,
        }),
    ]
}
