//! The attack suite: a tenant who may create only a few kinds in their own namespace tries
//! to make OLM act for them beyond that (issue 40's rows), impersonated with
//! `kubectl --as=system:serviceaccount:<ns>:alice`. Each probe must be refused with a clear
//! message and leave nothing behind: no RBAC, no object outside the tenant's namespace.
//! The README's "Security model" table lists the probes beside upstream OLM's behaviour.

use std::time::Duration;

use serde_json::{Value, json};

use super::csv_lifecycle::{
    apply_crds, csv_json, get, grant_csv_rbac, hand_written_plan, plan_phase, step, wait_for_phase,
};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::OlmRun;

const WAIT: Duration = Duration::from_secs(90);
const TENANT: &str = "alice";

/// A namespace with OLM watching it, an OperatorGroup (naming `account` when given) and the
/// tenant `alice`, who may create and read CSVs, InstallPlans and CatalogSources there and
/// nothing else (as the issue's trial had it).
struct Tenancy {
    ns: TestNamespace,
    _olm: OlmRun,
}

impl Tenancy {
    async fn new(test: &str, account: Option<&str>) -> Tenancy {
        install_crds();
        let ns = TestNamespace::create(&client().await, test).await;
        let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
        let mut group = json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": ns.name},
            "spec": {"targetNamespaces": [ns.name]},
        });
        if let Some(account) = account {
            group["spec"]["serviceAccountName"] = json!(account);
        }
        admin_apply(&group);
        let verbs = json!(["create", "get", "list", "watch", "update", "patch"]);
        grant(
            &ns.name,
            TENANT,
            &json!([{"apiGroups": ["operators.coreos.com"],
                     "resources": ["clusterserviceversions", "installplans", "catalogsources"],
                     "verbs": verbs}]),
        );
        Tenancy { ns, _olm: olm }
    }

    fn name(&self) -> &str {
        &self.ns.name
    }

    /// `kubectl` as the tenant.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> super::harness::Kubectl {
        let user = format!("--as=system:serviceaccount:{}:{TENANT}", self.name());
        let mut all = vec![user.as_str()];
        all.extend_from_slice(args);
        kubectl(&all, stdin)
    }
}

fn admin_apply(object: &Value) {
    kubectl(&["apply", "-f", "-"], Some(&object.to_string())).ok();
}

/// A ServiceAccount `name` in `namespace` with a Role of `rules` there, bound to it.
fn grant(namespace: &str, name: &str, rules: &Value) {
    let meta = json!({"name": name, "namespace": namespace});
    let items = json!([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]);
    admin_apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}));
}

fn can_i(verb: &str, resource: &str, namespace: &str, user: &str) -> bool {
    let out = kubectl(
        &[
            "auth",
            "can-i",
            verb,
            resource,
            "-n",
            namespace,
            &format!("--as={user}"),
        ],
        None,
    );
    out.stdout().trim() == "yes"
}

/// Names of the objects of `kind` (cluster-wide) labelled `selector`.
fn labelled(kind: &str, selector: &str) -> Vec<String> {
    let out = kubectl(&["get", kind, "-A", "-l", selector, "-o", "name"], None).ok();
    out.stdout().lines().map(str::to_string).collect()
}

/// The issue's CSV: every right, cluster-wide, for an account its writer names, and a
/// Deployment that would run as it.
fn pwn_csv(namespace: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "pwn.v0.0.1", "namespace": namespace},
        "spec": {
            "displayName": "pwn",
            "installModes": [{"type": "OwnNamespace", "supported": true}],
            "install": {"strategy": "deployment", "spec": {
                "deployments": [{"name": "pwn", "spec": {
                    "selector": {"matchLabels": {"app": "pwn"}},
                    "template": {"metadata": {"labels": {"app": "pwn"}},
                                 "spec": {"serviceAccountName": "pwn",
                                          "containers": [{"name": "pwn", "image": "example.com/pwn:1"}]}}}}],
                "permissions": [{"serviceAccountName": "pwn",
                                 "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}],
                "clusterPermissions": [{"serviceAccountName": "pwn",
                                        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}],
            }},
        },
    })
}

