//! Container images for bundles and catalogs, with no container engine: reproducible image
//! building into an OCI image layout ([`build`] from an [`input`], [`layout`]), registry
//! push and pull with `oci-client` ([`registry`], credentials in [`auth`]), and unpacking a
//! pulled image's layers into a directory ([`unpack`]).

pub mod auth;
pub mod binary;
pub mod build;
pub mod bundle;
pub mod catalog;
pub mod input;
pub mod layout;
pub mod mirrors;
pub mod proxy;
pub mod registry;
pub mod unpack;

/// The image config label that tells where a catalog image keeps its FBC.
pub const LABEL_CATALOG_CONFIGS: &str = "operators.operatorframework.io.index.configs.v1";
/// The directory our catalog images keep their FBC in.
pub const CATALOG_CONFIGS_DIR: &str = "/configs";
/// The bundle label readers use to tell a bundle image from a catalog image.
pub const LABEL_BUNDLE_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";

pub const MEDIA_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// `sha256:<hex>` of some bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex(&sha2::Sha256::digest(bytes)))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Where the pull cache keeps image `digest` of `registry`/`repository`: keyed by both, so
/// that a hit needs this repository to have answered for the digest (each pull first asks it
/// for the digest with the caller's credentials). Keyed by digest alone, a registry that
/// named another tenant's digest would be handed that tenant's cached image.
pub fn cache_entry(
    cache: &std::path::Path,
    registry: &str,
    repository: &str,
    digest: &str,
) -> Option<std::path::PathBuf> {
    let hex = digest_hex(digest)?;
    let repository = sha256_digest(format!("{registry}/{repository}").as_bytes());
    let repository = digest_hex(&repository)?;
    Some(cache.join(&repository[..16]).join(hex))
}

/// The hex part of a `sha256:` digest, refusing anything that could escape a directory.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    #[test]
    fn the_pull_cache_is_keyed_by_repository_and_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cache = std::path::Path::new("/cache");
        let mine = cache_entry(cache, "quay.io", "me/catalog", &digest).unwrap();
        assert_eq!(
            mine,
            cache_entry(cache, "quay.io", "me/catalog", &digest).unwrap()
        );
        assert!(mine.ends_with("a".repeat(64)));
        // The same digest named by another repository or registry is another entry.
        assert_ne!(
            mine,
            cache_entry(cache, "quay.io", "evil/catalog", &digest).unwrap()
        );
        assert_ne!(
            mine,
            cache_entry(cache, "evil.example", "me/catalog", &digest).unwrap()
        );
        assert!(cache_entry(cache, "quay.io", "me/catalog", "sha256:../x").is_none());
    }
}
