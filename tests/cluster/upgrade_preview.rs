//! The impact preview of an InstallPlan (`status.impact`), on reverse-words upgraded by
//! Manual approval from 0.2.0 along the `stable` channel of our catalog: each plan carries
//! its preview while it waits for approval, and `olm plan show` prints it.
//!
//! From 0.2.0 the channel goes to 0.4.0 first (its `olm.skipRange` covers 0.2.0; 0.5.0
//! only replaces 0.4.0): the same RBAC under a new CSV, a new operator image. Then 0.5.0:
//! exactly the RBAC the Rust operator uses (events.k8s.io events instead of core events,
//! no leases or configmaps, fewer verbs), a new image.

use std::process::Command;
use std::time::Duration;

use olm::api::{
    ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, ObjectRef, PlanImpact,
};

use crate::catalog_sources::{catalog_source_yaml, wait_for_state};
use crate::harness::{
    CsvReads, TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, olm_bin,
    repo_root,
};
use crate::processes::{OlmRun, free_port, olm_serve};

const WAIT: Duration = Duration::from_secs(120);
const SA: &str = "reverse-words-controller-manager";
const IMAGE: &str = "quay.io/olm-rs/reverse-words-operator";

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

/// The plan that installs `csv`, once it waits for approval with its preview.
async fn waiting_plan(ns: &TestNamespace, csv: &str) -> (InstallPlan, PlanImpact) {
    eventually(
        &format!("a plan for {csv} waiting for approval with its preview"),
        WAIT,
        || async {
            let plans = ns.install_plans().await;
            let plan = plans
                .into_iter()
                .find(|p| p.spec.cluster_service_version_names == [csv])?;
            let impact = plan.status.as_ref()?.impact.clone()?;
            (plan.phase() == InstallPlanPhase::RequiresApproval).then_some((plan, impact))
        },
    )
    .await
}

fn approve(ns: &str, plan: &InstallPlan) {
    let name = plan.metadata.name.as_deref().unwrap();
    kubectl(
        &[
            "patch",
            "installplan",
            name,
            "-n",
            ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"approved":true}}"#,
        ],
        None,
    )
    .ok();
}

async fn succeeded(ns: &TestNamespace, csv: &str) {
    eventually(
        &format!("CSV {csv} Succeeded"),
        Duration::from_secs(180),
        || async {
            let found = ns.get_opt::<ClusterServiceVersion>(csv).await?;
            (found.phase() == CsvPhase::Succeeded).then_some(())
        },
    )
    .await;
}

fn names(refs: &[ObjectRef], kind: &str) -> Vec<String> {
    refs.iter()
        .filter(|r| r.kind == kind)
        .map(|r| r.name.clone())
        .collect()
}

