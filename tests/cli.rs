//! The `olm` binary as a user runs it, without a cluster.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

fn olm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(args)
        .output()
        .expect("olm runs")
}

#[test]
fn help_lists_the_subcommands() {
    let out = olm(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("crds"), "{help}");
    assert!(help.contains("--log-format"), "{help}");
}

/// The long flags a `--help` text lists (but `--help` and `--version`), sorted.
fn long_flags(help: &[u8]) -> Vec<String> {
    let mut flags: Vec<String> = String::from_utf8_lossy(help)
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split(' ').find(|w| w.starts_with("--")))
        .map(|f| f.trim_end_matches(',').to_string())
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    flags.sort();
    flags
}

/// `olm-operator`, the binary deploy/operator.yaml runs, is `olm run` alone: the same flags.
#[test]
fn olm_operator_takes_the_flags_of_olm_run() {
    let run = olm(&["run", "--help"]);
    let operator = Command::new(env!("CARGO_BIN_EXE_olm-operator"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(run.status.success() && operator.status.success());
    let (run, operator) = (long_flags(&run.stdout), long_flags(&operator.stdout));
    assert!(run.len() > 10, "{run:?}");
    assert!(run.contains(&"--packages-address".to_string()), "{run:?}");
    assert_eq!(operator, run);
}

#[test]
fn crds_prints_every_crd_as_one_yaml_stream() {
    let out = olm(&["crds"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    let names: Vec<String> = yaml
        .split("\n---\n")
        .skip(1)
        .map(|doc| {
            let value: serde_json::Value = serde_yaml::from_str(doc).unwrap();
            assert_eq!(value["kind"], "CustomResourceDefinition");
            value["metadata"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        names,
        [
            "catalogsources.operators.coreos.com",
            "clusterserviceversions.operators.coreos.com",
            "installplans.operators.coreos.com",
            "olmconfigs.operators.coreos.com",
            "operators.operators.coreos.com",
            "operatorconditions.operators.coreos.com",
            "operatorgroups.operators.coreos.com",
            "subscriptions.operators.coreos.com",
        ]
    );
}

#[test]
fn unknown_subcommand_fails_with_a_message() {
    let out = olm(&["frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized subcommand 'frobnicate'"));
}

#[test]
fn bundle_validate_names_each_problem_with_its_file() {
    let out = olm(&["bundle", "validate", "tests/bundles/broken"]);
    assert!(!out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for expected in [
        "tests/bundles/broken/metadata/annotations.yaml: missing annotation operators.operatorframework.io.bundle.package.v1",
        "tests/bundles/broken/metadata/annotations.yaml: default channel \"fast\" is not one of the bundle's channels",
        "broken.clusterserviceversion.yaml: CSV \"broken.v1.0\": spec.version \"1.0\" is not semver",
        "broken.clusterserviceversion.yaml: CSV \"broken.v1.0\": annotation olm.skipRange: invalid range",
        "broken.clusterserviceversion.yaml: CSV \"broken.v1.0\" owns CRD \"widgets.example.com\" but manifests/ does not contain it",
        "broken.clusterserviceversion.yaml: CSV \"broken.v1.0\": deployment \"broken-manager\" has no containers",
    ] {
        assert!(text.contains(expected), "expected {expected:?} in:\n{text}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 1 bundle(s) invalid"));
}

#[test]
fn our_bundles_are_valid() {
    let dirs: Vec<String> = common::bundle_dirs(&common::repo().join("bundles"))
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    assert!(dirs.len() >= 10);
    let mut args = vec!["bundle", "validate"];
    args.extend(dirs.iter().map(String::as_str));
    let out = olm(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn catalog_validate_reports_json_for_tools_and_exits_1_when_invalid() {
    let out = olm(&[
        "catalog",
        "validate",
        "-o",
        "json",
        "tests/catalogs/broken/multiple-heads",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert_eq!(report["problems"][0]["rule"], "channel-head");
    assert_eq!(report["problems"][0]["package"], "demo");
    assert_eq!(report["problems"][0]["channel"], "stable");

    let ok = olm(&["catalog", "validate", "catalog"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );
}

#[test]
fn catalog_render_of_a_package_folder_yields_package_channels_and_bundles() {
    let out = olm(&["catalog", "render", "-o", "yaml", "bundles/reverse-words"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let schemas: Vec<&str> = docs.iter().map(|d| d["schema"].as_str().unwrap()).collect();
    assert_eq!(
        schemas,
        [
            "olm.package",
            "olm.channel",
            "olm.channel",
            "olm.bundle",
            "olm.bundle",
            "olm.bundle",
            "olm.bundle",
            "olm.bundle",
            "olm.bundle"
        ]
    );
    assert_eq!(docs[0]["defaultChannel"], "stable");
    let stable = docs.iter().find(|d| d["name"] == "stable").unwrap();
    let entry = |name: &str| {
        stable["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap()
            .clone()
    };
    let skipper = entry("reverse-words.v0.4.0");
    assert_eq!(skipper["skipRange"], ">=0.2.0 <0.4.0");
    assert_eq!(skipper["replaces"], "reverse-words.v0.3.0");
    assert_eq!(
        entry("reverse-words.v0.5.0")["replaces"],
        "reverse-words.v0.4.0"
    );
}

#[test]
fn catalog_render_of_a_missing_path_fails_naming_it() {
    let out = olm(&["catalog", "render", "no/such/dir"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no/such/dir: no such file or directory")
    );
}

#[test]
fn semver_template_renders_channels_from_our_bundles() {
    let out = olm(&[
        "catalog",
        "template",
        "semver",
        "tests/catalogs/templates/reverse-words-semver.yaml",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let blobs: Vec<serde_json::Value> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let package = blobs.iter().find(|b| b["schema"] == "olm.package").unwrap();
    assert_eq!(package["name"], "reverse-words");
    let mut channels: Vec<&str> = blobs
        .iter()
        .filter(|b| b["schema"] == "olm.channel")
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    channels.sort();
    assert_eq!(
        channels,
        [
            "candidate-v0.2",
            "stable-v0.1",
            "stable-v0.2",
            "stable-v0.3",
            "stable-v0.4"
        ]
    );
    assert_eq!(package["defaultChannel"], "stable-v0.4");
    assert_eq!(
        blobs.iter().filter(|b| b["schema"] == "olm.bundle").count(),
        5
    );

    let missing = olm(&[
        "catalog",
        "template",
        "semver",
        "--bundles",
        "nowhere",
        "tests/catalogs/templates/reverse-words-semver.yaml",
    ]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr)
            .contains("is neither a bundle directory nor a bundle under nowhere")
    );
}

#[test]
fn run_without_a_cluster_fails_with_a_message_not_a_panic() {
    let out = Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(["run", "--admin-address", "127.0.0.1:0"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("connecting to the API server"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn run_rejects_a_renew_interval_that_cannot_keep_the_lease() {
    let out = olm(&[
        "run",
        "--lease-duration",
        "3s",
        "--lease-renew-interval",
        "2s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--lease-renew-interval"), "{stderr}");
}

/// Durations from flags go through the same bounded parser as durations from objects: a
/// long `--catalog-check-interval` is a usage error, not an overflow panic later.
#[test]
fn run_refuses_durations_it_cannot_use() {
    for (flag, value, says) in [
        (
            "--catalog-check-interval",
            "99999999999999999999h",
            "longer than the maximum of 8760h0m0s",
        ),
        ("--catalog-check-interval", "0s", "is not positive"),
        ("--registry-timeout", "5 seconds", "is not a duration"),
        ("--lease-duration", "-10s", "is not positive"),
    ] {
        let out = olm(&["run", &format!("{flag}={value}")]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag) && stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// OLM's own RBAC in `deploy/` grants no wildcard: every rule names its groups, resources
/// and verbs (issue 40: OLM unpacks untrusted images and parses tenants' catalogs, so what
/// it may do is spelled out).
#[test]
fn deploy_rbac_has_no_wildcard_rule() {
    use serde::Deserialize;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut rules = 0;
    for file in ["rbac.yaml", "aggregated-roles.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object = serde_json::Value::deserialize(document).unwrap();
            for rule in object["rules"].as_array().into_iter().flatten() {
                rules += 1;
                for field in ["apiGroups", "resources", "verbs", "nonResourceURLs"] {
                    let wildcard = rule[field]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v.as_str().is_some_and(|s| s == "*" || s.starts_with("*/")));
                    assert!(
                        !wildcard,
                        "{file}: {} has a wildcard in {field}: {rule}",
                        object["metadata"]["name"]
                    );
                }
            }
        }
    }
    assert!(rules > 10, "read the rules ({rules})");
}

/// A scratch image has no CA bundle of its own: without TLS roots a push or pull fails with
/// a message that says what is missing, where the HTTP client used to panic (found when
/// `deploy/` first ran OLM in a real container).
#[test]
fn no_tls_roots_is_an_error_not_a_panic() {
    let dir = common::scratch("no-tls-roots");
    let out = Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(["catalog", "build", "catalog/reverse-words", "--tag"])
        .arg("registry.invalid/olm-rs/catalog:v1")
        .args(["--push", "--layout"])
        .arg(dir.join("layout"))
        .current_dir(common::repo())
        .env("SSL_CERT_FILE", "/dev/null")
        .env("SSL_CERT_DIR", dir.join("none"))
        .output()
        .expect("olm runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("registry.invalid: building the HTTP client")
            && stderr.contains("CA bundle"),
        "{stderr}"
    );
}
