//! `deploy/` is what a cluster admin applies. The RBAC there must be enough for `olm run`:
//! this runs it as the `olm-operator` ServiceAccount (kubeconfig impersonation) and checks
//! that leader election, catalogs and events all work under that identity.

use std::time::Duration;

use super::catalog_sources::{catalog_source_yaml, wait_for_event, wait_for_state};
use super::csv_lifecycle::{get, operator_group, wait_for_phase};
use super::harness::{
    TestNamespace, client, eventually, install_crds, kubeconfig_path, kubectl, repo_root,
};
use super::processes::{OlmRun, free_port, olm_serve};

/// The test cluster's kubeconfig, acting as `user` (impersonation; the admin may do that).
pub fn kubeconfig_as(user: &str, name: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(kubeconfig_path()).unwrap();
    let mut config: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    for entry in config["users"].as_array_mut().unwrap() {
        entry["user"]["as"] = serde_json::Value::String(user.to_string());
    }
    let path = std::env::temp_dir().join(format!("olm-kubeconfig-{name}"));
    std::fs::write(&path, serde_yaml::to_string(&config).unwrap()).unwrap();
    path
}

#[tokio::test]
async fn olm_run_works_with_only_the_rbac_in_deploy() {
    install_crds();
    for file in ["deploy/namespace.yaml", "deploy/rbac.yaml"] {
        let path = repo_root().join(file);
        kubectl(&["apply", "-f", path.to_str().unwrap()], None).ok();
    }
    let client = client().await;
    let ns = TestNamespace::create(&client, "deploy-rbac").await;
    let kubeconfig = kubeconfig_as("system:serviceaccount:olm:olm-operator", &ns.name);
    let lease = format!("olm-leader-{}", ns.name);
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    // The binary deploy/operator.yaml runs, with its flags.
    let olm = OlmRun::start_deployed_binary(
        &kubeconfig,
        &ns.name,
        &[
            "--lease-namespace",
            "olm",
            "--lease-name",
            &lease,
            "--log-format",
            "json",
        ],
    );

    eventually(
        "leadership under the ServiceAccount",
        Duration::from_secs(30),
        || async { (olm.metric("olm_leader") == Some(1.0)).then_some(()) },
    )
    .await;
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
    wait_for_event(&ns.name, "operators", "CatalogLoaded").await;
    // An operator installs under the same RBAC, from a Subscription: its plan's steps make
    // the CRD, ServiceAccount and Roles with rules OLM itself does not hold (escalate,
    // bind), and the CSV its Deployment.
    let _crds = super::harness::operator_crds_lock();
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    let subscription = serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "reverse-words", "namespace": ns.name},
        "spec": {"name": "reverse-words", "channel": "stable", "source": "operators",
                 "sourceNamespace": ns.name},
    });
    kubectl(&["apply", "-f", "-"], Some(&subscription.to_string())).ok();
    let installed = eventually(
        "the Subscription at its latest",
        Duration::from_secs(90),
        || async {
            let sub = get(&ns.name, "subscription/reverse-words")?;
            let status = &sub["status"];
            (status["state"] == "AtLatestKnown")
                .then(|| status["installedCSV"].as_str().map(String::from))?
        },
    )
    .await;
    wait_for_phase(&ns.name, &installed, "Succeeded", None).await;
    let log = olm.process.log_text();
    assert!(
        !log.contains("forbidden"),
        "olm run hit RBAC denials:\n{log}"
    );
    drop(olm);
    let _ = std::fs::remove_file(kubeconfig);
    kubectl(
        &["delete", "lease", &lease, "-n", "olm", "--ignore-not-found"],
        None,
    );
}

/// `--watch-namespace` needs nothing cluster-wide to start and run the catalog cache: here
/// `olm run` acts as a ServiceAccount that only has a Role in its own namespace.
#[tokio::test]
async fn a_namespaced_olm_run_starts_with_only_a_role_in_its_namespace() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "ns-only-rbac").await;
    let rbac = format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: olm-ns, namespace: {ns}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: olm-ns, namespace: {ns}}}
rules:
  - apiGroups: ["operators.coreos.com"]
    resources: ["catalogsources"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["operators.coreos.com"]
    resources: ["catalogsources/status"]
    verbs: ["get", "patch", "update"]
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list", "watch"]
  - apiGroups: ["events.k8s.io"]
    resources: ["events"]
    verbs: ["create", "patch"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: olm-ns, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: olm-ns}}
subjects: [{{kind: ServiceAccount, name: olm-ns, namespace: {ns}}}]
"#,
        ns = ns.name
    );
    kubectl(&["apply", "-f", "-"], Some(&rbac)).ok();
    let kubeconfig = kubeconfig_as(
        &format!("system:serviceaccount:{}:olm-ns", ns.name),
        &ns.name,
    );
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let olm = OlmRun::start_with(&kubeconfig, &ns.name, &["--lease-namespace", &ns.name]);
    eventually(
        "leadership with a namespaced Role",
        Duration::from_secs(30),
        || async { (olm.metric("olm_leader") == Some(1.0)).then_some(()) },
    )
    .await;
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
    wait_for_event(&ns.name, "operators", "CatalogLoaded").await;
    let log = olm.process.log_text();
    for resource in ["catalogsources", "configmaps", "leases", "events"] {
        assert!(
            !log.lines()
                .any(|l| l.contains("forbidden") && l.contains(resource)),
            "{resource} forbidden under a namespaced Role:\n{log}"
        );
    }
    drop(olm);
    let _ = std::fs::remove_file(kubeconfig);
}
