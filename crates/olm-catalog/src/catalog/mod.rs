//! Catalogs: the file-based catalog model, loading, validation, rendering of registry+v1
//! bundles into FBC, templates, upstream's ConfigMap catalog format, and content digests.
//! Pure data: no Kubernetes client, no async.
//!
//! Rooms: [`text`] decodes JSON and YAML, [`model`] is the FBC model, [`reading`] reads
//! catalogs from disk, [`bundles`] reads and renders registry+v1 bundles, [`checks`]
//! validates a catalog, [`configmap`] and [`template`] turn other formats into FBC.

pub mod bundles;
pub mod checks;
pub mod configmap;
pub mod model;
pub mod reading;
pub mod template;
pub mod text;

pub use model::fbc::*;
pub use reading::digest::content_digest;
