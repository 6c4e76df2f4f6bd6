//! The reverse-words operator (operators/reverse-words) with exactly the RBAC of its CSV,
//! driven as a user drives it (`kubectl apply/patch/delete`), and the application itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::csv_lifecycle::get;
use super::harness::{TestNamespace, client, kubectl};
use super::operators::{
    Installed, Operator, Targets, apply, condition, events_about, wait_for, wait_gone,
    workspace_bin,
};
use super::processes::{Process, free_port, wait_for_port};

const CSV: &str = "reverse-words.v0.5.0";
const BIN: &str = "reverse-words-operator";

fn app_yaml(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps.linuxera.org/v1alpha1\nkind: ReverseWordsApp\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: {replicas}\n"
    )
}

/// The app `name` in `ns` got its Deployment (owned, `replicas`), its Service on 8080, a
/// Ready status with that many pods and a Ready Event.
async fn expect_served(ns: &str, name: &str, replicas: usize) {
    let dp = wait_for(
        ns,
        &format!("deployment/dp-{name}"),
        "the replicas asked",
        |d| d["spec"]["replicas"] == replicas,
    )
    .await;
    assert_eq!(dp["metadata"]["ownerReferences"][0]["name"], name);
    let svc = wait_for(ns, &format!("service/service-{name}"), "created", |_| true).await;
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
    wait_for(
        ns,
        &format!("reversewordsapp/{name}"),
        "Ready with its pods",
        |a| ready(a) && pods(a) == replicas,
    )
    .await;
    assert!(
        events_about(ns, name)
            .iter()
            .any(|(reason, _)| reason == "Ready")
    );
}

fn ready(app: &Value) -> bool {
    condition(app, "Ready").is_some_and(|c| c["status"] == "True")
        && condition(app, "ReverseWordsDeploymentNotReady").is_some_and(|c| c["status"] == "False")
}

