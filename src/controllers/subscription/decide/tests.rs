use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::api::{InstallPlanCondition, InstallPlanStatus, SubscriptionSpec};
use crate::catalog::reading::load::load_path;
use crate::resolver::Catalog;

fn our_index() -> CatalogIndex {
    let content =
        load_path(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalog")).unwrap();
    CatalogIndex::new(&[Catalog {
        name: "operators".into(),
        namespace: "ns".into(),
        priority: 0,
        content,
    }])
}

fn sub(name: &str, package: &str, extra: serde_json::Value) -> Subscription {
    let mut spec = json!({"name": package, "source": "operators", "sourceNamespace": "ns"});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    let spec: SubscriptionSpec = serde_json::from_value(spec).unwrap();
    let mut s = Subscription::new(name, spec);
    s.metadata.namespace = Some("ns".into());
    s.metadata.uid = Some(format!("uid-{name}"));
    s
}

fn csv(name: &str, replaces: Option<&str>, extra_meta: serde_json::Value) -> ClusterServiceVersion {
    let mut value = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"displayName": name, "install": {"strategy": "deployment"}},
    });
    if let Some(r) = replaces {
        value["spec"]["replaces"] = json!(r);
    }
    for (k, v) in extra_meta.as_object().unwrap() {
        value["metadata"][k] = v.clone();
    }
    serde_json::from_value(value).unwrap()
}

fn plan(name: &str, csvs: &[&str], generation: i32, phase: InstallPlanPhase) -> InstallPlan {
    let mut p = InstallPlan::new(
        name,
        crate::api::InstallPlanSpec {
            catalog_source: None,
            catalog_source_namespace: None,
            cluster_service_version_names: csvs
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            approval: Approval::Automatic,
            approved: true,
            generation: Some(generation),
        },
    );
    p.metadata.namespace = Some("ns".into());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.status = Some(InstallPlanStatus {
        phase,
        ..InstallPlanStatus::default()
    });
    p
}

fn namespace(subs: &[&Subscription], installed: Vec<InstalledCsv>) -> Namespace {
    Namespace {
        name: "ns".into(),
        installed,
        subscriptions: subs.iter().map(|s| resolver_subscription(s)).collect(),
    }
}