/// A CSV claiming to own an APIService of the core group (whose built-in `v1.` always
/// exists) gets no per-API roles: `view` would otherwise aggregate `get` on every Secret of
/// every namespace. Roles follow only an APIService OLM made for a member CSV.
#[tokio::test]
async fn a_csv_claiming_a_built_in_api_service_aggregates_nothing_into_view() {
    let t = Tenancy::new("sec-apiservice-roles", None).await;
    let mut csv = pwn_csv(t.name());
    csv["metadata"]["name"] = json!("claims.v0.0.1");
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
        "name": "secrets", "group": "", "version": "v1", "kind": "Secret",
        "deploymentName": "pwn", "containerPort": 5443, "displayName": "Secret"}]});
    t.kubectl(&["apply", "-f", "-"], Some(&csv.to_string()))
        .ok();
    // The group has read the CSV once it lists the API among those its members provide.
    eventually("the group lists the claimed API", WAIT, || async {
        let og = get(t.name(), "operatorgroup/og")?;
        let provided = og["metadata"]["annotations"]["olm.providedAPIs"].as_str()?;
        provided.contains("Secret.v1.").then_some(())
    })
    .await;
    for suffix in ["admin", "edit", "view"] {
        let role = format!("clusterrole/secrets-v1-{suffix}");
        assert!(
            !kubectl(&["get", &role], None).success(),
            "{role} was made for a CSV's claim on the core group"
        );
    }
}

