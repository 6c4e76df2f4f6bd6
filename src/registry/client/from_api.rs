//! One `api.Bundle` (a `ListBundles` message or a `GetBundle` answer) as an FBC bundle.

use base64::Engine;
use serde_json::{Value, json};

use super::api;
use crate::catalog::bundles::render::related_images;
use crate::catalog::model::fbc::{
    self, PROP_BUNDLE_OBJECT, PROP_CONSTRAINT, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE,
    PROP_PACKAGE_REQUIRED, Property, SCHEMA_BUNDLE,
};

/// Whether a bundle's only manifest is the CSV a server makes up from `olm.csv.metadata`
/// (no install deployments, a `status.cleanup`).
fn synthesized_csv_only(b: &api::Bundle) -> bool {
    match b.object.as_slice() {
        [] => {}
        [only] if *only == b.csv_json => {}
        _ => return false,
    }
    let Ok(csv) = serde_json::from_str::<Value>(&b.csv_json) else {
        return false;
    };
    csv["spec"]["install"]["spec"]["deployments"].is_null() && csv["status"]["cleanup"].is_object()
}

fn gvk_value(g: &api::GroupVersionKind) -> Value {
    json!({ "group": g.group, "kind": g.kind, "version": g.version })
}

/// Why an `api.Bundle` could not be read as an FBC bundle.
#[derive(Debug, thiserror::Error)]
pub enum BundleFromApiError {
    /// A property's or dependency's value.
    #[error("{type_} value {value:?} is not JSON: {source}")]
    Value {
        type_: String,
        value: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("csvJson is not JSON: {0}")]
    CsvJson(#[source] serde_json::Error),
}

fn parse_value(type_: &str, value: &str) -> Result<Value, BundleFromApiError> {
    if value.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(value).map_err(|source| BundleFromApiError::Value {
        type_: type_.to_string(),
        value: value.to_string(),
        source,
    })
}

/// An `api.Bundle` → an FBC bundle, as upstream reads one:
/// - properties as sent (the server leaves out `olm.bundle.object` and `olm.csv.metadata`);
/// - `olm.package` from `packageName` and `version` when no property names it;
/// - `olm.gvk` for each provided API, `olm.gvk.required` for each required API;
/// - dependencies as OLM translates them: `olm.gvk` → `olm.gvk.required`, `olm.package` →
///   `olm.package.required` (its `version` is the range), `olm.label` →
///   `olm.label.required`, `olm.constraint` as is;
/// - each of `object` (else `csvJson`) as an `olm.bundle.object`, unless the bundle has an
///   image and its only manifest is the CSV a server makes up from `olm.csv.metadata`
///   (which cannot install anything; the image has the manifests);
/// - related images as `opm render` lists them for the CSV and bundle image.
///
/// Properties are kept once each (servers send required GVKs both as properties and as
/// dependencies). Channel fields (replaces, skips, skipRange) belong to channel entries.
pub fn bundle_from_api(b: &api::Bundle) -> Result<fbc::Bundle, BundleFromApiError> {
    let mut properties: Vec<Property> = Vec::new();
    let mut push = |type_: &str, value: Value| {
        if !properties
            .iter()
            .any(|p| p.type_ == type_ && p.value == value)
        {
            properties.push(Property::new(type_, value));
        }
    };
    for p in &b.properties {
        push(&p.r#type, parse_value(&p.r#type, &p.value)?);
    }
    if !b.properties.iter().any(|p| p.r#type == PROP_PACKAGE) {
        push(
            PROP_PACKAGE,
            json!({ "packageName": b.package_name, "version": b.version }),
        );
    }
    for g in &b.provided_apis {
        push(PROP_GVK, gvk_value(g));
    }
    for g in &b.required_apis {
        push(PROP_GVK_REQUIRED, gvk_value(g));
    }
    for d in &b.dependencies {
        let value = parse_value(&d.r#type, &d.value)?;
        let s = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default();
        match d.r#type.as_str() {
            PROP_GVK => push(
                PROP_GVK_REQUIRED,
                json!({ "group": s("group"), "kind": s("kind"), "version": s("version") }),
            ),
            PROP_PACKAGE => push(
                PROP_PACKAGE_REQUIRED,
                json!({ "packageName": s("packageName"), "versionRange": s("version") }),
            ),
            "olm.label" => push("olm.label.required", value),
            PROP_CONSTRAINT => push(PROP_CONSTRAINT, value),
            _ => {}
        }
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let objects: Vec<&String> = if !b.bundle_path.is_empty() && synthesized_csv_only(b) {
        Vec::new()
    } else if b.object.is_empty() && !b.csv_json.is_empty() {
        vec![&b.csv_json]
    } else {
        b.object.iter().collect()
    };
    for object in objects {
        push(PROP_BUNDLE_OBJECT, json!({ "data": engine.encode(object) }));
    }
    let csv: Value = if b.csv_json.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&b.csv_json).map_err(BundleFromApiError::CsvJson)?
    };
    Ok(fbc::Bundle {
        schema: SCHEMA_BUNDLE.into(),
        name: b.csv_name.clone(),
        package: b.package_name.clone(),
        image: b.bundle_path.clone(),
        properties,
        related_images: related_images(&csv, &b.bundle_path),
    })
}
