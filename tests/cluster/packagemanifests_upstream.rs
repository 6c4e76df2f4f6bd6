//! Differential (feature `upstream-tests`): upstream's package-server v0.46.0 (built by
//! `hack/upstream-olm/build`, run by `hack/upstream-olm/package-server` as a local process on
//! this control plane) and `olm run --packages-address` serve the same CatalogSources; every
//! PackageManifest's `status`, labels and creationTimestamp, listed and fetched one by one,
//! and every icon must be equal. Lists upstream leaves unordered are sorted first:
//! `relatedImages` (a Go map's order) and channel entries of equal version (an unstable sort).
//! Differences that remain by design are in the README (packagemanifests section).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use kube::Client;
use serde_json::Value;

use super::harness::{
    TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, repo_root,
};
use super::packagemanifests::{PackagesServer, TURN, source};
use super::processes::{Process, free_port, olm_serve, opm_serve, wait_for_port};

const API: &str = "/apis/packages.operators.coreos.com/v1";
/// Upstream connects to a registry on its first READY state and then lists every bundle.
const LOAD: Duration = Duration::from_secs(180);

/// Upstream's package-server on a loopback port, reached directly with the kubeconfig's
/// client certificate (its self-signed serving certificate is not verified).
struct UpstreamPackageServer {
    _process: Process,
    client: Client,
}

impl UpstreamPackageServer {
    async fn start(global: &str) -> UpstreamPackageServer {
        let port = free_port();
        let mut process = Process::spawn(
            "upstream-package-server",
            Command::new(repo_root().join("hack/upstream-olm/package-server"))
                .env("KUBECONFIG", kubeconfig_path())
                .args([&port.to_string(), global]),
        );
        wait_for_port(&mut process, port, Duration::from_secs(600));
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig_path()).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.cluster_url = format!("https://127.0.0.1:{port}").parse().unwrap();
        config.root_cert = None;
        config.accept_invalid_certs = true;
        UpstreamPackageServer {
            _process: process,
            client: Client::try_from(config).unwrap(),
        }
    }
}

async fn get_json(client: &Client, path: &str) -> Result<Value, kube::Error> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(request).await
}

/// (Content-Type, bytes) of a GET.
async fn get_bytes(client: &Client, path: &str) -> (String, Vec<u8>) {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 200, "GET {path}");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    use http_body_util::BodyExt;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (content_type, body.to_vec())
}

/// The namespace's PackageManifests by (catalog, package), once every expected one is listed.
async fn listed_when_complete(
    client: &Client,
    who: &str,
    namespace: &str,
    expected: &[(String, String)],
) -> BTreeMap<(String, String), Value> {
    let path = format!("{API}/namespaces/{namespace}/packagemanifests");
    eventually(&format!("{who} to list every package"), LOAD, || async {
        let list = get_json(client, &path).await.ok()?;
        let items: BTreeMap<(String, String), Value> = list["items"]
            .as_array()?
            .iter()
            .map(|i| (key(i), i.clone()))
            .collect();
        expected
            .iter()
            .all(|k| items.contains_key(k))
            .then_some(items)
    })
    .await
}

fn key(item: &Value) -> (String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        s(&item["status"]["catalogSource"]),
        s(&item["metadata"]["name"]),
    )
}

/// What must be equal: status, labels, name, namespace and creationTimestamp, with the
/// lists upstream leaves unordered put in order.
fn comparable(item: &Value) -> Value {
    let mut status = item["status"].clone();
    for channel in status["channels"].as_array_mut().into_iter().flatten() {
        if let Some(images) = channel["currentCSVDesc"]["relatedImages"].as_array_mut() {
            images.sort_by_key(std::string::ToString::to_string);
        }
        if let Some(entries) = channel["entries"].as_array_mut() {
            sort_equal_versions(entries);
        }
    }
    let metadata = &item["metadata"];
    serde_json::json!({
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "creationTimestamp": metadata["creationTimestamp"],
        "labels": metadata["labels"],
        "status": status,
    })
}

/// Upstream sorts entries by version with an unstable sort: runs of one version are put in
/// name order; the order between versions is left as served, so it is still compared.
fn sort_equal_versions(entries: &mut [Value]) {
    let mut start = 0;
    while start < entries.len() {
        let version = entries[start]["version"].clone();
        let end = start
            + entries[start..]
                .iter()
                .take_while(|e| e["version"] == version)
                .count();
        entries[start..end].sort_by_key(|e| e["name"].to_string());
        start = end;
    }
}

