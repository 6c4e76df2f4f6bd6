//! The CSV lifecycle on the real control plane: bundles from `bundles/` applied by hand (as
//! upstream's csv e2e tests do) into a namespace with an OperatorGroup; kwok makes the
//! Deployments Available. RBAC is proven with `kubectl auth can-i` and with the operator's
//! own token, not assumed.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::catalog_sources::event_reasons;
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::OlmRun;

pub const WAIT: Duration = Duration::from_secs(90);

pub fn bundle_file(package: &str, version: &str, suffix: &str) -> PathBuf {
    let dir = repo_root().join(format!("bundles/{package}/{version}/manifests"));
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// The bundle's CSV as JSON, for tests that change it before applying.
pub fn csv_json(package: &str, version: &str) -> Value {
    let text =
        std::fs::read_to_string(bundle_file(package, version, ".clusterserviceversion.yaml"))
            .unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// Applies the bundle's CRDs (server-side: tests share them) and waits for them.
pub fn apply_crds(package: &str, version: &str) {
    let dir = repo_root().join(format!("bundles/{package}/{version}/manifests"));
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .to_string_lossy()
            .ends_with(".clusterserviceversion.yaml")
        {
            continue;
        }
        kubectl(
            &[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                path.to_str().unwrap(),
            ],
            None,
        )
        .ok();
    }
}

/// Applies `value` in `namespace`. A CSV is applied as an admin applies one by hand under
/// upstream's permission model: its accounts and RBAC first, the objects its InstallPlan
/// would have made ([`grant_csv_rbac`]); [`apply_csv_alone`] leaves them out.
pub fn apply_json(namespace: &str, value: &Value) {
    if value["kind"] == "ClusterServiceVersion" {
        grant_csv_rbac(namespace, value);
    }
    apply_csv_alone(namespace, value);
}

/// Applies `value` as it is (a CSV without its RBAC: it waits for its requirements).
pub fn apply_csv_alone(namespace: &str, value: &Value) {
    kubectl(
        &["apply", "-n", namespace, "-f", "-"],
        Some(&serde_json::to_string(value).unwrap()),
    )
    .ok();
}

/// The ServiceAccounts, Roles, ClusterRoles and bindings a plan makes for `csv` in
/// `namespace`, applied as the admin.
pub fn grant_csv_rbac(namespace: &str, csv: &Value) {
    let mut csv = csv.clone();
    csv["metadata"]["namespace"] = Value::from(namespace);
    let Ok(csv) = serde_json::from_value::<olm::api::ClusterServiceVersion>(csv) else {
        return; // A broken CSV (a test of bad input) has no RBAC to grant.
    };
    let items = olm::controllers::plan::rbac::objects(&csv, namespace);
    if items.is_empty() {
        return;
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    kubectl(
        &["apply", "--server-side", "-f", "-"],
        Some(&list.to_string()),
    )
    .ok();
}

pub fn apply_csv(namespace: &str, package: &str, version: &str) {
    apply_json(namespace, &csv_json(package, version));
}

/// An admin-written plan in `namespace` (its status written with `steps`, Installing), as a
/// client that writes upstream's plan shape does; it names the CSVs its steps resolve.
pub fn hand_written_plan(namespace: &str, name: &str, steps: &[Value]) {
    let mut csvs: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["resolving"].as_str())
        .filter(|csv| !csv.is_empty())
        .collect();
    csvs.dedup();
    let plan = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"approval": "Automatic", "approved": true, "clusterServiceVersionNames": csvs},
    });
    kubectl(&["apply", "-f", "-"], Some(&plan.to_string())).ok();
    let status =
        serde_json::json!({"status": {"phase": "Installing", "catalogSources": [], "plan": steps}});
    kubectl(
        &[
            "patch",
            "installplan",
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    )
    .ok();
}

/// A step creating `manifest`, of the CSV `resolving` (empty: of none).
pub fn step_of(resolving: &str, manifest: &Value) -> Value {
    serde_json::json!({"resolving": resolving, "status": "Unknown", "resource": {
        "group": "", "version": "v1", "kind": manifest["kind"], "name": manifest["metadata"]["name"],
        "sourceName": "", "sourceNamespace": "", "manifest": manifest.to_string()}})
}

