//! The CSV's namespaced RBAC spread to its OperatorGroup's other target namespaces (pure),
//! as upstream's `ensureRBACInTargetNamespace`/`ensureSingletonRBAC` do. The RBAC itself is
//! made by the plan's steps ([`crate::controllers::plan::rbac`]) or by an admin; what is
//! spread is the Roles and RoleBindings in the operator's namespace that carry the CSV's
//! owner labels, and only once the CSV's requirements are met there:
//!
//! - Single/MultiNamespace: each again in every other target namespace, labelled
//!   `olm.copiedFrom`.
//! - AllNamespaces: a same-named ClusterRole (the Role's rules plus get/list/watch on
//!   namespaces) and ClusterRoleBinding, labelled [`LIFTED_LABEL`].
//!
//! As upstream, whoever may write Roles and CSVs in an AllNamespaces group's namespace may
//! thereby grant their own namespace's rights cluster-wide: that namespace is the admin's.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use serde_json::{Value, json};

use super::owned::{Owner, Planned};
use crate::api::COPIED_FROM_LABEL;

/// Marks a ClusterRole or ClusterRoleBinding lifted from a Role for AllNamespaces, so that
/// it goes when the group stops being AllNamespaces.
pub const LIFTED_LABEL: &str = "olm.rbac.lifted";

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

/// The copies and lifts of the CSV's `roles` and `bindings` (those in its namespace that
/// carry its owner labels), given the group's targets.
pub fn plan(
    roles: &[&Role],
    bindings: &[&RoleBinding],
    owner: &Owner,
    targets: &[String],
) -> Vec<Planned> {
    let mut planned = Vec::new();
    if is_all_namespaces(targets) {
        let labels = |of: &BTreeMap<String, String>| {
            let mut labels = of.clone();
            labels.insert(LIFTED_LABEL.into(), "true".into());
            labels
        };
        for role in roles {
            let mut rules = role.rules.clone().unwrap_or_default();
            rules.push(namespaces_rule());
            let name = role.metadata.name.clone().unwrap_or_default();
            let labels = labels(&role.metadata.labels.clone().unwrap_or_default());
            planned.push(cluster_object(
                "ClusterRole",
                &name,
                &labels,
                json!({ "rules": rules }),
            ));
        }
        for binding in bindings {
            let name = binding.metadata.name.clone().unwrap_or_default();
            let labels = labels(&binding.metadata.labels.clone().unwrap_or_default());
            let body = json!({
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": binding.role_ref.name },
                "subjects": binding.subjects,
            });
            planned.push(cluster_object("ClusterRoleBinding", &name, &labels, body));
        }
        return planned;
    }
    for namespace in targets.iter().filter(|ns| **ns != owner.namespace) {
        for role in roles {
            let body = json!({ "rules": role.rules });
            planned.push(copy("Role", &role.metadata, namespace, owner, body));
        }
        for binding in bindings {
            let body = json!({ "roleRef": binding.role_ref, "subjects": binding.subjects });
            planned.push(copy(
                "RoleBinding",
                &binding.metadata,
                namespace,
                owner,
                body,
            ));
        }
    }
    planned
}

fn copy(
    kind: &'static str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    namespace: &str,
    owner: &Owner,
    mut body: Value,
) -> Planned {
    let name = meta.name.clone().unwrap_or_default();
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(COPIED_FROM_LABEL.into(), owner.namespace.clone());
    body["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    body["kind"] = json!(kind);
    body["metadata"] = json!({ "name": name, "namespace": namespace, "labels": labels });
    Planned {
        kind,
        namespace: Some(namespace.into()),
        name,
        body,
    }
}

fn cluster_object(
    kind: &'static str,
    name: &str,
    labels: &BTreeMap<String, String>,
    mut body: Value,
) -> Planned {
    body["apiVersion"] = json!("rbac.authorization.k8s.io/v1");
    body["kind"] = json!(kind);
    body["metadata"] = json!({ "name": name, "labels": labels });
    Planned {
        kind,
        namespace: None,
        name: name.into(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{RoleRef, Subject};

    use super::*;

    fn role() -> Role {
        let mut role = Role::default();
        role.metadata.name = Some("op.v1-op-sa-x".into());
        role.metadata.labels = Some([("olm.owner".to_string(), "op.v1".to_string())].into());
        role.rules = Some(vec![PolicyRule {
            api_groups: Some(vec!["example.com".into()]),
            resources: Some(vec!["widgets".into()]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]);
        role
    }

    fn binding() -> RoleBinding {
        RoleBinding {
            metadata: role().metadata,
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "Role".into(),
                name: "op.v1-op-sa-x".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: "op-sa".into(),
                namespace: Some("op".into()),
                ..Subject::default()
            }]),
        }
    }

    fn owner() -> Owner {
        Owner {
            csv: "op.v1".into(),
            namespace: "op".into(),
            uid: "u".into(),
            ..Owner::default()
        }
    }

    #[test]
    fn own_namespace_alone_spreads_nothing() {
        assert!(plan(&[&role()], &[&binding()], &owner(), &["op".into()]).is_empty());
    }

    #[test]
    fn multi_namespace_copies_each_role_and_binding_into_each_other_target() {
        let planned = plan(
            &[&role()],
            &[&binding()],
            &owner(),
            &["a".into(), "b".into(), "op".into()],
        );
        let placed: Vec<(&str, Option<&str>)> = planned
            .iter()
            .map(|p| (p.kind, p.namespace.as_deref()))
            .collect();
        assert_eq!(
            placed,
            [
                ("Role", Some("a")),
                ("RoleBinding", Some("a")),
                ("Role", Some("b")),
                ("RoleBinding", Some("b"))
            ]
        );
        assert_eq!(planned[0].name, "op.v1-op-sa-x");
        assert_eq!(
            planned[0].body["metadata"]["labels"]["olm.copiedFrom"],
            "op"
        );
        // The binding in a target namespace still names the operator's ServiceAccount.
        assert_eq!(planned[1].body["subjects"][0]["namespace"], "op");
    }

    #[test]
    fn all_namespaces_lifts_roles_to_same_named_cluster_roles_with_namespace_access() {
        let planned = plan(&[&role()], &[&binding()], &owner(), &[String::new()]);
        assert_eq!(planned.len(), 2);
        assert_eq!(planned[0].name, "op.v1-op-sa-x");
        let rules = planned[0].body["rules"].as_array().unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[1]["resources"][0], "namespaces");
        assert_eq!(rules[1]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(planned[0].body["metadata"]["labels"][LIFTED_LABEL], "true");
        assert_eq!(planned[1].body["roleRef"]["kind"], "ClusterRole");
        assert_eq!(planned[1].body["subjects"][0]["name"], "op-sa");
    }
}
