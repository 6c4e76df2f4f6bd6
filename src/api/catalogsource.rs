//! `CatalogSource` (operators.coreos.com/v1alpha1): where packages come from.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::Icon;

/// Where the catalog's content comes from, how often to refresh it, and how to present it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    doc = "A catalog of operator packages that OLM can install from: a catalog image, a registry gRPC server at an address, or a ConfigMap of manifests. Subscriptions name a CatalogSource as the source of their package.",
    plural = "catalogsources",
    namespaced,
    status = "CatalogSourceStatus",
    shortname = "catsrc",
    category = "olm",
    printcolumn = r#"{"name":"Display","type":"string","jsonPath":".spec.displayName","description":"The pretty name of the catalog"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.sourceType","description":"The type of the catalog"}"#,
    printcolumn = r#"{"name":"Publisher","type":"string","jsonPath":".spec.publisher","description":"The publisher of the catalog"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// How the catalog is served: `grpc` (a catalog `image`, or a registry server at
    /// `address`) or `configmap` (manifests in the ConfigMap named by `configMap`).
    /// `internal` is an older name for `configmap`; any other value is reported in status
    /// (SpecInvalidError).
    #[schemars(schema_with = "schema::plain_string")]
    pub source_type: SourceType,
    /// Preference among catalogs that offer the same package or API during resolution:
    /// higher wins, ties are broken by name. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Name of the ConfigMap, in this namespace, that holds the catalog for
    /// `sourceType: configmap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// `host:port` of a registry gRPC server to read the catalog from (`sourceType: grpc`);
    /// ignored when `image` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Catalog image to read packages from (`sourceType: grpc`). OLM pulls the image and
    /// serves its content itself; `updateStrategy` makes it follow new pushes of the tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Scheduling and security settings for the registry pod that upstream OLM runs for an
    /// image catalog. Accepted for compatibility: this OLM serves image catalogs without a pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    /// How OLM keeps an image catalog current. Without it the image is read again only when
    /// `image` changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Names of Secrets in this namespace holding registry credentials, used to pull the
    /// catalog image and the bundle images it lists.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub secrets: Vec<String>,
    /// Human-readable name of the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the catalog offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who publishes the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// The catalog's icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<Icon>,
}

/// `internal` is a deprecated alias of `configmap`. Any other value is kept as written, so
/// that the object stays readable and its status can say what is wrong with it (upstream:
/// SpecInvalidError, "unknown sourcetype: …").
#[derive(Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SourceType {
    #[default]
    Grpc,
    Configmap,
    Internal,
    Unknown(String),
}

impl SourceType {
    pub fn as_str(&self) -> &str {
        match self {
            SourceType::Grpc => "grpc",
            SourceType::Configmap => "configmap",
            SourceType::Internal => "internal",
            SourceType::Unknown(other) => other,
        }
    }
}

impl Serialize for SourceType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SourceType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(match text.as_str() {
            "grpc" => SourceType::Grpc,
            "configmap" => SourceType::Configmap,
            "internal" => SourceType::Internal,
            _ => SourceType::Unknown(text),
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Node selector of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::string_map")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub tolerations: Option<Vec<serde_json::Value>>,
    /// Affinity of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object")]
    pub affinity: Option<serde_json::Value>,
    /// PriorityClass of the registry pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Security context of the registry pod: `legacy` or `restricted` (Pod Security
    /// `restricted` profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityContextConfig>,
    /// A Quantity, passed to the catalog server as its memory target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::int_or_string")]
    pub memory_target: Option<serde_json::Value>,
    /// Run the registry from a copy of the catalog extracted from the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract_content: Option<ExtractContentConfig>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecurityContextConfig {
    #[default]
    Legacy,
    Restricted,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// Directory of the catalog's cache inside the image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    /// Directory of the file-based catalog inside the image.
    pub catalog_dir: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Check the catalog image's registry for a new digest at a fixed interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryPoll {
    /// A Go duration such as `10m` or `1h30m`; a bad value falls back to 15m, and the
    /// status says so (reason InvalidIntervalError), as upstream (whose CRD accepts any
    /// string here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// What OLM last observed of the catalog: its connection, content and health.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// Human-readable detail of the first failing condition; unset while the catalog is
    /// healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Reason of the first failing condition; unset while the catalog is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The ConfigMap last read for a `configmap` catalog, with its resourceVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    /// What serves the catalog: protocol `grpc` with the host and port of `spec.address`,
    /// or `in-process` (named after the CatalogSource) for ConfigMap and image catalogs,
    /// which OLM serves from its own memory. Upstream names its registry pod's Service here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,
    /// The last observed state of the connection to the catalog's registry.
    #[serde(
        default,
        rename = "connectionState",
        skip_serializing_if = "Option::is_none"
    )]
    pub connection_state: Option<GrpcConnectionState>,
    /// When the content of the catalog image in use was pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
    /// Catalog health: `Connected` (the registry or image is reachable), `CatalogLoaded`
    /// (the content is loaded), and `SpecValid` when the spec has a problem.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "schema::conditions_by_type::<Condition>")]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    /// Name of the ConfigMap.
    pub name: String,
    /// Namespace of the ConfigMap.
    pub namespace: String,
    /// UID of the ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The resourceVersion that was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// When OLM last read the ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// Protocol of the registry (`grpc`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Name of the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// Namespace of the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// Port of the Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// When the Service was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    /// The registry address connected to; unset for an image catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// gRPC connectivity state: IDLE, CONNECTING, READY, TRANSIENT_FAILURE, SHUTDOWN.
    pub last_observed_state: String,
    /// When the connection entered `lastObservedState`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connect: Option<Time>,
}