/// `olm plan show` on `plan`: its output, and whether it succeeded.
fn plan_show(plan: &str) -> (bool, String, String) {
    let out = Command::new(olm_bin())
        .args(["plan", "show", plan])
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test]
async fn an_upgrade_plan_previews_its_rbac_images_and_what_goes() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "upgrade-preview").await;
    let name = ns.name.clone();
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let _olm = OlmRun::start(&name, &["--leader-elect=false"]);
    apply(&catalog_source_yaml(
        &name,
        "operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&name, "operators", "READY");
    apply(&format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {name}\nspec:\n  targetNamespaces: [{name}]\n"
    ));
    apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: reverse-words\n  namespace: {name}\nspec:\n  name: reverse-words\n  source: operators\n  sourceNamespace: {name}\n  channel: stable\n  startingCSV: reverse-words.v0.2.0\n  installPlanApproval: Manual\n"
    ));

    // The first install: everything is new, every rule an escalation (the account does
    // not exist yet), nothing goes.
    let (first, impact) = waiting_plan(&ns, "reverse-words.v0.2.0").await;
    assert!(impact.escalates(), "{impact:#?}");
    assert!(impact.rbac[0].removed.is_empty());
    assert_eq!(impact.images.len(), 1, "{:#?}", impact.images);
    assert_eq!(impact.images[0].from, None);
    assert_eq!(
        impact.images[0].to.as_deref(),
        Some(format!("{IMAGE}:v0.2.0").as_str())
    );
    assert!(impact.objects.deleted.is_empty(), "{:#?}", impact.objects);
    assert_eq!(
        names(&impact.objects.created, "ClusterServiceVersion"),
        ["reverse-words.v0.2.0"]
    );
    assert_eq!(names(&impact.objects.created, "Deployment"), [SA]);
    assert!(impact.computed_at.is_some());
    approve(&name, &first);
    succeeded(&ns, "reverse-words.v0.2.0").await;

    // 0.2.0 → 0.4.0: the same rules (the only RBAC change is the OperatorCondition grant
    // OLM makes for each CSV, moved to the new CSV's condition: renewed), a new
    // image; the old CSV goes with the Role and RoleBinding its plan made and those of its
    // condition (all named after it); the Deployment is updated, the ServiceAccount, whose
    // content the plan does not change (labels and owners only), is not.
    let (second, impact) = waiting_plan(&ns, "reverse-words.v0.4.0").await;
    let condition_only = impact.rbac.iter().all(|a| {
        a.added
            .iter()
            .chain(&a.removed)
            .all(|r| r.rule["resources"][0] == "operatorconditions")
    });
    assert!(condition_only, "{:#?}", impact.rbac);
    assert!(!impact.escalates());
    let renewed = impact.rbac.iter().flat_map(|a| &a.added);
    assert!(renewed.clone().count() > 0 && renewed.clone().all(|r| r.escalation && r.renewed));
    assert_eq!(impact.images.len(), 1, "{:#?}", impact.images);
    let image = &impact.images[0];
    assert_eq!(
        (image.deployment.as_str(), image.container.as_str()),
        (SA, "manager")
    );
    assert_eq!(
        image.from.as_deref(),
        Some(format!("{IMAGE}:v0.2.0").as_str())
    );
    assert_eq!(
        image.to.as_deref(),
        Some(format!("{IMAGE}:v0.4.0").as_str())
    );
    let deleted = &impact.objects.deleted;
    assert_eq!(
        names(deleted, "ClusterServiceVersion"),
        ["reverse-words.v0.2.0"]
    );
    for kind in ["Role", "RoleBinding"] {
        let gone = names(deleted, kind);
        assert!(
            gone.len() == 2
                && gone.contains(&"reverse-words.v0.2.0".to_string())
                && gone.iter().any(|g| g.starts_with("reverse-words.v0.2.0-")),
            "{kind}: {deleted:#?}"
        );
        let made = names(&impact.objects.created, kind);
        assert!(
            made.contains(&"reverse-words.v0.4.0".to_string()),
            "{kind}: {made:?}"
        );
    }
    assert_eq!(names(&impact.objects.updated, "Deployment"), [SA]);
    assert!(names(&impact.objects.updated, "ServiceAccount").is_empty());
    assert!(impact.blockers.is_empty(), "{:#?}", impact.blockers);
    assert!(
        impact.summary.contains("1 image changed") && !impact.summary.contains("escalation"),
        "{}",
        impact.summary
    );
    approve(&name, &second);
    succeeded(&ns, "reverse-words.v0.4.0").await;

    // 0.4.0 → 0.5.0: events.k8s.io is new to the account (an escalation); core events,
    // leases and configmaps go; verbs narrow (added rules its old Role already allows).
    let (third, impact) = waiting_plan(&ns, "reverse-words.v0.5.0").await;
    assert!(impact.escalates());
    assert_eq!(impact.rbac.len(), 1, "{:#?}", impact.rbac);
    let account = &impact.rbac[0];
    assert_eq!(account.service_account, format!("{name}/{SA}"));
    let events = account
        .added
        .iter()
        .find(|r| r.rule["apiGroups"][0] == "events.k8s.io")
        .expect("the events.k8s.io rule added");
    assert!(events.escalation);
    assert_eq!(events.scope, "Namespace");
    assert_eq!(events.rule["verbs"], serde_json::json!(["create", "patch"]));
    let escalations: Vec<&serde_json::Value> = account
        .added
        .iter()
        .filter(|r| r.escalation && !r.renewed)
        .map(|r| &r.rule)
        .collect();
    assert_eq!(escalations.len(), 1, "{escalations:#?}");
    for resource in ["leases", "configmaps", "events"] {
        assert!(
            account
                .removed
                .iter()
                .any(|r| r.rule["resources"][0] == resource),
            "{resource} removed: {:#?}",
            account.removed
        );
    }
    assert_eq!(impact.images.len(), 1, "{:#?}", impact.images);
    assert_eq!(
        impact.images[0].from.as_deref(),
        Some(format!("{IMAGE}:v0.4.0").as_str())
    );
    assert_eq!(
        impact.images[0].to.as_deref(),
        Some(format!("{IMAGE}:v0.5.0").as_str())
    );
    assert_eq!(
        names(&impact.objects.deleted, "ClusterServiceVersion"),
        ["reverse-words.v0.4.0"]
    );
    assert!(impact.blockers.is_empty(), "{:#?}", impact.blockers);
    assert!(
        impact.summary.starts_with("1 escalation; +"),
        "{}",
        impact.summary
    );

    // As a person reads it.
    let plan = format!("{name}/{}", third.metadata.name.as_deref().unwrap());
    let (ok, shown, stderr) = plan_show(&plan);
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = shown.lines().map(str::trim).collect();
    let has = |line: &str| lines.contains(&line);
    assert!(has(&format!("Summary: {}", impact.summary)), "{shown}");
    assert!(has(&format!("{name}/{SA}")), "{shown}");
    assert!(
        has(
            r#"+ Namespace {"verbs":["create","patch"],"apiGroups":["events.k8s.io"],"resources":["events"]}  ESCALATION"#
        ),
        "{shown}"
    );
    assert!(
        has(&format!("{SA}/manager: {IMAGE}:v0.4.0 -> {IMAGE}:v0.5.0")),
        "{shown}"
    );
    assert!(
        has(&format!(
            "- operators.coreos.com/v1alpha1 ClusterServiceVersion {name}/reverse-words.v0.4.0"
        )),
        "{shown}"
    );
    for section in [
        "RBAC",
        "CRDs",
        "Images",
        "Webhooks and APIServices",
        "Objects",
        "Blockers",
    ] {
        assert!(has(section), "{section}: {shown}");
    }
    let (ok, _, stderr) = plan_show(&format!("{name}/no-such-plan"));
    assert!(
        !ok && stderr.contains("no-such-plan") && stderr.contains("not found"),
        "{stderr}"
    );

    approve(&name, &third);
    succeeded(&ns, "reverse-words.v0.5.0").await;
}
