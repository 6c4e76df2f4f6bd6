//! Installing: a Subscription becomes one Complete plan and its objects, from `olm catalog
//! serve` or `opm serve`, from the global catalog namespace, several at once, under the
//! OperatorGroup's service account or deploy/'s RBAC alone, and with an Operator listing
//! what the install made.

use kube::ResourceExt;
use kube::api::Api;
use olm::api::{
    ANNOTATION_PROPERTIES, Approval, ClusterServiceVersion, Components, CsvPhase, InstallPlanPhase,
    Operator, OperatorGroup, StepStatus, Subscription, SubscriptionState,
};

use super::{Setup, WAIT, apply, our_catalog, subscription_yaml};
use crate::catalog_sources::{catalog_source_yaml, wait_for_state};
use crate::harness::{
    CsvReads, InstallPlanReads, SubscriptionReads, TestNamespace, client, eventually, install_crds,
    kubectl, operator_crds_lock, repo_root, wait_crd_established,
};
use crate::processes::{OlmRun, free_port, olm_serve, opm_serve};

#[tokio::test]
async fn subscribing_installs_the_bundle_and_a_steady_state_writes_nothing() {
    let s = Setup::new("sub-install", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");

    let sub = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let status = sub.status.as_ref().unwrap();
    let plan_ref = status.install_plan_ref.as_ref().unwrap();
    let plan_name = plan_ref.name.clone().unwrap();
    assert!(plan_name.starts_with("install-"), "{status:#?}");
    assert_eq!(status.installplan.as_ref().unwrap().name, plan_name);
    assert_eq!(plan_ref.kind.as_deref(), Some("InstallPlan"));
    let health = &status.catalog_health[0];
    assert!(health.healthy, "{status:#?}");
    assert_eq!(health.catalog_source_ref.name.as_deref(), Some("operators"));
    let unhealthy = sub.condition("CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy.status, "False");
    assert_eq!(
        unhealthy.reason.as_deref(),
        Some("AllCatalogSourcesHealthy")
    );
    assert!(status.last_updated.is_some());

    // One plan, Complete, with upstream's spec and steps.
    let plan = s.plan_phase(&plan_name, InstallPlanPhase::Complete).await;
    assert_eq!(s.plans().await.len(), 1);
    assert_eq!(
        plan.spec.cluster_service_version_names,
        ["reverse-words.v0.4.0"]
    );
    assert_eq!(plan.spec.approval, Approval::Automatic);
    assert!(plan.spec.approved);
    assert_eq!(plan.spec.generation, Some(1));
    assert_eq!(plan.owner_references()[0].name, "reverse-words");
    let plan_status = plan.status.as_ref().unwrap();
    assert_eq!(plan_status.catalog_sources, ["operators"]);
    assert!(plan_status.start_time.is_some());
    let kinds = plan.step_kinds();
    assert_eq!(
        kinds[..2],
        ["ClusterServiceVersion", "CustomResourceDefinition"],
        "{kinds:?}"
    );
    for step in plan.steps() {
        assert_eq!(step.resolving, "reverse-words.v0.4.0");
        assert_eq!(step.resource.source_name, "operators");
        assert_eq!(step.resource.source_namespace, s.name());
        assert!(step.resource.manifest.is_some());
        assert!(
            matches!(step.status, StepStatus::Created | StepStatus::Present),
            "{step:#?}"
        );
    }
    // What the steps made: the CSV (replaces rewritten, package recorded), the CRD, RBAC.
    let csv = s.csv("reverse-words.v0.4.0").await;
    assert!(
        csv.annotations()
            .get(ANNOTATION_PROPERTIES)
            .is_some_and(|p| p.contains("reverse-words")),
        "{:#?}",
        csv.metadata
    );
    wait_crd_established(s.ns.client(), "reversewordsapps.apps.linuxera.org").await;
    // `kubectl get` shows upstream's columns.
    let table = kubectl(&["get", "sub,installplan", "-n", s.name()], None)
        .ok()
        .stdout();
    assert!(
        table.contains("PACKAGE") && table.contains("SOURCE") && table.contains("CHANNEL"),
        "{table}"
    );
    assert!(
        table.contains("reverse-words.v0.4.0") && table.contains("Automatic"),
        "{table}"
    );

    // Steady state: a trigger (the OperatorGroup changes) runs a round that writes nothing.
    let writes = s
        .olm
        .metric(r#"olm_status_writes_total{controller="subscription"}"#);
    let rounds = s
        .olm
        .metric(r#"olm_reconciles_total{controller="subscription"}"#)
        .unwrap();
    kubectl(&["annotate", "og/og", "-n", s.name(), "touched=yes"], None).ok();
    eventually("a round after the trigger", WAIT, || async {
        let now = s
            .olm
            .metric(r#"olm_reconciles_total{controller="subscription"}"#)?;
        (now > rounds).then_some(())
    })
    .await;
    let plan_version = s.plan(&plan_name).await.resource_version();
    assert_eq!(
        s.subscription("reverse-words").await.resource_version(),
        sub.resource_version()
    );
    assert_eq!(plan_version, plan.resource_version());
    assert_eq!(
        s.olm
            .metric(r#"olm_status_writes_total{controller="subscription"}"#),
        writes
    );
    assert_eq!(s.plans().await.len(), 1);
}

#[tokio::test]
async fn opm_serve_catalogs_install_too() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "sub-opm").await;
    let port = free_port();
    let _server = opm_serve(&our_catalog(), port);
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply(&catalog_source_yaml(
        &ns.name,
        "operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&ns.name, "operators", "READY");
    apply(&format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {0}\nspec:\n  targetNamespaces: [{0}]\n",
        ns.name
    ));
    apply(&subscription_yaml(
        &ns.name,
        "reverse-words",
        "reverse-words",
        "operators",
        "  channel: stable\n",
    ));
    eventually("reverse-words installed from opm serve", WAIT, || async {
        let sub = ns.get_opt::<Subscription>("reverse-words").await?;
        (sub.installed_csv() == "reverse-words.v0.4.0").then_some(())
    })
    .await;
    // The Subscription names its CSV once the plan created it; the plan's last steps may
    // still be going then.
    eventually("its one InstallPlan Complete", WAIT, || async {
        let plans = ns.install_plans().await;
        (plans.len() == 1 && plans[0].phase() == InstallPlanPhase::Complete).then_some(())
    })
    .await;
}

#[tokio::test]
async fn all_namespaces_operator_from_the_global_catalog_namespace() {
    install_crds();
    // It installs at's CRD from the catalog these tests use (see `operator_crds_lock`).
    let _crds = operator_crds_lock();
    let client = client().await;
    let global = TestNamespace::create(&client, "sub-global-catalogs").await;
    let ns = TestNamespace::create(&client, "sub-global").await;
    let port = free_port();
    let _server = olm_serve(&our_catalog(), port);
    // One process watching both namespaces. Copies are off: an AllNamespaces operator would
    // otherwise be copied into every namespace of the shared test cluster.
    let _olm = OlmRun::start(
        &format!("{},{}", global.name, ns.name),
        &[
            "--leader-elect=false",
            "--global-catalog-namespace",
            &global.name,
            "--disable-copied-csvs",
        ],
    );
    apply(&catalog_source_yaml(
        &global.name,
        "global-operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&global.name, "global-operators", "READY");
    apply(&format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: global\n  namespace: {}\n",
        ns.name
    ));
    let mut sub = subscription_yaml(
        &ns.name,
        "at",
        "at",
        "global-operators",
        "  channel: stable\n",
    );
    sub = sub.replace(
        &format!("sourceNamespace: {}", ns.name),
        &format!("sourceNamespace: {}", global.name),
    );
    apply(&sub);
    // Whatever the head of `stable` is: the test is about where it comes from.
    let installed = eventually("at installed for all namespaces", WAIT, || async {
        let sub = ns.get_opt::<Subscription>("at").await?;
        let name = Some(sub.installed_csv()).filter(|name| !name.is_empty())?;
        let csv = ns.get_opt::<ClusterServiceVersion>(name).await?;
        (csv.phase() == CsvPhase::Succeeded && sub.state() == SubscriptionState::AtLatestKnown)
            .then(|| name.to_string())
    })
    .await;
    assert!(installed.starts_with("at.v"), "{installed}");
    let group: OperatorGroup = ns.get("global").await;
    assert_eq!(group.status.unwrap().namespaces, [""]);
    let plans = ns.install_plans().await;
    assert_eq!(
        plans[0].status.as_ref().unwrap().catalog_sources,
        ["global-operators"]
    );
    // The CSV's namespaced permissions became cluster-wide: its account may act on `At`s in
    // a namespace that is neither the operator's nor the catalog's.
    let sa = format!("system:serviceaccount:{}:at-controller-manager", ns.name);
    let can = |namespace: &str| {
        kubectl(
            &[
                "auth",
                "can-i",
                "list",
                "ats.cnat.d2iq.com",
                "-n",
                namespace,
                "--as",
                &sa,
            ],
            None,
        )
        .stdout()
        .trim()
            == "yes"
    };
    assert!(can("default") && can(&global.name) && can(&ns.name));
    let refused = kubectl(&["auth", "can-i", "delete", "nodes", "--as", &sa], None).stdout();
    assert_eq!(refused.trim(), "no");
}

#[tokio::test]
async fn concurrent_subscriptions_get_one_plan_each() {
    let s = Setup::new("sub-many", &our_catalog(), &[]).await;
    s.operator_group("");
    s.lock_crds_for("at");
    let yaml: String = ["reverse-words", "at", "ptemplate"]
        .iter()
        .map(|p| subscription_yaml(s.name(), p, p, "operators", "") + "---\n")
        .collect();
    apply(&yaml);
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    s.installed("at", "at.v0.2.0").await;
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    let plans = s.plans().await;
    assert_eq!(
        plans.len(),
        3,
        "{:#?}",
        plans
            .iter()
            .map(|p| (&p.spec.cluster_service_version_names, p.spec.generation))
            .collect::<Vec<_>>()
    );
    let generations: Vec<Option<i32>> = plans.iter().map(|p| p.spec.generation).collect();
    assert_eq!(generations, [Some(1), Some(2), Some(3)]);
}

#[tokio::test]
async fn steps_run_as_the_operator_groups_service_account() {
    let s = Setup::new("sub-scoped", &our_catalog(), &[]).await;
    apply(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: installer\n  namespace: {}\n",
        s.name()
    ));
    s.operator_group("  serviceAccountName: installer\n");
    s.subscribe("reverse-words", "reverse-words", "");
    // Without permissions the plan keeps retrying (Forbidden never fails it) and says why,
    // in upstream's words: the account cannot create the CSV (even though it may not read).
    let plan = eventually("a plan that is forbidden", WAIT, || async {
        s.plans().await.into_iter().find(|p| {
            let message = p.message();
            message.contains(r#"cannot create resource "clusterserviceversions" in API group "operators.coreos.com" in the namespace"#)
                && message.contains("installer")
        })
    })
    .await;
    assert_eq!(plan.phase(), InstallPlanPhase::Installing);
    let steps = plan.steps();
    assert!(
        steps.iter().all(|step| step.status == StepStatus::Unknown),
        "{steps:?}"
    );
    // Granted everything in the namespace, it completes.
    apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: installer\n  namespace: {0}\nrules:\n- apiGroups: [\"*\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: installer\n  namespace: {0}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: installer\nsubjects:\n- kind: ServiceAccount\n  name: installer\n  namespace: {0}\n",
        s.name()
    ));
    s.plan_phase(&plan.name_any(), InstallPlanPhase::Complete)
        .await;
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
}

#[tokio::test]
async fn installs_work_under_only_the_rbac_in_deploy() {
    install_crds();
    for file in ["deploy/namespace.yaml", "deploy/rbac.yaml"] {
        let path = repo_root().join(file);
        kubectl(&["apply", "-f", path.to_str().unwrap()], None).ok();
    }
    let client = client().await;
    let ns = TestNamespace::create(&client, "sub-rbac").await;
    let kubeconfig =
        crate::deploy::kubeconfig_as("system:serviceaccount:olm:olm-operator", &ns.name);
    let port = free_port();
    let _server = olm_serve(&our_catalog(), port);
    let _olm = OlmRun::start_with(&kubeconfig, &ns.name, &["--leader-elect=false"]);
    apply(&catalog_source_yaml(
        &ns.name,
        "operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&ns.name, "operators", "READY");
    apply(&format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {0}\nspec:\n  targetNamespaces: [{0}]\n",
        ns.name
    ));
    apply(&subscription_yaml(
        &ns.name,
        "ptemplate",
        "ptemplate",
        "operators",
        "",
    ));
    eventually(
        "ptemplate installed under deploy/rbac.yaml",
        WAIT,
        || async {
            let sub = ns.get_opt::<Subscription>("ptemplate").await?;
            let plans = ns.install_plans().await;
            (sub.installed_csv() == "ptemplate.v0.2.0"
                && plans.first()?.phase() == InstallPlanPhase::Complete)
                .then_some(())
        },
    )
    .await;
}

/// The Operator API as kubectl-operator uses it: one `<package>.<namespace>` Operator per
/// install listing the labelled components; after an uninstall as `kubectl operator
/// uninstall -X` performs it (every component deleted, then the Operator), the Operator
/// stays gone.
#[tokio::test]
async fn each_install_has_an_operator_listing_its_components() {
    let s = Setup::new("operator-api", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let name = format!("reverse-words.{}", s.name());
    let label = format!("operators.coreos.com/{name}");
    let operators = Api::<Operator>::all(s.ns.client().clone());
    let components = |operator: &Operator| -> Components {
        let status = operator.status.as_ref();
        status
            .and_then(|s| s.components.clone())
            .unwrap_or_default()
    };
    let operator = eventually("the Operator lists its components", WAIT, || async {
        let operator = operators.get_opt(&name).await.unwrap()?;
        let refs = components(&operator).refs;
        let kinds: Vec<&str> = refs.iter().filter_map(|r| r.kind.as_deref()).collect();
        let all_listed = [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "Deployment",
            "InstallPlan",
            "ServiceAccount",
            "Subscription",
        ]
        .iter()
        .all(|k| kinds.contains(k));
        // And the CSV as it is now, Succeeded (the status follows its components).
        let csv_listed_succeeded = refs.iter().any(|r| {
            r.kind.as_deref() == Some("ClusterServiceVersion")
                && r.conditions.first().is_some_and(|c| c.type_ == "Succeeded")
        });
        // A CRD with its own conditions, as upstream copies them.
        let crd_established = refs.iter().any(|r| {
            r.kind.as_deref() == Some("CustomResourceDefinition")
                && r.conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
        });
        (all_listed && csv_listed_succeeded && crd_established).then_some(operator)
    })
    .await;
    let listed = components(&operator);
    let selector = listed.label_selector.unwrap();
    assert_eq!(selector.match_expressions.unwrap()[0].key, label);
    let csv_ref = listed
        .refs
        .iter()
        .find(|r| r.kind.as_deref() == Some("ClusterServiceVersion"))
        .unwrap();
    assert_eq!(csv_ref.conditions[0].type_, "Succeeded", "{csv_ref:#?}");
    let listed = kubectl(&["get", "operators", "-o", "name"], None)
        .ok()
        .stdout();
    assert!(
        listed.contains(&format!("operator.operators.coreos.com/{name}")),
        "{listed}"
    );

    // Uninstall as kubectl-operator does: the Subscription first (so nothing plans again),
    // then every namespaced component listed (the shared CRD loses only this label, other
    // tests use it), until the Operator lists nothing.
    kubectl(
        &["delete", "subscription", "reverse-words", "-n", s.name()],
        None,
    )
    .ok();
    eventually("the Operator lists nothing", WAIT, || async {
        let refs = components(&operators.get(&name).await.unwrap()).refs;
        for r in &refs {
            let kind = r.kind.as_deref().unwrap_or_default();
            let object = r.name.as_deref().unwrap_or_default();
            if kind == "CustomResourceDefinition" {
                kubectl(&["label", "crd", object, &format!("{label}-")], None);
            } else if let Some(namespace) = &r.namespace {
                kubectl(
                    &[
                        "delete",
                        kind,
                        object,
                        "-n",
                        namespace,
                        "--ignore-not-found",
                        "--wait=false",
                    ],
                    None,
                );
            }
        }
        refs.is_empty().then_some(())
    })
    .await;
    kubectl(&["delete", "operator", &name], None).ok();
    // Another install in the namespace: its Operator appears, the deleted one does not.
    s.subscribe("at", "at", "  channel: stable\n");
    eventually("the at Operator exists", WAIT, || async {
        let at = operators.get_opt(&format!("at.{}", s.name())).await;
        at.unwrap().map(drop)
    })
    .await;
    assert!(
        operators.get_opt(&name).await.unwrap().is_none(),
        "{name} came back"
    );
}
