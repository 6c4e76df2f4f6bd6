//! A CSV's webhooks (`spec.webhookdefinitions`), planned (pure) as upstream makes them:
//! the objects named and shaped in `controllers::plan::serving` ([`plan`]), which the
//! InstallPlan preview predicts from too (per Deployment that serves any, a Service, the
//! serving certificate's Secret mounted at both conventions' paths, RBAC to read it and to
//! delegate authentication; then one Validating/MutatingWebhookConfiguration per admission
//! webhook, limited to the OperatorGroup's namespaces, and each conversion webhook written
//! into its CRDs), stamped here with the CSV's owner and its certificate.
//!
//! Differences from upstream, on purpose: configurations get a stable name
//! (`<generateName>-<hash of the namespace>`, applied server-side) instead of a random
//! suffix, so a restart or an upgrade updates the same object; and definitions that cannot
//! work (no such Deployment, a conversion webhook for a CRD the CSV does not own) fail the
//! CSV up front with a message naming the webhook, where upstream installs half and loops.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::certs::{self, CA_HASH_ANNOTATION, CA_KEY, CERT_KEY, Material, PRIVATE_KEY_KEY};
use super::owned::{Owner, Planned};
use crate::api::{
    ClusterServiceVersion, InstallModeType, WebhookAdmissionType, WebhookDescription,
};
use crate::cluster::ownership::short_hash;
use crate::controllers::plan::serving::{
    self as plan, AUTH_DELEGATOR_SUFFIX, AUTH_READER_SUFFIX, Stamp, base64_of,
};
// Named in plan::serving, read here by the rest of the CSV controller.
pub use crate::controllers::plan::serving::{
    conversions, owned_api_services, serves_anything, service_name,
};

