//! On the real node of `hack/node` (containerd, runc, the kubelet and kube-proxy; `hack/test`
//! starts it): these tests' pods run as real containers, with real images, probes, Services
//! and restarts, where every other test's pods run on kwok's fake nodes.
//!
//! A test puts every pod of its namespace on the node with [`namespace`] (the namespace's
//! annotations, read by the PodNodeSelector and PodTolerationRestriction admission plugins:
//! an operator's pods and the pods its operator makes land there without a change to them).
//! Images come from the node's registry ([`Node`]), which containerd also serves under
//! `quay.io`, so the operators' images keep the names their bundles give them.
//!
//! By topic: OLM deployed from `deploy/` as an admin deploys it ([`deploy`]); our operators
//! installed, running and upgraded ([`operators`]), at running its command and ptemplate
//! with its KMM dependency ([`at_and_ptemplate`]); a CSV's health read from pods that
//! cannot pull or keep crashing ([`health`]); webhooks, certificate rotation, an owned
//! APIService and OperatorConditions served and set from a pod ([`webhooks`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use kube::Client;
use serde_json::Value;

use crate::harness::{TestNamespace, eventually, kubeconfig_path, kubectl, olm_bin, repo_root};

mod at_and_ptemplate;
mod deploy;
mod health;
mod operators;
mod webhooks;

/// Pods on a real node pull images and start processes: slower than kwok's.
pub const WAIT: Duration = Duration::from_secs(120);

/// The real node of the test cluster, as `hack/node/up` describes it under the cluster dir.
pub struct Node {
    /// The registry as the host reaches it (`127.0.0.1:PORT`; containerd maps the name).
    pub registry: String,
    /// The same registry as pods reach it (the veth's host address), over plain HTTP.
    pub registry_from_pods: String,
    pushed: Mutex<BTreeSet<String>>,
}

impl Node {
    /// The node of the cluster `kubeconfig_path()` names; panics when there is none.
    pub fn get() -> &'static Node {
        static NODE: OnceLock<Node> = OnceLock::new();
        NODE.get_or_init(|| {
            let dir = kubeconfig_path().parent().unwrap().join("node");
            let read = |file: &str| {
                std::fs::read_to_string(dir.join(file))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|e| {
                        panic!(
                            "no real node ({}: {e}); start one with hack/cluster/up --real-node",
                            dir.join(file).display()
                        )
                    })
            };
            Node {
                registry: read("registry-name"),
                registry_from_pods: read("registry-from-pods"),
                pushed: Mutex::new(BTreeSet::new()),
            }
        })
    }

    /// Builds the image `name` of `operators/images.yaml` from this build's binaries and
    /// pushes it as `quay.io/olm-rs/<name>:<tag>` (to the node's registry, which containerd
    /// serves under quay.io) for each of `tags`. Once per test process.
    pub fn push_binary(&self, name: &str, tags: &[&str]) {
        let mut pushed = self.pushed.lock().unwrap();
        let layout = repo_root()
            .join("target/cluster/real-node-images")
            .join(name);
        if !layout.join("index.json").exists() || !pushed.contains(name) {
            let _ = std::fs::remove_dir_all(&layout);
            run_olm(&[
                "image",
                "build-binary",
                name,
                "--binaries",
                binaries_dir().to_str().unwrap(),
                "--layout",
                layout.to_str().unwrap(),
            ]);
            pushed.insert(name.to_string());
        }
        for tag in tags {
            let reference = format!("{}/olm-rs/{name}:{tag}", self.registry);
            if pushed.insert(reference.clone()) {
                run_olm(&["image", "push", layout.to_str().unwrap(), &reference]);
                // The node may hold an older build under this tag (IfNotPresent).
                forget_on_node(&format!("quay.io/olm-rs/{name}:{tag}"));
            }
        }
    }

    /// Builds `dir` (a file-based catalog) into a catalog image and pushes it under the name
    /// pods reach; returns that name.
    pub fn push_catalog(&self, dir: &Path, name: &str) -> String {
        let reference = format!("{}/olm-rs-tests/{name}:latest", self.registry_from_pods);
        run_olm(&[
            "catalog",
            "build",
            dir.to_str().unwrap(),
            "--tag",
            &reference,
            "--push",
            "--insecure-registry",
            &self.registry_from_pods,
        ]);
        reference
    }
}

/// Removes `reference` from the node's containerd (`hack/node/forget-images`).
fn forget_on_node(reference: &str) {
    let cluster_dir = kubeconfig_path().parent().unwrap().to_path_buf();
    let status = Command::new(repo_root().join("hack/node/forget-images"))
        .arg(reference)
        .env("OLM_CLUSTER_DIR", cluster_dir)
        .status()
        .unwrap();
    assert!(status.success(), "hack/node/forget-images {reference}");
}

/// Where `cargo build --workspace --bins` put the binaries the images are made of.
fn binaries_dir() -> PathBuf {
    olm_bin().parent().unwrap().to_path_buf()
}

