//! Image catalogs held in the pull cache: how a snapshot names the image it came from, and
//! reading one bundle (with its manifests) back from the cached content at install time.

use std::path::{Path, PathBuf};

use crate::catalog::model::fbc::Bundle;
use crate::catalog::reading::load::load_path;

const ORIGIN_PREFIX: &str = "image ";

/// A snapshot's origin for an image catalog: `image <reference>@<digest>`.
pub fn origin(reference: &str, digest: &str) -> String {
    format!("{ORIGIN_PREFIX}{reference}@{digest}")
}

/// `(reference, digest)` of an image catalog's origin.
pub fn parse_origin(origin: &str) -> Option<(&str, &str)> {
    origin.strip_prefix(ORIGIN_PREFIX)?.rsplit_once('@')
}

/// The FBC directory of catalog image `reference` pulled at `digest` into `cache`.
pub fn configs_dir(cache: &Path, reference: &str, digest: &str) -> Result<PathBuf, String> {
    let parsed = super::registry::parse_reference(reference).map_err(|e| e.to_string())?;
    let dir = super::cache_entry(
        cache,
        parsed.resolve_registry(),
        parsed.repository(),
        digest,
    )
    .ok_or_else(|| format!("bad digest {digest:?}"))?;
    let config = std::fs::read(dir.join("config.json")).map_err(|e| {
        format!(
            "image {digest} is not in the cache {}: {e}",
            cache.display()
        )
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&config).map_err(|e| format!("image {digest}: config: {e}"))?;
    let path = value["config"]["Labels"][super::LABEL_CATALOG_CONFIGS]
        .as_str()
        .ok_or_else(|| format!("image {digest} is not a catalog image"))?;
    Ok(dir.join("rootfs").join(path.trim_start_matches('/')))
}

/// One bundle of a cached catalog image, manifests included.
pub fn find_bundle(
    cache: &Path,
    (reference, digest): (&str, &str),
    package: &str,
    name: &str,
) -> Result<Bundle, String> {
    let dir = configs_dir(cache, reference, digest)?;
    let content = load_path(&dir).map_err(|e| e.to_string())?;
    content
        .bundles
        .into_iter()
        .find(|b| b.name == name && b.package == package)
        .ok_or_else(|| format!("bundle {name} of package {package} is not in image {digest}"))
}

/// A bundle of the image catalog `source` is served from now (its snapshot's digest),
/// read from the pull cache off the async threads.
pub async fn bundle_from_snapshot(
    snapshots: &crate::snapshots::CatalogSnapshots,
    cache: &Path,
    source: &crate::resolver::input::CatalogRef,
    package: &str,
    name: &str,
) -> Result<Bundle, String> {
    let snapshot = snapshots
        .get(source)
        .ok_or_else(|| format!("image catalog {source} has no content loaded"))?;
    let (reference, digest) = parse_origin(&snapshot.origin)
        .ok_or_else(|| format!("catalog {source} is not served from an image"))?;
    let (cache, reference, digest) = (
        cache.to_path_buf(),
        reference.to_string(),
        digest.to_string(),
    );
    let (package, name) = (package.to_string(), name.to_string());
    tokio::task::spawn_blocking(move || find_bundle(&cache, (&reference, &digest), &package, &name))
        .await
        .map_err(|e| format!("reading the image catalog failed: {e}"))?
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
