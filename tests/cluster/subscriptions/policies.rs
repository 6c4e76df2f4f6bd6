//! Upgrade policies (`spec.upgradePolicy`), each scenario in YAML alone: a pinned install
//! then every upgrade held, `approvedVersion` bumped as GitOps does (the shortest path the
//! channel allows, and no further), a version range, a rejected version, maintenance
//! windows with the manual override; each decision explained by `UpgradeHeld`.
//!
//! Our test catalog's stable channel: 0.1.0 → 0.2.0 → 0.3.0 → 0.4.0, where 0.4.0 also
//! skips `>=0.2.0 <0.4.0`: from 0.2.0 the shortest path is one hop to 0.4.0.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use olm::api::{ClusterServiceVersion, InstallPlanPhase, Subscription, SubscriptionCondition};

use super::{Setup, our_catalog};
use crate::harness::{SubscriptionReads, kubectl};

const RW: &str = "reverse-words";

/// The Subscription's `UpgradeHeld` once it has `status` and `reason`.
async fn upgrade_held(
    s: &Setup,
    status: &str,
    reason: &str,
) -> (Subscription, SubscriptionCondition) {
    let sub = s
        .sub_status(RW, &format!("UpgradeHeld {status}/{reason}"), |sub| {
            sub.condition("UpgradeHeld")
                .is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason))
        })
        .await;
    let condition = sub.condition("UpgradeHeld").unwrap().clone();
    (sub, condition)
}

/// Waits until `csv` is installed and the next upgrade is held for `reason` (the
/// Subscription is UpgradePending meanwhile, as upstream shows a waiting plan).
async fn held_at(s: &Setup, csv: &str, reason: &str) -> (Subscription, SubscriptionCondition) {
    let sub = s
        .sub_status(
            RW,
            &format!("installedCSV {csv}, UpgradeHeld True/{reason}"),
            |sub| {
                sub.installed_csv() == csv
                    && sub
                        .condition("UpgradeHeld")
                        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some(reason))
            },
        )
        .await;
    let condition = sub.condition("UpgradeHeld").unwrap().clone();
    (sub, condition)
}