/// A step labelled `kind` and `name` whose manifest is `manifest` (which may say otherwise).
pub fn step(kind: &str, name: &str, manifest: &Value) -> Value {
    let mut step = step_of("", manifest);
    step["resource"]["kind"] = Value::from(kind);
    step["resource"]["name"] = Value::from(name);
    step
}

pub async fn plan_phase(namespace: &str, name: &str, phase: &str) -> Value {
    eventually(&format!("InstallPlan {name} {phase}"), WAIT, || async {
        let plan = get(namespace, &format!("installplan/{name}"))?;
        (plan["status"]["phase"] == phase).then_some(plan)
    })
    .await
}

pub fn operator_group(namespace: &str, name: &str, targets: Option<&[&str]>) {
    let mut og = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1",
        "kind": "OperatorGroup",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {},
    });
    if let Some(targets) = targets {
        og["spec"]["targetNamespaces"] = serde_json::json!(targets);
    }
    apply_json(namespace, &og);
}

pub fn get(namespace: &str, resource: &str) -> Option<Value> {
    let out = kubectl(&["get", resource, "-n", namespace, "-o", "json"], None);
    out.success()
        .then(|| serde_json::from_str(&out.stdout()).unwrap())
}

/// Waits until the CSV has `phase` (and `reason`, when given); returns the CSV.
pub async fn wait_for_phase(
    namespace: &str,
    name: &str,
    phase: &str,
    reason: Option<&str>,
) -> Value {
    eventually(
        &format!("csv {name} in {phase} {reason:?}"),
        WAIT,
        || async {
            let csv = get(namespace, &format!("csv/{name}"))?;
            let status = &csv["status"];
            (status["phase"] == phase && reason.is_none_or(|r| status["reason"] == r))
                .then_some(csv)
        },
    )
    .await
}

/// The order of phases the CSV went through: the history without consecutive repeats (a
/// reason change inside a phase, e.g. Installing InstallSucceeded → InstallWaiting under
/// load, is a history entry too, as upstream records it). A regression still shows.
pub fn phase_order(csv: &Value) -> Vec<String> {
    let mut order = phases(csv);
    order.dedup();
    order
}

pub fn phases(csv: &Value) -> Vec<String> {
    csv["status"]["conditions"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| c["phase"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn can_i(verb: &str, resource: &str, namespace: &str, sa: &str, sa_namespace: &str) -> bool {
    let out = kubectl(
        &[
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            namespace,
            &format!("--as=system:serviceaccount:{sa_namespace}:{sa}"),
        ],
        None,
    );
    out.stdout().trim() == "yes"
}

/// Every verb of every rule the CSV asks in `permissions`, as `(verb, resource.group)`.
fn asked(csv: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for permission in csv["spec"]["install"]["spec"]["permissions"]
        .as_array()
        .unwrap()
    {
        for rule in permission["rules"].as_array().unwrap() {
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        let resource = resource.as_str().unwrap();
                        let group = group.as_str().unwrap();
                        let target = if group.is_empty() {
                            resource.to_string()
                        } else {
                            format!("{resource}.{group}")
                        };
                        out.push((verb.as_str().unwrap().to_string(), target));
                    }
                }
            }
        }
    }
    out
}

fn assert_rbac(csv: &Value, sa: &str, operator_ns: &str, granted_in: &[&str], refused_in: &str) {
    let asked = asked(csv);
    assert!(!asked.is_empty());
    for ns in granted_in {
        for (verb, resource) in &asked {
            assert!(
                can_i(verb, resource, ns, sa, operator_ns),
                "{sa} cannot {verb} {resource} in {ns}"
            );
        }
    }
    for (verb, resource) in asked.iter().filter(|(_, r)| r.contains("reversewordsapps")) {
        assert!(
            !can_i(verb, resource, refused_in, sa, operator_ns),
            "{sa} can {verb} {resource} in {refused_in}, outside its group"
        );
    }
    // A rule it did not ask for.
    assert!(!can_i("delete", "secrets", granted_in[0], sa, operator_ns));
}

