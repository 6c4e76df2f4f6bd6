//! Each catalog limit: just under it loads, just over it fails with an error naming the
//! limit and the file or object.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::*;
use crate::catalog::bundles::bundle::read_bundle;
use crate::catalog::configmap::{MAX_CONFIGMAP_BYTES, from_configmap_data};
use crate::catalog::model::semver_range::{MAX_RANGE_BYTES, VersionRange};
use crate::catalog::reading::load::{LoadError, load_path, load_str};
use crate::duration::{MAX_DURATION_TEXT, parse_go_duration};

const FILE: &str = "catalog.json";

fn load(text: &str) -> Result<crate::catalog::model::fbc::DeclarativeConfig, LoadError> {
    load_str(Path::new(FILE), text)
}

fn expect_error(result: Result<impl std::fmt::Debug, LoadError>, needles: &[&str]) {
    let e = result.unwrap_err().to_string();
    for needle in needles {
        assert!(e.contains(needle), "{needle:?} not in {e:?}");
    }
}

/// A package blob of exactly `size` bytes (its description pads it).
fn package_blob(size: usize) -> String {
    let head = r#"{"schema":"olm.package","name":"p","description":""#;
    let tail = r#""}"#;
    format!("{head}{}{tail}", "x".repeat(size - head.len() - tail.len()))
}

#[test]
fn a_json_document_at_the_limit_loads_and_one_byte_more_does_not() {
    let config = load(&package_blob(MAX_DOCUMENT_BYTES)).unwrap();
    assert_eq!(config.packages.len(), 1);
    expect_error(
        load(&package_blob(MAX_DOCUMENT_BYTES + 1)),
        &[
            FILE,
            "document 1",
            "larger than the limit of 64 MiB for one JSON document",
        ],
    );
    // The second document of a stream is named as such.
    let stream = format!(
        "{}\n{}",
        package_blob(100),
        package_blob(MAX_DOCUMENT_BYTES + 1)
    );
    expect_error(load(&stream), &[":2: document 2", "64 MiB"]);
}

#[test]
fn a_yaml_file_at_the_limit_loads_and_one_byte_more_does_not() {
    let head = "schema: olm.package\nname: p\ndescription: ";
    let yaml = |size: usize| format!("{head}{}\n", "y".repeat(size - head.len() - 1));
    let config = load_str(Path::new("c.yaml"), &yaml(MAX_DOCUMENT_BYTES)).unwrap();
    assert_eq!(
        config.packages[0].description.len(),
        MAX_DOCUMENT_BYTES - head.len() - 1
    );
    expect_error(
        load_str(Path::new("c.yaml"), &yaml(MAX_DOCUMENT_BYTES + 1)),
        &[
            "c.yaml:1",
            "larger than the limit of 64 MiB for one YAML file",
        ],
    );
}

#[test]
fn nesting_at_the_limit_loads_and_one_level_more_does_not() {
    // The blob itself is one level; `value` adds `depth - 2` arrays around a 0.
    let blob = |depth: usize| {
        format!(
            r#"{{"schema":"x","value":{}0{}}}"#,
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        )
    };
    assert_eq!(load(&blob(MAX_NESTING)).unwrap().others.len(), 1);
    expect_error(
        load(&blob(MAX_NESTING + 1)),
        &[FILE, "nested more than the limit of 128 levels"],
    );
    let yaml = |depth: usize| {
        format!(
            "schema: x\nvalue: {}0{}\n",
            "[".repeat(depth - 1),
            "]".repeat(depth - 1)
        )
    };
    assert_eq!(
        load_str(Path::new("c.yaml"), &yaml(MAX_NESTING))
            .unwrap()
            .others
            .len(),
        1
    );
    expect_error(
        load_str(Path::new("c.yaml"), &yaml(MAX_NESTING + 1)),
        &["c.yaml", "nested more than the limit of 128 levels"],
    );
}

fn bundles(n: usize) -> String {
    let mut text = String::with_capacity(n * 48);
    for i in 0..n {
        writeln!(
            text,
            r#"{{"schema":"olm.bundle","name":"b{i}","package":"p"}}"#
        )
        .unwrap();
    }
    text
}

#[test]
fn bundles_at_the_limit_load_and_one_more_does_not() {
    assert_eq!(
        load(&bundles(MAX_BUNDLES)).unwrap().bundles.len(),
        MAX_BUNDLES
    );
    expect_error(
        load(&bundles(MAX_BUNDLES + 1)),
        &[FILE, "more than the limit of 100000 bundles in one catalog"],
    );
}

#[test]
fn blobs_at_the_limit_load_and_one_more_does_not() {
    let others = |n: usize| r#"{"schema":"x"}"#.repeat(n);
    assert_eq!(load(&others(MAX_BLOBS)).unwrap().others.len(), MAX_BLOBS);
    expect_error(
        load(&others(MAX_BLOBS + 1)),
        &[FILE, "more than the limit of 500000 blobs in one catalog"],
    );
}

