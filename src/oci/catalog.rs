//! Image catalogs held in the pull cache: how a snapshot names the image it came from, and
//! reading one bundle (with its manifests) back from the cached content at install time.

use std::path::{Path, PathBuf};

use super::registry::RegistryError;
use crate::catalog::model::fbc::Bundle;
use crate::catalog::reading::load::{LoadError, load_path};
use crate::resolver::input::CatalogRef;

const ORIGIN_PREFIX: &str = "image ";

/// Why a bundle could not be read back from a catalog image in the pull cache.
#[derive(Debug, thiserror::Error)]
pub enum ImageCatalogError {
    #[error(transparent)]
    Reference(RegistryError),
    #[error("bad digest {0:?}")]
    BadDigest(String),
    #[error("image {digest} is not in the cache {}: {source}", cache.display())]
    NotCached {
        digest: String,
        cache: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("image {digest}: config: {source}")]
    Config {
        digest: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("image {0} is not a catalog image")]
    NotACatalog(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("bundle {name} of package {package} is not in image {digest}")]
    NoBundle {
        name: String,
        package: String,
        digest: String,
    },
    #[error("image catalog {0} has no content loaded")]
    NotLoaded(CatalogRef),
    #[error("catalog {0} is not served from an image")]
    NotAnImage(CatalogRef),
    #[error("reading the image catalog failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// A snapshot's origin for an image catalog: `image <reference>@<digest>`.
pub fn origin(reference: &str, digest: &str) -> String {
    format!("{ORIGIN_PREFIX}{reference}@{digest}")
}

/// `(reference, digest)` of an image catalog's origin.
pub fn parse_origin(origin: &str) -> Option<(&str, &str)> {
    origin.strip_prefix(ORIGIN_PREFIX)?.rsplit_once('@')
}

/// The FBC directory of catalog image `reference` pulled at `digest` into `cache`.
pub fn configs_dir(
    cache: &Path,
    reference: &str,
    digest: &str,
) -> Result<PathBuf, ImageCatalogError> {
    let parsed =
        super::registry::parse_reference(reference).map_err(ImageCatalogError::Reference)?;
    let dir = super::cache_entry(
        cache,
        parsed.resolve_registry(),
        parsed.repository(),
        digest,
    )
    .ok_or_else(|| ImageCatalogError::BadDigest(digest.to_string()))?;
    let config =
        std::fs::read(dir.join("config.json")).map_err(|source| ImageCatalogError::NotCached {
            digest: digest.to_string(),
            cache: cache.to_path_buf(),
            source,
        })?;
    let value: serde_json::Value =
        serde_json::from_slice(&config).map_err(|source| ImageCatalogError::Config {
            digest: digest.to_string(),
            source,
        })?;
    let path = value["config"]["Labels"][super::LABEL_CATALOG_CONFIGS]
        .as_str()
        .ok_or_else(|| ImageCatalogError::NotACatalog(digest.to_string()))?;
    Ok(dir.join("rootfs").join(path.trim_start_matches('/')))
}

/// One bundle of a cached catalog image, manifests included.
pub fn find_bundle(
    cache: &Path,
    (reference, digest): (&str, &str),
    package: &str,
    name: &str,
) -> Result<Bundle, ImageCatalogError> {
    let dir = configs_dir(cache, reference, digest)?;
    let content = load_path(&dir)?;
    content
        .bundles
        .into_iter()
        .find(|b| b.name == name && b.package == package)
        .ok_or_else(|| ImageCatalogError::NoBundle {
            name: name.to_string(),
            package: package.to_string(),
            digest: digest.to_string(),
        })
}

/// A bundle of the image catalog `source` is served from now (its snapshot's digest),
/// read from the pull cache off the async threads.
pub async fn bundle_from_snapshot(
    snapshots: &crate::snapshots::CatalogSnapshots,
    cache: &Path,
    source: &CatalogRef,
    package: &str,
    name: &str,
) -> Result<Bundle, ImageCatalogError> {
    let snapshot = snapshots
        .get(source)
        .ok_or_else(|| ImageCatalogError::NotLoaded(source.clone()))?;
    let (reference, digest) = parse_origin(&snapshot.origin)
        .ok_or_else(|| ImageCatalogError::NotAnImage(source.clone()))?;
    let (cache, reference, digest) = (
        cache.to_path_buf(),
        reference.to_string(),
        digest.to_string(),
    );
    let (package, name) = (package.to_string(), name.to_string());
    tokio::task::spawn_blocking(move || find_bundle(&cache, (&reference, &digest), &package, &name))
        .await
        .map_err(ImageCatalogError::Task)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_name_the_reference_and_digest() {
        let o = origin("127.0.0.1:5000/c:latest", "sha256:ab");
        assert_eq!(
            parse_origin(&o),
            Some(("127.0.0.1:5000/c:latest", "sha256:ab"))
        );
        assert_eq!(parse_origin("configmap x@1"), None);
    }
}
