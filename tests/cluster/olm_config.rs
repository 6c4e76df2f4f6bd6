//! The OLMConfig `cluster` (operators.coreos.com/v1): upstream's switch for copied CSVs,
//! as its e2e "Disabling copied CSVs" uses it. OLM makes the object when it is missing; its
//! `disableCopiedCSVs`, read live, removes and brings back the copies of an operator
//! installed in AllNamespaces mode, whatever `--disable-copied-csvs` says; the status tells
//! when the copies are as the switch wants them.
//!
//! The object is the cluster's and the test cluster keeps copies off (`install_crds`): this
//! test holds `olm_config_lock` exclusively while it turns them on, so no test counting on
//! them being off runs meanwhile, and it sets the switch back when it ends (also on a panic).

use serde_json::{Value, json};

use super::csv_lifecycle::{
    WAIT, apply_crds, apply_json, csv_json, get, operator_group, wait_for_phase,
};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, olm_config_lock};
use super::processes::OlmRun;

/// Upstream's conditions (`getCopiedCSVsCondition`), as its e2e checks them.
const DISABLED_AND_NONE: (&str, &str, &str) = (
    "True",
    "CopiedCSVsDisabled",
    "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
);
const ENABLED_AND_PRESENT: (&str, &str, &str) = (
    "False",
    "CopiedCSVsEnabled",
    "Copied CSVs are enabled and present across the cluster",
);

/// The OLMConfig `cluster` as JSON; None while there is none.
fn olm_config() -> Option<Value> {
    let out = kubectl(&["get", "olmconfig", "cluster", "-o", "json"], None);
    out.success()
        .then(|| serde_json::from_str(&out.stdout()).unwrap())
}

/// Merge-patches the OLMConfig's `disableCopiedCSVs` (null removes it), as an admin does;
/// returns the generation the patch made.
fn switch(disable: Value) -> i64 {
    let patch = json!({"spec": {"features": {"disableCopiedCSVs": disable}}});
    let out = kubectl(
        &[
            "patch",
            "olmconfig",
            "cluster",
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
            "-o",
            "jsonpath={.metadata.generation}",
        ],
        None,
    )
    .ok();
    out.stdout().trim().parse().unwrap()
}

/// The switch as this test found it, set back when the test ends.
struct Restore(Value);

