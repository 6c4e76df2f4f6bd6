//! Bundle images at install time: what a pull extracts of them (everything, once the config
//! says it is a bundle image) and the objects read back from the pulled files, checked to
//! be the bundle the catalog promised.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::registry::MissingLabel;
use crate::catalog::bundles::bundle::{BundleError, read_bundle};

/// A bundle image carries the bundle package label; anything else is refused before a layer
/// is fetched.
pub fn select_bundle(labels: &BTreeMap<String, String>) -> Result<Option<PathBuf>, MissingLabel> {
    if labels.contains_key(super::LABEL_BUNDLE_PACKAGE) {
        Ok(None)
    } else {
        Err(MissingLabel {
            kind: "bundle",
            label: super::LABEL_BUNDLE_PACKAGE,
        })
    }
}

/// Why the files of a pulled bundle image are not the bundle to install. Either way the
/// image itself is wrong: pulling it again would not help.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The files are not a bundle (no `metadata/annotations.yaml`, unreadable manifests).
    #[error("not a readable bundle: {0}")]
    Unreadable(#[source] BundleError),
    /// The bundle's CSV is `found`, where the catalog promised `expected`.
    #[error("the image holds CSV {found:?}, not {expected:?} as its catalog says")]
    WrongCsv { found: String, expected: String },
}

/// The objects of the pulled bundle at `rootfs` (`manifests/`, in file order), refused
/// unless its CSV is `csv_name`.
pub fn bundle_objects(rootfs: &Path, csv_name: &str) -> Result<Vec<Value>, ObjectsError> {
    let bundle = read_bundle(rootfs).map_err(ObjectsError::Unreadable)?;
    let found = bundle.csv_name();
    if found != csv_name {
        return Err(ObjectsError::WrongCsv {
            found: found.to_string(),
            expected: csv_name.to_string(),
        });
    }
    Ok(bundle
        .manifests
        .into_iter()
        .map(|m| Arc::unwrap_or_clone(m.object))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bundle_images_are_extracted_and_the_csv_must_match() {
        let mut labels = BTreeMap::new();
        assert_eq!(
            select_bundle(&labels).unwrap_err().to_string(),
            format!(
                "not a bundle image: its config has no {} label",
                super::super::LABEL_BUNDLE_PACKAGE
            )
        );
        labels.insert(super::super::LABEL_BUNDLE_PACKAGE.into(), "at".into());
        assert_eq!(select_bundle(&labels), Ok(None));

        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles/at/0.1.0");
        let objects = bundle_objects(&dir, "at.v0.1.0").unwrap();
        assert!(objects.iter().any(|o| o["kind"] == "ClusterServiceVersion"));
        let error = bundle_objects(&dir, "at.v9.9.9").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the image holds CSV \"at.v0.1.0\", not \"at.v9.9.9\" as its catalog says"
        );
    }
}