fn pods(app: &Value) -> usize {
    app["status"]["appPods"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn reverse_words_operator_manages_apps_with_the_csv_rbac() {
    let mut olm = Installed::subscribe("rw-operator", "reverse-words", CSV).await;
    let ns = olm.name().to_string();
    let kubeconfig = olm.operator_kubeconfig();
    let operator = Operator::start(BIN, &kubeconfig, &ns);

    apply(&app_yaml(&ns, "demo", 2));
    let dp = wait_for(&ns, "deployment/dp-demo", "2 replicas", |d| {
        d["spec"]["replicas"] == 2
    })
    .await;
    let owner = &dp["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("ReverseWordsApp"), Some("demo"))
    );
    assert_eq!(owner["controller"], true);
    let container = &dp["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "quay.io/olm-rs/reverse-words-app:v0.5.0"
    );
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    // The Service is applied after the Deployment.
    let svc = wait_for(&ns, "service/service-demo", "created", |_| true).await;
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
    assert_eq!(svc["spec"]["selector"]["app"], "demo");

    // kwok makes the pods Ready; the status shows them.
    let app = wait_for(&ns, "reversewordsapp/demo", "Ready with 2 pods", |a| {
        ready(a) && pods(a) == 2
    })
    .await;
    assert!(
        app["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "finalizer.reversewordsapp.apps.linuxera.org"),
        "{app:#}"
    );
    for pod in app["status"]["appPods"].as_array().unwrap() {
        assert!(pod.as_str().unwrap().starts_with("dp-demo-"), "{pod}");
    }
    assert!(
        events_about(&ns, "demo")
            .iter()
            .any(|(reason, _)| reason == "Ready")
    );

    // Scale through the spec; a new tag through appVersion.
    kubectl_patch(
        &ns,
        "reversewordsapp/demo",
        r#"{"spec":{"replicas":3,"appVersion":"v0.4.9"}}"#,
    );
    let dp = wait_for(&ns, "deployment/dp-demo", "3 replicas", |d| {
        d["spec"]["replicas"] == 3
    })
    .await;
    assert_eq!(
        dp["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/olm-rs/reverse-words-app:v0.4.9"
    );
    wait_for(&ns, "reversewordsapp/demo", "Ready with 3 pods", |a| {
        ready(a) && pods(a) == 3
    })
    .await;

    // A child deleted by hand comes back.
    super::harness::kubectl(&["delete", "service", "service-demo", "-n", &ns], None).ok();
    wait_for(&ns, "service/service-demo", "recreated", |_| true).await;

    // Deletion: the finalizer goes, and the children with their owner.
    super::harness::kubectl(
        &[
            "delete",
            "reversewordsapp",
            "demo",
            "-n",
            &ns,
            "--timeout=60s",
        ],
        None,
    )
    .ok();
    wait_gone(&ns, "reversewordsapp/demo").await;
    wait_gone(&ns, "deployment/dp-demo").await;
    wait_gone(&ns, "service/service-demo").await;

    operator.assert_never_forbidden();
    let reconciles = operator
        .metric_line("reverse_words_operator_reconciles_total{")
        .unwrap_or_default();
    assert!(reconciles.contains("outcome=\"ok\""), "{reconciles}");

    // Without a permission it needs, the operator says so: on the object, in an Event, in
    // its log; and it refuses to start when it cannot even watch what it manages.
    olm.stop_olm();
    olm.revoke("services");
    apply(&app_yaml(&ns, "second", 1));
    let app = wait_for(&ns, "reversewordsapp/second", "ReconcileFailed", |a| {
        condition(a, "Ready").is_some_and(|c| c["reason"] == "ReconcileFailed")
    })
    .await;
    let message = condition(&app, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("Service service-second") && message.contains("forbidden"),
        "{message}"
    );
    let log = operator.wait_for_log("reconcile failed").await;
    assert!(log.contains("forbidden"), "{log}");
    assert!(
        events_about(&ns, "second")
            .iter()
            .any(|(reason, note)| reason == "ReconcileFailed" && note.contains("forbidden"))
    );
    drop(operator);

    // Restarted without the permission, it stops at once and names what it may not do.
    let mut restarted = Operator::spawn(BIN, &kubeconfig, &ns);
    let status = wait_exit(&mut restarted.process).await;
    assert!(!status.success());
    let log = restarted.process.log_text();
    assert!(
        log.contains("cannot list services in ") && log.contains("forbidden"),
        "{log}"
    );
    // No operator is left to remove the finalizer: done by hand, and the app deleted while
    // this test holds the apps lock (an operator over all namespaces would take it over).
    kubectl_patch(
        &ns,
        "reversewordsapp/second",
        r#"{"metadata":{"finalizers":null}}"#,
    );
    super::harness::kubectl(&["delete", "reversewordsapp", "second", "-n", &ns], None).ok();
}

/// MultiNamespace: the OperatorGroup targets the operator's namespace and another one. OLM
/// copies the CSV's Role into the other and sets `olm.targetNamespaces` to both; the
/// operator, with only that RBAC, manages apps in both and leaves a third namespace alone.
#[tokio::test]
async fn reverse_words_operator_watches_the_namespaces_of_a_multi_namespace_group() {
    let client = client().await;
    let second = TestNamespace::create(&client, "rw-second").await;
    let outside = TestNamespace::create(&client, "rw-outside").await;
    let olm = Installed::subscribe_to(
        "rw-multi",
        "reverse-words",
        CSV,
        Targets::OwnAnd(vec![second.name.clone()]),
    )
    .await;
    let own = olm.name().to_string();
    let watch = olm.watch_namespace();
    let mut both = [own.clone(), second.name.clone()];
    both.sort();
    assert_eq!(watch, both.join(","), "olm.targetNamespaces of {CSV}");
    let operator = Operator::start(BIN, &olm.operator_kubeconfig(), &watch);
    operator
        .wait_for_log(&format!("\"namespaces\":\"{watch}\""))
        .await;

    // The app outside the group is applied first: by the time the targeted ones are
    // reconciled, a watch over it (if there were one) would have had its chance.
    apply(&app_yaml(&outside.name, "ignored", 1));
    apply(&app_yaml(&second.name, "there", 2));
    apply(&app_yaml(&own, "here", 1));
    expect_served(&second.name, "there", 2).await;
    wait_for(&own, "reversewordsapp/here", "Ready with 1 pod", |a| {
        ready(a) && pods(a) == 1
    })
    .await;

    let ignored = get(&outside.name, "reversewordsapp/ignored").unwrap();
    assert!(
        ignored["metadata"]["finalizers"].is_null() && ignored["status"].is_null(),
        "an app outside the group was touched: {ignored:#}"
    );
    assert!(get(&outside.name, "deployment/dp-ignored").is_none());
    assert!(get(&outside.name, "service/service-ignored").is_none());

    // Deletion in the other namespace: finalizer and children go.
    delete_app(&second.name, "there");
    wait_gone(&second.name, "deployment/dp-there").await;
    wait_gone(&second.name, "service/service-there").await;
    delete_app(&own, "here");
    // While this test holds the apps lock: see `reverse_words_apps_lock`.
    delete_app(&outside.name, "ignored");
    operator.assert_never_forbidden();
}

/// SingleNamespace: the OperatorGroup targets one namespace, not the operator's own. The
/// operator manages apps there; one in its own namespace is left alone although the CSV's
/// Role there would allow it: WATCH_NAMESPACE, not RBAC, decides.
#[tokio::test]
async fn reverse_words_operator_watches_only_the_target_of_a_single_namespace_group() {
    let client = client().await;
    let target = TestNamespace::create(&client, "rw-target").await;
    let olm = Installed::subscribe_to(
        "rw-single",
        "reverse-words",
        CSV,
        Targets::Others(vec![target.name.clone()]),
    )
    .await;
    let own = olm.name().to_string();
    let watch = olm.watch_namespace();
    assert_eq!(watch, target.name, "olm.targetNamespaces of {CSV}");
    let operator = Operator::start(BIN, &olm.operator_kubeconfig(), &watch);

    apply(&app_yaml(&own, "unwatched", 1));
    apply(&app_yaml(&target.name, "watched", 1));
    wait_for(
        &target.name,
        "reversewordsapp/watched",
        "Ready with 1 pod",
        |a| ready(a) && pods(a) == 1,
    )
    .await;
    wait_for(&target.name, "service/service-watched", "created", |_| true).await;
    let unwatched = get(&own, "reversewordsapp/unwatched").unwrap();
    assert!(
        unwatched["metadata"]["finalizers"].is_null() && unwatched["status"].is_null(),
        "an app outside the target namespace was touched: {unwatched:#}"
    );
    assert!(get(&own, "deployment/dp-unwatched").is_none());

    delete_app(&target.name, "watched");
    wait_gone(&target.name, "deployment/dp-watched").await;
    // While this test holds the apps lock: see `reverse_words_apps_lock`.
    delete_app(&own, "unwatched");
    operator.assert_never_forbidden();
}

/// AllNamespaces: an OperatorGroup without targets. OLM lifts the CSV's permissions to a
/// ClusterRole bound cluster-wide and sets `olm.targetNamespaces` to ""; the operator
/// watches the whole cluster and manages an app in any namespace.
#[tokio::test]
async fn reverse_words_operator_watches_every_namespace_of_an_all_namespaces_group() {
    let client = client().await;
    let anywhere = TestNamespace::create(&client, "rw-anywhere").await;
    let olm = Installed::subscribe_to("rw-all", "reverse-words", CSV, Targets::All).await;
    let watch = olm.watch_namespace();
    assert_eq!(watch, "", "olm.targetNamespaces of {CSV}");
    let bindings = kubectl(
        &[
            "get",
            "clusterrolebindings",
            "-l",
            &format!("olm.owner={CSV},olm.owner.namespace={}", olm.name()),
            "-o",
            "name",
        ],
        None,
    )
    .ok()
    .stdout();
    assert!(
        !bindings.trim().is_empty(),
        "no ClusterRoleBinding for {CSV}"
    );
    let operator = Operator::start(BIN, &olm.operator_kubeconfig(), &watch);
    operator
        .wait_for_log("\"namespaces\":\"all namespaces\"")
        .await;

    apply(&app_yaml(&anywhere.name, "far", 2));
    expect_served(&anywhere.name, "far", 2).await;
    delete_app(&anywhere.name, "far");
    wait_gone(&anywhere.name, "deployment/dp-far").await;
    wait_gone(&anywhere.name, "service/service-far").await;
    operator.assert_never_forbidden();
}

/// Deletes an app and waits until it is gone (its finalizer removed by the operator).
fn delete_app(ns: &str, name: &str) {
    kubectl(
        &["delete", "reversewordsapp", name, "-n", ns, "--timeout=60s"],
        None,
    )
    .ok();
}

async fn wait_exit(process: &mut Process) -> std::process::ExitStatus {
    super::harness::eventually("the operator exits", Duration::from_secs(30), || {
        let status = process.exited();
        async move { status }
    })
    .await
}

fn kubectl_patch(ns: &str, resource: &str, patch: &str) {
    super::harness::kubectl(
        &["patch", resource, "-n", ns, "--type=merge", "-p", patch],
        None,
    )
    .ok();
}

/// A minimal HTTP/1.0 request: `(status, body)`.
fn http(port: u16, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (
        head.split_whitespace().nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}

#[test]
fn reverse_words_app_reverses_over_http() {
    let port = free_port();
    let mut app = Process::spawn(
        "reverse-words-app",
        Command::new(workspace_bin("reverse-words-app"))
            .env("APP_PORT", port.to_string())
            .env("RELEASE", "test"),
    );
    wait_for_port(&mut app, port, Duration::from_secs(10));
    let json = "application/json";
    assert_eq!(
        http(port, "POST", "/", json, r#"{"word":"PALC"}"#),
        (200, r#"{"reverse_word":"CLAP"}"#.into())
    );
    assert_eq!(
        http(port, "POST", "/", json, r#"{"words":["hello","world"]}"#),
        (200, r#"{"reverse_words":["olleh","dlrow"]}"#.into())
    );
    assert_eq!(
        http(port, "POST", "/", "text/plain", "stressed desserts"),
        (200, "stressed desserts".chars().rev().collect())
    );
    for bad in ["", "{", r#"{"word":""}"#, r#"{"word":1}"#] {
        let (code, body) = http(port, "POST", "/", json, bad);
        assert_eq!(code, 400, "{bad:?} → {body}");
        assert!(body.contains("\"error\""), "{body}");
    }
    assert_eq!(http(port, "POST", "/", "text/plain", "").0, 400);
    assert_eq!(
        http(port, "GET", "/health", "text/plain", ""),
        (200, "Healthy".into())
    );
    let (code, release) = http(port, "GET", "/release", "text/plain", "");
    assert_eq!(code, 200);
    let release: Value = serde_json::from_str(&release).unwrap();
    assert_eq!(release["release"], "test");
    assert_eq!(release["version"], "v0.5.0");
}
