//! InstallPlans written by hand as upstream's tests and tools write them (the spec, then
//! `status.plan` with inline manifests): carried out like one we planned, keeping the
//! owners their steps name, waiting for the namespace's OperatorGroup, reporting the API
//! server's warnings, recording on a CRD every CSV it came with, and installing upstream's
//! extra kinds once their APIs are served.

use k8s_openapi::api::core::v1::{ConfigMap, Event, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use olm::api::{InstallPlanPhase, StepStatus};
use serde_json::Value;

use super::{Setup, WAIT, apply, our_catalog, write_plan_as_upstream};
use crate::harness::{InstallPlanReads, crd, eventually, kubectl, wait_crd_established};

/// Upstream's tests and tools write InstallPlans themselves: the spec first (the plan is
/// left alone while it has no status), then `status.plan` with inline manifests and phase
/// Installing; the plan is carried out like one we planned.
#[tokio::test]
async fn a_plan_written_as_upstream_writes_it_is_carried_out() {
    let s = Setup::new("ip-upstream-shape", &our_catalog(), &[]).await;
    s.operator_group("");
    let csv = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "by-hand.v1.0.0"},
        "spec": {"displayName": "By hand", "install": {"strategy": "deployment", "spec": {"deployments": []}}}
    });
    let config_map = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "by-hand-settings"}, "data": {"mode": "fast"}
    });
    write_plan_as_upstream(
        s.name(),
        "by-hand",
        "by-hand.v1.0.0",
        &[
            (
                "operators.coreos.com",
                "v1alpha1",
                "ClusterServiceVersion",
                &csv,
            ),
            ("", "v1", "ConfigMap", &config_map),
        ],
    );
    let plan = s.plan_phase("by-hand", InstallPlanPhase::Complete).await;
    let statuses: Vec<StepStatus> = plan.steps().iter().map(|step| step.status).collect();
    assert_eq!(statuses, [StepStatus::Created; 2], "{plan:#?}");
    let created: ConfigMap = s.ns.get("by-hand-settings").await;
    assert_eq!(created.data.as_ref().unwrap()["mode"], "fast");
    assert_eq!(created.owner_references()[0].name, "by-hand.v1.0.0");
    assert_eq!(
        created.labels().get("olm.managed").map(String::as_str),
        Some("true")
    );
}

/// Upstream's steps carry their own ownerReferences (a CSV's by name, the UID left for the
/// executor) and may resolve no CSV at all: the executor fills the UID once the CSV exists
/// (retrying until then), keeps the owners the object already has, and updates objects
/// that exist.
#[tokio::test]
async fn upstream_steps_keep_their_own_owners() {
    let s = Setup::new("ip-owners", &our_catalog(), &[]).await;
    s.operator_group("");
    let csv_yaml = |name: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  displayName: {name}\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
            s.name()
        )
    };
    apply(&csv_yaml("csv-old"));
    apply(&csv_yaml("csv-new"));
    let old_uid = s.csv("csv-old").await.uid().unwrap();
    let new_uid = s.csv("csv-new").await.uid().unwrap();
    let csv_ref = |name: &str| {
        serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
                           "kind": "ClusterServiceVersion", "name": name})
    };
    // A ServiceAccount owned by the old CSV moves to the new one: both stay owners.
    let mut old_owner = csv_ref("csv-old");
    old_owner["uid"] = old_uid.as_str().into();
    apply(
        &serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "moved", "namespace": s.name(), "ownerReferences": [old_owner]}})
        .to_string(),
    );
    let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "moved", "ownerReferences": [csv_ref("csv-new")]}});
    // A Service that exists, in a step that resolves no CSV: updated.
    apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: existing\n  namespace: {}\nspec:\n  ports: [{{port: 12345}}]\n",
        s.name()
    ));
    let service = serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "existing", "labels": {"updated": "yes"}},
        "spec": {"ports": [{"port": 12345}]}});
    write_plan_as_upstream(
        s.name(),
        "moves",
        "",
        &[
            ("", "v1", "ServiceAccount", &account),
            ("", "v1", "Service", &service),
        ],
    );
    s.plan_phase("moves", InstallPlanPhase::Complete).await;
    let moved: ServiceAccount = s.ns.get("moved").await;
    let owners: Vec<(&str, &str)> = moved
        .owner_references()
        .iter()
        .map(|o| (o.name.as_str(), o.uid.as_str()))
        .collect();
    assert_eq!(
        owners,
        [("csv-old", old_uid.as_str()), ("csv-new", new_uid.as_str())]
    );
    let existing: Service = s.ns.get("existing").await;
    assert_eq!(
        existing.labels().get("updated").map(String::as_str),
        Some("yes")
    );

    // An owner that does not exist yet holds the step (the plan says which CSV) until it does.
    let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "owned-later", "ownerReferences": [csv_ref("csv-later")]}});
    write_plan_as_upstream(
        s.name(),
        "waits",
        "",
        &[("", "v1", "ConfigMap", &config_map)],
    );
    eventually("the plan waiting for its owner", WAIT, || async {
        let plan = s.plan("waits").await;
        plan.message().contains("csv-later").then_some(())
    })
    .await;
    apply(&csv_yaml("csv-later"));
    s.plan_phase("waits", InstallPlanPhase::Complete).await;
    let owned: ConfigMap = s.ns.get("owned-later").await;
    assert_eq!(
        Some(owned.owner_references()[0].uid.clone()),
        s.csv("csv-later").await.uid()
    );
}