/// Row 1: a CSV alone grants nothing. It waits Pending (RequirementsNotMet), lists what its
/// account lacks in upstream's shape, and OLM makes no account, RBAC or Deployment for it.
#[tokio::test]
async fn a_csv_alone_grants_nothing_and_waits_for_its_accounts_rules() {
    let t = Tenancy::new("sec-csv-alone", None).await;
    t.kubectl(&["apply", "-f", "-"], Some(&pwn_csv(t.name()).to_string()))
        .ok();
    let csv = wait_for_phase(
        t.name(),
        "pwn.v0.0.1",
        "Pending",
        Some("RequirementsNotMet"),
    )
    .await;
    let account = |csv: &Value| {
        csv["status"]["requirementStatus"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == "ServiceAccount" && r["name"] == "pwn")
            .cloned()
    };
    assert_eq!(account(&csv).unwrap()["status"], "NotPresent", "{csv:#}");

    // An account that exists but holds nothing: every rule listed as NotSatisfied.
    admin_apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "pwn", "namespace": t.name()}}));
    let status = eventually("the account's rules listed as unmet", WAIT, || async {
        let status = account(&get(t.name(), "csv/pwn.v0.0.1")?)?;
        (status["status"] == "PresentNotSatisfied").then_some(status)
    })
    .await;
    let dependents: Vec<(&str, &str)> = status["dependents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["status"].as_str().unwrap(),
                d["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        dependents,
        [
            (
                "NotSatisfied",
                r#"namespaced rule:{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}"#
            ),
            (
                "NotSatisfied",
                r#"cluster rule:{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}"#
            ),
        ]
    );
    let csv = get(t.name(), "csv/pwn.v0.0.1").unwrap();
    assert_eq!(csv["status"]["phase"], "Pending", "{csv:#}");
    assert!(
        csv["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("ServiceAccount pwn does not hold cluster rule"),
        "{:#}",
        csv["status"]
    );
    let user = format!("system:serviceaccount:{}:pwn", t.name());
    assert!(!can_i("*", "*", t.name(), &user));
    assert!(!can_i("get", "secrets", t.name(), &user));
    let owned = format!("olm.owner=pwn.v0.0.1,olm.owner.namespace={}", t.name());
    assert_eq!(
        labelled(
            "clusterroles,clusterrolebindings,roles,rolebindings",
            &owned
        ),
        Vec::<String>::new()
    );
    assert!(
        get(t.name(), "deployment/pwn").is_none(),
        "no Deployment while Pending"
    );
}

/// Row 2: under a group naming a `serviceAccountName`, the whole install is written as that
/// account. One that may write Deployments, Services, Secrets and RBAC in its namespace only
/// cannot get OLM to register an APIService (which would route an API group to the tenant's
/// Service) or to bind `system:auth-delegator` cluster-wide: the CSV reports the API server's
/// refusal naming the account, and neither object exists.
#[tokio::test]
async fn a_scoped_group_writes_the_whole_install_as_its_account() {
    let t = Tenancy::new("sec-scoped", Some("installer")).await;
    grant(
        t.name(),
        "installer",
        &json!([{"apiGroups": ["", "apps", "rbac.authorization.k8s.io", "operators.coreos.com"],
                 "resources": ["*"], "verbs": ["*"]}]),
    );
    let _crds = super::harness::operator_crds_lock();
    apply_crds("reverse-words", "0.3.0");
    let group = format!("evil{}.example.com", std::process::id());
    let mut csv = csv_json("reverse-words", "0.3.0");
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
        "name": "gizmos", "group": group, "version": "v1", "kind": "Gizmo",
        "displayName": "Gizmo", "deploymentName": "reverse-words-controller-manager",
        "containerPort": 5443,
    }]});
    // The operator's own rules are granted (its requirements are met): what is probed is
    // what the install writes.
    grant_csv_rbac(t.name(), &csv);
    t.kubectl(
        &["apply", "-n", t.name(), "-f", "-"],
        Some(&csv.to_string()),
    )
    .ok();
    let csv = eventually("the CSV reports the account's refusal", WAIT, || async {
        let csv = get(t.name(), "csv/reverse-words.v0.3.0")?;
        let message = csv["status"]["message"].as_str()?.to_string();
        message.contains("forbidden").then_some(csv)
    })
    .await;
    let message = csv["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("system:serviceaccount:{}:installer", t.name())),
        "{message}"
    );
    let api_service = kubectl(&["get", "apiservice", &format!("v1.{group}")], None);
    assert!(!api_service.success(), "the APIService was registered");
    let owned = format!(
        "olm.owner=reverse-words.v0.3.0,olm.owner.namespace={}",
        t.name()
    );
    assert_eq!(
        labelled("clusterrolebindings", &owned),
        Vec::<String>::new()
    );
}

