//! Registry mirrors (registries.conf, issue 43): a catalog image and its bundle images
//! served only by a mirror, under names whose own registry cannot be reached
//! (`registry.invalid`, a name that never resolves): the catalog is READY, saying which
//! mirror served it, and an install from it Succeeds. With a digest-only mirror, a tag is
//! refused as the configuration says (it goes to the unreachable source) and a digest is
//! served. The same from OpenShift's ImageDigestMirrorSet and ImageTagMirrorSet objects,
//! watched once their CRDs exist.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::get_json;
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubectl, olm_bin, wait_crd_established,
};
use super::image_installs::{
    bundles_with, catalog_source, installed, publish, setup_namespace, subscribe,
};
use super::processes::OlmRun;
use super::registry::{PASSWORD, TestRegistry};

const WAIT: Duration = Duration::from_secs(120);

/// The `Connected` condition of a CatalogSource once it says `status`.
pub(crate) async fn connected(ns: &str, name: &str, status: &str) -> Value {
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

/// A catalog image under `{registry}/olm/mirrored:latest` whose bundles are named under
/// `source/` (a registry that cannot be reached).
pub(crate) fn mirrored_catalog(registry: &TestRegistry, source: &str) {
    let auth = registry.auth_file(PASSWORD);
    let work = registry.dir.clone();
    let catalog_dir = publish(registry, &bundles_with(&work.join("v1"), &["0.2.0"]), &auth);
    let file = catalog_dir.join("reverse-words/catalog.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let local = format!("{}/olm/", registry.host);
    std::fs::write(&file, text.replace(&local, &format!("{source}/"))).unwrap();
    let pushed = Command::new(olm_bin())
        .args(["catalog", "build"])
        .arg(&catalog_dir)
        .args(["-t", &format!("{}/olm/mirrored:latest", registry.host)])
        .args(["--push", "--layout"])
        .arg(work.join("layout"))
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );
}

const MIRROR_SET_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: imagedigestmirrorsets.config.openshift.io}
spec:
  group: config.openshift.io
  scope: Cluster
  names: {kind: ImageDigestMirrorSet, listKind: ImageDigestMirrorSetList, plural: imagedigestmirrorsets, singular: imagedigestmirrorset}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: imagetagmirrorsets.config.openshift.io}
spec:
  group: config.openshift.io
  scope: Cluster
  names: {kind: ImageTagMirrorSet, listKind: ImageTagMirrorSetList, plural: imagetagmirrorsets, singular: imagetagmirrorset}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
"#;

/// Deletes what a test made cluster-wide, also when it fails.
struct ClusterObjects(Vec<String>);

impl Drop for ClusterObjects {
    fn drop(&mut self) {
        for object in &self.0 {
            kubectl(
                &["delete", object, "--ignore-not-found", "--wait=false"],
                None,
            )
            .ok();
        }
    }
}

#[tokio::test]
async fn image_digest_and_tag_mirror_sets_are_followed_once_their_crds_exist() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "mirror-sets").await;
    let registry = TestRegistry::start("mirror-sets", true);
    let mirror = format!("{}/olm", registry.host);
    mirrored_catalog(&registry, "idms.invalid/olm");
    let work = registry.dir.clone();
    // olm run starts before the CRDs exist: they are found while it runs.
    let _olm = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
        ],
    );
    setup_namespace(&ns.name, &registry, "");
    let name = ns.name.clone();
    let _cleanup = ClusterObjects(vec![
        format!("imagedigestmirrorset.config.openshift.io/{name}"),
        format!("imagetagmirrorset.config.openshift.io/{name}"),
        "crd/imagedigestmirrorsets.config.openshift.io".into(),
        "crd/imagetagmirrorsets.config.openshift.io".into(),
    ]);
    kubectl(&["apply", "-f", "-"], Some(MIRROR_SET_CRDS)).ok();
    for crd in ["imagedigestmirrorsets", "imagetagmirrorsets"] {
        wait_crd_established(&client, &format!("{crd}.config.openshift.io")).await;
    }
    let sets = format!(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata: {{name: {name}}}\nspec:\n  imageDigestMirrors:\n  - {{source: idms.invalid/olm, mirrors: [{mirror}], mirrorSourcePolicy: NeverContactSource}}\n---\napiVersion: config.openshift.io/v1\nkind: ImageTagMirrorSet\nmetadata: {{name: {name}}}\nspec:\n  imageTagMirrors:\n  - {{source: itms.invalid/olm, mirrors: [{mirror}]}}\n"
    );
    kubectl(&["apply", "-f", "-"], Some(&sets)).ok();

    // A tag through the tag mirror set; the bundle (by digest) through the digest one.
    catalog_source(&ns.name, "by-tag", "itms.invalid/olm/mirrored:latest");
    subscribe(&ns.name, "by-tag");
    installed(&ns.name, "reverse-words.v0.2.0").await;
    let ready = connected(&ns.name, "by-tag", "True").await;
    let message = ready["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("from mirror {}", registry.host)),
        "{message}"
    );
    let digest = message
        .split_whitespace()
        .find(|w| w.starts_with("sha256:"))
        .unwrap();
    // A digest through the digest mirror set.
    let by_digest = format!("idms.invalid/olm/mirrored@{digest}");
    catalog_source(&ns.name, "by-digest", &by_digest);
    connected(&ns.name, "by-digest", "True").await;
    // NeverContactSource: a tag has no mirror and the source may not be asked.
    catalog_source(&ns.name, "refused", "idms.invalid/olm/mirrored:latest");
    let refused = connected(&ns.name, "refused", "False").await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("ImageDigestMirrorSet/{name}")),
        "{message}"
    );
}
