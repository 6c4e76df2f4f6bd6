//! The control plane is real: scheduling, kwok's fake kubelets, Deployment status and the
//! garbage collector all work, so later tests can rely on them.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};

use crate::harness::{TestNamespace, client, eventually, kubectl};

#[tokio::test]
async fn deployment_becomes_available_on_fake_nodes() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "deploy").await;
    let manifest = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.invalid/web:1}]
"#;
    kubectl(&["apply", "-n", &ns.name, "-f", "-"], Some(manifest)).ok();
    kubectl(
        &[
            "wait",
            "-n",
            &ns.name,
            "--for=condition=Available",
            "--timeout=90s",
            "deployment/web",
        ],
        None,
    )
    .ok();
    let deployment = Api::<Deployment>::namespaced(client, &ns.name)
        .get("web")
        .await
        .unwrap();
    let status = deployment.status.unwrap();
    assert_eq!(status.ready_replicas, Some(2), "{status:?}");
}

#[tokio::test]
async fn garbage_collector_deletes_owned_objects() {
    let client = client().await;
    let ns = TestNamespace::create(&client, "gc").await;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &ns.name);
    let owner: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = config_maps
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let child: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "child",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.metadata.uid.clone().unwrap(),
            }],
        }
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &child)
        .await
        .unwrap();

    config_maps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the child ConfigMap to be garbage-collected",
        Duration::from_secs(60),
        || {
            let config_maps = config_maps.clone();
            async move {
                config_maps
                    .get_opt("child")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}
