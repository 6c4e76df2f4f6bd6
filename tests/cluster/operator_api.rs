//! The Operator API (`operators.coreos.com/v1` Operator) on objects made by hand with
//! kubectl, as upstream's own e2e spec "Operator API" drives it: an Operator applied without
//! `spec`; upstream's component kinds that no install of ours labels (Namespaces,
//! APIServices, OperatorConditions) listed with their conditions, and leaving the list when
//! they go; and an Operator made again while labelled components remain, but not once they
//! are gone. Each test runs `olm run` scoped to its namespace, whose Operators are those
//! named `<something>.<namespace>`. (Installs and their Operators: `subscriptions::install`;
//! kubectl-operator's uninstall: `kubectl_operator`.)

use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use olm::api::{Operator, RichReference};
use serde_json::Value;

use super::harness::{TestNamespace, client, eventually, install_crds, kubectl};
use super::processes::OlmRun;

const WAIT: Duration = Duration::from_secs(60);

/// Cluster-scoped objects a test made, deleted however it ends (`kind/name` each).
struct ClusterScoped(Vec<String>);

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        for object in &self.0 {
            let _ = kubectl(
                &["delete", object, "--ignore-not-found", "--wait=false"],
                None,
            );
        }
    }
}

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

fn operator_yaml(name: &str) -> String {
    format!("apiVersion: operators.coreos.com/v1\nkind: Operator\nmetadata:\n  name: {name}\n")
}

fn refs(operator: &Operator) -> Vec<RichReference> {
    let components = operator.status.as_ref().and_then(|s| s.components.as_ref());
    components.map(|c| c.refs.clone()).unwrap_or_default()
}

fn find<'a>(refs: &'a [RichReference], kind: &str, name: &str) -> Option<&'a RichReference> {
    refs.iter()
        .find(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
}

/// Waits until the Operator `name` exists and `check` holds of its component references.
async fn listing(
    operators: &Api<Operator>,
    name: &str,
    what: &str,
    check: impl Fn(&[RichReference]) -> bool,
) -> Operator {
    eventually(&format!("Operator {name}: {what}"), WAIT, || async {
        let operator = operators.get_opt(name).await.unwrap()?;
        check(&refs(&operator)).then_some(operator)
    })
    .await
}

#[tokio::test]
async fn an_operator_applied_without_spec_is_accepted_and_gets_its_status() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "op-nospec").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let name = format!("nospec.{}", ns.name);
    let _cleanup = ClusterScoped(vec![format!("operator/{name}")]);

    // No `spec:` at all, as upstream's CRD allows.
    let applied = kubectl(&["apply", "-f", "-"], Some(&operator_yaml(&name)));
    assert!(applied.success(), "refused: {}", applied.stderr());

    // Read typed (the controller reads it the same way), and given its status.
    let operators = Api::<Operator>::all(client.clone());
    let label = format!("operators.coreos.com/{name}");
    eventually("the Operator's label selector", WAIT, || async {
        let operator = operators.get_opt(&name).await.unwrap()?;
        let components = operator.status?.components?;
        let selector = components.label_selector?;
        let requirement = selector.match_expressions?.first()?.clone();
        (requirement.key == label && requirement.operator == "Exists").then_some(())
    })
    .await;
    // Stored as applied: no `spec` defaulted in by the schema.
    let stored: Value = serde_json::from_str(
        &kubectl(&["get", "operator", &name, "-o", "json"], None)
            .ok()
            .stdout(),
    )
    .unwrap();
    assert!(stored.get("spec").is_none(), "{stored:#}");
}