#[test]
fn installed_csvs_skip_copies_and_csvs_on_their_way_out() {
    let s = sub("rw", "reverse-words", json!({}));
    let mut with_status = s;
    with_status.status = Some(SubscriptionStatus {
        current_csv: Some("reverse-words.v0.2.0".into()),
        ..SubscriptionStatus::default()
    });
    let old = csv("reverse-words.v0.1.0", None, json!({}));
    let new = csv(
        "reverse-words.v0.2.0",
        Some("reverse-words.v0.1.0"),
        json!({}),
    );
    let copy = csv(
        "at.v0.1.0",
        None,
        json!({"labels": {"olm.copiedFrom": "other"}}),
    );
    let recorded = csv(
        "kmm.v2.2.0",
        None,
        json!({"annotations": {ANNOTATION_PROPERTIES:
            r#"{"properties":[{"type":"olm.package","value":{"packageName":"kernel-module-management","version":"2.2.0"}}]}"#}}),
    );
    let installed = installed_csvs(&[&old, &new, &copy, &recorded], &[&with_status]);
    let names: Vec<(&str, &str, String)> = installed
        .iter()
        .map(|i| (i.name.as_str(), i.package.as_str(), i.version.to_string()))
        .collect();
    assert_eq!(
        names,
        [
            ("reverse-words.v0.2.0", "reverse-words", "0.0.0".to_string()),
            (
                "kmm.v2.2.0",
                "kernel-module-management",
                "2.2.0".to_string()
            ),
        ]
    );
    assert_eq!(
        installed[0].source,
        Some(CatalogRef::new("operators", "ns"))
    );
}

/// What a CSV provides by its own spec (a CSV no catalog knows): an `olm.gvk` per owned CRD
/// (group from its `plural.group` name) and per owned API service.
#[test]
fn an_installed_csv_provides_the_apis_its_spec_owns() {
    let mut by_hand = csv("by-hand.v0.1.0", None, json!({}));
    by_hand.spec = serde_json::from_value(json!({
        "displayName": "by hand",
        "install": {"strategy": "deployment"},
        "customresourcedefinitions": {"owned": [
            {"name": "widgets.example.com", "version": "v1", "kind": "Widget"},
            {"name": "nogroup", "version": "v1", "kind": "Odd"},
        ]},
        "apiservicedefinitions": {"owned": [
            {"name": "v1alpha1.metrics.example.com", "group": "metrics.example.com",
             "version": "v1alpha1", "kind": "Sample"},
        ]},
    }))
    .unwrap();
    let installed = installed_csvs(&[&by_hand], &[]);
    let provided: Vec<&serde_json::Value> =
        installed[0].provided.iter().map(|p| &p.value).collect();
    assert_eq!(
        provided,
        [
            &json!({"group": "example.com", "version": "v1", "kind": "Widget"}),
            &json!({"group": "metrics.example.com", "version": "v1alpha1", "kind": "Sample"}),
        ]
    );
    assert!(installed[0].provided.iter().all(|p| p.type_ == "olm.gvk"));
}

#[test]
fn a_failing_subscription_does_not_fail_the_others() {
    let index = our_index();
    let good = sub("rw", "reverse-words", json!({}));
    let unknown = sub("nope", "no-such-package", json!({}));
    let channel = sub("nightly", "at", json!({"channel": "nightly"}));
    let elsewhere = {
        let mut s = sub("elsewhere", "at", json!({}));
        s.spec.source = "missing".into();
        s
    };
    let r = resolve_namespace(
        &index,
        namespace(&[&good, &unknown, &channel, &elsewhere], vec![]),
    );
    assert_eq!(r.plan.steps.len(), 1);
    assert_eq!(r.plan.steps[0].bundle, "reverse-words.v0.5.0");
    assert_eq!(
        r.failures["nope"].reason,
        SubscriptionReason::ConstraintsNotSatisfiable
    );
    assert!(r.failures["nope"].message.contains("no-such-package"));
    assert!(r.failures["nightly"].message.contains("nightly"));
    assert_eq!(
        r.failures["elsewhere"].reason,
        SubscriptionReason::ErrorPreventedResolution
    );
    assert!(!r.failures.contains_key("rw"));
}

#[test]
fn a_missing_dependency_fails_only_its_subscription() {
    let mut content =
        load_path(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalog")).unwrap();
    content
        .bundles
        .retain(|b| b.package != "kernel-module-management");
    content
        .channels
        .retain(|c| c.package != "kernel-module-management");
    content
        .packages
        .retain(|p| p.name != "kernel-module-management");
    let index = CatalogIndex::new(&[Catalog {
        name: "operators".into(),
        namespace: "ns".into(),
        priority: 0,
        content,
    }]);
    let pt = sub("pt", "ptemplate", json!({}));
    let at = sub("at", "at", json!({}));
    let r = resolve_namespace(&index, namespace(&[&pt, &at], vec![]));
    assert_eq!(r.plan.steps.len(), 1, "{:?}", r.plan.steps);
    assert_eq!(r.plan.steps[0].package, "at");
    let failure = &r.failures["pt"];
    assert_eq!(
        failure.reason,
        SubscriptionReason::ConstraintsNotSatisfiable
    );
    assert!(
        failure.message.contains("kmm.sigs.x-k8s.io"),
        "{}",
        failure.message
    );
}

#[test]
fn plans_split_per_subscription_unless_a_dependency_ties_them() {
    let index = our_index();
    let pt = sub("pt", "ptemplate", json!({}));
    let rw = sub(
        "rw",
        "reverse-words",
        json!({"installPlanApproval": "Manual"}),
    );
    let at = sub("at", "at", json!({}));
    let r = resolve_namespace(&index, namespace(&[&pt, &rw, &at], vec![]));
    let groups = split(&r.plan);
    let summary: Vec<(Vec<String>, Vec<String>)> = groups
        .iter()
        .map(|g| (g.subscriptions.iter().cloned().collect(), g.csv_names()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                vec!["pt".to_string()],
                vec![
                    "kernel-module-management.v2.2.0".to_string(),
                    "ptemplate.v0.3.0".to_string()
                ]
            ),
            (
                vec!["rw".to_string()],
                vec!["reverse-words.v0.5.0".to_string()]
            ),
            (vec!["at".to_string()], vec!["at.v0.3.0".to_string()]),
        ]
    );
    let subs = [&pt, &rw, &at];
    assert_eq!(groups[0].approval(&subs), Approval::Automatic);
    assert_eq!(groups[1].approval(&subs), Approval::Manual);
    let bundles = groups[0].planned_bundles();
    assert_eq!(
        bundles[0].generated_subscription.as_deref(),
        Some("kernel-module-management-stable-operators-ns")
    );
    assert_eq!(bundles[0].dependency_of, ["ptemplate.v0.3.0"]);
    assert_eq!(bundles[1].subscription.as_deref(), Some("pt"));
}

#[test]
fn a_shared_dependency_ties_two_subscriptions_into_one_plan() {
    let mut plan = Plan::default();
    let step = |bundle: &str, reason: Reason, dependency_of: &[&str]| Step {
        package: bundle.into(),
        bundle: bundle.into(),
        version: "1.0.0".into(),
        catalog: "c".into(),
        catalog_namespace: "ns".into(),
        channel: "stable".into(),
        replaces: None,
        dependency_of: dependency_of
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
        reason,
    };
    let subscribed = |s: &str| Reason::Subscribed {
        subscription: s.into(),
    };
    let dependency = Reason::Dependency {
        generated_subscription: "dep-stable-c-ns".into(),
    };
    plan.steps = vec![
        step("dep", dependency, &["a", "b"]),
        step("a", subscribed("sa"), &[]),
        step("b", subscribed("sb"), &[]),
        step("c", subscribed("sc"), &[]),
    ];
    let groups = split(&plan);
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].csv_names(), ["dep", "a", "b"]);
    assert_eq!(
        groups[0].subscriptions.iter().collect::<Vec<_>>(),
        ["sa", "sb"]
    );
    assert_eq!(groups[1].csv_names(), ["c"]);
}

#[test]
fn existing_plans_are_reused_and_complete_ones_checked() {
    let pending = plan(
        "install-a",
        &["x.v1"],
        1,
        InstallPlanPhase::RequiresApproval,
    );
    let failed = plan("install-b", &["y.v1"], 2, InstallPlanPhase::Failed);
    let done = plan(
        "install-c",
        &["z.v1", "w.v1"],
        3,
        InstallPlanPhase::Complete,
    );
    let plans = [&pending, &failed, &done];
    assert_eq!(
        existing_plan(&["x.v1".into()], &plans),
        Existing::Reuse("install-a".into())
    );
    assert_eq!(
        existing_plan(&["y.v1".into()], &plans),
        Existing::Reuse("install-b".into())
    );
    assert_eq!(
        existing_plan(&["w.v1".into(), "z.v1".into()], &plans),
        Existing::Completed("install-c".into())
    );
    assert_eq!(existing_plan(&["x.v2".into()], &plans), Existing::None);
    // A dependency planned with the Subscription that needed it: its own Subscription
    // (generated by that plan) finds it there.
    assert_eq!(
        existing_plan(&["w.v1".into()], &plans),
        Existing::Completed("install-c".into())
    );
    let installing = plan(
        "install-d",
        &["v.v1", "dep.v1"],
        4,
        InstallPlanPhase::Installing,
    );
    let failed_with_dep = plan(
        "install-e",
        &["u.v1", "dep.v2"],
        5,
        InstallPlanPhase::Failed,
    );
    let with_dep = [&pending, &failed, &done, &installing, &failed_with_dep];
    assert_eq!(
        existing_plan(&["dep.v1".into()], &with_dep),
        Existing::Reuse("install-d".into())
    );
    // A Failed plan carries out nothing: only a plan of exactly the CSVs is reused.
    assert_eq!(existing_plan(&["dep.v2".into()], &with_dep), Existing::None);
    assert_eq!(existing_plan(&[], &with_dep), Existing::None);
    assert_eq!(next_generation(&plans), 4);
    assert_eq!(next_generation(&[]), 1);
}

#[test]
fn a_subscription_is_held_by_its_plan_in_progress() {
    let mut s = sub("rw", "reverse-words", json!({}));
    let installing = plan("install-a", &["x.v1"], 1, InstallPlanPhase::Installing);
    let complete = plan("install-b", &["x.v1"], 2, InstallPlanPhase::Complete);
    s.status = Some(SubscriptionStatus {
        install_plan_ref: Some(ObjectReference {
            name: Some("install-a".into()),
            ..ObjectReference::default()
        }),
        ..SubscriptionStatus::default()
    });
    assert!(pinned_plan(&s, &[&installing, &complete]).is_some());
    s.status
        .as_mut()
        .unwrap()
        .install_plan_ref
        .as_mut()
        .unwrap()
        .name = Some("install-b".into());
    assert!(pinned_plan(&s, &[&installing, &complete]).is_none());
}

#[test]
fn at_most_five_plans_are_kept_never_one_in_use() {
    let plans: Vec<InstallPlan> = (1..=7)
        .map(|g| plan(&format!("p{g}"), &["x"], g, InstallPlanPhase::Complete))
        .collect();
    let refs: Vec<&InstallPlan> = plans.iter().collect();
    let referenced = BTreeSet::from(["p1".to_string()]);
    assert_eq!(plans_to_prune(&refs, &referenced, 5), ["p2", "p3"]);
    let mut in_flight = plans.clone();
    in_flight[1].status.as_mut().unwrap().phase = InstallPlanPhase::Installing;
    let refs: Vec<&InstallPlan> = in_flight.iter().collect();
    assert_eq!(plans_to_prune(&refs, &referenced, 5), ["p3", "p4"]);
}

fn time(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

#[test]
fn status_follows_the_plan_then_the_csv_and_is_stable() {
    let s = sub("rw", "reverse-words", json!({}));
    let catalogs = [CatalogHealth {
        source: CatalogRef::new("operators", "ns"),
        uid: Some("u".into()),
        healthy: true,
    }];
    let outcome = Outcome::Install {
        bundle: "rw.v1".into(),
    };
    let p = plan("install-a", &["rw.v1"], 1, InstallPlanPhase::Installing);
    let no_csvs = BTreeSet::new();
    let input = StatusInput {
        failure: None,
        outcome: Some(&outcome),
        plan: Some(&p),
        plan_missing: false,
        installed_of_package: None,
        csvs: &no_csvs,
        catalogs: &catalogs,
        held: None,
        now: time(100),
    };
    let pending = desired_status(&s, &input);
    assert_eq!(pending.state, Some(SubscriptionState::UpgradePending));
    assert_eq!(pending.current_csv.as_deref(), Some("rw.v1"));
    assert_eq!(pending.installed_csv, None);
    assert_eq!(
        pending.install_plan_ref.as_ref().unwrap().name.as_deref(),
        Some("install-a")
    );
    assert_eq!(pending.installplan.as_ref().unwrap().uuid, "uid-install-a");
    assert_eq!(pending.install_plan_generation, Some(1));
    let types: Vec<(&str, &str)> = pending
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap()))
        .collect();
    assert_eq!(
        types,
        [
            ("CatalogSourcesUnhealthy", "AllCatalogSourcesHealthy"),
            ("InstallPlanPending", "Installing")
        ]
    );
    assert!(pending.catalog_health[0].healthy);

    // Complete, CSV present: AtLatestKnown.
    let mut s2 = s.clone();
    s2.status = Some(pending.clone());
    let csvs = BTreeSet::from(["rw.v1".to_string()]);
    let latest = Outcome::AtLatestKnown {
        csv: "rw.v1".into(),
    };
    let input = StatusInput {
        outcome: Some(&latest),
        plan: None,
        csvs: &csvs,
        held: None,
        now: time(200),
        ..input
    };
    let done = desired_status(&s2, &input);
    assert_eq!(done.state, Some(SubscriptionState::AtLatestKnown));
    assert_eq!(done.installed_csv.as_deref(), Some("rw.v1"));
    assert_eq!(
        done.install_plan_ref, pending.install_plan_ref,
        "the last plan stays referenced"
    );
    assert_eq!(done.conditions.len(), 1);
    // Transition times and catalog health times hold while nothing changes.
    assert_eq!(done.conditions[0].last_transition_time, Some(time(100)));
    assert_eq!(done.catalog_health[0].last_updated, Some(time(100)));
    assert_eq!(done.last_updated, Some(time(200)));

    // The same inputs later: the same status, so nothing is written.
    let mut s3 = s;
    s3.status = Some(done.clone());
    let again = desired_status(
        &s3,
        &StatusInput {
            held: None,
            now: time(300),
            ..input
        },
    );
    assert_eq!(again, done);
}

