//! `Subscription` (operators.coreos.com/v1alpha1): a wish to have a package installed from a
//! catalog channel and kept up to date.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;
use super::shared::Approval;

/// The package to install, the catalog and channel it comes from, and how updates are
/// approved.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    doc = "A request to install one package from a catalog channel into this namespace and to keep it updated as the channel moves on. OLM resolves it into InstallPlans and reports the CSV it installed.",
    plural = "subscriptions",
    namespaced,
    status = "SubscriptionStatus",
    shortname = "sub",
    shortname = "subs",
    category = "olm",
    printcolumn = r#"{"name":"Package","type":"string","jsonPath":".spec.name","description":"The package subscribed to"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.source","description":"The catalog source for the specified package"}"#,
    printcolumn = r#"{"name":"Channel","type":"string","jsonPath":".spec.channel","description":"The channel of updates to subscribe to"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// Name of the CatalogSource that provides the package.
    pub source: String,
    /// Namespace of that CatalogSource: this namespace, or OLM's global catalog namespace.
    pub source_namespace: String,
    /// Name of the package to install.
    pub name: String,
    /// Channel of the package to follow; the package's default channel when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The CSV to install first instead of the channel head; updates continue along the
    /// channel from there.
    #[serde(
        default,
        rename = "startingCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub starting_csv: Option<String>,
    /// `Automatic` (the default) lets OLM run each InstallPlan at once; `Manual` makes it
    /// wait until the plan's `spec.approved` is set to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub install_plan_approval: Option<Approval>,
    /// Overrides OLM applies to the operator's Deployments: scheduling, resources,
    /// environment, volumes and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<SubscriptionConfig>,
    /// Which upgrades OLM makes on its own, which it holds for approval, and a rollback
    /// (this OLM's addition; upstream OLM ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_policy: Option<UpgradePolicy>,
}

/// Declared control over upgrades. Every field is optional; without any, approval is
/// `installPlanApproval` alone, as upstream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePolicy {
    /// Approval of the plan that first installs the package; `installPlanApproval` when
    /// unset. `Automatic` with a `Manual` Subscription installs at once and holds every
    /// later upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub first_install: Option<Approval>,
    /// Versions OLM may move to (a range as in `olm.skipRange`, e.g. `>=1.2.0 <2.0.0`).
    /// Upgrades within it are approved at once; a newer version outside it is reported,
    /// not planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_range: Option<String>,
    /// The newest version OLM may move to: it goes there on its own, by the shortest path
    /// the channel allows, and no further. Raise it to upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_version: Option<String>,
    /// Versions refused: OLM moves to none of them, nor to any older one, and waits for a
    /// newer version or a changed policy. Nothing installed is removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected_versions: Vec<String>,
    /// When upgrades may be approved automatically (UTC). Outside every window an upgrade
    /// waits in RequiresApproval; approving the InstallPlan by hand overrides the windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// Hold any upgrade whose preview adds a rule a ServiceAccount did not have, even
    /// when the upgrade is otherwise approved automatically.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold_new_permissions: bool,
    /// Go back to this older version (the one the installed version replaced, for
    /// `olm rollback`) and stay there until the field is removed. Refused, with the
    /// reason, when the older bundle cannot serve or read what exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<String>,
}

/// A recurring span of time, in UTC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// Days the window opens on: `Monday` … `Sunday` (or `Mon` … `Sun`); every day when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<String>,
    /// When it opens, `HH:MM` in UTC.
    pub start: String,
    /// How long it stays open, e.g. `4h` or `90m`, at most a week.
    pub duration: String,
}

/// Overrides applied to the operator's Deployments. The embedded core types keep unknown
/// fields in the schema, as upstream's validation of them is the API server's job on the
/// Deployment itself.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Accepted for compatibility; upstream declares it but never uses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Replaces the node selector of the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::string_map")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Added to the tolerations of the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub tolerations: Option<Vec<serde_json::Value>>,
    /// Replaces the resource requests and limits of every container of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object")]
    pub resources: Option<serde_json::Value>,
    /// Added to the `envFrom` of every container of the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub env_from: Option<Vec<serde_json::Value>>,
    /// Set on every container of the operator, replacing variables of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub env: Option<Vec<serde_json::Value>>,
    /// Added to the operator's pods, replacing volumes of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub volumes: Option<Vec<serde_json::Value>>,
    /// Added to every container of the operator, replacing mounts of the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object_list")]
    pub volume_mounts: Option<Vec<serde_json::Value>>,
    /// Replaces the affinity of the operator's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::preserved_object")]
    pub affinity: Option<serde_json::Value>,
    /// Added to the operator's Deployments and their pod templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::string_map")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `status.state`. `UpgradeAvailable` exists upstream but current code never sets it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SubscriptionState {
    #[default]
    #[serde(rename = "")]
    None,
    UpgradeAvailable,
    UpgradePending,
    AtLatestKnown,
    UpgradeFailed,
}

/// Where the Subscription stands: what it resolved, what is installed, and why it is stuck
/// when it is.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The newest CSV resolution chose for this Subscription, whether installed yet or not.
    #[serde(
        default,
        rename = "currentCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub current_csv: Option<String>,
    /// The CSV of this Subscription that exists in the namespace; it lags `currentCSV`
    /// while an upgrade is under way.
    #[serde(
        default,
        rename = "installedCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub installed_csv: Option<String>,
    /// The CSV `installedCSV` replaced here: where `olm rollback` goes back to (this OLM's
    /// addition).
    #[serde(
        default,
        rename = "replacedCSV",
        skip_serializing_if = "Option::is_none"
    )]
    pub replaced_csv: Option<String>,
    /// Generation of the InstallPlan in `installPlanRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_generation: Option<i32>,
    /// The InstallPlan that installs `currentCSV`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_ref: Option<ObjectReference>,
    /// The same InstallPlan in the older reference format, kept for compatibility.
    #[serde(
        default,
        rename = "installplan",
        skip_serializing_if = "Option::is_none"
    )]
    pub installplan: Option<InstallPlanReference>,
    /// `UpgradePending` while the InstallPlan for `currentCSV` waits for approval or runs;
    /// `AtLatestKnown` once `currentCSV` is installed. Empty before the first resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::plain_string")]
    pub state: Option<SubscriptionState>,
    /// Kept for compatibility and left unset: `conditions` carry the reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Health of each catalog the resolution draws on, as last seen.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub catalog_health: Vec<SubscriptionCatalogHealth>,
    /// How the catalogs, the resolution and the InstallPlan stand: CatalogSourcesUnhealthy,
    /// ResolutionFailed, InstallPlanPending, InstallPlanFailed and InstallPlanMissing.
    #[serde(
        default,
        deserialize_with = "crate::api::shared::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "crate::api::schema::conditions_by_type::<SubscriptionCondition>")]
    pub conditions: Vec<SubscriptionCondition>,
    /// When the status last changed.
    // Required upstream; optional here because Go writes a zero time as null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uuid: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    /// The CatalogSource.
    pub catalog_source_ref: ObjectReference,
    /// Whether the catalog's connection was READY.
    pub healthy: bool,
    /// When this entry last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

/// Condition types include CatalogSourcesUnhealthy, InstallPlanMissing, InstallPlanPending,
/// InstallPlanFailed, ResolutionFailed, BundleUnpacking, BundleUnpackFailed and the
/// *Deprecated family.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}
