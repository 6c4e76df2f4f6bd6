//! `ClusterServiceVersion` (operators.coreos.com/v1alpha1): one version of an operator, how to
//! install it, and what it owns and needs.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::{AppLink, GroupVersionKind, Icon, Maintainer};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    namespaced,
    status = "ClusterServiceVersionStatus",
    shortname = "csv",
    shortname = "csvs",
    category = "olm",
    printcolumn = r#"{"name":"Display","type":"string","jsonPath":".spec.displayName","description":"The name of the CSV"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version","description":"The version of the CSV"}"#,
    printcolumn = r#"{"name":"Release","type":"string","jsonPath":".spec.release","description":"The release of this version of the CSV"}"#,
    printcolumn = r#"{"name":"Replaces","type":"string","jsonPath":".spec.replaces","description":"The name of a CSV that this one replaces"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionSpec {
    pub install: NamedInstallStrategy,
    /// Semantic version of the operator (upstream: OperatorVersion, a plain string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CustomResourceDefinitions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub webhookdefinitions: Vec<WebhookDescription>,
    #[serde(
        default,
        rename = "nativeAPIs",
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub native_apis: Vec<GroupVersionKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    pub display_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub keywords: Vec<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<AppLink>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub icon: Vec<Icon>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub install_modes: Vec<InstallMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub skips: Vec<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub related_images: Vec<RelatedImage>,
}

/// `spec.install`: only the `deployment` strategy exists upstream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedInstallStrategy {
    pub strategy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<StrategyDetailsDeployment>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    pub deployments: Vec<StrategyDeploymentSpec>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentSpec {
    pub name: String,
    /// An apps/v1 DeploymentSpec, kept whole: OLM must not prune what an operator ships.
    #[schemars(schema_with = "schema::preserved_object")]
    pub spec: serde_json::Value,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub label: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    pub service_account_name: String,
    pub rules: Vec<PolicyRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitions {
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owned: Vec<CrdDescription>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub required: Vec<CrdDescription>,
}

/// An owned or required CRD, by name, version and kind, with UI descriptors.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    pub name: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<ApiResourceReference>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub status_descriptors: Vec<Descriptor>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub spec_descriptors: Vec<Descriptor>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub action_descriptors: Vec<Descriptor>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDefinitions {
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owned: Vec<ApiServiceDescription>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub required: Vec<ApiServiceDescription>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<ApiResourceReference>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub status_descriptors: Vec<Descriptor>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub spec_descriptors: Vec<Descriptor>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub action_descriptors: Vec<Descriptor>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceReference {
    /// Required upstream, yet real bundles (rabbitmq-cluster-operator) omit it; accepting
    /// them beats refusing a published operator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub kind: String,
    pub version: String,
}

/// A UI hint for one field of a custom resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        rename = "x-descriptors",
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub x_descriptors: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::any_value")]
    pub value: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    pub generate_name: String,
    #[serde(rename = "type")]
    pub type_: WebhookAdmissionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::int_or_string")]
    pub target_port: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub rules: Option<Vec<serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    pub side_effects: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    pub admission_review_versions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    #[serde(
        default,
        rename = "conversionCRDs",
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conversion_crds: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WebhookAdmissionType {
    #[default]
    ValidatingAdmissionWebhook,
    MutatingAdmissionWebhook,
    ConversionWebhook,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallMode {
    #[serde(rename = "type")]
    #[schemars(schema_with = "schema::plain_string")]
    pub type_: InstallModeType,
    pub supported: bool,
}

#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    JsonSchema,
)]
pub enum InstallModeType {
    #[default]
    OwnNamespace,
    SingleNamespace,
    MultiNamespace,
    AllNamespaces,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CleanupSpec {
    pub enabled: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RelatedImage {
    pub name: String,
    pub image: String,
}

/// `status.phase`. `Unknown` exists upstream but is never set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CsvPhase {
    #[default]
    #[serde(rename = "")]
    None,
    Pending,
    InstallReady,
    Installing,
    Succeeded,
    Failed,
    Unknown,
    Replacing,
    Deleting,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Phase history, newest last (upstream caps it at 20).
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<CsvCondition>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requirement_status: Vec<RequirementStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: Option<CsvPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementStatus {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub status: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub dependents: Vec<DependentStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependentStatus {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub pending_deletion: Vec<serde_json::Value>,
}