/// A rollback names the CSV the installed one replaced while that one is still on its way
/// out (still Succeeded beside its successor, Replacing, or being deleted): the status
/// keeps calling the live CSV installed, never the leaving one.
#[test]
fn a_rollback_to_a_csv_still_leaving_does_not_call_it_installed() {
    let succeeded = |mut c: ClusterServiceVersion, phase| {
        c.status = Some(crate::api::ClusterServiceVersionStatus {
            phase: Some(phase),
            ..Default::default()
        });
        c
    };
    let old = succeeded(csv("at.v0.1.0", None, json!({})), CsvPhase::Succeeded);
    let new = succeeded(
        csv("at.v0.2.0", Some("at.v0.1.0"), json!({})),
        CsvPhase::Succeeded,
    );
    let replacing = succeeded(csv("rw.v1", None, json!({})), CsvPhase::Replacing);
    let deleted = csv(
        "pt.v1",
        None,
        json!({"deletionTimestamp": "2026-11-28T10:00:00Z", "finalizers": ["x"]}),
    );
    let staying = staying_csvs(&[&old, &new, &replacing, &deleted]);
    assert_eq!(staying, BTreeSet::from(["at.v0.2.0".to_string()]));

    let mut s = sub(
        "at",
        "at",
        json!({"upgradePolicy": {"rollbackTo": "0.1.0"}}),
    );
    s.status = Some(SubscriptionStatus {
        current_csv: Some("at.v0.2.0".into()),
        installed_csv: Some("at.v0.2.0".into()),
        ..SubscriptionStatus::default()
    });
    let back = Outcome::Upgrade {
        from: "at.v0.2.0".into(),
        to: "at.v0.1.0".into(),
    };
    let p = plan(
        "rollback",
        &["at.v0.1.0"],
        2,
        InstallPlanPhase::RequiresApproval,
    );
    let status = desired_status(
        &s,
        &StatusInput {
            failure: None,
            outcome: Some(&back),
            plan: Some(&p),
            plan_missing: false,
            installed_of_package: Some("at.v0.2.0"),
            csvs: &staying,
            catalogs: &[],
            held: None,
            now: time(100),
        },
    );
    assert_eq!(status.current_csv.as_deref(), Some("at.v0.1.0"));
    assert_eq!(status.installed_csv.as_deref(), Some("at.v0.2.0"));
    assert_eq!(status.replaced_csv, None, "nothing was replaced yet");
    assert_eq!(status.state, Some(SubscriptionState::UpgradePending));
}

