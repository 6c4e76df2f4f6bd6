//! A CSV's webhooks (`spec.webhookdefinitions`), planned (pure) as upstream makes them: per
//! Deployment that serves any, a Service `<deployment>-service` on the declared ports, the
//! serving certificate in the Secret `<deployment>-service-cert` mounted at both
//! conventions' paths, RBAC to read it and to delegate authentication; then one
//! Validating/MutatingWebhookConfiguration per admission webhook, limited to the
//! OperatorGroup's namespaces, and each conversion webhook written into its CRDs.
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
    ApiServiceDescription, ClusterServiceVersion, InstallModeType, WebhookAdmissionType,
    WebhookDescription,
};
use crate::cluster::ownership::{hash_json, name_with_hash, short_hash};

pub const GENERATE_NAME_LABEL: &str = "olm.webhook-description-generate-name";
pub const DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";

const DEFAULT_PORT: i32 = 443;

pub fn service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

pub fn secret_name(deployment: &str) -> String {
    format!("{deployment}-service-cert")
}

fn port_of(description: &WebhookDescription) -> i32 {
    description
        .container_port
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_PORT)
}

/// The API services the CSV owns.
pub fn owned_api_services(csv: &ClusterServiceVersion) -> &[ApiServiceDescription] {
    csv.spec
        .apiservicedefinitions
        .as_ref()
        .map_or(&[], |d| d.owned.as_slice())
}

/// `<version>.<group>`, the APIService's name.
pub fn api_service_name(description: &ApiServiceDescription) -> String {
    format!("{}.{}", description.version, description.group)
}

/// Whether the CSV serves anything that needs a serving certificate.
pub fn serves_anything(csv: &ClusterServiceVersion) -> bool {
    !csv.spec.webhookdefinitions.is_empty() || !owned_api_services(csv).is_empty()
}

/// The Deployments that serve webhooks or owned API services, each with its Service ports
/// (port, targetPort), in the order the CSV first names them.
pub fn served(csv: &ClusterServiceVersion) -> Vec<(String, Vec<(i32, Value)>)> {
    let mut out: Vec<(String, Vec<(i32, Value)>)> = Vec::new();
    let api_services = owned_api_services(csv).iter().filter_map(|d| {
        let port = d.container_port.filter(|p| *p > 0).unwrap_or(DEFAULT_PORT);
        Some((d.deployment_name.as_deref()?, port, json!(port)))
    });
    let webhooks = csv.spec.webhookdefinitions.iter().filter_map(|d| {
        let port = port_of(d);
        let target = d.target_port.clone().unwrap_or(json!(port));
        Some((d.deployment_name.as_deref()?, port, target))
    });
    for (deployment, port, target) in api_services.chain(webhooks) {
        let slot = match out.iter().position(|(name, _)| name == deployment) {
            Some(i) => &mut out[i].1,
            None => {
                out.push((deployment.to_string(), Vec::new()));
                &mut out.last_mut().expect("just pushed").1
            }
        };
        if !slot.contains(&(port, target.clone())) {
            slot.push((port, target));
        }
    }
    out
}

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

const AUTH_DELEGATOR_SUFFIX: &str = "-system:auth-delegator";
const AUTH_READER_SUFFIX: &str = "-auth-reader";

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

