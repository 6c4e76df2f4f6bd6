use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::{Value, json};

use super::crds::{CrdFound, OnCluster};
use super::decide::{self, Found};
use super::rbac::Rbac;
use super::{crds, csvs, wanted};
use crate::api::{
    ClusterServiceVersion, InstallPlanPhase, InstallPlanStatus, NamedChange, ObjectRef, PlanImpact,
    Step, StepResource, StepStatus,
};

const NS: &str = "ns";

fn csv(name: &str, replaces: Option<&str>, spec: Value) -> ClusterServiceVersion {
    let mut object = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"displayName": name, "replaces": replaces,
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}},
    });
    if let (Some(into), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
        for (key, value) in extra {
            into.insert(key.clone(), value.clone());
        }
    }
    serde_json::from_value(object).unwrap()
}

fn with_strategy(name: &str, replaces: Option<&str>, strategy: Value) -> ClusterServiceVersion {
    csv(
        name,
        replaces,
        json!({"install": {"strategy": "deployment", "spec": strategy}}),
    )
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn deployment(name: &str, containers: &[(&str, &str)]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(name, image)| json!({"name": name, "image": image}))
        .collect();
    json!({"name": name, "spec": {"template": {"spec": {"containers": containers}}}})
}

/// The operator account holds what its old Role grants, plus `nodes` list cluster-wide.
fn rbac_holding(rules: Value) -> Rbac {
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "old-role", "namespace": NS}, "rules": rules,
    }))
    .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "old-role", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "old-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NS}],
    }))
    .unwrap();
    let cluster_role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "nodes"}, "rules": [rule(&[""], &["nodes"], &["list"])],
    }))
    .unwrap();
    let cluster_binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "nodes"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nodes"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": NS}],
    }))
    .unwrap();
    Rbac {
        roles: vec![Arc::new(role)],
        role_bindings: vec![Arc::new(binding)],
        cluster_roles: vec![Arc::new(cluster_role)],
        cluster_role_bindings: vec![Arc::new(cluster_binding)],
    }
}

/// An account's changes as text: (account, added (scope, rule, escalation), removed rules).
type Said = (String, Vec<(String, String, bool)>, Vec<String>);

/// Rules compare as declared (lists in any order); an added rule is an escalation unless
/// the account's RBAC already allows it, namespaced rules in the plan's namespace and
/// cluster rules cluster-wide; a removed rule never is.
#[test]
fn rules_added_and_removed_per_account_with_escalations() {
    let kept = rule(&["apps"], &["deployments"], &["get", "list", "watch"]);
    let reordered = rule(
        &["apps"],
        &["deployments"],
        &["watch", "get", "list", "get"],
    );
    let dropped = rule(&[""], &["configmaps"], &["get", "create"]);
    let narrower = rule(&[""], &["configmaps"], &["get"]);
    let events = rule(&["events.k8s.io"], &["events"], &["create", "patch"]);
    let old = with_strategy(
        "op.v1",
        None,
        json!({"deployments": [], "permissions": [
            {"serviceAccountName": "op", "rules": [kept, dropped]},
            {"serviceAccountName": "gone", "rules": [narrower]},
        ]}),
    );
    let new = with_strategy(
        "op.v2",
        Some("op.v1"),
        json!({"deployments": [],
               "permissions": [{"serviceAccountName": "op", "rules": [reordered, narrower, events]}],
               "clusterPermissions": [{"serviceAccountName": "op", "rules": [
                   rule(&[""], &["nodes"], &["list"]), rule(&[""], &["nodes"], &["delete"])]}]}),
    );
    let rbac = rbac_holding(json!([
        rule(&["apps"], &["deployments"], &["get", "list", "watch"]),
        dropped
    ]));
    let changes = super::rbac::changes(&[&new], &[&old], NS, &rbac, (&[], &[]));
    let said: Vec<Said> = changes
        .iter()
        .map(|a| {
            let added = a
                .added
                .iter()
                .map(|r| (r.scope.clone(), r.rule.to_string(), r.escalation))
                .collect();
            let removed = a.removed.iter().map(|r| r.rule.to_string()).collect();
            (a.service_account.clone(), added, removed)
        })
        .collect();
    let text = |r: &str| r.to_string();
    assert_eq!(
        said,
        [
            (
                text("ns/gone"),
                vec![],
                vec![text(
                    r#"{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}"#
                )]
            ),
            (
                text("ns/op"),
                vec![
                    (
                        text("Cluster"),
                        text(r#"{"apiGroups":[""],"resources":["nodes"],"verbs":["delete"]}"#),
                        true
                    ),
                    (
                        text("Cluster"),
                        text(r#"{"apiGroups":[""],"resources":["nodes"],"verbs":["list"]}"#),
                        false
                    ),
                    (
                        text("Namespace"),
                        text(r#"{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}"#),
                        false
                    ),
                    (
                        text("Namespace"),
                        text(
                            r#"{"apiGroups":["events.k8s.io"],"resources":["events"],"verbs":["create","patch"]}"#
                        ),
                        true
                    ),
                ],
                vec![text(
                    r#"{"apiGroups":[""],"resources":["configmaps"],"verbs":["create","get"]}"#
                )]
            ),
        ]
    );
    // A first install: every rule is added; what no binding grants yet escalates.
    let first = super::rbac::changes(&[&new], &[], NS, &Rbac::default(), (&[], &[]));
    assert!(first[0].added.iter().all(|r| r.escalation));
    assert!(first[0].removed.is_empty());
}

fn crd(versions: Value, stored: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "apps.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "apps", "kind": "App"},
                 "scope": "Namespaced", "versions": versions},
        "status": {"storedVersions": stored},
    })
}

