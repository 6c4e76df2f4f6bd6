//! `At` (cnat.d2iq.com/v1alpha1), as the bundle's CRD defines it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "cnat.d2iq.com",
    version = "v1alpha1",
    kind = "At",
    namespaced,
    status = "AtStatus",
    schema = "disabled"
)]
pub struct AtSpec {
    /// UTC time to run the command at, `2006-01-02T15:04:05Z`.
    #[serde(default)]
    pub schedule: String,
    /// The command, split on spaces.
    #[serde(default)]
    pub command: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct AtStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub const PENDING: &str = "PENDING";
pub const RUNNING: &str = "RUNNING";
pub const DONE: &str = "DONE";

/// Condition: whether `spec.schedule` parses.
pub const SCHEDULE_VALID: &str = "ScheduleValid";
