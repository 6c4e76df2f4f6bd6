//! Webhooks on the real control plane, with a real webhook bundle (rsct-operator
//! 0.0.1-alpha4 of the community catalog, under tests/bundles/webhooks): OLM issues the
//! serving certificate, makes the Service, mounts the certificate, and registers the
//! ValidatingWebhookConfiguration; the kube-apiserver then calls the webhook for a real
//! `kubectl apply`. The operator's pods never run (kwok), so its webhook server is played
//! by a local process serving with the certificate files OLM mounted (the Secret's keys,
//! written where the pod would see them), and the Service is pointed at it as kwokctl
//! points aggregated APIs at local processes (ExternalName 127.0.0.1).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::common::free_port;
use super::csv_lifecycle::{apply_json, get, operator_group, wait_for_phase};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::OlmRun;
use super::served_locally::{point_service_here, secret_text, serve, write_mounted_files};

pub(super) const CSV: &str = "rsct-operator.v0.0.1-alpha4";
const DEPLOYMENT: &str = "rsct-operator-controller-manager";

fn bundle_dir() -> PathBuf {
    repo_root().join("tests/bundles/webhooks/rsct-operator-0.0.1-alpha4/manifests")
}

/// The bundle's CSV with its webhook on `port` (the port the local server listens on).
pub(super) fn csv_on_port(port: u16) -> Value {
    let text =
        std::fs::read_to_string(bundle_dir().join("rsct-operator.clusterserviceversion.yaml"))
            .unwrap();
    let mut csv: Value = serde_yaml::from_str(&text).unwrap();
    csv["spec"]["webhookdefinitions"][0]["containerPort"] = json!(port);
    // The bundle names the namespace it was generated for; a CSV lives where it is applied.
    csv["metadata"].as_object_mut().unwrap().remove("namespace");
    csv
}

/// `csv` with its Deployment renamed: a test beside the others must not share their
/// cluster-scoped `<deployment>-service-system:auth-delegator` binding (upstream's name).
pub(super) fn with_deployment(mut csv: Value, name: &str) -> Value {
    csv["spec"]["install"]["spec"]["deployments"][0]["name"] = json!(name);
    for webhook in csv["spec"]["webhookdefinitions"].as_array_mut().unwrap() {
        webhook["deploymentName"] = json!(name);
    }
    csv
}

/// Waits for a CRD's Established condition. Not `kubectl wait`: it fails at once while the
/// new CRD has no conditions yet (a busy API server).
async fn wait_established(crd: &str) {
    eventually(
        &format!("{crd} Established"),
        Duration::from_secs(60),
        || async {
            let out = kubectl(
                &[
                    "get",
                    crd,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Established')].status}",
                ],
                None,
            );
            (out.success() && out.stdout().trim() == "True").then_some(())
        },
    )
    .await;
}

pub(super) async fn apply_crd() {
    let crd = bundle_dir().join("rsct.ibm.com_rscts.yaml");
    kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            crd.to_str().unwrap(),
        ],
        None,
    )
    .ok();
    wait_established("crd/rscts.rsct.ibm.com").await;
}

fn rsct(name: &str) -> String {
    format!(
        "apiVersion: rsct.ibm.com/v1alpha1\nkind: RSCT\nmetadata:\n  name: {name}\nspec:\n  image: example.com/rsct:1\n"
    )
}

/// An AdmissionReview answer that refuses objects named `invalid-…` (as the operator
/// refuses invalid RSCTs).
fn admission(path: &str, review: &Value) -> Value {
    let name = review["request"]["name"].as_str().unwrap_or_default();
    let allowed = !name.starts_with("invalid-") && path == "/validate-rsct-ibm-com-v1alpha1-rsct";
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": review["request"]["uid"],
            "allowed": allowed,
            "status": {"code": if allowed { 200 } else { 403 }, "message": format!("rsct {name} is invalid (served at {path})")},
        },
    })
}

