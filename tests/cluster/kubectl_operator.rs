//! Upstream's own kubectl plugin (`operator-framework/kubectl-operator` v0.6.0, built by
//! `hack/kubectl-operator/build`; `$OLM_KUBECTL_OPERATOR` names it in hack/test) driving
//! `olm run` as users do: install with Manual approval, upgrade hop by hop, list, list the
//! operands, and uninstall (aborting on operands, then deleting them). The plugin reads
//! packagemanifests, Subscription status (`installedCSV`) and the `Operator` API; a plain
//! uninstall right after a Manual hop used to leave the operator running.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::catalog_sources::{catalog_source_yaml, get_json, wait_for_state};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, repo_root,
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

    // An operand: listed, and it stops a plain uninstall.
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
}
