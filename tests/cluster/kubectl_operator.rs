//! Upstream's own kubectl plugin (`operator-framework/kubectl-operator` v0.6.0, built by
//! `hack/kubectl-operator/build`; `$OLM_KUBECTL_OPERATOR` names it in hack/test) driving
//! `olm run` as users do: install with Manual approval, upgrade hop by hop, list, list the
//! operands, and uninstall (aborting on operands, then deleting them), and `uninstall -X`
//! (everything, the Operator last) of a second install. The plugin reads packagemanifests,
//! Subscription status (`installedCSV`) and the `Operator` API; a plain uninstall right after
//! a Manual hop used to leave the operator running.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, get_json, wait_for_state};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, operator_crds_lock,
    repo_root, reverse_words_apps_lock,
};
use super::packagemanifests::{PackagesServer, TURN};
use super::processes::{OlmRun, free_port, olm_serve};

const WAIT: Duration = Duration::from_secs(90);

fn plugin() -> PathBuf {
    if let Some(path) = std::env::var_os("OLM_KUBECTL_OPERATOR") {
        return PathBuf::from(path);
    }
    let out = Command::new(repo_root().join("hack/kubectl-operator/build"))
        .arg("--print-path")
        .output()
        .expect("hack/kubectl-operator/build runs");
    assert!(
        out.status.success(),
        "kubectl-operator is not built; run hack/kubectl-operator/build"
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `kubectl operator -n NS ARGS…`: (success, stdout + stderr).
fn operator(namespace: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(plugin())
        .env("KUBECONFIG", kubeconfig_path())
        .args(["-n", namespace, "--timeout", "90s"])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn succeeded_csvs(namespace: &str) -> Vec<String> {
    get_json(namespace, "csvs")["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"]["phase"] == "Succeeded")
        .map(|c| {
            c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn installed(namespace: &str, csv: &str) {
    eventually(&format!("{csv} Succeeded and installed"), WAIT, || async {
        let sub = get_json(namespace, "subscription/reverse-words");
        (succeeded_csvs(namespace) == [csv] && sub["status"]["installedCSV"] == csv).then_some(())
    })
    .await;
}

/// The Operator `name`, if it exists.
fn operator_object(name: &str) -> Option<Value> {
    let out = kubectl(&["get", "operator", name, "-o", "json"], None);
    out.success()
        .then(|| serde_json::from_str(&out.stdout()).unwrap())
}

/// Operators a test made or had made, deleted however it ends (they are cluster-scoped).
struct Operators(Vec<String>);

impl Drop for Operators {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = kubectl(
                &[
                    "delete",
                    "operator",
                    name,
                    "--ignore-not-found",
                    "--wait=false",
                ],
                None,
            );
        }
    }
}

#[tokio::test]
async fn kubectl_operator_installs_upgrades_lists_and_uninstalls() {
    let _turn = TURN.lock().await;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "kubectl-op").await;
    let global = TestNamespace::create(&client, "kubectl-op-global").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let _packages = PackagesServer::start(&global.name).await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(
            &ns.name,
            "operators",
            &format!("127.0.0.1:{port}"),
            "",
        )),
    )
    .ok();
    wait_for_state(&ns.name, "operators", "READY");
    eventually("the package is available to the plugin", WAIT, || async {
        let (ok, out) = operator(&ns.name, &["list-available", "reverse-words"]);
        (ok && out.contains("reverse-words")).then_some(())
    })
    .await;

    // Manual install of the first version; the plugin approves the first plan itself.
    let (ok, out) = operator(
        &ns.name,
        &[
            "install",
            "reverse-words",
            "-c",
            "alpha",
            "-v",
            "0.1.0",
            "-a",
            "Manual",
            "-C",
            "-w",
            &ns.name,
        ],
    );
    assert!(ok, "{out}");
    installed(&ns.name, "reverse-words.v0.1.0").await;

    // One hop; the next one then waits for approval, and the Subscription names the CSV
    // that is installed (what the plugin's uninstall deletes).
    let (ok, out) = operator(&ns.name, &["upgrade", "reverse-words"]);
    assert!(ok, "{out}");
    installed(&ns.name, "reverse-words.v0.2.0").await;
    let (ok, out) = operator(&ns.name, &["list"]);
    assert!(ok && out.contains("reverse-words.v0.2.0"), "{out}");

    // An operand: listed, and it stops a plain uninstall. While it exists no reverse-words
    // operator over all namespaces may run (see `reverse_words_apps_lock`; released before
    // the CRDs' lock below: no test holds both).
    let apps = reverse_words_apps_lock(false);
    let app = format!(
        "apiVersion: apps.linuxera.org/v1alpha1\nkind: ReverseWordsApp\nmetadata:\n  name: words\n  namespace: {}\nspec:\n  replicas: 1\n",
        ns.name
    );
    kubectl(&["apply", "-f", "-"], Some(&app)).ok();
    // The Operator's component list follows the install within a round or two.
    eventually("list-operands shows the operand", WAIT, || async {
        let (ok, out) = operator(&ns.name, &["list-operands", "reverse-words"]);
        (ok && out.contains("words")).then_some(())
    })
    .await;
    let (ok, out) = operator(&ns.name, &["uninstall", "reverse-words"]);
    assert!(!ok && out.contains("operand deletion aborted"), "{out}");

    // Uninstall deleting operands: Subscription, CSV and operand go.
    let (ok, out) = operator(&ns.name, &["uninstall", "reverse-words", "-s", "delete"]);
    assert!(ok, "{out}");
    assert!(
        !out.contains("not found"),
        "the CSV it deleted was there: {out}"
    );
    eventually("the CSV and the Subscription are gone", WAIT, || async {
        let subs = get_json(&ns.name, "subscriptions");
        let csvs = get_json(&ns.name, "csvs");
        let empty = |v: &Value| v["items"].as_array().is_none_or(Vec::is_empty);
        (empty(&subs) && empty(&csvs)).then_some(())
    })
    .await;
    drop(apps);

    uninstall_everything(&ns.name).await;
}

