//! Failures and how they are explained: resolution failures on the Subscription that has
//! them, unhealthy catalogs failing only who needs them, and steps that fail (at once, or
//! once the retry timeout has passed) failing their plan in upstream's words.

use olm::api::InstallPlanPhase;

use super::{Setup, apply, catalog_edited, our_catalog, subscription_yaml, write_plan_as_upstream};
use crate::catalog_sources::{catalog_source_yaml, wait_for_event, wait_for_state};
use crate::harness::{InstallPlanReads, SubscriptionReads};
use crate::processes::free_port;

#[tokio::test]
async fn failures_are_explained_on_the_subscription() {
    let s = Setup::new("sub-fail", &our_catalog(), &[]).await;

    // No OperatorGroup.
    s.subscribe("at", "at", "");
    let failed = s.resolution_failed("at").await;
    assert_eq!(failed.reason.as_deref(), Some("ErrorPreventedResolution"));
    assert!(
        failed
            .message
            .as_deref()
            .unwrap()
            .contains("expected 1 OperatorGroup in the namespace, found 0"),
        "{failed:#?}"
    );
    wait_for_event(s.name(), "at", "ResolutionFailed").await;
    assert!(s.plans().await.is_empty());

    // With one, it installs; the failures below stay with their own Subscriptions.
    s.operator_group("");
    s.installed("at", "at.v0.2.0").await;

    s.subscribe("unknown", "no-such-package", "");
    let failed = s.resolution_failed("unknown").await;
    assert_eq!(failed.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    let message = failed.message.as_deref().unwrap();
    assert!(
        message.contains("no-such-package") && message.contains("unknown"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}/operators", s.name())),
        "names the catalogs searched: {message}"
    );

    s.subscribe("nochannel", "reverse-words", "  channel: nightly\n");
    let failed = s.resolution_failed("nochannel").await;
    let message = failed.message.as_deref().unwrap();
    assert!(
        message.contains("nightly") && message.contains("alpha") && message.contains("stable"),
        "{message}"
    );

    // A catalog that does not exist: unhealthy in upstream's words, beside the failure.
    apply(&subscription_yaml(
        s.name(),
        "nocatalog",
        "reverse-words",
        "missing",
        "",
    ));
    let found = s
        .sub_status("nocatalog", "CatalogSourcesUnhealthy True", |sub| {
            sub.condition("CatalogSourcesUnhealthy")
                .is_some_and(|c| c.status == "True")
        })
        .await;
    let unhealthy = found.condition("CatalogSourcesUnhealthy").unwrap();
    assert_eq!(
        unhealthy.reason.as_deref(),
        Some("UnhealthyCatalogSourceFound")
    );
    assert_eq!(
        unhealthy.message.as_deref(),
        Some(format!("targeted catalogsource {}/missing missing", s.name()).as_str())
    );

    // The other Subscriptions are unaffected.
    let at = s.installed("at", "at.v0.2.0").await;
    assert!(
        at.condition("ResolutionFailed").is_none(),
        "{:#?}",
        at.status
    );
    assert_eq!(s.plans().await.len(), 1);
}

#[tokio::test]
async fn an_unhealthy_catalog_fails_only_the_subscriptions_that_need_it() {
    let s = Setup::new("sub-unhealthy", &our_catalog(), &[]).await;
    s.operator_group("");
    // A second catalog nobody serves.
    let dead = free_port();
    apply(&catalog_source_yaml(
        s.name(),
        "broken",
        &format!("127.0.0.1:{dead}"),
        "",
    ));
    wait_for_state(s.name(), "broken", "TRANSIENT_FAILURE");
    apply(&subscription_yaml(
        s.name(),
        "needs-broken",
        "at",
        "broken",
        "",
    ));
    s.subscribe("reverse-words", "reverse-words", "");

    let rw = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let unhealthy = rw.condition("CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy.status, "True");
    assert!(
        unhealthy.message.as_deref().unwrap().contains("broken"),
        "{unhealthy:#?}"
    );
    let health = &rw.status.as_ref().unwrap().catalog_health;
    assert!(
        health
            .iter()
            .any(|h| h.catalog_source_ref.name.as_deref() == Some("broken") && !h.healthy),
        "{health:#?}"
    );

    let failed = s.resolution_failed("needs-broken").await;
    assert_eq!(failed.reason.as_deref(), Some("ErrorPreventedResolution"));
    assert!(
        failed.message.as_deref().unwrap().contains("broken"),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn failing_steps_retry_until_the_timeout_and_unknown_kinds_fail_at_once() {
    let catalog = catalog_edited("badsteps", |bundle, objects| match bundle {
        "at.v0.2.0" => objects.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "broken-svc"},
            "spec": {"type": "Bogus", "ports": [{"port": 80}]},
        })),
        "reverse-words.v0.4.0" => objects.push(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sneaky"},
        })),
        _ => {}
    });
    let s = Setup::new(
        "sub-badsteps",
        &catalog,
        &["--install-plan-retry-timeout", "3s"],
    )
    .await;
    s.operator_group("");
    s.subscribe("at", "at", "");
    s.subscribe("reverse-words", "reverse-words", "");
    for (sub, needle) in [
        ("at", "Service broken-svc"),
        ("reverse-words", "kind Deployment (sneaky) is not supported"),
    ] {
        let found = s
            .sub_status(sub, "InstallPlanFailed", |found| {
                found.condition("InstallPlanFailed").is_some()
            })
            .await;
        let failed = found.condition("InstallPlanFailed").unwrap();
        let message = failed.message.as_deref().unwrap();
        assert!(message.contains(needle), "{sub}: {message}");
        assert_eq!(failed.reason.as_deref(), Some("InstallComponentFailed"));
        let plan = found.plan_name().unwrap();
        let plan = s.plan_phase(plan, InstallPlanPhase::Failed).await;
        assert!(plan.message().contains(needle));
    }
    let at = s.subscription("at").await;
    let plan = s.plan(at.plan_name().unwrap()).await;
    assert!(
        plan.message().contains("retry timeout"),
        "{}",
        plan.message()
    );
}

/// A step of a supported kind that the API server does not serve (no OpenShift console
/// here) fails the plan once the retry timeout has passed, in upstream's words. (A kind
/// outside upstream's list fails at once: `security::a_plan_may_create_only_upstreams_kinds…`.)
#[tokio::test]
async fn a_step_of_an_unserved_kind_fails_after_the_retry_timeout() {
    let s = Setup::new(
        "ip-unserved",
        &our_catalog(),
        &["--install-plan-retry-timeout", "3s"],
    )
    .await;
    s.operator_group("");
    let widget = serde_json::json!({
        "apiVersion": "console.openshift.io/v1", "kind": "ConsoleYAMLSample", "metadata": {"name": "w"}
    });
    write_plan_as_upstream(
        s.name(),
        "unserved",
        "nothing.v1",
        &[("console.openshift.io", "v1", "ConsoleYAMLSample", &widget)],
    );
    let plan = s.plan_phase("unserved", InstallPlanPhase::Failed).await;
    let message = plan.message();
    assert!(
        message.contains("api-server resource not found installing ConsoleYAMLSample w"),
        "{message}"
    );
}
