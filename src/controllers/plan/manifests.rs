//! A bundle's manifests, from the catalog it was resolved from: the registry server's
//! GetBundle for gRPC catalogs (ours or `opm serve`), the ConfigMap for ConfigMap catalogs.
//! Snapshots keep no manifests (see `catalogsource::load`), so they are read here, once per
//! plan. A bundle the catalog has no objects for is pulled from its image ([`super::unpack`]).

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::api::{CatalogSource, PlannedBundle, SourceType};
use crate::catalog::configmap::from_configmap_data;
use crate::catalog::model::fbc::{self, PROP_BUNDLE_OBJECT};
use crate::controllers::context::Context;
use crate::registry::client::RegistryClient;
use crate::resolver::CatalogRef;

pub enum Fetched {
    /// The bundle's objects, and its other properties.
    Objects {
        objects: Vec<Value>,
        properties: Vec<Value>,
    },
    /// The catalog has no inline objects for it: its bundle image is to be pulled, with the
    /// catalog's pull Secrets; the catalog's properties for it still apply.
    NeedsUnpack {
        image: String,
        properties: Vec<Value>,
        secrets: Vec<String>,
    },
}

/// Bundles read at once, across every plan of this process. A bundle is decoded whole (a
/// community bundle can hold megabytes of CRDs) and each reader holds it as JSON trees; a
/// hundred Subscriptions created together would otherwise decode a hundred bundles at once
/// and send the catalog server as many GetBundle calls.
static READING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

pub async fn fetch(bundle: &PlannedBundle, ctx: &Context) -> Result<Fetched, String> {
    let _turn = READING
        .acquire()
        .await
        .map_err(|e| format!("waiting to read the bundle: {e}"))?;
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &bundle.catalog_namespace);
    let source = api
        .get_opt(&bundle.catalog)
        .await
        .map_err(|e| format!("reading the CatalogSource: {e}"))?
        .ok_or_else(|| "the CatalogSource does not exist".to_string())?;
    let found = match &source.spec.source_type {
        SourceType::Grpc if is_image_catalog(&source) => {
            crate::oci::catalog::bundle_from_snapshot(
                &ctx.snapshots,
                &ctx.settings.image_cache_dir,
                &CatalogRef::new(&bundle.catalog, &bundle.catalog_namespace),
                &bundle.package,
                &bundle.name,
            )
            .await?
        }
        SourceType::Grpc => {
            let address = source
                .spec
                .address
                .as_deref()
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .ok_or_else(|| "the CatalogSource has no spec.address".to_string())?;
            let client = RegistryClient::new(address, ctx.settings.registry_timeout)
                .map_err(|e| e.to_string())?;
            client
                .get_bundle(&bundle.package, &bundle.channel, &bundle.name)
                .await
                .map_err(|e| e.to_string())?
        }
        SourceType::Unknown(other) => {
            return Err(format!(
                "the CatalogSource's spec is invalid: unknown sourcetype: {other}"
            ));
        }
        SourceType::Configmap | SourceType::Internal => {
            let name = source
                .spec
                .config_map
                .as_deref()
                .map(str::trim)
                .unwrap_or_default()
                .to_string();
            let config_maps: Api<ConfigMap> =
                Api::namespaced(ctx.client.clone(), &bundle.catalog_namespace);
            let config_map = config_maps
                .get(&name)
                .await
                .map_err(|e| format!("reading ConfigMap {name}: {e}"))?;
            let data = config_map.data.unwrap_or_default();
            let content = tokio::task::spawn_blocking(move || from_configmap_data(&data))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("ConfigMap {name}: {e}"))?;
            content
                .bundles
                .into_iter()
                .find(|b| b.name == bundle.name && b.package == bundle.package)
                .ok_or_else(|| {
                    format!(
                        "bundle {} is not in catalog {}",
                        bundle.name,
                        CatalogRef::new(&bundle.catalog, &bundle.catalog_namespace)
                    )
                })?
        }
    };
    Ok(match objects_of(&found)? {
        Fetched::NeedsUnpack {
            image, properties, ..
        } => Fetched::NeedsUnpack {
            image,
            properties,
            secrets: source.spec.secrets.clone(),
        },
        objects => objects,
    })
}

/// `spec.image` and no address: the catalog is served in-process from the pulled image.
fn is_image_catalog(source: &CatalogSource) -> bool {
    source
        .spec
        .address
        .as_deref()
        .is_none_or(|a| a.trim().is_empty())
        && source.spec.image.is_some()
}

/// The objects of an FBC bundle (base64 JSON or YAML in `olm.bundle.object`).
pub fn objects_of(bundle: &fbc::Bundle) -> Result<Fetched, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut objects = Vec::new();
    for (i, value) in bundle.properties_of(PROP_BUNDLE_OBJECT).enumerate() {
        let data = value["data"]
            .as_str()
            .ok_or_else(|| format!("{PROP_BUNDLE_OBJECT} #{i} has no data"))?;
        let bytes = engine
            .decode(data.trim())
            .map_err(|e| format!("{PROP_BUNDLE_OBJECT} #{i} is not base64: {e}"))?;
        let object: Value = serde_json::from_slice(&bytes)
            .or_else(|_| crate::catalog::text::yaml_nesting::from_slice(&bytes))
            .map_err(|e| format!("{PROP_BUNDLE_OBJECT} #{i} is neither JSON nor YAML: {e}"))?;
        objects.push(object);
    }
    let properties = bundle
        .properties
        .iter()
        .filter(|p| p.type_ != PROP_BUNDLE_OBJECT && p.type_ != fbc::PROP_CSV_METADATA)
        .map(|p| serde_json::json!({"type": p.type_, "value": p.value}))
        .collect();
    if objects.is_empty() {
        return if bundle.image.is_empty() {
            Err(format!(
                "bundle {} has neither objects nor an image",
                bundle.name
            ))
        } else {
            Ok(Fetched::NeedsUnpack {
                image: bundle.image.clone(),
                properties,
                secrets: Vec::new(),
            })
        };
    }
    Ok(Fetched::Objects {
        objects,
        properties,
    })
}
