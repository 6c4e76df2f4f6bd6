//! The RBAC a CSV declares, as plan steps (upstream's model: only a plan planned from a
//! catalog, or written by someone allowed to write a plan's status, makes RBAC; the CSV
//! controller grants nothing and waits until its accounts hold what it declares).
//!
//! Per CSV, in upstream's shape and order: each ServiceAccount its permissions name (not
//! `default`, which every namespace has), then per `permissions[i]` a Role and RoleBinding
//! `<csv>-<sa>-<hash>` in the plan's namespace, then per `clusterPermissions[i]` a
//! ClusterRole and ClusterRoleBinding `<csv>-<hash>`. Everything carries the CSV's owner
//! labels and `olm.permissions.hash`; namespaced objects get the owner reference to the CSV
//! from the executor. Unlike upstream the cluster hash covers the namespace too, so the
//! same CSV in two namespaces gets two sets instead of fighting over one (upstream's hash
//! covers it as well since v0.17).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::api::{ClusterServiceVersion, StrategyDeploymentPermissions};
use crate::cluster::ownership::{PERMISSIONS_HASH_LABEL, name_with_hash, owner_labels, short_hash};

/// Names are cut to 63 characters (as upstream) so they are valid everywhere.
pub const NAME_LIMIT: usize = 63;
const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// A stable hash of one permission of the CSV in `namespace` (it names the objects).
pub fn permission_hash(
    namespace: &str,
    csv: &str,
    permission: &StrategyDeploymentPermissions,
) -> String {
    let rules = serde_json::to_vec(&permission.rules).unwrap_or_default();
    short_hash(&[
        namespace.as_bytes(),
        csv.as_bytes(),
        permission.service_account_name.as_bytes(),
        &rules,
    ])
}

/// The name of the Role (and RoleBinding, and their AllNamespaces lift) of a namespaced
/// permission.
pub fn role_name(namespace: &str, csv: &str, permission: &StrategyDeploymentPermissions) -> String {
    let hash = permission_hash(namespace, csv, permission);
    let sa = &permission.service_account_name;
    name_with_hash(&format!("{csv}-{sa}"), &hash, NAME_LIMIT)
}

/// The name of the ClusterRole (and ClusterRoleBinding) of a cluster permission.
pub fn cluster_role_name(
    namespace: &str,
    csv: &str,
    permission: &StrategyDeploymentPermissions,
) -> String {
    name_with_hash(
        csv,
        &permission_hash(namespace, csv, permission),
        NAME_LIMIT,
    )
}

/// The RBAC objects of `csv` installed in `namespace`, in step order.
pub fn objects(csv: &ClusterServiceVersion, namespace: &str) -> Vec<Value> {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let strategy = csv.spec.install.spec.clone().unwrap_or_default();
    let labels = |hash: Option<&str>| {
        let mut labels = owner_labels("ClusterServiceVersion", &name, namespace);
        if let Some(hash) = hash {
            labels.insert(PERMISSIONS_HASH_LABEL.into(), hash.into());
        }
        labels
    };
    let accounts: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|sa| !sa.is_empty() && *sa != "default")
        .collect();
    let mut out: Vec<Value> = accounts
        .into_iter()
        .map(|sa| {
            json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": { "name": sa, "namespace": namespace, "labels": labels(None) },
            })
        })
        .collect();
    for permission in &strategy.permissions {
        let hash = permission_hash(namespace, &name, permission);
        let role = role_name(namespace, &name, permission);
        out.extend(pair(
            ("Role", "RoleBinding"),
            &role,
            Some(namespace),
            &labels(Some(&hash)),
            permission,
            namespace,
        ));
    }
    for permission in &strategy.cluster_permissions {
        let hash = permission_hash(namespace, &name, permission);
        let role = cluster_role_name(namespace, &name, permission);
        out.extend(pair(
            ("ClusterRole", "ClusterRoleBinding"),
            &role,
            None,
            &labels(Some(&hash)),
            permission,
            namespace,
        ));
    }
    out
}

/// A role and the binding of `permission`'s account to it.
fn pair(
    (role_kind, binding_kind): (&str, &str),
    name: &str,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
    permission: &StrategyDeploymentPermissions,
    account_namespace: &str,
) -> [Value; 2] {
    let mut meta = json!({ "name": name, "labels": labels });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    [
        json!({ "apiVersion": RBAC_API, "kind": role_kind, "metadata": meta, "rules": permission.rules }),
        json!({
            "apiVersion": RBAC_API, "kind": binding_kind, "metadata": meta,
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name },
            "subjects": [{
                "kind": "ServiceAccount",
                "name": permission.service_account_name,
                "namespace": account_namespace,
            }],
        }),
    ]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::PolicyRule;

    use super::*;
    use crate::api::StrategyDetailsDeployment;

    fn rule(resource: &str) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec!["example.com".into()]),
            resources: Some(vec![resource.into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }
    }

    fn csv(sa: &str) -> ClusterServiceVersion {
        let mut csv = ClusterServiceVersion::new("op.v1", Default::default());
        csv.spec.install.spec = Some(StrategyDetailsDeployment {
            deployments: vec![],
            permissions: vec![StrategyDeploymentPermissions {
                service_account_name: sa.into(),
                rules: vec![rule("widgets")],
            }],
            cluster_permissions: vec![StrategyDeploymentPermissions {
                service_account_name: sa.into(),
                rules: vec![rule("nodes")],
            }],
        });
        csv
    }

    #[test]
    fn a_csv_plans_its_account_roles_and_bindings_in_upstreams_order() {
        let objects = objects(&csv("op-sa"), "ns");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount",
                "Role",
                "RoleBinding",
                "ClusterRole",
                "ClusterRoleBinding"
            ]
        );
        let role = &objects[1];
        assert!(
            role["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("op.v1-op-sa-")
        );
        assert_eq!(role["metadata"]["namespace"], "ns");
        assert_eq!(role["metadata"]["labels"]["olm.owner"], "op.v1");
        assert_eq!(role["rules"][0]["resources"][0], "widgets");
        let binding = &objects[4];
        assert_eq!(binding["subjects"][0]["namespace"], "ns");
        assert_eq!(binding["roleRef"]["name"], objects[3]["metadata"]["name"]);
        assert!(objects[3]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn the_default_account_is_bound_but_not_created_and_names_differ_by_namespace() {
        let name = |o: &Value| o["metadata"]["name"].as_str().unwrap().to_string();
        let here = objects(&csv("default"), "ns");
        assert!(here.iter().all(|o| o["kind"] != "ServiceAccount"));
        let other = objects(&csv("default"), "other");
        assert_ne!(name(&here[2]), name(&other[2]));
        assert!(here.iter().all(|o| name(o).len() <= NAME_LIMIT));
    }
}