/// Every path at which two JSON values differ, as "path: upstream … ours …".
fn differences(path: &str, upstream: &Value, ours: &Value, out: &mut Vec<String>) {
    match (upstream, ours) {
        (Value::Object(u), Value::Object(o)) => {
            for k in u.keys().chain(o.keys().filter(|k| !u.contains_key(*k))) {
                let null = Value::Null;
                differences(
                    &format!("{path}.{k}"),
                    u.get(k).unwrap_or(&null),
                    o.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(u), Value::Array(o)) if u.len() == o.len() => {
            for (i, (a, b)) in u.iter().zip(o).enumerate() {
                differences(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ if upstream != ours => {
            let short = |v: &Value| v.to_string().chars().take(200).collect::<String>();
            out.push(format!(
                "{path}: upstream {} | ours {}",
                short(upstream),
                short(ours)
            ));
        }
        _ => {}
    }
}

#[tokio::test]
async fn packagemanifests_equal_those_of_upstream_package_server() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "pm-upstream").await;
    // The testdata as upstream's registry serves it (kuadrant-operator aside: opm refuses
    // the whole catalog for it), and our catalog as ours serves it.
    let testdata = std::env::temp_dir().join(format!("olm-pm-upstream-{}", ns.name));
    super::common::render_testdata(&testdata, false);
    let ports = [free_port(), free_port()];
    let _registries = [
        opm_serve(&testdata, ports[0]),
        olm_serve(&repo_root().join("catalog"), ports[1]),
    ];
    let mut expected = Vec::new();
    for ((name, display), port, dir) in [
        (("testdata", "Community Operators"), ports[0], &testdata),
        (
            ("ours", "OLM-rs Operators"),
            ports[1],
            &repo_root().join("catalog"),
        ),
    ] {
        kubectl(
            &["apply", "-f", "-"],
            Some(&source(
                &ns.name,
                name,
                port,
                display,
                &format!("source: {name}"),
            )),
        )
        .ok();
        // Upstream connects only to CatalogSources whose status has a registry service, as
        // its catalog operator writes for an address.
        let status = serde_json::json!({"status": {"registryService": {
            "protocol": "grpc",
            "createdAt": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        }}});
        kubectl(
            &[
                "patch",
                "catalogsource",
                name,
                "-n",
                &ns.name,
                "--subresource",
                "status",
                "--type",
                "merge",
                "-p",
                &status.to_string(),
            ],
            None,
        )
        .ok();
        let content = olm::catalog::reading::load::load_path(dir).unwrap();
        expected.extend(
            content
                .packages
                .iter()
                .map(|p| (name.to_string(), p.name.clone())),
        );
    }
    assert!(expected.len() > 30, "{expected:?}");

    let _ours = PackagesServer::start(&ns.name).await;
    let upstream = UpstreamPackageServer::start(&ns.name).await;
    let our_list = listed_when_complete(&client, "olm run", &ns.name, &expected).await;
    let upstream_list =
        listed_when_complete(&upstream.client, "upstream", &ns.name, &expected).await;

    let mut diffs = Vec::new();
    let theirs: Vec<_> = upstream_list.keys().collect();
    let mine: Vec<_> = our_list.keys().collect();
    if theirs != mine {
        diffs.push(format!("listed: upstream {theirs:?} | ours {mine:?}"));
    }
    for (k, item) in &upstream_list {
        let Some(our_item) = our_list.get(k) else {
            continue;
        };
        let label = format!("list {}/{}", k.0, k.1);
        differences(&label, &comparable(item), &comparable(our_item), &mut diffs);
    }
    // get NAME and the icon of each package (names are unique across the two catalogs).
    for (catalog, package) in &expected {
        let path = format!("{API}/namespaces/{}/packagemanifests/{package}", ns.name);
        let theirs = get_json(&upstream.client, &path).await.unwrap();
        let mine = get_json(&client, &path).await.unwrap();
        let label = format!("get {catalog}/{package}");
        differences(&label, &comparable(&theirs), &comparable(&mine), &mut diffs);
        let (their_type, their_icon) = get_bytes(&upstream.client, &format!("{path}/icon")).await;
        let (my_type, my_icon) = get_bytes(&client, &format!("{path}/icon")).await;
        if their_type != my_type {
            diffs.push(format!(
                "icon {catalog}/{package}: Content-Type upstream {their_type} | ours {my_type}"
            ));
        }
        if their_icon != my_icon && !is_default_icon(&their_icon) {
            diffs.push(format!(
                "icon {catalog}/{package}: {} bytes upstream | {} bytes ours",
                their_icon.len(),
                my_icon.len()
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences from upstream's package-server:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Upstream's stand-in for a package without an icon (its own artwork, not copied here).
fn is_default_icon(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes).contains("<title>Asset 4</title>")
}
