//! Registry mirrors (registries.conf, issue 43): a catalog image and its bundle images
//! served only by a mirror, under names whose own registry cannot be reached
//! (`registry.invalid`, a name that never resolves): the catalog is READY, saying which
//! mirror served it, and an install from it Succeeds. With a digest-only mirror, a tag is
//! refused as the configuration says (it goes to the unreachable source) and a digest is
//! served.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::get_json;
use super::harness::{TestNamespace, client, eventually, install_crds, olm_bin};
use super::image_installs::{
    bundles_with, catalog_source, installed, publish, setup_namespace, subscribe,
};
use super::processes::OlmRun;
use super::registry::{PASSWORD, TestRegistry};

const WAIT: Duration = Duration::from_secs(120);

/// The `Connected` condition of a CatalogSource once it says `status`.
async fn connected(ns: &str, name: &str, status: &str) -> Value {
    eventually(&format!("{name}: Connected={status}"), WAIT, || async {
        let source = get_json(ns, &format!("catalogsource/{name}"));
        let condition = source["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Connected")?
            .clone();
        (condition["status"] == status).then_some(condition)
    })
    .await
}

#[tokio::test]
async fn a_catalog_and_its_bundles_are_pulled_from_a_mirror_only() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "mirrors").await;
    let registry = TestRegistry::start("mirrors", true);
    let auth = registry.auth_file(PASSWORD);
    let work = registry.dir.clone();
    let catalog_dir = publish(
        &registry,
        &bundles_with(&work.join("v1"), &["0.1.0", "0.2.0"]),
        &auth,
    );
    // The catalog names its bundle images under a registry that cannot be reached; the
    // images themselves are only in the local registry, the mirror.
    let mirror = format!("{}/olm", registry.host);
    let file = catalog_dir.join("reverse-words/catalog.json");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(&format!("{mirror}/"), "registry.invalid/olm/"),
    )
    .unwrap();
    let pushed = Command::new(olm_bin())
        .args(["catalog", "build"])
        .arg(&catalog_dir)
        .args([
            "-t",
            &format!("{mirror}/mirrored:latest"),
            "--push",
            "--layout",
        ])
        .arg(work.join("layout"))
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
    let conf = work.join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "[[registry]]\nprefix = \"registry.invalid/olm\"\nlocation = \"registry.invalid/olm\"\n[[registry.mirror]]\nlocation = \"{mirror}\"\n\n[[registry]]\nprefix = \"digest-only.invalid/olm\"\nlocation = \"digest-only.invalid/olm\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"{mirror}\"\n"
        ),
    )
    .unwrap();
    let _olm = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
            "--registries-conf",
            conf.to_str().unwrap(),
        ],
    );
    setup_namespace(&ns.name, &registry, "");
    catalog_source(&ns.name, "mirrored", "registry.invalid/olm/mirrored:latest");
    subscribe(&ns.name, "mirrored");
    installed(&ns.name, "reverse-words.v0.2.0").await;
    let ready = connected(&ns.name, "mirrored", "True").await;
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("from mirror {}", registry.host)),
        "{message}"
    );
    assert!(
        registry.requests("GET", "/olm/reverse-words-bundle/manifests/sha256:") >= 1,
        "the bundle image came from the mirror"
    );
    let digest = message
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap()
        .to_string();

    // Digest-only: a tag goes to the source, which cannot be reached, and says so...
    catalog_source(
        &ns.name,
        "by-tag",
        "digest-only.invalid/olm/mirrored:latest",
    );
    let refused = connected(&ns.name, "by-tag", "False").await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("digest-only.invalid/olm/mirrored:latest"),
        "{message}"
    );
    assert!(
        !message.contains(&registry.host),
        "the mirror was not asked: {message}"
    );
    // ...and a digest is served by the mirror.
    let by_digest = format!("digest-only.invalid/olm/mirrored@{digest}");
    catalog_source(&ns.name, "by-digest", &by_digest);
    let ready = connected(&ns.name, "by-digest", "True").await;
    let message = ready["message"].as_str().unwrap();
    assert!(message.contains("from mirror"), "{message}");
}
