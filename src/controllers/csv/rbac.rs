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

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use super::owned::{Owner, Planned};
use crate::controllers::plan::spread;

pub use crate::controllers::plan::spread::LIFTED_LABEL;

/// The copies and lifts of the CSV's `roles` and `bindings` (those in its namespace that
/// carry its owner labels), given the group's targets ([`spread::spread`], which the
/// InstallPlan preview shares).
pub fn plan(
    roles: &[&Role],
    bindings: &[&RoleBinding],
    owner: &Owner,
    targets: &[String],
) -> Vec<Planned> {
    spread::spread(roles, bindings, &owner.namespace, targets)
        .into_iter()
        .map(|body| {
            let kind = match body["kind"].as_str() {
                Some("ClusterRole") => "ClusterRole",
                Some("ClusterRoleBinding") => "ClusterRoleBinding",
                Some("Role") => "Role",
                _ => "RoleBinding",
            };
            let meta = &body["metadata"];
            Planned {
                kind,
                namespace: meta["namespace"].as_str().map(str::to_string),
                name: meta["name"].as_str().unwrap_or_default().to_string(),
                body,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};
    use serde_json::json;

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
