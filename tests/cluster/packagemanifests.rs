//! The packages.operators.coreos.com API served by `olm run --packages-address` on loopback:
//! it registers itself (ExternalName Service + APIService), users reach it through the
//! kube-apiserver with kubectl, and a graceful shutdown removes the registration.
//!
//! Only one process can own the APIService, so these tests take turns (`TURN`). The server
//! runs cluster-wide as a permanent standby (a Lease held by someone else): it writes
//! nothing, which shows that serving needs no leadership and leaves other tests alone.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use kube::Client;
use serde_json::Value;

use super::catalog_sources::catalog_source_yaml;
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, repo_root,
};
use super::processes::{OlmRun, free_port, olm_serve};

pub(super) static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const WAIT: Duration = Duration::from_secs(60);
const API_SERVICE: &str = "v1.packages.operators.coreos.com";
const OUR_PACKAGES: [&str; 4] = [
    "at",
    "kernel-module-management",
    "ptemplate",
    "reverse-words",
];

/// `olm run --packages-address 127.0.0.1:PORT`, stopped with SIGTERM when dropped so that it
/// removes its registration.
pub(super) struct PackagesServer {
    olm: OlmRun,
    port: u16,
}

impl PackagesServer {
    /// Serves with `global` as the global catalog namespace; standby on a Lease in `global`.
    pub(super) async fn start(global: &str) -> PackagesServer {
        let lease = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "packages-standby", "namespace": global},
            "spec": {
                "holderIdentity": "somebody-else",
                "leaseDurationSeconds": 3600,
                "acquireTime": now_micro(),
                "renewTime": now_micro(),
            },
        });
        kubectl(&["apply", "-f", "-"], Some(&lease.to_string())).ok();
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let olm = OlmRun::start_cluster_wide(&[
            "--global-catalog-namespace",
            global,
            "--lease-namespace",
            global,
            "--lease-name",
            "packages-standby",
            "--lease-duration",
            "1h",
            "--packages-address",
            &address,
        ]);
        let server = PackagesServer { olm, port };
        eventually("the packages APIService to be Available", WAIT, || async {
            let out = kubectl(
                &["get", "apiservice", API_SERVICE, "-o", "jsonpath={.status.conditions[?(@.type=='Available')].status}|{.spec.service.port}"],
                None,
            );
            (out.stdout() == format!("True|{port}")).then_some(())
        })
        .await;
        server
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.olm.process.pid().to_string()])
            .status();
        for _ in 0..200 {
            if self.olm.process.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PackagesServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn now_micro() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

pub(super) fn source(
    namespace: &str,
    name: &str,
    port: u16,
    display: &str,
    labels: &str,
) -> String {
    catalog_source_yaml(namespace, name, &format!("127.0.0.1:{port}"), "")
        .replace(
            "displayName: Test Operators",
            &format!("displayName: {display}"),
        )
        .replace(
            &format!("  namespace: {namespace}\n"),
            &format!("  namespace: {namespace}\n  labels: {{{labels}}}\n"),
        )
}

/// `kubectl get packagemanifests ARGS -o json`: the items' (name, catalog) pairs.
fn listed(args: &[&str]) -> Option<BTreeSet<(String, String)>> {
    let mut all = vec!["get", "packagemanifests", "-o", "json"];
    all.extend_from_slice(args);
    let out = kubectl(&all, None);
    if !out.success() {
        return None;
    }
    let list: Value = serde_json::from_str(&out.stdout()).ok()?;
    Some(
        list["items"]
            .as_array()?
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    i["status"]["catalogSource"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect(),
    )
}

fn pairs(catalog: &str, names: &[&str]) -> BTreeSet<(String, String)> {
    names
        .iter()
        .map(|n| (n.to_string(), catalog.to_string()))
        .collect()
}

/// Each channel's head in our catalog, as the resolver computes it.
fn expected_heads(package: &str) -> Vec<(String, String)> {
    let content = olm::catalog::reading::load::load_path(&repo_root().join("catalog")).unwrap();
    let mut heads: Vec<(String, String)> = content
        .channels
        .iter()
        .filter(|c| c.package == package)
        .map(|c| {
            let head = olm::catalog::model::upgrade_edges::UpgradeEdges::new(&c.entries)
                .head()
                .unwrap()
                .to_string();
            (c.name.clone(), head)
        })
        .collect();
    heads.sort();
    heads
}

#[tokio::test]
async fn packagemanifests_are_listed_scoped_selected_and_described() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let a = TestNamespace::create(&client, "pm-a").await;
    let b = TestNamespace::create(&client, "pm-b").await;
    let global = TestNamespace::create(&client, "pm-global").await;
    let port = free_port();
    let _catalog = olm_serve(&repo_root().join("catalog"), port);
    kubectl(
        &["apply", "-f", "-"],
        Some(&source(&a.name, "mine", port, "Mine", "team: a")),
    )
    .ok();
    kubectl(
        &["apply", "-f", "-"],
        Some(&source(
            &global.name,
            "shared",
            port,
            "Shared Operators",
            "scope: global",
        )),
    )
    .ok();
    let mut server = PackagesServer::start(&global.name).await;

    // A sees its own catalog and the global one; B only the global one, rewritten into B.
    let mut expected_a = pairs("mine", &OUR_PACKAGES);
    expected_a.extend(pairs("shared", &OUR_PACKAGES));
    eventually(
        "A to list its own and the global packages",
        WAIT,
        || async { (listed(&["-n", &a.name]) == Some(expected_a.clone())).then_some(()) },
    )
    .await;
    assert_eq!(
        listed(&["-n", &b.name]),
        Some(pairs("shared", &OUR_PACKAGES))
    );
    let b_list = kubectl(
        &["get", "packagemanifests", "-n", &b.name, "-o", "json"],
        None,
    )
    .ok();
    let b_list: Value = serde_json::from_str(&b_list.stdout()).unwrap();
    for item in b_list["items"].as_array().unwrap() {
        assert_eq!(item["metadata"]["namespace"], b.name.as_str());
        assert_eq!(
            item["status"]["catalogSourceNamespace"],
            global.name.as_str()
        );
        assert!(
            item["status"]["channels"][0]["currentCSVDesc"]
                .get("icon")
                .is_none(),
            "lists leave out icons"
        );
    }
    let all = listed(&["-A"]).unwrap();
    assert!(all.is_superset(&expected_a));

    // Server-side printing: NAME, CATALOG (the display name), AGE.
    let table = kubectl(&["get", "packagemanifests", "-n", &b.name], None)
        .ok()
        .stdout();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CATALOG", "AGE"]);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4, "{table}");
    assert!(
        rows.iter().all(|r| r.contains("Shared Operators")),
        "{table}"
    );
    kubectl(
        &[
            "get",
            "packagemanifests",
            "-n",
            &b.name,
            "-o",
            "wide",
            "--show-labels",
        ],
        None,
    )
    .ok();

    // get NAME prefers the namespace's own catalog; channels and their heads.
    let channels = kubectl(
        &["get", "packagemanifest", "reverse-words", "-n", &a.name, "-o",
          "jsonpath={.status.catalogSource}|{range .status.channels[*]}{.name}={.currentCSV} {end}"],
        None,
    )
    .ok()
    .stdout();
    let heads: Vec<String> = expected_heads("reverse-words")
        .iter()
        .map(|(c, h)| format!("{c}={h}"))
        .collect();
    assert_eq!(channels.trim_end(), format!("mine|{}", heads.join(" ")));
    let names = kubectl(
        &[
            "get",
            "packagemanifest",
            "reverse-words",
            "-n",
            &a.name,
            "-o",
            "jsonpath={.status.channels[*].name}",
        ],
        None,
    )
    .ok()
    .stdout();
    let expected_names: Vec<String> = expected_heads("reverse-words")
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(names, expected_names.join(" "));

    // Label selectors: the catalog's, ours and the CatalogSource's own labels.
    assert_eq!(
        listed(&["-n", &a.name, "-l", "catalog=mine"]),
        Some(pairs("mine", &OUR_PACKAGES))
    );
    assert_eq!(
        listed(&[
            "-n",
            &a.name,
            "-l",
            &format!("catalog-namespace={}", global.name)
        ]),
        Some(pairs("shared", &OUR_PACKAGES))
    );
    assert_eq!(
        listed(&["-n", &b.name, "-l", "catalog=mine"]),
        Some(BTreeSet::new())
    );
    assert_eq!(
        listed(&["-n", &a.name, "-l", "team=a"]),
        Some(pairs("mine", &OUR_PACKAGES))
    );
    assert_eq!(
        listed(&[
            "-n",
            &a.name,
            "-l",
            "operatorframework.io/arch.amd64=supported,catalog=shared"
        ]),
        Some(pairs("shared", &OUR_PACKAGES))
    );
    assert_eq!(
        listed(&["-n", &a.name, "--field-selector", "metadata.name=at"])
            .unwrap()
            .len(),
        2
    );

    // Errors are Status objects: 404 naming the package, 400 for a bad selector, 405 writes.
    let missing = kubectl(
        &["get", "packagemanifest", "no-such-package", "-n", &a.name],
        None,
    );
    assert!(
        missing.stderr().contains("NotFound")
            && missing.stderr().contains("\"no-such-package\" not found"),
        "{}",
        missing.stderr()
    );
    let bad = kubectl(
        &["get", "packagemanifests", "-n", &a.name, "-l", "a in (b"],
        None,
    );
    assert!(bad.stderr().contains("BadRequest"), "{}", bad.stderr());
    let delete = kubectl(&["delete", "packagemanifest", "at", "-n", &a.name], None);
    assert!(
        delete.stderr().contains("MethodNotAllowed"),
        "{}",
        delete.stderr()
    );

    // The icon subresource: the default channel head's icon bytes with its media type.
    let (content_type, bytes) = raw_get(
        &client,
        &format!("/apis/packages.operators.coreos.com/v1/namespaces/{}/packagemanifests/reverse-words/icon", a.name),
    )
    .await;
    assert_eq!(content_type, "image/svg+xml");
    assert!(
        String::from_utf8_lossy(&bytes).starts_with("<svg"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let via_kubectl = kubectl(
        &["get", "--raw", &format!("/apis/packages.operators.coreos.com/v1/namespaces/{}/packagemanifests/reverse-words/icon", a.name)],
        None,
    )
    .ok();
    assert_eq!(via_kubectl.output.stdout, bytes);

    // Discovery and OpenAPI: kubectl api-resources and explain.
    let resources = kubectl(
        &[
            "api-resources",
            "--api-group=packages.operators.coreos.com",
            "-o",
            "name",
        ],
        None,
    )
    .ok();
    assert_eq!(
        resources.stdout().trim(),
        "packagemanifests.packages.operators.coreos.com"
    );
    let explain = kubectl(&["explain", "packagemanifest.status.channels"], None)
        .ok()
        .stdout();
    assert!(
        explain.contains("currentCSV") && explain.contains("entries"),
        "{explain}"
    );

    // A graceful stop removes the registration (a dangling APIService breaks discovery).
    server.stop();
    assert!(
        !kubectl(&["get", "apiservice", API_SERVICE], None).success(),
        "APIService left behind after SIGTERM"
    );
}

/// GET through the API server (the kube client's credentials): (Content-Type, body).
async fn raw_get(client: &Client, path: &str) -> (String, Vec<u8>) {
    let request = axum::http::Request::get(path).body(Vec::new()).unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 200, "GET {path}");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    use http_body_util::BodyExt;
    let bytes = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (content_type, bytes)
}

/// `kubectl get packagemanifests -w --output-watch-events`, its lines as they come.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watch {
    fn start(namespace: &str) -> Watch {
        let mut child = Command::new("kubectl")
            .args([
                "get",
                "packagemanifests",
                "-n",
                namespace,
                "-w",
                "--output-watch-events",
            ])
            .env("KUBECONFIG", kubeconfig_path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// Reads lines until `event` for `name` with catalog `catalog` has been seen.
    fn expect(&self, event: &str, name: &str, catalog: &str) {
        let deadline = std::time::Instant::now() + WAIT;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let cols: Vec<&str> = line.split_whitespace().collect();
                    if cols.first() == Some(&event)
                        && cols.get(1) == Some(&name)
                        && line.contains(catalog)
                    {
                        return;
                    }
                    seen.push(line);
                }
                Err(_) => break,
            }
        }
        panic!(
            "no {event} {name} ({catalog}) within {WAIT:?}; watch printed:\n{}",
            seen.join("\n")
        );
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Upstream always serves packagemanifests, and so does `olm run` unless told `off`: with
/// no flag it listens on a free loopback port and registers the APIService there.
#[tokio::test]
async fn olm_run_serves_packagemanifests_by_default() {
    let _turn = TURN.lock().await;
    install_crds();
    // Scoped to a namespace of its own: its controllers must not reconcile other tests'
    // objects (packagemanifests are served by default whatever the scope).
    let client = client().await;
    let ns = TestNamespace::create(&client, "pm-default").await;
    let olm = OlmRun::start_cluster_wide_with_packages(&[
        "--leader-elect=false",
        "--watch-namespace",
        &ns.name,
    ]);
    let server = PackagesServer { olm, port: 0 };
    let port = eventually("the packages APIService to be Available", WAIT, || async {
        let out = kubectl(
            &[
                "get",
                "apiservice",
                API_SERVICE,
                "-o",
                "jsonpath={.status.conditions[?(@.type=='Available')].status}|{.spec.service.port}",
            ],
            None,
        );
        let stdout = out.stdout();
        let (available, port) = stdout.split_once('|')?;
        (available == "True" && port != "0" && !port.is_empty()).then(|| port.to_string())
    })
    .await;
    assert!(port.parse::<u16>().is_ok(), "{port}");
    // Discovery catches up with a newly Available APIService (kubectl caches it).
    eventually("kubectl get packagemanifests", WAIT, || async {
        kubectl(&["get", "packagemanifests", "-A"], None)
            .success()
            .then_some(())
    })
    .await;
    drop(server);
}

#[tokio::test]
async fn watch_sees_catalogs_come_change_and_go() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "pm-watch").await;
    let global = TestNamespace::create(&client, "pm-watch-global").await;
    // Version 2 of the catalog: reverse-words defaults to another channel, ptemplate is gone.
    let v2 = tempdir("pm-watch-v2");
    copy_dir(&repo_root().join("catalog"), &v2);
    std::fs::remove_dir_all(v2.join("ptemplate")).unwrap();
    let rw = v2.join("reverse-words/catalog.yaml");
    let text = std::fs::read_to_string(&rw).unwrap();
    let (first, other) = {
        let heads = expected_heads("reverse-words");
        (heads[0].0.clone(), heads[1].0.clone())
    };
    let default = if text.contains(&format!("defaultChannel: {first}")) {
        &first
    } else {
        &other
    };
    let changed_to = if default == &first { &other } else { &first };
    std::fs::write(
        &rw,
        text.replacen(
            &format!("defaultChannel: {default}"),
            &format!("defaultChannel: {changed_to}"),
            1,
        ),
    )
    .unwrap();
    let (port1, port2) = (free_port(), free_port());
    let _v1_server = olm_serve(&repo_root().join("catalog"), port1);
    let _v2_server = olm_serve(&v2, port2);

    let _server = PackagesServer::start(&global.name).await;
    let watch = Watch::start(&ns.name);
    // The catalog arrives: ADDED.
    kubectl(
        &["apply", "-f", "-"],
        Some(&source(&ns.name, "ops", port1, "Watched", "w: x")),
    )
    .ok();
    for package in OUR_PACKAGES {
        watch.expect("ADDED", package, "Watched");
    }
    // A new version of the catalog is served: MODIFIED for what changed, DELETED for what left.
    kubectl(
        &["apply", "-f", "-"],
        Some(&source(&ns.name, "ops", port2, "Watched", "w: x")),
    )
    .ok();
    watch.expect("MODIFIED", "reverse-words", "Watched");
    watch.expect("DELETED", "ptemplate", "Watched");
    let default_now = kubectl(
        &[
            "get",
            "packagemanifest",
            "reverse-words",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={.status.defaultChannel}",
        ],
        None,
    )
    .ok()
    .stdout();
    assert_eq!(&default_now, changed_to);
    // The CatalogSource goes: DELETED for the rest.
    kubectl(&["delete", "catalogsource", "ops", "-n", &ns.name], None).ok();
    watch.expect("DELETED", "reverse-words", "Watched");

    // A watch resumed from a list's resourceVersion gets only what follows, with bookmarks.
    let list = raw_json(
        &client,
        &format!(
            "/apis/packages.operators.coreos.com/v1/namespaces/{}/packagemanifests",
            ns.name
        ),
    )
    .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(rv.parse::<u64>().unwrap() > 0);
    let stale = kubectl(
        &["get", "--raw", &format!("/apis/packages.operators.coreos.com/v1/namespaces/{}/packagemanifests?watch=true&resourceVersion={rv}&timeoutSeconds=1", ns.name)],
        None,
    )
    .ok();
    assert_eq!(stale.stdout().trim(), "", "nothing happened after {rv}");
}

