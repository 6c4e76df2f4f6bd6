//! OperatorConditions on the real control plane: OLM makes one per CSV with the operator's
//! service accounts and Deployments, the operator (acting with its own ServiceAccount, as
//! operator-lib does) reports `Upgradeable=False` in it, and the CSV that would replace it
//! stays Pending with upstream's reason until an administrator's override releases it.

use std::time::Duration;

use serde_json::json;

use super::csv_lifecycle::{apply_crds, apply_csv, get, operator_group, wait_for_phase};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl};
use super::processes::OlmRun;

const OLD: &str = "reverse-words.v0.3.0";
const NEW: &str = "reverse-words.v0.4.0";
const SA: &str = "reverse-words-controller-manager";

#[tokio::test]
async fn an_operator_condition_holds_an_upgrade_until_it_is_released() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "opcond").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let _crds = super::harness::operator_crds_lock();
    apply_crds("reverse-words", "0.4.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    apply_csv(&ns.name, "reverse-words", "0.3.0");
    wait_for_phase(&ns.name, OLD, "Succeeded", None).await;

    // OLM's OperatorCondition for the CSV, and the operator's right to write it.
    let condition = eventually("the OperatorCondition", Duration::from_secs(30), || async {
        get(&ns.name, &format!("operatorcondition/{OLD}"))
    })
    .await;
    assert_eq!(condition["spec"]["serviceAccounts"], json!([SA]));
    assert_eq!(
        condition["spec"]["deployments"],
        json!(["reverse-words-controller-manager"])
    );
    assert_eq!(condition["metadata"]["ownerReferences"][0]["name"], OLD);
    let deployment = get(&ns.name, "deployment/reverse-words-controller-manager").unwrap();
    assert!(
        deployment["spec"]["template"]["spec"]["containers"][0]["env"]
            .to_string()
            .contains(&format!(
                r#""name":"OPERATOR_CONDITION_NAME","value":"{OLD}""#
            )),
        "{deployment}"
    );
    let as_operator = format!("system:serviceaccount:{}:{SA}", ns.name);

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
    // Another operator's condition is not its to write.
    let other = kubectl(
        &[
            "auth",
            "can-i",
            "patch",
            "operatorconditions/someone-else",
            "-n",
            &ns.name,
            "--as",
            &as_operator,
        ],
        None,
    );
    assert_eq!(other.stdout().trim(), "no");

    // The next version waits, saying why.
    apply_csv(&ns.name, "reverse-words", "0.4.0");
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