/// As upstream, a plan is carried out only where exactly one OperatorGroup manages the
/// namespace: until then it stays Installing with upstream's condition, cleared once the
/// group is there.
#[tokio::test]
async fn a_plan_waits_for_its_namespaces_operator_group() {
    let s = Setup::new("ip-no-group", &our_catalog(), &[]).await;
    let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "waits-for-group"}});
    write_plan_as_upstream(
        s.name(),
        "early",
        "",
        &[("", "v1", "ConfigMap", &config_map)],
    );
    let (phase, installed) = eventually("the plan saying it has no group", WAIT, || async {
        let plan = s.plan("early").await;
        let installed = plan.condition("Installed")?;
        (installed.status.as_deref() == Some("False")).then(|| (plan.phase(), installed.clone()))
    })
    .await;
    assert_eq!(phase, InstallPlanPhase::Installing);
    assert_eq!(installed.reason.as_deref(), Some("InstallCheckFailed"));
    assert_eq!(
        installed.message.as_deref(),
        Some("no operator group found that is managing this namespace")
    );
    s.operator_group("");
    let plan = s.plan_phase("early", InstallPlanPhase::Complete).await;
    let installed = plan.condition("Installed").unwrap();
    assert_eq!(installed.status.as_deref(), Some("True"), "{plan:#?}");
    s.ns.get::<ConfigMap>("waits-for-group").await;
}

/// As upstream, what the API server warns of while a step is applied (here a deprecated
/// CRD version) becomes a Warning Event `AppliedWithWarnings` on that step of the plan.
#[tokio::test]
async fn warnings_of_a_step_become_an_event_on_the_step() {
    let s = Setup::new("ip-warnings", &our_catalog(), &[]).await;
    s.operator_group("");
    // A kind a plan may create (upstream's list), served here by a CRD of this test's own
    // whose one version is deprecated: the API server warns on every write.
    let group = "console.openshift.io".to_string();
    let crd_name = format!("consolequickstarts.{group}");
    apply(
        &serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name},
            "spec": {"group": group, "scope": "Cluster",
                     "names": {"plural": "consolequickstarts", "singular": "consolequickstart",
                               "kind": "ConsoleQuickStart", "listKind": "ConsoleQuickStartList"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "deprecated": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        })
        .to_string(),
    );
    wait_crd_established(s.ns.client(), &crd_name).await;
    let name = format!("old-{}", s.name());
    let object = serde_json::json!({"apiVersion": format!("{group}/v1"), "kind": "ConsoleQuickStart",
        "metadata": {"name": name}});
    write_plan_as_upstream(
        s.name(),
        "warned",
        "",
        &[(&group, "v1", "ConsoleQuickStart", &object)],
    );
    s.plan_phase("warned", InstallPlanPhase::Complete).await;
    let event = eventually("the AppliedWithWarnings Event", WAIT, || async {
        let events: Vec<Event> = s.ns.list().await;
        let mut events = events.into_iter();
        events.find(|e| e.reason.as_deref() == Some("AppliedWithWarnings"))
    })
    .await;
    kubectl(&["delete", "crd", &crd_name], None).ok();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let involved = &event.involved_object;
    assert_eq!(involved.kind.as_deref(), Some("InstallPlan"));
    assert_eq!(involved.name.as_deref(), Some("warned"));
    assert_eq!(involved.field_path.as_deref(), Some("status.plan[0]"));
    assert_eq!(
        event.message.unwrap(),
        format!(
            "1 warning(s) generated during operator installation (ConsoleQuickStart \"{name}\"): {group}/v1 ConsoleQuickStart is deprecated"
        )
    );
}