/// Row 4: a plan's steps are limited to upstream's kinds. A plan with a ConfigMap and then an
/// APIService, or a listed kind in a group a CRD serves, fails naming the step
/// (UnsupportedResource), before any step runs: the ConfigMap is not there either.
#[tokio::test]
async fn a_plan_may_create_only_upstreams_kinds_and_nothing_runs_otherwise() {
    let t = Tenancy::new("sec-kinds", None).await;
    let config_map =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"}});
    let group = format!("evil{}.example.com", std::process::id());
    let api_service = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("v1.{group}")},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "service": {"name": "evil", "namespace": t.name()}}});
    // The step says ConfigMap; the manifest's kind is what would be written.
    let disguised = step("ConfigMap", "second", &api_service);
    hand_written_plan(
        t.name(),
        "kinds",
        &[step("ConfigMap", "first", &config_map), disguised],
    );
    let plan = plan_phase(t.name(), "kinds", "Failed").await;
    let message = plan["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("UnsupportedResource") && message.contains("APIService"),
        "{message}"
    );
    assert_eq!(
        plan["status"]["plan"][1]["status"], "UnsupportedResource",
        "{plan:#}"
    );
    assert!(
        get(t.name(), "configmap/first").is_none(),
        "a step ran before the refusal"
    );
    assert!(!kubectl(&["get", "apiservice", &format!("v1.{group}")], None).success());

    // A look-alike: a listed kind (ServiceMonitor) in a group someone's CRD serves. Refused
    // before any step runs, as the APIService (unserved, it would only be retried as not
    // found on the cluster, as upstream's executor does).
    let crd = format!("servicemonitors.{group}");
    admin_apply(
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "servicemonitors", "singular": "servicemonitor", "kind": "ServiceMonitor"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    );
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=60s",
        ],
        None,
    )
    .ok();
    let look_alike = json!({"apiVersion": format!("{group}/v1"), "kind": "ServiceMonitor",
        "metadata": {"name": "second"}});
    hand_written_plan(
        t.name(),
        "look-alike",
        &[
            step("ConfigMap", "first", &config_map),
            step("ServiceMonitor", "second", &look_alike),
        ],
    );
    let plan = plan_phase(t.name(), "look-alike", "Failed").await;
    let message = plan["status"]["message"].as_str().unwrap();
    assert!(message.contains("UnsupportedResource"), "{message}");
    assert!(
        get(t.name(), "configmap/first").is_none(),
        "a step ran before the refusal of the look-alike"
    );
    kubectl(&["delete", "crd", &crd, "--wait=false"], None).ok();

    // A namespaced step is written into the plan's namespace, whatever its manifest says.
    let elsewhere = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "moved", "namespace": "kube-system"}});
    hand_written_plan(
        t.name(),
        "elsewhere",
        &[step("ConfigMap", "moved", &elsewhere)],
    );
    plan_phase(t.name(), "elsewhere", "Complete").await;
    assert!(get(t.name(), "configmap/moved").is_some());
    assert!(get("kube-system", "configmap/moved").is_none());
}

/// Row 3: the legacy `olm-rs.dev/bundles` annotation is no longer read. A plan that names a
/// bundle of another namespace's catalog there, made by someone who may create plans, stays
/// as it was written (no status, no CSV), as upstream leaves a plan without status alone.
#[tokio::test]
async fn a_plan_naming_bundles_in_an_annotation_is_left_alone() {
    let t = Tenancy::new("sec-legacy", None).await;
    let bundles = json!([{
        "name": "reverse-words.v0.2.0", "package": "reverse-words", "version": "0.2.0",
        "channel": "stable", "catalog": "private", "catalogNamespace": "t2-private",
    }]);
    let plan = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": "legacy", "namespace": t.name(),
                     "annotations": {"olm-rs.dev/bundles": bundles.to_string()}},
        "spec": {"approval": "Automatic", "approved": true,
                 "clusterServiceVersionNames": ["reverse-words.v0.2.0"]},
    });
    t.kubectl(&["create", "-f", "-"], Some(&plan.to_string()))
        .ok();
    // A plan written after it completes: OLM has looked at both.
    let marker = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "marker"}});
    hand_written_plan(t.name(), "after", &[step("ConfigMap", "marker", &marker)]);
    plan_phase(t.name(), "after", "Complete").await;
    let legacy = get(t.name(), "installplan/legacy").unwrap();
    assert!(legacy["status"].is_null(), "{:#}", legacy["status"]);
    assert!(get(t.name(), "csv/reverse-words.v0.2.0").is_none());
}

