//! Upgrades: `startingCSV` walks the channel one plan per hop, a catalog update upgrades the
//! Subscription, and the CRDs an upgrade carries update what others applied but never lose
//! data.

use olm::api::{InstallPlan, InstallPlanPhase};
use serde_json::Value;

use super::{AtGuard, Setup, catalog_edited, catalog_subset, our_catalog};
use crate::harness::{SubscriptionReads, crd, kubectl, repo_root};

#[tokio::test]
async fn starting_csv_walks_the_channel_one_plan_per_hop() {
    let s = Setup::new("sub-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n",
    );
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let plans = s.plans().await;
    let hops: Vec<&str> = plans
        .iter()
        .map(|p| p.spec.cluster_service_version_names[0].as_str())
        .collect();
    // 0.1.0 → 0.2.0 (replaces) → 0.4.0 (its skipRange covers 0.2.0; nearest the head wins).
    assert_eq!(
        hops,
        [
            "reverse-words.v0.1.0",
            "reverse-words.v0.2.0",
            "reverse-words.v0.4.0"
        ]
    );
    let phases: Vec<InstallPlanPhase> = plans.iter().map(InstallPlan::phase).collect();
    assert_eq!(phases, [InstallPlanPhase::Complete; 3]);
    let generations: Vec<Option<i32>> = plans.iter().map(|p| p.spec.generation).collect();
    assert_eq!(generations, [Some(1), Some(2), Some(3)]);
    let csv = s.csv("reverse-words.v0.4.0").await;
    assert_eq!(csv.spec.replaces.as_deref(), Some("reverse-words.v0.2.0"));
}

#[tokio::test]
async fn a_catalog_update_upgrades_the_subscription() {
    let old = catalog_subset("upgrade", |b| {
        ["reverse-words.v0.1.0", "reverse-words.v0.2.0"].contains(&b)
    });
    let mut s = Setup::new("sub-upgrade", &old, &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    s.installed("reverse-words", "reverse-words.v0.2.0").await;

    // The catalog publishes 0.4.0 (a new server on a new address).
    s.serve(&our_catalog());
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let csv = s.csv("reverse-words.v0.4.0").await;
    assert_eq!(csv.spec.replaces.as_deref(), Some("reverse-words.v0.2.0"));
    assert_eq!(s.plans().await.len(), 2);
}

/// A CRD someone else last applied server-side (as `kubectl apply --server-side` does) is
/// still updated by the plan: the catalog's manifest wins, as upstream's updates do.
#[tokio::test]
async fn a_crd_applied_by_someone_else_server_side_is_updated_without_conflict() {
    const CRD: &str = "reversewordsapps.apps.linuxera.org";
    const MARK: &str = "last applied server-side by another manager";
    let s = Setup::new("sub-crd-owner", &our_catalog(), &[]).await;
    s.operator_group("");
    let manifest = repo_root()
        .join("bundles/reverse-words/0.4.0/manifests/apps.linuxera.org_reversewordsapps.yaml");
    let mut manifest: Value =
        serde_yaml::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    // Only a description differs: harmless for the tests that share this CRD.
    manifest["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = MARK.into();
    kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=someone-else",
            "-f",
            "-",
        ],
        Some(&serde_json::to_string(&manifest).unwrap()),
    )
    .ok();
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    let sub = s
        .sub_status("reverse-words", "an InstallPlan", |sub| {
            sub.plan_name().is_some()
        })
        .await;
    let plan = sub.plan_name().unwrap();
    s.plan_phase(plan, InstallPlanPhase::Complete).await;
    let found = crd(s.ns.client(), CRD).await.unwrap();
    let schema = found.spec.versions[0].schema.as_ref().unwrap();
    let description = schema
        .open_api_v3_schema
        .as_ref()
        .unwrap()
        .description
        .as_deref();
    assert_ne!(description, Some(MARK));
}

#[tokio::test]
async fn crd_upgrades_that_lose_data_are_refused() {
    let old = catalog_subset("crd-old", |b| b == "at.v0.1.0");
    let mut s = Setup::new("sub-crd", &old, &[]).await;
    s.operator_group("");
    s.subscribe("at", "at", "");
    s.installed("at", "at.v0.1.0").await;
    let _a1 = AtGuard::apply(s.name(), "a1", "  schedule: \"2030-01-01T00:00:00Z\"\n");
    let _a2 = AtGuard::apply(s.name(), "a2", "  schedule: \"2030-01-01T00:00:00Z\"\n");

    // The next version's schema requires a field the existing object lacks.
    let stricter = catalog_edited("crd-strict", |bundle, objects| {
        if bundle == "at.v0.2.0" {
            for o in objects
                .iter_mut()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
            {
                o["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
                    serde_json::json!(["command"]);
            }
        }
    });
    s.serve(&stricter);
    let found = s
        .sub_status("at", "InstallPlanFailed", |sub| {
            sub.condition("InstallPlanFailed").is_some()
        })
        .await;
    let failed = found.condition("InstallPlanFailed").unwrap();
    let message = failed.message.as_deref().unwrap();
    assert!(
        message.contains("ats.cnat.d2iq.com")
            && message.contains("v1alpha1")
            && message.contains(&format!("{}/a1", s.name()))
            && message.contains("command")
            // a2 is refused too: named by count, after the first (list order is by name).
            && message.contains(" more object"),
        "{message}"
    );

    // Nothing changed in the cluster's CRD.
    let at = crd(s.ns.client(), "ats.cnat.d2iq.com").await.unwrap();
    let schema = at.spec.versions[0].schema.clone().unwrap();
    let properties = schema.open_api_v3_schema.unwrap().properties.unwrap();
    assert!(
        properties["spec"].required.is_none(),
        "{:#?}",
        properties["spec"]
    );
}