/// As upstream, a CRD records each CSV it was installed alongside (one
/// `operatorframework.io/installed-alongside-*` annotation per CSV, value `namespace/name`);
/// a second plan with the same CRD adds its CSV and keeps the first one's. The second plan
/// writes only that annotation (a merge patch, an `Update` of OLM's field manager; the spec
/// is not applied again), and a third plan with nothing to add writes nothing.
#[tokio::test]
async fn a_crd_records_every_csv_it_was_installed_alongside() {
    let s = Setup::new("ip-alongside", &our_catalog(), &[]).await;
    s.operator_group("");
    let group = format!("{}.alongside.example.com", s.name());
    let crd_name = format!("tests.{group}");
    let manifest = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "tests", "singular": "test", "kind": "Test", "listKind": "TestList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    let alongside = |crd: &CustomResourceDefinition| -> Vec<String> {
        let mut values: Vec<String> = crd
            .annotations()
            .iter()
            .filter(|(k, _)| k.starts_with("operatorframework.io/installed-alongside-"))
            .map(|(_, v)| v.clone())
            .collect();
        values.sort();
        values
    };
    let crd_step = [(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        &manifest,
    )];
    for (plan, csv) in [("plan-one", "csv-one"), ("plan-two", "csv-two")] {
        apply(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {csv}\n  namespace: {}\nspec:\n  displayName: {csv}\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
            s.name()
        ));
        write_plan_as_upstream(s.name(), plan, csv, &crd_step);
        s.plan_phase(plan, InstallPlanPhase::Complete).await;
    }
    let written = crd(s.ns.client(), &crd_name).await.unwrap();
    write_plan_as_upstream(s.name(), "plan-three", "csv-one", &crd_step);
    s.plan_phase("plan-three", InstallPlanPhase::Complete).await;
    let after_third = crd(s.ns.client(), &crd_name).await.unwrap();
    kubectl(&["delete", "crd", &crd_name], None).ok();
    let managers: Vec<(&str, &str)> = written
        .managed_fields()
        .iter()
        .map(|m| {
            let manager = m.manager.as_deref().unwrap_or_default();
            (manager, m.operation.as_deref().unwrap_or_default())
        })
        .collect();
    assert!(
        managers.contains(&("olm-installplan", "Update")),
        "{managers:?}"
    );
    assert_eq!(
        after_third.resource_version(),
        written.resource_version(),
        "a plan with nothing to add changed the CRD"
    );
    assert_eq!(
        alongside(&written),
        [
            format!("{}/csv-one", s.name()),
            format!("{}/csv-two", s.name())
        ],
        "{:#?}",
        written.metadata
    );
}

/// Bundle objects of upstream's extra kinds (monitoring, disruption budgets) install once
/// their API is served, each step Created.
#[tokio::test]
async fn monitoring_and_disruption_budget_steps_install_when_their_apis_exist() {
    let s = Setup::new("ip-kinds", &our_catalog(), &[]).await;
    s.operator_group("");
    // As on most real clusters: the ServiceMonitor API (a minimal CRD of its group/kind).
    apply(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: servicemonitors.monitoring.coreos.com\nspec:\n  group: monitoring.coreos.com\n  scope: Namespaced\n  names: {kind: ServiceMonitor, plural: servicemonitors, listKind: ServiceMonitorList, singular: servicemonitor}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
    );
    wait_crd_established(s.ns.client(), "servicemonitors.monitoring.coreos.com").await;
    apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: InstallPlan\nmetadata:\n  name: kinds\n  namespace: {}\nspec:\n  approval: Automatic\n  approved: true\n  clusterServiceVersionNames: [monitored.v1]\n",
        s.name()
    ));
    let monitor = serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": "metrics"},
        "spec": {"endpoints": [{"port": "https"}], "selector": {"matchLabels": {"app": "op"}}},
    });
    let budget = serde_json::json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "op"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "op"}}},
    });
    let step = |group: &str, version: &str, kind: &str, name: &str, manifest: &Value| {
        serde_json::json!({
            "resolving": "monitored.v1", "status": "Unknown",
            "resource": {"sourceName": "", "sourceNamespace": "", "group": group,
                         "version": version, "kind": kind, "name": name,
                         "manifest": manifest.to_string()}
        })
    };
    // The CSV they belong to (namespaced bundle objects are owned by it), with a field the
    // schema does not declare, as published CSVs have (rabbitmq-cluster-operator's
    // `spec.support`): pruned, not refused.
    let csv = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "monitored.v1"},
        "spec": {"displayName": "monitored", "version": "1.0.0", "support": "someone",
                 "installModes": [{"type": "AllNamespaces", "supported": true}],
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}},
    });
    let status = serde_json::json!({"status": {
        "phase": "Installing",
        "catalogSources": [],
        "plan": [
            step("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "monitored.v1", &csv),
            step("monitoring.coreos.com", "v1", "ServiceMonitor", "metrics", &monitor),
            step("policy", "v1", "PodDisruptionBudget", "op", &budget),
        ]
    }});
    kubectl(
        &[
            "patch",
            "installplan",
            "kinds",
            "-n",
            s.name(),
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    )
    .ok();
    let plan = s.plan_phase("kinds", InstallPlanPhase::Complete).await;
    let statuses: Vec<StepStatus> = plan.steps().iter().map(|step| step.status).collect();
    assert_eq!(statuses, [StepStatus::Created; 3], "{plan:#?}");
    // No type of ours for a ServiceMonitor: read as JSON.
    assert_eq!(
        s.get("servicemonitor/metrics")["spec"]["endpoints"][0]["port"],
        "https"
    );
    let budget: PodDisruptionBudget = s.ns.get("op").await;
    assert_eq!(
        budget.spec.unwrap().min_available,
        Some(IntOrString::Int(1))
    );
}