pub fn run_olm(args: &[&str]) -> String {
    let out = Command::new(olm_bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "olm {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A test namespace whose pods all land on the real node.
pub async fn namespace(client: &Client, test: &str) -> TestNamespace {
    TestNamespace::create_annotated(client, test, on_real_node()).await
}

/// The annotations that send a namespace's pods to the real node (tainted NoSchedule).
pub fn on_real_node() -> Value {
    serde_json::json!({
        "scheduler.alpha.kubernetes.io/node-selector": "olm.test/real-node=true",
        "scheduler.alpha.kubernetes.io/defaultTolerations":
            r#"[{"key":"olm.test/real-node","operator":"Exists","effect":"NoSchedule"}]"#,
    })
}

/// `kubectl get pods -o json` in `namespace`: the items.
pub fn pods(namespace: &str, selector: &str) -> Vec<Value> {
    let out = kubectl(
        &["get", "pods", "-n", namespace, "-l", selector, "-o", "json"],
        None,
    )
    .ok()
    .stdout();
    let list: Value = serde_json::from_str(&out).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The pod runs on the real node, Ready, its containers never restarted.
pub fn assert_running_for_real(pod: &Value) {
    let name = &pod["metadata"]["name"];
    assert_eq!(pod["spec"]["nodeName"], "real-node-0", "pod {name}");
    assert_eq!(pod["status"]["phase"], "Running", "pod {name}");
    let statuses = pod["status"]["containerStatuses"].as_array().unwrap();
    for status in statuses {
        assert_eq!(status["ready"], true, "pod {name}: {status}");
        assert_eq!(status["restartCount"], 0, "pod {name}: {status}");
        // A real runtime reports the image it resolved and the container it started.
        assert!(
            status["imageID"].as_str().unwrap_or("").contains("sha256:"),
            "pod {name}: {status}"
        );
        assert!(
            status["containerID"]
                .as_str()
                .unwrap_or("")
                .starts_with("containerd://"),
            "pod {name}: {status}"
        );
    }
}

/// `curl` from the host through a Service's ClusterIP: the host routes the service range
/// into the node, where kube-proxy's rules pick a pod (as a pod on the node would).
pub fn http_through_service(
    namespace: &str,
    service: &str,
    port: u16,
    method: &str,
    body: Option<&str>,
) -> Option<String> {
    let svc = kubectl(
        &["get", "service", service, "-n", namespace, "-o", "json"],
        None,
    );
    if !svc.success() {
        return None;
    }
    let svc: Value = serde_json::from_str(&svc.stdout()).unwrap();
    let ip = svc["spec"]["clusterIP"].as_str()?;
    let mut cmd = Command::new("curl");
    cmd.args(["-sf", "-m", "5", "-X", method]);
    if let Some(body) = body {
        cmd.args(["-H", "Content-Type: application/json", "-d", body]);
    }
    let out = cmd.arg(format!("http://{ip}:{port}/")).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Approves every InstallPlan of `namespace` not yet approved; how many there were.
pub fn approve_pending(namespace: &str) -> usize {
    let out = kubectl(
        &["get", "installplans", "-n", namespace, "-o", "json"],
        None,
    );
    let plans: Value = serde_json::from_str(&out.stdout()).unwrap_or_default();
    let mut approved = 0;
    for plan in plans["items"].as_array().into_iter().flatten() {
        if plan["spec"]["approved"] == false {
            let name = plan["metadata"]["name"].as_str().unwrap();
            kubectl(
                &[
                    "patch",
                    "installplan",
                    name,
                    "-n",
                    namespace,
                    "--type",
                    "merge",
                    "-p",
                    r#"{"spec":{"approved":true}}"#,
                ],
                None,
            )
            .ok();
            approved += 1;
        }
    }
    approved
}

/// An OperatorGroup targeting `namespace` and a Subscription there to reverse-words'
/// stable channel of the CatalogSource `operators`, with `extra_spec` lines added.
pub fn reverse_words_subscription(namespace: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {namespace}\nspec:\n  targetNamespaces: [{namespace}]\n---\napiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: reverse-words\n  namespace: {namespace}\nspec:\n  name: reverse-words\n  channel: stable\n  source: operators\n  sourceNamespace: {namespace}\n{extra_spec}"
    )
}

/// The CSV `csv` Succeeded, and a pod of `image` runs for real.
pub async fn expect_operator_running(namespace: &str, csv: &str, image: &str) {
    let succeeded = tokio::time::timeout(WAIT, async {
        loop {
            let phase = kubectl(
                &[
                    "get",
                    "csv",
                    csv,
                    "-n",
                    namespace,
                    "-o",
                    "jsonpath={.status.phase}",
                ],
                None,
            );
            if phase.stdout() == "Succeeded" {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    })
    .await;
    assert!(
        succeeded.is_ok(),
        "{csv} not Succeeded after {WAIT:?}:\n{}",
        diagnostics(namespace)
    );
    let pod = eventually(&format!("a Ready pod of {image}"), WAIT, || async {
        all_pods(namespace)
            .into_iter()
            .find(|p| image_of(p) == image && ready(p))
    })
    .await;
    assert_running_for_real(&pod);
}

/// What a person would look at when an install on the node does not finish: the CSVs'
/// status, the pods, and the operator pods' logs.
fn diagnostics(namespace: &str) -> String {
    let get = |args: &[&str]| {
        let out = kubectl(args, None);
        format!(
            "$ kubectl {}\n{}{}",
            args.join(" "),
            out.stdout(),
            out.stderr()
        )
    };
    let mut text = get(&[
        "get",
        "csv",
        "-n",
        namespace,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.reason}: {.status.message}{\"\\n\"}{end}",
    ]);
    text += &get(&["get", "pods,lease", "-n", namespace, "-o", "wide"]);
    for pod in all_pods(namespace) {
        if image_of(&pod).starts_with("quay.io/olm-rs/") {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            text += &get(&[
                "logs",
                "-n",
                namespace,
                name,
                "--tail=30",
                "--all-containers",
            ]);
        }
    }
    text
}

pub fn all_pods(namespace: &str) -> Vec<Value> {
    pods(namespace, "")
}

pub fn image_of(pod: &Value) -> &str {
    pod["spec"]["containers"][0]["image"].as_str().unwrap_or("")
}

pub fn ready(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}
