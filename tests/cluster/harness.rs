//! The one harness every cluster test uses: a client for the control plane started by
//! `hack/cluster/up`, the OLM CRDs installed once, a namespace per test that is deleted when
//! the test ends (even when it panics) and reads its objects as the crate's API types, and
//! `kubectl` run the way a user runs it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{Condition, conditions};
use kube::{Client, Config, Resource};
use olm::api::{
    ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanCondition, Step, Subscription,
    SubscriptionCondition, SubscriptionState,
};
use serde::de::DeserializeOwned;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The kubeconfig of the test cluster: `$KUBECONFIG`, else the one `hack/cluster/up` writes.
pub fn kubeconfig_path() -> PathBuf {
    std::env::var_os("KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/cluster/kubeconfig"))
}

/// `olm` as built by cargo for this test run.
pub fn olm_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_olm"))
}

pub struct Kubectl {
    pub output: Output,
}

impl Kubectl {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn success(&self) -> bool {
        self.output.status.success()
    }
    /// Panics with both streams when kubectl failed.
    pub fn ok(self) -> Self {
        assert!(
            self.success(),
            "kubectl failed:\nstdout: {}\nstderr: {}",
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// Runs kubectl against the test cluster, with `stdin` piped in when given.
pub fn kubectl(args: &[&str], stdin: Option<&str>) -> Kubectl {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is on PATH");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    Kubectl {
        output: child.wait_with_output().unwrap(),
    }
}

pub async fn client() -> Client {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| {
        panic!(
            "no test cluster kubeconfig at {}: {e}; start one with hack/cluster/up",
            path.display()
        )
    });
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("valid kubeconfig");
    Client::try_from(config).expect("client from kubeconfig")
}

/// Installs the OLM CRDs from `olm crds` and waits until they are Established. Server-side
/// apply, because test processes may race to create them; idempotent, so every test calls it.
pub fn install_crds() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(install_crds_now);
}

fn install_crds_now() {
    let crds = Command::new(olm_bin())
        .arg("crds")
        .output()
        .expect("olm crds runs");
    assert!(
        crds.status.success(),
        "olm crds failed: {}",
        String::from_utf8_lossy(&crds.stderr)
    );
    let yaml = String::from_utf8(crds.stdout).unwrap();
    kubectl(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&yaml),
    )
    .ok();
    for crd in OLM_CRDS {
        kubectl(
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd",
                crd,
            ],
            None,
        )
        .ok();
    }
    // The test cluster's copied-CSV switch, whatever an earlier run or `hack/demo` left (see
    // `olm_config_lock`).
    let _switch = olm_config_lock(false);
    kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager",
            TEST_CLUSTER_MANAGER,
            "-f",
            "-",
        ],
        Some(TEST_CLUSTER_OLM_CONFIG),
    )
    .ok();
}

pub const OLM_CRDS: [&str; 6] = [
    "catalogsources.operators.coreos.com",
    "clusterserviceversions.operators.coreos.com",
    "installplans.operators.coreos.com",
    "olmconfigs.operators.coreos.com",
    "operatorgroups.operators.coreos.com",
    "subscriptions.operators.coreos.com",
];

/// Who sets the test cluster's OLMConfig (server-side apply).
const TEST_CLUSTER_MANAGER: &str = "olm-rs-tests";

/// The test cluster's OLMConfig: no copied CSVs for AllNamespaces operators.
const TEST_CLUSTER_OLM_CONFIG: &str = "apiVersion: operators.coreos.com/v1
kind: OLMConfig
metadata: {name: cluster}
spec: {features: {disableCopiedCSVs: true}}
";

