//! A CSV's health read from real pods, on the real node of `hack/node/up` (kwok's fake nodes
//! mark every pod Ready): an image that cannot be pulled and a container that exits 1 keep
//! the CSV from Succeeded, and its message names the pod and why, as does the `Operator`'s
//! component list. A Deployment past its progress deadline fails the CSV with
//! InstallCheckFailed and the Deployment's own words; a Succeeded CSV whose pod starts to
//! fail goes to Failed (ComponentUnhealthy).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::csv_lifecycle::{apply_json, get, operator_group};
use crate::harness::{TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl};
use crate::processes::OlmRun;

/// Long enough for a pull to fail and a container to crash twice on a loaded machine.
const WAIT: Duration = Duration::from_secs(180);

/// The cluster dir of the control plane under test: `$OLM_CLUSTER_DIR`, else the
/// kubeconfig's directory (`hack/cluster/up` writes it there).
fn cluster_dir() -> PathBuf {
    std::env::var_os("OLM_CLUSTER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| kubeconfig_path().parent().unwrap().to_path_buf())
}

/// The busybox image `hack/node/up` pushed to the node's registry.
fn busybox() -> String {
    let path = cluster_dir().join("node/images/busybox");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (is the real node up? hack/node/up)",
                path.display()
            )
        })
        .trim()
        .to_string()
}

/// A CSV named `<name>.v1.0.0` whose one Deployment `name` runs `container` on the real
/// node, labelled as a component of the Operator `<name>.<namespace>`.
fn csv(namespace: &str, name: &str, container: &Value, progress_deadline: i64) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "name": format!("{name}.v1.0.0"),
            "namespace": namespace,
            "labels": {format!("operators.coreos.com/{name}.{namespace}"): ""},
        },
        "spec": {
            "displayName": name,
            "version": "1.0.0",
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": false},
            ],
            "install": {"strategy": "deployment", "spec": {"deployments": [{
                "name": name,
                "spec": {
                    "replicas": 1,
                    "progressDeadlineSeconds": progress_deadline,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {
                            "nodeSelector": {"olm.test/real-node": "true"},
                            "tolerations": [{"key": "olm.test/real-node", "operator": "Exists"}],
                            "terminationGracePeriodSeconds": 1,
                            "containers": [container],
                        },
                    },
                },
            }]}},
        },
    })
}

/// The Operator `<name>.<namespace>`, made by hand (no Subscription here); deleted when
/// dropped (it is cluster-scoped: the test namespace does not take it along).
struct HandMadeOperator(String);

impl HandMadeOperator {
    fn create(namespace: &str, name: &str) -> Self {
        let name = format!("{name}.{namespace}");
        let operator = json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "Operator",
            "metadata": {"name": name},
            "spec": {},
        });
        kubectl(&["apply", "-f", "-"], Some(&operator.to_string())).ok();
        HandMadeOperator(name)
    }
}

impl Drop for HandMadeOperator {
    fn drop(&mut self) {
        let operator = format!("operator.operators.coreos.com/{}", self.0);
        let _ = kubectl(
            &["delete", &operator, "--wait=false", "--ignore-not-found"],
            None,
        );
    }
}

/// The CSV's status once `check` accepts it; the last status seen when it never does.
async fn csv_status(
    namespace: &str,
    csv: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let found = get(namespace, &format!("csv/{csv}"));
        let status = found.map(|c| c["status"].clone()).unwrap_or_default();
        if check(&status) {
            return status;
        }
        assert!(
            start.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for csv {csv}: {what}; last status: {status}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The entry of the CSV's history with `phase` and `reason`, if there is one.
fn entry<'a>(status: &'a Value, phase: &str, reason: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["phase"] == phase && c["reason"] == reason)
}

fn is(status: &Value, phase: &str, reason: &str) -> bool {
    status["phase"] == phase && status["reason"] == reason
}

fn message(status: &Value) -> &str {
    status["message"].as_str().unwrap_or_default()
}