fn version(name: &str, served: bool, schema: Value) -> Value {
    json!({"name": name, "served": served, "storage": false,
           "schema": {"openAPIV3Schema": schema}})
}

/// A rollback to a schema that does not know a field existing objects hold: the API
/// server would drop it, so it is a blocker, named with the object and the field.
#[test]
fn fields_the_older_schema_would_drop_block_it() {
    let older = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"mode": {"type": "string"}}}}});
    let mut newer = older.clone();
    newer["properties"]["spec"]["properties"]["extra"] = json!({"type": "string"});
    let existing = crd(json!([version("v1", true, newer)]), &["v1"]);
    let new = crd(json!([version("v1", true, older)]), &[]);
    let objects = vec![
        json!({"metadata": {"name": "plain", "namespace": NS}, "spec": {"mode": "fast"},
               "status": {"phase": "Ready"}}),
        json!({"metadata": {"name": "rich", "namespace": NS}, "spec": {"mode": "fast", "extra": "x"}}),
    ];
    let found = CrdFound {
        new,
        on_cluster: OnCluster::Found(existing),
        listed: vec![("v1".into(), objects)],
    };
    let impact = crds::impact(&found).unwrap();
    assert!(impact.objects_failing.is_empty(), "{impact:?}");
    assert_eq!(impact.objects_pruned, ["ns/rich: v1: .spec.extra"]);
    assert_eq!(
        crds::blockers(&impact),
        [
            "CustomResourceDefinition apps.example.com: the new schema does not know fields of existing ns/rich: v1: .spec.extra, which would be dropped"
        ]
    );
}

/// Versions added, unserved and removed; stored versions the new CRD does not serve;
/// schema changes; and existing objects the new schema refuses, each a blocker.
#[test]
fn crd_versions_stored_versions_and_failing_objects() {
    let loose = json!({"type": "object"});
    let strict = json!({"type": "object", "properties": {"spec": {"type": "object",
        "required": ["replicas"], "properties": {"replicas": {"type": "integer"}}}}});
    let existing = crd(
        json!([
            version("v1alpha1", true, loose.clone()),
            version("v1beta1", true, loose.clone()),
            version("v0", true, loose.clone()),
        ]),
        &["v1alpha1", "v1beta1", "v0"],
    );
    let new = crd(
        json!([
            version("v1alpha1", false, loose.clone()),
            version("v1beta1", true, strict),
            version("v1", true, loose),
        ]),
        &[],
    );
    assert_eq!(crds::versions_to_check(&existing, &new), ["v1beta1"]);
    let objects = vec![
        json!({"metadata": {"name": "good", "namespace": NS}, "spec": {"replicas": 1}}),
        json!({"metadata": {"name": "bad", "namespace": NS}, "spec": {}}),
    ];
    let found = CrdFound {
        new: new.clone(),
        on_cluster: OnCluster::Found(existing.clone()),
        listed: vec![("v1beta1".into(), objects)],
    };
    let impact = crds::impact(&found).unwrap();
    assert_eq!(impact.change, "Updated");
    assert_eq!(impact.versions_added, ["v1"]);
    assert_eq!(impact.versions_unserved, ["v1alpha1"]);
    assert_eq!(impact.versions_removed, ["v0"]);
    // In `status.storedVersions` order.
    assert_eq!(impact.stored_versions_unserved, ["v1alpha1", "v0"]);
    assert!(impact.schema_changed);
    assert_eq!(
        impact.objects_failing,
        ["ns/bad: v1beta1: .spec.replicas: required"]
    );
    assert_eq!(
        crds::blockers(&impact),
        [
            "CustomResourceDefinition apps.example.com: stored version v1alpha1 would no longer be served",
            "CustomResourceDefinition apps.example.com: stored version v0 would no longer be served",
            "CustomResourceDefinition apps.example.com: the new schema refuses existing ns/bad: v1beta1: .spec.replicas: required",
        ]
    );

    // The same CRD again changes nothing worth a line; a new one is Created with its
    // served versions; one known to hold the step's spec is not looked at.
    let same = CrdFound {
        new: existing.clone(),
        on_cluster: OnCluster::Found(existing),
        listed: vec![],
    };
    assert_eq!(crds::impact(&same), None);
    let created = CrdFound {
        new: new.clone(),
        on_cluster: OnCluster::Absent,
        listed: vec![],
    };
    let created = crds::impact(&created).unwrap();
    assert_eq!(
        (created.change.as_str(), created.versions_added.clone()),
        ("Created", vec!["v1".to_string(), "v1beta1".to_string()])
    );
    assert!(created.stored_versions_unserved.is_empty() && !created.schema_changed);
    let unchanged = CrdFound {
        new,
        on_cluster: OnCluster::Unchanged,
        listed: vec![],
    };
    assert_eq!(crds::impact(&unchanged), None);
}

