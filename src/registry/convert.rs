//! FBC → registry API messages, as upstream's `api.ConvertModelBundleToAPIBundle` does.
//!
//! A bundle is split in two: the *light* part (everything but `csvJson` and `object`) that
//! the index keeps in memory, and the *heavy* part (`object`, the decoded manifests) that
//! goes to the spill store. Both are `api.Bundle` encodings, so that decoding their
//! concatenation gives the whole message (protobuf merges repeated fields and later
//! scalars); `csvJson` is a copy of one of the objects, made when the bundle is served.

use serde_json::{Map, Value, json};

use super::generated as api;
use crate::catalog::bundles::csv::{BundleObjectError, bundle_object_json};
use crate::catalog::model::fbc::{
    self, PROP_BUNDLE_OBJECT, PROP_CSV_METADATA, PROP_GVK, PROP_GVK_REQUIRED, PROP_PACKAGE,
    PROP_PACKAGE_REQUIRED,
};

/// A bundle's channel-independent fields, ready to be encoded.
pub struct Converted {
    /// No `channelName`, `replaces`, `skips`, `skipRange`, `csvJson` or `object`: those
    /// are per channel entry or kept out of memory.
    pub light: api::Bundle,
    /// The `(group, version, kind)` of every `olm.gvk` property.
    pub provided: Vec<(String, String, String)>,
    /// The manifests as JSON strings; empty when the bundle has none.
    pub objects: Vec<String>,
    /// Which of `objects` is the CSV (`csvJson`), if any: stored once, copied when served.
    pub csv_object: Option<usize>,
    /// The `olm.csv.metadata` value, when the bundle has no CSV object and exactly one
    /// such property: the CSV is then synthesised once the package (icon, description) is
    /// known.
    pub csv_metadata: Option<Value>,
}

/// Compact JSON of a property value (upstream normalises values the same way).
fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn gvk_of(value: &Value) -> (String, String, String) {
    let s = |k: &str| {
        value
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("group"), s("version"), s("kind"))
}

fn api_gvk((group, version, kind): &(String, String, String)) -> api::GroupVersionKind {
    api::GroupVersionKind {
        group: group.clone(),
        version: version.clone(),
        kind: kind.clone(),
        plural: String::new(),
    }
}

/// Why a bundle could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// An `olm.bundle.object` whose data is not a manifest (the catalog crate's error).
    #[error(transparent)]
    Object(#[from] BundleObjectError),
    #[error("expected exactly 1 property of type \"olm.package\", found {0}")]
    PackageProperties(usize),
    #[error("expected at most 1 property of type \"olm.csv.metadata\", found {0}")]
    CsvMetadataProperties(usize),
}

