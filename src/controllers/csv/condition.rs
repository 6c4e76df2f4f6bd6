//! The OperatorCondition of a CSV (same name), planned with its install as upstream makes it:
//! the operator's service accounts and Deployments in its spec, owned by the CSV, and a Role
//! and RoleBinding that let those service accounts read and write it. Only the spec fields
//! OLM fills are applied, so the operator's `spec.conditions` and an administrator's
//! `spec.overrides` are never touched.

use serde_json::json;

use super::owned::Owner;
use super::owned::Planned;
use crate::api::StrategyDetailsDeployment;
use crate::cluster::ownership::MANAGED_LABEL;
use crate::controllers::plan::spread;

/// The OperatorCondition, Role and RoleBinding for `strategy`.
pub fn plan(owner: &Owner, strategy: &StrategyDetailsDeployment) -> Vec<Planned> {
    let accounts = spread::condition_accounts(strategy);
    let deployments: Vec<&str> = strategy
        .deployments
        .iter()
        .map(|d| d.name.as_str())
        .filter(|n| !n.is_empty())
        .collect();
    let name = &owner.csv;
    let namespace = &owner.namespace;
    // The CSV controls its condition (upstream: controller=true), so it goes with the CSV.
    let mut controller = owner.reference();
    controller["controller"] = json!(true);
    let subjects: Vec<_> = accounts
        .iter()
        .map(|sa| json!({"kind": "ServiceAccount", "name": sa, "namespace": namespace}))
        .collect();
    // Not the owner labels: the install's RBAC is what those select (and count); these go
    // with the CSV through the owner reference, as upstream's go with the condition.
    let mut labels = owner.operator_labels.clone();
    labels.insert(MANAGED_LABEL.into(), "true".into());
    let metadata = json!({
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [owner.reference()],
    });
    vec![
        Planned {
            kind: "OperatorCondition",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            body: json!({
                "apiVersion": "operators.coreos.com/v2",
                "kind": "OperatorCondition",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": owner.operator_labels,
                    "ownerReferences": [controller],
                },
                "spec": {"serviceAccounts": accounts, "deployments": deployments},
            }),
        },
        Planned {
            kind: "Role",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata,
                "rules": spread::condition_rules(name),
            }),
        },
        Planned {
            kind: "RoleBinding",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subjects,
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_names_the_operator_and_its_accounts_may_write_it() {
        let strategy: StrategyDetailsDeployment = serde_json::from_value(json!({
            "deployments": [{"name": "op-manager", "spec": {}}],
            "permissions": [{"serviceAccountName": "op-sa", "rules": []}],
            "clusterPermissions": [{"serviceAccountName": "op-sa", "rules": []}],
        }))
        .unwrap();
        let owner = Owner {
            csv: "op.v1".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            ..Owner::default()
        };
        let planned = plan(&owner, &strategy);
        let kinds: Vec<&str> = planned.iter().map(|p| p.kind).collect();
        assert_eq!(kinds, ["OperatorCondition", "Role", "RoleBinding"]);
        let condition = &planned[0].body;
        assert_eq!(condition["spec"]["serviceAccounts"], json!(["op-sa"]));
        assert_eq!(condition["spec"]["deployments"], json!(["op-manager"]));
        assert_eq!(
            condition["metadata"]["ownerReferences"][0]["controller"],
            true
        );
        assert!(
            condition["spec"].get("conditions").is_none(),
            "never applied by OLM"
        );
        assert_eq!(planned[2].body["subjects"][0]["name"], "op-sa");
        assert_eq!(
            planned[1].body["rules"][0]["resourceNames"],
            json!(["op.v1"])
        );
    }
}
