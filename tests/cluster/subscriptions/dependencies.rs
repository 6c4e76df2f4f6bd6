//! Dependencies: one plan with a generated Subscription for what the package needs, and a
//! missing dependency named, until a CSV in the namespace provides it.

use kube::ResourceExt;
use olm::api::{Approval, InstallPlanPhase};

use super::{Setup, catalog_subset, our_catalog};
use crate::csv_lifecycle::{apply_crds, apply_csv};
use crate::harness::SubscriptionReads;

#[tokio::test]
async fn a_dependency_comes_with_a_generated_subscription_in_the_same_plan() {
    let s = Setup::new("sub-deps", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    let plans = s.plans().await;
    assert_eq!(plans.len(), 1, "one plan: the dependency ties them");
    let plan = plans[0].name_any();
    s.plan_phase(&plan, InstallPlanPhase::Complete).await;
    assert_eq!(
        plans[0].spec.cluster_service_version_names,
        ["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"]
    );
    let generated = format!("kernel-module-management-stable-operators-{}", s.name());
    let sub = s
        .installed(&generated, "kernel-module-management.v2.2.0")
        .await;
    assert_eq!(
        sub.spec.starting_csv.as_deref(),
        Some("kernel-module-management.v2.2.0")
    );
    assert_eq!(sub.spec.install_plan_approval, Some(Approval::Automatic));
    assert!(
        sub.annotations().contains_key("olm.generated-by"),
        "{:#?}",
        sub.metadata
    );
    // It refers to the plan that created it, as upstream's generated Subscriptions do.
    let status = sub.status.as_ref().unwrap();
    assert_eq!(sub.plan_name(), Some(plan.as_str()), "{status:#?}");
    assert_eq!(status.installplan.as_ref().unwrap().name, plan);
    // Still one plan once the generated Subscription resolves.
    assert_eq!(s.plans().await.len(), 1);
}

#[tokio::test]
async fn a_missing_dependency_is_named() {
    let catalog = catalog_subset("nokmm", |b| !b.starts_with("kernel-module-management"));
    let s = Setup::new("sub-nodep", &catalog, &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    let failed = s.resolution_failed("ptemplate").await;
    assert_eq!(failed.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    let message = failed.message.as_deref().unwrap();
    assert!(message.contains("ptemplate"), "{message}");
    assert!(
        message.contains("Module") && message.contains("kmm.sigs.x-k8s.io"),
        "names the GVK: {message}"
    );
    assert!(s.plans().await.is_empty());

    // A CSV that provides the API, created directly (no Subscription, no catalog knows it),
    // satisfies the dependency, as upstream counts the namespace's CSVs: the plan holds
    // ptemplate alone (upstream's "OnePreExistingCRDOwner").
    apply_crds("kernel-module-management", "2.2.0");
    apply_csv(s.name(), "kernel-module-management", "2.2.0");
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    let plans = s.plans().await;
    assert_eq!(plans.len(), 1, "{plans:#?}");
    assert_eq!(
        plans[0].spec.cluster_service_version_names,
        ["ptemplate.v0.2.0"]
    );
}