/// A client acting as the ServiceAccount, from a TokenRequest (`kubectl create token`).
async fn client_as(sa: &str, namespace: &str) -> kube::Client {
    let token = kubectl(
        &["create", "token", sa, "-n", namespace, "--duration=10m"],
        None,
    )
    .ok();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(super::harness::kubeconfig_path()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    // Only the token: no client certificate of the admin.
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.stdout().trim().to_string().into()),
        ..Default::default()
    };
    kube::Client::try_from(config).unwrap()
}

fn reverse_words_api(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps.linuxera.org", "v1alpha1", "ReverseWordsApp"),
        "reversewordsapps",
    );
    Api::namespaced_with(client, namespace, &resource)
}

#[tokio::test]
async fn reverse_words_installs_in_own_namespace_with_exactly_its_rbac() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-own").await;
    let outside = TestNamespace::create(&client, "csv-own-out").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    // A Subscription naming the package: its config reaches the Deployment.
    apply_json(
        &ns.name,
        &serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription",
            "metadata": { "name": "reverse-words", "namespace": ns.name },
            "spec": {
                "name": "reverse-words", "source": "none", "sourceNamespace": ns.name,
                "config": { "env": [{ "name": "FROM_SUBSCRIPTION", "value": "yes" }] }
            },
        }),
    );
    apply_csv(&ns.name, "reverse-words", "0.3.0");
    let csv = wait_for_phase(
        &ns.name,
        "reverse-words.v0.3.0",
        "Succeeded",
        Some("InstallSucceeded"),
    )
    .await;
    assert_eq!(
        phase_order(&csv),
        ["Pending", "InstallReady", "Installing", "Succeeded"],
        "{:#}",
        csv["status"]
    );
    let listed = kubectl(&["get", "csv", "-n", &ns.name], None).ok().stdout();
    assert!(
        listed.contains("reverse-words.v0.3.0") && listed.contains("Succeeded"),
        "{listed}"
    );
    for reason in [
        "RequirementsUnknown",
        "AllRequirementsMet",
        "InstallSucceeded",
    ] {
        assert!(
            event_reasons(&ns.name, "reverse-words.v0.3.0")
                .iter()
                .any(|r| r == reason),
            "no {reason} event"
        );
    }
    // Annotations from the group, on the CSV and in the pod template.
    let annotations = &csv["metadata"]["annotations"];
    assert_eq!(annotations["olm.operatorGroup"], "og");
    assert_eq!(annotations["olm.targetNamespaces"], ns.name.as_str());
    let og = get(&ns.name, "operatorgroup/og").unwrap();
    assert_eq!(og["status"]["namespaces"], serde_json::json!([ns.name]));
    assert_eq!(
        og["metadata"]["annotations"]["olm.providedAPIs"],
        "ReverseWordsApp.v1alpha1.apps.linuxera.org"
    );

    let deployment: Deployment = Api::namespaced(client.clone(), &ns.name)
        .get("reverse-words-controller-manager")
        .await
        .unwrap();
    let labels = deployment.metadata.labels.clone().unwrap();
    for (key, value) in [
        ("olm.managed", "true"),
        ("olm.owner", "reverse-words.v0.3.0"),
        ("olm.owner.namespace", ns.name.as_str()),
        ("olm.owner.kind", "ClusterServiceVersion"),
        ("control-plane", "reverse-words-controller-manager"),
    ] {
        assert_eq!(
            labels.get(key).map(String::as_str),
            Some(value),
            "label {key}"
        );
    }
    assert!(labels.contains_key("olm.deployment-spec-hash"));
    assert_eq!(deployment.spec.revision_history_limit, Some(1));
    let owner = &deployment.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ClusterServiceVersion", "reverse-words.v0.3.0")
    );
    let template = deployment.spec.template.clone();
    assert_eq!(
        template
            .metadata
            .unwrap()
            .annotations
            .unwrap()
            .get("olm.targetNamespaces"),
        Some(&ns.name)
    );
    let env: Vec<(String, Option<String>)> = template.spec.unwrap().containers[0]
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    assert!(
        env.contains(&(
            "OPERATOR_CONDITION_NAME".into(),
            Some("reverse-words.v0.3.0".into())
        )),
        "{env:?}"
    );
    assert!(
        env.contains(&("FROM_SUBSCRIPTION".into(), Some("yes".into()))),
        "{env:?}"
    );

    // RBAC proven: every asked rule in the namespace, nothing outside, nothing unasked.
    let sa = "reverse-words-controller-manager";
    assert_rbac(&csv, sa, &ns.name, &[&ns.name], &outside.name);
    let operator = client_as(sa, &ns.name).await;
    reverse_words_api(operator.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .expect("the operator lists its CRs in its target namespace");
    let refused = reverse_words_api(operator, &outside.name)
        .list(&ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 403),
        "{refused}"
    );
}

