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

/// reverse-words without its v0.4.0: the channel's head is v0.3.0.
fn reverse_words_up_to_v0_3_0() -> Value {
    let mut data = reverse_words_data();
    let csvs: Vec<Value> =
        serde_yaml::from_str(data["clusterServiceVersions"].as_str().unwrap()).unwrap();
    let csvs: Vec<Value> = csvs
        .into_iter()
        .filter(|c| c["metadata"]["name"] != "reverse-words.v0.4.0")
        .collect();
    data["clusterServiceVersions"] = json!(serde_yaml::to_string(&csvs).unwrap());
    data["packages"] = json!(
        serde_yaml::to_string(&json!([{
            "packageName": "reverse-words",
            "channels": [{"name": "stable", "currentCSV": "reverse-words.v0.3.0"}],
            "defaultChannel": "stable",
        }]))
        .unwrap()
    );
    data
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

/// Upstream's tests and tools take a ConfigMap catalog as updated when, as written (whole
/// seconds), `lastConnect` is after `configMapReference.lastUpdateTime` and that is after
/// the previous one: ours reloads within the same second, and must still say so.
#[tokio::test]
async fn an_edited_config_map_is_connected_after_its_update_as_clients_compare_it() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-cm-connect").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_config_map(&ns.name, "words", reverse_words_data());
    apply_catalog_source(&ns.name, "words", "words");
    // RFC 3339 in UTC at second precision: text order is time order.
    let connected_after_update = |catsrc: &Value| {
        let state = &catsrc["status"]["connectionState"];
        let update = catsrc["status"]["configMapReference"]["lastUpdateTime"].as_str()?;
        (state["lastObservedState"] == "READY" && state["lastConnect"].as_str()? > update)
            .then_some(update.to_string())
    };
    let before = eventually("connected after the first load", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/words");
        connected_after_update(&catsrc).map(|_| catsrc)
    })
    .await;

    apply_config_map(&ns.name, "words", reverse_words_up_to_v0_3_0());
    let old_reference = &before["status"]["configMapReference"];
    eventually("connected after the edit", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/words");
        let update = connected_after_update(&catsrc)?;
        let reference = &catsrc["status"]["configMapReference"];
        (update.as_str() > old_reference["lastUpdateTime"].as_str()?
            && reference["resourceVersion"] != old_reference["resourceVersion"])
            .then_some(())
    })
    .await;
}

/// Upstream's ConfigMap registry loads package names that are not DNS-1123 labels (its own
/// tests use them): so does ours, for ConfigMap catalogs (file-based ones stay strict).
#[tokio::test]
async fn a_config_map_catalog_loads_what_upstreams_loads() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-cm-lenient").await;
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let mut data = reverse_words_data();
    let packages = data["packages"]
        .as_str()
        .unwrap()
        .replace("packageName: reverse-words", "packageName: ReverseWords");
    assert!(packages.contains("ReverseWords"), "{packages}");
    data["packages"] = json!(packages);
    apply_config_map(&ns.name, "words", data);
    apply_catalog_source(&ns.name, "words", "words");
    wait_for_state(&ns.name, "words", "READY");
    let snapshot = eventually("the snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "words")
    })
    .await;
    assert_eq!(snapshot["packages"], json!(["ReverseWords"]));
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

/// As upstream, a CatalogSource owns its ConfigMap: deleting the catalog garbage-collects
/// the ConfigMap. Upstream's fail-forward specs then create both again under the same names
/// at once, with newer content: the new object is a new catalog (its own content, a status
/// written after it was created), nothing of the old one carried over.
#[tokio::test]
async fn a_catalog_deleted_and_created_again_owns_a_new_config_map() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-cm-again").await;
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_config_map(&ns.name, "words-configmap", reverse_words_data());
    apply_catalog_source(&ns.name, "words", "words-configmap");
    wait_for_state(&ns.name, "words", "READY");
    let first = get_json(&ns.name, "catalogsource/words");
    let owned = eventually("the ConfigMap owned by its CatalogSource", WAIT, || async {
        let cm = get_json(&ns.name, "configmap/words-configmap");
        let owners = cm["metadata"]["ownerReferences"].as_array().cloned()?;
        owners
            .iter()
            .any(|o| o["kind"] == "CatalogSource" && o["uid"] == first["metadata"]["uid"])
            .then_some(owners)
    })
    .await;
    assert_eq!(owned[0]["controller"], false, "{owned:?}");

    kubectl(&["delete", "catalogsource", "words", "-n", &ns.name], None).ok();
    eventually("the ConfigMap garbage-collected with it", WAIT, || async {
        let out = kubectl(&["get", "configmap/words-configmap", "-n", &ns.name], None);
        (!out.success()).then_some(())
    })
    .await;

    // Newer content: a channel with one more bundle's worth cut off (0.1.0 → 0.3.0).
    let newer = reverse_words_up_to_v0_3_0();
    apply_config_map(&ns.name, "words-configmap", newer);
    apply_catalog_source(&ns.name, "words", "words-configmap");
    let second = eventually(
        "the new object READY with its own content",
        WAIT,
        || async {
            let catsrc = get_json(&ns.name, "catalogsource/words");
            let snapshot = olm.snapshot(&ns.name, "words")?;
            (catsrc["metadata"]["uid"] != first["metadata"]["uid"]
                && catsrc["status"]["connectionState"]["lastObservedState"] == "READY"
                && snapshot["bundles"] == 3)
                .then_some(catsrc)
        },
    )
    .await;
    let created = second["metadata"]["creationTimestamp"].as_str().unwrap();
    for (what, time) in [
        (
            "lastConnect",
            &second["status"]["connectionState"]["lastConnect"],
        ),
        (
            "configMapReference.lastUpdateTime",
            &second["status"]["configMapReference"]["lastUpdateTime"],
        ),
    ] {
        // RFC 3339 in UTC at second precision: compared as text.
        assert!(
            time.as_str().unwrap() >= created,
            "{what} {time} is older than the object ({created})"
        );
    }
}
