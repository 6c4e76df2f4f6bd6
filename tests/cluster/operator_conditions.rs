//! OperatorConditions on the real control plane, with a real reader of its condition
//! (community-windows-machine-config-operator 8.0.0 of the community catalog, which asks
//! for `operatorconditions` access): OLM makes one per CSV with the operator's service
//! accounts and Deployments, the operator (acting with its own ServiceAccount, as
//! operator-lib does) reports `Upgradeable=False` in it, and the CSV that would replace it
//! (the next version, made from the same CSV) stays Pending with upstream's reason until an
//! administrator's override releases it.

use std::time::Duration;

use serde_json::{Value, json};

use super::csv_lifecycle::{apply_json, get, operator_group, wait_for_phase};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::OlmRun;

const OLD: &str = "community-windows-machine-config-operator.v8.0.0";
const NEW: &str = "community-windows-machine-config-operator.v8.0.1";
const SA: &str = "windows-machine-config-operator";
const DEPLOYMENT: &str = "windows-machine-config-operator";

fn wmco_csv() -> Value {
    let path = repo_root().join(
        "tests/bundles/operator-conditions/community-windows-machine-config-operator-8.0.0/manifests/community-windows-machine-config-operator.clusterserviceversion.yaml",
    );
    let mut csv: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    csv["metadata"].as_object_mut().unwrap().remove("namespace");
    csv
}

/// The next version: the same operator, replacing 8.0.0.
fn successor() -> Value {
    let mut csv = wmco_csv();
    csv["metadata"]["name"] = json!(NEW);
    csv["spec"]["version"] = json!("8.0.1");
    csv["spec"]["replaces"] = json!(OLD);
    csv
}

#[tokio::test]
async fn an_operator_condition_holds_an_upgrade_until_it_is_released() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "opcond").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    // Its pods ask for control-plane nodes; as a user would, the Subscription's config
    // places them on the (kwok) workers.
    apply_json(
        &ns.name,
        &json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": {"name": "wmco", "namespace": ns.name},
            "spec": {
                "name": "community-windows-machine-config-operator", "source": "none",
                "sourceNamespace": ns.name,
                "config": {"nodeSelector": {"type": "kwok"}},
            },
        }),
    );
    apply_json(&ns.name, &wmco_csv());
    wait_for_phase(&ns.name, OLD, "Succeeded", None).await;

    // OLM's OperatorCondition for the CSV, and the operator's right to write it.
    let condition = eventually("the OperatorCondition", Duration::from_secs(30), || async {
        get(&ns.name, &format!("operatorcondition/{OLD}"))
    })
    .await;
    assert_eq!(condition["spec"]["serviceAccounts"], json!([SA]));
    assert_eq!(condition["spec"]["deployments"], json!([DEPLOYMENT]));
    assert_eq!(condition["metadata"]["ownerReferences"][0]["name"], OLD);
    let deployment = get(&ns.name, &format!("deployment/{DEPLOYMENT}")).unwrap();
    assert!(
        deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .to_string()
            .contains(&format!(
                r#""name":"OPERATOR_CONDITION_NAME","value":"{OLD}""#
            )),
        "{deployment}"
    );
    let as_operator = format!("system:serviceaccount:{}:{SA}", ns.name);
    // It reads its condition, as the operator does at start-up.
    kubectl(
        &[
            "get",
            "operatorcondition",
            OLD,
            "-n",
            &ns.name,
            "--as",
            &as_operator,
        ],
        None,
    )
    .ok();

    // The operator reports Upgradeable=False, as itself.
    kubectl(
        &[
            "patch", "operatorcondition", OLD, "-n", &ns.name, "--as", &as_operator,
            "--type", "merge", "-p",
            r#"{"spec":{"conditions":[{"type":"Upgradeable","status":"False","reason":"Migrating","message":"migrating data","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#,
        ],
        None,
    )
    .ok();
    eventually(
        "the reported condition observed",
        Duration::from_secs(30),
        || async {
            let c = get(&ns.name, &format!("operatorcondition/{OLD}"))?;
            let status = &c["status"]["conditions"][0];
            (status["status"] == "False"
                && status["observedGeneration"] == c["metadata"]["generation"])
                .then_some(())
        },
    )
    .await;
    // What OLM grants is this condition only (this operator asks for more of its own).
    let role = get(&ns.name, &format!("role/{OLD}")).unwrap();
    assert_eq!(role["rules"][0]["resourceNames"], json!([OLD]));
    let binding = get(&ns.name, &format!("rolebinding/{OLD}")).unwrap();
    assert_eq!(binding["subjects"][0]["name"], SA);

    // The next version waits, saying why.
    apply_json(&ns.name, &successor());
    let held = wait_for_phase(
        &ns.name,
        NEW,
        "Pending",
        Some("OperatorConditionNotUpgradeable"),
    )
    .await;
    let message = held["status"]["message"].as_str().unwrap();
    assert!(message.contains("migrating data"), "{message}");
    let old = get(&ns.name, &format!("csv/{OLD}")).unwrap();
    assert_ne!(old["status"]["phase"], "Deleting");

    // An administrator's override releases it: the upgrade goes on and the old CSV goes.
    kubectl(
        &[
            "patch", "operatorcondition", OLD, "-n", &ns.name, "--type", "merge", "-p",
            r#"{"spec":{"overrides":[{"type":"Upgradeable","status":"True","reason":"Approved","message":"go ahead"}]}}"#,
        ],
        None,
    )
    .ok();
    wait_for_phase(&ns.name, NEW, "Succeeded", None).await;
    eventually(
        "the replaced CSV deleted",
        Duration::from_secs(60),
        || async { get(&ns.name, &format!("csv/{OLD}")).is_none().then_some(()) },
    )
    .await;
}