#[tokio::test]
async fn single_namespace_group_gets_roles_and_a_copy_in_the_target() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-single").await;
    let target = TestNamespace::create(&client, "csv-single-t").await;
    let outside = TestNamespace::create(&client, "csv-single-o").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&target.name]));
    apply_csv(&ns.name, "reverse-words", "0.3.0");
    let csv = wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    assert_rbac(
        &csv,
        "reverse-words-controller-manager",
        &ns.name,
        &[&target.name],
        &outside.name,
    );
    let copy = eventually("a copied CSV in the target", WAIT, || async {
        get(&target.name, "csv/reverse-words.v0.3.0")
    })
    .await;
    assert_eq!(
        copy["metadata"]["labels"]["olm.copiedFrom"],
        ns.name.as_str()
    );
    assert_eq!(copy["status"]["reason"], "Copied");
    assert_eq!(
        copy["spec"]["install"]["spec"],
        serde_json::json!({"deployments": []}),
        "copies are cheap: an empty install strategy"
    );

    // A copy's status set by someone else is set back (upstream's "is synchronized with
    // the original csv" spec edits lastUpdateTime the same way).
    kubectl(
        &[
            "patch",
            "csv",
            "reverse-words.v0.3.0",
            "-n",
            &target.name,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"lastUpdateTime":"1970-01-01T00:00:01Z"}}"#,
        ],
        None,
    )
    .ok();
    eventually("the copy's status set back", WAIT, || async {
        let copy = get(&target.name, "csv/reverse-words.v0.3.0")?;
        let source = get(&ns.name, "csv/reverse-words.v0.3.0")?;
        (copy["status"]["lastUpdateTime"] == source["status"]["lastUpdateTime"]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_reported_on_the_csv() {
    install_crds();
    let client = client().await;
    let _olm_guards: Vec<OlmRun>;
    // Missing required CRD: ptemplate needs kmm's Module.
    let missing = TestNamespace::create(&client, "csv-missing").await;
    let unsupported = TestNamespace::create(&client, "csv-unsup").await;
    let two = TestNamespace::create(&client, "csv-two").await;
    let invalid = TestNamespace::create(&client, "csv-invalid").await;
    let stuck = TestNamespace::create(&client, "csv-stuck").await;
    _olm_guards = [&missing, &unsupported, &two, &invalid, &stuck]
        .iter()
        .map(|ns| {
            OlmRun::start(
                &ns.name,
                &["--leader-elect=false", "--install-check-timeout", "8s"],
            )
        })
        .collect();
    apply_crds("reverse-words", "0.3.0");
    let _crds = super::harness::operator_crds_lock();
    apply_crds("ptemplate", "0.1.0");

    operator_group(&missing.name, "og", Some(&[&missing.name]));
    let mut ptemplate = csv_json("ptemplate", "0.1.0");
    ptemplate["spec"]["customresourcedefinitions"]["required"] = serde_json::json!([{
        "name": "absent.example.com", "version": "v1", "kind": "Absent"
    }]);
    apply_json(&missing.name, &ptemplate);

    operator_group(&unsupported.name, "og", None);
    apply_csv(&unsupported.name, "reverse-words", "0.3.0");

    operator_group(&two.name, "og1", Some(&[&two.name]));
    operator_group(&two.name, "og2", Some(&[&two.name]));
    apply_csv(&two.name, "reverse-words", "0.3.0");

    operator_group(&invalid.name, "og", Some(&[&invalid.name]));
    let mut bad = csv_json("reverse-words", "0.3.0");
    bad["spec"]["install"]["spec"]["deployments"][0]["spec"]["selector"]["matchLabels"] =
        serde_json::json!({"control-plane": "something-else"});
    apply_json(&invalid.name, &bad);

    operator_group(&stuck.name, "og", Some(&[&stuck.name]));
    let mut never_ready = csv_json("reverse-words", "0.3.0");
    never_ready["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["nodeSelector"] =
        serde_json::json!({"olm-rs.dev/no-such-node": "true"});
    apply_json(&stuck.name, &never_ready);

    let pending = wait_for_phase(
        &missing.name,
        "ptemplate.v0.1.0",
        "Pending",
        Some("RequirementsNotMet"),
    )
    .await;
    let message = pending["status"]["message"].as_str().unwrap();
    assert!(message.contains("absent.example.com"), "{message}");
    let requirement = pending["status"]["requirementStatus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "absent.example.com")
        .cloned()
        .unwrap();
    assert_eq!(requirement["status"], "NotPresent");

    let failed = wait_for_phase(
        &unsupported.name,
        "reverse-words.v0.3.0",
        "Failed",
        Some("UnsupportedOperatorGroup"),
    )
    .await;
    assert!(
        failed["status"]["message"]
            .as_str()
            .unwrap()
            .contains("AllNamespaces")
    );
    wait_for_phase(
        &two.name,
        "reverse-words.v0.3.0",
        "Failed",
        Some("TooManyOperatorGroups"),
    )
    .await;
    let invalid_csv = wait_for_phase(
        &invalid.name,
        "reverse-words.v0.3.0",
        "Failed",
        Some("InstallComponentFailed"),
    )
    .await;
    let message = invalid_csv["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("selector") && message.contains("invalid"),
        "{message}"
    );
    let timed_out = wait_for_phase(
        &stuck.name,
        "reverse-words.v0.3.0",
        "Failed",
        Some("InstallCheckFailed"),
    )
    .await;
    assert!(phases(&timed_out).contains(&"Installing".to_string()));
}

/// A requirement lost after Succeeded: Failed (RequirementsNotMet), then Pending waiting for
/// it (as upstream), and Succeeded again once it is back.
#[tokio::test]
async fn a_requirement_lost_after_success_waits_in_pending() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-lost").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    // A CRD of this test alone, required by the CSV.
    let group = format!("{}.example.com", ns.name);
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    });
    apply_json(&ns.name, &crd);
    let mut csv = csv_json("reverse-words", "0.3.0");
    csv["spec"]["customresourcedefinitions"]["required"] = serde_json::json!([{
        "name": format!("gadgets.{group}"), "version": "v1", "kind": "Gadget"
    }]);
    apply_json(&ns.name, &csv);
    wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;

    kubectl(&["delete", "crd", &format!("gadgets.{group}")], None).ok();
    let pending = wait_for_phase(
        &ns.name,
        "reverse-words.v0.3.0",
        "Pending",
        Some("RequirementsNotMet"),
    )
    .await;
    let order = phase_order(&pending);
    assert!(
        order.ends_with(&["Succeeded".into(), "Failed".into(), "Pending".into()]),
        "{order:?}"
    );
    apply_json(&ns.name, &crd);
    wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
}

/// A group with `serviceAccountName` grants a CSV only what that account may grant, as
/// upstream (whose plan steps make the CSV's RBAC as that account): with rights in its
/// namespace only, the plan's ClusterRole step is refused naming the account (retried, as
/// upstream retries Forbidden) and the CSV waits for it; granted cluster rights, the plan
/// completes and the CSV installs.
#[tokio::test]
async fn a_scoped_group_grants_only_what_its_service_account_may() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-scoped").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let rbac = |kind: &str, name: &str, namespaced: bool| {
        let mut meta = serde_json::json!({"name": name});
        if namespaced {
            meta["namespace"] = serde_json::json!(ns.name);
        }
        let role_kind = if kind.starts_with("Cluster") {
            "ClusterRole"
        } else {
            "Role"
        };
        match kind {
            "Role" | "ClusterRole" => serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
            }),
            _ => serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": ns.name}],
            }),
        }
    };
    apply_json(
        &ns.name,
        &serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "installer"}}),
    );
    apply_json(&ns.name, &rbac("Role", "installer", true));
    apply_json(&ns.name, &rbac("RoleBinding", "installer", true));
    let og = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": "og"},
        "spec": {"targetNamespaces": [ns.name], "serviceAccountName": "installer"},
    });
    apply_json(&ns.name, &og);
    apply_crds("kernel-module-management", "2.2.0");
    // The plan upstream's resolver would make: the CSV, then its RBAC.
    let name = "kernel-module-management.v2.2.0";
    let mut csv_object = csv_json("kernel-module-management", "2.2.0");
    csv_object["metadata"]["namespace"] = Value::from(ns.name.as_str());
    let typed: olm::api::ClusterServiceVersion =
        serde_json::from_value(csv_object.clone()).unwrap();
    let mut steps = vec![step_of(name, &csv_object)];
    steps.extend(
        olm::controllers::plan::rbac::objects(&typed, &ns.name)
            .iter()
            .map(|object| step_of(name, object)),
    );
    hand_written_plan(&ns.name, "install", &steps);
    let refused = eventually("the plan's ClusterRole refused", WAIT, || async {
        let plan = get(&ns.name, "installplan/install")?;
        let message = plan["status"]["message"].as_str()?.to_string();
        (message.contains("forbidden") && message.contains("installer")).then_some(plan)
    })
    .await;
    assert_eq!(
        refused["status"]["phase"], "Installing",
        "Forbidden is retried, as upstream"
    );
    let csv = get(&ns.name, &format!("csv/{name}")).unwrap();
    assert_ne!(csv["status"]["phase"], "Succeeded", "{:#}", csv["status"]);
    let csv = format!("csv/{name}");
    let csv = csv.as_str();

    // Cluster rights for the account (cluster-scoped objects: removed at the end).
    let cluster_name = format!("{}-installer", ns.name);
    let cluster_role = rbac("ClusterRole", &cluster_name, false);
    let cluster_binding = rbac("ClusterRoleBinding", &cluster_name, false);
    apply_json(&ns.name, &cluster_role);
    apply_json(&ns.name, &cluster_binding);
    let installed = eventually(
        "the CSV Succeeded once granted",
        Duration::from_secs(180),
        || async {
            let csv = get(&ns.name, csv)?;
            (csv["status"]["phase"] == "Succeeded").then_some(csv)
        },
    )
    .await;
    assert_eq!(installed["status"]["reason"], "InstallSucceeded");
    plan_phase(&ns.name, "install", "Complete").await;
    for kind in ["clusterrolebinding", "clusterrole"] {
        kubectl(&["delete", kind, &cluster_name], None).ok();
    }
}

