//! Installs from images: a catalog image whose bundles carry no inline objects (opm's
//! `bundle-object-to-csv-metadata`, as most real catalogs), so `olm run` pulls each bundle
//! image in-process when an InstallPlan needs it. Publish v1 → subscribe → publish v2 →
//! automatic upgrade, with the real registry and pull Secrets; a bundle image that cannot
//! be pulled makes the plan wait, then fail, naming bundle and image.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::get_json;
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubectl, olm_bin, repo_root,
};
use super::processes::OlmRun;
use super::registry::{PASSWORD, TestRegistry, USER};

const WAIT: Duration = Duration::from_secs(120);

/// A bundles/ folder with only these reverse-words versions.
pub(crate) fn bundles_with(dir: &Path, versions: &[&str]) -> PathBuf {
    let root = dir.join("bundles");
    for version in versions {
        copy_dir(
            &repo_root().join("bundles/reverse-words").join(version),
            &root.join("reverse-words").join(version),
        );
    }
    root
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `olm catalog publish` with no inline objects; returns the catalog's FBC directory.
pub(crate) fn publish(registry: &TestRegistry, bundles: &Path, auth: &Path) -> PathBuf {
    let work = &registry.dir;
    let catalog_dir = work.join("published");
    let out = Command::new(olm_bin())
        .args([
            "catalog",
            "publish",
            "--registry",
            &format!("{}/olm", registry.host),
        ])
        .arg("--bundles")
        .arg(bundles)
        .arg("--catalog-dir")
        .arg(&catalog_dir)
        .arg("--layout")
        .arg(work.join("layout"))
        .args(["--migrate-level", "bundle-object-to-csv-metadata"])
        .env("REGISTRY_AUTH_FILE", auth)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let catalog = std::fs::read_to_string(catalog_dir.join("reverse-words/catalog.json")).unwrap();
    assert!(!catalog.contains("olm.bundle.object"), "no inline objects");
    assert!(catalog.contains("olm.csv.metadata"));
    catalog_dir
}

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

pub(crate) fn setup_namespace(ns: &str, registry: &TestRegistry, og_annotations: &str) {
    kubectl(
        &[
            "create",
            "secret",
            "docker-registry",
            "pull",
            "-n",
            ns,
            &format!("--docker-server={}", registry.host),
            &format!("--docker-username={USER}"),
            &format!("--docker-password={PASSWORD}"),
        ],
        None,
    )
    .ok();
    apply(&format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {ns}\n{og_annotations}spec:\n  targetNamespaces: [{ns}]\n"
    ));
}

pub(crate) fn catalog_source(ns: &str, name: &str, image: &str) {
    apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  sourceType: grpc\n  image: {image}\n  secrets: [pull]\n  updateStrategy:\n    registryPoll:\n      interval: 1s\n"
    ));
}

pub(crate) fn subscribe(ns: &str, source: &str) {
    apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: reverse-words\n  namespace: {ns}\nspec:\n  name: reverse-words\n  channel: stable\n  source: {source}\n  sourceNamespace: {ns}\n"
    ));
}

pub(crate) async fn installed(ns: &str, csv: &str) -> Value {
    eventually(&format!("installedCSV {csv}"), WAIT, || async {
        let s = get_json(ns, "subscription/reverse-words");
        (s["status"]["installedCSV"] == csv && s["status"]["state"] == "AtLatestKnown").then_some(s)
    })
    .await
}

fn bundle_pulls(registry: &TestRegistry) -> usize {
    registry.requests("GET", "/olm/reverse-words-bundle/manifests/sha256:")
}

#[tokio::test]
async fn publish_subscribe_publish_upgrades_from_bundle_images() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "image-upgrade").await;
    let registry = TestRegistry::start("image-upgrade", true);
    let auth = registry.auth_file(PASSWORD);
    let work = registry.dir.clone();
    let catalog_image = format!("{}/olm/catalog:latest", registry.host);

    // v1: reverse-words 0.1.0 and 0.2.0.
    publish(
        &registry,
        &bundles_with(&work.join("v1"), &["0.1.0", "0.2.0"]),
        &auth,
    );
    let olm = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
        ],
    );
    setup_namespace(&ns.name, &registry, "");
    catalog_source(&ns.name, "images", &catalog_image);
    subscribe(&ns.name, "images");
    installed(&ns.name, "reverse-words.v0.2.0").await;
    let csv = get_json(&ns.name, "csv/reverse-words.v0.2.0");
    assert_eq!(
        csv["spec"]["install"]["strategy"], "deployment",
        "the CSV came from the image"
    );
    assert!(bundle_pulls(&registry) >= 1, "the bundle image was pulled");
    kubectl(&["get", "crd", "reversewordsapps.apps.linuxera.org"], None).ok();

    // v2: 0.4.0 joins (skipRange >=0.2.0 <0.4.0) under the same catalog tag.
    publish(
        &registry,
        &bundles_with(
            &work.join("v2"),
            &["0.1.0", "0.2.0", "0.2.1", "0.3.0", "0.4.0"],
        ),
        &auth,
    );
    let sub = installed(&ns.name, "reverse-words.v0.4.0").await;
    assert_eq!(sub["status"]["currentCSV"], "reverse-words.v0.4.0");
    let csv = get_json(&ns.name, "csv/reverse-words.v0.4.0");
    assert_eq!(csv["spec"]["replaces"], "reverse-words.v0.2.0");
    let plans = get_json(&ns.name, "installplans")["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(plans.len(), 2, "one plan per publish");
    for plan in &plans {
        assert_eq!(plan["status"]["phase"], "Complete", "{:#}", plan["status"]);
        assert!(
            plan["status"]["bundleLookups"].is_null(),
            "{:#}",
            plan["status"]
        );
    }
    // Each bundle image was pulled once per digest: the cache holds them (a folder per
    // repository, an entry per digest).
    let cached = std::fs::read_dir(work.join("cache"))
        .unwrap()
        .flat_map(|repository| std::fs::read_dir(repository.unwrap().path()).unwrap())
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert!(
        cached >= 4,
        "two catalogs and two bundles cached, found {cached}"
    );
    drop(olm);
}

