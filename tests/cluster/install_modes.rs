//! Every bundle of `bundles/` in every install mode its CSV supports: the CSV reaches
//! Succeeded, and RBAC is proven with SubjectAccessReviews (what `kubectl auth can-i` asks) in each
//! target namespace, refused outside the group, and granted to namespace admins and viewers
//! through the aggregated ClusterRoles (kube-controller-manager aggregates them).

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::csv_lifecycle::{
    WAIT, apply_crds, apply_json, csv_json, operator_group, wait_for_phase,
};
use super::harness::{TestNamespace, client, eventually, install_crds, operator_crds_lock};
use super::processes::OlmRun;

/// What `kubectl auth can-i VERB RESOURCE [-n NS] --as WHO` asks, as one
/// SubjectAccessReview (hundreds of checks: a kubectl process each would dominate the test).
/// `resource` is `plural[/subresource][.group]`.
async fn can(
    client: &kube::Client,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    who: &str,
) -> bool {
    let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let review: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": who,
            "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource,
                "subresource": subresource, "namespace": namespace.unwrap_or_default(),
            },
        },
    }))
    .unwrap();
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

/// `(verb, resource.group)` for every rule of `permissions` or `clusterPermissions`.
fn rules(csv: &Value, field: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let permissions = csv["spec"]["install"]["spec"][field].as_array();
    for permission in permissions.into_iter().flatten() {
        for rule in permission["rules"].as_array().unwrap() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        let target = if group.is_empty() {
                            resource.clone()
                        } else {
                            format!("{resource}.{group}")
                        };
                        out.push((verb.clone(), target));
                    }
                }
            }
        }
    }
    out
}

fn service_account(csv: &Value) -> String {
    csv["spec"]["install"]["spec"]["permissions"][0]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The CSV's owned CRDs as `plural.group` (from `resources[].name` of the owned list).
fn owned_resources(csv: &Value) -> Vec<String> {
    csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|crd| crd["name"].as_str().unwrap().to_string())
        .collect()
}

