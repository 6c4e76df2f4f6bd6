//! `InstallPlan` (operators.coreos.com/v1alpha1): the resolved steps that install or upgrade
//! the operators of one namespace.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::Approval;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    plural = "installplans",
    namespaced,
    status = "InstallPlanStatus",
    shortname = "ip",
    category = "olm",
    printcolumn = r#"{"name":"CSV","type":"string","jsonPath":".spec.clusterServiceVersionNames[0]","description":"The first CSV in the list of clusterServiceVersionNames"}"#,
    printcolumn = r#"{"name":"Approval","type":"string","jsonPath":".spec.approval","description":"The approval mode"}"#,
    printcolumn = r#"{"name":"Approved","type":"boolean","jsonPath":".spec.approved"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_namespace: Option<String>,
    pub cluster_service_version_names: Vec<String>,
    #[schemars(schema_with = "schema::plain_string")]
    pub approval: Approval,
    pub approved: bool,
    /// Per-namespace counter: the newest plan has the highest generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i32>,
}

/// `status.phase`. Upstream never sets Planning: a new plan starts in Installing or
/// RequiresApproval.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InstallPlanPhase {
    #[default]
    #[serde(rename = "")]
    None,
    Planning,
    RequiresApproval,
    Installing,
    Complete,
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: InstallPlanPhase,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<InstallPlanCondition>,
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub plan: Vec<Step>,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub bundle_lookups: Vec<BundleLookup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Condition types: Resolved, Installed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One object to create, on behalf of the CSV named in `resolving`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub resolving: String,
    pub resource: StepResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    #[schemars(schema_with = "schema::plain_string")]
    pub status: StepStatus,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    pub source_name: String,
    pub source_namespace: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    /// The object as inline JSON text, or a reference to an unpacked bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// Step statuses, with upstream's spellings (`WaitingForApi` included).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StepStatus {
    #[default]
    Unknown,
    NotPresent,
    Present,
    Created,
    NotCreated,
    WaitingForApi,
    UnsupportedResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// The bundle image.
    pub path: String,
    pub identifier: String,
    pub replaces: String,
    pub catalog_source_ref: ObjectReference,
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<InstallPlanCondition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// Annotation on which versions before the typed plan listed a plan's bundles (JSON
/// [`PlannedBundle`]s). Never written any more: a plan that still carries it and has no
/// status is read once and given upstream's status shape (steps and bundle lookups).
pub const LEGACY_ANNOTATION_PLANNED_BUNDLES: &str = "olm-rs.dev/bundles";

/// One bundle the resolver chose for a plan: what to install, from where, and why. Lives in
/// memory between resolution and the plan's status (and in the legacy annotation).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PlannedBundle {
    /// The CSV name.
    pub name: String,
    pub package: String,
    pub version: String,
    pub channel: String,
    pub catalog: String,
    pub catalog_namespace: String,
    /// The installed CSV it replaces (written into the new CSV's `spec.replaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// The Subscription that asked for it; None for a dependency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    /// For a dependency: the Subscription the plan creates for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_subscription: Option<String>,
    /// For a dependency: the bundles that need it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependency_of: Vec<String>,
}

impl InstallPlan {
    /// The bundles of the legacy [`LEGACY_ANNOTATION_PLANNED_BUNDLES`], when the plan has it;
    /// an error names what is wrong.
    pub fn legacy_planned_bundles(&self) -> Option<Result<Vec<PlannedBundle>, String>> {
        let text = self
            .metadata
            .annotations
            .as_ref()?
            .get(LEGACY_ANNOTATION_PLANNED_BUNDLES)?;
        Some(serde_json::from_str(text).map_err(|e| {
            format!("annotation {LEGACY_ANNOTATION_PLANNED_BUNDLES} does not parse: {e}")
        }))
    }

    pub fn phase(&self) -> InstallPlanPhase {
        self.status.as_ref().map(|s| s.phase).unwrap_or_default()
    }

    /// No status at all yet: a plan its creator has not filled in (upstream leaves such a
    /// plan alone).
    pub fn status_is_empty(&self) -> bool {
        self.status.as_ref().is_none_or(|s| {
            s.phase == InstallPlanPhase::None && s.plan.is_empty() && s.bundle_lookups.is_empty()
        })
    }
}
