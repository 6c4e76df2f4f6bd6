//! `ReverseWordsApp` (apps.linuxera.org/v1alpha1), as the bundle's CRD defines it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "apps.linuxera.org",
    version = "v1alpha1",
    kind = "ReverseWordsApp",
    namespaced,
    status = "ReverseWordsAppStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ReverseWordsAppSpec {
    /// Pods of the application; 0 means 1.
    #[serde(default)]
    pub replicas: i32,
    /// Tag of the application image; the operator's own application version when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReverseWordsAppStatus {
    #[serde(default)]
    pub app_pods: Vec<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// Condition types of the seed.
pub const READY: &str = "Ready";
pub const DEPLOYMENT_NOT_READY: &str = "ReverseWordsDeploymentNotReady";
/// Finalizer of the seed (kept so objects made by the Go operator are handled alike).
pub const FINALIZER: &str = "finalizer.reversewordsapp.apps.linuxera.org";