/// The race of issue 30: a plan completes and the same round resolves the next hop, so
/// `currentCSV` moves on before the installed CSV was ever recorded. `installedCSV` names the
/// CSV that is there, never nothing.
#[test]
fn installed_csv_survives_a_round_that_resolves_the_next_hop() {
    let mut s = sub("rw", "reverse-words", json!({}));
    s.status = Some(SubscriptionStatus {
        current_csv: Some("rw.v1".into()),
        installed_csv: None,
        ..SubscriptionStatus::default()
    });
    let catalogs = [CatalogHealth {
        source: CatalogRef::new("operators", "ns"),
        uid: Some("u".into()),
        healthy: true,
    }];
    let next_hop = Outcome::Upgrade {
        from: "rw.v1".into(),
        to: "rw.v2".into(),
    };
    let p = plan(
        "install-b",
        &["rw.v2"],
        2,
        InstallPlanPhase::RequiresApproval,
    );
    let installed = BTreeSet::from(["rw.v1".to_string()]);
    let input = StatusInput {
        failure: None,
        outcome: Some(&next_hop),
        plan: Some(&p),
        plan_missing: false,
        installed_of_package: None,
        csvs: &installed,
        catalogs: &catalogs,
        held: None,
        now: time(100),
    };
    let status = desired_status(&s, &input);
    assert_eq!(status.current_csv.as_deref(), Some("rw.v2"));
    assert_eq!(status.installed_csv.as_deref(), Some("rw.v1"));

    // Without the outcome (held by its plan), the previous current CSV still counts.
    let held = desired_status(
        &s,
        &StatusInput {
            outcome: None,
            held: None,
            now: time(150),
            ..input
        },
    );
    assert_eq!(held.installed_csv.as_deref(), Some("rw.v1"));
    // Manual hop, as kubectl-operator found it: the recorded CSV (v0) is on its way out,
    // the live one of the package is v1, and the next hop waits for approval (no outcome).
    let mut hopped = s.clone();
    hopped.status = Some(SubscriptionStatus {
        current_csv: Some("rw.v2".into()),
        installed_csv: Some("rw.v0".into()),
        ..SubscriptionStatus::default()
    });
    let both = BTreeSet::from(["rw.v0".to_string(), "rw.v1".to_string()]);
    let live = desired_status(
        &hopped,
        &StatusInput {
            outcome: None,
            csvs: &both,
            installed_of_package: Some("rw.v1"),
            held: None,
            now: time(160),
            ..input
        },
    );
    assert_eq!(live.installed_csv.as_deref(), Some("rw.v1"));
    // And with no CSV of it left, nothing is claimed.
    let none = BTreeSet::new();
    let gone = desired_status(
        &s,
        &StatusInput {
            csvs: &none,
            ..input
        },
    );
    assert_eq!(gone.installed_csv, None);
}