/// Images per Deployment and container; a Deployment on one side only has no image on
/// the other.
#[test]
fn images_changed_per_deployment_and_container() {
    let old = with_strategy(
        "op.v1",
        None,
        json!({"deployments": [
            deployment("op", &[("manager", "op:v1"), ("proxy", "proxy:v1")]),
            deployment("gone", &[("c", "gone:v1")]),
        ]}),
    );
    let new = with_strategy(
        "op.v2",
        Some("op.v1"),
        json!({"deployments": [
            deployment("op", &[("manager", "op:v2"), ("proxy", "proxy:v1")]),
            deployment("extra", &[("c", "extra:v1")]),
        ]}),
    );
    let said: Vec<(String, String, Option<String>, Option<String>)> =
        csvs::images(&new, Some(&old))
            .into_iter()
            .map(|i| (i.deployment, i.container, i.from, i.to))
            .collect();
    let s = |t: &str| t.to_string();
    assert_eq!(
        said,
        [
            (s("extra"), s("c"), None, Some(s("extra:v1"))),
            (s("gone"), s("c"), Some(s("gone:v1")), None),
            (s("op"), s("manager"), Some(s("op:v1")), Some(s("op:v2"))),
        ]
    );
    assert!(csvs::images(&new, Some(&new)).is_empty());
}

fn webhook(name: &str, type_: &str, failure_policy: &str) -> Value {
    json!({"generateName": name, "type": type_, "sideEffects": "None",
           "admissionReviewVersions": ["v1"], "failurePolicy": failure_policy})
}

fn api_service(group: &str, version: &str) -> Value {
    json!({"name": format!("things.{group}"), "group": group, "version": version, "kind": "Thing"})
}

/// Webhooks by type and generateName, owned APIServices by `version.group`: added,
/// removed, or changed in any field.
#[test]
fn webhooks_and_api_services_added_removed_changed() {
    let old = csv(
        "op.v1",
        None,
        json!({
            "webhookdefinitions": [
                webhook("v.example.com", "ValidatingAdmissionWebhook", "Fail"),
                webhook("m.example.com", "MutatingAdmissionWebhook", "Fail"),
            ],
            "apiservicedefinitions": {"owned": [api_service("a.example.com", "v1")]},
        }),
    );
    let new = csv(
        "op.v2",
        Some("op.v1"),
        json!({
            "webhookdefinitions": [
                webhook("v.example.com", "ValidatingAdmissionWebhook", "Ignore"),
                webhook("c.example.com", "ConversionWebhook", "Fail"),
            ],
            "apiservicedefinitions": {"owned": [
                api_service("a.example.com", "v1"), api_service("b.example.com", "v2")]},
        }),
    );
    let named = |kind: &str, name: &str, change: &str| NamedChange {
        kind: kind.into(),
        name: name.into(),
        change: change.into(),
    };
    assert_eq!(
        csvs::webhooks(&new, Some(&old)),
        [
            named("ConversionWebhook", "c.example.com", "Added"),
            named("MutatingAdmissionWebhook", "m.example.com", "Removed"),
            named("ValidatingAdmissionWebhook", "v.example.com", "Changed"),
        ]
    );
    assert_eq!(
        csvs::api_services(&new, Some(&old)),
        [named("APIService", "v2.b.example.com", "Added")]
    );
}

fn object(api_version: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
}

fn obj(api_version: &str, kind: &str, namespaced: bool, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespaced.then(|| NS.to_string()),
        name: name.into(),
    }
}

/// Objects: each step's (updated when it exists), the new CSV's Deployments, and what goes
/// with the replaced CSV that the plan does not carry again: the CSV, its plan's RBAC,
/// Deployments the new strategy lacks. Sorted, without duplicates; the summary counts.
#[test]
fn objects_created_updated_and_deleted() {
    let strategy = |deployments: Value, verbs: &[&str]| {
        json!({"deployments": deployments, "permissions": [
            {"serviceAccountName": "op", "rules": [rule(&[""], &["pods"], verbs)]}]})
    };
    let old = with_strategy(
        "op.v1",
        None,
        strategy(
            json!([
                deployment("op", &[("m", "op:v1")]),
                deployment("old-only", &[("m", "x")])
            ]),
            &["get"],
        ),
    );
    let new = with_strategy(
        "op.v2",
        Some("op.v1"),
        strategy(
            json!([deployment("op", &[("m", "op:v2")])]),
            &["get", "list"],
        ),
    );
    let mut objects = vec![serde_json::to_value(&new).unwrap()];
    objects.extend(crate::controllers::plan::rbac::objects(&new, NS));
    objects.push(object("v1", "Service", "op-metrics"));
    objects.push(object("v1", "Service", "op-metrics"));
    let csvs = vec![(new, Some(old))];
    let touched = decide::touched(&objects, &csvs, NS, None, None);
    // Everything that may go exists, and of what is written the ServiceAccount and the
    // Deployment `op`.
    let mut existing: BTreeSet<ObjectRef> = touched.going;
    existing.insert(obj("v1", "ServiceAccount", true, "op"));
    existing.insert(obj("apps/v1", "Deployment", true, "op"));
    let found = Found {
        namespace: NS.into(),
        objects,
        csvs,
        existing,
        ..Found::default()
    };
    let impact = decide::decide(&found);
    let kinds = |refs: &[ObjectRef]| -> Vec<String> {
        refs.iter()
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect()
    };
    let o = &impact.objects;
    assert_eq!(
        kinds(&o.updated),
        ["Deployment op", "ServiceAccount op"],
        "sorted by apiVersion first"
    );
    // The OperatorCondition Role and RoleBinding (named as the CSV) come and go with it.
    let created = kinds(&o.created);
    assert_eq!(created.len(), 6, "{created:?}");
    assert!(created.contains(&"ClusterServiceVersion op.v2".to_string()));
    assert!(created.contains(&"Service op-metrics".to_string()));
    assert!(created.contains(&"Role op.v2".to_string()));
    assert!(created.contains(&"RoleBinding op.v2".to_string()));
    assert!(created.iter().any(|c| c.starts_with("Role op.v2-op-")));
    let deleted = kinds(&o.deleted);
    assert_eq!(deleted.len(), 6, "{deleted:?}");
    assert_eq!(deleted[0], "Deployment old-only");
    assert_eq!(deleted[1], "ClusterServiceVersion op.v1");
    assert_eq!(deleted[2], "Role op.v1");
    assert!(deleted[3].starts_with("Role op.v1-op-"));
    assert_eq!(deleted[4], "RoleBinding op.v1");
    assert!(deleted[5].starts_with("RoleBinding op.v1-op-"));
    assert_eq!(
        impact.summary,
        "1 escalation; +2 -2 rules; 2 images changed; objects +6 ~2 -6"
    );
}

