//! End to end with the CSV controller: CSVs Succeeded, Deployments Available, old CSVs gone
//! after an upgrade, a dependency Succeeded first, and an uninstall as upstream documents it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use olm::api::{ClusterServiceVersion, CsvPhase, InstallPlanPhase, SubscriptionState};

use super::{Setup, WAIT, our_catalog};
use crate::harness::{SubscriptionReads, crd, eventually, kubectl, wait_crd_established};

#[tokio::test]
async fn reverse_words_succeeds() {
    let s = Setup::new("sub-e2e", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    s.csv_succeeded("reverse-words.v0.4.0").await;
    kubectl(
        &[
            "wait",
            "-n",
            s.name(),
            "--for=condition=Available",
            "--timeout=120s",
            "deploy",
            "--all",
        ],
        None,
    )
    .ok();
    wait_crd_established(s.ns.client(), "reversewordsapps.apps.linuxera.org").await;
    let table = kubectl(&["get", "sub,installplan,csv", "-n", s.name()], None)
        .ok()
        .stdout();
    // Upstream's columns: no phase for InstallPlans, so it is read from the object.
    assert!(
        table.contains("Succeeded") && table.contains("Automatic") && table.contains("PACKAGE"),
        "{table}"
    );
    assert_eq!(s.plans().await[0].phase(), InstallPlanPhase::Complete);
    let sub = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(sub.state(), SubscriptionState::AtLatestKnown);
}

#[tokio::test]
async fn starting_csv_upgrade_chain_succeeds_and_old_csvs_are_gone() {
    let s = Setup::new("sub-e2e-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n",
    );
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    s.csv_succeeded("reverse-words.v0.4.0").await;
    eventually("old CSVs deleted", WAIT, || async {
        (s.csvs().await.len() == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn ptemplate_dependency_succeeds_first() {
    let s = Setup::new("sub-e2e-deps", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    for csv in ["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"] {
        s.csv_succeeded(csv).await;
    }
    let kmm = s.csv("kernel-module-management.v2.2.0").await;
    let pt = s.csv("ptemplate.v0.2.0").await;
    let succeeded_at = |csv: &ClusterServiceVersion| -> Time {
        let history = &csv.status.as_ref().unwrap().conditions;
        let succeeded = history
            .iter()
            .find(|c| c.phase == Some(CsvPhase::Succeeded));
        succeeded.unwrap().last_transition_time.clone().unwrap()
    };
    assert!(succeeded_at(&kmm) <= succeeded_at(&pt));
}

#[tokio::test]
async fn uninstall_as_upstream_documents_keeps_crds() {
    let s = Setup::new("sub-e2e-uninstall", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    s.csv_succeeded("reverse-words.v0.4.0").await;
    kubectl(&["delete", "sub", "reverse-words", "-n", s.name()], None).ok();
    kubectl(
        &["delete", "csv", "reverse-words.v0.4.0", "-n", s.name()],
        None,
    )
    .ok();
    eventually("the Deployment gone", WAIT, || async {
        s.ns.list::<Deployment>().await.is_empty().then_some(())
    })
    .await;
    let kept = crd(s.ns.client(), "reversewordsapps.apps.linuxera.org").await;
    assert!(kept.is_some());
}
