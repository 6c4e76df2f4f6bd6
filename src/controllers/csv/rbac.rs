//! The RBAC a CSV asks for, built (pure) and scoped by its OperatorGroup's target namespaces:
//!
//! - `permissions[i]` → the ServiceAccount (unless `default`), a Role and RoleBinding
//!   `<csv>-<sa>-<hash>` in the operator's namespace (owner-referenced to the CSV), the same
//!   in every other target namespace (Single/MultiNamespace; labelled `olm.copiedFrom`), or a
//!   same-named ClusterRole and ClusterRoleBinding with get/list/watch on namespaces added
//!   (AllNamespaces).
//! - `clusterPermissions[i]` → ClusterRole and ClusterRoleBinding `<csv>-<hash>`.
//!
//! Everything carries the owner labels and `olm.permissions.hash`. Unlike upstream the hash
//! covers the operator's namespace too: the same CSV installed in two namespaces gets two
//! sets of cluster-scoped objects instead of fighting over one.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

use super::deployment::Owner;
use crate::api::{COPIED_FROM_LABEL, StrategyDeploymentPermissions, StrategyDetailsDeployment};
use crate::controllers::ownership::{PERMISSIONS_HASH_LABEL, name_with_hash, short_hash};

/// Names are cut to 63 characters (as upstream) so they are valid everywhere.
const NAME_LIMIT: usize = 63;

/// One object to apply: its kind, namespace (None: cluster-scoped), name and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    pub body: Value,
}

fn namespaces_rule() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..PolicyRule::default()
    }
}

fn is_all_namespaces(targets: &[String]) -> bool {
    targets.len() == 1 && targets[0].is_empty()
}

/// The RBAC objects for `strategy`, given the group's target namespaces.
pub fn plan(
    strategy: &StrategyDetailsDeployment,
    owner: &Owner,
    targets: &[String],
) -> Vec<Planned> {
    let mut planned = service_accounts(strategy, owner);
    for permission in &strategy.permissions {
        planned.extend(namespaced_permission(permission, owner, targets));
    }
    for permission in &strategy.cluster_permissions {
        let sa = &permission.service_account_name;
        let hash = permission_hash(owner, permission);
        let name = name_with_hash(&owner.csv, &hash, NAME_LIMIT);
        planned.extend(cluster_pair(
            &name,
            &hash,
            permission.rules.clone(),
            &permission_labels(owner, &hash, false),
            subject(owner, sa),
        ));
    }
    planned
}

/// The ServiceAccounts the permissions name (`default` exists already).
fn service_accounts(strategy: &StrategyDetailsDeployment, owner: &Owner) -> Vec<Planned> {
    let accounts: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|sa| !sa.is_empty() && *sa != "default")
        .collect();
    accounts
        .into_iter()
        .map(|sa| Planned {
            kind: "ServiceAccount",
            namespace: Some(owner.namespace.clone()),
            name: sa.into(),
            body: json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {
                    "name": sa,
                    "namespace": owner.namespace,
                    "labels": owner.labels(),
                    "ownerReferences": [owner.reference()],
                },
            }),
        })
        .collect()
}

/// A stable hash of one permission of the CSV (it names the objects and detects change).
fn permission_hash(owner: &Owner, permission: &StrategyDeploymentPermissions) -> String {
    let rules = serde_json::to_vec(&permission.rules).unwrap_or_default();
    short_hash(&[
        owner.namespace.as_bytes(),
        owner.csv.as_bytes(),
        permission.service_account_name.as_bytes(),
        &rules,
    ])
}

fn subject(owner: &Owner, sa: &str) -> Value {
    json!([{ "kind": "ServiceAccount", "name": sa, "namespace": owner.namespace }])
}

fn permission_labels(owner: &Owner, hash: &str, copied: bool) -> BTreeMap<String, String> {
    let mut labels = owner.labels();
    labels.insert(PERMISSIONS_HASH_LABEL.into(), hash.into());
    if copied {
        labels.insert(COPIED_FROM_LABEL.into(), owner.namespace.clone());
    }
    labels
}

/// A namespaced permission: a Role and RoleBinding in the operator's namespace and in each
/// target namespace, or (AllNamespaces) a ClusterRole and ClusterRoleBinding.
fn namespaced_permission(
    permission: &StrategyDeploymentPermissions,
    owner: &Owner,
    targets: &[String],
) -> Vec<Planned> {
    let mut planned = Vec::new();
    let sa = &permission.service_account_name;
    let hash = permission_hash(owner, permission);
    let name = name_with_hash(&format!("{}-{sa}", owner.csv), &hash, NAME_LIMIT);
    let mut namespaces = vec![owner.namespace.clone()];
    if !is_all_namespaces(targets) {
        namespaces.extend(targets.iter().filter(|ns| **ns != owner.namespace).cloned());
    }
    for namespace in namespaces {
        let own = namespace == owner.namespace;
        let mut meta = json!({
            "name": name,
            "namespace": namespace,
            "labels": permission_labels(owner, &hash, !own),
        });
        if own {
            meta["ownerReferences"] = json!([owner.reference()]);
        }
        planned.push(Planned {
            kind: "Role",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta.clone(),
                "rules": permission.rules,
            }),
        });
        planned.push(Planned {
            kind: "RoleBinding",
            namespace: Some(namespace.clone()),
            name: name.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
                "subjects": subject(owner, sa),
            }),
        });
    }
    if is_all_namespaces(targets) {
        let mut rules = permission.rules.clone();
        rules.push(namespaces_rule());
        planned.extend(cluster_pair(
            &name,
            &hash,
            rules,
            &permission_labels(owner, &hash, false),
            subject(owner, sa),
        ));
    }
    planned
}