/// Row 9: upstream's aggregated roles. A namespace editor may subscribe and read what OLM
/// made, and may not write CSVs, plans' status or CatalogSources.
#[tokio::test]
async fn a_namespace_editor_may_subscribe_and_nothing_more() {
    let ns = TestNamespace::create(&client().await, "sec-editor").await;
    install_crds();
    let roles = repo_root().join("deploy/aggregated-roles.yaml");
    kubectl(&["apply", "-f", roles.to_str().unwrap()], None).ok();
    admin_apply(
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "bob-edit", "namespace": ns.name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]}),
    );
    // The controller-manager aggregates the roles into `edit`.
    eventually("edit aggregates OLM's roles", WAIT, || async {
        can_i(
            "create",
            "subscriptions.operators.coreos.com",
            &ns.name,
            "bob",
        )
        .then_some(())
    })
    .await;
    for (verb, resource) in [
        ("get", "clusterserviceversions.operators.coreos.com"),
        ("list", "installplans.operators.coreos.com"),
        ("watch", "operatorgroups.operators.coreos.com"),
        ("delete", "clusterserviceversions.operators.coreos.com"),
    ] {
        assert!(
            can_i(verb, resource, &ns.name, "bob"),
            "bob may {verb} {resource}"
        );
    }
    for (verb, resource) in [
        ("create", "clusterserviceversions.operators.coreos.com"),
        ("patch", "installplans.operators.coreos.com/status"),
        ("create", "installplans.operators.coreos.com"),
        ("create", "catalogsources.operators.coreos.com"),
        ("create", "operatorgroups.operators.coreos.com"),
    ] {
        assert!(
            !can_i(verb, resource, &ns.name, "bob"),
            "bob may not {verb} {resource}"
        );
    }
    let refused = kubectl(
        &["--as=bob", "apply", "-n", &ns.name, "-f", "-"],
        Some(&pwn_csv(&ns.name).to_string()),
    );
    assert!(!refused.success());
    assert!(
        refused.stderr().contains("forbidden"),
        "{}",
        refused.stderr()
    );
}

/// Deletes the cluster-scoped objects a test made, however it ends.
struct ClusterObjects(Vec<String>);

impl Drop for ClusterObjects {
    fn drop(&mut self) {
        for object in &self.0 {
            let _ = kubectl(&["delete", object, "--ignore-not-found"], None);
        }
    }
}

/// `GET path` on the secure admin server with `token`: (status code, body).
fn secure_get(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let url = format!("https://127.0.0.1:{port}{path}");
    let mut command = std::process::Command::new("curl");
    command.args(["-sk", "-w", "\n%{http_code}", &url]);
    if let Some(token) = token {
        command.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    let out = command.output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn token(namespace: &str, account: &str) -> String {
    kubectl(&["create", "token", account, "-n", namespace], None)
        .ok()
        .stdout()
        .trim()
        .to_string()
}

/// Row 5: the admin endpoints let no one in. `olm run`'s plain admin address is loopback
/// by default; the secure one serves `/metrics` and `/debug/catalogs` over TLS only to a
/// token allowed the path, and `/debug/catalogs` only the catalogs of namespaces where the
/// caller may list CatalogSources.
#[tokio::test]
async fn the_admin_endpoints_let_no_one_in() {
    use super::catalog_sources::{catalog_source_yaml, wait_for_state};
    use super::processes::{free_port, olm_serve};
    install_crds();
    let client = client().await;
    let a = TestNamespace::create(&client, "sec-admin-a").await;
    let b = TestNamespace::create(&client, "sec-admin-b").await;
    let run_help = std::process::Command::new(super::harness::olm_bin())
        .args(["run", "--help"])
        .output()
        .unwrap();
    let run_help = String::from_utf8_lossy(&run_help.stdout);
    assert!(run_help.contains("[default: 127.0.0.1:8080]"), "{run_help}");

    let port = free_port();
    let secure = format!("127.0.0.1:{port}");
    let _olm = OlmRun::start(
        &format!("{},{}", a.name, b.name),
        &["--leader-elect=false", "--secure-admin-address", &secure],
    );
    let catalog_port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), catalog_port);
    for ns in [&a.name, &b.name] {
        let address = format!("127.0.0.1:{catalog_port}");
        kubectl(
            &["apply", "-f", "-"],
            Some(&catalog_source_yaml(ns, "private", &address, "")),
        )
        .ok();
        wait_for_state(ns, "private", "READY");
    }
    let suffix = a.name.clone();
    let _cleanup = ClusterObjects(vec![
        format!("clusterrolebinding/{suffix}-metrics"),
        format!("clusterrolebinding/{suffix}-debug"),
    ]);
    // deploy/rbac.yaml has objects in the `olm` namespace: its own file first, so that
    // this test does not depend on the deploy tests having run before it.
    for file in ["deploy/namespace.yaml", "deploy/rbac.yaml"] {
        let path = repo_root().join(file);
        kubectl(&["apply", "-f", path.to_str().unwrap()], None).ok();
    }
    grant(&a.name, "nobody", &json!([]));
    grant(&a.name, "scraper", &json!([]));
    grant(
        &a.name,
        "debugger",
        &json!([{"apiGroups": ["operators.coreos.com"], "resources": ["catalogsources"], "verbs": ["list"]}]),
    );
    for (binding, role, account) in [
        ("metrics", "olm-metrics-reader", "scraper"),
        ("debug", "olm-debug-reader", "debugger"),
    ] {
        admin_apply(
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{suffix}-{binding}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": a.name}]}),
        );
    }

    assert_eq!(secure_get(port, "/metrics", None).0, 401);
    assert_eq!(secure_get(port, "/metrics", Some("not-a-token")).0, 401);
    let nobody = token(&a.name, "nobody");
    assert_eq!(secure_get(port, "/metrics", Some(&nobody)).0, 403);
    assert_eq!(secure_get(port, "/debug/catalogs", Some(&nobody)).0, 403);
    let scraper = token(&a.name, "scraper");
    let (code, body) = secure_get(port, "/metrics", Some(&scraper));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("olm_"), "{body}");
    assert_eq!(secure_get(port, "/debug/catalogs", Some(&scraper)).0, 403);

    let debugger = token(&a.name, "debugger");
    let (code, body) = secure_get(port, "/debug/catalogs", Some(&debugger));
    assert_eq!(code, 200, "{body}");
    let listed: Value = serde_json::from_str(&body).unwrap();
    let namespaces: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, [a.name.as_str()], "{body}");
}

