//! `olm run` killed (SIGKILL) at each phase of an install, and mid-way through a plan's
//! steps: the restarted process finishes the work once, leaving one plan and no duplicates.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::Role;
use kube::ResourceExt;
use olm::api::{ClusterServiceVersion, InstallPlanPhase, Subscription};

use super::{Setup, WAIT, our_catalog};
use crate::harness::{InstallPlanReads, SubscriptionReads, eventually};
use crate::processes::OlmRun;

#[tokio::test]
async fn killing_olm_at_any_phase_leaves_one_plan_and_one_csv() {
    let mut s = Setup::new("sub-crash", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  installPlanApproval: Manual\n",
    );

    // Killed once the plan exists (whatever the Subscription's status says by then).
    let plan = eventually("a plan", WAIT, || async {
        s.plans().await.first().map(ResourceExt::name_any)
    })
    .await;
    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, InstallPlanPhase::RequiresApproval)
        .await;
    s.sub_status("reverse-words", "points to the plan", |sub| {
        sub.plan_name() == Some(plan.as_str())
    })
    .await;
    assert_eq!(s.plans().await.len(), 1);

    // Approved, and killed as soon as the CSV step has run.
    s.olm.process.kill();
    s.approve(&plan);
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    eventually("the CSV", WAIT, || async {
        let csv =
            s.ns.get_opt::<ClusterServiceVersion>("reverse-words.v0.4.0");
        csv.await.map(drop)
    })
    .await;
    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, InstallPlanPhase::Complete).await;
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(s.plans().await.len(), 1);
    assert_eq!(s.csvs().await.len(), 1);
    // The CSV's RBAC, not its OperatorCondition's Role (named after the CSV).
    let roles: Vec<Role> = s.ns.list().await;
    let roles = roles
        .iter()
        .filter(|r| r.name_any() != "reverse-words.v0.4.0")
        .count();
    assert!(roles <= 1, "no duplicate objects: {roles} roles");
}

#[tokio::test]
async fn killing_olm_mid_way_through_the_steps_completes_the_plan_once() {
    let mut s = Setup::new("sub-crash-steps", &our_catalog(), &[]).await;
    s.olm.process.kill();
    // The ptemplate plan has two CSVs, two CRDs, the CSVs' RBAC and the generated
    // Subscription; this process stops for good after applying the second step.
    s.olm = OlmRun::start_env(
        s.name(),
        &["--leader-elect=false"],
        &[
            ("OLM_FAULT_INJECTION", "1"),
            ("OLM_FAULT_PAUSE_AFTER_STEPS", "2"),
        ],
    );
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    eventually("the plan paused after its second step", WAIT, || async {
        s.olm
            .process
            .log_text()
            .contains("fault injection: pausing mid-way through the steps")
            .then_some(())
    })
    .await;
    let plans = s.plans().await;
    assert_eq!(plans.len(), 1);
    let plan = plans[0].name_any();
    let kinds = plans[0].step_kinds();
    let count = |kind: &str| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!(
        [
            count("ClusterServiceVersion"),
            count("CustomResourceDefinition"),
            count("Subscription")
        ],
        [2, 2, 1]
    );
    assert!(
        count("ClusterRoleBinding") >= 1 && count("RoleBinding") >= 1,
        "{kinds:#?}"
    );
    assert_ne!(plans[0].phase(), InstallPlanPhase::Complete);

    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, InstallPlanPhase::Complete).await;
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    s.csv_succeeded("ptemplate.v0.2.0").await;
    assert_eq!(s.plans().await.len(), 1, "one plan after the restart");
    let mut csvs: Vec<String> = s.csvs().await.iter().map(ResourceExt::name_any).collect();
    csvs.sort();
    assert_eq!(
        csvs,
        ["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"]
    );
    let subs: Vec<Subscription> = s.ns.list().await;
    assert_eq!(
        subs.len(),
        2,
        "ptemplate's and the generated one for its dependency"
    );
    let accounts: Vec<ServiceAccount> = s.ns.list().await;
    let service_accounts: Vec<String> = accounts.iter().map(ResourceExt::name_any).collect();
    let mut unique = service_accounts.clone();
    unique.dedup();
    assert_eq!(service_accounts, unique);
}
