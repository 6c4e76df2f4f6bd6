//! `CatalogSource` (operators.coreos.com/v1alpha1): where packages come from.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::Icon;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
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
    #[schemars(schema_with = "schema::plain_string")]
    pub source_type: SourceType,
    /// Higher wins; ties are broken by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// `host:port` of a registry gRPC server; ignored when `image` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub secrets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::string_map")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub tolerations: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object")]
    pub affinity: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context_config: Option<SecurityContextConfig>,
    /// A Quantity, passed to the catalog server as its memory target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::int_or_string")]
    pub memory_target: Option<serde_json::Value>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<String>,
    pub catalog_dir: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_poll: Option<RegistryPoll>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryPoll {
    /// A Go duration such as `10m` or `1h30m`; a bad value falls back to 15m, as upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::go_duration")]
    pub interval: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_service: Option<RegistryServiceStatus>,
    #[serde(
        default,
        rename = "connectionState",
        skip_serializing_if = "Option::is_none"
    )]
    pub connection_state: Option<GrpcConnectionState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_image_registry_poll: Option<Time>,
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
    pub name: String,
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// gRPC connectivity state: IDLE, CONNECTING, READY, TRANSIENT_FAILURE, SHUTDOWN.
    pub last_observed_state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connect: Option<Time>,
}