#[test]
fn failures_manual_plans_and_unhealthy_catalogs_show_as_conditions() {
    let s = sub("rw", "reverse-words", json!({}));
    let catalogs = [CatalogHealth {
        source: CatalogRef::new("broken", "ns"),
        uid: None,
        healthy: false,
    }];
    let failure = Failure {
        reason: SubscriptionReason::ErrorPreventedResolution,
        message: "expected 1 OperatorGroup in the namespace, found 0".into(),
    };
    let none = BTreeSet::new();
    let input = StatusInput {
        failure: Some(&failure),
        outcome: None,
        plan: None,
        plan_missing: false,
        installed_of_package: None,
        csvs: &none,
        catalogs: &catalogs,
        held: None,
        now: time(1),
    };
    let status = desired_status(&s, &input);
    let unhealthy = &status.conditions[0];
    assert_eq!(
        (unhealthy.status.as_str(), unhealthy.reason.as_deref()),
        ("True", Some("UnhealthyCatalogSourceFound"))
    );
    // The catalog it names is not there at all: upstream's words.
    assert_eq!(
        unhealthy.message.as_deref(),
        Some("targeted catalogsource ns/operators missing")
    );
    let message_with = |catalogs: &[CatalogHealth]| {
        let status = desired_status(
            &s,
            &StatusInput {
                catalogs,
                held: None,
                now: time(1),
                ..input
            },
        );
        status.conditions[0].message.clone().unwrap_or_default()
    };
    let targeted = |healthy: bool| CatalogHealth {
        source: CatalogRef::new("operators", "ns"),
        uid: None,
        healthy,
    };
    assert_eq!(
        message_with(&[targeted(true), catalogs[0].clone()]),
        "catalogsource ns/broken unhealthy",
        "another catalog is not called targeted"
    );
    assert_eq!(
        message_with(&[targeted(false), catalogs[0].clone()]),
        "targeted catalogsource ns/operators unhealthy"
    );
    let failed = &status.conditions[1];
    assert_eq!(failed.type_, "ResolutionFailed");
    assert_eq!(failed.reason.as_deref(), Some("ErrorPreventedResolution"));
    assert_eq!(status.state, None);

    let mut manual = plan(
        "install-m",
        &["rw.v1"],
        1,
        InstallPlanPhase::RequiresApproval,
    );
    manual.spec.approval = Approval::Manual;
    let outcome = Outcome::Install {
        bundle: "rw.v1".into(),
    };
    let waiting = desired_status(
        &s,
        &StatusInput {
            failure: None,
            outcome: Some(&outcome),
            plan: Some(&manual),
            held: None,
            now: time(1),
            ..input
        },
    );
    let pending = waiting
        .conditions
        .iter()
        .find(|c| c.type_ == "InstallPlanPending")
        .unwrap();
    assert_eq!(pending.reason.as_deref(), Some("RequiresApproval"));

    let mut failed_plan = plan("install-f", &["rw.v1"], 1, InstallPlanPhase::Failed);
    failed_plan.status.as_mut().unwrap().message = Some("step 3 Role r: denied".into());
    let failed = desired_status(
        &s,
        &StatusInput {
            failure: None,
            outcome: Some(&outcome),
            plan: Some(&failed_plan),
            held: None,
            now: time(1),
            ..input
        },
    );
    let c = failed
        .conditions
        .iter()
        .find(|c| c.type_ == "InstallPlanFailed")
        .unwrap();
    assert_eq!(c.message.as_deref(), Some("step 3 Role r: denied"));

    let mut referencing = s;
    referencing.status = Some(SubscriptionStatus {
        install_plan_ref: Some(ObjectReference {
            name: Some("install-gone".into()),
            ..ObjectReference::default()
        }),
        ..SubscriptionStatus::default()
    });
    let missing = desired_status(
        &referencing,
        &StatusInput {
            failure: None,
            plan_missing: true,
            installed_of_package: None,
            ..input
        },
    );
    let c = missing
        .conditions
        .iter()
        .find(|c| c.type_ == "InstallPlanMissing")
        .unwrap();
    assert!(c.message.as_deref().unwrap().contains("install-gone"));
}

