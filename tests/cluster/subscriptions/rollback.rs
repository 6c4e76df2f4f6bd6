//! Rollback and the holds that read an upgrade's preview: `olm rollback` takes a package
//! back to the CSV its installed one replaced and holds it there; a rollback whose older
//! schema cannot read what exists is refused with the reason, changing nothing; an upgrade
//! that adds permissions waits under `holdNewPermissions` even when Automatic.

use std::process::Command;

use olm::api::{ClusterServiceVersion, CsvPhase, InstallPlanPhase};
use serde_json::json;

use super::{AtGuard, Setup, catalog_edited, our_catalog};
use crate::harness::{CsvReads, SubscriptionReads, eventually, kubeconfig_path, olm_bin};

/// `olm rollback NAMESPACE/SUBSCRIPTION`, as a person runs it: (success, stdout + stderr).
fn olm_rollback(namespace: &str, sub: &str) -> (bool, String) {
    let out = Command::new(olm_bin())
        .args([
            "rollback",
            &format!("{namespace}/{sub}"),
            "--timeout",
            "150s",
        ])
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .expect("running olm rollback");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test]
async fn olm_rollback_goes_back_to_the_replaced_csv_and_holds_there() {
    let s = Setup::new("rollback-ok", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  startingCSV: reverse-words.v0.2.0\n",
    );
    // 0.2.0 → 0.4.0 (skipRange), one hop.
    let upgraded = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let replaced = upgraded.status.as_ref().unwrap().replaced_csv.clone();
    assert_eq!(replaced.as_deref(), Some("reverse-words.v0.2.0"));

    let (ok, said) = olm_rollback(s.name(), "reverse-words");
    assert!(ok, "{said}");
    assert!(
        said.contains("rolled back to reverse-words.v0.2.0"),
        "{said}"
    );
    assert!(
        said.contains("InstallPlan install-"),
        "the preview summary is shown: {said}"
    );

    let sub = s
        .sub_status("reverse-words", "UpgradeHeld True/RolledBack", |sub| {
            sub.installed_csv() == "reverse-words.v0.2.0"
                && sub
                    .condition("UpgradeHeld")
                    .is_some_and(|c| c.reason.as_deref() == Some("RolledBack"))
        })
        .await;
    let held = sub.condition("UpgradeHeld").unwrap();
    assert_eq!(
        held.message.as_deref(),
        Some(
            "reverse-words.v0.4.0 (0.4.0) is available; rollbackTo 0.2.0 keeps the \
             Subscription from it: remove rollbackTo to upgrade again"
        )
    );
    s.csv_succeeded("reverse-words.v0.2.0").await;
    eventually("CSV reverse-words.v0.4.0 gone", super::WAIT, || async {
        s.ns.get_opt::<ClusterServiceVersion>("reverse-words.v0.4.0")
            .await
            .is_none()
            .then_some(())
    })
    .await;
    // The rollback's plan had its own preview, and nothing blocked it.
    let plan = s.plan(sub.plan_name().unwrap()).await;
    let impact = plan
        .status
        .unwrap()
        .impact
        .expect("the rollback plan has a preview");
    assert!(impact.blockers.is_empty(), "{impact:?}");
    assert!(
        impact
            .objects
            .deleted
            .iter()
            .any(|o| o.name == "reverse-words.v0.4.0"),
        "{impact:?}"
    );
}

#[tokio::test]
async fn a_rollback_the_older_schema_cannot_read_is_refused_and_changes_nothing() {
    // at 0.1.0's CRD, as this catalog ships it, requires spec.command; 0.2.0's does not.
    let catalog = catalog_edited("rollback-strict", |bundle, objects| {
        if bundle == "at.v0.1.0" {
            for o in objects
                .iter_mut()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
            {
                o["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
                    json!(["command"]);
            }
        }
    });
    let s = Setup::new("rollback-refused", &catalog, &[]).await;
    s.operator_group("");
    s.subscribe("at", "at", "  startingCSV: at.v0.1.0\n");
    s.installed("at", "at.v0.2.0").await;
    // A rollback long after the upgrade: the replaced CSV is gone.
    s.csv_gone("at.v0.1.0").await;
    // An object 0.2.0 accepts and 0.1.0's schema refuses.
    let _at = AtGuard::apply(
        s.name(),
        "no-command",
        "  schedule: \"2030-01-01T00:00:00Z\"\n",
    );

    let (ok, said) = olm_rollback(s.name(), "at");
    assert!(!ok, "{said}");
    assert!(
        said.contains("rollback refused")
            && said.contains("ats.cnat.d2iq.com")
            && said.contains("no-command"),
        "{said}"
    );
    let sub = s.subscription("at").await;
    assert_eq!(sub.installed_csv(), "at.v0.2.0");
    let plan = s.plan(sub.plan_name().unwrap()).await;
    assert_eq!(plan.phase(), InstallPlanPhase::RequiresApproval);
    assert!(!plan.spec.approved, "a refused rollback is never approved");
    assert_eq!(s.csv("at.v0.2.0").await.phase(), CsvPhase::Succeeded);
    assert!(
        s.ns.get_opt::<ClusterServiceVersion>("at.v0.1.0")
            .await
            .is_none(),
        "nothing of the older version was created"
    );
}

#[tokio::test]
async fn new_permissions_hold_an_automatic_upgrade_until_a_person_approves() {
    // 0.4.0 asks for a rule 0.2.0's account does not have.
    let catalog = catalog_edited("hold-permissions", |bundle, objects| {
        if bundle == "reverse-words.v0.4.0" {
            for o in objects
                .iter_mut()
                .filter(|o| o["kind"] == "ClusterServiceVersion")
            {
                let rules = &mut o["spec"]["install"]["spec"]["permissions"][0]["rules"];
                rules.as_array_mut().unwrap().push(json!({
                    "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"],
                }));
            }
        }
    });
    let s = Setup::new("hold-permissions", &catalog, &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  startingCSV: reverse-words.v0.2.0\n  upgradePolicy:\n    holdNewPermissions: true\n",
    );
    let sub = s
        .sub_status("reverse-words", "UpgradeHeld True/NewPermissions", |sub| {
            sub.installed_csv() == "reverse-words.v0.2.0"
                && sub.condition("UpgradeHeld").is_some_and(|c| {
                    c.status == "True" && c.reason.as_deref() == Some("NewPermissions")
                })
        })
        .await;
    let message = sub
        .condition("UpgradeHeld")
        .unwrap()
        .message
        .clone()
        .unwrap();
    let plan_name = sub.plan_name().unwrap().to_string();
    assert!(message.contains("adds 1 rule(s)"), "{message}");
    assert!(
        message.contains(&format!("olm plan show {}/{plan_name}", s.name())),
        "{message}"
    );
    let plan = s.plan(&plan_name).await;
    let impact = plan.status.unwrap().impact.unwrap();
    let escalations: Vec<_> = impact
        .rbac
        .iter()
        .flat_map(|a| a.added.iter().filter(|r| r.escalation && !r.renewed))
        .collect();
    assert_eq!(escalations.len(), 1, "{impact:?}");
    assert_eq!(escalations[0].rule["resources"], json!(["secrets"]));

    s.approve(&plan_name);
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
}