#[test]
fn the_bundle_limit_counts_across_the_files_of_a_directory() {
    let dir = scratch("two-files");
    std::fs::write(dir.join("a.json"), bundles(MAX_BUNDLES / 2 + 1)).unwrap();
    std::fs::write(dir.join("b.json"), bundles(MAX_BUNDLES / 2)).unwrap();
    expect_error(
        load_path(&dir),
        &["b.json", "more than the limit of 100000 bundles"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn properties_at_the_limit_load_and_one_more_do_not() {
    let bundle = |n: usize| {
        let props = vec![r#"{"type":"olm.label","value":"x"}"#; n].join(",");
        format!(r#"{{"schema":"olm.bundle","name":"b1","package":"p","properties":[{props}]}}"#)
    };
    let config = load(&bundle(MAX_PROPERTIES)).unwrap();
    assert_eq!(config.bundles[0].properties.len(), MAX_PROPERTIES);
    expect_error(
        load(&bundle(MAX_PROPERTIES + 1)),
        &[
            FILE,
            "olm.bundle \"b1\"",
            "10001 properties, more than the limit of 10000",
        ],
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-limits-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy of the project's `at` 0.1.0 bundle in a scratch directory.
fn bundle_copy(name: &str) -> PathBuf {
    let from = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("bundles/at/0.1.0");
    let dir = scratch(name);
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        for f in std::fs::read_dir(from.join(sub)).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), dir.join(sub).join(f.file_name())).unwrap();
        }
    }
    dir
}

fn set_annotation(dir: &Path, key: &str, value: &str) {
    let path = dir.join("metadata/annotations.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.contains(key))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, format!("{text}  {key}: {value}\n")).unwrap();
}

#[test]
fn bundle_files_at_the_limit_are_read_and_one_more_is_not() {
    let dir = bundle_copy("files");
    let present = std::fs::read_dir(dir.join("manifests")).unwrap().count();
    for i in present..MAX_BUNDLE_FILES {
        std::fs::write(
            dir.join(format!("manifests/extra-{i:04}.yaml")),
            "kind: ConfigMap\n",
        )
        .unwrap();
    }
    read_bundle(&dir).unwrap();
    std::fs::write(dir.join("manifests/one-too-many.yaml"), "kind: ConfigMap\n").unwrap();
    let e = read_bundle(&dir).unwrap_err().to_string();
    assert!(
        e.contains("manifests") && e.contains("more than the limit of 1000 files"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bundle_file_at_the_limit_is_read_and_one_byte_more_is_not() {
    let dir = bundle_copy("file-size");
    // Sparse; metadata files without "dependencies" or "properties" are read, not parsed.
    let big = std::fs::File::create(dir.join("metadata/padding")).unwrap();
    big.set_len(MAX_DOCUMENT_BYTES as u64).unwrap();
    read_bundle(&dir).unwrap();
    big.set_len(MAX_DOCUMENT_BYTES as u64 + 1).unwrap();
    let e = read_bundle(&dir).unwrap_err().to_string();
    assert!(
        e.contains("metadata/padding") && e.contains("larger than the limit of 64 MiB"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bundle_directories_named_by_annotations_stay_inside_the_bundle() {
    let dir = bundle_copy("escape");
    // A leading `/` is the bundle's root, as in the image.
    set_annotation(
        &dir,
        "operators.operatorframework.io.bundle.manifests.v1",
        "/manifests/",
    );
    assert!(read_bundle(&dir).unwrap().csv().is_some());
    for escape in ["../", "manifests/../../etc", "/../manifests"] {
        set_annotation(
            &dir,
            "operators.operatorframework.io.bundle.manifests.v1",
            escape,
        );
        let e = read_bundle(&dir).unwrap_err().to_string();
        assert!(
            e.contains("annotations.yaml") && e.contains("not a directory inside the bundle"),
            "{e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn configmap_data() -> BTreeMap<String, String> {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tests/catalogs/configmap/etcd.yaml");
    let object: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(object["data"].clone()).unwrap()
}

#[test]
fn a_configmap_at_the_limit_loads_and_one_byte_more_does_not() {
    let mut data = configmap_data();
    // The API server counts the values, not the keys.
    let size = |d: &BTreeMap<String, String>| d.values().map(String::len).sum::<usize>();
    // Pad with a YAML comment to exactly the limit.
    let pad = MAX_CONFIGMAP_BYTES - size(&data) - 2;
    data.get_mut("packages")
        .unwrap()
        .push_str(&format!("\n#{}", "c".repeat(pad)));
    assert_eq!(size(&data), MAX_CONFIGMAP_BYTES);
    assert!(!from_configmap_data(&data).unwrap().bundles.is_empty());
    data.get_mut("packages").unwrap().push('c');
    let e = from_configmap_data(&data).unwrap_err().to_string();
    assert!(
        e.contains("1048577 bytes, larger than the limit of 1048576"),
        "{e}"
    );
}

#[test]
fn a_range_at_the_limit_parses_and_one_byte_more_does_not() {
    let range = |size: usize| {
        let mut r = String::from(">=1.0.0 <2.0.0");
        while r.len() + " || >=1.0.0 <2.0.0".len() <= size {
            r.push_str(" || >=1.0.0 <2.0.0");
        }
        format!("{r}{}", " ".repeat(size - r.len()))
    };
    let at_limit = range(MAX_RANGE_BYTES);
    assert_eq!(at_limit.len(), MAX_RANGE_BYTES);
    assert!(
        VersionRange::parse(&at_limit)
            .unwrap()
            .contains(&semver::Version::new(1, 5, 0))
    );
    let e = VersionRange::parse(&range(MAX_RANGE_BYTES + 1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("4097 bytes, longer than the limit of 4096"),
        "{e}"
    );
    assert!(e.len() < 200, "the range is abbreviated: {e}");
}

#[test]
fn a_duration_at_the_limit_parses_and_one_byte_more_does_not() {
    let text = |size: usize| format!("{}1s", "0".repeat(size - 2));
    assert_eq!(
        parse_go_duration(&text(MAX_DURATION_TEXT))
            .unwrap()
            .as_secs(),
        1
    );
    let e = parse_go_duration(&text(MAX_DURATION_TEXT + 1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("65 bytes, longer than the limit of 64"), "{e}");
}