pub fn convert_bundle(
    bundle: &fbc::Bundle,
    deprecation: Option<&str>,
) -> Result<Converted, ConvertError> {
    let mut provided = Vec::new();
    let mut required = Vec::new();
    let mut dependencies = Vec::new();
    let mut properties = Vec::new();
    let mut objects = Vec::new();
    let mut csv_metadatas = Vec::new();
    let mut versions = Vec::new();
    for p in &bundle.properties {
        match p.type_.as_str() {
            PROP_PACKAGE => versions.push(
                p.value
                    .get("version")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            PROP_GVK => provided.push(gvk_of(&p.value)),
            PROP_GVK_REQUIRED => {
                required.push(gvk_of(&p.value));
                dependencies.push(api::Dependency {
                    r#type: PROP_GVK.into(),
                    value: compact(&p.value),
                });
            }
            PROP_PACKAGE_REQUIRED => {
                let s = |k: &str| {
                    p.value
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                // Upstream re-encodes it as an `olm.package` property, the range as its version.
                let value = format!(
                    "{{\"packageName\":{},\"version\":{}}}",
                    Value::String(s("packageName")),
                    Value::String(s("versionRange"))
                );
                dependencies.push(api::Dependency {
                    r#type: PROP_PACKAGE.into(),
                    value,
                });
            }
            PROP_BUNDLE_OBJECT => {
                objects.push(bundle_object_json(&p.value)?);
            }
            PROP_CSV_METADATA => csv_metadatas.push(p.value.clone()),
            _ => {}
        }
        if p.type_ != PROP_BUNDLE_OBJECT && p.type_ != PROP_CSV_METADATA {
            properties.push(api::Property {
                r#type: p.type_.clone(),
                value: compact(&p.value),
            });
        }
    }
    if versions.len() != 1 {
        return Err(ConvertError::PackageProperties(versions.len()));
    }
    if csv_metadatas.len() > 1 {
        return Err(ConvertError::CsvMetadataProperties(csv_metadatas.len()));
    }
    let csv_object = objects.iter().position(|o| o.is_csv);
    let csv_metadata = if csv_object.is_none() {
        csv_metadatas.pop()
    } else {
        None
    };
    let light = api::Bundle {
        csv_name: bundle.name.clone(),
        package_name: bundle.package.clone(),
        bundle_path: bundle.image.clone(),
        provided_apis: provided.iter().map(api_gvk).collect(),
        required_apis: required.iter().map(api_gvk).collect(),
        version: versions.pop().unwrap_or_default(),
        dependencies,
        properties,
        deprecation: deprecation.map(|m| api::Deprecation {
            message: m.to_string(),
        }),
        ..Default::default()
    };
    Ok(Converted {
        light,
        provided,
        objects: objects.into_iter().map(|o| o.json).collect(),
        csv_object,
        csv_metadata,
    })
}

/// The CSV upstream synthesises from `olm.csv.metadata` for bundles without manifests.
pub fn csv_from_metadata(
    name: &str,
    version: &str,
    metadata: &Value,
    icon: Option<&fbc::Icon>,
    package_description: &str,
    related_images: &[fbc::RelatedImage],
) -> String {
    let get = |k: &str| metadata.get(k).cloned();
    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    meta.insert("creationTimestamp".into(), Value::Null);
    if let Some(v) = get("annotations") {
        meta.insert("annotations".into(), v);
    }
    if let Some(v) = get("labels") {
        meta.insert("labels".into(), v);
    }
    let mut spec = Map::new();
    for (from, to) in [
        ("apiServiceDefinitions", "apiservicedefinitions"),
        ("crdDescriptions", "customresourcedefinitions"),
        ("displayName", "displayName"),
        ("installModes", "installModes"),
        ("keywords", "keywords"),
        ("links", "links"),
        ("maintainers", "maintainers"),
        ("maturity", "maturity"),
        ("minKubeVersion", "minKubeVersion"),
        ("nativeAPIs", "nativeAPIs"),
        ("provider", "provider"),
    ] {
        if let Some(v) = get(from) {
            spec.insert(to.into(), v);
        }
    }
    let description = metadata
        .get("description")
        .and_then(Value::as_str)
        .filter(|d| !d.is_empty())
        .unwrap_or(package_description);
    spec.insert("description".into(), json!(description));
    spec.insert(
        "install".into(),
        json!({ "strategy": "deployment", "spec": { "deployments": null } }),
    );
    spec.insert("version".into(), json!(version));
    if let Some(icon) = icon {
        spec.insert(
            "icon".into(),
            json!([{ "base64data": icon.base64data, "mediatype": icon.mediatype }]),
        );
    } else {
        spec.insert("icon".into(), Value::Null);
    }
    if !related_images.is_empty() {
        let images: Vec<Value> = related_images
            .iter()
            .map(|r| json!({ "name": r.name, "image": r.image }))
            .collect();
        spec.insert("relatedImages".into(), Value::Array(images));
    }
    json!({
        "kind": "ClusterServiceVersion",
        "apiVersion": "operators.coreos.com/v1alpha1",
        "metadata": meta,
        "spec": spec,
        "status": { "cleanup": {} },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::Property;
    use base64::Engine;

    fn bundle() -> fbc::Bundle {
        let csv = base64::engine::general_purpose::STANDARD
            .encode("kind: ClusterServiceVersion\nmetadata: {name: p.v1}\n");
        let crd = base64::engine::general_purpose::STANDARD
            .encode(r#"{"kind":"CustomResourceDefinition"}"#);
        fbc::Bundle {
            schema: "olm.bundle".into(),
            name: "p.v1".into(),
            package: "p".into(),
            image: "quay.io/p:v1".into(),
            properties: vec![
                Property::new(
                    PROP_PACKAGE,
                    json!({"packageName": "p", "version": "1.0.0"}),
                ),
                Property::new(
                    PROP_GVK,
                    json!({"group": "g.io", "kind": "K", "version": "v1"}),
                ),
                Property::new(
                    PROP_GVK_REQUIRED,
                    json!({"group": "h.io", "kind": "R", "version": "v2"}),
                ),
                Property::new(
                    PROP_PACKAGE_REQUIRED,
                    json!({"packageName": "q", "versionRange": ">=1.0.0"}),
                ),
                Property::new(PROP_BUNDLE_OBJECT, json!({ "data": crd })),
                Property::new(PROP_BUNDLE_OBJECT, json!({ "data": csv })),
            ],
            related_images: vec![],
        }
    }

    #[test]
    fn bundle_fields_follow_upstream() {
        let c = convert_bundle(&bundle(), Some("old")).unwrap();
        assert_eq!(c.light.version, "1.0.0");
        assert_eq!(
            c.provided,
            [("g.io".to_string(), "v1".to_string(), "K".to_string())]
        );
        assert_eq!(c.light.required_apis[0].kind, "R");
        assert_eq!(c.light.dependencies[0].r#type, "olm.gvk");
        assert_eq!(c.light.dependencies[1].r#type, "olm.package");
        assert_eq!(
            c.light.dependencies[1].value,
            r#"{"packageName":"q","version":">=1.0.0"}"#
        );
        // Bundle objects are not properties; everything else is.
        assert_eq!(c.light.properties.len(), 4);
        assert_eq!(c.objects.len(), 2);
        assert_eq!(
            c.objects[c.csv_object.unwrap()],
            r#"{"kind":"ClusterServiceVersion","metadata":{"name":"p.v1"}}"#
        );
        assert_eq!(c.light.deprecation.unwrap().message, "old");
    }

    #[test]
    fn a_bundle_needs_one_package_property() {
        let mut b = bundle();
        b.properties.remove(0);
        let err = convert_bundle(&b, None).err().unwrap();
        assert!(matches!(err, ConvertError::PackageProperties(0)), "{err}");
        assert_eq!(
            err.to_string(),
            r#"expected exactly 1 property of type "olm.package", found 0"#
        );
    }
}