#[tokio::test]
async fn labelled_namespaces_api_services_and_operator_conditions_are_components() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "op-kinds").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let name = format!("kinds.{}", ns.name);
    let label = format!("operators.coreos.com/{name}");
    // A local APIService (no Service behind it) for a group nobody serves: Available at
    // once, and invisible to discovery, so no other test's discovery stalls on it.
    let group = format!("{}.olm-rs.test", ns.name);
    let api_service = format!("v1.{group}");
    let _cleanup = ClusterScoped(vec![
        format!("apiservice/{api_service}"),
        format!("operator/{name}"),
    ]);
    apply(&operator_yaml(&name));
    kubectl(
        &["label", "namespace", &ns.name, &format!("{label}=")],
        None,
    )
    .ok();
    apply(&format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {api_service}\n  labels:\n    {label}: \"\"\nspec:\n  group: {group}\n  version: v1\n  groupPriorityMinimum: 10\n  versionPriority: 10\n"
    ));
    // OLM copies spec.conditions into status.conditions, which the Operator lists.
    apply(&format!(
        "apiVersion: operators.coreos.com/v2\nkind: OperatorCondition\nmetadata:\n  name: kinds\n  namespace: {}\n  labels:\n    {label}: \"\"\nspec:\n  conditions:\n  - type: Upgradeable\n    status: \"False\"\n    reason: HeldForTheTest\n    message: not yet\n    lastTransitionTime: \"2026-11-28T10:00:00Z\"\n",
        ns.name
    ));

    let operators = Api::<Operator>::all(client.clone());
    let operator = listing(
        &operators,
        &name,
        "all three listed with conditions",
        |refs| {
            let available = find(refs, "APIService", &api_service).is_some_and(|r| {
                r.conditions
                    .iter()
                    .any(|c| c.type_ == "Available" && c.status == "True")
            });
            let held = find(refs, "OperatorCondition", "kinds").is_some_and(|r| {
                r.conditions
                    .iter()
                    .any(|c| c.type_ == "Upgradeable" && c.status == "False")
            });
            find(refs, "Namespace", &ns.name).is_some() && available && held
        },
    )
    .await;
    let refs = refs(&operator);
    let namespace = find(&refs, "Namespace", &ns.name).unwrap();
    assert_eq!(namespace.api_version.as_deref(), Some("v1"));
    assert_eq!(namespace.namespace, None, "cluster-scoped: {namespace:?}");
    let registered = find(&refs, "APIService", &api_service).unwrap();
    assert_eq!(
        registered.api_version.as_deref(),
        Some("apiregistration.k8s.io/v1")
    );
    assert_eq!(registered.namespace, None);
    assert_eq!(registered.conditions[0].reason.as_deref(), Some("Local"));
    let condition = find(&refs, "OperatorCondition", "kinds").unwrap();
    assert_eq!(
        condition.api_version.as_deref(),
        Some("operators.coreos.com/v2")
    );
    assert_eq!(condition.namespace.as_deref(), Some(ns.name.as_str()));
    let upgradeable = &condition.conditions[0];
    assert_eq!(upgradeable.reason.as_deref(), Some("HeldForTheTest"));
    assert_eq!(upgradeable.message.as_deref(), Some("not yet"));
    assert!(
        upgradeable.last_transition_time.is_some(),
        "{upgradeable:?}"
    );

    // Each leaves the list as it goes: deleted, or its label removed.
    kubectl(&["delete", "apiservice", &api_service], None).ok();
    listing(&operators, &name, "the APIService gone", |refs| {
        find(refs, "APIService", &api_service).is_none()
            && find(refs, "Namespace", &ns.name).is_some()
    })
    .await;
    kubectl(
        &["label", "namespace", &ns.name, &format!("{label}-")],
        None,
    )
    .ok();
    kubectl(
        &["delete", "operatorcondition", "kinds", "-n", &ns.name],
        None,
    )
    .ok();
    listing(
        &operators,
        &name,
        "nothing listed",
        <[RichReference]>::is_empty,
    )
    .await;
}

#[tokio::test]
async fn an_operator_is_made_again_while_labelled_components_remain() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "op-again").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let name = format!("again.{}", ns.name);
    let anchor = format!("anchor.{}", ns.name);
    let _cleanup = ClusterScoped(vec![
        format!("operator/{name}"),
        format!("operator/{anchor}"),
    ]);
    let config_map = |object: &str, operator: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {object}\n  namespace: {}\n  labels:\n    operators.coreos.com/{operator}: \"\"\n",
            ns.name
        )
    };
    let operators = Api::<Operator>::all(client.clone());

    // A labelled component and no Operator: upstream makes one, and so do we.
    apply(&config_map("part", &name));
    let first = listing(&operators, &name, "made, listing its ConfigMap", |refs| {
        find(refs, "ConfigMap", "part").is_some()
    })
    .await;

    // Deleted while the ConfigMap remains: made again (a new object).
    kubectl(&["delete", "operator", &name], None).ok();
    let again = listing(&operators, &name, "made again", |refs| {
        find(refs, "ConfigMap", "part").is_some()
    })
    .await;
    assert_ne!(again.uid(), first.uid());

    // Uninstalled as `kubectl operator uninstall -X` does: every component deleted, wait
    // until the Operator lists none, then the Operator.
    kubectl(&["delete", "configmap", "part", "-n", &ns.name], None).ok();
    listing(
        &operators,
        &name,
        "nothing listed",
        <[RichReference]>::is_empty,
    )
    .await;
    kubectl(&["delete", "operator", &name], None).ok();
    // A later component of another Operator is seen (its Operator made) after the
    // deletion was: had the deleted one been made again, it would be back by then.
    apply(&config_map("anchor", &anchor));
    listing(&operators, &anchor, "made for the anchor", |refs| {
        find(refs, "ConfigMap", "anchor").is_some()
    })
    .await;
    assert!(
        operators.get_opt(&name).await.unwrap().is_none(),
        "{name} came back without components"
    );
}