/// Replaces the Subscription's `spec.upgradePolicy` as a GitOps tool applying YAML would.
fn set_policy(s: &Setup, policy_json: &str) {
    let patch = format!(r#"{{"spec":{{"upgradePolicy":{policy_json}}}}}"#);
    kubectl(
        &[
            "patch",
            "subscription",
            RW,
            "-n",
            s.name(),
            "--type",
            "merge",
            "-p",
            &patch,
        ],
        None,
    )
    .ok();
}

/// The CSVs each of the namespace's plans installs, oldest first.
async fn planned(s: &Setup) -> Vec<Vec<String>> {
    s.plans()
        .await
        .iter()
        .map(|p| p.spec.cluster_service_version_names.clone())
        .collect()
}

#[tokio::test]
async fn a_pinned_install_runs_at_once_and_every_later_upgrade_waits() {
    let s = Setup::new("policy-pinned", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        RW,
        RW,
        "  channel: stable\n  startingCSV: reverse-words.v0.2.0\n  installPlanApproval: Manual\n  upgradePolicy:\n    firstInstall: Automatic\n",
    );
    let (sub, held) = held_at(&s, "reverse-words.v0.2.0", "ManualApproval").await;
    let plan = sub.plan_name().unwrap().to_string();
    let waiting = s
        .plan_phase(&plan, InstallPlanPhase::RequiresApproval)
        .await;
    assert_eq!(
        waiting.spec.cluster_service_version_names,
        ["reverse-words.v0.4.0"]
    );
    let message = held.message.unwrap_or_default();
    assert!(
        message.contains(&format!(
            "InstallPlan {plan} (to reverse-words.v0.4.0 0.4.0) waits for approval"
        )),
        "{message}"
    );
    // The first plan was approved by the policy, not by a person.
    let first = &s.plans().await[0];
    assert!(first.spec.approved);
    assert_eq!(
        first.spec.cluster_service_version_names,
        ["reverse-words.v0.2.0"]
    );
}

#[tokio::test]
async fn approved_version_goes_by_the_shortest_path_and_no_further() {
    let s = Setup::new("policy-approved", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        RW,
        RW,
        "  channel: stable\n  installPlanApproval: Manual\n  upgradePolicy:\n    firstInstall: Automatic\n    approvedVersion: 0.1.0\n",
    );
    s.installed(RW, "reverse-words.v0.1.0").await;
    let (_, held) = upgrade_held(&s, "True", "OutsideVersionPolicy").await;
    assert_eq!(
        held.message.as_deref(),
        Some(
            "reverse-words.v0.2.0 (0.2.0) is available; approvedVersion 0.1.0 keeps the \
             Subscription from it: raise approvedVersion to 0.2.0"
        )
    );
    assert_eq!(planned(&s).await, [["reverse-words.v0.1.0"]]);

    // Bump the field in git: the upgrade happens, with no one approving a plan.
    set_policy(&s, r#"{"approvedVersion":"0.4.0"}"#);
    s.installed(RW, "reverse-words.v0.4.0").await;
    upgrade_held(&s, "False", "NothingHeld").await;
    // 0.1.0 → 0.2.0 (the only edge from 0.1.0) → 0.4.0 (skipRange): 0.3.0 is skipped.
    assert_eq!(
        planned(&s).await,
        [
            ["reverse-words.v0.1.0"],
            ["reverse-words.v0.2.0"],
            ["reverse-words.v0.4.0"]
        ]
    );
}

#[tokio::test]
async fn a_version_range_upgrades_within_it_and_names_what_lies_outside() {
    let s = Setup::new("policy-range", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        RW,
        RW,
        "  channel: stable\n  startingCSV: reverse-words.v0.1.0\n  upgradePolicy:\n    versionRange: '>=0.1.0 <0.4.0'\n",
    );
    // 0.1.0 → 0.2.0 → 0.3.0 (0.4.0, the shorter hop from 0.2.0, is outside the range).
    s.installed(RW, "reverse-words.v0.3.0").await;
    let (_, held) = upgrade_held(&s, "True", "OutsideVersionPolicy").await;
    assert_eq!(
        held.message.as_deref(),
        Some(
            "reverse-words.v0.4.0 (0.4.0) is available; versionRange \">=0.1.0 <0.4.0\" keeps \
             the Subscription from it: widen versionRange to include 0.4.0"
        )
    );
    assert!(
        s.plans()
            .await
            .iter()
            .all(|p| p.spec.cluster_service_version_names != ["reverse-words.v0.4.0"]),
        "nothing outside the range was planned"
    );
}

#[tokio::test]
async fn rejecting_a_waiting_plan_withdraws_it_and_uninstalls_nothing() {
    let s = Setup::new("policy-reject", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        RW,
        RW,
        "  channel: stable\n  startingCSV: reverse-words.v0.2.0\n  installPlanApproval: Manual\n  upgradePolicy:\n    firstInstall: Automatic\n",
    );
    let (sub, _) = held_at(&s, "reverse-words.v0.2.0", "ManualApproval").await;
    let waiting = sub.plan_name().unwrap().to_string();

    set_policy(
        &s,
        r#"{"firstInstall":"Automatic","rejectedVersions":["0.4.0"]}"#,
    );
    let (sub, held) = upgrade_held(&s, "True", "VersionRejected").await;
    assert_eq!(
        held.message.as_deref(),
        Some(
            "reverse-words.v0.4.0 (0.4.0) is available; rejectedVersions 0.4.0 keeps the \
             Subscription from it: it waits for a newer version or a changed policy"
        )
    );
    assert_eq!(sub.installed_csv(), "reverse-words.v0.2.0");
    assert_eq!(
        sub.plan_name(),
        None,
        "the withdrawn plan is no longer referenced"
    );
    assert!(sub.condition("InstallPlanMissing").is_none());
    assert!(
        s.ns.get_opt::<olm::api::InstallPlan>(&waiting)
            .await
            .is_none(),
        "the rejected plan was withdrawn"
    );
    let csv: ClusterServiceVersion = s.ns.csv("reverse-words.v0.2.0").await;
    assert!(
        csv.metadata.deletion_timestamp.is_none(),
        "nothing was uninstalled"
    );
}

/// A window that opens twelve hours from now and lasts an hour, as YAML.
fn window_in(hours: i64) -> String {
    let opens = Timestamp::now()
        .checked_add(SignedDuration::from_hours(hours))
        .unwrap()
        .strftime("%H:%M")
        .to_string();
    format!(r#"{{"start":"{opens}","duration":"1h"}}"#)
}

#[tokio::test]
async fn a_maintenance_window_holds_an_upgrade_until_it_is_open_or_a_person_approves() {
    let s = Setup::new("policy-window", &our_catalog(), &[]).await;
    s.operator_group("");
    let closed = window_in(12);
    s.subscribe(
        RW,
        RW,
        &format!(
            "  channel: stable\n  startingCSV: reverse-words.v0.1.0\n  upgradePolicy:\n    maintenanceWindows: [{closed}]\n"
        ),
    );
    // The first install is not an upgrade: it runs outside the window.
    let (sub, held) = held_at(&s, "reverse-words.v0.1.0", "OutsideMaintenanceWindow").await;
    let message = held.message.unwrap_or_default();
    assert!(message.contains("(the next opens at "), "{message}");
    // The manual override: approving the plan by hand runs it now.
    s.approve(sub.plan_name().unwrap());

    // The next hop waits again, until the window is moved to now.
    let (sub, _) = held_at(&s, "reverse-words.v0.2.0", "OutsideMaintenanceWindow").await;
    let plan = sub.plan_name().unwrap().to_string();
    let open_now = r#"{"start":"00:00","duration":"168h"}"#;
    set_policy(&s, &format!(r#"{{"maintenanceWindows":[{open_now}]}}"#));
    s.installed(RW, "reverse-words.v0.4.0").await;
    let approved = s.plan(&plan).await;
    assert!(approved.spec.approved, "the policy approved {plan}");
    assert_eq!(approved.name_any(), plan);
}