/// The `system:auth-delegator` ClusterRoleBindings of Deployment `deployment`'s Service:
/// (name, the namespace of the account it binds).
fn auth_delegators(deployment: &str) -> Vec<(String, String)> {
    let out = kubectl(&["get", "clusterrolebindings", "-o", "json"], None).ok();
    let listed: Value = serde_json::from_str(&out.stdout()).unwrap();
    let mut found: Vec<(String, String)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["roleRef"]["name"] == "system:auth-delegator")
        .filter(|b| {
            b["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{deployment}-service-")))
        })
        .map(|b| {
            (
                b["metadata"]["name"].as_str().unwrap().to_string(),
                b["subjects"][0]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

/// Row 7: the bindings a served Deployment gets outside its namespace are never taken from
/// another namespace's install. Two namespaces install the same webhook operator (the same
/// Deployment name): each gets its own `system:auth-delegator` binding, and removing one
/// install leaves the other's.
#[tokio::test]
async fn two_installs_never_share_a_binding_outside_their_namespaces() {
    use super::webhooks::{CSV, apply_crd, csv_on_port, with_deployment};
    install_crds();
    let client = client().await;
    let a = TestNamespace::create(&client, "sec-bind-a").await;
    let b = TestNamespace::create(&client, "sec-bind-b").await;
    let _olm_a = OlmRun::start(&a.name, &["--leader-elect=false"]);
    let _olm_b = OlmRun::start(&b.name, &["--leader-elect=false"]);
    apply_crd().await;
    let deployment = format!("shared{}", std::process::id());
    let mut cleanup = Vec::new();
    for ns in [&a.name, &b.name] {
        super::csv_lifecycle::operator_group(ns, "og", Some(&[ns.as_str()]));
        let csv = with_deployment(csv_on_port(super::processes::free_port()), &deployment);
        super::csv_lifecycle::apply_json(ns, &csv);
    }
    for ns in [&a.name, &b.name] {
        wait_for_phase(ns, CSV, "Succeeded", None).await;
    }
    let both = auth_delegators(&deployment);
    cleanup.extend(
        both.iter()
            .map(|(name, _)| format!("clusterrolebinding/{name}")),
    );
    let _cleanup = ClusterObjects(cleanup);
    let mut bound: Vec<&str> = both.iter().map(|(_, ns)| ns.as_str()).collect();
    bound.sort_unstable();
    let mut expected = [a.name.as_str(), b.name.as_str()];
    expected.sort_unstable();
    assert_eq!(bound, expected, "one binding per install: {both:?}");
    kubectl(&["delete", "csv", CSV, "-n", &a.name], None).ok();
    let left = eventually("a's binding removed with its CSV", WAIT, || async {
        let left = auth_delegators(&deployment);
        (left.len() == 1).then_some(left)
    })
    .await;
    assert_eq!(left[0].1, b.name, "b's binding stays: {left:?}");
}

/// A registry that knows one thing: that `repository:latest` has `digest` (a manifest HEAD
/// says so), and serves nothing. A tenant's registry trying to borrow another tenant's
/// cached image by naming its digest.
fn digest_naming_registry(repository: &str, digest: &str) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let head = format!("HEAD /v2/{repository}/manifests/latest ");
    let digest = digest.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let answer = if request.starts_with(&head) {
                format!(
                    "HTTP/1.1 200 OK\r\nDocker-Content-Digest: {digest}\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
                )
            } else if request.starts_with("GET /v2/ ") {
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".to_string()
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_string()
            };
            let _ = reader.get_mut().write_all(answer.as_bytes());
        }
    });
    port
}