#[test]
fn a_failed_plan_passes_on_its_own_reason_as_it_is_spelled() {
    let s = sub("rw", "reverse-words", json!({}));
    let none = BTreeSet::new();
    let reason_shown = |failed_plan: &InstallPlan| {
        let input = StatusInput {
            failure: None,
            outcome: None,
            plan: Some(failed_plan),
            plan_missing: false,
            installed_of_package: None,
            csvs: &none,
            catalogs: &[],
            held: None,
            now: time(1),
        };
        desired_status(&s, &input)
            .conditions
            .into_iter()
            .find(|c| c.type_ == "InstallPlanFailed")
            .and_then(|c| c.reason)
    };
    let mut failed_plan = plan("install-f", &["rw.v1"], 1, InstallPlanPhase::Failed);
    assert_eq!(
        reason_shown(&failed_plan).as_deref(),
        Some("InstallPlanFailed"),
        "no reason of its own"
    );
    failed_plan.status.as_mut().unwrap().conditions = vec![InstallPlanCondition {
        type_: Some("Installed".into()),
        status: Some("False".into()),
        reason: Some("AnotherWritersReason".into()),
        ..InstallPlanCondition::default()
    }];
    assert_eq!(
        reason_shown(&failed_plan).as_deref(),
        Some("AnotherWritersReason")
    );
}

/// The status step of a round, over a whole namespace: a Subscription held by its plan in
/// progress keeps it; one given a new plan points to it; one whose plan was deleted says so;
/// and the plans nobody references beyond five are pruned, never one in use.
#[test]
fn a_rounds_statuses_follow_held_new_and_missing_plans_and_prune_the_rest() {
    let reference = |name: &str| SubscriptionStatus {
        install_plan_ref: Some(ObjectReference {
            name: Some(name.into()),
            ..ObjectReference::default()
        }),
        ..SubscriptionStatus::default()
    };
    let mut held = sub("held", "reverse-words", json!({}));
    held.status = Some(reference("p7"));
    let fresh = sub("fresh", "ptemplate", json!({}));
    let mut orphaned = sub("orphaned", "at", json!({}));
    orphaned.status = Some(reference("gone"));
    let mut plans: Vec<InstallPlan> = (1..=6)
        .map(|g| plan(&format!("p{g}"), &["old"], g, InstallPlanPhase::Complete))
        .collect();
    plans.push(plan("p7", &["rw.v1"], 7, InstallPlanPhase::Installing));
    plans.push(plan("p8", &["pt.v1"], 8, InstallPlanPhase::Installing));
    let plans: Vec<&InstallPlan> = plans.iter().collect();
    let plan_of = BTreeMap::from([("fresh".to_string(), "p8".to_string())]);
    let resolution = Resolution::default();
    let csvs = BTreeSet::new();
    let round = Round {
        resolution: &resolution,
        plans: &plans,
        plan_of: &plan_of,
        csvs: &csvs,
        installed_by_package: &BTreeMap::new(),
        catalogs: &[],
        withdrawn: &BTreeSet::new(),
        now: time(100),
    };
    let statuses = statuses(&[&held, &fresh, &orphaned], &round, 5);

    let plan_name = |s: &SubscriptionStatus| {
        s.install_plan_ref
            .as_ref()
            .and_then(|r| r.name.clone())
            .unwrap_or_default()
    };
    let has = |s: &SubscriptionStatus, type_: &str| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let [held, fresh, orphaned] = &statuses.desired[..] else {
        panic!("one status per Subscription: {statuses:?}")
    };
    assert_eq!(plan_name(held), "p7");
    assert!(has(held, "InstallPlanPending"), "{held:?}");
    assert_eq!(plan_name(fresh), "p8");
    assert!(has(fresh, "InstallPlanPending"), "{fresh:?}");
    assert!(has(orphaned, "InstallPlanMissing"), "{orphaned:?}");
    // Eight plans, five kept: the three oldest Complete ones go; p7 and p8 are in use.
    assert_eq!(statuses.prune, ["p1", "p2", "p3"]);
}

