//! `ClusterServiceVersion` (operators.coreos.com/v1alpha1): one version of an operator, how to
//! install it, and what it owns and needs.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::{AppLink, GroupVersionKind, Icon, Maintainer};

/// The operator version's install strategy, APIs, requirements and descriptive metadata.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    doc = "One version of an operator: how OLM runs it (Deployments and RBAC), the APIs it owns and needs, the namespaces it can watch, and how it presents itself. OLM moves it through phases until it has Succeeded or Failed.",
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
    /// How to run the operator: with the `deployment` strategy, its Deployments and the RBAC
    /// rules of their service accounts.
    pub install: NamedInstallStrategy,
    /// Semantic version of the operator.
    // Upstream: OperatorVersion, a plain string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Packaging release of this version, telling rebuilds of the same version apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// Maturity of the operator, such as `alpha`, `beta` or `stable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maturity: Option<String>,
    /// The CRDs the operator owns (its bundle provides them) and requires (another operator
    /// must provide them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CustomResourceDefinitions>,
    /// The aggregated API services the operator owns and requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks the operator serves.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub webhookdefinitions: Vec<WebhookDescription>,
    /// Built-in API kinds the operator needs; the CSV stays Pending until the cluster serves
    /// them.
    #[serde(
        default,
        rename = "nativeAPIs",
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub native_apis: Vec<GroupVersionKind>,
    /// Oldest Kubernetes version the operator runs on; the CSV stays Pending on an older
    /// cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_kube_version: Option<String>,
    /// Human-readable name of the operator.
    pub display_name: String,
    /// Description of the operator, in Markdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Keywords to find the operator by.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub keywords: Vec<String>,
    /// Who maintains the operator.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub maintainers: Vec<Maintainer>,
    /// Who provides the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AppLink>,
    /// Links about the operator, such as documentation and source code.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub links: Vec<AppLink>,
    /// Icons of the operator.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub icon: Vec<Icon>,
    /// Which target namespaces of an OperatorGroup the operator supports: `OwnNamespace`,
    /// `SingleNamespace`, `MultiNamespace`, `AllNamespaces`. An unlisted mode is unsupported.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub install_modes: Vec<InstallMode>,
    /// Name of the CSV this one upgrades; that CSV is removed once this one has succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Labels describing the operator, as catalog metadata.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations describing the operator, as catalog metadata.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// Selects the objects related to the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Upstream's opt-in deletion of the operator's custom resources with the CSV. Accepted
    /// for compatibility; this OLM does not act on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupSpec>,
    /// Names of CSVs this one can replace directly, skipped in the update graph.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub skips: Vec<String>,
    /// Images the operator uses, so that they can be mirrored.
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
    /// The install strategy: `deployment`.
    pub strategy: String,
    /// The Deployments to create and the RBAC rules their service accounts get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<StrategyDetailsDeployment>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// The operator's Deployments.
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// RBAC rules granted to service accounts in the namespaces the operator watches.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// RBAC rules granted to service accounts cluster-wide.
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
    /// Name of the Deployment.
    pub name: String,
    /// An apps/v1 DeploymentSpec, kept whole: OLM must not prune what an operator ships.
    #[schemars(schema_with = "schema::preserved_object")]
    pub spec: serde_json::Value,
    /// Labels of the Deployment.
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
    /// The service account that gets the rules.
    pub service_account_name: String,
    /// The RBAC rules.
    pub rules: Vec<PolicyRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitions {
    /// CRDs the operator's bundle provides and the operator reconciles.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owned: Vec<CrdDescription>,
    /// CRDs another operator must provide; OLM installs one that does as a dependency.
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
    /// Name of the CRD (`<plural>.<group>`).
    pub name: String,
    /// The CRD version the operator uses.
    pub version: String,
    /// Kind of the custom resource.
    pub kind: String,
    /// Human-readable name of the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the custom resource is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Kinds of objects the operator creates for a custom resource of this kind.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<ApiResourceReference>,
    /// UI hints for the custom resource's status fields.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub status_descriptors: Vec<Descriptor>,
    /// UI hints for the custom resource's spec fields.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub spec_descriptors: Vec<Descriptor>,
    /// UI hints for actions on the custom resource.
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
    /// Required upstream, yet real bundles omit each of these (rabbitmq-cluster-operator the
    /// name, project-quay the version and once the kind) and upstream's decoder lets them:
    /// UI hints, so accepting them beats refusing a published operator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(rename = "type")]
    #[schemars(schema_with = "schema::plain_string")]
    pub type_: InstallModeType,
    /// Whether the operator supports this mode.
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

/// Where the install of this operator version stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    /// `Pending` (requirements not met), `InstallReady`, `Installing`, `Succeeded`, `Failed`,
    /// `Replacing` (a newer CSV takes over) or `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: Option<CsvPhase>,
    /// Human-readable detail of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the CSV is in its phase, such as `InstallSucceeded`, `RequirementsNotMet` or
    /// `UnsupportedOperatorGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the status was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the phase last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The phases the CSV went through, newest last (at most 20).
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<CsvCondition>,
    /// Each requirement (CRDs, APIs, service accounts, Kubernetes version) and whether it
    /// is met.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub requirement_status: Vec<RequirementStatus>,
    /// When upstream OLM last issued the serving certificates of the operator's webhooks
    /// and API services; not set by this OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_last_updated: Option<Time>,
    /// When upstream OLM rotates those certificates next; not set by this OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certs_rotate_at: Option<Time>,
    /// Progress of upstream's deletion of custom resources; not set by this OLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<CleanupStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    /// The phase entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: Option<CsvPhase>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why the phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When this entry was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementStatus {
    /// API group of the requirement.
    pub group: String,
    /// API version of the requirement.
    pub version: String,
    /// Kind of the requirement.
    pub kind: String,
    /// Name of the requirement.
    pub name: String,
    /// `Present`, `PresentNotSatisfied` or `NotPresent`.
    pub status: String,
    /// Human-readable detail.
    pub message: String,
    /// UID of the object that meets the requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// What the requirement needs in turn, such as the RBAC rules of a service account.
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

/// Label on a copied CSV: the namespace of the CSV it was copied from.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// Annotation with the bundle's catalog properties (`{"properties":[…]}`) on a CSV a plan
/// created, as upstream writes it; the resolver reads an installed CSV's package from it.
pub const ANNOTATION_PROPERTIES: &str = "operatorframework.io/properties";

impl ClusterServiceVersion {
    /// Whether this CSV replaces `other` now: it names `other` in `spec.replaces`, unless
    /// the two name each other. Such a pair comes from a rollback (the older version planned
    /// to replace the newer) or an upgrade after one, and the newcomer is the replacement:
    /// the one not yet Succeeded beside a Succeeded one, or the one whose partner is
    /// already on its way out; else the one created last (then the name, for one answer).
    pub fn replaces_now(&self, other: &ClusterServiceVersion) -> bool {
        let names = |a: &ClusterServiceVersion, b: &ClusterServiceVersion| {
            a.spec.replaces.is_some() && a.spec.replaces == b.metadata.name
        };
        if !names(self, other) {
            return false;
        }
        if !names(other, self) {
            return true;
        }
        let phase = |c: &ClusterServiceVersion| c.status.as_ref().and_then(|s| s.phase);
        let leaving = |c| matches!(phase(c), Some(CsvPhase::Replacing | CsvPhase::Deleting));
        let succeeded = |c| phase(c) == Some(CsvPhase::Succeeded);
        if leaving(other) != leaving(self) {
            return leaving(other);
        }
        if succeeded(other) != succeeded(self) {
            return succeeded(other);
        }
        let created = |c: &ClusterServiceVersion| c.metadata.creation_timestamp.clone();
        match (created(self), created(other)) {
            (Some(mine), Some(theirs)) if mine.0 != theirs.0 => mine.0 > theirs.0,
            _ => self.metadata.name > other.metadata.name,
        }
    }

    /// The APIs this CSV provides, as `Kind.version.group` (upstream's `olm.providedAPIs`
    /// form): its owned CRDs and owned API services.
    pub fn provided_api_keys(&self) -> BTreeSet<String> {
        let crds = self
            .spec
            .customresourcedefinitions
            .iter()
            .flat_map(|c| c.owned.iter())
            .filter_map(|crd| {
                let (_, group) = crd.name.split_once('.')?;
                Some(format!("{}.{}.{group}", crd.kind, crd.version))
            });
        let api_services = self
            .spec
            .apiservicedefinitions
            .iter()
            .flat_map(|a| a.owned.iter())
            .map(|a| format!("{}.{}.{}", a.kind, a.version, a.group));
        crds.chain(api_services).collect()
    }

    /// Failed because another OperatorGroup provides its APIs (InterOperatorGroupOwnerConflict):
    /// it provides none of them.
    pub fn lost_its_apis(&self) -> bool {
        self.status.as_ref().and_then(|s| s.reason.as_deref())
            == Some(super::CsvReason::InterOperatorGroupOwnerConflict.as_str())
    }

    /// A copy made for a target namespace (it only mirrors its source; nothing installs it).
    pub fn is_copy(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .is_some_and(|labels| labels.contains_key(COPIED_FROM_LABEL))
    }
}

/// Why a CSV's install modes cannot serve an OperatorGroup's target namespaces; the text is
/// the message upstream puts on an UnsupportedOperatorGroup CSV.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstallModeError {
    #[error("the OperatorGroup selects no target namespaces")]
    NoTargets,
    #[error("target namespaces {0:?} mix all namespaces (\"\") with named ones")]
    MixedTargets(Vec<String>),
    #[error(
        "{mode:?} InstallModeType not supported, cannot configure to watch {}",
        describe_targets(targets)
    )]
    Unsupported {
        mode: InstallModeType,
        targets: Vec<String>,
    },
}

