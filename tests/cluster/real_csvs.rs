//! Every CSV of the real community-operators bundles in `../shared/testdata` is accepted by
//! the API server through our CRD, and its install strategy survives the round trip through
//! etcd and through our Rust types unchanged (nothing pruned).

use std::path::{Path, PathBuf};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use olm::api::ClusterServiceVersion;
use serde_json::Value;

use crate::harness::{TestNamespace, client, install_crds};

fn csv_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            csv_files(&path, found);
        } else if path
            .to_string_lossy()
            .ends_with(".clusterserviceversion.yaml")
        {
            found.push(path);
        }
    }
}

/// JSON numbers compared by value (`1.0` and `1` are the same to the API server).
fn normalize(value: &Value) -> Value {
    match value {
        Value::Number(n) => serde_json::json!(n.as_f64()),
        Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        other => other.clone(),
    }
}

#[tokio::test]
async fn every_real_csv_is_accepted_and_keeps_its_install_strategy() {
    install_crds();
    let mut files = Vec::new();
    csv_files(&crate::common::community_operators(), &mut files);
    assert!(
        files.len() > 200,
        "expected the community-operators CSVs, found {}",
        files.len()
    );

    let client = client().await;
    let ns = TestNamespace::create(&client, "real-csvs").await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "ClusterServiceVersion"),
        "clusterserviceversions",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns.name, &resource);

    let failures: Vec<String> = futures::stream::iter(files.iter().enumerate())
        .map(|(index, file)| {
            let api = api.clone();
            async move {
                let text = std::fs::read_to_string(file).unwrap();
                let mut object: Value = match serde_yaml::from_str(&text) {
                    Ok(v) => v,
                    Err(e) => return Some(format!("{}: not YAML: {e}", file.display())),
                };
                // Two bundles may reuse a CSV name; keep names unique within the namespace.
                let name = format!("{}-{index}", object["metadata"]["name"].as_str().unwrap_or("csv"));
                object["metadata"] = serde_json::json!({ "name": name, "annotations": object["metadata"]["annotations"] });
                if object["metadata"]["annotations"].is_null() {
                    object["metadata"].as_object_mut().unwrap().remove("annotations");
                }
                let sent_install = normalize(&object["spec"]["install"]);
                let request: DynamicObject = serde_json::from_value(object).unwrap();
                let stored = match api.create(&PostParams::default(), &request).await {
                    Ok(stored) => stored,
                    Err(kube::Error::Api(status)) => {
                        return Some(format!("{}: refused: {:.400}", file.display(), status.message));
                    }
                    Err(e) => return Some(format!("{}: refused: {e}", file.display())),
                };
                let stored = serde_json::to_value(&stored).unwrap();
                if normalize(&stored["spec"]["install"]) != sent_install {
                    return Some(format!("{}: install strategy changed by the API server", file.display()));
                }
                // And through our typed API: what we read, we write back unchanged.
                let typed: ClusterServiceVersion = match serde_json::from_value(stored) {
                    Ok(t) => t,
                    Err(e) => return Some(format!("{}: does not deserialize: {e}", file.display())),
                };
                let rewritten = serde_json::to_value(&typed.spec.install).unwrap();
                if normalize(&rewritten) != sent_install {
                    return Some(format!("{}: install strategy changed by the Rust types", file.display()));
                }
                None
            }
        })
        .buffer_unordered(8)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} of {} CSVs failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
