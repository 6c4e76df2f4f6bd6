//! Owned API services on the real control plane: a CSV (reverse-words 0.3.0 owning an
//! aggregated API) gets the serving certificate, the Service, the auth bindings and an
//! APIService registered with the CA; the kube-aggregator then reaches the operator's API
//! server (played by a local process serving with the mounted certificate, the Service
//! pointed at it) and marks it Available, and only then is the CSV Succeeded. A second
//! CSV owning the same API fails with OwnerConflict; deleting the owner removes the
//! APIService.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::common::free_port;
use super::csv_lifecycle::{apply_crds, apply_json, csv_json, get, operator_group, wait_for_phase};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl};
use super::processes::OlmRun;
use super::served_locally::{point_service_here, secret_text, serve, write_mounted_files};

const CSV: &str = "reverse-words.v0.3.0";
const DEPLOYMENT: &str = "reverse-words-controller-manager";
const GROUP: &str = "olmtest.example.com";
const API_SERVICE: &str = "v1alpha1.olmtest.example.com";

/// Removes the APIService however the test ends: an unavailable aggregated API would
/// stall discovery (and namespace deletion) for every other test.
struct Unregister;

impl Drop for Unregister {
    fn drop(&mut self) {
        let _ = kubectl(
            &["delete", "apiservice", API_SERVICE, "--ignore-not-found"],
            None,
        );
    }
}

fn owning_csv(port: u16) -> Value {
    let mut csv = csv_json("reverse-words", "0.3.0");
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
        "name": "gizmos", "group": GROUP, "version": "v1alpha1", "kind": "Gizmo",
        "displayName": "Gizmo", "deploymentName": DEPLOYMENT, "containerPort": port,
    }]});
    csv
}

/// The operator's API server, played locally: discovery of its one group version.
fn discovery(path: &str, _request: &Value) -> Value {
    if path == format!("/apis/{GROUP}/v1alpha1") {
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/v1alpha1"),
               "resources": [{"name": "gizmos", "singularName": "gizmo", "namespaced": true, "kind": "Gizmo", "verbs": ["get", "list"]}]})
    } else {
        json!({})
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_api_service_is_registered_served_and_removed_with_its_csv() {
    // Aggregated APIs one at a time: an unavailable one disturbs discovery for the others.
    let _turn = super::packagemanifests::TURN.lock().await;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "apisvc").await;
    let rival = TestNamespace::create(&client, "apisvc-rival").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let _rival_olm = OlmRun::start(&rival.name, &["--leader-elect=false"]);
    let _unregister = Unregister;
    let _crds = super::harness::operator_crds_lock();
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let port = free_port();
    apply_json(&ns.name, &owning_csv(port));

    // Registered with the CA of the certificate OLM issued; not yet Available.
    let api_service = eventually("the APIService", Duration::from_secs(60), || async {
        let out = kubectl(&["get", "apiservice", API_SERVICE, "-o", "json"], None);
        out.success()
            .then(|| serde_json::from_str::<Value>(&out.stdout()).unwrap())
    })
    .await;
    let secret = get(&ns.name, &format!("secret/{DEPLOYMENT}-service-cert")).unwrap();
    let ca = base64::engine::general_purpose::STANDARD
        .decode(api_service["spec"]["caBundle"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        String::from_utf8(ca).unwrap(),
        secret_text(&secret, "olmCAKey")
    );
    assert_eq!(
        api_service["spec"]["service"]["name"],
        format!("{DEPLOYMENT}-service")
    );
    assert_eq!(
        api_service["spec"]["service"]["namespace"],
        ns.name.as_str()
    );
    assert_eq!(api_service["metadata"]["labels"]["olm.owner"], CSV);
    let csv = get(&ns.name, &format!("csv/{CSV}")).unwrap();
    assert_ne!(
        csv["status"]["phase"], "Succeeded",
        "not before the API is Available"
    );
    for (kind, name, namespace) in [
        (
            "clusterrolebinding",
            format!("{DEPLOYMENT}-service-system:auth-delegator"),
            None,
        ),
        (
            "rolebinding",
            format!("{DEPLOYMENT}-service-auth-reader"),
            Some("kube-system"),
        ),
    ] {
        let mut args = vec!["get", kind, name.as_str(), "-o", "name"];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        kubectl(&args, None).ok();
    }

    // The operator's API server, with the files OLM mounts at apiserver.local.config.
    let mounted = std::env::temp_dir().join(format!("olm-apisvc-{}/certificates", ns.name));
    write_mounted_files(&secret, &mounted, ("apiserver.crt", "apiserver.key"));
    let server = tokio::spawn(async move {
        let calls = Arc::new(AtomicUsize::new(0));
        serve(
            port,
            &mounted.join("apiserver.crt"),
            &mounted.join("apiserver.key"),
            calls,
            discovery,
        )
        .await;
    });
    point_service_here(&ns.name, &format!("{DEPLOYMENT}-service"));
    wait_for_phase(&ns.name, CSV, "Succeeded", None).await;
    let available = kubectl(
        &[
            "get",
            "apiservice",
            API_SERVICE,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
        ],
        None,
    )
    .ok();
    assert_eq!(available.stdout(), "True");

    // Another namespace's CSV owning the same API: OwnerConflict.
    operator_group(&rival.name, "og", Some(&[&rival.name]));
    apply_json(&rival.name, &owning_csv(free_port()));
    let conflict = wait_for_phase(&rival.name, CSV, "Failed", Some("OwnerConflict")).await;
    assert_eq!(
        conflict["status"]["message"],
        format!("unable to adopt APIService {API_SERVICE}")
    );

    // The owner goes, and its APIService with it.
    kubectl(&["delete", "csv", CSV, "-n", &ns.name, "--wait=true"], None).ok();
    server.abort();
    let gone = kubectl(
        &[
            "get",
            "apiservice",
            API_SERVICE,
            "--ignore-not-found",
            "-o",
            "name",
        ],
        None,
    )
    .ok();
    assert_eq!(gone.stdout().trim(), "");
    kubectl(
        &["delete", "csv", CSV, "-n", &rival.name, "--wait=false"],
        None,
    )
    .ok();
}