#[test]
fn the_summary_puts_blockers_first_and_counts_each_kind_of_change() {
    let mut impact = PlanImpact {
        blockers: vec![
            "CRD x: stored version v1 would no longer be served".into(),
            "two".into(),
        ],
        ..PlanImpact::default()
    };
    impact.crds = vec![
        crate::api::CrdImpact {
            change: "Created".into(),
            ..Default::default()
        },
        crate::api::CrdImpact {
            change: "Updated".into(),
            ..Default::default()
        },
    ];
    impact.webhooks = vec![NamedChange {
        kind: "ConversionWebhook".into(),
        name: "c".into(),
        change: "Added".into(),
    }];
    assert_eq!(
        decide::summary(&impact),
        "BLOCKED: CRD x: stored version v1 would no longer be served (and 1 more); webhooks +1 -0 ~0; CRDs: 1 created, 1 updated; objects +0 ~0 -0"
    );
    assert_eq!(
        decide::failed("reading CustomResourceDefinition x: 403").summary,
        "preview failed: reading CustomResourceDefinition x: 403"
    );
}

/// A preview is due once, before any step runs: waiting for approval or Installing
/// untouched; not with lookups left, nor once a step has run.
#[test]
fn a_preview_is_due_once_before_any_step_runs() {
    let step = |status| Step {
        resolving: "op.v2".into(),
        resource: StepResource {
            kind: "ClusterServiceVersion".into(),
            name: "op.v2".into(),
            ..StepResource::default()
        },
        optional: None,
        status,
    };
    let status = |phase, steps: Vec<Step>| InstallPlanStatus {
        phase,
        plan: steps,
        ..InstallPlanStatus::default()
    };
    use InstallPlanPhase::{Complete, Installing, RequiresApproval};
    assert!(wanted(&status(
        RequiresApproval,
        vec![step(StepStatus::Unknown)]
    )));
    assert!(wanted(&status(Installing, vec![step(StepStatus::Unknown)])));
    assert!(!wanted(&status(
        Installing,
        vec![step(StepStatus::Created)]
    )));
    assert!(!wanted(&status(Installing, vec![])));
    assert!(!wanted(&status(Complete, vec![step(StepStatus::Unknown)])));
    let mut done = status(RequiresApproval, vec![step(StepStatus::Unknown)]);
    done.impact = Some(PlanImpact::default());
    assert!(!wanted(&done));
    let mut lookups = status(Installing, vec![step(StepStatus::Unknown)]);
    lookups.bundle_lookups = vec![crate::api::BundleLookup::default()];
    assert!(!wanted(&lookups));
}

/// An upgrade of `op.v1` to `op.v2` (one Role of `pods` rules each) with its plan's RBAC as
/// steps, the OperatorGroup's `targets`, and everything that may go present.
fn upgrade_in(targets: Option<Vec<String>>) -> (Found, PlanImpact) {
    let strategy = |verbs: &[&str]| {
        json!({"deployments": [deployment("op", &[("m", "op:v1")])], "permissions": [
            {"serviceAccountName": "op", "rules": [rule(&[""], &["pods"], verbs)]}]})
    };
    let old = with_strategy("op.v1", None, strategy(&["get"]));
    let new = with_strategy("op.v2", Some("op.v1"), strategy(&["get", "list"]));
    let mut objects = vec![serde_json::to_value(&new).unwrap()];
    objects.extend(crate::controllers::plan::rbac::objects(&new, NS));
    let csvs = vec![(new, Some(old))];
    let touched = decide::touched(&objects, &csvs, NS, targets.as_deref(), None);
    let mut existing: BTreeSet<ObjectRef> = touched.going;
    existing.insert(obj("apps/v1", "Deployment", true, "op"));
    let found = Found {
        namespace: NS.into(),
        objects,
        csvs,
        existing,
        targets,
        ..Found::default()
    };
    let impact = decide::decide(&found);
    (found, impact)
}

fn refs(refs: &[ObjectRef]) -> Vec<String> {
    refs.iter()
        .map(|r| {
            let ns = r
                .namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default();
            format!("{} {ns}{}", r.kind, r.name)
        })
        .collect()
}

