//! `sourceType: configmap` catalogs in upstream's ConfigMap format (the one upstream's own
//! e2e tests use): `customResourceDefinitions`, `clusterServiceVersions` and `packages`
//! keys, each a YAML list. Built here from our reverse-words bundles.

use std::time::Duration;

use serde_json::{Value, json};

use super::catalog_sources::{condition, get_json, wait_for_event, wait_for_state};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::OlmRun;

const WAIT: Duration = Duration::from_secs(60);

/// The stable channel of reverse-words (0.1.0 → 0.2.0 → 0.3.0 → 0.4.0) as ConfigMap data.
fn reverse_words_data() -> Value {
    let mut csvs = Vec::new();
    let mut crds = Vec::new();
    for version in ["0.1.0", "0.2.0", "0.3.0", "0.4.0"] {
        let dir = repo_root().join(format!("bundles/reverse-words/{version}/manifests"));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let manifest: Value = serde_yaml::from_str(&text).unwrap();
            match manifest["kind"].as_str() {
                Some("ClusterServiceVersion") => csvs.push(manifest),
                Some("CustomResourceDefinition") if version == "0.4.0" => crds.push(manifest),
                _ => {}
            }
        }
    }
    let packages = json!([{
        "packageName": "reverse-words",
        "channels": [{"name": "stable", "currentCSV": "reverse-words.v0.4.0"}],
        "defaultChannel": "stable",
    }]);
    json!({
        "customResourceDefinitions": serde_yaml::to_string(&crds).unwrap(),
        "clusterServiceVersions": serde_yaml::to_string(&csvs).unwrap(),
        "packages": serde_yaml::to_string(&packages).unwrap(),
    })
}

fn apply_config_map(namespace: &str, name: &str, data: Value) {
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    });
    kubectl(&["apply", "-f", "-"], Some(&config_map.to_string())).ok();
}

fn apply_catalog_source(namespace: &str, name: &str, config_map: &str) {
    let yaml = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  sourceType: configmap\n  configMap: {config_map}\n  displayName: ConfigMap catalog\n"
    );
    kubectl(&["apply", "-f", "-"], Some(&yaml)).ok();
}

#[tokio::test]
async fn a_config_map_catalog_loads_and_broken_content_keeps_the_last_good_one() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-cm").await;
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_config_map(&ns.name, "words", reverse_words_data());
    apply_catalog_source(&ns.name, "words", "words");

    wait_for_state(&ns.name, "words", "READY");
    let snapshot = eventually("the snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "words")
    })
    .await;
    assert_eq!(snapshot["packages"], json!(["reverse-words"]));
    assert_eq!(snapshot["bundles"], 4);
    let catsrc = get_json(&ns.name, "catalogsource/words");
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");
    assert_eq!(catsrc["status"]["configMapReference"]["name"], "words");

    // The ConfigMap is edited into something unreadable: the condition says where, an Event
    // is recorded, and the last good content stays in use.
    let mut broken = reverse_words_data();
    broken["clusterServiceVersions"] = json!("- name: [unterminated\n");
    apply_config_map(&ns.name, "words", broken);
    let catsrc = eventually("the InvalidConfigMap condition", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/words");
        (condition(&catsrc, "CatalogLoaded")["status"] == "False").then_some(catsrc)
    })
    .await;
    let loaded = condition(&catsrc, "CatalogLoaded");
    assert_eq!(loaded["reason"], "InvalidConfigMap");
    let message = loaded["message"].as_str().unwrap();
    assert!(message.contains("clusterServiceVersions"), "{message}");
    assert!(
        message.contains("still using the last good content"),
        "{message}"
    );
    assert_eq!(
        olm.snapshot(&ns.name, "words").unwrap()["digest"],
        snapshot["digest"]
    );
    wait_for_event(&ns.name, "words", "InvalidConfigMap").await;

    // Fixed again: loaded again (same content as before, so the same digest).
    apply_config_map(&ns.name, "words", reverse_words_data());
    eventually("the condition to recover", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/words");
        (condition(&catsrc, "CatalogLoaded")["status"] == "True").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_missing_config_map_is_reported_until_it_appears() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-cm-missing").await;
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_catalog_source(&ns.name, "later", "not-yet");
    wait_for_state(&ns.name, "later", "TRANSIENT_FAILURE");
    let catsrc = get_json(&ns.name, "catalogsource/later");
    assert_eq!(catsrc["status"]["reason"], "ConfigMapNotFound");
    assert!(
        catsrc["status"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{}/not-yet", ns.name)),
        "{:#}",
        catsrc["status"]
    );
    wait_for_event(&ns.name, "later", "ConfigMapNotFound").await;

    apply_config_map(&ns.name, "not-yet", reverse_words_data());
    wait_for_state(&ns.name, "later", "READY");
    eventually("the snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "later")
    })
    .await;
}
