//! A plan's bundles (their manifests as the catalog serves them) → upstream's steps, in
//! upstream's order (CSVs, then CRDs, then the rest), with the Subscriptions generated for
//! dependencies; and which kinds a plan may create.
//!
//! As upstream, the RBAC of a CSV's `permissions` and `clusterPermissions` is made by steps
//! of the plan ([`super::rbac`]), never by the CSV controller.

use serde_json::{Value, json};

use crate::api::{
    ANNOTATION_PROPERTIES, Approval, ClusterServiceVersion, PlannedBundle, Step, StepResource,
    StepStatus, Subscription, SubscriptionSpec, operator_label, operator_name,
};

/// Annotation upstream puts on Subscriptions it generates for dependencies.
pub const ANNOTATION_GENERATED_BY: &str = "olm.generated-by";
/// Label on every object a plan creates.
pub const LABEL_MANAGED: &str = "olm.managed";

pub const KIND_CSV: &str = "ClusterServiceVersion";
pub const KIND_CRD: &str = "CustomResourceDefinition";
pub const KIND_SUBSCRIPTION: &str = "Subscription";

/// Kinds a bundle may ship besides its CSV and CRDs (upstream's list); a plan with any other
/// kind fails, naming it.
pub const ALLOWED_KINDS: [&str; 19] = [
    "Secret",
    "ConfigMap",
    "Service",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "PrometheusRule",
    "ServiceMonitor",
    "PodDisruptionBudget",
    "PriorityClass",
    "VerticalPodAutoscaler",
    "NetworkPolicy",
    "ConsoleYAMLSample",
    "ConsoleQuickStart",
    "ConsoleCLIDownload",
    "ConsoleLink",
    "ConsolePlugin",
];

/// A bundle of the plan with the objects its catalog serves for it.
#[derive(Clone, Debug)]
pub struct BundleManifests {
    pub bundle: PlannedBundle,
    pub objects: Vec<Value>,
    /// The bundle's catalog properties (without objects), for the CSV's properties
    /// annotation; may be empty.
    pub properties: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "bundle {bundle}: kind {kind} ({name}) is not supported in a bundle (allowed: ClusterServiceVersion, CustomResourceDefinition, {allowed})",
        allowed = ALLOWED_KINDS.join(", ")
    )]
    UnsupportedKind {
        bundle: String,
        kind: String,
        name: String,
    },
    #[error("bundle {bundle}: {problem}")]
    Invalid { bundle: String, problem: String },
}