/// AllNamespaces: the CSV controller lifts the plan's Role and RoleBinding into same-named
/// ClusterRole and ClusterRoleBinding (rules plus namespaces get/list/watch); they come
/// with the new CSV and go with the old, and their rules count in Cluster scope.
#[test]
fn all_namespaces_lifts_the_plans_roles_into_cluster_roles() {
    let (_, impact) = upgrade_in(Some(vec![String::new()]));
    let created = refs(&impact.objects.created);
    let lifted: Vec<&String> = created
        .iter()
        .filter(|c| c.starts_with("ClusterRole"))
        .collect();
    assert_eq!(lifted.len(), 2, "{created:?}");
    assert!(lifted[0].starts_with("ClusterRole op.v2-op-"));
    assert!(lifted[1].starts_with("ClusterRoleBinding op.v2-op-"));
    // Same name as the Role.
    let role = created
        .iter()
        .find(|c| c.starts_with("Role ns/op.v2-op-"))
        .unwrap();
    assert_eq!(
        &lifted[0]["ClusterRole ".len()..],
        &role["Role ns/".len()..]
    );
    let deleted = refs(&impact.objects.deleted);
    assert!(
        deleted
            .iter()
            .any(|d| d.starts_with("ClusterRole op.v1-op-"))
    );
    assert!(
        deleted
            .iter()
            .any(|d| d.starts_with("ClusterRoleBinding op.v1-op-"))
    );
    let op = &impact.rbac[0];
    let scoped = |side: &[crate::api::RuleChange], scope: &str| {
        side.iter()
            .filter(|r| r.scope == scope && r.rule["resources"] == json!(["pods"]))
            .count()
    };
    assert_eq!(scoped(&op.added, "Cluster"), 1, "the lifted rule");
    assert_eq!(scoped(&op.removed, "Cluster"), 1);
    assert_eq!(scoped(&op.added, "Namespace"), 1);
    // The namespaces rule is in both lifted roles: no change.
    assert!(
        op.added
            .iter()
            .all(|r| r.rule["resources"] != json!(["namespaces"]))
    );
}

/// MultiNamespace: the plan's Role and RoleBinding are copied into each other target.
#[test]
fn multi_namespace_copies_the_plans_roles_into_the_other_targets() {
    let (_, impact) = upgrade_in(Some(vec!["a".into(), NS.into()]));
    let created = refs(&impact.objects.created);
    assert!(created.iter().any(|c| c.starts_with("Role a/op.v2-op-")));
    assert!(
        created
            .iter()
            .any(|c| c.starts_with("RoleBinding a/op.v2-op-"))
    );
    assert!(!created.iter().any(|c| c.starts_with("ClusterRole")));
    let deleted = refs(&impact.objects.deleted);
    assert!(deleted.iter().any(|d| d.starts_with("Role a/op.v1-op-")));
    // Without a group nothing is spread.
    let (_, alone) = upgrade_in(None);
    assert!(
        !refs(&alone.objects.created)
            .iter()
            .any(|c| c.contains("a/"))
    );
}

/// The OperatorCondition Role of each CSV grants its accounts get/patch/update on its
/// condition: added for the new CSV, removed for the old, judged like any rule.
#[test]
fn the_operator_condition_role_comes_and_goes_with_its_csv() {
    let (_, impact) = upgrade_in(None);
    let condition = |side: &[crate::api::RuleChange], csv: &str| {
        side.iter()
            .find(|r| r.rule["resourceNames"] == json!([csv]))
            .cloned()
    };
    let op = &impact.rbac[0];
    assert_eq!(op.service_account, "ns/op");
    let added = condition(&op.added, "op.v2").expect("the new condition rule");
    assert_eq!(added.scope, "Namespace");
    assert_eq!(
        added.rule["resources"],
        json!(["operatorconditions", "operatorconditions/status"])
    );
    assert_eq!(added.rule["verbs"], json!(["get", "patch", "update"]));
    // A rule the account did not have, but renewed: it held the same right on the old
    // CSV's condition, so it counts as no new power.
    assert!(added.escalation && added.renewed);
    let marked = impact.rbac.iter().flat_map(|a| &a.added);
    assert_eq!(
        impact.escalations(),
        marked.filter(|r| r.escalation).count() - 1
    );
    assert!(condition(&op.removed, "op.v1").is_some());
    // On a first install it is judged as any rule: nothing allowed it before.
    let (mut found, _) = upgrade_in(None);
    found.csvs[0].1 = None;
    let first = decide::decide(&found);
    let added = condition(&first.rbac[0].added, "op.v2").unwrap();
    assert!(added.escalation && !added.renewed);
    let created = refs(&impact.objects.created);
    assert!(created.contains(&"Role ns/op.v2".to_string()));
    assert!(created.contains(&"RoleBinding ns/op.v2".to_string()));
}

/// An existing object counts as updated only when its content changes: fields the step
/// sets that the live object holds otherwise (what the API server adds is no change); a
/// Deployment when its CSV's spec of it or the CSV's annotations change; a CRD when the
/// cluster does not hold its spec.
#[test]
fn updated_means_the_content_changes() {
    let (mut found, impact) = upgrade_in(None);
    // The same declared spec and annotations: the Deployment does not change.
    assert!(
        impact.objects.updated.is_empty(),
        "{:?}",
        impact.objects.updated
    );
    let mut new = found.csvs[0].0.clone();
    new.metadata.annotations = Some([("createdAt".to_string(), "now".to_string())].into());
    found.csvs[0].0 = new;
    assert_eq!(
        refs(&decide::decide(&found).objects.updated),
        ["Deployment ns/op"]
    );

    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "reader", "labels": {"a": "b"}},
                      "rules": [rule(&[""], &["pods"], &["get"])]});
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "cfg"}, "data": {"k": "v"}});
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op"}});
    let crd_step = object(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "w.example.com",
    );
    found.objects = vec![
        role.clone(),
        config.clone(),
        account.clone(),
        crd_step.clone(),
    ];
    found.csvs.clear();
    found.existing = found
        .objects
        .iter()
        .map(|o| decide::object_ref(o, NS))
        .collect();
    let live_role = json!({"metadata": {"name": "reader", "uid": "u"},
                           "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"],
                                      "resourceNames": []}]});
    let live_account = json!({"metadata": {"name": "op"}, "secrets": [{"name": "t"}]});
    found.live = [
        (decide::object_ref(&role, NS), live_role),
        (
            decide::object_ref(&config, NS),
            json!({"data": {"k": "old"}}),
        ),
        (decide::object_ref(&account, NS), live_account),
    ]
    .into();
    found.crds = vec![CrdFound {
        new: crd_step,
        on_cluster: OnCluster::Unchanged,
        listed: Vec::new(),
    }];
    let impact = decide::decide(&found);
    assert_eq!(refs(&impact.objects.updated), ["ConfigMap ns/cfg"]);
    assert!(impact.crds.is_empty());
    // Not read (a first install's shared object): counted as updated.
    found.live.clear();
    let unread = refs(&decide::decide(&found).objects.updated);
    assert_eq!(
        unread,
        [
            "ClusterRole reader",
            "ConfigMap ns/cfg",
            "ServiceAccount ns/op"
        ]
    );
}

