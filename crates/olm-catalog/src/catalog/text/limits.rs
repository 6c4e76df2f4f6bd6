//! The largest catalog input accepted: past these, loading fails with an error naming the
//! limit and the file, instead of taking memory or time without bound. README "Limits"
//! lists them with the other entry points' limits.

/// One JSON document of a catalog file, and a whole YAML catalog file or bundle manifest
/// (YAML is read whole). The largest real bundle blobs (many CRDs inlined as
/// `olm.bundle.object`) are a few MiB.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// Nesting of JSON and YAML values: the recursion limit of serde_json and serde_yaml, which
/// refuse deeper documents; named here so that the error says so.
pub const MAX_NESTING: usize = 128;

/// `olm.bundle` blobs in one catalog (OperatorHub's largest catalogs hold ~10,000).
pub const MAX_BUNDLES: usize = 100_000;

/// Blobs of any schema in one catalog.
pub const MAX_BLOBS: usize = 500_000;

/// Properties of one package, channel or bundle blob.
pub const MAX_PROPERTIES: usize = 10_000;

/// Files below a bundle's `manifests/` and `metadata/` directories.
pub const MAX_BUNDLE_FILES: usize = 1_000;

/// Human size for messages: `64 MiB`.
pub fn human_bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests;