/// The Service, Secret and RBAC of one served Deployment. `pod_selector` is the
/// Deployment's `selector.matchLabels`; `account` the pods' ServiceAccount.
pub fn serving_objects(
    owner: &Owner,
    deployment: &str,
    ports: &[(i32, Value)],
    pod_selector: &Value,
    account: &str,
    material: &Material,
) -> Vec<Planned> {
    let namespace = &owner.namespace;
    let service = service_name(deployment);
    let secret = secret_name(deployment);
    let labels = owner.labels();
    let metadata = |name: &str| {
        json!({
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner.reference()],
        })
    };
    let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
    let ports = service_ports(ports);
    let mut secret_meta = metadata(&secret);
    secret_meta["annotations"] = json!({ CA_HASH_ANNOTATION: material.ca_hash() });
    vec![
        Planned {
            kind: "Secret",
            namespace: Some(namespace.clone()),
            name: secret.clone(),
            body: json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": secret_meta,
                "type": "kubernetes.io/tls",
                "data": {
                    CERT_KEY: base64_of(&material.cert_pem),
                    PRIVATE_KEY_KEY: base64_of(&material.key_pem),
                    CA_KEY: base64_of(&material.ca_pem),
                },
            }),
        },
        Planned {
            kind: "Role",
            namespace: Some(namespace.clone()),
            name: secret.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(&secret),
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}],
            }),
        },
        Planned {
            kind: "RoleBinding",
            namespace: Some(namespace.clone()),
            name: secret.clone(),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(&secret),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": secret},
                "subjects": subject,
            }),
        },
    ]
    .into_iter()
    .chain(outside_bindings(&service, &labels, &subject))
    .chain([Planned {
            kind: "Service",
            namespace: Some(namespace.clone()),
            name: service.clone(),
            body: json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": metadata(&service),
                "spec": {"selector": pod_selector, "ports": ports},
            }),
        }])
    .collect()
}

/// The ports of a served Deployment's Service: two webhooks on one port with different
/// targets need two port names.
fn service_ports(ports: &[(i32, Value)]) -> Vec<Value> {
    ports
        .iter()
        .map(|(port, target)| {
            let name = match target {
                Value::Number(n) if n.as_i64() == Some(i64::from(*port)) => port.to_string(),
                Value::Number(n) => format!("{port}-{n}"),
                Value::String(s) => format!("{port}-{s}"),
                _ => port.to_string(),
            };
            json!({"name": name, "port": port, "targetPort": target})
        })
        .collect()
}

/// The two bindings of a served Deployment's account outside its namespace: to
/// `system:auth-delegator`, and to the authentication reader in `kube-system`.
fn outside_bindings(
    service: &str,
    labels: &BTreeMap<String, String>,
    subject: &Value,
) -> [Planned; 2] {
    [
        Planned {
            kind: "ClusterRoleBinding",
            namespace: None,
            name: format!("{service}{AUTH_DELEGATOR_SUFFIX}"),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("{service}{AUTH_DELEGATOR_SUFFIX}"), "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
                "subjects": subject,
            }),
        },
        Planned {
            kind: "RoleBinding",
            namespace: Some("kube-system".into()),
            name: format!("{service}{AUTH_READER_SUFFIX}"),
            body: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {
                    "name": format!("{service}{AUTH_READER_SUFFIX}"),
                    "namespace": "kube-system",
                    // The CSV's cleanup finds it by these (upstream's has none, and leaks).
                    "labels": labels,
                },
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
                "subjects": subject,
            }),
        },
    ]
}

/// The name of an admission webhook's configuration: stable per namespace, so an upgrade
/// or a restart updates the same object.
pub fn configuration_name(description: &WebhookDescription, namespace: &str) -> String {
    name_with_hash(
        &description.generate_name,
        &short_hash(&[namespace.as_bytes()]),
        253,
    )
}

