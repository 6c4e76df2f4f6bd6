//! registry+v1 bundles: read from disk, their CSVs, and rendered into FBC, with parses
//! remembered across bundle directories. Its one error is [`bundle::BundleError`].

pub mod bundle;
pub mod csv;
pub mod memo;
pub mod related;
pub mod render;
