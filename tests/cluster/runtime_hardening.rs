//! What one object can do to `olm run`: nothing beyond itself. The CatalogSource that used
//! to crash the process (a poll interval that overflowed a Duration) is reported on the
//! object; a panic inside a reconcile becomes a condition, an Event, a metric and a log line
//! with a backtrace while the other objects keep reconciling; status writes take only the
//! fields this controller owns.

use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::{
    catalog_source_yaml, condition, get_json, wait_for_event, wait_for_state,
};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::{OlmRun, free_port, olm_serve};

const WAIT: Duration = Duration::from_secs(60);

fn ready(olm: &OlmRun) -> bool {
    matches!(olm.get("/readyz"), Some((200, body)) if body.starts_with("ok"))
}

#[tokio::test]
async fn the_interval_that_used_to_crash_olm_is_reported_on_its_catalog() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "hostile-interval").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let mut olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);

    // Not shaped like a duration at all (upstream e2e's value): accepted, as upstream's CRD
    // does, and reported in upstream's words with Go's parse error.
    let misshapen = catalog_source_yaml(
        &ns.name,
        "misshapen",
        &format!("127.0.0.1:{port}"),
        "  updateStrategy:\n    registryPoll:\n      interval: 45mError.code\n",
    );
    kubectl(&["apply", "-f", "-"], Some(&misshapen)).ok();
    let reported = eventually("misshapen reported", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/misshapen");
        (catsrc["status"]["reason"] == "InvalidIntervalError").then_some(catsrc)
    })
    .await;
    assert_eq!(
        reported["status"]["message"],
        r#"error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: time: unknown unit "mError" in duration "45mError.code""#
    );

    // Shaped like one, but 11 quintillion hours: the exact object from the report.
    let huge = catalog_source_yaml(
        &ns.name,
        "huge",
        &format!("127.0.0.1:{port}"),
        "  updateStrategy:\n    registryPoll:\n      interval: 99999999999999999999h\n",
    );
    let good = catalog_source_yaml(&ns.name, "good", &format!("127.0.0.1:{port}"), "");
    kubectl(&["apply", "-f", "-"], Some(&huge)).ok();
    kubectl(&["apply", "-f", "-"], Some(&good)).ok();

    wait_for_state(&ns.name, "huge", "READY");
    wait_for_state(&ns.name, "good", "READY");
    let catsrc = eventually("SpecValid on huge", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/huge");
        let found = catsrc["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "SpecValid"));
        found.then_some(catsrc)
    })
    .await;
    let spec_valid = condition(&catsrc, "SpecValid");
    assert_eq!(spec_valid["status"], "False");
    assert_eq!(spec_valid["reason"], "InvalidIntervalError");
    let message = spec_valid["message"].as_str().unwrap();
    assert!(
        message.contains("99999999999999999999h") && message.contains("8760h0m0s"),
        "{message}"
    );
    // The catalog itself is usable: loaded, polled at upstream's fallback.
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");
    assert!(olm.snapshot(&ns.name, "huge").is_some());
    wait_for_event(&ns.name, "huge", "InvalidIntervalError").await;
    assert!(olm.process.exited().is_none(), "olm run is still running");
    assert!(ready(&olm));

    // Fixed: the condition goes away.
    kubectl(
        &[
            "patch",
            "catalogsource",
            "huge",
            "-n",
            &ns.name,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"updateStrategy":{"registryPoll":{"interval":"10m"}}}}"#,
        ],
        None,
    )
    .ok();
    eventually("SpecValid removed", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/huge");
        let gone = catsrc["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["type"] != "SpecValid"));
        gone.then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_panicking_reconcile_is_contained_and_reported_on_its_object() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "panic").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let mut olm = OlmRun::start_env(
        &ns.name,
        &["--leader-elect=false"],
        &[("OLM_FAULT_INJECTION", "1")],
    );
    let address = format!("127.0.0.1:{port}");
    let boom = catalog_source_yaml(&ns.name, "boom", &address, "").replacen(
        "metadata:\n",
        "metadata:\n  annotations:\n    olm.rs/fault-injection: panic\n",
        1,
    );
    kubectl(&["apply", "-f", "-"], Some(&boom)).ok();
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(&ns.name, "fine", &address, "")),
    )
    .ok();

    // The other catalog is unaffected.
    wait_for_state(&ns.name, "fine", "READY");
    let boom = eventually("Reconciled=False on boom", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/boom");
        let found = catsrc["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Reconciled"));
        found.then_some(catsrc)
    })
    .await;
    let reconciled = condition(&boom, "Reconciled");
    assert_eq!(reconciled["status"], "False");
    assert_eq!(reconciled["reason"], "Panicked");
    assert!(
        reconciled["message"]
            .as_str()
            .unwrap()
            .contains("fault injected"),
        "{reconciled:#}"
    );
    wait_for_event(&ns.name, "boom", "Panicked").await;
    let panics = eventually("the panic metric", WAIT, || async {
        olm.metric(r#"olm_reconcile_panics_total{controller="catalogsource"}"#)
            .filter(|n| *n >= 1.0)
    })
    .await;
    assert!(panics >= 1.0);
    let log = olm.process.log_text();
    assert!(
        log.contains("reconcile panicked") && log.contains("backtrace"),
        "the log carries the panic and its backtrace"
    );
    assert!(olm.process.exited().is_none() && ready(&olm));

    // The object is fixed: the next round succeeds and removes the condition.
    kubectl(
        &[
            "annotate",
            "catalogsource",
            "boom",
            "-n",
            &ns.name,
            "olm.rs/fault-injection-",
        ],
        None,
    )
    .ok();
    wait_for_state(&ns.name, "boom", "READY");
    eventually("Reconciled removed", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/boom");
        let gone = catsrc["status"]["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().all(|c| c["type"] != "Reconciled"));
        gone.then_some(())
    })
    .await;
}

fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or_default().to_string(),
                entry["fieldsV1"].to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn status_writes_own_only_their_fields_and_keep_other_writers_conditions() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "status-owner").await;
    let port = free_port();
    let mut server = olm_serve(&repo_root().join("catalog"), port);
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(
            &ns.name,
            "shared",
            &format!("127.0.0.1:{port}"),
            "",
        )),
    )
    .ok();
    wait_for_state(&ns.name, "shared", "READY");

    // Someone else owns a condition of their own on the same status.
    let theirs = format!(
        r#"{{"apiVersion":"operators.coreos.com/v1alpha1","kind":"CatalogSource","metadata":{{"name":"shared","namespace":"{}"}},"status":{{"conditions":[{{"type":"ScannedBySecurityTool","status":"True","reason":"Clean","message":"no findings","lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}}"#,
        ns.name
    );
    kubectl(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "security-tool",
            "--subresource",
            "status",
            "-f",
            "-",
        ],
        Some(&theirs),
    )
    .ok();

    // Our controller writes again (the server goes away): their condition stays.
    server.kill();
    wait_for_state(&ns.name, "shared", "TRANSIENT_FAILURE");
    let shown = kubectl(
        &[
            "get",
            "catalogsource/shared",
            "-n",
            &ns.name,
            "-o",
            "json",
            "--show-managed-fields",
        ],
        None,
    )
    .ok();
    let catsrc: Value = serde_json::from_str(&shown.stdout()).unwrap();
    assert_eq!(
        condition(&catsrc, "ScannedBySecurityTool")["reason"],
        "Clean"
    );
    assert_eq!(condition(&catsrc, "Connected")["status"], "False");

    let managers = managers(&catsrc);
    let ours: Vec<&(String, String)> = managers
        .iter()
        .filter(|(manager, _)| manager == "olm-catalogsource")
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "one entry for our field manager: {managers:?}"
    );
    let (_, fields) = ours[0];
    assert!(fields.contains(r#"k:{\"type\":\"Connected\"}"#), "{fields}");
    assert!(!fields.contains("ScannedBySecurityTool"), "{fields}");
    assert!(
        managers
            .iter()
            .any(|(m, f)| m == "security-tool" && f.contains("ScannedBySecurityTool")),
        "{managers:?}"
    );
    drop(olm);
}