/// One Validating/MutatingWebhookConfiguration per admission webhook. `namespaces` is the
/// OperatorGroup's namespace selector (None: every namespace); `ca_of` gives the CA PEM of
/// a served Deployment.
pub fn admission_configurations(
    csv: &ClusterServiceVersion,
    owner: &Owner,
    namespaces: Option<&Value>,
    ca_of: &BTreeMap<String, String>,
) -> Vec<Planned> {
    let mut out = Vec::new();
    for description in &csv.spec.webhookdefinitions {
        let kind = match description.type_ {
            WebhookAdmissionType::ValidatingAdmissionWebhook => "ValidatingWebhookConfiguration",
            WebhookAdmissionType::MutatingAdmissionWebhook => "MutatingWebhookConfiguration",
            WebhookAdmissionType::ConversionWebhook => continue,
        };
        let deployment = description.deployment_name.as_deref().unwrap_or_default();
        let mut labels = owner.labels();
        labels.insert(
            GENERATE_NAME_LABEL.into(),
            description.generate_name.clone(),
        );
        labels.insert(DESCRIPTION_HASH_LABEL.into(), description_hash(description));
        let mut service = json!({
            "namespace": owner.namespace,
            "name": service_name(deployment),
            "port": port_of(description),
        });
        if let Some(path) = &description.webhook_path {
            service["path"] = json!(path);
        }
        let mut webhook = json!({
            "name": description.generate_name,
            "clientConfig": {
                "service": service,
                "caBundle": base64_of(ca_of.get(deployment).map_or("", String::as_str)),
            },
            "sideEffects": description.side_effects,
            "admissionReviewVersions": description.admission_review_versions,
        });
        let optional = [
            ("rules", description.rules.as_ref().map(|r| json!(r))),
            (
                "failurePolicy",
                description.failure_policy.as_ref().map(|v| json!(v)),
            ),
            (
                "matchPolicy",
                description.match_policy.as_ref().map(|v| json!(v)),
            ),
            (
                "objectSelector",
                description.object_selector.as_ref().map(|v| json!(v)),
            ),
            (
                "timeoutSeconds",
                description.timeout_seconds.map(|v| json!(v)),
            ),
            ("namespaceSelector", namespaces.cloned()),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                webhook[key] = value;
            }
        }
        if kind == "MutatingWebhookConfiguration"
            && let Some(policy) = &description.reinvocation_policy
        {
            webhook["reinvocationPolicy"] = json!(policy);
        }
        let name = configuration_name(description, &owner.namespace);
        out.push(Planned {
            kind,
            namespace: None,
            name: name.clone(),
            body: json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": name, "labels": labels},
                "webhooks": [webhook],
            }),
        });
    }
    out
}

/// One APIService per owned API service: served by its Deployment's Service, trusted
/// through the CA (upstream's priorities).
pub fn api_services(
    csv: &ClusterServiceVersion,
    owner: &Owner,
    ca_of: &BTreeMap<String, String>,
) -> Vec<Planned> {
    owned_api_services(csv)
        .iter()
        .map(|description| {
            let deployment = description.deployment_name.as_deref().unwrap_or_default();
            let name = api_service_name(description);
            let port = description
                .container_port
                .filter(|p| *p > 0)
                .unwrap_or(DEFAULT_PORT);
            Planned {
                kind: "APIService",
                namespace: None,
                name: name.clone(),
                body: json!({
                    "apiVersion": "apiregistration.k8s.io/v1",
                    "kind": "APIService",
                    "metadata": {"name": name, "labels": owner.labels()},
                    "spec": {
                        "group": description.group,
                        "version": description.version,
                        "groupPriorityMinimum": 2000,
                        "versionPriority": 15,
                        "service": {
                            "namespace": owner.namespace,
                            "name": service_name(deployment),
                            "port": port,
                        },
                        "caBundle": base64_of(ca_of.get(deployment).map_or("", String::as_str)),
                    },
                }),
            }
        })
        .collect()
}

/// The hash label of a description: a changed description is a configuration to rewrite.
pub fn description_hash(description: &WebhookDescription) -> String {
    hash_json(description)
}

/// The `spec.conversion` each conversion webhook's CRDs get, by CRD name.
pub fn conversions(
    csv: &ClusterServiceVersion,
    namespace: &str,
    ca_of: &BTreeMap<String, String>,
) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for description in &csv.spec.webhookdefinitions {
        if description.type_ != WebhookAdmissionType::ConversionWebhook {
            continue;
        }
        let deployment = description.deployment_name.as_deref().unwrap_or_default();
        let conversion = json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "service": {
                        "namespace": namespace,
                        "name": service_name(deployment),
                        "path": description.webhook_path.as_deref().unwrap_or("/"),
                        "port": port_of(description),
                    },
                    "caBundle": base64_of(ca_of.get(deployment).map_or("", String::as_str)),
                },
                "conversionReviewVersions": description.admission_review_versions,
            },
        });
        for crd in &description.conversion_crds {
            out.push((crd.clone(), conversion.clone()));
        }
    }
    out
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// The hosts of a served Deployment's certificate.
pub fn hosts(deployment: &str, namespace: &str) -> Vec<String> {
    certs::hosts(&service_name(deployment), namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

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
