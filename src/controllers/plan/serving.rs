//! What the CSV controller makes for a CSV that serves webhooks or API services (pure),
//! named and shaped here so that the InstallPlan preview predicts exactly what it writes.
//! Per Deployment that serves any ([`served`]), as upstream makes them: a Service
//! `<deployment>-service` on the declared ports, the serving certificate's Secret
//! `<deployment>-service-cert` with a Role and RoleBinding of that name that let the pods'
//! account read it, and that account's bindings to `system:auth-delegator` and to the
//! authentication reader in `kube-system` ([`serving_objects`]); then one
//! Validating/MutatingWebhookConfiguration per admission webhook
//! ([`admission_configurations`]), one APIService per owned API service
//! ([`api_services`]), and the conversion each conversion webhook writes into its CRDs
//! ([`conversions`]).
//!
//! The certificate is the CSV controller's alone (it issues, reuses and rotates it): here
//! the Secret holds no data, and a CA bundle is written only when the CA is given.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::{
    ApiServiceDescription, ClusterServiceVersion, WebhookAdmissionType, WebhookDescription,
};
use crate::cluster::ownership::{hash_json, name_with_hash, short_hash};

pub const GENERATE_NAME_LABEL: &str = "olm.webhook-description-generate-name";
pub const DESCRIPTION_HASH_LABEL: &str = "olm.webhook-description-hash";
/// The names of a served Deployment's two bindings outside its namespace are its Service's
/// with these suffixes.
pub const AUTH_DELEGATOR_SUFFIX: &str = "-system:auth-delegator";
pub const AUTH_READER_SUFFIX: &str = "-auth-reader";

const DEFAULT_PORT: i32 = 443;
const RBAC_API: &str = "rbac.authorization.k8s.io/v1";

/// One object made for a CSV: its kind, namespace (None: cluster-scoped), name and body.
#[derive(Clone, Debug, PartialEq)]
pub struct Made {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    pub body: Value,
}

/// What the CSV controller puts on every object it makes for a CSV: the owner labels, and
/// on those in the CSV's namespace the owner reference. The preview leaves both out: it
/// compares content only.
#[derive(Clone, Debug, Default)]
pub struct Stamp {
    pub labels: BTreeMap<String, String>,
    pub reference: Option<Value>,
}

impl Stamp {
    fn metadata(&self, name: &str, namespace: &str) -> Value {
        let mut metadata = json!({"name": name, "namespace": namespace, "labels": self.labels});
        if let Some(reference) = &self.reference {
            metadata["ownerReferences"] = json!([reference]);
        }
        metadata
    }
}

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

