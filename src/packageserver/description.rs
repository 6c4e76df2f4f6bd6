//! Upstream's `CSVDescription`: what a PackageManifest shows of a channel head's CSV, and
//! the CSV a registry server gives for a bundle. Below both [`super::manifest`] and
//! [`super::icon`], which read CSVs through it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::bundles::csv::bundle_csv;
use crate::catalog::model::fbc::{Bundle, PROP_CSV_METADATA};

/// Upstream's `CSVDescription`: the head CSV's catalog-facing fields, CRD and API service
/// descriptions cut down to names and texts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CsvDescription {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<Value>,
    pub provider: AppLink,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub maturity: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<Value>,
    pub customresourcedefinitions: Map<String, Value>,
    pub apiservicedefinitions: Map<String, Value>,
    #[serde(rename = "nativeApis", skip_serializing_if = "Vec::is_empty")]
    pub native_apis: Vec<Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub min_kube_version: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppLink {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub url: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Maintainer {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub email: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Icon {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub base64data: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mediatype: String,
}

/// The CSV a registry server gives for a channel head: the bundle's CSV object, else one
/// made from its `olm.csv.metadata` (as opm does for bundles stored without objects).
pub(super) fn head_csv(bundle: &Bundle) -> Option<Value> {
    if let Some(csv) = bundle_csv(bundle) {
        return Some(csv);
    }
    let metadata = bundle.properties_of(PROP_CSV_METADATA).next()?;
    let mut spec = metadata.as_object().cloned().unwrap_or_default();
    let annotations = spec.remove("annotations").unwrap_or(Value::Null);
    let labels = spec.remove("labels").unwrap_or(Value::Null);
    Some(serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": bundle.name, "annotations": annotations, "labels": labels},
        "spec": spec,
    }))
}

pub(super) fn str_at(value: &Value, path: &[&str]) -> String {
    let mut v = value;
    for key in path {
        v = &v[*key];
    }
    v.as_str().unwrap_or_default().to_string()
}

fn app_link(value: &Value) -> AppLink {
    AppLink {
        name: str_at(value, &["name"]),
        url: str_at(value, &["url"]),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Keeps only the listed fields of each description (upstream's `descriptionsFor*`).
fn cut_descriptions(section: &Value, keep: &[&str], always: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for list in ["owned", "required"] {
        let Some(items) = section[list].as_array() else {
            continue;
        };
        if items.is_empty() {
            continue;
        }
        let cut: Vec<Value> = items
            .iter()
            .map(|item| {
                let mut m = Map::new();
                for key in keep {
                    match item.get(*key) {
                        Some(Value::String(s)) if !s.is_empty() || always.contains(key) => {
                            m.insert((*key).into(), Value::String(s.clone()));
                        }
                        Some(v @ Value::Number(_)) => {
                            m.insert((*key).into(), v.clone());
                        }
                        _ if always.contains(key) => {
                            m.insert((*key).into(), Value::String(String::new()));
                        }
                        _ => {}
                    }
                }
                Value::Object(m)
            })
            .collect();
        out.insert(list.into(), Value::Array(cut));
    }
    out
}

/// Upstream's `CreateCSVDescription`.
pub fn describe(csv: &Value) -> CsvDescription {
    let spec = &csv["spec"];
    let icon = spec["icon"]
        .as_array()
        .map(|icons| {
            icons
                .iter()
                .map(|i| Icon {
                    base64data: str_at(i, &["base64data"]),
                    mediatype: str_at(i, &["mediatype"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let annotations = string_map(&csv["metadata"]["annotations"]);
    let list = |key: &str| spec[key].as_array().cloned().unwrap_or_default();
    CsvDescription {
        display_name: str_at(spec, &["displayName"]),
        icon,
        version: spec.get("version").filter(|v| !v.is_null()).cloned(),
        provider: app_link(&spec["provider"]),
        annotations,
        keywords: strings(&spec["keywords"]),
        links: list("links").iter().map(app_link).collect(),
        maintainers: list("maintainers")
            .iter()
            .map(|m| Maintainer {
                name: str_at(m, &["name"]),
                email: str_at(m, &["email"]),
            })
            .collect(),
        maturity: str_at(spec, &["maturity"]),
        description: str_at(spec, &["description"]),
        install_modes: list("installModes"),
        customresourcedefinitions: cut_descriptions(
            &spec["customresourcedefinitions"],
            &["name", "version", "kind", "displayName", "description"],
            &["name", "version", "kind"],
        ),
        apiservicedefinitions: cut_descriptions(
            &spec["apiservicedefinitions"],
            &[
                "name",
                "group",
                "version",
                "kind",
                "displayName",
                "description",
            ],
            &["name", "group", "version", "kind"],
        ),
        native_apis: list("nativeAPIs"),
        min_kube_version: str_at(spec, &["minKubeVersion"]),
        related_images: related_images(spec),
    }
}

/// The operator's container images (deployments' containers and init containers) and
/// `spec.relatedImages`, each once, sorted (upstream's order is a Go map's: random).
fn related_images(spec: &Value) -> Vec<String> {
    let mut images = std::collections::BTreeSet::new();
    if let Some(deployments) = spec["install"]["spec"]["deployments"].as_array() {
        for d in deployments {
            let pod = &d["spec"]["template"]["spec"];
            for key in ["containers", "initContainers"] {
                for c in pod[key].as_array().into_iter().flatten() {
                    if let Some(image) = c["image"].as_str() {
                        images.insert(image.to_string());
                    }
                }
            }
        }
    }
    for r in spec["relatedImages"].as_array().into_iter().flatten() {
        if let Some(image) = r["image"].as_str() {
            images.insert(image.to_string());
        }
    }
    images.into_iter().collect()
}
/// A JSON object of strings as a map (a value that is not a string reads as empty).
pub fn string_map(object: &Value) -> BTreeMap<String, String> {
    object
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
