//! Subscriptions and InstallPlans as a user drives them: `kubectl apply` of a CatalogSource
//! (served by `olm catalog serve` or `opm serve`), an OperatorGroup and a Subscription, then
//! what OLM makes of them, read as the crate's API types.
//!
//! By topic: installing ([`install`]), dependencies ([`dependencies`]), Manual approval
//! ([`approval`]), upgrades and the CRDs they carry ([`upgrades`]), failures and how they
//! are explained ([`failures`]), `olm run` killed mid-way ([`restarts`]), InstallPlans
//! written by hand as upstream's tools write them ([`plans`]), and end to end with the CSV
//! controller: CSVs Succeeded, Deployments Available ([`end_to_end`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use olm::api::{
    ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, Subscription,
    SubscriptionCondition, SubscriptionState,
};
use serde_json::Value;

use crate::catalog_sources::{catalog_source_yaml, get_json, wait_for_state};
use crate::harness::{
    CsvReads, SubscriptionReads, TestNamespace, client, eventually, install_crds, kubectl,
    operator_crds_lock, repo_root,
};
use crate::processes::{OlmRun, Process, free_port, olm_serve};

mod approval;
mod dependencies;
mod end_to_end;
mod failures;
mod install;
mod plans;
mod policies;
mod restarts;
mod rollback;
mod upgrades;

const WAIT: Duration = Duration::from_secs(90);

/// A namespace with OLM, a catalog server and a READY CatalogSource `operators`.
struct Setup {
    ns: TestNamespace,
    olm: OlmRun,
    server: Process,
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

    /// Serves `catalog` from a new server on a new address, and points `operators` at it.
    fn serve(&mut self, catalog: &Path) {
        self.server.kill();
        let port = free_port();
        self.server = olm_serve(catalog, port);
        apply(&catalog_source_yaml(
            self.name(),
            "operators",
            &format!("127.0.0.1:{port}"),
            "",
        ));
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

    /// Approves a Manual plan as a user does.
    fn approve(&self, plan: &str) {
        kubectl(
            &[
                "patch",
                "installplan",
                plan,
                "-n",
                self.name(),
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"approved":true}}"#,
            ],
            None,
        )
        .ok();
    }

    /// `kubectl get RESOURCE -o json` in the namespace, for kinds the crate has no type of.
    fn get(&self, resource: &str) -> Value {
        get_json(self.name(), resource)
    }

    async fn subscription(&self, name: &str) -> Subscription {
        self.ns.subscription(name).await
    }

    async fn plan(&self, name: &str) -> InstallPlan {
        self.ns.install_plan(name).await
    }

    /// The namespace's InstallPlans, oldest first.
    async fn plans(&self) -> Vec<InstallPlan> {
        self.ns.install_plans().await
    }

    async fn csv(&self, name: &str) -> ClusterServiceVersion {
        self.ns.csv(name).await
    }

    async fn csvs(&self) -> Vec<ClusterServiceVersion> {
        self.ns.csvs().await
    }

    async fn sub_status(
        &self,
        sub: &str,
        what: &str,
        check: impl Fn(&Subscription) -> bool,
    ) -> Subscription {
        eventually(&format!("subscription {sub}: {what}"), WAIT, || async {
            let found = self.ns.get_opt::<Subscription>(sub).await?;
            check(&found).then_some(found)
        })
        .await
    }

    async fn installed(&self, sub: &str, csv: &str) -> Subscription {
        self.sub_status(sub, &format!("installedCSV {csv}, AtLatestKnown"), |s| {
            s.installed_csv() == csv
                && s.current_csv() == csv
                && s.state() == SubscriptionState::AtLatestKnown
        })
        .await
    }

    /// The Subscription's ResolutionFailed condition, once it is True.
    async fn resolution_failed(&self, sub: &str) -> SubscriptionCondition {
        let failed = |s: &Subscription| {
            s.condition("ResolutionFailed")
                .is_some_and(|c| c.status == "True")
        };
        let found = self.sub_status(sub, "ResolutionFailed", failed).await;
        found.condition("ResolutionFailed").unwrap().clone()
    }

    async fn plan_phase(&self, plan: &str, phase: InstallPlanPhase) -> InstallPlan {
        eventually(&format!("InstallPlan {plan} {phase:?}"), WAIT, || async {
            let found = self.ns.get_opt::<InstallPlan>(plan).await?;
            (found.phase() == phase).then_some(found)
        })
        .await
    }

    async fn csv_gone(&self, csv: &str) {
        eventually(&format!("CSV {csv} gone"), WAIT, || async {
            let found = self.ns.get_opt::<ClusterServiceVersion>(csv).await;
            found.is_none().then_some(())
        })
        .await;
    }

    async fn csv_succeeded(&self, csv: &str) {
        eventually(
            &format!("CSV {csv} Succeeded"),
            Duration::from_secs(180),
            || async {
                let found = self.ns.get_opt::<ClusterServiceVersion>(csv).await?;
                (found.phase() == CsvPhase::Succeeded).then_some(())
            },
        )
        .await;
    }
}

fn apply(yaml: &str) {
    kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
}

/// An `At` a test made that other tests' schemas would refuse: deleted when the test ends,
/// pass or panic, before its `Setup` releases the CRDs lock (declare it after the Setup).
/// A namespace being deleted keeps its objects for a while, and the other tests of the
/// `at` CRD list every `At` of the cluster against the schemas they install.
struct AtGuard {
    namespace: String,
    name: String,
}

impl AtGuard {
    fn apply(namespace: &str, name: &str, spec: &str) -> AtGuard {
        apply(&format!(
            "apiVersion: cnat.d2iq.com/v1alpha1\nkind: At\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n{spec}"
        ));
        AtGuard {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl Drop for AtGuard {
    fn drop(&mut self) {
        let args = [
            "delete",
            "at",
            &self.name,
            "-n",
            &self.namespace,
            "--wait=true",
        ];
        kubectl(&args, None).ok();
    }
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

/// The bundles of our Rust operators (tests/cluster/operators_*.rs test those); the
/// Subscription tests were written against the catalog before them, and keep it.
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
    crate::csv_lifecycle::hand_written_plan(namespace, name, &steps);
}