/// A ConversionReview answer: each object in the desired version (the two versions of the
/// test's CRD share their fields), marked so the test sees it went through the webhook.
fn conversion(path: &str, review: &Value) -> Value {
    let desired = review["request"]["desiredAPIVersion"].clone();
    let converted: Vec<Value> = review["request"]["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|object| {
            let mut object = object.clone();
            object["apiVersion"] = desired.clone();
            object["metadata"]["annotations"]["converted-by"] = json!(path);
            object
        })
        .collect();
    json!({
        "apiVersion": review["apiVersion"],
        "kind": "ConversionReview",
        "response": {
            "uid": review["request"]["uid"],
            "convertedObjects": converted,
            "result": {"status": "Success"},
        },
    })
}

/// The operator's webhook server, played locally with the files OLM mounted.
async fn serve_webhook(
    port: u16,
    cert_dir: PathBuf,
    calls: Arc<AtomicUsize>,
    answer: fn(&str, &Value) -> Value,
) {
    serve(
        port,
        &cert_dir.join("tls.crt"),
        &cert_dir.join("tls.key"),
        calls,
        answer,
    )
    .await;
}

// Two workers: kubectl blocks one while the API server calls the webhook served on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_operator_gets_a_certificate_and_the_api_server_calls_its_webhook() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "webhooks").await;
    let outside = TestNamespace::create(&client, "webhooks-outside").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crd().await;
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let port = free_port();
    apply_json(&ns.name, &csv_on_port(port));
    let csv = wait_for_phase(&ns.name, CSV, "Succeeded", None).await;
    assert!(csv["status"]["certsLastUpdated"].is_string(), "{csv}");
    assert!(csv["status"]["certsRotateAt"].is_string(), "{csv}");

    // The serving certificate, and the CA the configuration trusts.
    let secret = get(&ns.name, &format!("secret/{DEPLOYMENT}-service-cert")).unwrap();
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let ca = secret_text(&secret, "olmCAKey");
    assert!(ca.contains("BEGIN CERTIFICATE"));
    let service = get(&ns.name, &format!("service/{DEPLOYMENT}-service")).unwrap();
    assert_eq!(service["spec"]["ports"][0]["port"], port);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 9443);
    assert_eq!(
        service["spec"]["selector"]["control-plane"],
        "controller-manager"
    );
    let deployment = get(&ns.name, &format!("deployment/{DEPLOYMENT}")).unwrap();
    let template = &deployment["spec"]["template"];
    assert!(template["metadata"]["annotations"]["olmcahash"].is_string());
    let mounts = template["spec"]["containers"][0]["volumeMounts"].to_string();
    assert!(
        mounts.contains("/tmp/k8s-webhook-server/serving-certs")
            && mounts.contains("/apiserver.local.config/certificates"),
        "{mounts}"
    );
    let configs = kubectl(
        &[
            "get",
            "validatingwebhookconfigurations",
            "-l",
            &format!("olm.owner={CSV},olm.owner.namespace={}", ns.name),
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let configs: Value = serde_json::from_str(&configs.stdout()).unwrap();
    let items = configs["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{configs}");
    let config_name = items[0]["metadata"]["name"].as_str().unwrap().to_string();
    let webhook = &items[0]["webhooks"][0];
    assert_eq!(webhook["name"], "vrsct.kb.io");
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(
        webhook["clientConfig"]["service"]["path"],
        "/validate-rsct-ibm-com-v1alpha1-rsct"
    );
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(webhook["clientConfig"]["caBundle"].as_str().unwrap())
        .unwrap();
    assert_eq!(String::from_utf8(bundle).unwrap(), ca);
    assert!(
        webhook["namespaceSelector"]["matchLabels"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("olm.operatorgroup.uid/")),
        "{webhook}"
    );

    // The operator's webhook server with the mounted files, and the Service pointed at it.
    let mounted = std::env::temp_dir().join(format!("olm-webhook-{}/serving-certs", ns.name));
    write_mounted_files(&secret, &mounted, ("tls.crt", "tls.key"));
    let calls = Arc::new(AtomicUsize::new(0));
    let server = tokio::spawn(serve_webhook(port, mounted, calls.clone(), admission));
    point_service_here(&ns.name, &format!("{DEPLOYMENT}-service"));

    // A valid RSCT is admitted by the webhook, an invalid one refused with its message.
    let good = eventually(
        "the webhook admits a valid RSCT",
        Duration::from_secs(60),
        || async {
            let out = kubectl(&["apply", "-n", &ns.name, "-f", "-"], Some(&rsct("good")));
            out.success().then_some(out)
        },
    )
    .await;
    assert!(good.stdout().contains("created"), "{}", good.stdout());
    assert!(calls.load(Ordering::SeqCst) >= 1);
    let refused = kubectl(
        &["apply", "-n", &ns.name, "-f", "-"],
        Some(&rsct("invalid-one")),
    );
    assert!(!refused.success());
    assert!(
        refused.stderr().contains("rsct invalid-one is invalid"),
        "{}",
        refused.stderr()
    );
    // Outside the group's namespaces the webhook is not called.
    let before = calls.load(Ordering::SeqCst);
    kubectl(
        &["apply", "-n", &outside.name, "-f", "-"],
        Some(&rsct("invalid-two")),
    )
    .ok();
    assert_eq!(calls.load(Ordering::SeqCst), before);
    server.abort();

    // Deleting the CSV removes the configuration and the cluster-scoped binding.
    kubectl(&["delete", "csv", CSV, "-n", &ns.name, "--wait=true"], None).ok();
    let gone = kubectl(
        &[
            "get",
            "validatingwebhookconfiguration",
            &config_name,
            "--ignore-not-found",
            "-o",
            "name",
        ],
        None,
    )
    .ok();
    assert_eq!(gone.stdout().trim(), "");
    // Its own binding: another test's install of the same Deployment name has one of its
    // own (`security::two_installs_never_share_a_binding…`).
    let binding = kubectl(
        &[
            "get",
            "clusterrolebinding",
            "-l",
            &format!("olm.owner={CSV},olm.owner.namespace={}", ns.name),
            "-o",
            "name",
        ],
        None,
    )
    .ok();
    assert_eq!(binding.stdout().trim(), "");
}

#[tokio::test]
async fn a_short_validity_rotates_the_certificate_through_needs_cert_rotation() {
    // Not beside a cluster-wide `olm run` (packagemanifests tests): it reconciles this
    // namespace too, with its own certificate validity.
    let _turn = super::packagemanifests::TURN.lock().await;
    const ROTATED: &str = "rsct-rotated-controller-manager";
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "webhook-rotation").await;
    // A first OLM issues a 60 s certificate (due after 30 s). A second one with the default
    // validity rotates it once and stays Succeeded: with 60 s on both sides a rollout slower
    // than 30 s (a loaded machine) would be rotated again before it ever turned Succeeded.
    let short = OlmRun::start(
        &ns.name,
        &["--leader-elect=false", "--cert-validity", "60s"],
    );
    apply_crd().await;
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    apply_json(
        &ns.name,
        &with_deployment(csv_on_port(free_port()), ROTATED),
    );
    let first = wait_for_phase(&ns.name, CSV, "Succeeded", None).await;
    drop(short);
    let first_ca = secret_text(
        &get(&ns.name, &format!("secret/{ROTATED}-service-cert")).unwrap(),
        "olmCAKey",
    );
    let first_update = first["status"]["certsLastUpdated"].clone();
    assert!(first["status"]["certsRotateAt"].is_string(), "{first}");
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    // When the first certificate is due: a new CA, a new bundle, and the CSV went Pending
    // (NeedsCertRotation) and back to Succeeded.
    let rotated = eventually(
        "a rotated certificate",
        Duration::from_secs(150),
        || async {
            let csv = get(&ns.name, &format!("csv/{CSV}"))?;
            (csv["status"]["phase"] == "Succeeded"
                && csv["status"]["certsLastUpdated"] != first_update)
                .then_some(csv)
        },
    )
    .await;
    let reasons: Vec<&str> = rotated["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"NeedsCertRotation"), "{reasons:?}");
    let secret = get(&ns.name, &format!("secret/{ROTATED}-service-cert")).unwrap();
    let new_ca = secret_text(&secret, "olmCAKey");
    assert_ne!(new_ca, first_ca);
    let deployment = get(&ns.name, &format!("deployment/{ROTATED}")).unwrap();
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["olmcahash"],
        secret["metadata"]["annotations"]["olmcahash"],
        "the pods roll with the new CA"
    );
}

