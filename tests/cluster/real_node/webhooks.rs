//! Webhooks and OperatorConditions for real: the test operator of `operators/webhook-test`
//! (its bundles in `tests/bundles/webhook-test`) runs on the real node from its image. The
//! kube-apiserver calls its validating, mutating and conversion webhooks through the Service
//! OLM made (ClusterIP, kube-proxy on the node) on a real `kubectl apply` and a `kubectl get`
//! of the other version, trusting the CA OLM wrote; a rotated certificate reaches the running
//! pod's files through the kubelet and is served without a restart. The operator reports
//! `Upgradeable=False` in its own OperatorCondition (in-cluster config and
//! `OPERATOR_CONDITION_NAME`), which holds the next version until it reports True.
//!
//! An owned APIService served from the same pod (its aggregated API) turns Available, and
//! the CSV is Succeeded only then.
//!
//! The tests take turns ([`TURN`]): the CRD, its conversion and the webhook
//! configurations (AllNamespaces, as a conversion webhook requires) are cluster-wide.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Node, WAIT, approve_pending, assert_running_for_real, namespace};
use crate::catalog_sources::{catalog_source_yaml, wait_for_state};
use crate::csv_lifecycle::{apply_json, get, operator_group, wait_for_phase};
use crate::harness::{client, eventually, install_crds, kubectl, repo_root};
use crate::operators::apply;
use crate::processes::{OlmRun, free_port, olm_serve};
use crate::served_locally::secret_text;

static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const IMAGE: &str = "webhook-test-operator";
const TAG: &str = "v0.1.0";
const CSV_V1: &str = "webhook-test-operator.v0.1.0";
const CSV_V2: &str = "webhook-test-operator.v0.2.0";
const DEPLOYMENT: &str = "webhook-test-operator";
const SERVICE: &str = "webhook-test-operator-service";
const CRD: &str = "widgets.webhook-test.olm-rs.io";
const MUTATED: &str = "webhook-test.olm-rs.io/mutated";
const API_GROUP: &str = "aggregated.webhook-test.olm-rs.io";
const API_SERVICE: &str = "v1alpha1.aggregated.webhook-test.olm-rs.io";

fn bundle_dir(version: &str) -> PathBuf {
    repo_root().join("tests/bundles/webhook-test").join(version)
}

