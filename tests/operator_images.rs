//! operators/images.yaml, the one list of the images this repository builds, agrees with the
//! workspace (each crate and binary exists; the tag is the crate's version) and with the
//! newest bundles (every `quay.io/olm-rs` image a newest CSV runs or relates is built here;
//! the test operator's bundles are under tests/bundles).

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Deserialize)]
struct Images {
    registry: String,
    images: Vec<Image>,
}

#[derive(Deserialize)]
struct Image {
    name: String,
    #[serde(rename = "crate")]
    krate: String,
    binary: String,
    entrypoint: Vec<String>,
    labels: std::collections::BTreeMap<String, String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crate_version(dir: &Path, binary: &str) -> String {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("name = \"{binary}\"")),
        "{} builds no {binary}",
        dir.display()
    );
    manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no version in {}", dir.display()))
        .to_string()
}

/// The images built here, as `registry/name:v<crate version>`.
fn built() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo().join("operators/images.yaml")).unwrap();
    let images: Images = serde_yaml::from_str(&text).unwrap();
    images
        .images
        .iter()
        .map(|image| {
            assert_eq!(
                image.entrypoint,
                vec![format!("/{}", image.binary)],
                "{}",
                image.name
            );
            assert_eq!(image.labels["org.opencontainers.image.title"], image.name);
            let version = crate_version(&repo().join(&image.krate), &image.binary);
            format!("{}/{}:v{version}", images.registry, image.name)
        })
        .collect()
}

/// Every image reference in a CSV: containers and relatedImages.
fn csv_images(csv: &serde_yaml::Value, into: &mut BTreeSet<String>) {
    match csv {
        serde_yaml::Value::Mapping(map) => {
            for (key, value) in map {
                if key.as_str() == Some("image") {
                    if let Some(image) = value.as_str() {
                        into.insert(image.to_string());
                    }
                } else {
                    csv_images(value, into);
                }
            }
        }
        serde_yaml::Value::Sequence(items) => items.iter().for_each(|v| csv_images(v, into)),
        _ => {}
    }
}

/// The CSV of the highest version under `package_dir` (`bundles/<package>` and, for test
/// operators, `tests/bundles/<package>`).
fn newest_csv(package_dir: &str) -> serde_yaml::Value {
    let dir = repo().join(package_dir);
    let newest = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| semver::Version::parse(&e.unwrap().file_name().to_string_lossy()).ok())
        .max()
        .unwrap();
    let manifests = dir.join(newest.to_string()).join("manifests");
    let csv = std::fs::read_dir(&manifests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".clusterserviceversion.yaml"))
        .unwrap();
    serde_yaml::from_str(&std::fs::read_to_string(csv).unwrap()).unwrap()
}

#[test]
fn newest_bundles_run_images_this_repository_builds() {
    let built = built();
    let mut referenced = BTreeSet::new();
    for package in [
        "bundles/reverse-words",
        "bundles/at",
        "bundles/ptemplate",
        "bundles/kernel-module-management",
        "tests/bundles/webhook-test",
    ] {
        let mut images = BTreeSet::new();
        csv_images(&newest_csv(package), &mut images);
        let ours: Vec<_> = images
            .into_iter()
            .filter(|i| i.starts_with("quay.io/olm-rs/"))
            .collect();
        assert!(!ours.is_empty(), "{package}");
        for image in ours {
            assert!(
                built.contains(&image),
                "{package} runs {image}, which operators/images.yaml does not build: {built:?}"
            );
            referenced.insert(image);
        }
    }
    let operators: BTreeSet<String> = built
        .into_iter()
        .filter(|i| {
            !["/olm:", "/olm-operator:", "/olm-registry:"]
                .iter()
                .any(|own| i.contains(own))
        })
        .collect();
    assert_eq!(
        referenced, operators,
        "every operator image built here is used by a newest bundle"
    );
}