/// `kubectl operator uninstall -X` of a second install (at, in the same namespace): the
/// plugin deletes every component the Operator lists (at's CRD too: hence the CRDs' lock,
/// taken after TURN as every test holding both does), waits until the Operator lists none,
/// then deletes it. OLM makes an Operator again while labelled components remain; here none
/// do, and it stays gone.
async fn uninstall_everything(namespace: &str) {
    let _crds = operator_crds_lock();
    let at = format!("at.{namespace}");
    let anchor = format!("anchor.{namespace}");
    let _operators = Operators(vec![at.clone(), anchor.clone()]);
    // Start from no CRD, as a fresh cluster would (other tests apply older schemas of it).
    let crd = "ats.cnat.d2iq.com";
    kubectl(
        &["delete", "crd", crd, "--ignore-not-found", "--timeout=120s"],
        None,
    )
    .ok();
    let (ok, out) = operator(namespace, &["install", "at", "-a", "Automatic"]);
    assert!(ok, "{out}");
    eventually("at installed and its Operator listing it", WAIT, || async {
        let csv = get_json(namespace, "subscription/at")["status"]["installedCSV"]
            .as_str()
            .filter(|csv| succeeded_csvs(namespace).iter().any(|c| c == csv))?
            .to_string();
        let operator = operator_object(&at)?;
        let refs = operator["status"]["components"]["refs"].as_array()?;
        let listed =
            |kind: &str, name: &str| refs.iter().any(|r| r["kind"] == kind && r["name"] == name);
        (listed("ClusterServiceVersion", &csv) && listed("CustomResourceDefinition", crd))
            .then_some(())
    })
    .await;

    let (ok, out) = operator(namespace, &["uninstall", "at", "-X"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("operator \"{at}\" deleted")), "{out}");
    assert!(
        !kubectl(&["get", "crd", crd], None).success(),
        "the plugin deleted the CRD it listed"
    );
    // A later component of another Operator is seen (its Operator made) after the
    // deletion was: had at's been made again, it would be back by then.
    kubectl(&["create", "configmap", "anchor", "-n", namespace], None).ok();
    kubectl(
        &[
            "label",
            "configmap",
            "anchor",
            "-n",
            namespace,
            &format!("operators.coreos.com/{anchor}="),
        ],
        None,
    )
    .ok();
    eventually("the anchor's Operator made", WAIT, || async {
        operator_object(&anchor).map(drop)
    })
    .await;
    assert!(operator_object(&at).is_none(), "{at} came back");
}