/// A CSV whose Deployment `deployment` (pods of account `op`) serves `webhooks`, with the
/// owned APIServices `api_services`.
fn serving_csv(
    name: &str,
    replaces: Option<&str>,
    deployment: &str,
    webhooks: Value,
    api_services: Value,
) -> ClusterServiceVersion {
    let pods = json!({"serviceAccountName": "op", "containers": [{"name": "m", "image": "op"}]});
    csv(
        name,
        replaces,
        json!({
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": deployment, "spec": {
                "selector": {"matchLabels": {"app": "op"}}, "template": {"spec": pods}}}]}},
            "webhookdefinitions": webhooks,
            "apiservicedefinitions": {"owned": api_services},
        }),
    )
}

/// An admission webhook served by `deployment` on 443, its pods listening on 9443.
fn served_webhook(name: &str, type_: &str, deployment: &str) -> Value {
    let mut webhook = webhook(name, type_, "Fail");
    webhook["deploymentName"] = json!(deployment);
    webhook["containerPort"] = json!(443);
    webhook["targetPort"] = json!(9443);
    webhook["webhookPath"] = json!("/validate");
    webhook
}

/// The name of the configuration of the `i`th webhook of `csv`, installed in the plan's
/// namespace.
fn configuration(csv: &ClusterServiceVersion, i: usize) -> String {
    crate::controllers::plan::serving::configuration_name(&csv.spec.webhookdefinitions[i], NS)
}

/// The cluster's `system:auth-delegator`, bound by each served Deployment's account.
fn auth_delegator() -> Rbac {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "system:auth-delegator"},
        "rules": [rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                  rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &["create"])],
    }))
    .unwrap();
    Rbac {
        cluster_roles: vec![Arc::new(role)],
        ..Rbac::default()
    }
}

/// A first install of a CSV serving admission webhooks and an APIService from one
/// Deployment: the CSV controller's serving objects, named as it names them, are created
/// with it, and the rules they grant its account are added.
#[test]
fn a_webhook_csv_brings_its_serving_objects() {
    let mut api = api_service("a.example.com", "v1");
    api["deploymentName"] = json!("op");
    let new = serving_csv(
        "op.v1",
        None,
        "op",
        json!([
            served_webhook("v.example.com", "ValidatingAdmissionWebhook", "op"),
            served_webhook("m.example.com", "MutatingAdmissionWebhook", "op"),
        ]),
        json!([api]),
    );
    let (validating, mutating) = (configuration(&new, 0), configuration(&new, 1));
    assert!(validating.starts_with("v.example.com-"), "{validating}");
    let found = Found {
        namespace: NS.into(),
        objects: vec![serde_json::to_value(&new).unwrap()],
        csvs: vec![(new, None)],
        rbac: auth_delegator(),
        ..Found::default()
    };
    let impact = decide::decide(&found);
    assert_eq!(
        refs(&impact.objects.created),
        [
            format!("MutatingWebhookConfiguration {mutating}"),
            format!("ValidatingWebhookConfiguration {validating}"),
            "APIService v1.a.example.com".into(),
            "Deployment ns/op".into(),
            "ClusterServiceVersion ns/op.v1".into(),
            "ClusterRoleBinding op-service-system:auth-delegator".into(),
            "Role ns/op-service-cert".into(),
            "Role ns/op.v1".into(),
            "RoleBinding kube-system/op-service-auth-reader".into(),
            "RoleBinding ns/op-service-cert".into(),
            "RoleBinding ns/op.v1".into(),
            "Secret ns/op-service-cert".into(),
            "Service ns/op-service".into(),
        ]
    );
    assert!(impact.objects.updated.is_empty() && impact.objects.deleted.is_empty());
    // The pods' account may read its certificate and delegate authentication: new rights
    // (the OperatorCondition's go to `default`, which the strategy's permissions leave).
    let accounts: Vec<&str> = impact
        .rbac
        .iter()
        .map(|a| a.service_account.as_str())
        .collect();
    assert_eq!(accounts, ["ns/default", "ns/op"]);
    let added: Vec<(String, Value, bool)> = impact.rbac[1]
        .added
        .iter()
        .map(|r| (r.scope.clone(), r.rule.clone(), r.escalation))
        .collect();
    let secret = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                        "resourceNames": ["op-service-cert"]});
    let reviews = rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]);
    let access = rule(
        &["authorization.k8s.io"],
        &["subjectaccessreviews"],
        &["create"],
    );
    assert_eq!(
        added,
        [
            ("Cluster".into(), reviews, true),
            ("Cluster".into(), access, true),
            ("Namespace".into(), secret, true),
        ]
    );
}