fn supported_modes(csv: &Value) -> Vec<String> {
    csv["spec"]["installModes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["supported"] == true)
        .map(|m| m["type"].as_str().unwrap().to_string())
        .collect()
}

/// One install: the operator's namespace, its targets, and a namespace outside the group.
struct Install {
    mode: String,
    operator: TestNamespace,
    targets: Vec<TestNamespace>,
    outside: TestNamespace,
}

// A scenario read top to bottom: tests are held to neither length nor complexity.
#[allow(clippy::cognitive_complexity)]
async fn installs_in_every_supported_mode(package: &str, version: &str, needs: &[(&str, &str)]) {
    install_crds();
    // Older at and ptemplate CRDs must not swap in under the operator tests.
    let _crds = [package]
        .iter()
        .chain(needs.iter().map(|(p, _)| p))
        .any(|p| ["at", "ptemplate"].contains(p))
        .then(operator_crds_lock);
    let client = client().await;
    let csv = csv_json(package, version);
    let name = csv["metadata"]["name"].as_str().unwrap().to_string();
    for (dependency, dep_version) in needs {
        apply_crds(dependency, dep_version);
    }
    apply_crds(package, version);

    let mut installs = Vec::new();
    for mode in supported_modes(&csv) {
        let short = mode.trim_end_matches("Namespace").to_lowercase();
        let operator = TestNamespace::create(&client, &format!("modes-{package}-{short}")).await;
        let target_count = match mode.as_str() {
            "SingleNamespace" => 1,
            "MultiNamespace" => 2,
            _ => 0,
        };
        let mut targets = Vec::new();
        for i in 0..target_count {
            targets.push(TestNamespace::create(&client, &format!("modes-{short}-t{i}")).await);
        }
        let outside = TestNamespace::create(&client, &format!("modes-{short}-out")).await;
        installs.push(Install {
            mode,
            operator,
            targets,
            outside,
        });
    }
    assert!(!installs.is_empty(), "{name} supports no install mode");
    // One OLM per install, each watching its operator's namespace: in one scope the groups
    // would meet (an AllNamespaces group meets every other), and the same operator in two
    // of them is an InterOperatorGroupOwnerConflict, as upstream. Copies of an
    // AllNamespaces operator would go into every namespace of the shared test cluster;
    // they have tests of their own.
    let _olms: Vec<OlmRun> = installs
        .iter()
        .map(|i| {
            OlmRun::start(
                &i.operator.name,
                &["--leader-elect=false", "--disable-copied-csvs"],
            )
        })
        .collect();
    for install in &installs {
        let op = install.operator.name.as_str();
        let targets: Option<Vec<&str>> = match install.mode.as_str() {
            "OwnNamespace" => Some(vec![op]),
            "AllNamespaces" => None,
            _ => Some(install.targets.iter().map(|t| t.name.as_str()).collect()),
        };
        operator_group(op, "og", targets.as_deref());
        apply_json(op, &csv);
    }

    let account = service_account(&csv);
    let namespaced = rules(&csv, "permissions");
    let cluster_wide = rules(&csv, "clusterPermissions");
    for install in &installs {
        let op = install.operator.name.as_str();
        let found = wait_for_phase(op, &name, "Succeeded", None).await;
        assert_eq!(
            found["metadata"]["annotations"]["olm.operatorGroup"], "og",
            "{name} in {}",
            install.mode
        );
        let who = format!("system:serviceaccount:{op}:{account}");
        let granted_in: Vec<&str> = match install.mode.as_str() {
            "OwnNamespace" => vec![op],
            "AllNamespaces" => vec![op, install.outside.name.as_str(), "default"],
            _ => install.targets.iter().map(|t| t.name.as_str()).collect(),
        };
        for ns in &granted_in {
            for (verb, resource) in &namespaced {
                assert!(
                    can(&client, verb, resource, Some(ns), &who).await,
                    "{name} ({}): {account} cannot {verb} {resource} in {ns}",
                    install.mode
                );
            }
        }
        for (verb, resource) in &cluster_wide {
            assert!(
                can(&client, verb, resource, None, &who).await,
                "{name} ({}): {account} cannot {verb} {resource} cluster-wide",
                install.mode
            );
        }
        if install.mode != "AllNamespaces" {
            for (verb, resource) in namespaced.iter().filter(|r| !cluster_wide.contains(r)) {
                assert!(
                    !can(&client, verb, resource, Some(&install.outside.name), &who).await,
                    "{name} ({}): {account} can {verb} {resource} outside its group",
                    install.mode
                );
            }
        }
        assert!(
            !can(&client, "delete", "secrets", Some(granted_in[0]), &who).await,
            "{name} ({}): a rule it did not ask for",
            install.mode
        );

        // Namespace admins and viewers of a target namespace get the operator's APIs through
        // the aggregated per-API ClusterRoles.
        let target = granted_in[0];
        let admin = format!("admin-{}", install.operator.name);
        let viewer = format!("viewer-{}", install.operator.name);
        for (user, role) in [(&admin, "admin"), (&viewer, "view")] {
            apply_json(
                target,
                &json!({
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": { "name": user, "namespace": target },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
                    "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
                }),
            );
        }
        for resource in owned_resources(&csv) {
            eventually(
                &format!("namespace admins of {target} manage {resource}"),
                WAIT,
                || async {
                    (can(&client, "create", &resource, Some(target), &admin).await
                        && can(&client, "list", &resource, Some(target), &viewer).await)
                        .then_some(())
                },
            )
            .await;
            assert!(
                !can(&client, "create", &resource, Some(target), &viewer).await,
                "viewers of {target} may not create {resource}"
            );
            assert!(
                !can(
                    &client,
                    "create",
                    &resource,
                    Some(&install.outside.name),
                    &admin
                )
                .await,
                "the admin of {target} is not admin of {}",
                install.outside.name
            );
        }
    }
}

#[tokio::test]
async fn reverse_words_in_each_supported_install_mode() {
    installs_in_every_supported_mode("reverse-words", "0.4.0", &[]).await;
}

#[tokio::test]
async fn at_in_each_supported_install_mode() {
    installs_in_every_supported_mode("at", "0.2.0", &[]).await;
}

#[tokio::test]
async fn kernel_module_management_in_each_supported_install_mode() {
    installs_in_every_supported_mode("kernel-module-management", "2.2.0", &[]).await;
}

#[tokio::test]
async fn ptemplate_in_each_supported_install_mode() {
    // ptemplate requires KMM's Module CRD (present, as OLM would have installed it).
    installs_in_every_supported_mode(
        "ptemplate",
        "0.2.0",
        &[("kernel-module-management", "2.2.0")],
    )
    .await;
}