impl Drop for Restore {
    fn drop(&mut self) {
        // kubectl: Drop runs also while unwinding a panic.
        let patch = json!({"spec": {"features": {"disableCopiedCSVs": self.0}}});
        let _ = kubectl(
            &[
                "patch",
                "olmconfig",
                "cluster",
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
            None,
        );
    }
}

/// Copies of `source`'s operators left in the cluster when the test ends early (its `olm run`
/// is gone by then and would not delete them), deleted.
struct LeftoverCopies(String);

impl Drop for LeftoverCopies {
    fn drop(&mut self) {
        let selector = format!("olm.copiedFrom={}", self.0);
        let _ = kubectl(
            &["delete", "csv", "-A", "-l", &selector, "--wait=false"],
            None,
        );
    }
}

/// The DisabledCopiedCSVs condition once it was decided for `generation` or later:
/// (status, reason, message).
fn condition(config: &Value, generation: i64) -> Option<(String, String, String)> {
    let conditions = config["status"]["conditions"].as_array()?;
    let found = conditions
        .iter()
        .find(|c| c["type"] == "DisabledCopiedCSVs")?;
    (found["observedGeneration"].as_i64()? >= generation).then(|| {
        let text = |field: &str| found[field].as_str().unwrap_or_default().to_string();
        (text("status"), text("reason"), text("message"))
    })
}

/// Waits until the OLMConfig's DisabledCopiedCSVs condition, decided for `generation` or
/// later, is `(status, reason, message)`.
async fn wait_for_condition(generation: i64, expected: (&str, &str, &str)) {
    let (status, reason, message) = expected;
    eventually(
        &format!("DisabledCopiedCSVs {status} {reason} at generation {generation}"),
        WAIT,
        || async {
            let found = condition(&olm_config()?, generation)?;
            (found.0 == status && found.1 == reason && found.2 == message).then_some(())
        },
    )
    .await;
}

/// The namespaces holding a copy of `name` from `source` (every namespace of the cluster).
fn copies(source: &str, name: &str) -> Vec<String> {
    let out = kubectl(
        &[
            "get",
            "csv",
            "-A",
            "-l",
            &format!("olm.copiedFrom={source}"),
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let listed: Value = serde_json::from_str(&out.stdout()).unwrap();
    listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|csv| csv["metadata"]["name"] == name)
        .map(|csv| csv["metadata"]["namespace"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `name` of `source` has a copy in `other` and in `default`.
async fn wait_for_copies(source: &str, name: &str, other: &str) {
    eventually("copies in other namespaces", WAIT, || async {
        let there = copies(source, name);
        (there.iter().any(|n| n == other) && there.iter().any(|n| n == "default")).then_some(())
    })
    .await;
}

/// Waits until no namespace holds a copy of `name` of `source`.
async fn wait_for_no_copy(what: &str, source: &str, name: &str) {
    eventually(what, WAIT, || async {
        copies(source, name).is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn olm_config_switches_copied_csvs_off_and_on() {
    install_crds();
    // Copies go on for a while: no test that counts on them being off may run meanwhile.
    let _copies_on = olm_config_lock(true);
    let found = olm_config().expect("the test cluster has its OLMConfig");
    let _restore = Restore(found["spec"]["features"]["disableCopiedCSVs"].clone());
    let client = client().await;
    let ns = TestNamespace::create(&client, "olmconfig").await;
    let other = TestNamespace::create(&client, "olmconfig-other").await;
    let _leftovers = LeftoverCopies(ns.name.clone());
    // The flag says copies off; the OLMConfig decides. (By its environment variable: the
    // harness takes the shared lock for the command-line flag, and this test holds it
    // exclusively already.)
    let _olm = OlmRun::start_env(
        &ns.name,
        &["--leader-elect=false"],
        &[("OLM_DISABLE_COPIED_CSVS", "true")],
    );

    // Deleted, the OLMConfig is made again by OLM (an `olm run` of this test or another's).
    kubectl(&["delete", "olmconfig", "cluster"], None).ok();
    let uid = found["metadata"]["uid"].clone();
    eventually("the OLMConfig made again", WAIT, || async {
        olm_config().filter(|c| c["metadata"]["uid"] != uid)
    })
    .await;
    let out = kubectl(
        &[
            "get",
            "olmconfig",
            "cluster",
            "--show-managed-fields",
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let made: Value = serde_json::from_str(&out.stdout()).unwrap();
    let managers: Vec<&str> = made["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"olm-olmconfig"), "{made}");

    // Copies on, whatever the flag says. An operator installed in AllNamespaces mode, under
    // a name of its own: its copies go into every namespace of the cluster.
    let enabled = switch(json!(false));
    apply_crds("kernel-module-management", "2.2.0");
    operator_group(&ns.name, "global", None);
    let name = format!("kmm-{}", ns.name);
    let mut csv = csv_json("kernel-module-management", "2.2.0");
    csv["metadata"]["name"] = json!(name);
    csv["spec"].as_object_mut().unwrap().remove("replaces");
    apply_json(&ns.name, &csv);
    wait_for_phase(&ns.name, &name, "Succeeded", None).await;
    wait_for_copies(&ns.name, &name, &other.name).await;
    wait_for_condition(enabled, ENABLED_AND_PRESENT).await;

    // Off: every copy goes, and the condition says none is left.
    let disabled = switch(json!(true));
    wait_for_no_copy("every copy deleted", &ns.name, &name).await;
    wait_for_condition(disabled, DISABLED_AND_NONE).await;
    assert!(
        get(&other.name, &format!("csv/{name}")).is_none(),
        "no copy came back"
    );

    // On again: the copies are made again.
    let enabled = switch(json!(false));
    wait_for_copies(&ns.name, &name, &other.name).await;
    wait_for_condition(enabled, ENABLED_AND_PRESENT).await;

    // The operator deleted while its OLM runs: its copies go with it.
    kubectl(
        &["delete", "csv", &name, "-n", &ns.name, "--timeout=60s"],
        None,
    )
    .ok();
    wait_for_no_copy("the copies gone with their CSV", &ns.name, &name).await;
}
