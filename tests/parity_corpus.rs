//! One real bundle (or package) from the public community or certified catalog per class of
//! difference `hack/parity` found between `olm catalog render` and `opm render`, each checked
//! for the fact that made it differ. tests/upstream_opm.rs renders the same corpus with opm
//! itself.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo;
use serde_json::{Value, json};

use olm::catalog::bundles::bundle::read_bundle;
use olm::catalog::bundles::csv::decode_bundle_object;
use olm::catalog::bundles::render::{RenderOptions, render_bundle};
use olm::catalog::{Bundle, PROP_BUNDLE_OBJECT};

fn corpus(class: &str, bundle: &str) -> PathBuf {
    repo().join("tests/parity/bundles").join(class).join(bundle)
}

fn render(dir: &Path) -> Bundle {
    let b = read_bundle(dir).unwrap_or_else(|e| panic!("{e}"));
    render_bundle(&b, &RenderOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn has(bundle: &Bundle, type_: &str, value: Value) -> bool {
    bundle
        .properties
        .iter()
        .any(|p| p.type_ == type_ && p.value == value)
}

fn olm_cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(args)
        .output()
        .unwrap()
}

/// camel-k 1.0.0 ships CRDs with versions its CSV's `owned` list does not name: every
/// version of every CRD is provided, as opm provides them.
#[test]
fn every_version_of_every_shipped_crd_is_provided() {
    let b = render(&corpus("provided-apis", "camel-k-1.0.0"));
    assert!(has(
        &b,
        "olm.gvk",
        json!({"group": "camel.apache.org", "kind": "Build", "version": "v1alpha1"})
    ));
}

/// Dependencies are read from whatever metadata file declares them: a `properties.yaml`
/// that holds `dependencies:` (pelorus), a `dependency.yaml` (ndmspc).
#[test]
fn dependencies_are_read_from_any_metadata_file() {
    let b = render(&corpus("dependencies-by-content", "pelorus-operator-0.0.1"));
    assert!(has(
        &b,
        "olm.package.required",
        json!({"packageName": "prometheus", "versionRange": "0.47.0"})
    ));
    let b = render(&corpus(
        "dependencies-by-content",
        "ndmspc-operator-0.20250209.0",
    ));
    assert!(
        b.properties
            .iter()
            .any(|p| p.type_.ends_with(".required") || p.type_ == "olm.constraint"),
        "{:?}",
        b.properties.iter().map(|p| &p.type_).collect::<Vec<_>>()
    );
}

/// clickhouse's CRDs use YAML merge keys (`<<: *anchor`): they are merged, never kept as a
/// literal `<<` key.
#[test]
fn yaml_merge_keys_are_merged() {
    let b = render(&corpus("merge-keys", "clickhouse-0.26.0"));
    let mut crds = 0;
    for p in b
        .properties
        .iter()
        .filter(|p| p.type_ == PROP_BUNDLE_OBJECT)
    {
        let object = decode_bundle_object(&p.value).unwrap();
        let text = object.to_string();
        assert!(!text.contains("\"<<\""), "a literal merge key survived");
        crds += usize::from(object["kind"] == "CustomResourceDefinition");
    }
    assert_eq!(crds, 1);
}

/// 3scale 0.5.1 lists related images without an image: they are kept, as opm keeps them.
#[test]
fn related_images_with_an_empty_image_are_kept() {
    let b = render(&corpus(
        "empty-related-images",
        "3scale-community-operator-0.5.1",
    ));
    assert!(
        b.related_images
            .iter()
            .any(|r| r.name == "mysql-57-rhel7" && r.image.is_empty())
    );
}

/// ...and a catalog holding them validates (as opm validate accepts it), with a warning
/// that names the related image.
#[test]
fn related_images_with_an_empty_image_are_a_warning_not_an_error() {
    let b = render(&corpus(
        "empty-related-images",
        "3scale-community-operator-0.5.1",
    ));
    let config = olm::catalog::model::fbc::DeclarativeConfig {
        packages: vec![
            serde_json::from_value(json!({"schema": "olm.package", "name": b.package, "defaultChannel": "stable"}))
                .unwrap(),
        ],
        channels: vec![
            serde_json::from_value(json!({"schema": "olm.channel", "name": "stable", "package": b.package, "entries": [{"name": b.name}]}))
                .unwrap(),
        ],
        bundles: vec![b],
        ..Default::default()
    };
    let problems = olm::catalog::checks::validate::validate(&config);
    assert!(problems.is_empty(), "{problems:?}");
    let warnings = olm::catalog::checks::validate::warnings(&config);
    assert!(
        warnings.iter().any(|w| w
            .to_string()
            .contains("related image \"mysql-57-rhel7\" has an empty image")),
        "{warnings:?}"
    );
}

/// community-trivy-operator 2.1.1 keeps two Services in one manifest file: opm decodes one
/// object per file, so only the first is part of the bundle; the render says so, naming
/// the file.
#[test]
fn only_the_first_document_of_a_manifest_file_is_part_of_the_bundle() {
    let dir = corpus("multi-document-manifests", "community-trivy-operator-2.1.1");
    let b = render(&dir);
    let services: Vec<String> = b
        .properties_of(PROP_BUNDLE_OBJECT)
        .map(|v| decode_bundle_object(v).unwrap())
        .filter(|o| o["kind"] == "Service")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(services, ["trivy-operator"]);
    let out = olm_cli(&["catalog", "render", dir.to_str().unwrap()]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("trivy-operator.service.yaml")
            && stderr.contains("holds 2 YAML documents; only the first is part of the bundle"),
        "{stderr}"
    );
}

/// percona-postgresql-operator 1.3.0's CSV ends in a keep-chomped description (`>+`) with
/// no line break at the end of the file: Go's reader ends the last line there, so the
/// description keeps its final line break, as opm renders it.
#[test]
fn a_file_without_a_final_line_break_reads_as_go_reads_it() {
    let dir = corpus("no-final-newline", "percona-postgresql-operator-1.3.0");
    let b = render(&dir);
    let csv = b
        .properties_of(PROP_BUNDLE_OBJECT)
        .map(|v| decode_bundle_object(v).unwrap())
        .find(|o| o["kind"] == "ClusterServiceVersion")
        .unwrap();
    let description = csv["spec"]["description"].as_str().unwrap();
    assert!(
        description.ends_with("issue\n    \n"),
        "{:?}",
        &description[description.len() - 20..]
    );
}

/// eventing-kogito 1.1.0's `dependencies.yaml` is malformed at line 22: the bundle renders
/// without its dependencies (as opm renders it) with a warning naming file and line, and
/// `--strict` refuses it.
#[test]
fn a_malformed_dependencies_file_warns_and_strict_refuses() {
    let dir = corpus("malformed-dependencies", "eventing-kogito-1.1.0");
    let d = dir.to_str().unwrap();
    let out = olm_cli(&["catalog", "render", d]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("metadata/dependencies.yaml:22"),
        "warning should name file and line: {stderr}"
    );
    let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        !rendered["properties"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "olm.gvk.required")
    );
    let strict = olm_cli(&["catalog", "render", "--strict", d]);
    assert!(!strict.status.success());
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(stderr.contains("dependencies.yaml"), "{stderr}");
}

