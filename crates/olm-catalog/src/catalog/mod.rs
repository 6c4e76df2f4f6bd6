//! Catalogs: the file-based catalog model, loading, validation, rendering of registry+v1
//! bundles into FBC, templates, upstream's ConfigMap catalog format, and content digests.
//! Pure data: no Kubernetes client, no async.

pub mod bundle;
pub mod compact_json;
pub mod configmap;
pub mod csv;
pub mod digest;
mod fast_yaml;
pub mod fbc;
pub mod files;
pub mod go_json;
mod ignore;
pub mod limits;
pub mod load;
pub mod memo;
pub mod render;
pub mod semver_range;
pub mod stream;
pub mod template;
pub mod upgrade_edges;
pub mod validate;
pub mod yaml_nesting;

pub use digest::content_digest;
pub use fbc::*;
