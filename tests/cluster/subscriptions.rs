//! Subscriptions and InstallPlans as a user drives them: `kubectl apply` of a CatalogSource
//! (served by `olm catalog serve` or `opm serve`), an OperatorGroup and a Subscription, then
//! `kubectl get`/`wait` on what OLM makes of them.
//!
//! The tests at the end need the CSV controller too (a CSV reaching Succeeded, old CSVs
//! deleted after an upgrade).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, get_json, wait_for_state};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubectl, operator_crds_lock, repo_root,
};
use super::processes::{OlmRun, Process, free_port, olm_serve, opm_serve};

const WAIT: Duration = Duration::from_secs(90);

/// A namespace with OLM, a catalog server and a READY CatalogSource `operators`.
struct Setup {
    ns: TestNamespace,
    olm: OlmRun,
    server: Process,
    port: u16,
    /// Held once the test subscribes to at or ptemplate (see `operator_crds_lock`).
    crds: std::sync::Mutex<Option<std::fs::File>>,
}

impl Setup {
    async fn new(test: &str, catalog: &Path, olm_flags: &[&str]) -> Setup {
        install_crds();
        let client = client().await;
        let ns = TestNamespace::create(&client, test).await;
        let port = free_port();
        let server = olm_serve(catalog, port);
        let mut flags = vec!["--leader-elect=false"];
        flags.extend_from_slice(olm_flags);
        let olm = OlmRun::start(&ns.name, &flags);
        apply(&catalog_source_yaml(
            &ns.name,
            "operators",
            &format!("127.0.0.1:{port}"),
            "",
        ));
        wait_for_state(&ns.name, "operators", "READY");
        Setup {
            ns,
            olm,
            server,
            port,
            crds: std::sync::Mutex::new(None),
        }
    }

    /// Takes the operator CRDs lock before anything installs the at or ptemplate CRDs.
    fn lock_crds_for(&self, package: &str) {
        if ["at", "ptemplate"].contains(&package) {
            let mut held = self.crds.lock().unwrap();
            if held.is_none() {
                *held = Some(operator_crds_lock());
            }
        }
    }

    fn name(&self) -> &str {
        &self.ns.name
    }

    fn operator_group(&self, extra_spec: &str) {
        apply(&format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: og\n  namespace: {}\nspec:\n  targetNamespaces: [{}]\n{extra_spec}",
            self.name(),
            self.name()
        ));
    }

    fn subscribe(&self, name: &str, package: &str, extra_spec: &str) {
        self.lock_crds_for(package);
        apply(&subscription_yaml(
            self.name(),
            name,
            package,
            "operators",
            extra_spec,
        ));
    }

    fn get(&self, resource: &str) -> Value {
        get_json(self.name(), resource)
    }

    fn plans(&self) -> Vec<Value> {
        self.get("installplans")["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    async fn sub_status(&self, sub: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        eventually(&format!("subscription {sub}: {what}"), WAIT, || async {
            let s = self.get(&format!("subscription/{sub}"));
            check(&s["status"]).then_some(s)
        })
        .await
    }

    async fn installed(&self, sub: &str, csv: &str) -> Value {
        self.sub_status(sub, &format!("installedCSV {csv}, AtLatestKnown"), |s| {
            s["installedCSV"] == csv && s["currentCSV"] == csv && s["state"] == "AtLatestKnown"
        })
        .await
    }

    async fn plan_phase(&self, plan: &str, phase: &str) -> Value {
        eventually(&format!("InstallPlan {plan} {phase}"), WAIT, || async {
            let p = self.get(&format!("installplan/{plan}"));
            (p["status"]["phase"] == phase).then_some(p)
        })
        .await
    }
}

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

fn subscription_yaml(
    namespace: &str,
    name: &str,
    package: &str,
    source: &str,
    extra_spec: &str,
) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  name: {package}\n  source: {source}\n  sourceNamespace: {namespace}\n{extra_spec}"
    )
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The bundles of our Rust operators (tests/cluster/operators_*.rs test those); the
/// Subscription tests below were written against the catalog before them, and keep it.
const OPERATOR_BUNDLES: [&str; 3] = ["reverse-words.v0.5.0", "at.v0.3.0", "ptemplate.v0.3.0"];

/// Our catalog without [`OPERATOR_BUNDLES`] (written once per test process).
fn our_catalog() -> PathBuf {
    static CATALOG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| catalog_subset("base", |_| true))
        .clone()
}

