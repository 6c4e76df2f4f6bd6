//! `OperatorGroup` (operators.coreos.com v1, also served as v1alpha2): which namespaces the
//! operators installed in a namespace watch, and with which service account.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod v1 {
    use super::*;
    use kube::CustomResource;

    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v1",
        kind = "OperatorGroup",
        plural = "operatorgroups",
        namespaced,
        status = "OperatorGroupStatus",
        shortname = "og",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        /// Selects target namespaces; ignored when `targetNamespaces` is set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// Explicit target namespaces. No targets and no selector means all namespaces.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::api::schema::string_set")]
        pub target_namespaces: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        #[serde(
            default,
            rename = "staticProvidedAPIs",
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
        /// `Default`, or `TechPreviewUnsafeFailForward` to let a failed upgrade be replaced.
        #[serde(default)]
        pub upgrade_strategy: UpgradeStrategy,
    }

    #[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
    pub enum UpgradeStrategy {
        #[default]
        Default,
        TechPreviewUnsafeFailForward,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        /// The resolved target namespaces; `[""]` means all namespaces.
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::schema::string_set")]
        pub namespaces: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,
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

    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "operators.coreos.com",
        version = "v1alpha2",
        kind = "OperatorGroup",
        plural = "operatorgroups",
        namespaced,
        status = "OperatorGroupStatus",
        shortname = "og",
        category = "olm"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub target_namespaces: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_name: Option<String>,
        #[serde(
            default,
            rename = "staticProvidedAPIs",
            skip_serializing_if = "Option::is_none"
        )]
        pub static_provided_apis: Option<bool>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct OperatorGroupStatus {
        #[serde(
            default,
            deserialize_with = "crate::api::shared::null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub namespaces: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub service_account_ref: Option<ObjectReference>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_updated: Option<Time>,
    }
}