/// The steps of a plan for `namespace`, in execution order.
pub fn build_steps(namespace: &str, bundles: &[BundleManifests]) -> Result<Vec<Step>, PlanError> {
    let mut csvs = Vec::new();
    let mut crds = Vec::new();
    let mut rest = Vec::new();
    for b in bundles {
        let invalid = |problem: String| PlanError::Invalid {
            bundle: b.bundle.name.clone(),
            problem,
        };
        let label = operator_label(&operator_name(&b.bundle.package, namespace));
        let step = |mut object: Value| -> Result<Step, PlanError> {
            // Every object of the bundle is a component of its package's Operator.
            if !object["metadata"]["labels"].is_object() {
                object["metadata"]["labels"] = json!({});
            }
            object["metadata"]["labels"][&label] = json!("");
            let (group, version) =
                split_api_version(object["apiVersion"].as_str().unwrap_or_default());
            let kind = object["kind"].as_str().unwrap_or_default().to_string();
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if kind.is_empty() || name.is_empty() {
                return Err(invalid(format!(
                    "an object without kind or metadata.name: {}",
                    truncate(&object.to_string(), 200)
                )));
            }
            Ok(Step {
                resolving: b.bundle.name.clone(),
                resource: StepResource {
                    source_name: b.bundle.catalog.clone(),
                    source_namespace: b.bundle.catalog_namespace.clone(),
                    group,
                    version,
                    kind,
                    name,
                    manifest: Some(object.to_string()),
                },
                optional: None,
                status: StepStatus::Unknown,
            })
        };
        let mut csv_object = None;
        let first_of_bundle = rest.len();
        for object in &b.objects {
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            match kind {
                KIND_CSV => {
                    if csv_object.is_some() {
                        return Err(invalid("more than one ClusterServiceVersion".into()));
                    }
                    csv_object = Some(object.clone());
                }
                KIND_CRD => {
                    let api_version = object["apiVersion"].as_str().unwrap_or_default();
                    if api_version != "apiextensions.k8s.io/v1" {
                        return Err(invalid(format!(
                            "CustomResourceDefinition {name} is {api_version}; only apiextensions.k8s.io/v1 is served by current clusters"
                        )));
                    }
                    crds.push(step(clean(object.clone()))?);
                }
                _ if ALLOWED_KINDS.contains(&kind) => rest.push(step(clean(object.clone()))?),
                _ => {
                    return Err(PlanError::UnsupportedKind {
                        bundle: b.bundle.name.clone(),
                        kind: kind.to_string(),
                        name: name.to_string(),
                    });
                }
            }
        }
        let Some(csv_object) = csv_object else {
            return Err(invalid("no ClusterServiceVersion among its objects".into()));
        };
        let mut csv_object = prepare_csv(csv_object, b);
        csv_object["metadata"]["namespace"] = json!(namespace);
        let csv = serde_json::from_value::<ClusterServiceVersion>(csv_object.clone())
            .map_err(|e| invalid(format!("the ClusterServiceVersion does not parse: {e}")))?;
        csvs.push(step(csv_object)?);
        // The CSV's RBAC first among the bundle's other objects.
        let rbac = super::rbac::objects(&csv, namespace)
            .into_iter()
            .map(step)
            .collect::<Result<Vec<_>, _>>()?;
        rest.splice(first_of_bundle..first_of_bundle, rbac);
        if let Some(name) = &b.bundle.generated_subscription {
            rest.push(generated_subscription_step(name, namespace, &b.bundle));
        }
    }
    csvs.extend(crds);
    csvs.extend(rest);
    Ok(csvs)
}

/// How much inline manifest text a plan may carry. etcd stores at most 1.5 MiB per object;
/// bundles with large CRDs (sailoperator, stackgres…) exceed it, so past this budget the
/// objects other than CSVs and Subscriptions are carried by reference to their catalog and
/// read from it again when their step runs.
pub const INLINE_MANIFEST_BUDGET: usize = 1 << 20;

/// The key of a step manifest that refers to its bundle in the catalog instead of carrying
/// the object.
pub const BUNDLE_REFERENCE: &str = "olmBundleReference";

/// Replaces the manifests of `steps` past [`INLINE_MANIFEST_BUDGET`] by references to the
/// bundles they come from (CSV and Subscription steps stay inline: the plan changes them).
pub fn refer_when_too_large(steps: &mut [Step], bundles: &[BundleManifests]) {
    let inline: usize = steps
        .iter()
        .filter_map(|s| s.resource.manifest.as_ref())
        .map(String::len)
        .sum();
    if inline <= INLINE_MANIFEST_BUDGET {
        return;
    }
    for step in steps
        .iter_mut()
        .filter(|s| s.resource.kind != KIND_CSV && s.resource.kind != KIND_SUBSCRIPTION)
    {
        let Some(bundle) = bundles.iter().find(|b| b.bundle.name == step.resolving) else {
            continue;
        };
        // Only what the catalog can hand back (not the RBAC the plan derived).
        let r = &step.resource;
        if !bundle
            .objects
            .iter()
            .any(|o| o["kind"] == r.kind.as_str() && o["metadata"]["name"] == r.name.as_str())
        {
            continue;
        }
        let b = &bundle.bundle;
        step.resource.manifest = Some(
            json!({ BUNDLE_REFERENCE: {
                "bundle": b.name, "package": b.package, "channel": b.channel,
                "catalog": b.catalog, "catalogNamespace": b.catalog_namespace,
            }})
            .to_string(),
        );
    }
}