/// A dependency's Subscription that a plan generated refers to that plan from the start
/// (upstream's `olm.generated-by`), found by the annotation's plan name or by the step
/// that creates it; a plain Subscription without a reference is not given one.
#[test]
fn a_generated_subscription_refers_to_the_plan_that_created_it() {
    let mut generated = sub(
        "kmm-stable-operators-ns",
        "kernel-module-management",
        json!({}),
    );
    generated.metadata.annotations = Some(
        [(
            crate::controllers::plan::steps::ANNOTATION_GENERATED_BY.to_string(),
            "ptemplate.v0.3.0".to_string(),
        )]
        .into(),
    );
    let mut by_name = generated.clone();
    by_name.metadata.name = Some("by-name".into());
    by_name.metadata.annotations = Some(
        [(
            crate::controllers::plan::steps::ANNOTATION_GENERATED_BY.to_string(),
            "install-up".to_string(),
        )]
        .into(),
    );
    let plain = sub("plain", "at", json!({}));
    let mut creating = plan(
        "install-ours",
        &["ptemplate.v0.3.0"],
        1,
        InstallPlanPhase::Complete,
    );
    creating.status.as_mut().unwrap().plan = vec![crate::api::Step {
        resolving: "ptemplate.v0.3.0".into(),
        resource: crate::api::StepResource {
            source_name: "operators".into(),
            source_namespace: "ns".into(),
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: "Subscription".into(),
            name: "kmm-stable-operators-ns".into(),
            manifest: None,
        },
        optional: None,
        status: crate::api::StepStatus::Created,
    }];
    let upstreams = plan("install-up", &["x.v1"], 2, InstallPlanPhase::Complete);
    let plans = [&creating, &upstreams];
    let resolution = Resolution::default();
    let csvs = BTreeSet::new();
    let round = Round {
        resolution: &resolution,
        plans: &plans,
        plan_of: &BTreeMap::new(),
        csvs: &csvs,
        installed_by_package: &BTreeMap::new(),
        catalogs: &[],
        withdrawn: &BTreeSet::new(),
        now: time(100),
    };
    let statuses = statuses(&[&generated, &by_name, &plain], &round, 5);
    let plan_name =
        |s: &SubscriptionStatus| s.install_plan_ref.as_ref().and_then(|r| r.name.clone());
    assert_eq!(
        plan_name(&statuses.desired[0]).as_deref(),
        Some("install-ours")
    );
    assert_eq!(
        statuses.desired[0]
            .installplan
            .as_ref()
            .map(|r| r.name.as_str()),
        Some("install-ours")
    );
    assert_eq!(
        plan_name(&statuses.desired[1]).as_deref(),
        Some("install-up")
    );
    assert_eq!(plan_name(&statuses.desired[2]), None);
}

/// Upstream's InstallPlanPending: the plan's phase as reason (InstallPlanNotYetReconciled
/// while it has none), and the plan's own words as message.
#[test]
fn a_pending_plan_is_relayed_with_upstreams_reasons_and_its_own_message() {
    let s = sub("rw", "reverse-words", json!({}));
    let none = BTreeSet::new();
    let pending = |p: &InstallPlan| {
        let status = desired_status(
            &s,
            &StatusInput {
                failure: None,
                outcome: None,
                plan: Some(p),
                plan_missing: false,
                installed_of_package: None,
                csvs: &none,
                catalogs: &[],
                held: None,
                now: time(1),
            },
        );
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == "InstallPlanPending")
            .cloned()
            .unwrap();
        (c.reason.unwrap_or_default(), c.message.unwrap_or_default())
    };
    let fresh = plan("install-a", &["rw.v1"], 1, InstallPlanPhase::None);
    assert_eq!(pending(&fresh).0, "InstallPlanNotYetReconciled");
    let mut waiting = plan(
        "install-a",
        &["rw.v1"],
        1,
        InstallPlanPhase::RequiresApproval,
    );
    assert_eq!(
        pending(&waiting),
        ("RequiresApproval".into(), String::new())
    );
    waiting.status.as_mut().unwrap().bundle_lookups = vec![crate::api::BundleLookup {
        conditions: vec![crate::api::InstallPlanCondition {
            type_: Some("BundleLookupPending".into()),
            status: Some("True".into()),
            message: Some("unpacking the bundle image".into()),
            ..Default::default()
        }],
        ..Default::default()
    }];
    assert_eq!(pending(&waiting).1, "unpacking the bundle image.");
}

