//! `InstallPlan.status.impact`: what running the plan would change, computed before it runs
//! (before approval for a plan that waits for it). Upstream has no such field; its clients
//! decode InstallPlans without it, and this OLM never reads it back to decide a step.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema;

/// The preview of one plan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanImpact {
    /// When it was computed, against the cluster as it was then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_at: Option<Time>,
    /// One line for people: counts of each kind of change, escalations and blockers first.
    pub summary: String,
    /// Permissions added and removed, per ServiceAccount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rbac: Vec<AccountImpact>,
    /// CustomResourceDefinitions whose versions or schemas change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<CrdImpact>,
    /// Container images that change, per Deployment and container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageChange>,
    /// Admission and conversion webhooks added, removed or changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<NamedChange>,
    /// APIServices added, removed or changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_services: Vec<NamedChange>,
    /// Objects the plan and the CSVs it installs create, update and delete.
    #[serde(default)]
    pub objects: ObjectChanges,
    /// Why the plan must not run as it stands (a CRD stored version left unserved, objects
    /// the new schema refuses). Empty for a plan that may run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<String>,
}

impl PlanImpact {
    /// Whether any account gains a rule its RBAC did not already allow, beyond the
    /// renewal of its OperatorCondition grant.
    pub fn escalates(&self) -> bool {
        self.escalations() > 0
    }

    /// How many added rules are escalations, renewals of the OperatorCondition grant
    /// left out.
    pub fn escalations(&self) -> usize {
        self.rbac
            .iter()
            .flat_map(|a| &a.added)
            .filter(|r| r.escalation && !r.renewed)
            .count()
    }
}

/// The rule changes of one ServiceAccount.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccountImpact {
    /// `namespace/name` of the ServiceAccount.
    pub service_account: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<RuleChange>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<RuleChange>,
}

/// One policy rule gained or lost.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleChange {
    /// `Namespace` (a Role, in each target namespace), `Cluster` (a ClusterRole), or
    /// `Namespace kube-system` (the authentication reader of a webhook or API service).
    pub scope: String,
    /// The rule as the CSV declares it.
    #[schemars(schema_with = "schema::preserved_object")]
    pub rule: serde_json::Value,
    /// True when the account's RBAC did not allow this rule before the plan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalation: bool,
    /// True for OLM's grant on the new CSV's own OperatorCondition where the account had
    /// the same on the replaced CSV's: a new rule (the name changes with the CSV), not a
    /// new power, so it holds nothing under `holdNewPermissions`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub renewed: bool,
}

/// How one CRD changes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdImpact {
    pub name: String,
    /// `Created` or `Updated`.
    pub change: String,
    /// Versions the new CRD serves that the existing one did not (all it serves when
    /// created).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions_added: Vec<String>,
    /// Versions still defined but no longer served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions_unserved: Vec<String>,
    /// Versions no longer defined at all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions_removed: Vec<String>,
    /// Versions in `status.storedVersions` that the new CRD does not serve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions_unserved: Vec<String>,
    /// Whether any served version's schema changes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub schema_changed: bool,
    /// Existing objects the new schema refuses, `namespace/name: version: why`, at most
    /// ten (checked in each version served before and after whose schema changes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_failing: Vec<String>,
    /// Existing objects holding fields the new schema does not know, which the API server
    /// would drop (on reads too), `namespace/name: version: .path, …`, at most ten: what a
    /// rollback to an older schema would lose. Status fields are not counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_pruned: Vec<String>,
}

/// One container's image before and after.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageChange {
    pub deployment: String,
    pub container: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A webhook or APIService added, removed or changed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamedChange {
    /// `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook`, `ConversionWebhook` or
    /// `APIService`.
    pub kind: String,
    pub name: String,
    /// `Added`, `Removed` or `Changed`.
    pub change: String,
}

/// Objects created, updated and deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChanges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created: Vec<ObjectRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updated: Vec<ObjectRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<ObjectRef>,
}

/// An object by kind, namespace and name.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}