/// The subjects of the RoleBindings OLM made for the CSV in `namespace`.
fn bound_accounts(namespace: &str, csv: &str) -> Vec<String> {
    let listed = kubectl(
        &[
            "get",
            "rolebindings",
            "-n",
            namespace,
            "-l",
            &format!("olm.owner={csv}"),
            "-o",
            "json",
        ],
        None,
    )
    .ok()
    .stdout();
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let mut accounts: Vec<String> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["name"].as_str().map(String::from))
        .collect();
    accounts.sort();
    accounts.dedup();
    accounts
}

/// OLM grants nothing to a CSV edited by hand either: asking for an account it did not
/// have, a Succeeded CSV goes back to Pending naming the account, and no RBAC is made for
/// it; once an admin grants it, the CSV installs again.
#[tokio::test]
async fn an_edited_csv_asking_for_more_waits_until_it_is_granted() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-edit").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let name = "reverse-words.v0.3.0";
    let original = csv_json("reverse-words", "0.3.0");
    apply_json(&ns.name, &original);
    wait_for_phase(&ns.name, name, "Succeeded", None).await;

    let mut extended = original;
    extended["spec"]["install"]["spec"]["permissions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "serviceAccountName": "extra",
            "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"] }],
        }));
    apply_csv_alone(&ns.name, &extended);
    let pending = wait_for_phase(&ns.name, name, "Pending", Some("RequirementsNotMet")).await;
    let message = pending["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("ServiceAccount extra does not exist"),
        "{message}"
    );
    assert!(!bound_accounts(&ns.name, name).contains(&"extra".to_string()));

    grant_csv_rbac(&ns.name, &extended);
    let csv = wait_for_phase(&ns.name, name, "Succeeded", None).await;
    assert_eq!(
        phase_order(&csv).last().map(String::as_str),
        Some("Succeeded"),
        "{:#}",
        csv["status"]
    );
}
