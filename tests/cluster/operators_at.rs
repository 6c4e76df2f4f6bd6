//! The at operator (operators/at) with exactly the RBAC of its CSV: an At scheduled a few
//! seconds ahead goes PENDING → RUNNING → DONE with its Pod and Events; a bad schedule gets
//! a condition, not a crash.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::csv_lifecycle::get;
use super::harness::kubectl;
use super::operators::{Installed, Operator, apply, condition, events_about, wait_for};
use super::processes::http_get;

const CSV: &str = "at.v0.3.0";
const BIN: &str = "at-operator";

fn at_yaml(ns: &str, name: &str, schedule: &str) -> String {
    format!(
        "apiVersion: cnat.d2iq.com/v1alpha1\nkind: At\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  schedule: \"{schedule}\"\n  command: echo YAY\n"
    )
}

fn phase(at: &Value) -> &str {
    at["status"]["phase"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn at_operator_runs_the_command_at_the_scheduled_time() {
    let mut olm = Installed::subscribe("at-operator", "at", CSV).await;
    let ns = olm.name().to_string();
    let operator = Operator::start(BIN, &olm.operator_kubeconfig(), &ns);

    let due = Timestamp::now() + SignedDuration::from_secs(6);
    let schedule = due.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    apply(&at_yaml(&ns, "soon", &schedule));
    let at = wait_for(&ns, "at/soon", "PENDING", |a| phase(a) == "PENDING").await;
    assert!(
        Timestamp::now() < due,
        "PENDING seen only after the schedule: {at:#}"
    );
    assert!(
        get(&ns, "pod/soon-pod").is_none(),
        "no pod before the schedule"
    );

    let at = wait_for(&ns, "at/soon", "RUNNING", |a| phase(a) == "RUNNING").await;
    assert!(
        Timestamp::now()
            >= due.round(k8s_openapi::jiff::Unit::Second).unwrap() - SignedDuration::from_secs(1),
        "{at:#}"
    );
    let pod = wait_for(&ns, "pod/soon-pod", "Running (kwok)", |p| {
        p["status"]["phase"] == "Running"
    })
    .await;
    assert_eq!(
        pod["spec"]["containers"][0]["command"],
        serde_json::json!(["echo", "YAY"])
    );
    assert_eq!(pod["metadata"]["ownerReferences"][0]["name"], "soon");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "At");
    let created: Timestamp = pod["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        created >= due - SignedDuration::from_secs(1),
        "pod made at {created}, due {due}"
    );

    // kwok never finishes a pod; the test plays the kubelet of a command that exited 0.
    kubectl(
        &[
            "patch",
            "pod",
            "soon-pod",
            "-n",
            &ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Succeeded"}}"#,
        ],
        None,
    )
    .ok();
    wait_for(&ns, "at/soon", "DONE", |a| phase(a) == "DONE").await;
    let changes: Vec<String> = super::harness::eventually(
        "three PhaseChange events",
        Duration::from_secs(30),
        || async {
            let notes: Vec<String> = events_about(&ns, "soon")
                .into_iter()
                .filter(|(reason, _)| reason == "PhaseChange")
                .map(|(_, note)| note)
                .collect();
            (notes.len() >= 3).then_some(notes)
        },
    )
    .await;
    for phase in ["PENDING", "RUNNING", "DONE"] {
        assert!(changes.contains(&phase.to_string()), "{changes:?}");
    }

    // A schedule that does not parse: a condition saying why, no pod, no crash.
    apply(&at_yaml(&ns, "bad", "tomorrow at noon"));
    let bad = wait_for(&ns, "at/bad", "ScheduleValid False", |a| {
        condition(a, "ScheduleValid").is_some_and(|c| c["status"] == "False")
    })
    .await;
    let c = condition(&bad, "ScheduleValid").unwrap();
    assert_eq!(c["reason"], "InvalidSchedule");
    assert!(
        c["message"].as_str().unwrap().contains("tomorrow at noon"),
        "{c}"
    );
    assert_eq!(phase(&bad), "PENDING");
    assert!(get(&ns, "pod/bad-pod").is_none());
    assert!(
        events_about(&ns, "bad")
            .iter()
            .any(|(reason, _)| reason == "InvalidSchedule")
    );
    // Fixed, it runs.
    kubectl(
        &[
            "patch",
            "at",
            "bad",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"schedule":"2020-01-30T10:02:00Z"}}"#,
        ],
        None,
    )
    .ok();
    wait_for(&ns, "at/bad", "RUNNING", |a| phase(a) == "RUNNING").await;
    wait_for(&ns, "pod/bad-pod", "created", |_| true).await;

    let mut operator = operator;
    assert!(
        operator.process.exited().is_none(),
        "the operator keeps running"
    );
    operator.assert_never_forbidden();

    // Without its Pod permissions the operator says so, and stops being ready.
    olm.stop_olm();
    olm.revoke("pods");
    apply(&at_yaml(&ns, "late", "2020-01-30T10:02:00Z"));
    let log = operator
        .wait_for_log("cannot get resource \\\"pods\\\"")
        .await;
    assert!(log.contains("reconcile failed"), "{log}");
    // An open watch keeps running (authorization is checked when it starts); the failed
    // reconciles show in the metrics.
    super::harness::eventually(
        "an error outcome in /metrics",
        Duration::from_secs(30),
        || async {
            let (_, body) = http_get(operator.probe_port, "/metrics")?;
            body.contains("outcome=\"error\"").then_some(())
        },
    )
    .await;
}
