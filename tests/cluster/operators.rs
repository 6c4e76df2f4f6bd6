//! What the tests of our own operators (operators/*) share: install an operator's newest
//! bundle through OLM (`olm run`, our catalog served by `olm catalog serve`, an
//! OperatorGroup and a Subscription), then run its binary as a local process with a token
//! of the ServiceAccount OLM created, so it has exactly the CSV's RBAC and nothing more.
//!
//! The binaries are workspace members: `hack/test` builds them (`cargo build --workspace
//! --bins`) before the tests run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, wait_for_state};
use super::csv_lifecycle::{get, wait_for_phase};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubectl, olm_bin, operator_crds_lock,
    repo_root, reverse_words_apps_lock,
};
use super::processes::{OlmRun, Process, free_port, http_get, olm_serve, wait_for_port};

pub const WAIT: Duration = Duration::from_secs(90);

/// A binary of another workspace member, next to `olm` in the target directory.
pub fn workspace_bin(name: &str) -> PathBuf {
    let path = olm_bin().parent().unwrap().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace --bins`; hack/test does)",
        path.display()
    );
    path
}

/// The namespaces the OperatorGroup of an installed operator targets.
pub enum Targets {
    /// Its own namespace (OwnNamespace).
    Own,
    /// Its own namespace and these others (MultiNamespace).
    OwnAnd(Vec<String>),
    /// These namespaces, not its own (SingleNamespace for one).
    Others(Vec<String>),
    /// Every namespace (AllNamespaces): neither targetNamespaces nor a selector.
    All,
}

impl Targets {
    /// The OperatorGroup's spec, as YAML under `spec:`.
    fn spec_yaml(&self, own: &str) -> String {
        match self {
            Targets::Own => format!("  targetNamespaces: [{own}]\n"),
            Targets::OwnAnd(others) => {
                format!("  targetNamespaces: [{own}, {}]\n", others.join(", "))
            }
            Targets::Others(others) => format!("  targetNamespaces: [{}]\n", others.join(", ")),
            Targets::All => "  {}\n".to_string(),
        }
    }
}

/// An operator's bundle installed by OLM in a namespace of its own.
pub struct Installed {
    pub ns: TestNamespace,
    /// None once stopped (so a test can edit what OLM made without OLM putting it back).
    pub olm: Option<OlmRun>,
    _server: Process,
    pub csv: String,
    /// The newest CRDs stay in place for the whole test (see `operator_crds_lock`).
    _crds: Option<std::fs::File>,
    /// See `reverse_words_apps_lock`.
    _apps: Option<std::fs::File>,
}

impl Installed {
    /// Subscribes to `package` (default channel) from our catalog and waits until `csv`
    /// has Succeeded, with an OperatorGroup targeting the operator's own namespace.
    pub async fn subscribe(test: &str, package: &str, csv: &str) -> Installed {
        Self::subscribe_to(test, package, csv, Targets::Own).await
    }

    /// As [`Installed::subscribe`], with an OperatorGroup targeting `targets`.
    pub async fn subscribe_to(test: &str, package: &str, csv: &str, targets: Targets) -> Installed {
        Self::subscribe_in(test, package, csv, targets, serde_json::json!({})).await
    }

    /// As [`Installed::subscribe`], in a namespace whose every pod runs on the real node
    /// (push the operator's image to the node first).
    pub async fn subscribe_on_real_node(test: &str, package: &str, csv: &str) -> Installed {
        let annotations = super::real_node::on_real_node();
        Self::subscribe_in(test, package, csv, Targets::Own, annotations).await
    }

    async fn subscribe_in(
        test: &str,
        package: &str,
        csv: &str,
        targets: Targets,
        annotations: serde_json::Value,
    ) -> Installed {
        let apps = (package == "reverse-words")
            .then(|| reverse_words_apps_lock(matches!(targets, Targets::All)));
        let crds = ["at", "ptemplate"]
            .contains(&package)
            .then(operator_crds_lock);
        if crds.is_some() {
            // Other tests apply older schemas of this CRD, some with kubectl (whose fields
            // OLM's server-side apply then conflicts with): start from none, as a fresh
            // cluster would. The lock keeps every other user of the CRD away meanwhile.
            let crd = match package {
                "at" => "ats.cnat.d2iq.com",
                _ => "ptemplates.pt.example.com",
            };
            kubectl(
                &["delete", "crd", crd, "--ignore-not-found", "--timeout=120s"],
                None,
            )
            .ok();
        }
        install_crds();
        let client = client().await;
        let ns = TestNamespace::create_annotated(&client, test, annotations).await;
        let port = free_port();
        let server = olm_serve(&repo_root().join("catalog"), port);
        // Copies of an AllNamespaces CSV would go into every namespace of the shared test
        // cluster; they have tests of their own (operator_groups.rs).
        let flags: &[&str] = match targets {
            Targets::All => &["--leader-elect=false", "--disable-copied-csvs"],
            _ => &["--leader-elect=false"],
        };
        let olm = OlmRun::start(&ns.name, flags);
        apply(&catalog_source_yaml(
            &ns.name,
            "operators",
            &format!("127.0.0.1:{port}"),
            "",
        ));
        wait_for_state(&ns.name, "operators", "READY");
        apply(&format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {}\nspec:\n{}",
            ns.name,
            targets.spec_yaml(&ns.name)
        ));
        apply(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {package}\n  namespace: {0}\nspec:\n  name: {package}\n  source: operators\n  sourceNamespace: {0}\n",
            ns.name
        ));
        eventually(&format!("CSV {csv} created"), WAIT, || async {
            get(&ns.name, &format!("csv/{csv}"))
        })
        .await;
        wait_for_phase(&ns.name, csv, "Succeeded", None).await;
        Installed {
            ns,
            olm: Some(olm),
            _server: server,
            csv: csv.to_string(),
            _crds: crds,
            _apps: apps,
        }
    }

    pub fn name(&self) -> &str {
        &self.ns.name
    }

    /// The ServiceAccount the CSV's (single) deployment runs as.
    pub fn service_account(&self) -> String {
        let csv = get(self.name(), &format!("csv/{}", self.csv)).unwrap();
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// WATCH_NAMESPACE as the operator's pod gets it: the env of the container in the
    /// Deployment OLM made, a `fieldRef` followed to the pod template's annotation (our CSVs
    /// pass `olm.targetNamespaces` on this way).
    pub fn watch_namespace(&self) -> String {
        let csv = get(self.name(), &format!("csv/{}", self.csv)).unwrap();
        let name = csv["spec"]["install"]["spec"]["deployments"][0]["name"]
            .as_str()
            .unwrap();
        let deployment = get(self.name(), &format!("deployment/{name}"))
            .unwrap_or_else(|| panic!("OLM made no Deployment {name} for {}", self.csv));
        let template = &deployment["spec"]["template"];
        let env = template["spec"]["containers"][0]["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == "WATCH_NAMESPACE")
            .unwrap_or_else(|| panic!("no WATCH_NAMESPACE in {name}: {template:#}"));
        if let Some(value) = env["value"].as_str() {
            return value.to_string();
        }
        let path = env["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap();
        let annotation = path
            .strip_prefix("metadata.annotations['")
            .and_then(|p| p.strip_suffix("']"))
            .unwrap_or_else(|| panic!("WATCH_NAMESPACE of {name} from {path}"));
        template["metadata"]["annotations"][annotation]
            .as_str()
            .unwrap_or_else(|| panic!("no {annotation} on the pods of {name}: {template:#}"))
            .to_string()
    }

    /// A kubeconfig for the test cluster that authenticates as the CSV's ServiceAccount
    /// (a TokenRequest token): the operator gets exactly the RBAC OLM granted.
    pub fn operator_kubeconfig(&self) -> PathBuf {
        let sa = self.service_account();
        let token = kubectl(
            &["create", "token", &sa, "-n", self.name(), "--duration=2h"],
            None,
        )
        .ok()
        .stdout();
        let admin: Value = serde_json::from_str(
            &kubectl(&["config", "view", "--raw", "--minify", "-o", "json"], None)
                .ok()
                .stdout(),
        )
        .unwrap();
        let cluster = &admin["clusters"][0]["cluster"];
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": cluster}],
            "users": [{"name": sa, "user": {"token": token.trim()}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": sa, "namespace": self.name()}}],
            "current-context": "test",
        });
        let path =
            std::env::temp_dir().join(format!("olm-operator-{}-{sa}.kubeconfig", self.name()));
        std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
        path
    }

    /// Stops `olm run`: what it made stays, and is no longer corrected.
    pub fn stop_olm(&mut self) {
        self.olm.take();
    }

    /// The Role OLM made for the CSV's namespaced permissions.
    pub fn role(&self) -> Value {
        let roles = kubectl(
            &[
                "get",
                "roles",
                "-n",
                self.name(),
                "-l",
                &format!("olm.owner={}", self.csv),
                "-o",
                "json",
            ],
            None,
        )
        .ok();
        let roles: Value = serde_json::from_str(&roles.stdout()).unwrap();
        let items = roles["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "one Role for {}: {roles:#}", self.csv);
        items[0].clone()
    }

    /// Removes the rules of the CSV's Role that name `resource` (OLM must be stopped).
    pub fn revoke(&self, resource: &str) {
        assert!(
            self.olm.is_none(),
            "stop OLM first, or it restores the Role"
        );
        let mut role = self.role();
        let rules = role["rules"].as_array_mut().unwrap();
        let before = rules.len();
        rules.retain(|r| {
            !r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
        });
        assert!(rules.len() < before, "no rule for {resource} in {role:#}");
        let patch = serde_json::json!({ "rules": role["rules"] });
        kubectl(
            &[
                "patch",
                "role",
                role["metadata"]["name"].as_str().unwrap(),
                "-n",
                self.name(),
                "--type=merge",
                "-p",
                &patch.to_string(),
            ],
            None,
        )
        .ok();
    }
}

impl Drop for Installed {
    /// The finalizer of a CSV needs OLM: without this the namespace would stay Terminating
    /// once OLM is gone, and an AllNamespaces CSV's ClusterRoles would stay behind. The
    /// Subscriptions go first, or OLM would install the CSVs again; dependencies' CSVs
    /// (ptemplate's KMM) go too.
    fn drop(&mut self) {
        let ns = self.ns.name.as_str();
        if self.olm.is_some() {
            for kind in ["subscriptions", "csv"] {
                let _ = kubectl(&["delete", kind, "--all", "-n", ns, "--timeout=60s"], None);
            }
            return;
        }
        let csvs = kubectl(&["get", "csv", "-n", ns, "-o", "name"], None).stdout();
        for csv in csvs.lines() {
            let _ = kubectl(
                &[
                    "patch",
                    csv,
                    "-n",
                    ns,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ],
                None,
            );
        }
    }
}

pub fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

/// An operator binary running as a local process against the test cluster.
pub struct Operator {
    pub process: Process,
    pub probe_port: u16,
}

impl Operator {
    /// Starts `bin` with `kubeconfig`, watching `namespaces`; waits until /readyz answers 200.
    pub fn start(bin: &str, kubeconfig: &Path, namespaces: &str) -> Operator {
        let mut operator = Self::spawn(bin, kubeconfig, namespaces);
        let port = operator.probe_port;
        wait_for_port(&mut operator.process, port, Duration::from_secs(30));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while http_get(port, "/readyz").map(|(code, _)| code) != Some(200) {
            if let Some(status) = operator.process.exited() {
                panic!("{bin} exited ({status}):\n{}", operator.process.log_text());
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{bin} not ready:\n{}",
                operator.process.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        operator
    }

    /// Starts `bin` without waiting for anything.
    pub fn spawn(bin: &str, kubeconfig: &Path, namespaces: &str) -> Operator {
        let probe_port = free_port();
        let process = Process::spawn(
            bin,
            Command::new(workspace_bin(bin))
                .env_remove("KUBECONFIG")
                .env("RUST_LOG", "info")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args([
                    "--namespace",
                    namespaces,
                    "--probe-address",
                    &format!("127.0.0.1:{probe_port}"),
                ]),
        );
        Operator {
            process,
            probe_port,
        }
    }

    /// Panics when the operator logged a permission error: its RBAC is short. A namespace
    /// being deleted refuses new objects as Forbidden too; that is no RBAC error (an operator
    /// over all namespaces meets the namespaces of tests that just ended).
    pub fn assert_never_forbidden(&self) {
        let log = self.process.log_text();
        assert!(
            !log.lines().any(|line| {
                line.to_lowercase().contains("forbidden")
                    && !line.contains("because it is being terminated")
            }),
            "{} was refused something its CSV should grant:\n{log}",
            self.process.name
        );
        assert!(
            !log.contains("panicked"),
            "{} panicked:\n{log}",
            self.process.name
        );
    }

    /// Waits until the log contains `text`.
    pub async fn wait_for_log(&self, text: &str) -> String {
        eventually(
            &format!("{} logs {text:?}", self.process.name),
            WAIT,
            || async {
                let log = self.process.log_text();
                log.contains(text).then_some(log)
            },
        )
        .await
    }

    pub fn metric_line(&self, prefix: &str) -> Option<String> {
        let (_, body) = http_get(self.probe_port, "/metrics")?;
        body.lines()
            .find(|l| l.starts_with(prefix))
            .map(String::from)
    }
}

/// Waits until `resource` in `namespace` matches `check`; returns it.
pub async fn wait_for(
    namespace: &str,
    resource: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(&format!("{resource}: {what}"), WAIT, || async {
        get(namespace, resource).filter(|v| check(v))
    })
    .await
}

/// Waits until `resource` is gone.
pub async fn wait_gone(namespace: &str, resource: &str) {
    eventually(&format!("{resource} deleted"), WAIT, || async {
        get(namespace, resource).is_none().then_some(())
    })
    .await;
}

pub fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Reasons and notes of the Events about one object (events.k8s.io, as operators write them).
pub fn events_about(namespace: &str, name: &str) -> Vec<(String, String)> {
    let out = kubectl(
        &["get", "events.events.k8s.io", "-n", namespace, "-o", "json"],
        None,
    )
    .ok();
    let events: Value = serde_json::from_str(&out.stdout()).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["regarding"]["name"] == name)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}
