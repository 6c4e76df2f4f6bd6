use super::*;
use crate::api::{
    AccountImpact, InstallPlanSpec, InstallPlanStatus, MaintenanceWindow, RuleChange,
    SubscriptionSpec,
};

fn sub(approval: Approval, policy: UpgradePolicy) -> Subscription {
    let mut sub = Subscription::new(
        "rw",
        SubscriptionSpec {
            name: "reverse-words".into(),
            source: "ops".into(),
            source_namespace: "olm".into(),
            install_plan_approval: Some(approval),
            upgrade_policy: Some(policy),
            ..Default::default()
        },
    );
    sub.metadata.namespace = Some("ns".into());
    sub
}

fn upgrade(version: &str) -> PlanTarget {
    PlanTarget {
        subscription: "rw".into(),
        csv: format!("rw.v{version}"),
        version: version.into(),
        first_install: false,
        rollback: false,
    }
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

const NOW: &str = "2026-11-28T12:00:00Z";

fn escalating() -> PlanImpact {
    PlanImpact {
        rbac: vec![AccountImpact {
            service_account: "ns/rw".into(),
            added: vec![RuleChange {
                scope: "Namespace".into(),
                rule: serde_json::json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}),
                escalation: true,
                renewed: false,
            }],
            removed: Vec::new(),
        }],
        ..PlanImpact::default()
    }
}

#[test]
fn a_pinned_install_runs_and_every_later_upgrade_waits() {
    let policy = UpgradePolicy {
        first_install: Some(Approval::Automatic),
        ..Default::default()
    };
    let s = sub(Approval::Manual, policy);
    let first = PlanTarget {
        first_install: true,
        ..upgrade("0.2.0")
    };
    assert_eq!(
        verdict(&s, &first, None, at(NOW)),
        Verdict::Approve(Allowed::FirstInstall)
    );
    assert_eq!(
        verdict(&s, &upgrade("0.3.0"), None, at(NOW)),
        Verdict::Hold(Hold::Manual)
    );
}

#[test]
fn approved_version_approves_up_to_it_and_withdraws_what_is_beyond() {
    let s = sub(
        Approval::Manual,
        UpgradePolicy {
            approved_version: Some("0.4.0".into()),
            ..Default::default()
        },
    );
    let v = |s: &str| s.parse::<Version>().unwrap();
    assert_eq!(
        verdict(&s, &upgrade("0.4.0"), None, at(NOW)),
        Verdict::Approve(Allowed::ApprovedVersion(v("0.4.0")))
    );
    assert_eq!(
        verdict(&s, &upgrade("0.5.0"), None, at(NOW)),
        Verdict::Withdraw("approvedVersion 0.4.0".into())
    );
}

#[test]
fn rejecting_a_version_withdraws_its_plan_and_those_older() {
    let s = sub(
        Approval::Automatic,
        UpgradePolicy {
            rejected_versions: vec!["0.5.0".into(), "0.3.0".into()],
            ..Default::default()
        },
    );
    assert_eq!(
        verdict(&s, &upgrade("0.4.0"), None, at(NOW)),
        Verdict::Withdraw("rejectedVersions 0.5.0, 0.3.0".into())
    );
    assert_eq!(
        verdict(&s, &upgrade("0.6.0"), None, at(NOW)),
        Verdict::Approve(Allowed::Automatic)
    );
}

#[test]
fn windows_hold_automatic_upgrades_until_they_open_but_not_first_installs() {
    let s = sub(
        Approval::Automatic,
        UpgradePolicy {
            maintenance_windows: vec![MaintenanceWindow {
                days: vec!["Saturday".into()],
                start: "22:00".into(),
                duration: "2h".into(),
            }],
            ..Default::default()
        },
    );
    let held = verdict(&s, &upgrade("0.5.0"), None, at(NOW));
    assert_eq!(
        held,
        Verdict::Hold(Hold::Window {
            next: Some(at("2026-11-28T22:00:00Z"))
        })
    );
    assert_eq!(
        wake_after(&[held], at(NOW)),
        Some(std::time::Duration::from_secs(10 * 3600))
    );
    assert_eq!(
        verdict(&s, &upgrade("0.5.0"), None, at("2026-11-28T23:00:00Z")),
        Verdict::Approve(Allowed::Automatic)
    );
    let first = PlanTarget {
        first_install: true,
        ..upgrade("0.2.0")
    };
    assert_eq!(
        verdict(&s, &first, None, at(NOW)),
        Verdict::Approve(Allowed::FirstInstall)
    );
}

#[test]
fn new_permissions_hold_even_an_automatic_upgrade_once_the_preview_shows_them() {
    let s = sub(
        Approval::Automatic,
        UpgradePolicy {
            hold_new_permissions: true,
            ..Default::default()
        },
    );
    let target = upgrade("0.5.0");
    assert_eq!(
        verdict(&s, &target, None, at(NOW)),
        Verdict::Hold(Hold::Preview)
    );
    assert_eq!(
        verdict(&s, &target, Some(&escalating()), at(NOW)),
        Verdict::Hold(Hold::NewPermissions { rules: 1 })
    );
    assert_eq!(
        verdict(&s, &target, Some(&PlanImpact::default()), at(NOW)),
        Verdict::Approve(Allowed::Automatic)
    );
}