/// The pods of the served Deployment `deployment` as its Service and RBAC name them: the
/// Deployment's `selector.matchLabels` (`{}` when none) and the pods' ServiceAccount
/// (`default` when none).
pub fn pods<'a>(csv: &'a ClusterServiceVersion, deployment: &str) -> (Value, &'a str) {
    let spec = csv
        .spec
        .install
        .spec
        .as_ref()
        .and_then(|s| s.deployments.iter().find(|d| d.name == deployment))
        .map(|d| &d.spec);
    let selector = spec
        .map(|s| s["selector"]["matchLabels"].clone())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let account = spec
        .and_then(|s| s["template"]["spec"]["serviceAccountName"].as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or("default");
    (selector, account)
}

/// The Secret (without its certificate), RBAC and Service of the served Deployment
/// `deployment` in `namespace`. `pod_selector` and `account` are its pods' ([`pods`]).
pub fn serving_objects(
    namespace: &str,
    deployment: &str,
    ports: &[(i32, Value)],
    pod_selector: &Value,
    account: &str,
    stamp: &Stamp,
) -> Vec<Made> {
    let (service, secret) = (service_name(deployment), secret_name(deployment));
    let made = |api_version: &str, kind: &'static str, name: &str, mut body: Value| {
        body["apiVersion"] = json!(api_version);
        body["kind"] = json!(kind);
        body["metadata"] = stamp.metadata(name, namespace);
        Made {
            kind,
            namespace: Some(namespace.to_string()),
            name: name.to_string(),
            body,
        }
    };
    let subject = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
    let read_secret = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}]);
    let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": secret});
    let service_spec = json!({"selector": pod_selector, "ports": service_ports(ports)});
    [
        made(
            "v1",
            "Secret",
            &secret,
            json!({"type": "kubernetes.io/tls"}),
        ),
        made(RBAC_API, "Role", &secret, json!({"rules": read_secret})),
        made(
            RBAC_API,
            "RoleBinding",
            &secret,
            json!({"roleRef": role_ref, "subjects": subject}),
        ),
    ]
    .into_iter()
    .chain(outside_bindings(&service, &stamp.labels, &subject))
    .chain([made(
        "v1",
        "Service",
        &service,
        json!({"spec": service_spec}),
    )])
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
/// `system:auth-delegator`, and to the authentication reader in `kube-system`. Named after
/// the Service alone, as upstream names them (the CSV controller renames one that another
/// namespace's install holds).
fn outside_bindings(
    service: &str,
    labels: &BTreeMap<String, String>,
    subject: &Value,
) -> [Made; 2] {
    let (delegator, reader) = (
        format!("{service}{AUTH_DELEGATOR_SUFFIX}"),
        format!("{service}{AUTH_READER_SUFFIX}"),
    );
    [
        Made {
            kind: "ClusterRoleBinding",
            namespace: None,
            name: delegator.clone(),
            body: json!({
                "apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
                "metadata": {"name": delegator, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
                "subjects": subject,
            }),
        },
        Made {
            kind: "RoleBinding",
            namespace: Some("kube-system".into()),
            name: reader.clone(),
            body: json!({
                "apiVersion": RBAC_API, "kind": "RoleBinding",
                "metadata": {
                    "name": reader,
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

/// The hash label of a description: a changed description is a configuration to rewrite.
pub fn description_hash(description: &WebhookDescription) -> String {
    hash_json(description)
}

/// The CA bundle of a served Deployment's clients: its CA PEM in `ca_of`, base64 (empty
/// when it has none); None when no CA is given (the preview's case).
fn ca_bundle(ca_of: Option<&BTreeMap<String, String>>, deployment: &str) -> Option<String> {
    ca_of.map(|ca| base64_of(ca.get(deployment).map_or("", String::as_str)))
}

/// One Validating/MutatingWebhookConfiguration per admission webhook of the CSV installed
/// in `namespace`. `namespaces` is the OperatorGroup's namespace selector (None: every
/// namespace, or for the preview unknown); `ca_of` the CA PEM of each served Deployment.
pub fn admission_configurations(
    csv: &ClusterServiceVersion,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    namespaces: Option<&Value>,
    ca_of: Option<&BTreeMap<String, String>>,
) -> Vec<Made> {
    let mut out = Vec::new();
    for description in &csv.spec.webhookdefinitions {
        let kind = match description.type_ {
            WebhookAdmissionType::ValidatingAdmissionWebhook => "ValidatingWebhookConfiguration",
            WebhookAdmissionType::MutatingAdmissionWebhook => "MutatingWebhookConfiguration",
            WebhookAdmissionType::ConversionWebhook => continue,
        };
        let mut labels = labels.clone();
        labels.insert(
            GENERATE_NAME_LABEL.into(),
            description.generate_name.clone(),
        );
        labels.insert(DESCRIPTION_HASH_LABEL.into(), description_hash(description));
        let mut webhook = admission_webhook(description, namespace, namespaces, ca_of);
        if kind == "MutatingWebhookConfiguration"
            && let Some(policy) = &description.reinvocation_policy
        {
            webhook["reinvocationPolicy"] = json!(policy);
        }
        let name = configuration_name(description, namespace);
        out.push(Made {
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

/// The one webhook of an admission webhook's configuration, served by its Deployment's
/// Service.
fn admission_webhook(
    description: &WebhookDescription,
    namespace: &str,
    namespaces: Option<&Value>,
    ca_of: Option<&BTreeMap<String, String>>,
) -> Value {
    let deployment = description.deployment_name.as_deref().unwrap_or_default();
    let mut service = json!({
        "namespace": namespace,
        "name": service_name(deployment),
        "port": port_of(description),
    });
    if let Some(path) = &description.webhook_path {
        service["path"] = json!(path);
    }
    let mut webhook = json!({
        "name": description.generate_name,
        "clientConfig": {"service": service},
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
    if let Some(bundle) = ca_bundle(ca_of, deployment) {
        webhook["clientConfig"]["caBundle"] = json!(bundle);
    }
    webhook
}

/// One APIService per owned API service of the CSV installed in `namespace`: served by its
/// Deployment's Service, trusted through the CA in `ca_of` (upstream's priorities).
pub fn api_services(
    csv: &ClusterServiceVersion,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    ca_of: Option<&BTreeMap<String, String>>,
) -> Vec<Made> {
    owned_api_services(csv)
        .iter()
        .map(|description| {
            let deployment = description.deployment_name.as_deref().unwrap_or_default();
            let name = api_service_name(description);
            let port = description
                .container_port
                .filter(|p| *p > 0)
                .unwrap_or(DEFAULT_PORT);
            let mut body = json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "group": description.group,
                    "version": description.version,
                    "groupPriorityMinimum": 2000,
                    "versionPriority": 15,
                    "service": {
                        "namespace": namespace,
                        "name": service_name(deployment),
                        "port": port,
                    },
                },
            });
            if let Some(bundle) = ca_bundle(ca_of, deployment) {
                body["spec"]["caBundle"] = json!(bundle);
            }
            Made {
                kind: "APIService",
                namespace: None,
                name,
                body,
            }
        })
        .collect()
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
                    "caBundle": ca_bundle(Some(ca_of), deployment),
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

pub fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
