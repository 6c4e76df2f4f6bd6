//! `InstallPlan` (operators.coreos.com/v1alpha1): the resolved steps that install or upgrade
//! the operators of one namespace.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::Approval;

/// Which CSVs the plan installs, where they come from, and whether it may run.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    doc = "The resolved set of objects (CSVs, CRDs, RBAC and the rest) that installs or upgrades operators in this namespace. OLM creates InstallPlans for Subscriptions and creates the objects once the plan is approved.",
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
    /// Name of the CatalogSource the plan was resolved from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source: Option<String>,
    /// Namespace of that CatalogSource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_source_namespace: Option<String>,
    /// Names of the CSVs the plan installs.
    pub cluster_service_version_names: Vec<String>,
    /// `Automatic` plans run at once; `Manual` plans wait for `approved`.
    #[schemars(schema_with = "schema::plain_string")]
    pub approval: Approval,
    /// Whether the plan may run. Set it to true to approve a `Manual` plan.
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

/// How far the plan has got: its phase, its steps and the bundles still to unpack.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// `RequiresApproval` (waiting for `spec.approved`), `Installing`, `Complete` or `Failed`.
    #[schemars(schema_with = "schema::plain_string")]
    pub phase: InstallPlanPhase,
    /// `Resolved` (set when the plan is made) and `Installed` (True once every step is done,
    /// False with the reason when the plan failed).
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<InstallPlanCondition>,
    /// The catalogs the plan's bundles come from.
    #[serde(default)]
    pub catalog_sources: Vec<String>,
    /// The steps: one object each to create or update, in the order OLM applies them.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub plan: Vec<Step>,
    /// Bundles whose objects are still to be read from their bundle image; each becomes
    /// steps once unpacked.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub bundle_lookups: Vec<BundleLookup>,
    /// The service account whose permissions bound the steps (the OperatorGroup's
    /// `serviceAccountName`). Upstream records it here; this OLM leaves it unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    /// When the plan started installing; retries of failing steps stop a timeout after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Detail of what the plan is waiting for or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What running the plan changes, computed before it runs (this OLM's addition;
    /// upstream clients ignore it). `olm plan show` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<super::PlanImpact>,
}

/// Condition types: Resolved, Installed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    /// `Installed` or `Resolved`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// When the condition was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When the condition's status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason of the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One object to create, on behalf of the CSV named in `resolving`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Name of the CSV this step installs a part of.
    pub resolving: String,
    /// The object to create or update.
    pub resource: StepResource,
    /// Accepted for compatibility; this OLM treats every step as required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// `Unknown` (not done yet), `Created`, `Present` (existed already), `WaitingForApi`
    /// (a CRD not yet Established), or `NotPresent`, `NotCreated`, `UnsupportedResource`.
    #[schemars(schema_with = "schema::plain_string")]
    pub status: StepStatus,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    /// Name of the CatalogSource the object comes from.
    pub source_name: String,
    /// Namespace of that CatalogSource.
    pub source_namespace: String,
    /// API group of the object; empty for the core group.
    pub group: String,
    /// API version of the object.
    pub version: String,
    /// Kind of the object.
    pub kind: String,
    /// Name of the object.
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
    /// The bundle image to unpack.
    pub path: String,
    /// Name of the bundle's CSV.
    pub identifier: String,
    /// Name of the CSV this bundle replaces, if any.
    pub replaces: String,
    /// The CatalogSource the bundle comes from.
    pub catalog_source_ref: ObjectReference,
    /// Why the unpack has not finished: the image and the cause of a failing pull.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<InstallPlanCondition>,
    /// The bundle's catalog properties, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<String>,
}

/// One bundle the resolver chose for a plan: what to install, from where, and why. Lives in
/// memory between resolution and the plan's status.
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
