//! `OperatorGroup` (operators.coreos.com v1, also served as v1alpha2): which namespaces the
//! operators installed in a namespace watch, and with which service account.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Upstream's annotation on a group: the APIs its operators provide, `Kind.version.group`
/// sorted and comma-joined.
pub const PROVIDED_APIS_ANNOTATION: &str = "olm.providedAPIs";

pub mod v1 {
    use super::*;
    use kube::CustomResource;

    /// Which namespaces the group's operators watch, and how they are installed.
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "OperatorGroup",
        doc = "Groups the operators installed in its namespace and decides which namespaces they watch (their target namespaces) and, optionally, which service account installs them. A namespace with operators needs exactly one OperatorGroup.",
        plural = "operatorgroups",
        namespaced,
        status = "OperatorGroupStatus",
        shortname = "og",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Selects the target namespaces by label; ignored when `targetNamespaces` is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// The target namespaces, by name. With neither these nor a selector the group targets
        /// all namespaces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::api::schema::string_set")]
        pub target_namespaces: Option<Vec<String>>,
        /// Service account in this namespace whose permissions bound what OLM installs for the
        /// group's operators; unset means OLM installs with its own permissions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        /// When true, the `olm.providedAPIs` annotation is kept as written rather than
        /// maintained by OLM, and a member CSV providing an API it does not list fails
        /// (CannotModifyStaticOperatorGroupProvidedAPIs), as upstream.
        #[serde(
            default,
            rename = "staticProvidedAPIs",
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
        /// `Default`, or `TechPreviewUnsafeFailForward`, with which upstream lets a newer version
        /// replace a failed install or upgrade. Accepted; this OLM always behaves as `Default`.
        #[serde(default)]
        pub upgrade_strategy: UpgradeStrategy,
    }

    #[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
    pub enum UpgradeStrategy {
        #[default]
        Default,
        TechPreviewUnsafeFailForward,
    }

    /// The target namespaces OLM resolved for the group, and its service account.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        /// The target namespaces in effect; `[""]` means all namespaces.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::schema::string_set")]
        pub namespaces: Vec<String>,
        /// The service account named by `spec.serviceAccountName`, once it exists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        /// When `namespaces` last changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,
        /// Problems with the group: `MultipleOperatorGroup` (more than one group in the namespace)
        /// and `OperatorGroupServiceAccount` (the service account is missing).
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::schema::conditions_by_type::<Condition>")]
        pub conditions: Vec<Condition>,
    }
}

/// The older served version; same shape without `upgradeStrategy`.
pub mod v1alpha2 {
    use super::*;
    use kube::CustomResource;

    /// Which namespaces the group's operators watch, and how they are installed.
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v1alpha2",
        kind = "OperatorGroup",
        doc = "Groups the operators installed in its namespace and decides which namespaces they watch (their target namespaces) and, optionally, which service account installs them. A namespace with operators needs exactly one OperatorGroup.",
        plural = "operatorgroups",
        namespaced,
        status = "OperatorGroupStatus",
        shortname = "og",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Selects the target namespaces by label; ignored when `targetNamespaces` is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// The target namespaces, by name. With neither these nor a selector the group targets
        /// all namespaces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_namespaces: Option<Vec<String>>,
        /// Service account in this namespace whose permissions bound what OLM installs for the
        /// group's operators; unset means OLM installs with its own permissions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        /// When true, the `olm.providedAPIs` annotation is kept as written rather than
        /// maintained by OLM, and a member CSV providing an API it does not list fails
        /// (CannotModifyStaticOperatorGroupProvidedAPIs), as upstream.
        #[serde(
            default,
            rename = "staticProvidedAPIs",
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
    }

    /// The target namespaces OLM resolved for the group, and its service account.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        /// The target namespaces in effect; `[""]` means all namespaces.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub namespaces: Vec<String>,
        /// The service account named by `spec.serviceAccountName`, once it exists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        /// When `namespaces` last changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,
    }
}