#[tokio::test]
async fn webhook_definitions_that_cannot_work_fail_the_csv_naming_the_webhook() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "webhook-invalid").await;
    // Its group ends up AllNamespaces: copies of a CSV named as every test's here would
    // land in the other webhook tests' namespaces.
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    apply_crd().await;
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let mut csv = csv_on_port(free_port());
    csv["spec"]["webhookdefinitions"][0]["deploymentName"] = json!("no-such-deployment");
    apply_json(&ns.name, &csv);
    let failed = wait_for_phase(&ns.name, CSV, "Failed", Some("InvalidWebhookDescription")).await;
    assert_eq!(
        failed["status"]["message"],
        "webhook vrsct.kb.io: deployment no-such-deployment is not in the install strategy"
    );
    // Fixed: the CSV installs.
    csv["spec"]["webhookdefinitions"][0]["deploymentName"] = json!(DEPLOYMENT);
    apply_json(&ns.name, &csv);
    wait_for_phase(&ns.name, CSV, "Succeeded", None).await;
    // A conversion webhook for a CRD the CSV does not own.
    csv["spec"]["webhookdefinitions"].as_array_mut().unwrap().push(json!({
        "generateName": "crsct.kb.io", "type": "ConversionWebhook", "deploymentName": DEPLOYMENT,
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "conversionCRDs": ["others.example.com"],
    }));
    csv["spec"]["installModes"] = json!([
        {"type": "OwnNamespace", "supported": false},
        {"type": "SingleNamespace", "supported": false},
        {"type": "MultiNamespace", "supported": false},
        {"type": "AllNamespaces", "supported": true},
    ]);
    apply_json(&ns.name, &csv);
    let failed = eventually(
        "an unowned conversion CRD refused",
        Duration::from_secs(60),
        || async {
            let csv = get(&ns.name, &format!("csv/{CSV}"))?;
            (csv["status"]["reason"] == "InvalidWebhookDescription"
                || csv["status"]["reason"] == "UnsupportedOperatorGroup")
                .then_some(csv)
        },
    )
    .await;
    // The group targets one namespace, which an AllNamespaces-only CSV does not support:
    // that comes first; across all namespaces the webhook is what is wrong.
    assert_eq!(
        failed["status"]["reason"], "UnsupportedOperatorGroup",
        "{failed}"
    );
    operator_group(&ns.name, "og", None);
    let failed = wait_for_phase(&ns.name, CSV, "Failed", Some("InvalidWebhookDescription")).await;
    assert_eq!(
        failed["status"]["message"],
        format!("webhook crsct.kb.io: csv {CSV} does not own CRD others.example.com")
    );
}