/// A namespace owned by one test; deleted (without waiting) when dropped. It reads the
/// objects in it typed (see "Typed reads" below).
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl TestNamespace {
    pub async fn create(client: &Client, test: &str) -> Self {
        Self::create_annotated(client, test, serde_json::json!({})).await
    }

    /// A namespace whose `annotations` the admission plugins of `hack/cluster/up` read (the
    /// real node's selector and toleration: see `real_node::namespace`).
    pub async fn create_annotated(
        client: &Client,
        test: &str,
        annotations: serde_json::Value,
    ) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let unique = format!(
            "{:x}{:x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
                + (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_micros())
        );
        let mut name = format!("t-{test}-{unique}").replace('_', "-");
        name.truncate(63);
        let name = name.trim_end_matches('-').to_string();
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": { "olm-rs.dev/test": "true" },
                "annotations": annotations,
            }
        }))
        .unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating test namespace {name}: {e}"));
        TestNamespace {
            name,
            client: client.clone(),
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        // kubectl rather than the async client: Drop runs also while unwinding a panic.
        let _ = kubectl(
            &[
                "delete",
                "namespace",
                &self.name,
                "--wait=false",
                "--ignore-not-found",
            ],
            None,
        );
    }
}

/// Polls `check` until it returns Some, or panics after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---- Typed reads: the crate's API types (`olm::api`, k8s-openapi) through kube's `Api<T>`.

/// A namespaced kind the tests read typed.
pub trait Namespaced:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

impl TestNamespace {
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn api<K: Namespaced>(&self) -> Api<K> {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// One object of this namespace; None while it does not exist.
    pub async fn get_opt<K: Namespaced>(&self, name: &str) -> Option<K> {
        self.api::<K>()
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {} {}/{name}: {e}", K::kind(&()), self.name))
    }

    /// One object of this namespace; panics naming it when it does not exist.
    pub async fn get<K: Namespaced>(&self, name: &str) -> K {
        self.get_opt(name)
            .await
            .unwrap_or_else(|| panic!("no {} {}/{name}", K::kind(&()), self.name))
    }

    /// Every object of a kind in this namespace.
    pub async fn list<K: Namespaced>(&self) -> Vec<K> {
        self.api::<K>()
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing {} in {}: {e}", K::plural(&()), self.name))
            .items
    }

    pub async fn csv(&self, name: &str) -> ClusterServiceVersion {
        self.get(name).await
    }

    pub async fn csvs(&self) -> Vec<ClusterServiceVersion> {
        self.list().await
    }

    pub async fn subscription(&self, name: &str) -> Subscription {
        self.get(name).await
    }

    pub async fn install_plan(&self, name: &str) -> InstallPlan {
        self.get(name).await
    }

    /// The namespace's InstallPlans, oldest first (by `spec.generation`).
    pub async fn install_plans(&self) -> Vec<InstallPlan> {
        let mut plans: Vec<InstallPlan> = self.list().await;
        plans.sort_by_key(|p| p.spec.generation);
        plans
    }
}

/// A CRD by name; None while it does not exist.
pub async fn crd(client: &Client, name: &str) -> Option<CustomResourceDefinition> {
    Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap_or_else(|e| panic!("reading CRD {name}: {e}"))
}

/// Whether the CRD exists with its Established condition True.
pub async fn crd_established(client: &Client, name: &str) -> bool {
    conditions::is_crd_established().matches_object(crd(client, name).await.as_ref())
}

/// Waits (a minute at most) until the CRD is Established.
pub async fn wait_crd_established(client: &Client, name: &str) {
    eventually(
        &format!("CRD {name} Established"),
        Duration::from_secs(60),
        || async { crd_established(client, name).await.then_some(()) },
    )
    .await;
}

/// A Subscription's status as tests read it: what is unset reads as empty.
pub trait SubscriptionReads {
    fn installed_csv(&self) -> &str;
    fn current_csv(&self) -> &str;
    fn state(&self) -> SubscriptionState;
    /// `status.installPlanRef.name`.
    fn plan_name(&self) -> Option<&str>;
    fn condition(&self, type_: &str) -> Option<&SubscriptionCondition>;
}

impl SubscriptionReads for Subscription {
    fn installed_csv(&self) -> &str {
        let status = self.status.as_ref();
        status
            .and_then(|s| s.installed_csv.as_deref())
            .unwrap_or_default()
    }

    fn current_csv(&self) -> &str {
        let status = self.status.as_ref();
        status
            .and_then(|s| s.current_csv.as_deref())
            .unwrap_or_default()
    }

    fn state(&self) -> SubscriptionState {
        let status = self.status.as_ref();
        status.and_then(|s| s.state).unwrap_or_default()
    }

