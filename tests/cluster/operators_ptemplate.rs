//! The ptemplate operator (operators/ptemplate) with exactly the RBAC of its CSV, installed
//! with its KMM dependency: a Ptemplate gets its Module and consumer DaemonSet; editing the
//! spec updates them; drift is set back; a deleted child comes back.

use serde_json::{Value, json};

use super::csv_lifecycle::{get, wait_for_phase};
use super::harness::kubectl;
use super::operators::{Installed, Operator, apply, condition, wait_for};

const CSV: &str = "ptemplate.v0.3.0";
const BIN: &str = "ptemplate-operator";

/// The seed's example.
fn ptemplate_yaml(ns: &str) -> String {
    format!(
        r#"apiVersion: pt.example.com/v1alpha1
kind: Ptemplate
metadata:
  name: consumer-pod
  namespace: {ns}
spec:
  maxdev: 5
  defaultmsg: ptemplate
  consumerimage: quay.io/chrisp262/pt-device-plugin:consumer-latest
  requiredDevices: 2
  imageRepoSecret:
    name: pt-char-pull-secret
  selector:
    node-role.kubernetes.io/worker: worker
"#
    )
}

fn parameters(module: &Value) -> &Value {
    &module["spec"]["moduleLoader"]["container"]["modprobe"]["parameters"]
}

fn devices(ds: &Value) -> &Value {
    &ds["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["example.com/ptemplate"]
}

fn patch(ns: &str, resource: &str, patch: &str) {
    kubectl(
        &["patch", resource, "-n", ns, "--type=merge", "-p", patch],
        None,
    )
    .ok();
}

#[tokio::test]
async fn ptemplate_operator_keeps_module_and_consumers_as_specified() {
    let mut olm = Installed::subscribe("pt-operator", "ptemplate", CSV).await;
    let ns = olm.name().to_string();
    wait_for_phase(&ns, "kernel-module-management.v2.2.0", "Succeeded", None).await;
    let operator = Operator::start(BIN, &olm.operator_kubeconfig(), &ns);

    apply(&ptemplate_yaml(&ns));
    let module = wait_for(&ns, "module/consumer-pod", "created", |_| true).await;
    assert_eq!(
        parameters(&module),
        &json!(["max_dev=5", "default_msg=ptemplate"])
    );
    assert_eq!(
        module["spec"]["imageRepoSecret"]["name"],
        "pt-char-pull-secret"
    );
    assert_eq!(
        module["spec"]["selector"],
        json!({"node-role.kubernetes.io/worker": "worker"})
    );
    assert_eq!(
        module["metadata"]["ownerReferences"][0]["kind"],
        "Ptemplate"
    );
    let ds = wait_for(&ns, "daemonset/consumer-pod-consumer", "created", |_| true).await;
    assert_eq!(devices(&ds), "2");
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/chrisp262/pt-device-plugin:consumer-latest"
    );
    assert_eq!(
        ds["spec"]["template"]["spec"]["nodeSelector"]["node-role.kubernetes.io/worker"],
        "worker"
    );
    assert_eq!(ds["metadata"]["ownerReferences"][0]["name"], "consumer-pod");
    // No node is a worker: nothing to schedule, and that is ready.
    wait_for(&ns, "ptemplate/consumer-pod", "Ready", |p| {
        condition(p, "Ready").is_some_and(|c| c["status"] == "True")
    })
    .await;

    // Editing the spec updates both children.
    patch(
        &ns,
        "ptemplate/consumer-pod",
        r#"{"spec":{"maxdev":7,"requiredDevices":3,"defaultmsg":"hello"}}"#,
    );
    wait_for(&ns, "module/consumer-pod", "max_dev=7", |m| {
        parameters(m) == &json!(["max_dev=7", "default_msg=hello"])
    })
    .await;
    wait_for(&ns, "daemonset/consumer-pod-consumer", "3 devices", |d| {
        devices(d) == "3"
    })
    .await;

    // Drift is set back.
    patch(
        &ns,
        "module/consumer-pod",
        r#"{"spec":{"moduleLoader":{"container":{"modprobe":{"parameters":["max_dev=1"]}}}}}"#,
    );
    wait_for(&ns, "module/consumer-pod", "max_dev=7 again", |m| {
        parameters(m) == &json!(["max_dev=7", "default_msg=hello"])
    })
    .await;
    patch(
        &ns,
        "daemonset/consumer-pod-consumer",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"consumer","image":"busybox"}]}}}}"#,
    );
    wait_for(
        &ns,
        "daemonset/consumer-pod-consumer",
        "consumer image again",
        |d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"]
                == "quay.io/chrisp262/pt-device-plugin:consumer-latest"
        },
    )
    .await;

    // Deleted children come back.
    let uid = |resource: &str| get(&ns, resource).map(|v| v["metadata"]["uid"].clone());
    for resource in ["daemonset/consumer-pod-consumer", "module/consumer-pod"] {
        let before = uid(resource).unwrap();
        kubectl(&["delete", resource, "-n", &ns, "--wait=true"], None).ok();
        wait_for(&ns, resource, "made again", |v| {
            v["metadata"]["uid"] != before
        })
        .await;
    }
    operator.assert_never_forbidden();

    // Without a permission it needs, the operator says so on the object and in its log.
    olm.stop_olm();
    olm.revoke("daemonsets");
    patch(
        &ns,
        "ptemplate/consumer-pod",
        r#"{"spec":{"requiredDevices":4}}"#,
    );
    let pt = wait_for(&ns, "ptemplate/consumer-pod", "ReconcileFailed", |p| {
        condition(p, "Ready").is_some_and(|c| c["reason"] == "ReconcileFailed")
    })
    .await;
    let message = condition(&pt, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("DaemonSet consumer-pod-consumer") && message.contains("forbidden"),
        "{message}"
    );
    operator.wait_for_log("reconcile failed").await;
}
