//! A bundle's manifests, from the catalog it was resolved from: the registry server's
//! GetBundle for gRPC catalogs (ours or `opm serve`), the ConfigMap for ConfigMap catalogs.
//! Snapshots keep no manifests (see `catalogsource::load`), so they are read here, once per
//! plan. A bundle the catalog has no objects for is pulled from its image ([`super::unpack`]).

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::api::{CatalogSource, PlannedBundle, SourceType};
use crate::catalog::configmap::ConfigMapCatalogError;
use crate::catalog::configmap::from_configmap_data;
use crate::catalog::model::fbc::{self, PROP_BUNDLE_OBJECT};
use crate::controllers::context::Context;
use crate::registry::client::{ClientError, RegistryClient};
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

/// Why a bundle's manifests could not be read from its catalog.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("waiting to read the bundle: {0}")]
    Closed(#[from] tokio::sync::AcquireError),
    #[error("reading the CatalogSource: {0}")]
    Source(#[source] kube::Error),
    #[error("the CatalogSource does not exist")]
    NoSource,
    #[error("the CatalogSource has no spec.address")]
    NoAddress,
    #[error("the CatalogSource's spec is invalid: unknown sourcetype: {0}")]
    UnknownSourceType(String),
    /// From the in-process snapshot of an image catalog.
    #[error(transparent)]
    Snapshot(crate::oci::catalog::ImageCatalogError),
    #[error("{0}")]
    Registry(#[from] ClientError),
    #[error("reading ConfigMap {name}: {source}")]
    ConfigMap {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("ConfigMap {name}: {source}")]
    ConfigMapCatalog {
        name: String,
        #[source]
        source: ConfigMapCatalogError,
    },
    #[error("{0}")]
    Decoding(#[from] tokio::task::JoinError),
    #[error("bundle {bundle} is not in catalog {catalog}")]
    NotInCatalog { bundle: String, catalog: CatalogRef },
    #[error(transparent)]
    Objects(#[from] ObjectsError),
}

/// Why an FBC bundle's objects could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    #[error("{PROP_BUNDLE_OBJECT} #{0} has no data")]
    NoData(usize),
    #[error("{PROP_BUNDLE_OBJECT} #{index} is not base64: {source}")]
    NotBase64 {
        index: usize,
        #[source]
        source: base64::DecodeError,
    },
    #[error("{PROP_BUNDLE_OBJECT} #{index} is neither JSON nor YAML: {message}")]
    NotJsonOrYaml { index: usize, message: String },
    #[error("bundle {0} has neither objects nor an image")]
    Empty(String),
}

pub async fn fetch(bundle: &PlannedBundle, ctx: &Context) -> Result<Fetched, FetchError> {
    let _turn = READING.acquire().await?;
    let api: Api<CatalogSource> = Api::namespaced(ctx.client.clone(), &bundle.catalog_namespace);
    let source = api
        .get_opt(&bundle.catalog)
        .await
        .map_err(FetchError::Source)?
        .ok_or(FetchError::NoSource)?;
    let catalog = CatalogRef::new(&bundle.catalog, &bundle.catalog_namespace);
    let found = match &source.spec.source_type {
        SourceType::Grpc if is_image_catalog(&source) => crate::oci::catalog::bundle_from_snapshot(
            &ctx.snapshots,
            &ctx.settings.image_cache_dir,
            &catalog,
            &bundle.package,
            &bundle.name,
        )
        .await
        .map_err(FetchError::Snapshot)?,
        SourceType::Grpc => {
            let address = source
                .spec
                .address
                .as_deref()
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .ok_or(FetchError::NoAddress)?;
            RegistryClient::new(address, ctx.settings.registry_timeout)?
                .get_bundle(&bundle.package, &bundle.channel, &bundle.name)
                .await?
        }
        SourceType::Unknown(other) => return Err(FetchError::UnknownSourceType(other.clone())),
        SourceType::Configmap | SourceType::Internal => {
            from_config_map(&source, bundle, catalog, ctx).await?
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

/// The bundle from the ConfigMap of a ConfigMap catalog.
async fn from_config_map(
    source: &CatalogSource,
    bundle: &PlannedBundle,
    catalog: CatalogRef,
    ctx: &Context,
) -> Result<fbc::Bundle, FetchError> {
    let name = source
        .spec
        .config_map
        .as_deref()
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let config_maps: Api<ConfigMap> =
        Api::namespaced(ctx.client.clone(), &bundle.catalog_namespace);
    let config_map = match config_maps.get(&name).await {
        Ok(found) => found,
        Err(source) => return Err(FetchError::ConfigMap { name, source }),
    };
    let data = config_map.data.unwrap_or_default();
    let content = match tokio::task::spawn_blocking(move || from_configmap_data(&data)).await? {
        Ok(content) => content,
        Err(source) => return Err(FetchError::ConfigMapCatalog { name, source }),
    };
    content
        .bundles
        .into_iter()
        .find(|b| b.name == bundle.name && b.package == bundle.package)
        .ok_or_else(|| FetchError::NotInCatalog {
            bundle: bundle.name.clone(),
            catalog,
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
pub fn objects_of(bundle: &fbc::Bundle) -> Result<Fetched, ObjectsError> {
    let engine = base64::engine::general_purpose::STANDARD;
    let mut objects = Vec::new();
    for (i, value) in bundle.properties_of(PROP_BUNDLE_OBJECT).enumerate() {
        let data = value["data"].as_str().ok_or(ObjectsError::NoData(i))?;
        let bytes = engine
            .decode(data.trim())
            .map_err(|source| ObjectsError::NotBase64 { index: i, source })?;
        let object: Value = serde_json::from_slice(&bytes)
            .or_else(|_| crate::catalog::text::yaml_nesting::from_slice(&bytes))
            .map_err(|e| ObjectsError::NotJsonOrYaml {
                index: i,
                message: e.to_string(),
            })?;
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
            Err(ObjectsError::Empty(bundle.name.clone()))
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