/// An upgrade from `old` to `new` on a cluster that holds `old`, its Deployments and what
/// the CSV controller made for it, as it made it and the API server keeps it (the
/// certificate and CA bundles in place, defaults filled in).
fn upgrade_over(old: ClusterServiceVersion, new: ClusterServiceVersion) -> PlanImpact {
    let made = super::made::made(&old, NS, None);
    let mut live: std::collections::BTreeMap<ObjectRef, Value> = made
        .iter()
        .map(|o| (super::made::made_ref(o), o.clone()))
        .collect();
    for (r, object) in &mut live {
        match r.kind.as_str() {
            "Secret" => object["data"] = json!({"tls.crt": "Y2VydA=="}),
            "Service" => {
                object["spec"]["clusterIP"] = json!("10.0.0.7");
                object["spec"]["ports"][0]["protocol"] = json!("TCP");
            }
            "ValidatingWebhookConfiguration" => {
                let webhook = &mut object["webhooks"][0];
                webhook["clientConfig"]["caBundle"] = json!("Q0E=");
                webhook["namespaceSelector"] = json!({});
                webhook["timeoutSeconds"] = json!(10);
            }
            _ => {}
        }
    }
    let mut existing: BTreeSet<ObjectRef> = live.keys().cloned().collect();
    existing
        .extend(csvs::deployments(Some(&old)).map(|d| obj("apps/v1", "Deployment", true, &d.name)));
    let name = old.metadata.name.clone().unwrap_or_default();
    existing.insert(obj(CSV_API, "ClusterServiceVersion", true, &name));
    let found = Found {
        namespace: NS.into(),
        objects: vec![serde_json::to_value(&new).unwrap()],
        csvs: vec![(new, Some(old))],
        existing,
        live,
        ..Found::default()
    };
    decide::decide(&found)
}

const CSV_API: &str = "operators.coreos.com/v1alpha1";

/// An upgrade replacing a webhook CSV: the serving objects are named by Deployment (and
/// the configurations by webhook and namespace), not by CSV, so the same Deployment and
/// webhooks write the same objects again (updated only where their content changes); a
/// renamed Deployment creates its own and deletes the old ones; a CSV without webhooks
/// deletes them all.
#[test]
fn an_upgrade_replacing_a_webhook_csv_creates_and_deletes_by_name() {
    let validating = |deployment: &str| {
        json!([served_webhook(
            "v.example.com",
            "ValidatingAdmissionWebhook",
            deployment
        )])
    };
    let old = serving_csv("op.v1", None, "op", validating("op"), json!([]));
    let vwc = format!("ValidatingWebhookConfiguration {}", configuration(&old, 0));
    let condition = |csv: &str| {
        [
            format!("ClusterServiceVersion ns/{csv}"),
            format!("Role ns/{csv}"),
            format!("RoleBinding ns/{csv}"),
        ]
    };
    // Same Deployment, same webhook: nothing of it comes, goes or changes.
    let same = serving_csv("op.v2", Some("op.v1"), "op", validating("op"), json!([]));
    let impact = upgrade_over(old.clone(), same.clone());
    assert_eq!(refs(&impact.objects.created), condition("op.v2"));
    assert_eq!(refs(&impact.objects.deleted), condition("op.v1"));
    assert!(
        impact.objects.updated.is_empty(),
        "{:?}",
        impact.objects.updated
    );
    assert!(impact.rbac.iter().all(|a| {
        a.added
            .iter()
            .all(|r| r.rule["resourceNames"] != json!(["op-service-cert"]))
    }));
    // A changed webhook: its configuration is updated.
    let mut changed = same;
    changed.spec.webhookdefinitions[0].failure_policy = Some("Ignore".into());
    let impact = upgrade_over(old.clone(), changed);
    assert_eq!(refs(&impact.objects.updated), std::slice::from_ref(&vwc));
    // Another Deployment serves it: its objects are created, the old ones deleted; the
    // configuration (named by webhook) is updated to call the new Service.
    let moved = serving_csv(
        "op.v2",
        Some("op.v1"),
        "op-manager",
        validating("op-manager"),
        json!([]),
    );
    let impact = upgrade_over(old.clone(), moved);
    let served_by = |deployment: &str, csv: &str| {
        vec![
            format!("Deployment ns/{deployment}"),
            format!("ClusterServiceVersion ns/{csv}"),
            format!("ClusterRoleBinding {deployment}-service-system:auth-delegator"),
            format!("Role ns/{deployment}-service-cert"),
            format!("Role ns/{csv}"),
            format!("RoleBinding kube-system/{deployment}-service-auth-reader"),
            format!("RoleBinding ns/{deployment}-service-cert"),
            format!("RoleBinding ns/{csv}"),
            format!("Secret ns/{deployment}-service-cert"),
            format!("Service ns/{deployment}-service"),
        ]
    };
    assert_eq!(
        refs(&impact.objects.created),
        served_by("op-manager", "op.v2")
    );
    assert_eq!(refs(&impact.objects.deleted), served_by("op", "op.v1"));
    assert_eq!(refs(&impact.objects.updated), std::slice::from_ref(&vwc));
    // No webhooks any more: everything served goes; the Deployment stays.
    let plain = serving_csv("op.v2", Some("op.v1"), "op", json!([]), json!([]));
    let impact = upgrade_over(old, plain);
    assert_eq!(refs(&impact.objects.created), condition("op.v2"));
    let mut gone = served_by("op", "op.v1");
    gone.remove(0);
    gone.insert(0, vwc);
    assert_eq!(refs(&impact.objects.deleted), gone);
    assert!(impact.objects.updated.is_empty());
}

