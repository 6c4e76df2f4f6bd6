//! The pure half of the InstallPlan controller: a plan's bundles (their manifests as the
//! catalog serves them) → upstream's steps, in upstream's order (CSVs, then CRDs, then the
//! rest), with the Subscriptions generated for dependencies; which kinds a plan may create;
//! and the CRD upgrade safety checks.
//!
//! Unlike upstream, the RBAC of a CSV's `permissions` and `clusterPermissions` is not a step
//! here: the CSV controller creates it, scoped by the OperatorGroup's install mode
//! (`controllers::csv::rbac`), so it exists once.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::api::{
    Approval, ClusterServiceVersion, PlannedBundle, Step, StepResource, StepStatus, Subscription,
    SubscriptionSpec,
};
use crate::controllers::subscription::decide::ANNOTATION_PROPERTIES;

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
        let step = |object: Value| -> Result<Step, PlanError> {
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
        serde_json::from_value::<ClusterServiceVersion>(csv_object.clone())
            .map_err(|e| invalid(format!("the ClusterServiceVersion does not parse: {e}")))?;
        csvs.push(step(csv_object)?);
        if let Some(name) = &b.bundle.generated_subscription {
            rest.push(step(generated_subscription(name, &b.bundle))?);
        }
    }
    csvs.extend(crds);
    csvs.extend(rest);
    Ok(csvs)
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

fn generated_subscription(name: &str, b: &PlannedBundle) -> Value {
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
        },
    );
    sub.metadata.annotations = Some(
        [(
            ANNOTATION_GENERATED_BY.to_string(),
            b.dependency_of.join(","),
        )]
        .into(),
    );
    serde_json::to_value(&sub).unwrap_or_default()
}

/// CRD upgrade safety, part one: every version the API server has stored objects in must
/// still be in the new CRD.
pub fn check_stored_versions(existing: &Value, new: &Value) -> Result<(), String> {
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let kept: BTreeSet<&str> = new["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for stored in existing["status"]["storedVersions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let stored = stored.as_str().unwrap_or_default();
        if !kept.contains(stored) {
            return Err(format!(
                "CustomResourceDefinition {name}: version {stored} is in status.storedVersions but not in the new CRD; refusing the upgrade (risk of data loss)"
            ));
        }
    }
    Ok(())
}

/// The served versions of a CRD with their schemas.
pub fn served_schemas(crd: &Value) -> Vec<(String, Value)> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(false))
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["schema"]["openAPIV3Schema"].clone(),
            )
        })
        .collect()
}

/// CRD upgrade safety, part two: an existing custom resource against the new version's
/// structural schema (types, required, enum, bounds, nested properties and items). Returns
/// the problems, each with its path.
pub fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<String>) {
    if !schema.is_object() || problems.len() >= 10 {
        return;
    }
    if value.is_null() {
        if schema["nullable"].as_bool() != Some(true) && schema.get("type").is_some() {
            problems.push(format!("{path}: null is not allowed"));
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            problems.push(format!("{path}: must be an integer or a string"));
        }
        return;
    }
    if let Some(t) = schema["type"].as_str() {
        let fits = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !fits {
            problems.push(format!(
                "{path}: expected {t}, found {}",
                crate::catalog::model::fbc::json_kind(value)
            ));
            return;
        }
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        problems.push(format!(
            "{path}: {value} is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Some(n) = value.as_f64() {
        if schema["minimum"].as_f64().is_some_and(|m| n < m) {
            problems.push(format!(
                "{path}: {n} is less than the minimum {}",
                schema["minimum"]
            ));
        }
        if schema["maximum"].as_f64().is_some_and(|m| n > m) {
            problems.push(format!(
                "{path}: {n} is more than the maximum {}",
                schema["maximum"]
            ));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema["minLength"].as_u64().is_some_and(|m| len < m) {
            problems.push(format!("{path}: shorter than {}", schema["minLength"]));
        }
        if schema["maxLength"].as_u64().is_some_and(|m| len > m) {
            problems.push(format!("{path}: longer than {}", schema["maxLength"]));
        }
    }
    if let Some(map) = value.as_object() {
        for required in schema["required"].as_array().into_iter().flatten() {
            if let Some(key) = required.as_str()
                && !map.contains_key(key)
            {
                problems.push(format!("{path}.{key}: required"));
            }
        }
        let properties = schema["properties"].as_object();
        // The top level's apiVersion, kind and metadata are the API server's business.
        let top = path.is_empty() || path == "<root>";
        for (key, child) in map {
            if top && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let child_path = format!("{path}.{key}");
            match properties.and_then(|p| p.get(key)) {
                Some(child_schema) => validate(child_schema, child, &child_path, problems),
                None => {
                    if let Some(extra) = schema.get("additionalProperties") {
                        if extra.is_object() {
                            validate(extra, child, &child_path, problems);
                        } else if extra == &Value::Bool(false) {
                            problems.push(format!("{child_path}: not allowed"));
                        }
                    }
                    // Other unknown fields are pruned by the API server, not refused.
                }
            }
        }
    }
    if let Some(items) = value.as_array() {
        if schema["minItems"]
            .as_u64()
            .is_some_and(|m| (items.len() as u64) < m)
        {
            problems.push(format!("{path}: fewer than {} items", schema["minItems"]));
        }
        if schema["maxItems"]
            .as_u64()
            .is_some_and(|m| (items.len() as u64) > m)
        {
            problems.push(format!("{path}: more than {} items", schema["maxItems"]));
        }
        if schema["items"].is_object() {
            for (i, item) in items.iter().enumerate() {
                validate(&schema["items"], item, &format!("{path}[{i}]"), problems);
            }
        }
    }
}

#[cfg(test)]
mod tests;
