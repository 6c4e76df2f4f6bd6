//! Catalog tooling on real and deliberately broken input, without a cluster:
//! the loader, `validate`, rendering of the community-operators bundles, and `catalog/`
//! being exactly what `olm catalog generate` makes of `bundles/`.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{community_operators, repo, scratch, subdirs};

use olm::catalog::bundles::bundle::{read_bundle, validate_bundle};
use olm::catalog::bundles::render::{RenderOptions, render_package_dir};
use olm::catalog::checks::validate::{Rule, validate};
use olm::catalog::reading::load::load_path;

/// Each broken catalog is refused, for the reason it was made broken.
#[test]
fn broken_catalogs_are_rejected_with_the_rule_they_break() {
    let cases: &[(&str, &str)] = &[
        (
            "multiple-heads",
            "multiple channel heads: demo.v0.2.0, demo.v0.3.0 [channel-head]",
        ),
        (
            "replaces-cycle",
            "cycle in the replaces chain: demo.v0.2.0 -> demo.v0.1.0 -> demo.v0.2.0 [replaces-cycle]",
        ),
        (
            "missing-default-channel",
            "package \"demo\": defaultChannel must be set [default-channel]",
        ),
        (
            "unknown-default-channel",
            "defaultChannel \"fast\" is not a channel of the package [default-channel]",
        ),
        (
            "bundle-in-no-channel",
            "bundle \"demo.v0.3.0\": bundle is not in any channel [not-in-channel]",
        ),
        (
            "duplicate-version",
            "bundles demo.v0.2.0, demo.v0.2.0-again share version 0.2.0 [duplicate-version]",
        ),
        (
            "invalid-skiprange",
            "bundle \"demo.v0.3.0\": invalid skipRange",
        ),
        (
            "channel-unknown-package",
            "channel \"stable\" belongs to unknown package \"ghost\" [unknown-package]",
        ),
        (
            // opm's walk down replaces stops at demo.v0.2.0, which the head skips.
            "stranded-behind-skipped-edge",
            "not skipped: demo.v0.1.0 [stranded-entries]",
        ),
    ];
    for (case, expected) in cases {
        let dir = repo().join("tests/catalogs/broken").join(case);
        let config = load_path(&dir).unwrap_or_else(|e| panic!("{case}: {e}"));
        let problems: Vec<String> = validate(&config)
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{case}: expected {expected:?} in {problems:#?}"
        );
    }
    for (case, expected) in [
        (
            "malformed-json",
            "catalog.json:3:1: document 2: malformed JSON",
        ),
        (
            "malformed-yaml",
            "catalog.yaml:7:10: document 2: malformed YAML",
        ),
    ] {
        let err = load_path(&repo().join("tests/catalogs/broken").join(case))
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{case}: {err}");
    }
}

#[test]
fn valid_catalogs_pass_and_indexignore_hides_files() {
    for dir in subdirs(&repo().join("tests/catalogs/valid")) {
        let config = load_path(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let problems = validate(&config);
        assert!(problems.is_empty(), "{}: {problems:#?}", dir.display());
    }
    let with_unknown =
        load_path(&repo().join("tests/catalogs/valid/skips-and-unknown-schema")).unwrap();
    assert_eq!(
        with_unknown.others.len(),
        1,
        "blobs of unknown schemas are kept"
    );
}

/// Every real bundle loads and is judged; every package renders into a catalog. Real bundles
/// that are genuinely broken are pinned here with the exact reason.
#[test]
fn every_community_operators_bundle_and_package_renders_and_validates() {
    let mut bundle_problems = Vec::new();
    let mut bundles = 0;
    let mut package_problems = Vec::new();
    for dir in common::bundle_dirs(&community_operators()) {
        bundles += 1;
        let bundle = read_bundle(&dir).unwrap_or_else(|e| panic!("{e}"));
        bundle_problems.extend(
            validate_bundle(&bundle, &olm::api::check_csv_schema)
                .into_iter()
                .map(|p| p.to_string()),
        );
    }
    for package in subdirs(&community_operators()) {
        let config = render_package_dir(&package, &RenderOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        package_problems.extend(validate(&config));
    }
    assert!(bundles > 200, "found only {bundles} bundles");
    assert_eq!(bundle_problems, Vec::<String>::new());
    // kuadrant-operator 0.2.0–0.11.x list `oci://quay.io/kuadrant/wasm-shim:…` as a related
    // image: not a pull spec. `opm validate` refuses these bundles too.
    let (kuadrant, others): (Vec<_>, Vec<_>) = package_problems
        .into_iter()
        .partition(|p| p.package == "kuadrant-operator");
    assert_eq!(
        others
            .iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    assert_eq!(kuadrant.len(), 14, "{kuadrant:#?}");
    for p in &kuadrant {
        assert_eq!(p.rule, Rule::ImageReference);
        assert!(
            p.message
                .starts_with("related image \"oci://quay.io/kuadrant/wasm-shim:v0."),
            "{p}"
        );
    }
}

/// `catalog/` is what `olm catalog generate` makes of `bundles/`, and it validates.
#[test]
fn catalog_directory_is_generated_from_bundles_and_valid() {
    let out = scratch("catalog-gen");
    let status = Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(["catalog", "generate", "--bundles"])
        .arg(repo().join("bundles"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    for package in subdirs(&out) {
        let name = package.file_name().unwrap();
        let generated = std::fs::read_to_string(package.join("catalog.yaml")).unwrap();
        let committed =
            std::fs::read_to_string(repo().join("catalog").join(name).join("catalog.yaml"))
                .unwrap_or_default();
        assert!(
            generated == committed,
            "catalog/{} is stale; run `cargo run -- catalog generate`",
            name.to_string_lossy()
        );
    }
    assert_eq!(
        subdirs(&out).len(),
        subdirs(&repo().join("catalog")).len(),
        "catalog/ has packages bundles/ does not"
    );
    let config = load_path(&repo().join("catalog")).unwrap();
    assert_eq!(validate(&config), vec![]);
}