const WORKERS: &str = "jhipster8workers.maximilianopizarro.github.io";

/// A CSV that owns the `WORKERS` CRD at `versions`, checked by the CSV controller (it has a
/// phase, so the OperatorGroup controller counts its APIs).
fn owning(name: &str, replaces: Option<&str>, versions: &[&str]) -> ClusterServiceVersion {
    let owned: Vec<Value> = versions
        .iter()
        .map(|v| json!({"name": WORKERS, "version": v, "kind": "Jhipster8Worker"}))
        .collect();
    let mut csv = csv(
        name,
        replaces,
        json!({"customresourcedefinitions": {"owned": owned}}),
    );
    csv.status = Some(crate::api::ClusterServiceVersionStatus {
        phase: Some(crate::api::CsvPhase::Succeeded),
        ..Default::default()
    });
    csv
}

/// An upgrade from `old` to `new` in a namespace whose OperatorGroup `og` has `old` as its
/// member, on a cluster holding the ClusterRoles the OperatorGroup controller made for it
/// (the group's with the rules the aggregation controller fills in).
fn upgrade_in_group(old: ClusterServiceVersion, new: ClusterServiceVersion) -> PlanImpact {
    use crate::controllers::plan::provided;
    let mut og = crate::api::OperatorGroup::new("og", Default::default());
    og.metadata.namespace = Some(NS.into());
    let apis = provided::provided_apis([&old]);
    let mut roles: Vec<Value> = provided::group_cluster_roles(&og, &apis)
        .iter()
        .map(provided::cluster_role_body)
        .collect();
    if !apis.is_empty() {
        for role in &mut roles {
            role["rules"] = json!([rule(&["maximilianopizarro.github.io"], &["*"], &["*"])]);
        }
    }
    for api in &apis {
        let made = provided::api_cluster_roles(api, "crd-uid");
        roles.extend(made.iter().map(provided::cluster_role_body));
    }
    let live: std::collections::BTreeMap<ObjectRef, Value> = roles
        .into_iter()
        .map(|o| (super::made::made_ref(&o), o))
        .collect();
    let mut existing: BTreeSet<ObjectRef> = live.keys().cloned().collect();
    let name = old.metadata.name.clone().unwrap_or_default();
    existing.insert(obj(CSV_API, "ClusterServiceVersion", true, &name));
    let found = Found {
        namespace: NS.into(),
        objects: vec![serde_json::to_value(&new).unwrap()],
        csvs: vec![(new, Some(old.clone()))],
        existing,
        live,
        group: Some(super::made::Group {
            group: og,
            members: vec![old],
        }),
        ..Found::default()
    };
    decide::decide(&found)
}

fn cluster_roles(refs: &[ObjectRef]) -> Vec<String> {
    refs.iter()
        .filter(|r| r.kind == "ClusterRole")
        .map(|r| r.name.clone())
        .collect()
}

/// The names of the OperatorGroup `og`'s three aggregated roles, hash left out.
fn group_role_prefixes(names: &[String]) -> Vec<&str> {
    names
        .iter()
        .map(|n| n.rsplit_once('-').map_or(n.as_str(), |(prefix, _)| prefix))
        .collect()
}

/// A new CSV that owns a new CRD: the OperatorGroup controller creates the four roles of
/// its API version and updates the group's three aggregated roles to select them.
#[test]
fn a_new_provided_api_creates_its_roles_and_updates_the_groups() {
    let impact = upgrade_in_group(
        owning("op.v1", None, &[]),
        owning("op.v2", Some("op.v1"), &["v1alpha1"]),
    );
    assert_eq!(
        cluster_roles(&impact.objects.created),
        ["admin", "crdview", "edit", "view"].map(|s| format!("{WORKERS}-v1alpha1-{s}"))
    );
    let updated = cluster_roles(&impact.objects.updated);
    assert_eq!(
        group_role_prefixes(&updated),
        ["olm.og.og.admin", "olm.og.og.edit", "olm.og.og.view"]
    );
    assert!(cluster_roles(&impact.objects.deleted).is_empty());
}

/// An upgrade that keeps the same APIs: the roles are there and stay as they are. One that
/// drops an API updates the group's roles, and deletes none: the per-API roles are owned by
/// the CRD and go only with it.
#[test]
fn the_same_apis_touch_no_roles_and_a_dropped_api_deletes_none() {
    let old = owning("op.v1", None, &["v1alpha1"]);
    let impact = upgrade_in_group(old.clone(), owning("op.v2", Some("op.v1"), &["v1alpha1"]));
    for side in [
        &impact.objects.created,
        &impact.objects.updated,
        &impact.objects.deleted,
    ] {
        assert!(cluster_roles(side).is_empty(), "{side:?}");
    }
    let dropped = upgrade_in_group(old, owning("op.v2", Some("op.v1"), &[]));
    assert!(cluster_roles(&dropped.objects.created).is_empty());
    assert_eq!(cluster_roles(&dropped.objects.updated).len(), 3);
    assert!(cluster_roles(&dropped.objects.deleted).is_empty());
}