fn cluster_pair(
    name: &str,
    hash: &str,
    rules: Vec<PolicyRule>,
    labels: &std::collections::BTreeMap<String, String>,
    subjects: Value,
) -> [Planned; 2] {
    let _ = hash;
    [
        Planned {
            kind: "ClusterRole",
            namespace: None,
            name: name.into(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": { "name": name, "labels": labels },
                "rules": rules,
            }),
        },
        Planned {
            kind: "ClusterRoleBinding",
            namespace: None,
            name: name.into(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": { "name": name, "labels": labels },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
                "subjects": subjects,
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StrategyDeploymentPermissions;

    fn rule(resource: &str) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec!["example.com".into()]),
            resources: Some(vec![resource.into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }
    }

    fn strategy() -> StrategyDetailsDeployment {
        StrategyDetailsDeployment {
            deployments: vec![],
            permissions: vec![StrategyDeploymentPermissions {
                service_account_name: "op-sa".into(),
                rules: vec![rule("widgets")],
            }],
            cluster_permissions: vec![StrategyDeploymentPermissions {
                service_account_name: "op-sa".into(),
                rules: vec![rule("nodes")],
            }],
        }
    }

    fn owner(namespace: &str) -> Owner {
        Owner {
            csv: "op.v1".into(),
            namespace: namespace.into(),
            uid: "u".into(),
            ..Owner::default()
        }
    }

    fn summary(planned: &[Planned]) -> Vec<(&'static str, Option<&str>)> {
        planned
            .iter()
            .map(|p| (p.kind, p.namespace.as_deref()))
            .collect()
    }

    #[test]
    fn own_namespace_gets_roles_there_only() {
        let planned = plan(&strategy(), &owner("op"), &["op".into()]);
        assert_eq!(
            summary(&planned),
            [
                ("ServiceAccount", Some("op")),
                ("Role", Some("op")),
                ("RoleBinding", Some("op")),
                ("ClusterRole", None),
                ("ClusterRoleBinding", None),
            ]
        );
        let role = &planned[1];
        assert!(role.name.starts_with("op.v1-op-sa-"), "{}", role.name);
        assert!(role.name.len() <= 63);
        let labels = &role.body["metadata"]["labels"];
        assert_eq!(labels["olm.owner"], "op.v1");
        assert_eq!(labels["olm.owner.namespace"], "op");
        assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
        assert!(labels["olm.permissions.hash"].is_string());
        assert_eq!(role.body["metadata"]["ownerReferences"][0]["name"], "op.v1");
        assert_eq!(planned[2].body["subjects"][0]["namespace"], "op");
        // Cluster-scoped objects cannot be owned by a namespaced CSV: labels only.
        assert!(planned[3].body["metadata"]["ownerReferences"].is_null());
    }

    #[test]
    fn multi_namespace_copies_roles_into_each_target() {
        let planned = plan(
            &strategy(),
            &owner("op"),
            &["a".into(), "b".into(), "op".into()],
        );
        let roles: Vec<Option<&str>> = planned
            .iter()
            .filter(|p| p.kind == "Role")
            .map(|p| p.namespace.as_deref())
            .collect();
        assert_eq!(roles, [Some("op"), Some("a"), Some("b")]);
        let copied = planned
            .iter()
            .find(|p| p.namespace.as_deref() == Some("a"))
            .unwrap();
        assert_eq!(copied.body["metadata"]["labels"]["olm.copiedFrom"], "op");
        // The binding in a target namespace still names the operator's ServiceAccount.
        let binding = planned
            .iter()
            .find(|p| p.kind == "RoleBinding" && p.namespace.as_deref() == Some("b"))
            .unwrap();
        assert_eq!(binding.body["subjects"][0]["namespace"], "op");
    }

    #[test]
    fn all_namespaces_lifts_permissions_to_cluster_roles_with_namespace_access() {
        let planned = plan(&strategy(), &owner("op"), &[String::new()]);
        let lifted = planned
            .iter()
            .find(|p| p.kind == "ClusterRole" && p.name.starts_with("op.v1-op-sa-"))
            .unwrap();
        let rules = lifted.body["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[1]["resources"][0], "namespaces");
        assert_eq!(rules[1]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(
            planned
                .iter()
                .filter(|p| p.kind == "ClusterRoleBinding")
                .count(),
            2
        );
    }

    #[test]
    fn names_differ_by_namespace_and_rules_and_skip_the_default_account() {
        let a = plan(&strategy(), &owner("a"), &["a".into()]);
        let b = plan(&strategy(), &owner("b"), &["b".into()]);
        let cluster = |p: &[Planned]| {
            p.iter()
                .find(|p| p.kind == "ClusterRole")
                .unwrap()
                .name
                .clone()
        };
        assert_ne!(cluster(&a), cluster(&b));
        assert_eq!(
            cluster(&a),
            cluster(&plan(&strategy(), &owner("a"), &["a".into()]))
        );
        let mut default = strategy();
        default.permissions[0].service_account_name = "default".into();
        default.cluster_permissions.clear();
        let planned = plan(&default, &owner("a"), &["a".into()]);
        assert!(planned.iter().all(|p| p.kind != "ServiceAccount"));
    }
}
