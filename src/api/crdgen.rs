//! Generates the CRD manifests under `crds/` from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use super::operatorgroup::{v1, v1alpha2};
use super::{CatalogSource, ClusterServiceVersion, InstallPlan, OlmConfig, Operator, Subscription};

/// One CRD and the file it lives in under `crds/`.
pub struct CrdManifest {
    pub file_name: &'static str,
    pub crd: CustomResourceDefinition,
}

/// Every CRD OLM serves, in a stable order.
pub fn all_crds() -> Vec<CrdManifest> {
    vec![
        CrdManifest {
            file_name: "operators.coreos.com_catalogsources.yaml",
            crd: catalog_source_crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_clusterserviceversions.yaml",
            crd: ClusterServiceVersion::crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_installplans.yaml",
            crd: InstallPlan::crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_olmconfigs.yaml",
            crd: olm_config_crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_operators.yaml",
            crd: Operator::crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_operatorconditions.yaml",
            crd: merge_crds(
                vec![
                    super::operatorcondition::v2::OperatorCondition::crd(),
                    super::operatorcondition::v1::OperatorCondition::crd(),
                ],
                "v2",
            )
            .expect("both OperatorCondition versions share group, kind and names"),
        },
        CrdManifest {
            file_name: "operators.coreos.com_operatorgroups.yaml",
            crd: operator_group_crd(),
        },
        CrdManifest {
            file_name: "operators.coreos.com_subscriptions.yaml",
            crd: Subscription::crd(),
        },
    ]
}

/// v1 (storage) and v1alpha2 (served) in one CRD. Upstream lets an OperatorGroup omit `spec`
/// (an empty group means AllNamespaces), so `spec` is optional and defaulted by the server.
fn operator_group_crd() -> CustomResourceDefinition {
    let mut crd = merge_crds(
        vec![v1::OperatorGroup::crd(), v1alpha2::OperatorGroup::crd()],
        "v1",
    )
    .expect("both OperatorGroup versions share group, kind and names");
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        if let Some(required) = root.required.as_mut() {
            required.retain(|field| field != "spec");
        }
        if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            let default = if version.name == "v1" {
                serde_json::json!({ "upgradeStrategy": "Default" })
            } else {
                serde_json::json!({})
            };
            spec.default = Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(default),
            );
            spec.nullable = None;
        }
    }
    crd
}

/// Upstream's OLMConfig may omit `spec` (its own manifest of `cluster` has none): `spec` is
/// optional and defaulted to `{}` by the server, so every reader finds one. The schema's
/// title is the kind, as the other CRDs' (the Rust type is `OlmConfig`).
fn olm_config_crd() -> CustomResourceDefinition {
    let mut crd = OlmConfig::crd();
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        root.title = Some("OLMConfig".into());
        if let Some(required) = root.required.as_mut() {
            required.retain(|field| field != "spec");
        }
        if let Some(spec) = property_mut(root, &["spec"]) {
            spec.default = Some(
                k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(
                    serde_json::json!({}),
                ),
            );
        }
    }
    crd
}

/// Upstream merges CatalogSource conditions by `type` (server-side apply friendly).
fn catalog_source_crd() -> CustomResourceDefinition {
    let mut crd = CatalogSource::crd();
    for version in &mut crd.spec.versions {
        let root = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut());
        if let Some(conditions) = root.and_then(|r| property_mut(r, &["status", "conditions"])) {
            conditions.x_kubernetes_list_type = Some("map".into());
            conditions.x_kubernetes_list_map_keys = Some(vec!["type".into()]);
        }
    }
    crd
}

/// The schema node at a path of property names.
fn property_mut<'a>(
    mut node: &'a mut JSONSchemaProps,
    path: &[&str],
) -> Option<&'a mut JSONSchemaProps> {
    for name in path {
        node = node.properties.as_mut()?.get_mut(*name)?;
    }
    Some(node)
}

/// Walks a schema depth-first, applying `f` to every node.
fn visit_schema(schema: &mut JSONSchemaProps, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    f(schema);
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        visit_schema(child, f);
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(items)) =
        schema.items.as_mut()
    {
        visit_schema(items, f);
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(extra)) =
        schema.additional_properties.as_mut()
    {
        visit_schema(extra, f);
    }
}