/// A condition the Operator `<name>.<namespace>` lists for its component of `kind`.
async fn operator_condition(
    namespace: &str,
    name: &str,
    kind: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let operator = format!("operator.operators.coreos.com/{name}.{namespace}");
    eventually(
        &format!("{operator} listing a {kind}'s state"),
        WAIT,
        || {
            let out = kubectl(&["get", &operator, "-o", "json"], None);
            let found = out.success().then(|| {
                let object: Value = serde_json::from_str(&out.stdout()).unwrap();
                object["status"]["components"]["refs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["kind"] == kind)
                    .flat_map(|r| r["conditions"].as_array().cloned().unwrap_or_default())
                    .find(|c| check(c))
            });
            async move { found.flatten() }
        },
    )
    .await
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_keeps_the_csv_installing_then_fails_it() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "health-pull").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let _operator = HandMadeOperator::create(&ns.name, "pull");
    let container = json!({"name": "manager", "image": "127.0.0.1:1/none:v1"});
    apply_json(&ns.name, &csv(&ns.name, "pull", &container, 45));

    let waiting = csv_status(
        &ns.name,
        "pull.v1.0.0",
        "InstallWaiting naming the pull",
        |s| {
            is(s, "Installing", "InstallWaiting")
                && (message(s).contains("ImagePullBackOff") || message(s).contains("ErrImagePull"))
        },
    )
    .await;
    let text = message(&waiting);
    eprintln!("{text}");
    assert!(
        text.starts_with(
            "installing: waiting for deployment pull to become ready: 0 of 1 replicas available"
        ),
        "{text}"
    );
    assert!(text.contains("; pod pull-"), "{text}");
    assert!(text.contains("container \"manager\": "), "{text}");
    assert!(text.contains("127.0.0.1:1/none:v1"), "{text}");
    let shown = operator_condition(&ns.name, "pull", "ClusterServiceVersion", |c| {
        c["type"] == "Installing"
            && c["reason"] == "InstallWaiting"
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("; pod pull-"))
    })
    .await;
    assert_eq!(shown["status"], "True", "{shown}");

    // Past progressDeadlineSeconds the Deployment says ProgressDeadlineExceeded: Failed.
    let failed = csv_status(&ns.name, "pull.v1.0.0", "InstallCheckFailed", |s| {
        is(s, "Failed", "InstallCheckFailed")
    })
    .await;
    let text = message(&failed);
    eprintln!("{text}");
    assert!(
        text.starts_with(
            "install failed: deployment pull exceeded its progress deadline: ReplicaSet \"pull-"
        ),
        "{text}"
    );
    assert!(text.contains("has timed out progressing."), "{text}");
    assert!(text.contains("; pod pull-"), "{text}");
    // Never Succeeded on the way.
    let history: Vec<&str> = failed["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["phase"].as_str())
        .collect();
    assert!(!history.contains(&"Succeeded"), "{history:?}");
    operator_condition(&ns.name, "pull", "ClusterServiceVersion", |c| {
        c["type"] == "Failed" && c["reason"] == "InstallCheckFailed"
    })
    .await;
    // The Deployment is a component too, with its own conditions.
    operator_condition(&ns.name, "pull", "Deployment", |c| {
        c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded"
    })
    .await;
}

#[tokio::test]
async fn a_crash_looping_container_is_named_with_its_exit_and_a_late_crash_fails_a_succeeded_csv() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "health-crash").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let _operator = HandMadeOperator::create(&ns.name, "crash");
    let image = busybox();
    let crash = json!({"name": "manager", "image": image, "command": ["sh", "-c", "exit 1"]});
    apply_json(&ns.name, &csv(&ns.name, "crash", &crash, 600));
    // Runs long enough to be Available, then fails.
    let late =
        json!({"name": "manager", "image": image, "command": ["sh", "-c", "sleep 10; exit 1"]});
    apply_json(&ns.name, &csv(&ns.name, "late", &late, 600));

    // A container that exits at once is Ready for a moment after each start, and its
    // Deployment may turn Available on the first one (the CSV then reads Succeeded, as
    // upstream's would, and Failed a second later); after a restart it must run for 30 s to
    // count. Either way the CSV settles short of Succeeded, naming the pod and its exit.
    let crashing = csv_status(&ns.name, "crash.v1.0.0", "the crash named", |s| {
        (is(s, "Installing", "InstallWaiting") && message(s).contains("CrashLoopBackOff"))
            || (is(s, "Failed", "ComponentUnhealthy") && message(s).contains("(exit code 1)"))
    })
    .await;
    let text = message(&crashing);
    eprintln!("{text}");
    assert!(
        text.contains("waiting for deployment crash to become ready: 0 of 1 replicas available"),
        "{text}"
    );
    assert!(
        text.contains("; pod crash-") && text.contains(" container \"manager\": "),
        "{text}"
    );
    if crashing["phase"] == "Installing" {
        assert!(
            text.contains("CrashLoopBackOff: ") && text.contains("last exit: Error (exit code 1)"),
            "{text}"
        );
    }
    let reason = crashing["reason"].clone();
    operator_condition(&ns.name, "crash", "ClusterServiceVersion", |c| {
        c["reason"] == reason
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("; pod crash-"))
    })
    .await;

    // Succeeded, then Failed when its container exits (read from the history: the kubelet
    // restarts it after a back-off and the CSV may succeed again).
    let failed = csv_status(&ns.name, "late.v1.0.0", "Failed after Succeeded", |s| {
        entry(s, "Succeeded", "InstallSucceeded").is_some()
            && entry(s, "Failed", "ComponentUnhealthy").is_some()
    })
    .await;
    let text = entry(&failed, "Failed", "ComponentUnhealthy").unwrap()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    eprintln!("{text}");
    assert!(
        text.starts_with("installing: waiting for deployment late to become ready: "),
        "{text}"
    );
    assert!(
        text.contains("; pod late-") && text.contains("(exit code 1)"),
        "{text}"
    );
    // Restarted, it is Available again for ten seconds at a time: not long enough to read
    // Succeeded again.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let later = csv_status(&ns.name, "late.v1.0.0", "still Failed", |s| {
        s["phase"] == "Failed"
    })
    .await;
    let history: Vec<&str> = later["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["phase"].as_str())
        .collect();
    let first_failed = history.iter().position(|p| *p == "Failed").unwrap();
    assert!(
        !history[first_failed..].contains(&"Succeeded"),
        "{history:?}"
    );
    // Nor did the crash-looping one read Succeeded again once it had restarted.
    let crash = csv_status(&ns.name, "crash.v1.0.0", "crash not Succeeded", |s| {
        s["phase"] != "Succeeded"
    })
    .await;
    let succeeded = crash["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["phase"] == "Succeeded")
        .count();
    assert!(succeeded <= 1, "{crash}");
}
