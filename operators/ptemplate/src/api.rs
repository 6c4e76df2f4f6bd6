//! `Ptemplate` (pt.example.com/v1alpha1), as the bundle's CRD defines it, and the KMM
//! `Module` kind it creates.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::api::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "pt.example.com",
    version = "v1alpha1",
    kind = "Ptemplate",
    namespaced,
    status = "PtemplateStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct PtemplateSpec {
    /// Devices the kernel module creates (module parameter `max_dev`); 5 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxdev: Option<i64>,
    /// Default message of the devices (module parameter `default_msg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaultmsg: Option<String>,
    /// Image of the consumer pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumerimage: Option<String>,
    /// Devices each consumer pod asks for (`example.com/ptemplate`); 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_devices: Option<i64>,
    /// Pull secret of the module, device plugin and consumer images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_repo_secret: Option<SecretRef>,
    /// Nodes to load the module on and run consumers on.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SecretRef {
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct PtemplateStatus {
    #[serde(default)]
    pub consumers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub const READY: &str = "Ready";

/// kmm.sigs.x-k8s.io/v1beta1 Module: not a type of ours, so a dynamic object.
pub fn module_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kmm.sigs.x-k8s.io", "v1beta1", "Module"),
        "modules",
    )
}
