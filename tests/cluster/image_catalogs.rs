//! Image catalogs: a CatalogSource with `spec.image` and no address, pulled and served by
//! `olm run` itself from a real registry (Debian's docker-registry on loopback), with no
//! catalog pod.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::catalog_sources::{condition, get_json};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubectl, olm_bin, repo_root,
};
use super::processes::OlmRun;
use super::registry::{PASSWORD, TestRegistry, USER};

const WAIT: Duration = Duration::from_secs(90);

pub(super) fn image_source_yaml(
    namespace: &str,
    name: &str,
    image: &str,
    extra_spec: &str,
) -> String {
    format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: {name}
  namespace: {namespace}
spec:
  sourceType: grpc
  image: {image}
  displayName: Image catalog
  publisher: olm-rs tests
{extra_spec}"#
    )
}

/// `olm catalog build DIR -t IMAGE --push`; returns the digest.
pub(super) fn push_catalog(dir: &Path, image: &str, layout: &Path, auth: Option<&Path>) -> String {
    let mut cmd = Command::new(olm_bin());
    cmd.args(["catalog", "build"])
        .arg(dir)
        .args(["-t", image, "--push", "--layout"])
        .arg(layout)
        .env(
            "REGISTRY_AUTH_FILE",
            auth.unwrap_or(Path::new("/nonexistent")),
        );
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub(super) fn packages(olm: &OlmRun, namespace: &str, name: &str) -> Option<Vec<String>> {
    let snapshot = olm.snapshot(namespace, name)?;
    serde_json::from_value(snapshot["packages"].clone()).ok()
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

#[tokio::test]
async fn an_image_catalog_is_pulled_polled_with_one_head_and_swapped_on_a_new_digest() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "image-catalog").await;
    let registry = TestRegistry::start("image-catalog", false);
    let work = registry.dir.clone();
    let image = format!("{}/olm/catalog:latest", registry.host);
    let first = push_catalog(
        &repo_root().join("catalog"),
        &image,
        &work.join("layout"),
        None,
    );

    let cache = work.join("cache");
    let olm = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    let poll = "  updateStrategy:\n    registryPoll:\n      interval: 1s\n";
    kubectl(
        &["apply", "-f", "-"],
        Some(&image_source_yaml(&ns.name, "images", &image, poll)),
    )
    .ok();
    let all = eventually("the image catalog's snapshot", WAIT, || async {
        packages(&olm, &ns.name, "images")
    })
    .await;
    assert!(all.contains(&"at".to_string()), "{all:?}");
    let catsrc = eventually("READY", WAIT, || async {
        let c = get_json(&ns.name, "catalogsource/images");
        (c["status"]["connectionState"]["lastObservedState"] == "READY"
            && c["status"]["latestImageRegistryPoll"].is_string())
        .then_some(c)
    })
    .await;
    let connected = condition(&catsrc, "Connected");
    assert!(
        connected["message"].as_str().unwrap().contains(&first),
        "the resolved digest is named: {connected:#}"
    );
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");

    // Steady state: ten polls, each one manifest HEAD and nothing else; no status write.
    let head = "/manifests/latest";
    let version = catsrc["metadata"]["resourceVersion"].clone();
    let writes = r#"olm_status_writes_total{controller="catalogsource"}"#;
    let writes_before = olm.metric(writes).unwrap();
    let heads_before = registry.requests("HEAD", head);
    let others_before = registry
        .log_text()
        .lines()
        .filter(|l| l.contains("\"GET ") || l.contains("\"PUT ") || l.contains("\"POST "))
        .count();
    eventually("ten more polls", WAIT, || async {
        (registry.requests("HEAD", head) >= heads_before + 10).then_some(())
    })
    .await;
    let others_after = registry
        .log_text()
        .lines()
        .filter(|l| l.contains("\"GET ") || l.contains("\"PUT ") || l.contains("\"POST "))
        .count();
    assert_eq!(
        others_after, others_before,
        "polls of an unchanged digest only HEAD"
    );
    assert_eq!(
        olm.metric(writes).unwrap(),
        writes_before,
        "no status write"
    );
    let catsrc = get_json(&ns.name, "catalogsource/images");
    assert_eq!(
        catsrc["metadata"]["resourceVersion"], version,
        "{:#}",
        catsrc["status"]
    );

    // A new catalog under the same tag: the next poll swaps the snapshot.
    let changed = work.join("changed");
    copy_dir(&repo_root().join("catalog"), &changed);
    std::fs::remove_dir_all(changed.join("at")).unwrap();
    let second = push_catalog(&changed, &image, &work.join("layout"), None);
    assert_ne!(first, second);
    eventually("the new content", WAIT, || async {
        packages(&olm, &ns.name, "images").filter(|p| !p.contains(&"at".to_string()))
    })
    .await;
    eventually("the new digest in the status", WAIT, || async {
        let c = get_json(&ns.name, "catalogsource/images");
        condition(&c, "Connected")["message"]
            .as_str()
            .unwrap()
            .contains(&second)
            .then_some(())
    })
    .await;
    // Pulled once per digest, into the cache directory (a folder per repository).
    let cached: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .flat_map(|repository| std::fs::read_dir(repository.unwrap().path()).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(
        cached.contains(&first.trim_start_matches("sha256:").to_string()),
        "{cached:?}"
    );
    assert!(
        cached.contains(&second.trim_start_matches("sha256:").to_string()),
        "{cached:?}"
    );
}

/// Waits for a condition with `reason` whose message contains `needle`; a timeout shows the
/// conditions last seen, so a flake says what the status was instead.
fn wait_for_reason(
    namespace: &str,
    name: &str,
    reason: &'static str,
    needle: String,
) -> impl std::future::Future<Output = serde_json::Value> {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    async move {
        let start = std::time::Instant::now();
        loop {
            let c = get_json(&namespace, &format!("catalogsource/{name}"));
            let conditions = c["status"]["conditions"].clone();
            let found = conditions.as_array().and_then(|all| {
                all.iter()
                    .find(|cond| {
                        cond["reason"] == reason
                            && cond["message"]
                                .as_str()
                                .is_some_and(|m| m.contains(&needle))
                    })
                    .cloned()
            });
            if let Some(found) = found {
                return found;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out after {WAIT:?} waiting for {name}: reason {reason}; last status: {:#}",
                c["status"]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test]
async fn image_catalog_failures_name_the_image_and_the_cause() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "image-failures").await;
    let mut registry = TestRegistry::start("image-failures", true);
    let work = registry.dir.clone();
    let good_auth = registry.auth_file(PASSWORD);
    let image = format!("{}/olm/catalog:v1", registry.host);
    push_catalog(
        &repo_root().join("catalog"),
        &image,
        &work.join("layout"),
        Some(&good_auth),
    );
    // A bundle image: a manifest that is not a catalog image.
    let bundle = format!("{}/olm/at-bundle:v0.1.0", registry.host);
    let out = Command::new(olm_bin())
        .args([
            "bundle",
            "build",
            "bundles/at/0.1.0",
            "-t",
            &bundle,
            "--push",
            "--layout",
        ])
        .arg(work.join("layout"))
        .current_dir(repo_root())
        .env("REGISTRY_AUTH_FILE", &good_auth)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (name, password) in [("good", PASSWORD), ("wrong", "wrong")] {
        kubectl(
            &[
                "create",
                "secret",
                "docker-registry",
                name,
                "-n",
                &ns.name,
                &format!("--docker-server={}", registry.host),
                &format!("--docker-username={USER}"),
                &format!("--docker-password={password}"),
            ],
            None,
        )
        .ok();
    }
    let olm = OlmRun::start_env(
        &ns.name,
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            work.join("cache").to_str().unwrap(),
        ],
        &[("OLM_REGISTRY_RETRIES", "0")],
    );
    let unknown = format!("{}/olm/nothing:v1", registry.host);
    let sources = [
        ("anonymous", image.as_str(), ""),
        ("wrong-password", image.as_str(), "  secrets: [wrong]\n"),
        ("missing-secret", image.as_str(), "  secrets: [absent]\n"),
        ("unknown", unknown.as_str(), "  secrets: [good]\n"),
        ("not-a-catalog", bundle.as_str(), "  secrets: [good]\n"),
        (
            "good",
            image.as_str(),
            "  secrets: [good]\n  updateStrategy:\n    registryPoll:\n      interval: 1s\n",
        ),
    ];
    for (name, image, extra) in sources {
        kubectl(
            &["apply", "-f", "-"],
            Some(&image_source_yaml(&ns.name, name, image, extra)),
        )
        .ok();
    }
    wait_for_reason(&ns.name, "anonymous", "Unauthorized", image.clone()).await;
    wait_for_reason(&ns.name, "wrong-password", "Unauthorized", image.clone()).await;
    let missing =
        wait_for_reason(&ns.name, "missing-secret", "SecretNotFound", image.clone()).await;
    assert!(
        missing["message"].as_str().unwrap().contains("absent"),
        "{missing:#}"
    );
    wait_for_reason(&ns.name, "unknown", "NotFound", unknown.clone()).await;
    let refused = wait_for_reason(&ns.name, "not-a-catalog", "InvalidImage", bundle.clone()).await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("not a catalog image"),
        "{refused:#}"
    );
    eventually("the good catalog", WAIT, || async {
        packages(&olm, &ns.name, "good")
    })
    .await;

    // The registry goes down: the last good snapshot stays, and the status says so.
    registry.stop();
    let loaded = wait_for_reason(&ns.name, "good", "Unreachable", image.clone()).await;
    assert!(
        loaded["message"]
            .as_str()
            .unwrap()
            .contains("still using the last good content"),
        "{loaded:#}"
    );
    assert!(packages(&olm, &ns.name, "good").is_some());
    let catsrc = get_json(&ns.name, "catalogsource/good");
    assert_eq!(
        catsrc["status"]["connectionState"]["lastObservedState"],
        "READY"
    );
}
