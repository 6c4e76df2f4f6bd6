//! The at and ptemplate operators installed by OLM and run on the real node, each with the
//! token OLM made for it: at's pod runs its command in a container at the scheduled time;
//! ptemplate comes up with its dependency (the KMM stand-in, installed through the
//! Subscription OLM generates), ptemplate's pod makes the Module and KMM's pod reports the
//! nodes it selects.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::{Node, WAIT, expect_operator_running};
use crate::harness::{eventually, kubectl};
use crate::operators::{Installed, apply, wait_for};

fn phase(at: &Value) -> &str {
    at["status"]["phase"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn at_runs_its_command_in_a_real_container_at_the_scheduled_time() {
    Node::get().push_binary("at-operator", &["v0.3.0"]);
    let olm = Installed::subscribe_on_real_node("rn-at", "at", "at.v0.3.0").await;
    let ns = olm.name().to_string();
    expect_operator_running(&ns, "at.v0.3.0", "quay.io/olm-rs/at-operator:v0.3.0").await;

    let due = Timestamp::now() + SignedDuration::from_secs(8);
    let schedule = due.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    apply(&format!(
        "apiVersion: cnat.d2iq.com/v1alpha1\nkind: At\nmetadata:\n  name: soon\n  namespace: {ns}\nspec:\n  schedule: \"{schedule}\"\n  command: echo YAY\n"
    ));
    wait_for(&ns, "at/soon", "DONE", |a| phase(a) == "DONE").await;
    let pod = wait_for(&ns, "pod/soon-pod", "Succeeded", |p| {
        p["status"]["phase"] == "Succeeded"
    })
    .await;
    assert_eq!(pod["spec"]["nodeName"], "real-node-0");
    let terminated = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0, "{pod:#}");
    let started: Timestamp = terminated["startedAt"].as_str().unwrap().parse().unwrap();
    let scheduled: Timestamp = schedule.parse().unwrap();
    assert!(
        started >= scheduled,
        "started {started}, scheduled {scheduled}"
    );
    // The command really ran: its output is in the container's log.
    let logs = kubectl(&["logs", "-n", &ns, "soon-pod"], None)
        .ok()
        .stdout();
    assert_eq!(logs.trim(), "YAY");
}

#[tokio::test]
async fn ptemplate_and_its_kmm_dependency_run_and_reconcile_on_the_real_node() {
    let node = Node::get();
    node.push_binary("ptemplate-operator", &["v0.3.0"]);
    node.push_binary("kernel-module-management-operator", &["v2.2.0"]);
    let olm =
        Installed::subscribe_on_real_node("rn-ptemplate", "ptemplate", "ptemplate.v0.3.0").await;
    let ns = olm.name().to_string();
    expect_operator_running(
        &ns,
        "kernel-module-management.v2.2.0",
        "quay.io/olm-rs/kernel-module-management-operator:v2.2.0",
    )
    .await;
    expect_operator_running(
        &ns,
        "ptemplate.v0.3.0",
        "quay.io/olm-rs/ptemplate-operator:v0.3.0",
    )
    .await;

    apply(&format!(
        "apiVersion: pt.example.com/v1alpha1\nkind: Ptemplate\nmetadata:\n  name: driver\n  namespace: {ns}\nspec:\n  maxdev: 2\n  defaultmsg: hello\n  requiredDevices: 1\n  selector:\n    kubernetes.io/hostname: real-node-0\n"
    ));
    let module = eventually(
        "Module driver made by ptemplate and counted by KMM",
        WAIT,
        || async {
            let out = kubectl(&["get", "module", "driver", "-n", &ns, "-o", "json"], None);
            let module: Value = serde_json::from_str(&out.stdout()).ok()?;
            (module["status"]["moduleLoader"]["nodesMatchingSelectorNumber"] == 1).then_some(module)
        },
    )
    .await;
    assert_eq!(
        module["metadata"]["ownerReferences"][0]["kind"],
        "Ptemplate"
    );
    assert_eq!(module["status"]["moduleLoader"]["availableNumber"], 0);
}