/// A copy of our catalog (without [`OPERATOR_BUNDLES`]) with only what `keep` accepts (bundles by name; packages whose
/// bundles all go are dropped), written as JSON into a scratch directory.
fn catalog_subset(name: &str, keep: impl Fn(&str) -> bool) -> PathBuf {
    let keep = |name: &str| keep(name) && !OPERATOR_BUNDLES.contains(&name);
    let mut content = olm::catalog::reading::load::load_path(&repo_root().join("catalog")).unwrap();
    content.bundles.retain(|b| keep(&b.name));
    for channel in &mut content.channels {
        channel.entries.retain(|e| keep(&e.name));
    }
    content.channels.retain(|c| !c.entries.is_empty());
    let packages: Vec<String> = content.bundles.iter().map(|b| b.package.clone()).collect();
    content.packages.retain(|p| packages.contains(&p.name));
    let dir = std::env::temp_dir().join(format!("olm-subset-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = content
        .to_blobs()
        .iter()
        .map(|b| serde_json::to_string(b).unwrap() + "\n")
        .collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
    dir
}

fn names(items: &[Value], path: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            i.pointer(path)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn subscribing_installs_the_bundle_and_a_steady_state_writes_nothing() {
    let s = Setup::new("sub-install", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");

    let sub = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let status = &sub["status"];
    let plan_name = status["installPlanRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(plan_name.starts_with("install-"), "{status:#}");
    assert_eq!(status["installplan"]["name"], plan_name.as_str());
    assert_eq!(status["installPlanRef"]["kind"], "InstallPlan");
    assert_eq!(status["catalogHealth"][0]["healthy"], true, "{status:#}");
    assert_eq!(
        status["catalogHealth"][0]["catalogSourceRef"]["name"],
        "operators"
    );
    let unhealthy = condition(status, "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy["status"], "False");
    assert_eq!(unhealthy["reason"], "AllCatalogSourcesHealthy");
    assert!(status["lastUpdated"].is_string());

    // One plan, Complete, with upstream's spec and steps.
    let plan = s.plan_phase(&plan_name, "Complete").await;
    assert_eq!(s.plans().len(), 1);
    assert_eq!(
        plan["spec"]["clusterServiceVersionNames"],
        serde_json::json!(["reverse-words.v0.4.0"])
    );
    assert_eq!(plan["spec"]["approval"], "Automatic");
    assert_eq!(plan["spec"]["approved"], true);
    assert_eq!(plan["spec"]["generation"], 1);
    assert_eq!(
        plan["metadata"]["ownerReferences"][0]["name"],
        "reverse-words"
    );
    assert_eq!(
        plan["status"]["catalogSources"],
        serde_json::json!(["operators"])
    );
    assert!(plan["status"]["startTime"].is_string());
    let steps = plan["status"]["plan"].as_array().unwrap();
    let kinds = names(steps, "/resource/kind");
    assert_eq!(kinds[0], "ClusterServiceVersion", "{kinds:?}");
    assert_eq!(kinds[1], "CustomResourceDefinition", "{kinds:?}");
    for step in steps {
        assert_eq!(step["resolving"], "reverse-words.v0.4.0");
        assert_eq!(step["resource"]["sourceName"], "operators");
        assert_eq!(step["resource"]["sourceNamespace"], s.name());
        assert!(step["resource"]["manifest"].is_string());
        assert!(
            step["status"] == "Created" || step["status"] == "Present",
            "{step:#}"
        );
    }
    // What the steps made: the CSV (replaces rewritten, package recorded), the CRD, RBAC.
    let csv = s.get("csv/reverse-words.v0.4.0");
    assert!(
        csv["metadata"]["annotations"]["operatorframework.io/properties"]
            .as_str()
            .unwrap()
            .contains("reverse-words"),
        "{:#}",
        csv["metadata"]
    );
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/reversewordsapps.apps.linuxera.org",
        ],
        None,
    )
    .ok();
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
    let version = sub["metadata"]["resourceVersion"].clone();
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
    let plan_version =
        s.get(&format!("installplan/{plan_name}"))["metadata"]["resourceVersion"].clone();
    assert_eq!(
        s.get("subscription/reverse-words")["metadata"]["resourceVersion"],
        version
    );
    assert_eq!(plan_version, plan["metadata"]["resourceVersion"]);
    assert_eq!(
        s.olm
            .metric(r#"olm_status_writes_total{controller="subscription"}"#),
        writes
    );
    assert_eq!(s.plans().len(), 1);
}

#[tokio::test]
async fn starting_csv_walks_the_channel_one_plan_per_hop() {
    let s = Setup::new("sub-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n",
    );
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let mut plans = s.plans();
    plans.sort_by_key(|p| p["spec"]["generation"].as_i64());
    let hops: Vec<String> = names(&plans, "/spec/clusterServiceVersionNames/0");
    // 0.1.0 → 0.2.0 (replaces) → 0.4.0 (its skipRange covers 0.2.0; nearest the head wins).
    assert_eq!(
        hops,
        [
            "reverse-words.v0.1.0",
            "reverse-words.v0.2.0",
            "reverse-words.v0.4.0"
        ]
    );
    assert_eq!(
        names(&plans, "/status/phase"),
        ["Complete", "Complete", "Complete"]
    );
    assert_eq!(
        plans
            .iter()
            .map(|p| p["spec"]["generation"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let csv = s.get("csv/reverse-words.v0.4.0");
    assert_eq!(csv["spec"]["replaces"], "reverse-words.v0.2.0");
}

#[tokio::test]
async fn a_dependency_comes_with_a_generated_subscription_in_the_same_plan() {
    let s = Setup::new("sub-deps", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    let plans = s.plans();
    assert_eq!(plans.len(), 1, "one plan: the dependency ties them");
    let plan = plans[0]["metadata"]["name"].as_str().unwrap();
    s.plan_phase(plan, "Complete").await;
    let csvs = &plans[0]["spec"]["clusterServiceVersionNames"];
    assert_eq!(
        csvs,
        &serde_json::json!(["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"])
    );
    let generated = format!("kernel-module-management-stable-operators-{}", s.name());
    let sub = s
        .installed(&generated, "kernel-module-management.v2.2.0")
        .await;
    assert_eq!(
        sub["spec"]["startingCSV"],
        "kernel-module-management.v2.2.0"
    );
    assert_eq!(sub["spec"]["installPlanApproval"], "Automatic");
    assert!(
        sub["metadata"]["annotations"]["olm.generated-by"].is_string(),
        "{:#}",
        sub["metadata"]
    );
    // It refers to the plan that created it, as upstream's generated Subscriptions do.
    assert_eq!(
        sub["status"]["installPlanRef"]["name"], plan,
        "{:#}",
        sub["status"]
    );
    assert_eq!(sub["status"]["installplan"]["name"], plan);
    // Still one plan once the generated Subscription resolves.
    assert_eq!(s.plans().len(), 1);
}

#[tokio::test]
async fn manual_approval_waits_and_never_holds_back_an_automatic_subscription() {
    let s = Setup::new("sub-manual", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  installPlanApproval: Manual\n",
    );
    s.subscribe("at", "at", "");

    // The Automatic one installs meanwhile.
    s.installed("at", "at.v0.2.0").await;
    let pending = s
        .sub_status(
            "reverse-words",
            "InstallPlanPending/RequiresApproval",
            |st| {
                condition(st, "InstallPlanPending")
                    .is_some_and(|c| c["reason"] == "RequiresApproval")
            },
        )
        .await;
    assert_eq!(pending["status"]["state"], "UpgradePending");
    assert_eq!(pending["status"]["currentCSV"], "reverse-words.v0.4.0");
    let plan = pending["status"]["installPlanRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let waiting = s.plan_phase(&plan, "RequiresApproval").await;
    assert_eq!(waiting["spec"]["approval"], "Manual");
    assert_eq!(waiting["spec"]["approved"], false);
    assert_eq!(
        waiting["spec"]["clusterServiceVersionNames"],
        serde_json::json!(["reverse-words.v0.4.0"])
    );
    assert!(
        kubectl(
            &["get", "csv", "reverse-words.v0.4.0", "-n", s.name()],
            None
        )
        .stdout()
        .is_empty(),
        "nothing installed before approval"
    );

    kubectl(
        &[
            "patch",
            "installplan",
            &plan,
            "-n",
            s.name(),
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"approved":true}}"#,
        ],
        None,
    )
    .ok();
    s.plan_phase(&plan, "Complete").await;
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(s.plans().len(), 2);
}

#[tokio::test]
async fn a_catalog_update_upgrades_the_subscription() {
    let old = catalog_subset("upgrade", |b| {
        ["reverse-words.v0.1.0", "reverse-words.v0.2.0"].contains(&b)
    });
    let mut s = Setup::new("sub-upgrade", &old, &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    s.installed("reverse-words", "reverse-words.v0.2.0").await;

    // The catalog publishes 0.4.0 (a new server on a new address).
    s.server.kill();
    let port = free_port();
    s.server = olm_serve(&our_catalog(), port);
    s.port = port;
    apply(&catalog_source_yaml(
        s.name(),
        "operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let csv = s.get("csv/reverse-words.v0.4.0");
    assert_eq!(csv["spec"]["replaces"], "reverse-words.v0.2.0");
    assert_eq!(s.plans().len(), 2);
}

async fn resolution_failed(s: &Setup, sub: &str) -> Value {
    let found = s
        .sub_status(sub, "ResolutionFailed", |st| {
            condition(st, "ResolutionFailed").is_some_and(|c| c["status"] == "True")
        })
        .await;
    condition(&found["status"], "ResolutionFailed")
        .unwrap()
        .clone()
}

async fn wait_for_warning(namespace: &str, name: &str, reason: &str) {
    super::catalog_sources::wait_for_event(namespace, name, reason).await;
}

#[tokio::test]
async fn failures_are_explained_on_the_subscription() {
    let s = Setup::new("sub-fail", &our_catalog(), &[]).await;

    // No OperatorGroup.
    s.subscribe("at", "at", "");
    let failed = resolution_failed(&s, "at").await;
    assert_eq!(failed["reason"], "ErrorPreventedResolution");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("expected 1 OperatorGroup in the namespace, found 0"),
        "{failed:#}"
    );
    wait_for_warning(s.name(), "at", "ResolutionFailed").await;
    assert!(s.plans().is_empty());

    // With one, it installs; the failures below stay with their own Subscriptions.
    s.operator_group("");
    s.installed("at", "at.v0.2.0").await;

    s.subscribe("unknown", "no-such-package", "");
    let failed = resolution_failed(&s, "unknown").await;
    assert_eq!(failed["reason"], "ConstraintsNotSatisfiable");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains("no-such-package") && message.contains("unknown"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}/operators", s.name())),
        "names the catalogs searched: {message}"
    );

    s.subscribe("nochannel", "reverse-words", "  channel: nightly\n");
    let failed = resolution_failed(&s, "nochannel").await;
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains("nightly") && message.contains("alpha") && message.contains("stable"),
        "{message}"
    );

    // A catalog that does not exist: unhealthy in upstream's words, beside the failure.
    apply(&subscription_yaml(
        s.name(),
        "nocatalog",
        "reverse-words",
        "missing",
        "",
    ));
    let status = s
        .sub_status("nocatalog", "CatalogSourcesUnhealthy True", |st| {
            condition(st, "CatalogSourcesUnhealthy").is_some_and(|c| c["status"] == "True")
        })
        .await;
    let unhealthy = condition(&status["status"], "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy["reason"], "UnhealthyCatalogSourceFound");
    assert_eq!(
        unhealthy["message"],
        format!("targeted catalogsource {}/missing missing", s.name())
    );

    // The other Subscriptions are unaffected.
    let at = s.installed("at", "at.v0.2.0").await;
    assert!(
        condition(&at["status"], "ResolutionFailed").is_none(),
        "{:#}",
        at["status"]
    );
    assert_eq!(s.plans().len(), 1);
}

#[tokio::test]
async fn a_missing_dependency_is_named() {
    let catalog = catalog_subset("nokmm", |b| !b.starts_with("kernel-module-management"));
    let s = Setup::new("sub-nodep", &catalog, &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    let failed = resolution_failed(&s, "ptemplate").await;
    assert_eq!(failed["reason"], "ConstraintsNotSatisfiable");
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("ptemplate"), "{message}");
    assert!(
        message.contains("Module") && message.contains("kmm.sigs.x-k8s.io"),
        "names the GVK: {message}"
    );
    assert!(s.plans().is_empty());

    // A CSV that provides the API, created directly (no Subscription, no catalog knows it),
    // satisfies the dependency, as upstream counts the namespace's CSVs: the plan holds
    // ptemplate alone (upstream's "OnePreExistingCRDOwner").
    use super::csv_lifecycle::{apply_crds, apply_csv};
    apply_crds("kernel-module-management", "2.2.0");
    apply_csv(s.name(), "kernel-module-management", "2.2.0");
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    let plans = s.plans();
    assert_eq!(plans.len(), 1, "{plans:#?}");
    assert_eq!(
        plans[0]["spec"]["clusterServiceVersionNames"],
        serde_json::json!(["ptemplate.v0.2.0"])
    );
}

#[tokio::test]
async fn an_unhealthy_catalog_fails_only_the_subscriptions_that_need_it() {
    let s = Setup::new("sub-unhealthy", &our_catalog(), &[]).await;
    s.operator_group("");
    // A second catalog nobody serves.
    let dead = free_port();
    apply(&catalog_source_yaml(
        s.name(),
        "broken",
        &format!("127.0.0.1:{dead}"),
        "",
    ));
    wait_for_state(s.name(), "broken", "TRANSIENT_FAILURE");
    apply(&subscription_yaml(
        s.name(),
        "needs-broken",
        "at",
        "broken",
        "",
    ));
    s.subscribe("reverse-words", "reverse-words", "");

    let rw = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    let unhealthy = condition(&rw["status"], "CatalogSourcesUnhealthy").unwrap();
    assert_eq!(unhealthy["status"], "True");
    assert!(
        unhealthy["message"].as_str().unwrap().contains("broken"),
        "{unhealthy:#}"
    );
    let health = rw["status"]["catalogHealth"].as_array().unwrap();
    assert!(
        health
            .iter()
            .any(|h| h["catalogSourceRef"]["name"] == "broken" && h["healthy"] == false),
        "{health:#?}"
    );

    let failed = resolution_failed(&s, "needs-broken").await;
    assert_eq!(failed["reason"], "ErrorPreventedResolution");
    assert!(
        failed["message"].as_str().unwrap().contains("broken"),
        "{failed:#}"
    );
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
        let s = get_json(&ns.name, "subscription/reverse-words");
        (s["status"]["installedCSV"] == "reverse-words.v0.4.0").then_some(())
    })
    .await;
    // The Subscription names its CSV once the plan created it; the plan's last steps may
    // still be going then.
    eventually("its one InstallPlan Complete", WAIT, || async {
        let plans = get_json(&ns.name, "installplans");
        let items = plans["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 1 && items[0]["status"]["phase"] == "Complete").then_some(())
    })
    .await;
}

#[tokio::test]
async fn killing_olm_at_any_phase_leaves_one_plan_and_one_csv() {
    let mut s = Setup::new("sub-crash", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: stable\n  installPlanApproval: Manual\n",
    );

    // Killed once the plan exists (whatever the Subscription's status says by then).
    let plan = eventually("a plan", WAIT, || async {
        s.plans()
            .first()
            .and_then(|p| p["metadata"]["name"].as_str().map(String::from))
    })
    .await;
    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, "RequiresApproval").await;
    s.sub_status("reverse-words", "points to the plan", |st| {
        st["installPlanRef"]["name"] == plan.as_str()
    })
    .await;
    assert_eq!(s.plans().len(), 1);

    // Approved, and killed as soon as the CSV step has run.
    s.olm.process.kill();
    kubectl(
        &[
            "patch",
            "installplan",
            &plan,
            "-n",
            s.name(),
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"approved":true}}"#,
        ],
        None,
    )
    .ok();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    eventually("the CSV", WAIT, || async {
        kubectl(
            &["get", "csv", "reverse-words.v0.4.0", "-n", s.name()],
            None,
        )
        .success()
        .then_some(())
    })
    .await;
    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, "Complete").await;
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(s.plans().len(), 1);
    let csvs = s.get("csv")["items"].as_array().unwrap().len();
    assert_eq!(csvs, 1);
    // The CSV's RBAC, not its OperatorCondition's Role (named after the CSV).
    let roles = s.get("roles")["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metadata"]["name"] != "reverse-words.v0.4.0")
        .count();
    assert!(roles <= 1, "no duplicate objects: {roles} roles");
}

#[tokio::test]
async fn killing_olm_mid_way_through_the_steps_completes_the_plan_once() {
    let mut s = Setup::new("sub-crash-steps", &our_catalog(), &[]).await;
    s.olm.process.kill();
    // The ptemplate plan has two CSVs, two CRDs, the CSVs' RBAC and the generated
    // Subscription; this process stops for good after applying the second step.
    s.olm = OlmRun::start_env(
        s.name(),
        &["--leader-elect=false"],
        &[
            ("OLM_FAULT_INJECTION", "1"),
            ("OLM_FAULT_PAUSE_AFTER_STEPS", "2"),
        ],
    );
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    eventually("the plan paused after its second step", WAIT, || async {
        s.olm
            .process
            .log_text()
            .contains("fault injection: pausing mid-way through the steps")
            .then_some(())
    })
    .await;
    let plans = s.plans();
    assert_eq!(plans.len(), 1);
    let plan = plans[0]["metadata"]["name"].as_str().unwrap().to_string();
    let steps = plans[0]["status"]["plan"].as_array().unwrap();
    let count = |kind: &str| {
        steps
            .iter()
            .filter(|s| s["resource"]["kind"] == kind)
            .count()
    };
    assert_eq!(
        [
            count("ClusterServiceVersion"),
            count("CustomResourceDefinition"),
            count("Subscription")
        ],
        [2, 2, 1]
    );
    assert!(
        count("ClusterRoleBinding") >= 1 && count("RoleBinding") >= 1,
        "{steps:#?}"
    );
    assert_ne!(plans[0]["status"]["phase"], "Complete");

    s.olm.process.kill();
    s.olm = OlmRun::start(s.name(), &["--leader-elect=false"]);
    s.plan_phase(&plan, "Complete").await;
    s.installed("ptemplate", "ptemplate.v0.2.0").await;
    csv_succeeded(&s, "ptemplate.v0.2.0").await;
    assert_eq!(s.plans().len(), 1, "one plan after the restart");
    let mut csvs = names(s.get("csv")["items"].as_array().unwrap(), "/metadata/name");
    csvs.sort();
    assert_eq!(
        csvs,
        ["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"]
    );
    let subs = s.get("subscriptions")["items"].as_array().unwrap().len();
    assert_eq!(
        subs, 2,
        "ptemplate's and the generated one for its dependency"
    );
    let service_accounts = names(
        s.get("serviceaccounts")["items"].as_array().unwrap(),
        "/metadata/name",
    );
    let mut unique = service_accounts.clone();
    unique.dedup();
    assert_eq!(service_accounts, unique);
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
        let sub = get_json(&ns.name, "subscription/at");
        let csv = sub["status"]["installedCSV"].as_str()?.to_string();
        let found = kubectl(&["get", "csv", &csv, "-n", &ns.name, "-o", "json"], None);
        let found: Value = serde_json::from_str(&found.stdout()).ok()?;
        (found["status"]["phase"] == "Succeeded" && sub["status"]["state"] == "AtLatestKnown")
            .then_some(csv)
    })
    .await;
    assert!(installed.starts_with("at.v"), "{installed}");
    let group = get_json(&ns.name, "operatorgroup/global");
    assert_eq!(group["status"]["namespaces"], serde_json::json!([""]));
    let plan = &get_json(&ns.name, "installplans")["items"][0];
    assert_eq!(
        plan["status"]["catalogSources"],
        serde_json::json!(["global-operators"])
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
    let plans = s.plans();
    assert_eq!(
        plans.len(),
        3,
        "{:#?}",
        plans
            .iter()
            .map(|p| (
                &p["spec"]["clusterServiceVersionNames"],
                &p["spec"]["generation"]
            ))
            .collect::<Vec<_>>()
    );
    let mut generations: Vec<i64> = plans
        .iter()
        .map(|p| p["spec"]["generation"].as_i64().unwrap())
        .collect();
    generations.sort();
    assert_eq!(generations, [1, 2, 3]);
}

async fn csv_succeeded(s: &Setup, csv: &str) {
    eventually(
        &format!("CSV {csv} Succeeded"),
        Duration::from_secs(180),
        || async {
            let found = kubectl(&["get", "csv", csv, "-n", s.name(), "-o", "json"], None);
            if !found.success() {
                return None;
            }
            let csv: Value = serde_json::from_str(&found.stdout()).ok()?;
            (csv["status"]["phase"] == "Succeeded").then_some(())
        },
    )
    .await;
}

// ---- End to end with the CSV controller: CSVs Succeeded, Deployments Available. ----

#[tokio::test]
async fn reverse_words_succeeds() {
    let s = Setup::new("sub-e2e", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    csv_succeeded(&s, "reverse-words.v0.4.0").await;
    kubectl(
        &[
            "wait",
            "-n",
            s.name(),
            "--for=condition=Available",
            "--timeout=120s",
            "deploy",
            "--all",
        ],
        None,
    )
    .ok();
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/reversewordsapps.apps.linuxera.org",
        ],
        None,
    )
    .ok();
    let table = kubectl(&["get", "sub,installplan,csv", "-n", s.name()], None)
        .ok()
        .stdout();
    // Upstream's columns: no phase for InstallPlans, so it is read from the object.
    assert!(
        table.contains("Succeeded") && table.contains("Automatic") && table.contains("PACKAGE"),
        "{table}"
    );
    assert_eq!(s.plans()[0]["status"]["phase"], "Complete");
    let sub = s.installed("reverse-words", "reverse-words.v0.4.0").await;
    assert_eq!(sub["status"]["state"], "AtLatestKnown");
}

#[tokio::test]
async fn starting_csv_upgrade_chain_succeeds_and_old_csvs_are_gone() {
    let s = Setup::new("sub-e2e-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n",
    );
    s.installed("reverse-words", "reverse-words.v0.4.0").await;
    csv_succeeded(&s, "reverse-words.v0.4.0").await;
    eventually("old CSVs deleted", WAIT, || async {
        (s.get("csv")["items"].as_array().unwrap().len() == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn ptemplate_dependency_succeeds_first() {
    let s = Setup::new("sub-e2e-deps", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("ptemplate", "ptemplate", "  channel: alpha\n");
    for csv in ["kernel-module-management.v2.2.0", "ptemplate.v0.2.0"] {
        csv_succeeded(&s, csv).await;
    }
    let kmm = s.get("csv/kernel-module-management.v2.2.0");
    let pt = s.get("csv/ptemplate.v0.2.0");
    let succeeded_at = |csv: &Value| {
        csv["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["phase"] == "Succeeded")
            .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
            .unwrap()
    };
    assert!(succeeded_at(&kmm) <= succeeded_at(&pt));
}

#[tokio::test]
async fn uninstall_as_upstream_documents_keeps_crds() {
    let s = Setup::new("sub-e2e-uninstall", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    csv_succeeded(&s, "reverse-words.v0.4.0").await;
    kubectl(&["delete", "sub", "reverse-words", "-n", s.name()], None).ok();
    kubectl(
        &["delete", "csv", "reverse-words.v0.4.0", "-n", s.name()],
        None,
    )
    .ok();
    eventually("the Deployment gone", WAIT, || async {
        s.get("deploy")["items"]
            .as_array()
            .unwrap()
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(kubectl(&["get", "crd", "reversewordsapps.apps.linuxera.org"], None).success());
}

/// Our catalog with each bundle passed through `edit` (its objects decoded), as JSON in a
/// scratch directory.
fn catalog_edited(name: &str, edit: impl Fn(&str, &mut Vec<Value>)) -> PathBuf {
    use base64::Engine;
    use olm::catalog::model::fbc::{PROP_BUNDLE_OBJECT, Property};
    let engine = base64::engine::general_purpose::STANDARD;
    let dir = catalog_subset(name, |_| true);
    let mut content = olm::catalog::reading::load::load_path(&dir).unwrap();
    for bundle in &mut content.bundles {
        let mut objects: Vec<Value> = bundle
            .properties_of(PROP_BUNDLE_OBJECT)
            .map(|v| {
                serde_json::from_slice(&engine.decode(v["data"].as_str().unwrap()).unwrap())
                    .unwrap()
            })
            .collect();
        edit(&bundle.name, &mut objects);
        bundle.properties.retain(|p| p.type_ != PROP_BUNDLE_OBJECT);
        for object in objects {
            bundle.properties.push(Property::new(
                PROP_BUNDLE_OBJECT,
                serde_json::json!({"data": engine.encode(object.to_string())}),
            ));
        }
    }
    let text: String = content
        .to_blobs()
        .iter()
        .map(|b| serde_json::to_string(b).unwrap() + "\n")
        .collect();
    std::fs::write(dir.join("catalog.json"), text).unwrap();
    dir
}

#[tokio::test]
async fn failing_steps_retry_until_the_timeout_and_unknown_kinds_fail_at_once() {
    let catalog = catalog_edited("badsteps", |bundle, objects| match bundle {
        "at.v0.2.0" => objects.push(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "broken-svc"},
            "spec": {"type": "Bogus", "ports": [{"port": 80}]},
        })),
        "reverse-words.v0.4.0" => objects.push(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sneaky"},
        })),
        _ => {}
    });
    let s = Setup::new(
        "sub-badsteps",
        &catalog,
        &["--install-plan-retry-timeout", "3s"],
    )
    .await;
    s.operator_group("");
    s.subscribe("at", "at", "");
    s.subscribe("reverse-words", "reverse-words", "");
    for (sub, needle) in [
        ("at", "Service broken-svc"),
        ("reverse-words", "kind Deployment (sneaky) is not supported"),
    ] {
        let found = s
            .sub_status(sub, "InstallPlanFailed", |st| {
                condition(st, "InstallPlanFailed").is_some()
            })
            .await;
        let failed = condition(&found["status"], "InstallPlanFailed").unwrap();
        let message = failed["message"].as_str().unwrap();
        assert!(message.contains(needle), "{sub}: {message}");
        assert_eq!(failed["reason"], "InstallComponentFailed");
        let plan = found["status"]["installPlanRef"]["name"].as_str().unwrap();
        let plan = s.plan_phase(plan, "Failed").await;
        assert!(plan["status"]["message"].as_str().unwrap().contains(needle));
    }
    let at_plan = s.get("subscription/at")["status"]["installPlanRef"]["name"].clone();
    let message =
        s.get(&format!("installplan/{}", at_plan.as_str().unwrap()))["status"]["message"].clone();
    assert!(
        message.as_str().unwrap().contains("retry timeout"),
        "{message}"
    );
}

/// A CRD someone else last applied server-side (as `kubectl apply --server-side` does) is
/// still updated by the plan: the catalog's manifest wins, as upstream's updates do.
#[tokio::test]
async fn a_crd_applied_by_someone_else_server_side_is_updated_without_conflict() {
    const CRD: &str = "reversewordsapps.apps.linuxera.org";
    const MARK: &str = "last applied server-side by another manager";
    let s = Setup::new("sub-crd-owner", &our_catalog(), &[]).await;
    s.operator_group("");
    let manifest = repo_root()
        .join("bundles/reverse-words/0.4.0/manifests/apps.linuxera.org_reversewordsapps.yaml");
    let mut crd: Value = serde_yaml::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    // Only a description differs: harmless for the tests that share this CRD.
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = MARK.into();
    kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=someone-else",
            "-f",
            "-",
        ],
        Some(&serde_json::to_string(&crd).unwrap()),
    )
    .ok();
    s.subscribe("reverse-words", "reverse-words", "  channel: stable\n");
    let plan = s
        .sub_status("reverse-words", "an InstallPlan", |st| {
            st["installPlanRef"]["name"].is_string()
        })
        .await["status"]["installPlanRef"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    s.plan_phase(&plan, "Complete").await;
    let found = get_json("default", &format!("crd/{CRD}"));
    assert_ne!(
        found["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"],
        MARK
    );
}

#[tokio::test]
async fn crd_upgrades_that_lose_data_are_refused() {
    let old = catalog_subset("crd-old", |b| b == "at.v0.1.0");
    let mut s = Setup::new("sub-crd", &old, &[]).await;
    s.operator_group("");
    s.subscribe("at", "at", "");
    s.installed("at", "at.v0.1.0").await;
    apply(&format!(
        "apiVersion: cnat.d2iq.com/v1alpha1\nkind: At\nmetadata:\n  name: a1\n  namespace: {}\nspec:\n  schedule: \"2030-01-01T00:00:00Z\"\n",
        s.name()
    ));

    // The next version's schema requires a field the existing object lacks.
    let stricter = catalog_edited("crd-strict", |bundle, objects| {
        if bundle == "at.v0.2.0" {
            for o in objects
                .iter_mut()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
            {
                o["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
                    serde_json::json!(["command"]);
            }
        }
    });
    let serve = |dir: &Path, s: &mut Setup| {
        s.server.kill();
        let port = free_port();
        s.server = olm_serve(dir, port);
        s.port = port;
        apply(&catalog_source_yaml(
            s.name(),
            "operators",
            &format!("127.0.0.1:{port}"),
            "",
        ));
    };
    serve(&stricter, &mut s);
    let found = s
        .sub_status("at", "InstallPlanFailed", |st| {
            condition(st, "InstallPlanFailed").is_some()
        })
        .await;
    let message = condition(&found["status"], "InstallPlanFailed").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("ats.cnat.d2iq.com")
            && message.contains("v1alpha1")
            && message.contains(&format!("{}/a1", s.name()))
            && message.contains("command"),
        "{message}"
    );

    // Nothing changed in the cluster's CRD.
    let crd = get_json("default", "crd/ats.cnat.d2iq.com");
    assert!(
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            .get("required")
            .is_none()
    );
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
        s.plans().into_iter().find(|p| {
            p["status"]["message"].as_str().is_some_and(|m| {
                m.contains(r#"cannot create resource "clusterserviceversions" in API group "operators.coreos.com" in the namespace"#)
                    && m.contains("installer")
            })
        })
    })
    .await;
    assert_eq!(plan["status"]["phase"], "Installing");
    let steps = plan["status"]["plan"].as_array().unwrap();
    assert!(
        steps.iter().all(|step| step["status"] == "Unknown"),
        "{steps:?}"
    );
    // Granted everything in the namespace, it completes.
    apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: installer\n  namespace: {0}\nrules:\n- apiGroups: [\"*\"]\n  resources: [\"*\"]\n  verbs: [\"*\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: installer\n  namespace: {0}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: installer\nsubjects:\n- kind: ServiceAccount\n  name: installer\n  namespace: {0}\n",
        s.name()
    ));
    s.plan_phase(plan["metadata"]["name"].as_str().unwrap(), "Complete")
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
        super::deploy::kubeconfig_as("system:serviceaccount:olm:olm-operator", &ns.name);
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
            let s = get_json(&ns.name, "subscription/ptemplate");
            let plans = get_json(&ns.name, "installplans");
            (s["status"]["installedCSV"] == "ptemplate.v0.2.0"
                && plans["items"][0]["status"]["phase"] == "Complete")
                .then_some(())
        },
    )
    .await;
}

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
    let plan = s.plan_phase("by-hand", "Complete").await;
    let statuses: Vec<&str> = plan["status"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| step["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["Created", "Created"], "{plan:#}");
    let created = s.get("configmap/by-hand-settings");
    assert_eq!(created["data"]["mode"], "fast");
    assert_eq!(
        created["metadata"]["ownerReferences"][0]["name"],
        "by-hand.v1.0.0"
    );
    assert_eq!(created["metadata"]["labels"]["olm.managed"], "true");
}

/// Writes an InstallPlan as upstream's tests and tools do: the spec, then `status.plan`
/// with inline manifests (steps `(group, version, kind, manifest)` resolving `csv`) and
/// phase Installing.
fn write_plan_as_upstream(
    namespace: &str,
    name: &str,
    csv: &str,
    steps: &[(&str, &str, &str, &Value)],
) {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(group, version, kind, manifest)| {
            serde_json::json!({
                "resolving": csv, "status": "Unknown",
                "resource": {"sourceName": "", "sourceNamespace": "", "group": group,
                             "version": version, "kind": kind,
                             "name": manifest["metadata"]["name"],
                             "manifest": manifest.to_string()}
            })
        })
        .collect();
    super::csv_lifecycle::hand_written_plan(namespace, name, &steps);
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
    let uid = |name: &str| s.get(&format!("csv/{name}"))["metadata"]["uid"].clone();
    let csv_ref = |name: &str| {
        serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
                           "kind": "ClusterServiceVersion", "name": name})
    };
    // A ServiceAccount owned by the old CSV moves to the new one: both stay owners.
    let mut old_owner = csv_ref("csv-old");
    old_owner["uid"] = uid("csv-old");
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
    s.plan_phase("moves", "Complete").await;
    let owners: Vec<(String, Value)> = s.get("serviceaccount/moved")["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["name"].as_str().unwrap().to_string(), o["uid"].clone()))
        .collect();
    assert_eq!(
        owners,
        [
            ("csv-old".to_string(), uid("csv-old")),
            ("csv-new".to_string(), uid("csv-new"))
        ]
    );
    assert_eq!(
        s.get("service/existing")["metadata"]["labels"]["updated"],
        "yes"
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
        let plan = s.get("installplan/waits");
        plan["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("csv-later"))
            .then_some(())
    })
    .await;
    apply(&csv_yaml("csv-later"));
    s.plan_phase("waits", "Complete").await;
    assert_eq!(
        s.get("configmap/owned-later")["metadata"]["ownerReferences"][0]["uid"],
        uid("csv-later")
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
    let installed = |plan: &Value| {
        plan["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Installed")
            .cloned()
    };
    let waiting = eventually("the plan saying it has no group", WAIT, || async {
        let plan = s.get("installplan/early");
        installed(&plan)
            .filter(|c| c["status"] == "False")
            .map(|c| (plan["status"]["phase"].clone(), c))
    })
    .await;
    assert_eq!(waiting.0, "Installing");
    assert_eq!(waiting.1["reason"], "InstallCheckFailed");
    assert_eq!(
        waiting.1["message"],
        "no operator group found that is managing this namespace"
    );
    s.operator_group("");
    let plan = s.plan_phase("early", "Complete").await;
    assert_eq!(installed(&plan).unwrap()["status"], "True", "{plan:#}");
    s.get("configmap/waits-for-group");
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
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
            "--timeout=60s",
        ],
        None,
    )
    .ok();
    let name = format!("old-{}", s.name());
    let object = serde_json::json!({"apiVersion": format!("{group}/v1"), "kind": "ConsoleQuickStart",
        "metadata": {"name": name}});
    write_plan_as_upstream(
        s.name(),
        "warned",
        "",
        &[(&group, "v1", "ConsoleQuickStart", &object)],
    );
    s.plan_phase("warned", "Complete").await;
    let event = eventually("the AppliedWithWarnings Event", WAIT, || async {
        let events = get_json(s.name(), "events");
        events["items"]
            .as_array()?
            .iter()
            .find(|e| e["reason"] == "AppliedWithWarnings")
            .cloned()
    })
    .await;
    kubectl(&["delete", "crd", &crd_name], None).ok();
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["kind"], "InstallPlan");
    assert_eq!(event["involvedObject"]["name"], "warned");
    assert_eq!(event["involvedObject"]["fieldPath"], "status.plan[0]");
    let message = event["message"].as_str().unwrap();
    assert_eq!(
        message,
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
    let crd = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "tests", "singular": "test", "kind": "Test", "listKind": "TestList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    let alongside = |crd: &Value| -> Vec<String> {
        let mut values: Vec<String> = crd["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with("operatorframework.io/installed-alongside-"))
            .map(|(_, v)| v.as_str().unwrap_or_default().to_string())
            .collect();
        values.sort();
        values
    };
    for (plan, csv) in [("plan-one", "csv-one"), ("plan-two", "csv-two")] {
        apply(&format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {csv}\n  namespace: {}\nspec:\n  displayName: {csv}\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
            s.name()
        ));
        write_plan_as_upstream(
            s.name(),
            plan,
            csv,
            &[(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                &crd,
            )],
        );
        s.plan_phase(plan, "Complete").await;
    }
    let crd_json = || {
        let out = kubectl(
            &[
                "get",
                &format!("crd/{crd_name}"),
                "-o",
                "json",
                "--show-managed-fields",
            ],
            None,
        )
        .ok();
        serde_json::from_str::<Value>(&out.stdout()).unwrap()
    };
    let written = crd_json();
    write_plan_as_upstream(
        s.name(),
        "plan-three",
        "csv-one",
        &[(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            &crd,
        )],
    );
    s.plan_phase("plan-three", "Complete").await;
    let after_third = crd_json();
    kubectl(&["delete", "crd", &crd_name], None).ok();
    let managers: Vec<(String, String)> = written["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let text = |field: &str| m[field].as_str().unwrap_or_default().to_string();
            (text("manager"), text("operation"))
        })
        .collect();
    assert!(
        managers.contains(&("olm-installplan".into(), "Update".into())),
        "{managers:?}"
    );
    assert_eq!(
        after_third["metadata"]["resourceVersion"], written["metadata"]["resourceVersion"],
        "a plan with nothing to add changed the CRD"
    );
    assert_eq!(
        alongside(&written),
        [
            format!("{}/csv-one", s.name()),
            format!("{}/csv-two", s.name())
        ],
        "{:#}",
        written["metadata"]
    );
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
    let kinds_of = |operator: &Value| -> Vec<String> {
        operator["status"]["components"]["refs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let operator = eventually("the Operator lists its components", WAIT, || async {
        let operator = kubectl(&["get", "operator", &name, "-o", "json"], None);
        if !operator.success() {
            return None;
        }
        let operator: Value = serde_json::from_str(&operator.stdout()).ok()?;
        let kinds = kinds_of(&operator);
        [
            "ClusterServiceVersion",
            "CustomResourceDefinition",
            "Deployment",
            "InstallPlan",
            "ServiceAccount",
            "Subscription",
        ]
        .iter()
        .all(|k| kinds.iter().any(|found| found == k))
        .then_some(())?;
        // And the CSV as it is now, Succeeded (the status follows its components).
        let csv_listed_succeeded = operator["status"]["components"]["refs"]
            .as_array()?
            .iter()
            .any(|r| {
                r["kind"] == "ClusterServiceVersion" && r["conditions"][0]["type"] == "Succeeded"
            });
        csv_listed_succeeded.then_some(operator)
    })
    .await;
    assert_eq!(
        operator["status"]["components"]["labelSelector"]["matchExpressions"][0]["key"],
        label.as_str()
    );
    let csv_ref = operator["status"]["components"]["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "ClusterServiceVersion")
        .unwrap();
    assert_eq!(csv_ref["conditions"][0]["type"], "Succeeded", "{csv_ref:#}");
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
        let operator: Value = serde_json::from_str(
            &kubectl(&["get", "operator", &name, "-o", "json"], None)
                .ok()
                .stdout(),
        )
        .ok()?;
        let refs = operator["status"]["components"]["refs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for r in &refs {
            let kind = r["kind"].as_str().unwrap_or_default();
            let object = r["name"].as_str().unwrap_or_default();
            if kind == "CustomResourceDefinition" {
                kubectl(&["label", "crd", object, &format!("{label}-")], None);
            } else if let Some(namespace) = r["namespace"].as_str() {
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
        kubectl(&["get", "operator", &format!("at.{}", s.name())], None)
            .success()
            .then_some(())
    })
    .await;
    assert!(
        !kubectl(&["get", "operator", &name], None).success(),
        "{name} came back"
    );
}