/// Why the webhook definitions cannot be installed (the CSV fails with
/// InvalidWebhookDescription), naming the webhook; None when they can.
pub fn problem(csv: &ClusterServiceVersion) -> Option<String> {
    let definitions = &csv.spec.webhookdefinitions;
    let strategy = csv.spec.install.spec.as_ref();
    let owned: Vec<&str> = csv
        .spec
        .customresourcedefinitions
        .as_ref()
        .map(|d| d.owned.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();
    for (i, description) in definitions.iter().enumerate() {
        let name = &description.generate_name;
        if definitions[..i].iter().any(|d| &d.generate_name == name) {
            return Some("CSV contains repeated WebhookDescription name".into());
        }
        if let Some(rule_problem) = rules_problem(description) {
            return Some(format!("webhook {name}: {rule_problem}"));
        }
        let Some(deployment) = description.deployment_name.as_deref() else {
            return Some(format!("webhook {name}: no deploymentName"));
        };
        if !strategy.is_some_and(|s| s.deployments.iter().any(|d| d.name == deployment)) {
            return Some(format!(
                "webhook {name}: deployment {deployment} is not in the install strategy"
            ));
        }
        if description.type_ == WebhookAdmissionType::ConversionWebhook {
            if !supports_only_all_namespaces(csv) {
                return Some(format!(
                    "webhook {name}: CSVs with conversion webhooks must support only AllNamespaces"
                ));
            }
            if description.conversion_crds.is_empty() {
                return Some(format!(
                    "webhook {name}: conversion webhook must have at least one CRD specified"
                ));
            }
            if let Some(crd) = description
                .conversion_crds
                .iter()
                .find(|crd| !owned.contains(&crd.as_str()))
            {
                return Some(format!(
                    "webhook {name}: csv {} does not own CRD {crd}",
                    csv.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    None
}

/// Upstream refuses rules that would let an operator intercept every group, OLM's own
/// objects, or the webhook configurations themselves.
fn rules_problem(description: &WebhookDescription) -> Option<&'static str> {
    for rule in description.rules.iter().flatten() {
        let list = |key: &str| -> Vec<&str> {
            rule[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default()
        };
        let (groups, resources) = (list("apiGroups"), list("resources"));
        if groups.contains(&"*") {
            return Some("webhook rules cannot include all groups");
        }
        if groups.contains(&"operators.coreos.com") {
            return Some("webhook rules cannot include the OLM group");
        }
        if groups.contains(&"admissionregistration.k8s.io")
            && resources.iter().any(|r| {
                matches!(
                    *r,
                    "*" | "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration"
                )
            })
        {
            return Some(
                "webhook rules cannot include MutatingWebhookConfiguration or ValidatingWebhookConfiguration resources",
            );
        }
    }
    None
}

/// Upstream's `isSingletonOperator`: AllNamespaces not refused and no other mode supported.
fn supports_only_all_namespaces(csv: &ClusterServiceVersion) -> bool {
    csv.spec.install_modes.iter().all(|mode| {
        if mode.type_ == InstallModeType::AllNamespaces {
            mode.supported
        } else {
            !mode.supported
        }
    })
}

/// The two bindings of a served Deployment that live outside its namespace (the
/// ClusterRoleBinding to `system:auth-delegator`, the RoleBinding in `kube-system`) are
/// named by upstream after the Service alone, so two namespaces' installs of one operator
/// would take each other's. Each keeps upstream's name unless an object of that name is
/// there and is not this namespace's install's (another namespace's, or anyone else's); then
/// it is named with a hash of the namespace instead, and the other is never overwritten.
/// `labels_of(kind, namespace, name)`: the labels of the object there, None when absent.
pub fn unshare(
    planned: &mut [Planned],
    namespace: &str,
    labels_of: impl Fn(&str, Option<&str>, &str) -> Option<BTreeMap<String, String>>,
) {
    use crate::cluster::ownership::OWNER_NAMESPACE_LABEL;
    for object in planned.iter_mut() {
        let suffix = match (object.kind, object.namespace.as_deref()) {
            ("ClusterRoleBinding", None) if object.name.ends_with(AUTH_DELEGATOR_SUFFIX) => {
                AUTH_DELEGATOR_SUFFIX
            }
            ("RoleBinding", Some("kube-system")) if object.name.ends_with(AUTH_READER_SUFFIX) => {
                AUTH_READER_SUFFIX
            }
            _ => continue,
        };
        let taken = labels_of(object.kind, object.namespace.as_deref(), &object.name).is_some_and(
            |labels| labels.get(OWNER_NAMESPACE_LABEL).map(String::as_str) != Some(namespace),
        );
        if !taken {
            continue;
        }
        let service = object.name.trim_end_matches(suffix);
        let name = format!("{service}-{}{suffix}", short_hash(&[namespace.as_bytes()]));
        object.body["metadata"]["name"] = json!(name);
        object.name = name;
    }
}

/// The Secret, RBAC and Service of one served Deployment ([`plan::serving_objects`]),
/// the Secret holding `material`. `pod_selector` is the Deployment's
/// `selector.matchLabels`; `account` the pods' ServiceAccount.
pub fn serving_objects(
    owner: &Owner,
    deployment: &str,
    ports: &[(i32, Value)],
    pod_selector: &Value,
    account: &str,
    material: &Material,
) -> Vec<Planned> {
    let made = plan::serving_objects(
        &owner.namespace,
        deployment,
        ports,
        pod_selector,
        account,
        &stamp(owner),
    );
    made.into_iter()
        .map(|mut made| {
            if made.kind == "Secret" {
                with_certificate(&mut made.body, material);
            }
            made
        })
        .collect()
}

/// The serving Secret's certificate, and the hash of its CA.
fn with_certificate(secret: &mut Value, material: &Material) {
    secret["metadata"]["annotations"] = json!({ CA_HASH_ANNOTATION: material.ca_hash() });
    secret["data"] = json!({
        CERT_KEY: base64_of(&material.cert_pem),
        PRIVATE_KEY_KEY: base64_of(&material.key_pem),
        CA_KEY: base64_of(&material.ca_pem),
    });
}

/// One Validating/MutatingWebhookConfiguration per admission webhook
/// ([`plan::admission_configurations`]). `namespaces` is the OperatorGroup's namespace
/// selector (None: every namespace); `ca_of` gives the CA PEM of a served Deployment.
pub fn admission_configurations(
    csv: &ClusterServiceVersion,
    owner: &Owner,
    namespaces: Option<&Value>,
    ca_of: &BTreeMap<String, String>,
) -> Vec<Planned> {
    plan::admission_configurations(
        csv,
        &owner.namespace,
        &owner.labels(),
        namespaces,
        Some(ca_of),
    )
}

/// One APIService per owned API service ([`plan::api_services`]).
pub fn api_services(
    csv: &ClusterServiceVersion,
    owner: &Owner,
    ca_of: &BTreeMap<String, String>,
) -> Vec<Planned> {
    plan::api_services(csv, &owner.namespace, &owner.labels(), Some(ca_of))
}

/// What the CSV controller stamps on the objects it makes for `owner`.
fn stamp(owner: &Owner) -> Stamp {
    Stamp {
        labels: owner.labels(),
        reference: Some(owner.reference()),
    }
}

/// The hosts of a served Deployment's certificate.
pub fn hosts(deployment: &str, namespace: &str) -> Vec<String> {
    certs::hosts(&service_name(deployment), namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::plan::serving::{GENERATE_NAME_LABEL, served};

    #[test]
    fn bindings_outside_the_namespace_keep_upstreams_name_unless_another_install_holds_it() {
        let planned = || {
            vec![
                Planned {
                    kind: "ClusterRoleBinding",
                    namespace: None,
                    name: "op-service-system:auth-delegator".into(),
                    body: json!({"metadata": {"name": "op-service-system:auth-delegator"}}),
                },
                Planned {
                    kind: "RoleBinding",
                    namespace: Some("kube-system".into()),
                    name: "op-service-auth-reader".into(),
                    body: json!({"metadata": {"name": "op-service-auth-reader"}}),
                },
            ]
        };
        let owned_by =
            |ns: &str| BTreeMap::from([("olm.owner.namespace".to_string(), ns.to_string())]);
        // Absent, or this namespace's own: upstream's names.
        let mut mine = planned();
        unshare(&mut mine, "a", |_, _, _| Some(owned_by("a")));
        assert_eq!(mine, planned());
        let mut free = planned();
        unshare(&mut free, "a", |_, _, _| None);
        assert_eq!(free, planned());
        // Another namespace's, or unlabelled: a name of this namespace's own.
        for holder in [Some(owned_by("b")), Some(BTreeMap::new())] {
            let mut taken = planned();
            unshare(&mut taken, "a", |_, _, _| holder.clone());
            assert_ne!(taken[0].name, planned()[0].name);
            assert!(
                taken[0].name.starts_with("op-service-"),
                "{}",
                taken[0].name
            );
            assert!(taken[0].name.ends_with("-system:auth-delegator"));
            assert!(taken[1].name.ends_with("-auth-reader"));
            assert_eq!(taken[0].body["metadata"]["name"], taken[0].name);
            let mut again = planned();
            unshare(&mut again, "a", |_, _, _| holder.clone());
            assert_eq!(again, taken, "stable from round to round");
        }
    }

    fn csv(webhooks: Value, modes: &[(&str, bool)]) -> ClusterServiceVersion {
        let modes: Vec<Value> = modes
            .iter()
            .map(|(t, s)| json!({"type": t, "supported": s}))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": "op.v1", "namespace": "ops"},
            "spec": {
                "displayName": "op",
                "installModes": modes,
                "customresourcedefinitions": {"owned": [{"name": "widgets.example.com", "version": "v1", "kind": "Widget"}]},
                "install": {"strategy": "deployment", "spec": {"deployments": [
                    {"name": "op-manager", "spec": {"selector": {"matchLabels": {"app": "op"}}, "template": {"metadata": {"labels": {"app": "op"}}, "spec": {"containers": [{"name": "m", "image": "x"}]}}}}
                ]}},
                "webhookdefinitions": webhooks,
            },
        }))
        .unwrap()
    }

    fn validating(name: &str, deployment: &str) -> Value {
        json!({
            "generateName": name, "type": "ValidatingAdmissionWebhook", "deploymentName": deployment,
            "containerPort": 443, "targetPort": 9443, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "failurePolicy": "Fail", "webhookPath": "/validate",
            "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}],
        })
    }

    fn owner() -> Owner {
        Owner {
            csv: "op.v1".into(),
            namespace: "ops".into(),
            uid: "u".into(),
            ..Owner::default()
        }
    }

    #[test]
    fn bad_definitions_are_named() {
        let all = [("AllNamespaces", true), ("OwnNamespace", false)];
        assert_eq!(
            problem(&csv(
                json!([validating("v.example.com", "op-manager")]),
                &all
            )),
            None
        );
        let twice = csv(
            json!([validating("v", "op-manager"), validating("v", "op-manager")]),
            &all,
        );
        assert_eq!(
            problem(&twice).unwrap(),
            "CSV contains repeated WebhookDescription name"
        );
        let elsewhere = csv(json!([validating("v", "missing")]), &all);
        assert_eq!(
            problem(&elsewhere).unwrap(),
            "webhook v: deployment missing is not in the install strategy"
        );
        let mut olm = validating("v", "op-manager");
        olm["rules"][0]["apiGroups"] = json!(["operators.coreos.com"]);
        assert_eq!(
            problem(&csv(json!([olm]), &all)).unwrap(),
            "webhook v: webhook rules cannot include the OLM group"
        );
        let conversion = |crds: Value| {
            json!([{"generateName": "c", "type": "ConversionWebhook", "deploymentName": "op-manager",
                    "sideEffects": "None", "admissionReviewVersions": ["v1"], "conversionCRDs": crds}])
        };
        assert_eq!(
            problem(&csv(conversion(json!(["widgets.example.com"])), &all)),
            None
        );
        assert_eq!(
            problem(&csv(conversion(json!(["gadgets.example.com"])), &all)).unwrap(),
            "webhook c: csv op.v1 does not own CRD gadgets.example.com"
        );
        let own = [("AllNamespaces", true), ("OwnNamespace", true)];
        assert_eq!(
            problem(&csv(conversion(json!(["widgets.example.com"])), &own)).unwrap(),
            "webhook c: CSVs with conversion webhooks must support only AllNamespaces"
        );
    }

    #[test]
    fn configurations_carry_the_webhook_the_ca_and_the_group_namespaces() {
        let csv = csv(json!([validating("v.example.com", "op-manager")]), &[]);
        let ca = BTreeMap::from([("op-manager".to_string(), "CA PEM".to_string())]);
        let selector = json!({"matchLabels": {"olm.operatorgroup.uid/abc": ""}});
        let planned = admission_configurations(&csv, &owner(), Some(&selector), &ca);
        assert_eq!(planned.len(), 1);
        let body = &planned[0].body;
        assert_eq!(planned[0].kind, "ValidatingWebhookConfiguration");
        assert!(planned[0].name.starts_with("v.example.com-"));
        let webhook = &body["webhooks"][0];
        assert_eq!(
            webhook["clientConfig"]["service"]["name"],
            "op-manager-service"
        );
        assert_eq!(webhook["clientConfig"]["service"]["port"], 443);
        assert_eq!(webhook["clientConfig"]["service"]["path"], "/validate");
        assert_eq!(webhook["clientConfig"]["caBundle"], base64_of("CA PEM"));
        assert_eq!(webhook["namespaceSelector"], selector);
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(body["metadata"]["labels"]["olm.owner"], "op.v1");
        assert_eq!(
            body["metadata"]["labels"][GENERATE_NAME_LABEL],
            "v.example.com"
        );
        // Same description in another namespace: another object.
        let mut other = owner();
        other.namespace = "elsewhere".into();
        let there = admission_configurations(&csv, &other, None, &ca);
        assert_ne!(there[0].name, planned[0].name);
        assert!(
            there[0].body["webhooks"][0]
                .get("namespaceSelector")
                .is_none()
        );
    }

    #[test]
    fn one_service_per_deployment_with_every_port() {
        let csv = csv(
            json!([validating("v", "op-manager"), validating("w", "op-manager")]),
            &[],
        );
        assert_eq!(
            served(&csv),
            vec![("op-manager".to_string(), vec![(443, json!(9443))])]
        );
        let material = certs::issue(
            &hosts("op-manager", "ops"),
            k8s_openapi::jiff::Timestamp::now(),
            std::time::Duration::from_secs(60),
        )
        .unwrap();
        let objects = serving_objects(
            &owner(),
            "op-manager",
            &served(&csv)[0].1,
            &json!({"app": "op"}),
            "op-sa",
            &material,
        );
        let kinds: Vec<&str> = objects.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                "Secret",
                "Role",
                "RoleBinding",
                "ClusterRoleBinding",
                "RoleBinding",
                "Service"
            ]
        );
        let service = &objects[5].body;
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 9443);
        assert_eq!(service["spec"]["selector"]["app"], "op");
        assert_eq!(objects[0].body["data"][CA_KEY], base64_of(&material.ca_pem));
        assert_eq!(objects[4].namespace.as_deref(), Some("kube-system"));
    }
}
