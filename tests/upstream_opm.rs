//! Differential tests against upstream `opm` (v1.73.0, built by `hack/opm/build`): on our
//! catalog, the testdata and deliberately broken catalogs, `olm catalog validate` and
//! `opm validate` agree on valid/invalid, and `olm catalog render` of a bundle directory
//! gives the same FBC objects as `opm render` (compared as data, order aside).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{community_operators, opm, repo, scratch, subdirs};

use base64::Engine;
use serde_json::Value;

fn olm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(args)
        .output()
        .unwrap()
}

fn opm_cmd() -> Command {
    let mut cmd = Command::new(opm());
    // opm reads OLM_CACHE_DIR itself; keep any such variable away from it.
    cmd.env_remove("OLM_CACHE_DIR");
    cmd
}

/// Both tools' verdict on one catalog directory: (ours, opm's, our message, opm's message).
fn verdicts(dir: &Path) -> (bool, bool, String, String) {
    let ours = olm(&["catalog", "validate", dir.to_str().unwrap()]);
    let theirs = opm_cmd().arg("validate").arg(dir).output().unwrap();
    (
        ours.status.success(),
        theirs.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&ours.stderr)
        ),
        String::from_utf8_lossy(&theirs.stderr).into_owned(),
    )
}

#[test]
fn validate_agrees_with_opm_on_our_catalog_and_the_fixture_catalogs() {
    let mut dirs = vec![(repo().join("catalog"), true)];
    dirs.extend(
        subdirs(&repo().join("tests/catalogs/valid"))
            .into_iter()
            .map(|d| (d, true)),
    );
    dirs.extend(
        subdirs(&repo().join("tests/catalogs/broken"))
            .into_iter()
            .map(|d| (d, false)),
    );
    let mut disagreements = Vec::new();
    for (dir, expected_valid) in &dirs {
        let (ours, theirs, our_message, their_message) = verdicts(dir);
        if ours != *expected_valid || theirs != *expected_valid {
            disagreements.push(format!(
                "{}: expected valid={expected_valid}, olm says {ours} ({}), opm says {theirs} ({})",
                dir.display(),
                our_message.trim(),
                their_message.trim()
            ));
        }
        if !expected_valid {
            assert!(
                !our_message.trim().is_empty(),
                "{}: olm gave no reason",
                dir.display()
            );
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn validate_agrees_with_opm_on_every_testdata_package() {
    let out = scratch("testdata");
    let mut disagreements = Vec::new();
    let mut invalid = Vec::new();
    for package in subdirs(&community_operators()) {
        let name = package.file_name().unwrap().to_str().unwrap().to_string();
        let dir = out.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let rendered = olm(&["catalog", "render", package.to_str().unwrap()]);
        assert!(
            rendered.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&rendered.stderr)
        );
        std::fs::write(dir.join("catalog.json"), rendered.stdout).unwrap();
        let (ours, theirs, our_message, their_message) = verdicts(&dir);
        if ours != theirs {
            disagreements.push(format!(
                "{name}: olm valid={ours} ({}), opm valid={theirs} ({})",
                our_message.trim(),
                their_message.trim()
            ));
        }
        if !ours {
            invalid.push(name);
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // Only kuadrant-operator is genuinely broken (an `oci://` related image); both tools say so.
    assert_eq!(invalid, ["kuadrant-operator"]);
}

/// One rendered `olm.bundle`, normalised for comparison: manifests decoded from base64,
/// properties and related images sorted.
fn normalize(mut bundle: Value) -> Value {
    if let Some(Value::Array(props)) = bundle.get_mut("properties") {
        for p in props.iter_mut() {
            if p["type"] == "olm.bundle.object" {
                let data = p["value"]["data"].as_str().unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap();
                p["value"]["data"] = serde_json::from_slice(&bytes).unwrap();
            }
        }
        props.sort_by_key(|p| p.to_string());
    }
    if let Some(Value::Array(images)) = bundle.get_mut("relatedImages") {
        images.sort_by_key(|i| i.to_string());
    }
    bundle
}

fn json_stream(bytes: &[u8]) -> Vec<Value> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn render_of_every_bundle_directory_matches_opm() {
    let mut dirs = common::bundle_dirs(&community_operators());
    dirs.extend(common::bundle_dirs(&repo().join("bundles")));
    assert!(dirs.len() > 200);
    let template = "quay.io/olm-rs/{{.Package}}-bundle:v{{.Version}}";
    let mismatches: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<&[PathBuf]> = dirs.chunks(dirs.len().div_ceil(4)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    let mut bad = Vec::new();
                    for dir in chunk {
                        let d = dir.to_str().unwrap();
                        let ours = olm(&["catalog", "render", "--image-template", template, d]);
                        let theirs = opm_cmd()
                            .args([
                                "render",
                                "--alpha-image-ref-template",
                                template,
                                "-o",
                                "json",
                                d,
                            ])
                            .output()
                            .unwrap();
                        assert!(
                            theirs.status.success(),
                            "opm render {d}: {}",
                            String::from_utf8_lossy(&theirs.stderr)
                        );
                        assert!(
                            ours.status.success(),
                            "olm render {d}: {}",
                            String::from_utf8_lossy(&ours.stderr)
                        );
                        let ours: Vec<Value> = json_stream(&ours.stdout)
                            .into_iter()
                            .map(normalize)
                            .collect();
                        let theirs: Vec<Value> = json_stream(&theirs.stdout)
                            .into_iter()
                            .map(normalize)
                            .collect();
                        if ours != theirs {
                            let diff = describe_difference(&ours, &theirs);
                            bad.push(format!("{d}: {diff}"));
                        }
                    }
                    bad
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        mismatches.is_empty(),
        "{} of {} bundles render differently:\n{}",
        mismatches.len(),
        dirs.len(),
        mismatches.join("\n")
    );
}

fn describe_difference(ours: &[Value], theirs: &[Value]) -> String {
    if ours.len() != theirs.len() {
        return format!("{} blobs vs opm's {}", ours.len(), theirs.len());
    }
    for (a, b) in ours.iter().zip(theirs) {
        for key in [
            "name",
            "package",
            "image",
            "relatedImages",
            "properties",
            "schema",
        ] {
            if a[key] != b[key] {
                if key == "properties" {
                    let pa: Vec<String> = a[key]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.to_string().chars().take(160).collect())
                        .collect();
                    let pb: Vec<String> = b[key]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|p| p.to_string().chars().take(160).collect())
                        .collect();
                    let only_ours: Vec<_> = pa.iter().filter(|p| !pb.contains(p)).collect();
                    let only_theirs: Vec<_> = pb.iter().filter(|p| !pa.contains(p)).collect();
                    return format!(
                        "properties differ; only ours: {only_ours:?}; only opm's: {only_theirs:?}"
                    );
                }
                return format!("{key}: ours {} vs opm's {}", a[key], b[key]);
            }
        }
        let extra: Vec<_> = a
            .as_object()
            .unwrap()
            .keys()
            .chain(b.as_object().unwrap().keys())
            .filter(|k| a[k.as_str()] != b[k.as_str()])
            .collect();
        if !extra.is_empty() {
            return format!("fields differ: {extra:?}");
        }
    }
    "differs".into()
}