    fn plan_name(&self) -> Option<&str> {
        let reference = self.status.as_ref()?.install_plan_ref.as_ref()?;
        reference.name.as_deref()
    }

    fn condition(&self, type_: &str) -> Option<&SubscriptionCondition> {
        let status = self.status.as_ref()?;
        status.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// An InstallPlan's status as tests read it (`InstallPlan::phase` is the crate's own).
pub trait InstallPlanReads {
    /// `status.message`, empty when unset.
    fn message(&self) -> &str;
    fn condition(&self, type_: &str) -> Option<&InstallPlanCondition>;
    /// `status.plan`, empty when unset.
    fn steps(&self) -> &[Step];
    /// The kinds of the steps, in order.
    fn step_kinds(&self) -> Vec<&str>;
}

impl InstallPlanReads for InstallPlan {
    fn message(&self) -> &str {
        let status = self.status.as_ref();
        status
            .and_then(|s| s.message.as_deref())
            .unwrap_or_default()
    }

    fn condition(&self, type_: &str) -> Option<&InstallPlanCondition> {
        let status = self.status.as_ref()?;
        let mut conditions = status.conditions.iter();
        conditions.find(|c| c.type_.as_deref() == Some(type_))
    }

    fn steps(&self) -> &[Step] {
        self.status.as_ref().map_or(&[], |s| &s.plan)
    }

    fn step_kinds(&self) -> Vec<&str> {
        let steps = self.steps().iter();
        steps.map(|step| step.resource.kind.as_str()).collect()
    }
}

/// A CSV's status as tests read it.
pub trait CsvReads {
    fn phase(&self) -> CsvPhase;
}

impl CsvReads for ClusterServiceVersion {
    fn phase(&self) -> CsvPhase {
        let status = self.status.as_ref();
        status.and_then(|s| s.phase).unwrap_or_default()
    }
}

/// CRDs are cluster-wide. Tests that install an older schema of our operators' CRDs (at,
/// ptemplate) hold this lock, and so do the tests of those operators, which need the newest
/// schema: neither sees the other's CRD swapped in mid-test. One lock for all (no lock
/// order to get wrong), on a file, so it holds across the processes of `cargo nextest` too.
/// Never take it twice in one test: it is not re-entrant.
pub fn operator_crds_lock() -> std::fs::File {
    let file = lock_file("operator-crds.lock");
    file.lock()
        .expect("locking target/cluster/operator-crds.lock");
    file
}

/// The OLMConfig `cluster` is the cluster's, so whether AllNamespaces operators get copied
/// CSVs is one switch for every test. The test cluster keeps it off ([`install_crds`] sets
/// it): a test's AllNamespaces copies would land in every other test's namespace, under
/// names other tests' CSVs need. An `olm run` started with `--disable-copied-csvs` counts on
/// that and holds this lock shared for its life (`processes::OlmRun`); the test that turns
/// copies on (`olm_config.rs`) holds it exclusively and takes no other lock meanwhile, so
/// there is no lock order to get wrong.
pub fn olm_config_lock(exclusive: bool) -> std::fs::File {
    let file = lock_file("olm-config.lock");
    if exclusive {
        file.lock()
    } else {
        file.lock_shared()
    }
    .expect("locking target/cluster/olm-config.lock");
    file
}

/// A lock file under target/cluster, shared by every test process of this checkout.
fn lock_file(name: &str) -> std::fs::File {
    let dir = repo_root().join("target/cluster");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(name))
        .unwrap()
}

/// A reverse-words operator watching all namespaces reconciles every `ReverseWordsApp` of
/// the cluster, other tests' too (it would add its finalizer, or heal what a test breaks on
/// purpose). Tests that create such apps hold this lock shared; the one that runs the
/// operator over all namespaces holds it exclusively. No test holds it together with
/// [`operator_crds_lock`], so there is no lock order to get wrong.
pub fn reverse_words_apps_lock(exclusive: bool) -> std::fs::File {
    let file = lock_file("reverse-words-apps.lock");
    if exclusive {
        file.lock()
    } else {
        file.lock_shared()
    }
    .expect("locking target/cluster/reverse-words-apps.lock");
    file
}
