//! registry+v1 bundle reading: the input is split at lines `%%` into annotations.yaml,
//! manifests/csv.yaml, manifests/crd.yaml, metadata/dependencies.yaml and
//! metadata/properties.yaml of a bundle directory, which is then read, validated and
//! rendered to an `olm.bundle`.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use olm::catalog::bundles::bundle::{read_bundle, validate_bundle};
use olm::catalog::bundles::render::{RenderOptions, render_bundle};

const FILES: [&str; 5] = [
    "metadata/annotations.yaml",
    "manifests/csv.yaml",
    "manifests/crd.yaml",
    "metadata/dependencies.yaml",
    "metadata/properties.yaml",
];

fn scratch() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "olm-fuzz-bundle-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    std::fs::create_dir_all(dir.join("manifests")).unwrap();
    let mut parts = data.split(|&b| b == b'\x00');
    let text_parts: Vec<&[u8]> = (0..FILES.len())
        .map(|_| parts.next().unwrap_or(b""))
        .collect();
    for (file, part) in FILES.iter().zip(text_parts) {
        if !part.is_empty() {
            std::fs::write(dir.join(file), part).unwrap();
        }
    }
    if let Ok(bundle) = read_bundle(&dir) {
        let _ = validate_bundle(&bundle, &olm::api::check_csv_schema);
        let _ = render_bundle(&bundle, &RenderOptions::default());
        let _ = render_bundle(
            &bundle,
            &RenderOptions {
                image_template: Some("quay.io/x/{{.Package}}:{{.Version}}".into()),
                strict: true,
            },
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
});