/// The bundle a referring manifest names (None: the manifest is the object itself).
pub fn referred_bundle(manifest: &Value) -> Option<PlannedBundle> {
    let reference = manifest.get(BUNDLE_REFERENCE)?;
    let text = |key: &str| reference[key].as_str().unwrap_or_default().to_string();
    Some(PlannedBundle {
        name: text("bundle"),
        package: text("package"),
        channel: text("channel"),
        catalog: text("catalog"),
        catalog_namespace: text("catalogNamespace"),
        ..PlannedBundle::default()
    })
}

/// The object of kind `kind` named `name` among the objects of `bundle`'s package, as its
/// step in `namespace` carries it inline (cleaned, labelled as a component of the Operator).
pub fn pick(
    objects: &[Value],
    kind: &str,
    name: &str,
    package: &str,
    namespace: &str,
) -> Option<Value> {
    let mut object = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .map(|o| clean(o.clone()))?;
    if !object["metadata"]["labels"].is_object() {
        object["metadata"]["labels"] = json!({});
    }
    object["metadata"]["labels"][operator_label(&operator_name(package, namespace))] = json!("");
    Some(object)
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

pub fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// Drops what a manifest must not carry into a create (server-set metadata, status).
fn clean(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
            "selfLink",
        ] {
            meta.remove(key);
        }
    }
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    object
}

/// The CSV as the plan creates it: `spec.replaces` names the CSV actually installed (as
/// upstream rewrites it), and the properties annotation records the package, so that the
/// resolver knows what it is once installed.
fn prepare_csv(object: Value, b: &BundleManifests) -> Value {
    let mut object = clean(object);
    if let Some(replaces) = &b.bundle.replaces {
        object["spec"]["replaces"] = json!(replaces);
    }
    let mut properties: Vec<Value> = b
        .properties
        .iter()
        .filter(|p| p["type"] != crate::catalog::model::fbc::PROP_PACKAGE)
        .cloned()
        .collect();
    properties.insert(
        0,
        json!({"type": crate::catalog::model::fbc::PROP_PACKAGE,
               "value": {"packageName": b.bundle.package, "version": b.bundle.version}}),
    );
    if !object["metadata"]["annotations"].is_object() {
        object["metadata"]["annotations"] = json!({});
    }
    object["metadata"]["annotations"][ANNOTATION_PROPERTIES] =
        json!(json!({ "properties": properties }).to_string());
    object
}

/// The step that creates the Subscription upstream generates for a dependency.
pub fn generated_subscription_step(name: &str, namespace: &str, b: &PlannedBundle) -> Step {
    Step {
        resolving: b.name.clone(),
        resource: StepResource {
            source_name: b.catalog.clone(),
            source_namespace: b.catalog_namespace.clone(),
            group: crate::api::GROUP.to_string(),
            version: "v1alpha1".to_string(),
            kind: KIND_SUBSCRIPTION.to_string(),
            name: name.to_string(),
            manifest: Some(generated_subscription(name, namespace, b).to_string()),
        },
        optional: None,
        status: StepStatus::Unknown,
    }
}

fn generated_subscription(name: &str, namespace: &str, b: &PlannedBundle) -> Value {
    let mut sub = Subscription::new(
        name,
        SubscriptionSpec {
            source: b.catalog.clone(),
            source_namespace: b.catalog_namespace.clone(),
            name: b.package.clone(),
            channel: Some(b.channel.clone()),
            starting_csv: Some(b.name.clone()),
            install_plan_approval: Some(Approval::Automatic),
            config: None,
            upgrade_policy: None,
        },
    );
    sub.metadata.annotations = Some(
        [(
            ANNOTATION_GENERATED_BY.to_string(),
            b.dependency_of.join(","),
        )]
        .into(),
    );
    sub.metadata.labels = Some(
        [(
            operator_label(&operator_name(&b.package, namespace)),
            String::new(),
        )]
        .into(),
    );
    serde_json::to_value(&sub).unwrap_or_default()
}

#[cfg(test)]
mod tests;