/// The two races of issue 30, watched over Manual hops approved one at a time: while a CSV
/// of the package is Succeeded the Subscription's `installedCSV` is never empty, and no CSV
/// stays Replacing more than a few seconds after its replacement Succeeded.
#[tokio::test]
async fn hop_by_hop_installed_csv_is_never_lost_and_replaced_csvs_go() {
    let s = Setup::new("sub-manual-hops", &our_catalog(), &[]).await;
    s.operator_group("");
    s.subscribe(
        "reverse-words",
        "reverse-words",
        "  channel: alpha\n  startingCSV: reverse-words.v0.1.0\n  installPlanApproval: Manual\n",
    );
    let started = std::time::Instant::now();
    let mut approved = std::collections::BTreeSet::new();
    let mut violations = Vec::new();
    let mut replacing_since: std::collections::BTreeMap<String, std::time::Instant> =
        std::collections::BTreeMap::new();
    let mut empty_since: Option<std::time::Instant> = None;
    loop {
        assert!(
            started.elapsed() < WAIT * 2,
            "hops did not finish: {violations:?}"
        );
        let sub = s.get("subscription/reverse-words");
        let csvs = s.get("csvs")["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let phase = |csv: &Value| csv["status"]["phase"].as_str().unwrap_or("").to_string();
        let installed = sub["status"]["installedCSV"].as_str().unwrap_or("");
        let succeeded: Vec<String> = csvs
            .iter()
            .filter(|c| phase(c) == "Succeeded")
            .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        // The Subscription catches up with a CSV's phase within a round or two; empty for
        // longer while a CSV of it is Succeeded is the race.
        if !succeeded.is_empty() && installed.is_empty() {
            let since = *empty_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > Duration::from_secs(5) {
                violations.push(format!(
                    "installedCSV empty 5 s while {succeeded:?} Succeeded"
                ));
                empty_since = None;
            }
        } else {
            empty_since = None;
        }
        for old in csvs.iter().filter(|c| phase(c) == "Replacing") {
            let name = old["metadata"]["name"].as_str().unwrap().to_string();
            let replaced_by_succeeded = csvs
                .iter()
                .any(|c| c["spec"]["replaces"] == name.as_str() && phase(c) == "Succeeded");
            if replaced_by_succeeded {
                let since = *replacing_since
                    .entry(name.clone())
                    .or_insert_with(std::time::Instant::now);
                if since.elapsed() > Duration::from_secs(10) {
                    violations.push(format!(
                        "{name} still Replacing 10 s after its replacement Succeeded"
                    ));
                    replacing_since.remove(&name);
                }
            }
        }
        if installed == "reverse-words.v0.4.0" && sub["status"]["state"] == "AtLatestKnown" {
            break;
        }
        for plan in s.plans() {
            let name = plan["metadata"]["name"].as_str().unwrap().to_string();
            if plan["status"]["phase"] == "RequiresApproval" && approved.insert(name.clone()) {
                // While the next hop waits for approval, installedCSV names the CSV that is
                // Succeeded (what `kubectl operator uninstall` deletes), not the old one.
                if !succeeded.is_empty() {
                    s.sub_status("reverse-words", "installedCSV is the Succeeded CSV", |st| {
                        let csvs = s.get("csvs")["items"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        csvs.iter().any(|c| {
                            c["status"]["phase"] == "Succeeded"
                                && c["metadata"]["name"] == st["installedCSV"]
                        })
                    })
                    .await;
                }
                kubectl(
                    &[
                        "patch",
                        "installplan",
                        &name,
                        "-n",
                        s.name(),
                        "--type",
                        "merge",
                        "-p",
                        r#"{"spec":{"approved":true}}"#,
                    ],
                    None,
                )
                .ok();
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
    assert_eq!(approved.len(), 3, "one approval per hop: {approved:?}");
}

/// A step of a supported kind that the API server does not serve (no OpenShift console
/// here) fails the plan once the retry timeout has passed, in upstream's words. (A kind
/// outside upstream's list fails at once: `security::a_plan_may_create_only_upstreams_kinds…`.)
#[tokio::test]
async fn a_step_of_an_unserved_kind_fails_after_the_retry_timeout() {
    let s = Setup::new(
        "ip-unserved",
        &our_catalog(),
        &["--install-plan-retry-timeout", "3s"],
    )
    .await;
    s.operator_group("");
    let widget = serde_json::json!({
        "apiVersion": "console.openshift.io/v1", "kind": "ConsoleYAMLSample", "metadata": {"name": "w"}
    });
    write_plan_as_upstream(
        s.name(),
        "unserved",
        "nothing.v1",
        &[("console.openshift.io", "v1", "ConsoleYAMLSample", &widget)],
    );
    let plan = s.plan_phase("unserved", "Failed").await;
    let message = plan["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("api-server resource not found installing ConsoleYAMLSample w"),
        "{message}"
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
    kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "crd/servicemonitors.monitoring.coreos.com",
            "--timeout=60s",
        ],
        None,
    )
    .ok();
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
    let plan = s.plan_phase("kinds", "Complete").await;
    let statuses: Vec<&str> = plan["status"]["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|step| step["status"].as_str())
        .collect();
    assert_eq!(statuses, ["Created", "Created", "Created"], "{plan}");
    assert_eq!(
        s.get("servicemonitor/metrics")["spec"]["endpoints"][0]["port"],
        "https"
    );
    assert_eq!(s.get("poddisruptionbudget/op")["spec"]["minAvailable"], 1);
}