/// Upstream's schemas carry no `nullable`; a null in an apply would otherwise be stored.
fn normalize(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            visit_schema(root, &mut |node| node.nullable = None);
        }
    }
}

/// The multi-document YAML that `olm crds` prints and `crds/` holds.
pub fn render_yaml(crd: &CustomResourceDefinition) -> String {
    let mut crd = crd.clone();
    normalize(&mut crd);
    let body = serde_yaml::to_string(&crd).expect("a CRD always serializes to YAML");
    format!("# Generated from src/api by `olm crds`; do not edit.\n---\n{body}")
}

/// All CRDs as one YAML stream, ready for `kubectl apply -f -`.
pub fn render_all_yaml() -> String {
    all_crds()
        .iter()
        .map(|m| render_yaml(&m.crd))
        .collect::<Vec<_>>()
        .join("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// `crds/` must be what the Rust types generate; run `olm crds --write crds` to refresh.
    #[test]
    fn crds_directory_is_up_to_date() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
        let mut stale = Vec::new();
        for manifest in all_crds() {
            let path = dir.join(manifest.file_name);
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            if on_disk != render_yaml(&manifest.crd) {
                stale.push(manifest.file_name);
            }
        }
        assert!(
            stale.is_empty(),
            "crds/ is stale for {stale:?}; regenerate with `cargo run -- crds --write crds`"
        );
    }

    #[test]
    fn operator_group_spec_is_optional_and_v1_is_storage() {
        let crd = operator_group_crd();
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.storage))
            .collect();
        assert_eq!(versions, [("v1", true), ("v1alpha2", false)]);
        for v in &crd.spec.versions {
            let root = v
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap();
            assert!(
                !root
                    .required
                    .clone()
                    .unwrap_or_default()
                    .contains(&"spec".to_string())
            );
        }
    }

    /// Upstream's shape: cluster-scoped, category `olm`, no short names, an optional spec,
    /// the sync interval's pattern, conditions merged by type.
    #[test]
    fn olm_config_is_cluster_scoped_with_an_optional_spec() {
        let crd = olm_config_crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.kind, "OLMConfig");
        assert_eq!(crd.spec.names.categories, Some(vec!["olm".to_string()]));
        assert_eq!(crd.spec.names.short_names, None);
        let yaml = render_yaml(&crd);
        let doc: serde_json::Value =
            serde_yaml::from_str(yaml.trim_start_matches(|c| c != '\n')).unwrap();
        let version = &doc["spec"]["versions"][0];
        assert_eq!(version["name"], "v1");
        assert_eq!(version["subresources"]["status"], serde_json::json!({}));
        let root = &version["schema"]["openAPIV3Schema"];
        let required = root["required"].as_array().cloned().unwrap_or_default();
        assert!(
            !required.contains(&serde_json::json!("spec")),
            "{required:?}"
        );
        assert_eq!(root["properties"]["spec"]["default"], serde_json::json!({}));
        let features = &root["properties"]["spec"]["properties"]["features"]["properties"];
        assert_eq!(features["disableCopiedCSVs"]["type"], "boolean");
        assert_eq!(
            features["packageServerSyncInterval"]["pattern"],
            r"^([0-9]+(\.[0-9]+)?(s|m|h))+$"
        );
        let conditions = &root["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
    }

    #[test]
    fn deployment_spec_keeps_unknown_fields() {
        let crd = ClusterServiceVersion::crd();
        let yaml = render_yaml(&crd);
        let doc: serde_json::Value =
            serde_yaml::from_str(yaml.trim_start_matches(|c| c != '\n')).unwrap();
        let deployment_spec = &doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
            ["spec"]["properties"]["install"]["properties"]["spec"]["properties"]["deployments"]["items"]
            ["properties"]["spec"];
        assert_eq!(
            deployment_spec["x-kubernetes-preserve-unknown-fields"], true,
            "{deployment_spec}"
        );
    }
}