#[tokio::test]
async fn a_bundle_image_that_cannot_be_pulled_waits_then_fails_naming_bundle_and_image() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "image-unpack-fail").await;
    let registry = TestRegistry::start("image-unpack-fail", true);
    let auth = registry.auth_file(PASSWORD);
    let work = registry.dir.clone();
    let catalog_dir = publish(
        &registry,
        &bundles_with(&work.join("v1"), &["0.1.0"]),
        &auth,
    );
    // The catalog now points at a bundle image that was never pushed.
    let file = catalog_dir.join("reverse-words/catalog.json");
    let missing = format!("{}/olm/missing-bundle:v0.1.0", registry.host);
    let text = std::fs::read_to_string(&file).unwrap();
    let edited: String = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(|blob| {
            let mut blob = blob.unwrap();
            if blob["schema"] == "olm.bundle" {
                blob["image"] = Value::String(missing.clone());
                blob["relatedImages"] = Value::Array(vec![]);
            }
            serde_json::to_string(&blob).unwrap() + "\n"
        })
        .collect();
    std::fs::write(&file, edited).unwrap();
    let broken = format!("{}/olm/broken-catalog:latest", registry.host);
    let out = Command::new(olm_bin())
        .args(["catalog", "build"])
        .arg(&catalog_dir)
        .args(["-t", &broken, "--push", "--layout"])
        .arg(work.join("layout"))
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let _olm = OlmRun::start_env(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
        ],
        &[("OLM_REGISTRY_RETRIES", "0")],
    );
    setup_namespace(
        &ns.name,
        &registry,
        "  annotations:\n    operatorframework.io/bundle-unpack-timeout: 6s\n",
    );
    catalog_source(&ns.name, "broken", &broken);
    subscribe(&ns.name, "broken");

    // While it fails, the plan waits and says which bundle image and why.
    let pending = eventually("a pending bundle lookup", WAIT, || async {
        let plans = get_json(&ns.name, "installplans")["items"]
            .as_array()?
            .clone();
        let lookup = plans.first()?["status"]["bundleLookups"]
            .as_array()?
            .first()?
            .clone();
        (lookup["conditions"][0]["type"] == "BundleLookupPending").then_some(lookup)
    })
    .await;
    assert_eq!(pending["path"], missing.as_str());
    assert_eq!(pending["identifier"], "reverse-words.v0.1.0");
    let message = pending["conditions"][0]["message"].as_str().unwrap();
    assert!(message.contains(&missing), "{message}");
    assert_eq!(
        pending["conditions"][0]["reason"], "NotFound",
        "{pending:#}"
    );

    // After the namespace's unpack timeout: Failed, naming bundle, catalog and image.
    let plan = eventually("the plan Failed", WAIT, || async {
        let plans = get_json(&ns.name, "installplans")["items"]
            .as_array()?
            .clone();
        let plan = plans.first()?.clone();
        (plan["status"]["phase"] == "Failed").then_some(plan)
    })
    .await;
    let installed = plan["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Installed")
        .unwrap()
        .clone();
    assert_eq!(installed["reason"], "BundleLookupFailed", "{installed:#}");
    let message = installed["message"].as_str().unwrap();
    for needle in [
        "bundle reverse-words.v0.1.0",
        &format!("catalog {}/broken", ns.name),
        &missing,
        "unpack timeout of 6s",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert_eq!(
        plan["status"]["bundleLookups"][0]["conditions"][0]["type"],
        "BundleLookupFailed"
    );
    let sub = get_json(&ns.name, "subscription/reverse-words");
    assert!(
        sub["status"]["conditions"]
            .to_string()
            .contains("InstallPlanFailed"),
        "{:#}",
        sub["status"]
    );
}