fn csv_of(version: &str) -> Value {
    let path =
        bundle_dir(version).join("manifests/webhook-test-operator.clusterserviceversion.yaml");
    serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What a test leaves cluster-wide, removed when it ends (also on a panic): the webhook
/// configurations OLM made for its namespace and the CRD (whose conversion names its
/// Service).
struct ClusterWide {
    namespace: String,
}

impl Drop for ClusterWide {
    fn drop(&mut self) {
        let owned = format!("olm.owner.namespace={}", self.namespace);
        let _ = kubectl(
            &[
                "delete",
                "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l",
                &owned,
                "--ignore-not-found",
            ],
            None,
        );
        let _ = kubectl(&["delete", "crd", CRD, "--ignore-not-found"], None);
        // An unavailable aggregated API would stall discovery for everyone.
        let _ = kubectl(
            &["delete", "apiservice", API_SERVICE, "--ignore-not-found"],
            None,
        );
    }
}

fn widget(version: &str, name: &str, field: &str, color: &str) -> String {
    format!(
        "apiVersion: webhook-test.olm-rs.io/{version}\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  {field}: {color}\n  size: 3\n"
    )
}

/// `kubectl apply` of a Widget until the webhooks answer (they refuse while the API server
/// cannot reach them: failurePolicy Fail); the created Widget, as v1.
async fn apply_widget(namespace: &str, yaml: &str, name: &str) -> Value {
    eventually(&format!("widget {name} admitted"), WAIT, || async {
        kubectl(&["apply", "-n", namespace, "-f", "-"], Some(yaml))
            .success()
            .then_some(())
    })
    .await;
    get(
        namespace,
        &format!("widgets.v1.webhook-test.olm-rs.io/{name}"),
    )
    .unwrap()
}

/// The operator's Ready pod.
async fn operator_pod(namespace: &str) -> Value {
    eventually("a Ready operator pod", WAIT, || async {
        super::pods(namespace, &format!("app={DEPLOYMENT}"))
            .into_iter()
            .find(|p| {
                p["metadata"]["deletionTimestamp"].is_null()
                    && p["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
    })
    .await
}

/// An HTTPS GET of the webhook server's `/healthz` through the Service's ClusterIP,
/// trusting `ca` only and checking the Service's DNS name: the certificate served chains
/// to `ca`.
fn served_with(namespace: &str, ca: &str, dir: &Path) -> bool {
    let service = get(namespace, &format!("service/{SERVICE}")).unwrap();
    let ip = service["spec"]["clusterIP"].as_str().unwrap();
    let host = format!("{SERVICE}.{namespace}.svc");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    Command::new("curl")
        .args(["-sf", "-m", "5", "--cacert"])
        .arg(&ca_file)
        .args(["--resolve", &format!("{host}:443:{ip}")])
        .arg(format!("https://{host}/healthz"))
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout == b"ok")
}

/// A file of one of the pod's Secret volumes, read where the real kubelet keeps them
/// (`--root-dir` under the node's dir).
fn mounted(pod: &Value, file: &str) -> String {
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    let path = crate::harness::kubeconfig_path()
        .parent()
        .unwrap()
        .join("node/kubelet/pods")
        .join(uid)
        .join("volumes/kubernetes.io~secret")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ca_bundle(kind: &str, namespace: &str) -> String {
    let out = kubectl(
        &[
            "get",
            kind,
            "-l",
            &format!("olm.owner={CSV_V1},olm.owner.namespace={namespace}"),
            "-o",
            "jsonpath={.items[0].webhooks[0].clientConfig.caBundle}",
        ],
        None,
    )
    .ok();
    out.stdout()
}

#[tokio::test]
async fn webhooks_served_from_a_pod_answer_the_api_server_across_a_rotation() {
    let _turn = TURN.lock().await;
    install_crds();
    // Copies off from the first OLM to the second, not only while each runs.
    let _copies_off = crate::harness::olm_config_lock(false);
    let node = Node::get();
    node.push_binary(IMAGE, &[TAG]);
    let client = client().await;
    let ns = namespace(&client, "rn-webhooks").await;
    let _cluster_wide = ClusterWide {
        namespace: ns.name.clone(),
    };
    let dir = std::env::temp_dir().join(format!("olm-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    // A first OLM issues a 120 s certificate (due after 60 s); the second, with the default
    // validity, rotates it once, when it is due.
    let short = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--disable-copied-csvs",
            "--cert-validity",
            "120s",
        ],
    );
    let crd = bundle_dir("0.1.0").join("manifests/webhook-test.olm-rs.io_widgets.yaml");
    kubectl(&["apply", "-f", crd.to_str().unwrap()], None).ok();
    operator_group(&ns.name, "og", None);
    let mut csv = csv_of("0.1.0");
    csv["metadata"]["namespace"] = json!(ns.name);
    apply_json(&ns.name, &csv);
    let installed = wait_for_phase(&ns.name, CSV_V1, "Succeeded", None).await;
    drop(short);
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    let pod = operator_pod(&ns.name).await;
    assert_running_for_real(&pod);
    // The rotation below must reach this pod, not a new one: the Deployment holds its pods.
    kubectl(
        &[
            "rollout",
            "pause",
            &format!("deployment/{DEPLOYMENT}"),
            "-n",
            &ns.name,
        ],
        None,
    )
    .ok();
    let mounts = pod["spec"]["containers"][0]["volumeMounts"].to_string();
    assert!(
        mounts.contains("/tmp/k8s-webhook-server/serving-certs"),
        "{mounts}"
    );

    // Mutated on create: the label the pod's webhook adds.
    let blue = apply_widget(&ns.name, &widget("v1", "blue", "color", "blue"), "blue").await;
    assert_eq!(blue["metadata"]["labels"][MUTATED], "true", "{blue}");
    // Refused with the webhook's message.
    let refused = kubectl(
        &["apply", "-n", &ns.name, "-f", "-"],
        Some(&widget("v1", "bad", "color", "forbidden")),
    );
    assert!(!refused.success());
    assert!(
        refused
            .stderr()
            .contains(r#"widget bad: the color "forbidden" is refused by webhook-test-operator"#),
        "{}",
        refused.stderr()
    );
    // Converted: v1 objects read as v2, and a v2 object written is stored as v1.
    let as_v2 = get(&ns.name, "widgets.v2.webhook-test.olm-rs.io/blue").unwrap();
    assert_eq!(as_v2["apiVersion"], "webhook-test.olm-rs.io/v2");
    assert_eq!(
        as_v2["spec"],
        json!({"colour": "blue", "size": 3}),
        "{as_v2}"
    );
    let green = apply_widget(&ns.name, &widget("v2", "green", "colour", "green"), "green").await;
    assert_eq!(
        green["spec"],
        json!({"color": "green", "size": 3}),
        "{green}"
    );
    assert_eq!(green["metadata"]["labels"][MUTATED], "true", "{green}");
    let crd_json = kubectl(&["get", "crd", CRD, "-o", "json"], None).ok();
    let crd_json: Value = serde_json::from_str(&crd_json.stdout()).unwrap();
    assert_eq!(crd_json["spec"]["conversion"]["strategy"], "Webhook");
    assert_eq!(
        crd_json["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"],
        SERVICE
    );

    // The certificate in use chains to the CA of the Secret and of the configurations.
    let secret_name = format!("secret/{DEPLOYMENT}-service-cert");
    let first = get(&ns.name, &secret_name).unwrap();
    // Paused before the first certificate was due (else the pod would be a rolled one).
    let csv_now = get(&ns.name, &format!("csv/{CSV_V1}")).unwrap();
    assert_eq!(
        csv_now["status"]["certsLastUpdated"], installed["status"]["certsLastUpdated"],
        "rotated before the Deployment was paused: a machine too slow for a 120 s certificate"
    );
    let first_ca = secret_text(&first, "olmCAKey");
    assert_eq!(
        mounted(&pod, "webhook-cert/tls.crt"),
        secret_text(&first, "tls.crt")
    );
    assert!(served_with(&ns.name, &first_ca, &dir));
    let first_bundle = ca_bundle("mutatingwebhookconfigurations", &ns.name);

    // Rotation, when the first certificate is due: a new CA and serving pair in the Secret.
    let rotating = Instant::now();
    let rotated = eventually("a rotated certificate", WAIT * 2, || async {
        let secret = get(&ns.name, &secret_name)?;
        let ca = secret_text(&secret, "olmCAKey");
        (ca != first_ca).then_some(ca)
    })
    .await;
    // The CSV's status says so too (written after the Secret).
    eventually("certsLastUpdated moved on", WAIT, || async {
        let csv = get(&ns.name, &format!("csv/{CSV_V1}"))?;
        (csv["status"]["certsLastUpdated"] != installed["status"]["certsLastUpdated"]).then_some(())
    })
    .await;
    eprintln!("rotated {:?} after the first checks", rotating.elapsed());
    // The kubelet rewrites the running pod's Secret volume; the operator re-reads it and
    // serves the new certificate: the same pod, never restarted.
    let syncing = Instant::now();
    eventually(
        "the new certificate served by the running pod",
        WAIT * 2,
        || async { served_with(&ns.name, &rotated, &dir).then_some(()) },
    )
    .await;
    eprintln!(
        "the pod served the new certificate {:?} after the rotation",
        syncing.elapsed()
    );
    let now = super::pods(&ns.name, &format!("app={DEPLOYMENT}"));
    assert_eq!(now.len(), 1, "{now:#?}");
    assert_eq!(now[0]["metadata"]["uid"], pod["metadata"]["uid"]);
    assert_eq!(now[0]["status"]["containerStatuses"][0]["restartCount"], 0);
    let logs = kubectl(
        &[
            "logs",
            "-n",
            &ns.name,
            now[0]["metadata"]["name"].as_str().unwrap(),
        ],
        None,
    )
    .ok()
    .stdout();
    assert!(logs.contains("serving certificate reloaded"), "{logs}");
    // The files themselves, as the kubelet wrote them into the pod's volumes.
    let second = get(&ns.name, &secret_name).unwrap();
    assert_eq!(
        mounted(&pod, "webhook-cert/tls.crt"),
        secret_text(&second, "tls.crt")
    );
    assert_eq!(
        mounted(&pod, "apiservice-cert/apiserver.crt"),
        secret_text(&second, "tls.crt")
    );
    // The configurations trust the new CA, and the webhooks go on answering.
    let bundle = ca_bundle("mutatingwebhookconfigurations", &ns.name);
    assert_ne!(bundle, first_bundle);
    assert!(
        !served_with(&ns.name, &first_ca, &dir),
        "the old CA still verifies"
    );
    let red = apply_widget(&ns.name, &widget("v1", "red", "color", "red"), "red").await;
    assert_eq!(red["metadata"]["labels"][MUTATED], "true", "{red}");
    let refused = kubectl(
        &["apply", "-n", &ns.name, "-f", "-"],
        Some(&widget("v1", "bad", "color", "forbidden")),
    );
    assert!(
        refused
            .stderr()
            .contains("is refused by webhook-test-operator"),
        "{}",
        refused.stderr()
    );
    let red_v2 = get(&ns.name, "widgets.v2.webhook-test.olm-rs.io/red").unwrap();
    assert_eq!(red_v2["spec"]["colour"], "red", "{red_v2}");

    // Released, the Deployment rolls to the new CA's pod template and the CSV is Succeeded.
    kubectl(
        &[
            "rollout",
            "resume",
            &format!("deployment/{DEPLOYMENT}"),
            "-n",
            &ns.name,
        ],
        None,
    )
    .ok();
    wait_for_phase(&ns.name, CSV_V1, "Succeeded", None).await;
    kubectl(
        &["delete", "csv", CSV_V1, "-n", &ns.name, "--wait=true"],
        None,
    )
    .ok();
}

/// The catalog of the two test bundles, generated into `dir`.
fn catalog(dir: &Path) -> PathBuf {
    let bundles = dir.join("bundles/webhook-test");
    for version in ["0.1.0", "0.2.0"] {
        let to = bundles.join(version);
        std::fs::create_dir_all(&to).unwrap();
        let status = Command::new("cp")
            .arg("-r")
            .arg(bundle_dir(version).join("manifests"))
            .arg(bundle_dir(version).join("metadata"))
            .arg(&to)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let out = dir.join("catalog");
    super::run_olm(&[
        "catalog",
        "generate",
        "--bundles",
        dir.join("bundles").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    out
}

#[tokio::test]
async fn an_operator_pod_reports_its_condition_and_holds_its_upgrade() {
    let _turn = TURN.lock().await;
    install_crds();
    let node = Node::get();
    node.push_binary(IMAGE, &[TAG]);
    let client = client().await;
    let ns = namespace(&client, "rn-opcond").await;
    let _cluster_wide = ClusterWide {
        namespace: ns.name.clone(),
    };
    let dir = std::env::temp_dir().join(format!("olm-{}", ns.name));
    let port = free_port();
    let _server = olm_serve(&catalog(&dir), port);
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    apply(&catalog_source_yaml(
        &ns.name,
        "tests",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&ns.name, "tests", "READY");
    operator_group(&ns.name, "og", None);
    apply(&format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata:\n  name: webhook-test\n  namespace: {0}\nspec:\n  name: webhook-test\n  channel: stable\n  source: tests\n  sourceNamespace: {0}\n  startingCSV: {CSV_V1}\n  installPlanApproval: Manual\n",
        ns.name
    ));
    eventually("the first InstallPlan", WAIT, || async {
        (approve_pending(&ns.name) > 0).then_some(())
    })
    .await;
    wait_for_phase(&ns.name, CSV_V1, "Succeeded", None).await;
    let pod = operator_pod(&ns.name).await;
    assert_running_for_real(&pod);

    // The pod reports Upgradeable=False in its OperatorCondition, as itself; OLM observes it.
    let condition = eventually("the pod's report observed", WAIT, || async {
        let c = get(
            &ns.name,
            &format!("operatorcondition.v2.operators.coreos.com/{CSV_V1}"),
        )?;
        let observed = &c["status"]["conditions"][0];
        (observed["status"] == "False"
            && observed["observedGeneration"] == c["metadata"]["generation"])
            .then_some(c)
    })
    .await;
    let reported = &condition["spec"]["conditions"][0];
    assert_eq!(reported["type"], "Upgradeable");
    assert_eq!(reported["reason"], "Migrating");
    assert_eq!(reported["message"], "widgets are being migrated");
    // Written by the pod's own field manager (kubectl hides managedFields by default).
    let managers = kubectl(
        &[
            "get",
            "operatorcondition.v2.operators.coreos.com",
            CSV_V1,
            "-n",
            &ns.name,
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
        None,
    )
    .ok()
    .stdout();
    assert!(
        managers.split(' ').any(|m| m == "webhook-test-operator"),
        "{managers}"
    );

    // The next version's plan, approved: its CSV waits, saying why; the old one runs on.
    eventually("the upgrade's InstallPlan", WAIT, || async {
        (approve_pending(&ns.name) > 0).then_some(())
    })
    .await;
    let held = wait_for_phase(
        &ns.name,
        CSV_V2,
        "Pending",
        Some("OperatorConditionNotUpgradeable"),
    )
    .await;
    let message = held["status"]["message"].as_str().unwrap();
    assert!(message.contains("widgets are being migrated"), "{message}");
    let old = get(&ns.name, &format!("csv/{CSV_V1}")).unwrap();
    assert_ne!(old["status"]["phase"], "Deleting");

    // Its migration done (a Widget the operator waits for), the pod reports True and the
    // upgrade goes on: the new CSV Succeeded, the old one gone.
    apply_widget(
        &ns.name,
        &widget("v1", "migration-done", "color", "green"),
        "migration-done",
    )
    .await;
    wait_for_phase(&ns.name, CSV_V2, "Succeeded", None).await;
    let condition = get(
        &ns.name,
        &format!("operatorcondition.v2.operators.coreos.com/{CSV_V1}"),
    );
    eventually("the replaced CSV deleted", WAIT, || async {
        get(&ns.name, &format!("csv/{CSV_V1}"))
            .is_none()
            .then_some(())
    })
    .await;
    if let Some(condition) = condition {
        assert_eq!(
            condition["spec"]["conditions"][0]["reason"], "MigrationDone",
            "{condition}"
        );
    }
    let pod = operator_pod(&ns.name).await;
    assert_running_for_real(&pod);
    kubectl(
        &["delete", "csv", CSV_V2, "-n", &ns.name, "--wait=true"],
        None,
    )
    .ok();
}

#[tokio::test]
async fn an_owned_api_service_served_from_a_pod_turns_available_before_the_csv_succeeds() {
    let _turn = TURN.lock().await;
    install_crds();
    let node = Node::get();
    node.push_binary(IMAGE, &[TAG]);
    let client = client().await;
    let ns = namespace(&client, "rn-apiservice").await;
    let _cluster_wide = ClusterWide {
        namespace: ns.name.clone(),
    };
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    let crd = bundle_dir("0.1.0").join("manifests/webhook-test.olm-rs.io_widgets.yaml");
    kubectl(&["apply", "-f", crd.to_str().unwrap()], None).ok();
    operator_group(&ns.name, "og", None);
    let mut csv = csv_of("0.1.0");
    csv["metadata"]["namespace"] = json!(ns.name);
    csv["spec"]["apiservicedefinitions"] = json!({"owned": [{
        "name": "gadgets", "group": API_GROUP, "version": "v1alpha1", "kind": "Gadget",
        "displayName": "Gadget", "description": "A gadget served by the operator's pod.",
        "deploymentName": DEPLOYMENT, "containerPort": 5443,
    }]});
    apply_json(&ns.name, &csv);
    let succeeded = wait_for_phase(&ns.name, CSV_V1, "Succeeded", None).await;
    let pod = operator_pod(&ns.name).await;
    assert_running_for_real(&pod);

    // Registered with OLM's CA, pointing at the Service OLM made; Available, as the
    // aggregator reached the pod through the Service's ClusterIP.
    let api_service = kubectl(&["get", "apiservice", API_SERVICE, "-o", "json"], None).ok();
    let api_service: Value = serde_json::from_str(&api_service.stdout()).unwrap();
    assert_eq!(
        api_service["spec"]["service"]["name"], SERVICE,
        "{api_service}"
    );
    assert_eq!(
        api_service["spec"]["service"]["namespace"],
        ns.name.as_str()
    );
    assert_eq!(api_service["spec"]["service"]["port"], 5443);
    let secret = get(&ns.name, &format!("secret/{DEPLOYMENT}-service-cert")).unwrap();
    let ca = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        api_service["spec"]["caBundle"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(ca).unwrap(),
        secret_text(&secret, "olmCAKey")
    );
    let available = api_service["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap()
        .clone();
    assert_eq!(available["status"], "True", "{api_service}");
    // The CSV waited for it: Succeeded no earlier than the APIService turned Available.
    let succeeded_at = succeeded["status"]["lastTransitionTime"].as_str().unwrap();
    let available_at = available["lastTransitionTime"].as_str().unwrap();
    assert!(
        succeeded_at >= available_at,
        "{succeeded_at} < {available_at}"
    );

    // A real `kubectl get` through the aggregator reaches the pod.
    let listed = kubectl(
        &[
            "get",
            &format!("gadgets.v1alpha1.{API_GROUP}"),
            "-n",
            &ns.name,
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let listed: Value = serde_json::from_str(&listed.stdout()).unwrap();
    assert_eq!(
        listed["items"][0]["spec"]["servedBy"], pod["metadata"]["name"],
        "{listed}"
    );
    assert_eq!(
        listed["items"][0]["metadata"]["namespace"],
        ns.name.as_str()
    );
    let resources = kubectl(&["api-resources", "--api-group", API_GROUP], None).ok();
    assert!(
        resources.stdout().contains("gadgets"),
        "{}",
        resources.stdout()
    );

    // Deleting the CSV removes the APIService.
    kubectl(
        &["delete", "csv", CSV_V1, "-n", &ns.name, "--wait=true"],
        None,
    )
    .ok();
    eventually("the APIService removed", WAIT, || async {
        let out = kubectl(
            &[
                "get",
                "apiservice",
                API_SERVICE,
                "--ignore-not-found",
                "-o",
                "name",
            ],
            None,
        );
        (out.success() && out.stdout().trim().is_empty()).then_some(())
    })
    .await;
}