/// Row 6: the image cache cannot be borrowed. Tenant a's catalog image is pulled into the
/// cache; tenant b's CatalogSource names a registry that answers a manifest HEAD with that
/// image's digest and serves nothing. B's catalog fails naming its image, and b never sees
/// a's packages.
#[tokio::test]
async fn a_registry_naming_another_tenants_digest_gets_nothing_of_it() {
    use super::image_catalogs::{image_source_yaml, packages, push_catalog};
    use super::registry::TestRegistry;
    install_crds();
    let client = client().await;
    let a = TestNamespace::create(&client, "sec-cache-a").await;
    let b = TestNamespace::create(&client, "sec-cache-b").await;
    let registry = TestRegistry::start("sec-cache", false);
    let image = format!("{}/private/catalog:latest", registry.host);
    let layout = registry.dir.join("layout");
    let digest = push_catalog(&repo_root().join("catalog"), &image, &layout, None);
    let cache = registry.dir.join("cache");
    let olm = OlmRun::start(
        &format!("{},{}", a.name, b.name),
        &[
            "--leader-elect=false",
            "--image-cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    kubectl(
        &["apply", "-f", "-"],
        Some(&image_source_yaml(&a.name, "private", &image, "")),
    )
    .ok();
    eventually("a's catalog pulled and loaded", WAIT, || async {
        packages(&olm, &a.name, "private")
    })
    .await;

    let port = digest_naming_registry("evil/catalog", &digest);
    let borrowing = format!("127.0.0.1:{port}/evil/catalog:latest");
    kubectl(
        &["apply", "-f", "-"],
        Some(&image_source_yaml(&b.name, "borrow", &borrowing, "")),
    )
    .ok();
    let status = eventually("b's catalog fails naming its image", WAIT, || async {
        let source = get(&b.name, "catalogsource/borrow")?;
        let failed = source["status"]["conditions"].as_array()?.iter().any(|c| {
            c["status"] == "False"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("evil/catalog"))
        });
        failed.then(|| source["status"].clone())
    })
    .await;
    assert_ne!(
        status["connectionState"]["lastObservedState"], "READY",
        "{status:#}"
    );
    assert_eq!(
        packages(&olm, &b.name, "borrow"),
        None,
        "b was handed a's catalog"
    );
}