async fn raw_json(client: &Client, path: &str) -> Value {
    let request = axum::http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(request).await.unwrap()
}

#[tokio::test]
async fn only_authorized_users_get_packagemanifests() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let a = TestNamespace::create(&client, "pm-authz-a").await;
    let b = TestNamespace::create(&client, "pm-authz-b").await;
    let global = TestNamespace::create(&client, "pm-authz-global").await;
    let port = free_port();
    let _catalog = olm_serve(&repo_root().join("catalog"), port);
    kubectl(
        &["apply", "-f", "-"],
        Some(&source(&global.name, "shared", port, "Shared", "s: t")),
    )
    .ok();
    let server = PackagesServer::start(&global.name).await;
    eventually("the global packages to be listed", WAIT, || async {
        (listed(&["-n", &a.name]).is_some_and(|l| l.len() == 4)).then_some(())
    })
    .await;

    // Bound to nothing: 403 from the SubjectAccessReview, never the data.
    let user = format!("nobody-{}", a.name);
    let denied = kubectl(
        &["get", "packagemanifests", "-n", &a.name, "--as", &user],
        None,
    );
    assert!(!denied.success());
    assert!(
        denied.stderr().contains("Forbidden") && denied.stderr().contains(&user),
        "{}",
        denied.stderr()
    );

    // get,list on packagemanifests in A: A is listed, B is forbidden.
    let reader = format!("reader-{}", a.name);
    kubectl(
        &[
            "create",
            "role",
            "pm-reader",
            "-n",
            &a.name,
            "--verb=get,list",
            "--resource=packagemanifests.packages.operators.coreos.com",
        ],
        None,
    )
    .ok();
    kubectl(
        &[
            "create",
            "rolebinding",
            "pm-reader",
            "-n",
            &a.name,
            "--role=pm-reader",
            &format!("--user={reader}"),
        ],
        None,
    )
    .ok();
    let allowed = eventually("the reader to list packagemanifests in A", WAIT, || async {
        let out = kubectl(
            &[
                "get",
                "packagemanifests",
                "-n",
                &a.name,
                "--as",
                &reader,
                "-o",
                "name",
            ],
            None,
        );
        out.success().then(|| out.stdout())
    })
    .await;
    assert_eq!(allowed.lines().count(), 4, "{allowed}");
    let other = kubectl(
        &["get", "packagemanifests", "-n", &b.name, "--as", &reader],
        None,
    );
    assert!(other.stderr().contains("Forbidden"), "{}", other.stderr());

    // Straight to the server without the front-proxy certificate: 401.
    for headers in [
        vec![],
        vec![
            "-H",
            "X-Remote-User: system:admin",
            "-H",
            "X-Remote-Group: system:masters",
        ],
    ] {
        let mut args = vec!["-sk", "-o", "/dev/null", "-w", "%{http_code}"];
        args.extend(headers);
        let url = format!(
            "https://127.0.0.1:{}/apis/packages.operators.coreos.com/v1/packagemanifests",
            server.port
        );
        args.push(&url);
        let code = Command::new("curl").args(&args).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&code.stdout), "401");
    }
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Deletes the APIService when dropped (also on panic): a dangling one breaks discovery.
struct ApiServiceGuard;

