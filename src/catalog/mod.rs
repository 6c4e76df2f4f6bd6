//! Catalogs: the file-based catalog model, loading, validation, rendering of registry+v1
//! bundles into FBC, and templates. Pure data: no Kubernetes client, no async.

pub mod bundle;
pub mod fbc;
mod ignore;
pub mod load;
pub mod render;
pub mod semver_range;
pub mod template;
pub mod validate;

pub use fbc::*;
