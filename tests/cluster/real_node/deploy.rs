//! OLM deployed as an admin deploys it: the `olm-operator` image built from this tree and
//! pushed under the name `deploy/operator.yaml` gives it (`quay.io/olm-rs/olm-operator:latest`,
//! served by the node's registry), then every file of `deploy/` applied. Two replicas run on
//! the real node; one leads; the API server reaches the packagemanifests API in the pods
//! through its Service; the probes and the metrics port answer as deployed; and the OLM in
//! the pods installs an operator whose pod runs.
//!
//! Two changes to `operator.yaml`, both flags an admin may set: the replicas watch only this
//! test's namespace (other tests run their own OLM on theirs), and the catalog's registry,
//! which pods reach over plain HTTP, is named insecure.

use std::process::Command;

use serde_json::Value;

use super::{Node, WAIT, assert_running_for_real, namespace, on_real_node};
use crate::harness::{client, eventually, install_crds, kubectl, repo_root};
use crate::image_catalogs::image_source_yaml;
use crate::operators::apply;
use crate::packagemanifests::TURN;

const DEPLOY_FILES: [&str; 5] = [
    "namespace.yaml",
    "rbac.yaml",
    "aggregated-roles.yaml",
    "networkpolicies.yaml",
    "packages.yaml",
];

/// What the test adds to the cluster beyond its namespace, removed when it ends (also on a
/// panic): the Deployment first, so that no replica writes the APIService again.
struct Deployed {
    binding: String,
}

impl Drop for Deployed {
    fn drop(&mut self) {
        let steps: [&[&str]; 6] = [
            &[
                "delete",
                "deployment",
                "olm-operator",
                "-n",
                "olm",
                "--wait=true",
            ],
            &["delete", "apiservice", "v1.packages.operators.coreos.com"],
            &["delete", "service", "olm-packages", "-n", "olm"],
            &["delete", "lease", "olm-leader", "-n", "olm"],
            &["delete", "clusterrolebinding", &self.binding],
            &[
                "annotate",
                "namespace",
                "olm",
                "scheduler.alpha.kubernetes.io/node-selector-",
                "scheduler.alpha.kubernetes.io/defaultTolerations-",
            ],
        ];
        for step in steps {
            let mut args = step.to_vec();
            if args[0] == "delete" {
                args.push("--ignore-not-found");
            }
            let _ = kubectl(&args, None);
        }
    }
}

/// `deploy/operator.yaml` with the two flags of this test (see the module's comment).
fn operator_yaml(watch: &str, insecure_registry: &str) -> String {
    let text = std::fs::read_to_string(repo_root().join("deploy/operator.yaml")).unwrap();
    let anchor = "            - --log-format=json\n";
    assert!(
        text.contains(anchor),
        "deploy/operator.yaml changed its args"
    );
    text.replace(
        anchor,
        &format!(
            "{anchor}            - --watch-namespace={watch}\n            - --insecure-registry={insecure_registry}\n"
        ),
    )
}

