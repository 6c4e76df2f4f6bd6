//! Container images for bundles and catalogs, with no container engine: reproducible image
//! building into an OCI image layout ([`build`], [`layout`]), registry push and pull with
//! `oci-client` ([`registry`], credentials in [`auth`]), and unpacking a pulled image's
//! layers into a directory ([`unpack`]).

pub mod auth;
pub mod binary;
pub mod build;
pub mod bundle;
pub mod catalog;
pub mod layout;
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

/// The hex part of a `sha256:` digest, refusing anything that could escape a directory.
pub fn digest_hex(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}