#[test]
fn a_rollback_waits_for_its_preview_and_is_refused_by_a_blocker() {
    let s = sub(
        Approval::Automatic,
        UpgradePolicy {
            rollback_to: Some("0.4.0".into()),
            ..Default::default()
        },
    );
    let back = PlanTarget {
        rollback: true,
        ..upgrade("0.4.0")
    };
    assert_eq!(
        verdict(&s, &back, None, at(NOW)),
        Verdict::Hold(Hold::Preview)
    );
    let blocked = PlanImpact {
        blockers: vec!["CRD widgets.example.com: stored version v2 would not be served".into()],
        ..PlanImpact::default()
    };
    assert!(matches!(
        verdict(&s, &back, Some(&blocked), at(NOW)),
        Verdict::Hold(Hold::Refused { .. })
    ));
    assert_eq!(
        verdict(&s, &back, Some(&PlanImpact::default()), at(NOW)),
        Verdict::Approve(Allowed::Rollback)
    );
    // By CSV name too; and withdrawn once rollbackTo names something else.
    let by_name = sub(
        Approval::Automatic,
        UpgradePolicy {
            rollback_to: Some("rw.v0.4.0".into()),
            ..Default::default()
        },
    );
    assert_eq!(
        verdict(&by_name, &back, Some(&PlanImpact::default()), at(NOW)),
        Verdict::Approve(Allowed::Rollback)
    );
    let other = sub(Approval::Automatic, UpgradePolicy::default());
    assert!(matches!(
        verdict(&other, &back, None, at(NOW)),
        Verdict::Withdraw(_)
    ));
}

#[test]
fn a_subscription_without_a_policy_is_judged_as_upstream() {
    let mut s = sub(Approval::Manual, UpgradePolicy::default());
    s.spec.upgrade_policy = None;
    assert_eq!(
        verdict(&s, &upgrade("0.5.0"), None, at(NOW)),
        Verdict::Hold(Hold::Manual)
    );
    assert_eq!(explain(&s, None, None, at(NOW)), None);
}

fn waiting_plan(targets: &[PlanTarget], impact: Option<PlanImpact>) -> InstallPlan {
    let mut plan = InstallPlan::new(
        "install-abc",
        InstallPlanSpec {
            cluster_service_version_names: targets.iter().map(|t| t.csv.clone()).collect(),
            approval: Approval::Manual,
            approved: false,
            ..Default::default()
        },
    );
    plan.metadata.namespace = Some("ns".into());
    plan.metadata.annotations = Some(
        [(
            TARGETS_ANNOTATION.to_string(),
            serde_json::to_string(targets).unwrap(),
        )]
        .into(),
    );
    plan.status = Some(InstallPlanStatus {
        phase: InstallPlanPhase::RequiresApproval,
        impact,
        ..Default::default()
    });
    plan
}

#[test]
fn the_condition_names_the_policy_that_holds_and_what_releases_it() {
    let s = sub(
        Approval::Automatic,
        UpgradePolicy {
            hold_new_permissions: true,
            ..Default::default()
        },
    );
    let plan = waiting_plan(&[upgrade("0.5.0")], Some(escalating()));
    assert!(waiting(&plan));
    assert_eq!(
        plan_verdict(&plan, &[&s], at(NOW)),
        Some(Verdict::Hold(Hold::NewPermissions { rules: 1 }))
    );
    let c = explain(&s, Some(&plan), None, at(NOW)).unwrap();
    assert_eq!(
        (c.type_.as_str(), c.status.as_str()),
        ("UpgradeHeld", "True")
    );
    assert_eq!(c.reason.as_deref(), Some("NewPermissions"));
    let message = c.message.unwrap();
    assert!(message.contains("adds 1 rule(s)"), "{message}");
    assert!(
        message.contains("olm plan show ns/install-abc"),
        "{message}"
    );

    let capped = sub(
        Approval::Automatic,
        UpgradePolicy {
            approved_version: Some("0.4.0".into()),
            ..Default::default()
        },
    );
    let held = Held {
        bundle: "rw.v0.5.0".into(),
        version: "0.5.0".into(),
        policy: "approvedVersion 0.4.0".into(),
    };
    let c = explain(&capped, None, Some(&held), at(NOW)).unwrap();
    assert_eq!(c.reason.as_deref(), Some("OutsideVersionPolicy"));
    assert_eq!(
        c.message.as_deref(),
        Some(
            "rw.v0.5.0 (0.5.0) is available; approvedVersion 0.4.0 keeps the Subscription \
             from it: raise approvedVersion to 0.5.0"
        )
    );
    let c = explain(&capped, None, None, at(NOW)).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("NothingHeld"))
    );
}

#[test]
fn a_bad_policy_is_named_by_its_field() {
    let bad = |policy: UpgradePolicy| Policy::read(&policy).unwrap_err().to_string();
    assert_eq!(
        bad(UpgradePolicy {
            approved_version: Some("latest".into()),
            ..Default::default()
        }),
        "spec.upgradePolicy.approvedVersion \"latest\" is not a version: unexpected character 'l' while parsing major version number"
    );
    assert!(
        bad(UpgradePolicy {
            version_range: Some(">=banana".into()),
            ..Default::default()
        })
        .starts_with("spec.upgradePolicy.versionRange \">=banana\": ")
    );
    assert_eq!(
        bad(UpgradePolicy {
            maintenance_windows: vec![MaintenanceWindow {
                days: vec![],
                start: "25:00".into(),
                duration: "1h".into(),
            }],
            ..Default::default()
        }),
        "spec.upgradePolicy.maintenanceWindows[0]: start \"25:00\" is not HH:MM (UTC)"
    );
}