/// The install modes a set of target namespaces needs (upstream `InstallModeSet.Supports`):
/// `[""]` needs AllNamespaces, `[own]` OwnNamespace, one other namespace SingleNamespace,
/// several MultiNamespace (plus OwnNamespace when the operator's own namespace is among them).
/// An error names a target set no install mode can serve.
pub fn install_modes_needed(
    operator_namespace: &str,
    targets: &[String],
) -> Result<Vec<InstallModeType>, InstallModeError> {
    match targets {
        [] => Err(InstallModeError::NoTargets),
        [all] if all.is_empty() => Ok(vec![InstallModeType::AllNamespaces]),
        [one] if one == operator_namespace => Ok(vec![InstallModeType::OwnNamespace]),
        [_] => Ok(vec![InstallModeType::SingleNamespace]),
        many => {
            if many.iter().any(String::is_empty) {
                return Err(InstallModeError::MixedTargets(many.to_vec()));
            }
            let mut modes = vec![InstallModeType::MultiNamespace];
            if many.iter().any(|ns| ns == operator_namespace) {
                modes.push(InstallModeType::OwnNamespace);
            }
            Ok(modes)
        }
    }
}

/// Whether `modes` (a CSV's `spec.installModes`) can serve `targets`; an unlisted mode is
/// unsupported. The error is the message upstream puts on an UnsupportedOperatorGroup CSV.
pub fn check_install_modes(
    modes: &[InstallMode],
    operator_namespace: &str,
    targets: &[String],
) -> Result<(), InstallModeError> {
    let needed = install_modes_needed(operator_namespace, targets)?;
    for mode in needed {
        let supported = modes.iter().any(|m| m.type_ == mode && m.supported);
        if !supported {
            return Err(InstallModeError::Unsupported {
                mode,
                targets: targets.to_vec(),
            });
        }
    }
    Ok(())
}

