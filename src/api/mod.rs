//! The `operators.coreos.com` API: Rust types for the CRDs OLM reconciles, field-compatible
//! with upstream OLM v0, and the CRD manifests generated from them.

mod catalogsource;
mod crdgen;
mod csv;
pub use olm_catalog::duration;

/// Whether `object` reads as our typed ClusterServiceVersion: the schema check
/// `catalog::bundles::bundle::validate_bundle` is given.
pub fn check_csv_schema(object: &serde_json::Value) -> Result<(), serde_json::Error> {
    use serde::Deserialize;
    ClusterServiceVersion::deserialize(object).map(drop)
}
mod condition_types;
mod impact;
mod installplan;
mod olmconfig;
mod operator;
pub mod operatorcondition;
pub mod operatorgroup;
mod reasons;
pub(crate) mod schema;
pub(crate) mod shared;
mod subscription;

pub use catalogsource::*;
pub use condition_types::*;
pub use crdgen::{CrdManifest, all_crds, render_all_yaml, render_yaml};
pub use csv::*;
pub use impact::*;
pub use installplan::*;
pub use olmconfig::{Features, OLM_CONFIG_NAME, OlmConfig, OlmConfigSpec, OlmConfigStatus};
pub use operator::*;
pub use operatorcondition::{
    NotUpgradeable, OperatorCondition, OperatorConditionEntry, upgradeable,
};
pub use operatorgroup::PROVIDED_APIS_ANNOTATION;
pub use operatorgroup::v1::{
    OperatorGroup, OperatorGroupSpec, OperatorGroupStatus, UpgradeStrategy,
};
pub use reasons::*;
pub use shared::*;
pub use subscription::*;

pub const GROUP: &str = "operators.coreos.com";