#[tokio::test]
async fn olm_from_deploy_runs_on_the_real_node_and_installs_an_operator() {
    let _turn = TURN.lock().await;
    install_crds();
    let node = Node::get();
    node.push_binary("olm-operator", &["latest"]);
    node.push_binary("reverse-words-operator", &["v0.5.0"]);
    node.push_binary("reverse-words-app", &["v0.5.0"]);
    let client = client().await;
    let ns = namespace(&client, "rn-deploy").await;
    let catalog = node.push_catalog(&repo_root().join("catalog"), &ns.name);

    let _deployed = Deployed {
        binding: format!("{}-metrics", ns.name),
    };
    for file in DEPLOY_FILES {
        let path = repo_root().join("deploy").join(file);
        kubectl(&["apply", "-f", path.to_str().unwrap()], None).ok();
    }
    for (key, value) in on_real_node().as_object().unwrap() {
        let set = format!("{key}={}", value.as_str().unwrap());
        kubectl(&["annotate", "namespace", "olm", "--overwrite", &set], None).ok();
    }
    apply(&operator_yaml(&ns.name, &node.registry_from_pods));
    kubectl(
        &[
            "rollout",
            "status",
            "deployment/olm-operator",
            "-n",
            "olm",
            "--timeout=180s",
        ],
        None,
    )
    .ok();

    // Two real pods, Ready by their readiness probe (/readyz), never restarted by liveness.
    let replicas = super::pods("olm", "app=olm-operator");
    assert_eq!(replicas.len(), 2, "{replicas:#?}");
    replicas.iter().for_each(assert_running_for_real);
    let names: Vec<&str> = replicas
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    let holder = eventually("a replica holds the Lease olm/olm-leader", WAIT, || async {
        let lease = kubectl(
            &["get", "lease", "olm-leader", "-n", "olm", "-o", "json"],
            None,
        );
        let lease: Value = serde_json::from_str(&lease.stdout()).ok()?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_string)
    })
    .await;
    assert!(
        names.contains(&holder.as_str()),
        "{holder} not in {names:?}"
    );
    // The metrics port as deployed (TLS, token checked): exactly one replica leads.
    let token = metrics_token(&ns.name);
    eventually(
        "olm_leader 1 on one replica, 0 on the other",
        WAIT,
        || async {
            let leaders: Vec<f64> = replicas
                .iter()
                .filter_map(|p| metric(p, &token, "olm_leader"))
                .collect();
            (leaders.len() == 2 && leaders.iter().sum::<f64>() == 1.0).then_some(())
        },
    )
    .await;

    // The catalog, pulled by the leader from the registry as pods reach it.
    apply(&image_source_yaml(&ns.name, "operators", &catalog, ""));
    kubectl(
        &[
            "wait",
            "-n",
            &ns.name,
            "catalogsource/operators",
            "--timeout=120s",
            "--for=jsonpath={.status.connectionState.lastObservedState}=READY",
        ],
        None,
    )
    .ok();

    // The API server calls the pods through the Service (ClusterIP, kube-proxy on the node).
    kubectl(
        &[
            "wait",
            "--for=condition=Available",
            "--timeout=120s",
            "apiservice/v1.packages.operators.coreos.com",
        ],
        None,
    )
    .ok();
    let listed = eventually("reverse-words in packagemanifests", WAIT, || async {
        let out = kubectl(&["get", "packagemanifests", "-n", &ns.name], None);
        (out.success() && out.stdout().contains("reverse-words")).then(|| out.stdout())
    })
    .await;
    assert!(listed.contains("Image catalog"), "{listed}");

    // And it installs: the operator's pod and the app's pod run on the node.
    apply(&super::reverse_words_subscription(&ns.name, ""));
    super::expect_operator_running(
        &ns.name,
        "reverse-words.v0.5.0",
        "quay.io/olm-rs/reverse-words-operator:v0.5.0",
    )
    .await;
    super::operators::expect_app_answering(&ns.name, "words").await;
}

/// A token allowed `/metrics`: a ServiceAccount of the test bound to deploy's
/// `olm-metrics-reader` (the binding is removed with [`Deployed`]).
fn metrics_token(namespace: &str) -> String {
    kubectl(
        &["create", "serviceaccount", "prometheus", "-n", namespace],
        None,
    )
    .ok();
    kubectl(
        &[
            "create",
            "clusterrolebinding",
            &format!("{namespace}-metrics"),
            "--clusterrole=olm-metrics-reader",
            &format!("--serviceaccount={namespace}:prometheus"),
        ],
        None,
    )
    .ok();
    kubectl(&["create", "token", "prometheus", "-n", namespace], None)
        .ok()
        .stdout()
        .trim()
        .to_string()
}

/// One series from a replica's `/metrics`, over TLS on the metrics port (from the host,
/// which routes the pod range into the node).
fn metric(pod: &Value, token: &str, series: &str) -> Option<f64> {
    let ip = pod["status"]["podIP"].as_str()?;
    let out = Command::new("curl")
        .args(["-sk", "-m", "5", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("https://{ip}:8443/metrics"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}