/// Bundle objects are encoded as Go's `json.Marshal` encodes them: sorted keys, `<`, `>`
/// and `&` escaped.
#[test]
fn bundle_objects_are_encoded_as_go_encodes_them() {
    use base64::Engine;
    let b = render(&corpus(
        "empty-related-images",
        "3scale-community-operator-0.5.1",
    ));
    let mut escaped = false;
    for p in b
        .properties
        .iter()
        .filter(|p| p.type_ == PROP_BUNDLE_OBJECT)
    {
        let data = p.value["data"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains(['<', '>']), "unescaped HTML characters");
        escaped |= text.contains("\\u003c") || text.contains("\\u0026");
    }
    assert!(escaped, "the corpus bundle should exercise the escaping");
}

/// nxiq-operator-certified 1.128.0-1's CSV file opens with a comment and `---`: Go's YAML
/// reader takes that empty document as the file's one object, so opm finds no CSV and
/// refuses the bundle ("no csv in bundle"); so do we, in its words, naming the file.
#[test]
fn a_csv_behind_an_empty_first_document_is_refused_as_opm_refuses_it() {
    let dir = corpus("empty-first-document", "nxiq-operator-certified-1.128.0-1");
    let e = read_bundle(&dir).unwrap_err().to_string();
    assert!(
        e.contains("nxiq-operator-certified.clusterserviceversion.yaml: no csv in bundle: ")
            && e.contains("its first YAML document is empty"),
        "{e}"
    );
    let out = olm_cli(&["catalog", "render", dir.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no csv in bundle"), "{stderr}");
}

/// digitalai-release-operator 24.1.19 lists one image under several names, once without a
/// name: opm keeps the CSV's list as it is, so every entry is kept.
#[test]
fn related_images_listed_by_the_csv_are_kept_as_listed() {
    let b = render(&corpus(
        "related-images-as-listed",
        "digitalai-release-operator-24.1.19",
    ));
    let release = "docker.io/xebialabs/xl-release@sha256:d5a1c7b65f9e97fc4340aeebe07b7dc06883f49bbc517818ba3ca5c60dd9d925";
    let names: Vec<&str> = b
        .related_images
        .iter()
        .filter(|r| r.image == release)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "release_volume_permissions",
            "release_busy_box",
            "",
            "release"
        ]
    );
}

/// lightbits-operator 0.8.0 lists `metadata/properties.yaml` entries without `value`
/// (`type: relatedImage` with `name` and `image` beside it): opm keeps them as `value: null`,
/// once (alike entries are one), and so does ours; the file's other entries are not lost.
#[test]
fn properties_without_a_value_are_kept_with_a_null_value() {
    let b = render(&corpus(
        "properties-without-value",
        "lightbits-operator-0.8.0",
    ));
    let nulls = b.properties.iter().filter(|p| p.type_ == "relatedImage");
    assert_eq!(nulls.map(|p| &p.value).collect::<Vec<_>>(), [&Value::Null]);
    assert!(has(&b, "supports-install-mode", json!("OwnNamespace")));
    assert!(has(&b, "olm.maxVersion", json!({"name": "0.8.0"})));
}