impl Drop for ApiServiceGuard {
    fn drop(&mut self) {
        let _ = kubectl(
            &["delete", "apiservice", API_SERVICE, "--ignore-not-found"],
            None,
        );
    }
}

#[tokio::test]
async fn in_a_cluster_the_certificate_lives_in_a_secret_and_the_ca_bundle_follows_it() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "pm-incluster").await;
    let _guard = ApiServiceGuard;
    // As deploy/packages.yaml, with the Service in the test namespace and no caBundle yet.
    let api_service = std::fs::read_to_string(repo_root().join("deploy/packages.yaml"))
        .unwrap()
        .replace("namespace: olm", &format!("namespace: {}", ns.name));
    kubectl(&["apply", "-f", "-"], Some(&api_service)).ok();
    let secret_and_bundle = || {
        let secret = kubectl(
            &[
                "get",
                "secret",
                "olm-packages-serving-cert",
                "-n",
                &ns.name,
                "-o",
                "jsonpath={.data.ca\\.crt}|{.data.tls\\.crt}",
            ],
            None,
        );
        let bundle = kubectl(
            &[
                "get",
                "apiservice",
                API_SERVICE,
                "-o",
                "jsonpath={.spec.caBundle}",
            ],
            None,
        );
        (secret.stdout(), bundle.stdout())
    };
    let start = || {
        let port = free_port();
        OlmRun::start(
            &ns.name,
            &[
                "--leader-elect=false",
                "--lease-namespace",
                &ns.name,
                "--packages-address",
                &format!("0.0.0.0:{port}"),
            ],
        )
    };
    let mut first = start();
    let (secret, _) = eventually(
        "the serving certificate Secret and the caBundle",
        WAIT,
        || async {
            let (secret, bundle) = secret_and_bundle();
            let ca = secret.split('|').next().unwrap_or_default().to_string();
            (!ca.is_empty() && ca == bundle).then_some((secret, bundle))
        },
    )
    .await;
    let ca_pem = String::from_utf8(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            secret.split('|').next().unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        ca_pem.starts_with("-----BEGIN CERTIFICATE-----"),
        "{ca_pem}"
    );
    first.process.terminate(Duration::from_secs(20));
    // A second replica (or a restart) uses the same certificate: nothing is rewritten.
    let second = start();
    // It reads the Secret before it listens.
    eventually("the second process to serve packages", WAIT, || async {
        second
            .process
            .log_text()
            .contains("packages API (packagemanifests) listening")
            .then_some(())
    })
    .await;
    assert_eq!(
        secret_and_bundle().0,
        secret,
        "the Secret was replaced although it is valid"
    );
    assert!(
        kubectl(&["get", "apiservice", API_SERVICE], None).success(),
        "in a cluster the APIService belongs to deploy/, not to the process"
    );
}