#[test]
fn a_rollback_pair_counts_the_csv_created_last_as_installed() {
    // 0.5.0 replaced 0.4.0 earlier; the rollback's 0.4.0 replaces 0.5.0 now.
    let newer = csv(
        "rw.v0.5.0",
        Some("rw.v0.4.0"),
        json!({"creationTimestamp": "2026-11-28T10:00:00Z"}),
    );
    let rolled_back = csv(
        "rw.v0.4.0",
        Some("rw.v0.5.0"),
        json!({"creationTimestamp": "2026-11-28T11:00:00Z"}),
    );
    assert!(rolled_back.replaces_now(&newer));
    assert!(!newer.replaces_now(&rolled_back));
    // Created in the same second: the newcomer is the one not yet Succeeded.
    let mut succeeded = csv(
        "rw.v0.5.0",
        Some("rw.v0.4.0"),
        json!({"creationTimestamp": "2026-11-28T10:00:00Z"}),
    );
    succeeded.status = Some(crate::api::ClusterServiceVersionStatus {
        phase: Some(CsvPhase::Succeeded),
        ..Default::default()
    });
    let same_second = csv(
        "rw.v0.4.0",
        Some("rw.v0.5.0"),
        json!({"creationTimestamp": "2026-11-28T10:00:00Z"}),
    );
    assert!(same_second.replaces_now(&succeeded));
    assert!(!succeeded.replaces_now(&same_second));
    let s = sub("rw", "rw", json!({}));
    let installed = installed_csvs(&[&newer, &rolled_back], &[&s]);
    let names: Vec<&str> = installed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["rw.v0.4.0"]);
}

#[test]
fn a_rollback_is_planned_in_place_of_resolution_and_refused_without_the_bundle() {
    use super::super::policy::Policy;
    use super::super::under_policy::resolve_under_policies;
    let mut s = sub(
        "rw",
        "reverse-words",
        json!({"channel": "stable", "upgradePolicy": {"rollbackTo": "0.3.0"}}),
    );
    let installed = vec![InstalledCsv {
        name: "reverse-words.v0.4.0".into(),
        package: "reverse-words".into(),
        version: "0.4.0".parse().unwrap(),
        source: Some(CatalogRef::new("operators", "ns")),
        provided: Vec::new(),
    }];
    let resolve = |s: &Subscription| {
        let policy = Policy::read(s.spec.upgrade_policy.as_ref().unwrap()).unwrap();
        let namespace = Namespace {
            name: "ns".into(),
            installed: installed.clone(),
            subscriptions: vec![resolver_subscription(s)],
        };
        resolve_under_policies(&our_index(), namespace, [("rw".to_string(), policy)].into())
    };
    let resolution = resolve(&s);
    assert!(resolution.failures.is_empty(), "{:?}", resolution.failures);
    assert!(resolution.rollbacks.contains("rw"));
    let step = &resolution.plan.steps[0];
    assert_eq!(
        (step.bundle.as_str(), step.replaces.as_deref()),
        ("reverse-words.v0.3.0", Some("reverse-words.v0.4.0"))
    );
    let targets = split(&resolution.plan)[0].targets(&[&s], &resolution.rollbacks);
    assert!(targets[0].rollback && !targets[0].first_install);

    s.spec.upgrade_policy.as_mut().unwrap().rollback_to = Some("0.0.9".into());
    let refused = resolve(&s);
    assert_eq!(
        refused.failures["rw"].message,
        "rollbackTo 0.0.9: catalog ns/operators has no bundle of package reverse-words at version 0.0.9"
    );
}

#[test]
fn after_a_rollback_the_newer_version_is_held_by_rollback_to() {
    use super::super::policy::Policy;
    use super::super::under_policy::resolve_under_policies;
    let s = sub(
        "rw",
        "reverse-words",
        json!({"channel": "stable", "upgradePolicy": {"rollbackTo": "reverse-words.v0.2.0"}}),
    );
    let namespace = Namespace {
        name: "ns".into(),
        installed: vec![InstalledCsv {
            name: "reverse-words.v0.2.0".into(),
            package: "reverse-words".into(),
            version: "0.2.0".parse().unwrap(),
            source: Some(CatalogRef::new("operators", "ns")),
            provided: Vec::new(),
        }],
        subscriptions: vec![resolver_subscription(&s)],
    };
    let policy = Policy::read(s.spec.upgrade_policy.as_ref().unwrap()).unwrap();
    let resolution =
        resolve_under_policies(&our_index(), namespace, [("rw".to_string(), policy)].into());
    assert!(
        resolution.plan.steps.is_empty(),
        "{:?}",
        resolution.plan.steps
    );
    let held = resolution.plan.subscriptions[0]
        .held
        .clone()
        .expect("0.4.0 is held");
    assert_eq!(held.policy, "rollbackTo 0.2.0");
}