fn authorino_dir() -> PathBuf {
    repo_root().join("tests/bundles/webhooks/authorino-operator-0.13.1/manifests")
}

/// authorino-operator 0.13.1 (community catalog) converts AuthConfigs between v1beta1 and
/// v1beta2 with a conversion webhook: OLM writes it into the CRD with the CA of the
/// certificate it issued, and a real `kubectl get` of the other version goes through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_webhook_converts_on_a_real_get_of_the_other_version() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "conversion").await;
    // AllNamespaces: no copies into every namespace of the shared test cluster.
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    for crd in [
        "authorino.kuadrant.io_authconfigs.yaml",
        "operator.authorino.kuadrant.io_authorinos.yaml",
    ] {
        let path = authorino_dir().join(crd);
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
    wait_established("crd/authconfigs.authorino.kuadrant.io").await;
    operator_group(&ns.name, "og", None);
    let port = free_port();
    let text = std::fs::read_to_string(
        authorino_dir().join("authorino-operator.clusterserviceversion.yaml"),
    )
    .unwrap();
    let mut csv: Value = serde_yaml::from_str(&text).unwrap();
    csv["metadata"].as_object_mut().unwrap().remove("namespace");
    csv["spec"]["webhookdefinitions"][0]["containerPort"] = json!(port);
    apply_json(&ns.name, &csv);
    let name = csv["metadata"]["name"].as_str().unwrap().to_string();
    wait_for_phase(&ns.name, &name, "Succeeded", None).await;

    let secret = get(&ns.name, "secret/authorino-webhooks-service-cert").unwrap();
    let crd = kubectl(
        &[
            "get",
            "crd",
            "authconfigs.authorino.kuadrant.io",
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let crd: Value = serde_json::from_str(&crd.stdout()).unwrap();
    let webhook = &crd["spec"]["conversion"]["webhook"];
    assert_eq!(crd["spec"]["conversion"]["strategy"], "Webhook");
    assert_eq!(
        webhook["clientConfig"]["service"]["name"],
        "authorino-webhooks-service"
    );
    assert_eq!(
        webhook["clientConfig"]["service"]["namespace"],
        ns.name.as_str()
    );
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/convert");
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(webhook["clientConfig"]["caBundle"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        String::from_utf8(bundle).unwrap(),
        secret_text(&secret, "olmCAKey")
    );

    let mounted = std::env::temp_dir().join(format!("olm-conversion-{}/serving-certs", ns.name));
    write_mounted_files(&secret, &mounted, ("tls.crt", "tls.key"));
    let calls = Arc::new(AtomicUsize::new(0));
    let server = tokio::spawn(serve_webhook(port, mounted, calls.clone(), conversion));
    point_service_here(&ns.name, "authorino-webhooks-service");
    kubectl(
        &["apply", "-n", &ns.name, "-f", "-"],
        Some("apiVersion: authorino.kuadrant.io/v1beta2\nkind: AuthConfig\nmetadata:\n  name: talker\nspec:\n  hosts: [talker.example.com]\n"),
    )
    .ok();
    let old = eventually(
        "the v1beta1 view through the webhook",
        Duration::from_secs(60),
        || async {
            let out = kubectl(
                &[
                    "get",
                    "authconfigs.v1beta1.authorino.kuadrant.io",
                    "talker",
                    "-n",
                    &ns.name,
                    "-o",
                    "json",
                ],
                None,
            );
            if !out.success() {
                eprintln!("not yet: {}", out.stderr());
            }
            out.success()
                .then(|| serde_json::from_str::<Value>(&out.stdout()).unwrap())
        },
    )
    .await;
    assert_eq!(old["apiVersion"], "authorino.kuadrant.io/v1beta1");
    assert_eq!(old["metadata"]["annotations"]["converted-by"], "/convert");
    assert_eq!(old["spec"]["hosts"], json!(["talker.example.com"]));
    assert!(calls.load(Ordering::SeqCst) >= 1);
    server.abort();
    // The CSV goes, and the CRD's conversion with it (None: its objects stay readable).
    kubectl(
        &["delete", "csv", &name, "-n", &ns.name, "--wait=true"],
        None,
    )
    .ok();
    let strategy = kubectl(
        &[
            "get",
            "crd",
            "authconfigs.authorino.kuadrant.io",
            "-o",
            "jsonpath={.spec.conversion.strategy}",
        ],
        None,
    )
    .ok();
    assert_eq!(strategy.stdout(), "None");
}

/// As upstream, an APIService labelled as a CSV's whose CSV does not exist (its namespace or
/// the CSV itself missing) is deleted when it appears.
#[tokio::test]
async fn an_api_service_whose_csv_does_not_exist_is_deleted() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "apisvc-orphan").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let group = format!("{}.orphans.example.com", ns.name);
    let name = format!("v1alpha1.{group}");
    apply_json(
        &ns.name,
        &json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": name, "labels": {
                "olm.owner": "never-there", "olm.owner.kind": "ClusterServiceVersion",
                "olm.owner.namespace": ns.name}},
            "spec": {"group": group, "version": "v1alpha1", "groupPriorityMinimum": 2000,
                     "versionPriority": 15, "insecureSkipTLSVerify": true,
                     "service": {"name": "nothing", "namespace": ns.name}}
        }),
    );
    eventually(
        "the orphaned APIService deleted",
        Duration::from_secs(60),
        || async {
            let out = kubectl(&["get", "apiservice", &name], None);
            (!out.success()).then_some(())
        },
    )
    .await;
}