fn describe_targets(targets: &[String]) -> String {
    if targets.len() == 1 && targets[0].is_empty() {
        "all namespaces".into()
    } else {
        targets.join(",")
    }
}

#[cfg(test)]
mod install_mode_tests {
    use super::*;

    fn modes(supported: &[InstallModeType]) -> Vec<InstallMode> {
        [
            InstallModeType::OwnNamespace,
            InstallModeType::SingleNamespace,
            InstallModeType::MultiNamespace,
            InstallModeType::AllNamespaces,
        ]
        .into_iter()
        .map(|type_| InstallMode {
            type_,
            supported: supported.contains(&type_),
        })
        .collect()
    }

    fn targets(list: &[&str]) -> Vec<String> {
        list.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn each_target_shape_needs_its_mode() {
        use InstallModeType::*;
        type Case<'a> = (&'a [&'a str], Result<Vec<InstallModeType>, ()>);
        let cases: [Case; 6] = [
            (&[""], Ok(vec![AllNamespaces])),
            (&["op"], Ok(vec![OwnNamespace])),
            (&["other"], Ok(vec![SingleNamespace])),
            (&["a", "b"], Ok(vec![MultiNamespace])),
            (&["a", "op"], Ok(vec![MultiNamespace, OwnNamespace])),
            (&["", "a"], Err(())),
        ];
        for (given, want) in cases {
            let got = install_modes_needed("op", &targets(given)).map_err(|_| ());
            assert_eq!(got, want, "{given:?}");
        }
        assert!(install_modes_needed("op", &[]).is_err());
    }

    #[test]
    fn unsupported_or_unlisted_modes_are_refused_with_the_mode_named() {
        use InstallModeType::*;
        let reverse_words = modes(&[OwnNamespace, SingleNamespace]);
        assert!(check_install_modes(&reverse_words, "op", &targets(&["op"])).is_ok());
        assert!(check_install_modes(&reverse_words, "op", &targets(&["x"])).is_ok());
        let all = check_install_modes(&reverse_words, "op", &targets(&[""])).unwrap_err();
        assert_eq!(
            all.to_string(),
            "AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces"
        );
        let multi = check_install_modes(&reverse_words, "op", &targets(&["a", "b"])).unwrap_err();
        assert_eq!(
            multi.to_string(),
            "MultiNamespace InstallModeType not supported, cannot configure to watch a,b"
        );
        assert_eq!(
            install_modes_needed("op", &targets(&["", "a"]))
                .unwrap_err()
                .to_string(),
            r#"target namespaces ["", "a"] mix all namespaces ("") with named ones"#
        );
        // Multi including the own namespace needs both.
        let only_multi = modes(&[MultiNamespace]);
        assert!(check_install_modes(&only_multi, "op", &targets(&["a", "op"])).is_err());
        assert!(check_install_modes(&only_multi, "op", &targets(&["a", "b"])).is_ok());
        assert!(check_install_modes(&[], "op", &targets(&["op"])).is_err());
    }
}
