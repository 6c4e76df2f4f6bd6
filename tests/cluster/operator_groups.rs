//! Replacement, deletion, copied CSVs and restarts, on the real control plane.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use super::csv_lifecycle::{
    WAIT, apply_crds, apply_csv, apply_json, csv_json, get, operator_group, phase_order,
    wait_for_phase,
};
use super::harness::{TestNamespace, client, eventually, install_crds, kubectl};
use super::processes::OlmRun;

fn names(kind: &str, selector: &str, namespace: Option<&str>) -> Vec<String> {
    let mut args = vec!["get", kind, "-l", selector, "-o", "name"];
    match namespace {
        Some(ns) => args.extend(["-n", ns]),
        None if kind.starts_with("cluster") => {}
        None => args.push("-A"),
    }
    let out = kubectl(&args, None).ok().stdout();
    out.lines().map(str::to_string).collect()
}

fn owner_selector(csv: &str, namespace: &str) -> String {
    format!("olm.owner={csv},olm.owner.namespace={namespace}")
}

#[tokio::test]
async fn a_replacement_adopts_the_deployment_and_the_old_csv_goes() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-replace").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.4.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    apply_csv(&ns.name, "reverse-words", "0.3.0");
    wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns.name);
    let before = deployments
        .get("reverse-words-controller-manager")
        .await
        .unwrap();

    apply_csv(&ns.name, "reverse-words", "0.4.0");
    let new = wait_for_phase(&ns.name, "reverse-words.v0.4.0", "Succeeded", None).await;
    eventually("v0.3.0 deleted", WAIT, || async {
        get(&ns.name, "csv/reverse-words.v0.3.0")
            .is_none()
            .then_some(())
    })
    .await;
    let after = deployments
        .get("reverse-words-controller-manager")
        .await
        .unwrap();
    assert_eq!(
        before.metadata.uid, after.metadata.uid,
        "adopted, not recreated"
    );
    let labels = after.metadata.labels.unwrap();
    assert_eq!(
        labels.get("olm.owner").map(String::as_str),
        Some("reverse-words.v0.4.0")
    );
    let owners = after.metadata.owner_references.unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].name, "reverse-words.v0.4.0");
    // The ServiceAccount moved to the new CSV too, so it survived the old one's deletion.
    assert!(get(&ns.name, "serviceaccount/reverse-words-controller-manager").is_some());
    // Pending (possibly twice: waiting for the old one to enter Replacing), then straight on.
    assert_eq!(
        phase_order(&new),
        ["Pending", "InstallReady", "Installing", "Succeeded"],
        "{:#}",
        new["status"]
    );
    // The old CSV passed Replacing then Deleting: its Events say so.
    let reasons = super::catalog_sources::event_reasons(&ns.name, "reverse-words.v0.3.0");
    assert!(reasons.iter().any(|r| r == "BeingReplaced"), "{reasons:?}");
    assert!(reasons.iter().any(|r| r == "Replaced"), "{reasons:?}");
}

#[tokio::test]
async fn deletion_removes_cluster_rbac_and_copies_but_keeps_crds_and_crs() {
    // It keeps a ReverseWordsApp: no reverse-words operator over all namespaces may take it.
    let _apps = super::harness::reverse_words_apps_lock(false);
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-delete").await;
    let target = TestNamespace::create(&client, "csv-delete-t").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&target.name]));
    let mut csv = csv_json("reverse-words", "0.3.0");
    // Cluster permissions too, so there is cluster-scoped RBAC to clean up.
    csv["spec"]["install"]["spec"]["clusterPermissions"] = serde_json::json!([{
        "serviceAccountName": "reverse-words-controller-manager",
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }]);
    apply_json(&ns.name, &csv);
    wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    let selector = owner_selector("reverse-words.v0.3.0", &ns.name);
    assert_eq!(names("clusterroles", &selector, None).len(), 1);
    assert_eq!(names("clusterrolebindings", &selector, None).len(), 1);
    assert_eq!(names("roles", &selector, Some(&target.name)).len(), 1);
    eventually("a copy in the target", WAIT, || async {
        get(&target.name, "csv/reverse-words.v0.3.0")
    })
    .await;
    apply_json(
        &ns.name,
        &serde_json::json!({
            "apiVersion": "apps.linuxera.org/v1alpha1", "kind": "ReverseWordsApp",
            "metadata": {"name": "keep-me", "namespace": ns.name}, "spec": {"replicas": 1},
        }),
    );

    kubectl(
        &[
            "delete",
            "csv",
            "reverse-words.v0.3.0",
            "-n",
            &ns.name,
            "--timeout=60s",
        ],
        None,
    )
    .ok();
    assert!(names("clusterroles", &selector, None).is_empty());
    assert!(names("clusterrolebindings", &selector, None).is_empty());
    assert!(names("roles", &selector, Some(&target.name)).is_empty());
    assert!(get(&target.name, "csv/reverse-words.v0.3.0").is_none());
    assert!(get("default", "crd/reversewordsapps.apps.linuxera.org").is_some());
    assert!(get(&ns.name, "reversewordsapp/keep-me").is_some());
}

#[tokio::test]
async fn copies_follow_a_multi_namespace_group() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-multi").await;
    let a = TestNamespace::create(&client, "csv-multi-a").await;
    let b = TestNamespace::create(&client, "csv-multi-b").await;
    // A target namespace with a CSV of its own by the same name (no OLM watches it here).
    let own = TestNamespace::create(&client, "csv-multi-own").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    let mut csv = csv_json("reverse-words", "0.3.0");
    for mode in csv["spec"]["installModes"].as_array_mut().unwrap() {
        mode["supported"] = serde_json::json!(true);
    }
    apply_json(&own.name, &csv);
    operator_group(
        &ns.name,
        "og",
        Some(&[&ns.name, &a.name, &b.name, &own.name]),
    );
    apply_json(&ns.name, &csv);
    wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    let copies = || names("csv", &format!("olm.copiedFrom={}", ns.name), None);
    let both = eventually("2 copies", WAIT, || async {
        (copies().len() == 2).then(copies)
    })
    .await;
    assert!(
        both.iter().all(|c| c.contains("reverse-words.v0.3.0")),
        "{both:?}"
    );
    assert!(get(&a.name, "csv/reverse-words.v0.3.0").is_some());

    operator_group(&ns.name, "og", Some(&[&ns.name, &a.name, &own.name]));
    eventually("b's copy pruned", WAIT, || async {
        get(&b.name, "csv/reverse-words.v0.3.0")
            .is_none()
            .then_some(())
    })
    .await;
    // Rounds later, the namespace's own CSV is still its own: never made a copy.
    let kept = get(&own.name, "csv/reverse-words.v0.3.0").unwrap();
    assert!(
        kept["metadata"]["labels"]["olm.copiedFrom"].is_null() && kept["status"].is_null(),
        "{kept:#}"
    );
    let copy = get(&a.name, "csv/reverse-words.v0.3.0").unwrap();
    assert!(
        copy["metadata"]["annotations"]["olm.targetNamespaces"].is_null(),
        "a copy carries no targets: {:#}",
        copy["metadata"]["annotations"]
    );
    // Target namespaces carry the group's uid label, as upstream's; b lost it.
    let uid = get(&ns.name, "operatorgroup/og").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let label = format!("olm.operatorgroup.uid/{uid}");
    let labelled = |namespace: &str| {
        let out = kubectl(&["get", "namespace", namespace, "-o", "json"], None).ok();
        let value: serde_json::Value = serde_json::from_str(&out.stdout()).unwrap();
        value["metadata"]["labels"][label.as_str()].is_string()
    };
    eventually("a labelled, b not", WAIT, || async {
        (labelled(&ns.name) && labelled(&a.name) && !labelled(&b.name)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn disabled_copies_leave_none_for_all_namespaces() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-nocopy").await;
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false", "--disable-copied-csvs"]);
    apply_crds("kernel-module-management", "2.2.0");
    operator_group(&ns.name, "global", None);
    apply_csv(&ns.name, "kernel-module-management", "2.2.0");
    wait_for_phase(
        &ns.name,
        "kernel-module-management.v2.2.0",
        "Succeeded",
        None,
    )
    .await;
    // AllNamespaces: permissions lifted to cluster roles with namespace access.
    let sa = format!(
        "system:serviceaccount:{}:kernel-module-management-controller-manager",
        ns.name
    );
    let can = kubectl(
        &["auth", "can-i", "list", "namespaces", &format!("--as={sa}")],
        None,
    );
    assert_eq!(can.stdout().trim(), "yes");
    assert!(names("csv", &format!("olm.copiedFrom={}", ns.name), None).is_empty());
}

#[tokio::test]
async fn a_restart_while_installing_converges_without_duplicates() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "csv-restart").await;
    let mut olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply_crds("reverse-words", "0.3.0");
    operator_group(&ns.name, "og", Some(&[&ns.name]));
    apply_csv(&ns.name, "reverse-words", "0.3.0");
    eventually("Installing", WAIT, || async {
        let csv = get(&ns.name, "csv/reverse-words.v0.3.0")?;
        matches!(
            csv["status"]["phase"].as_str(),
            Some("Installing" | "Succeeded")
        )
        .then_some(())
    })
    .await;
    olm.process.kill();
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let csv = wait_for_phase(&ns.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    assert_eq!(
        phase_order(&csv),
        ["Pending", "InstallReady", "Installing", "Succeeded"],
        "{:#}",
        csv["status"]
    );
    let selector = owner_selector("reverse-words.v0.3.0", &ns.name);
    assert_eq!(names("deployments", &selector, Some(&ns.name)).len(), 1);
    assert_eq!(names("roles", &selector, Some(&ns.name)).len(), 1);
    assert_eq!(names("rolebindings", &selector, Some(&ns.name)).len(), 1);
    assert_eq!(names("serviceaccounts", &selector, Some(&ns.name)).len(), 1);
}

/// Two OperatorGroups whose targets meet may not both provide an API (upstream's
/// InterOperatorGroupOwnerConflict): the later CSV fails naming the earlier one, which stays
/// Succeeded, and its group does not advertise the API; once the earlier CSV is gone the
/// later one installs. One OLM watches both namespaces (`--watch-namespace a,b`).
#[tokio::test]
async fn groups_that_meet_cannot_both_provide_an_api() {
    install_crds();
    let client = client().await;
    let first = TestNamespace::create(&client, "og-conflict-a").await;
    let second = TestNamespace::create(&client, "og-conflict-b").await;
    let _olm = OlmRun::start(
        &format!("{},{}", first.name, second.name),
        &["--leader-elect=false"],
    );
    apply_crds("reverse-words", "0.3.0");
    // The first group targets the second namespace, the second group its own: they meet.
    operator_group(&first.name, "og", Some(&[&second.name]));
    operator_group(&second.name, "og", Some(&[&second.name]));
    apply_csv(&first.name, "reverse-words", "0.3.0");
    wait_for_phase(&first.name, "reverse-words.v0.3.0", "Succeeded", None).await;
    // Another operator (another CSV name) that owns the same CRD.
    let mut fork = csv_json("reverse-words", "0.3.0");
    fork["metadata"]["name"] = serde_json::json!("reverse-words-fork.v0.3.0");
    apply_json(&second.name, &fork);
    let lost = wait_for_phase(
        &second.name,
        "reverse-words-fork.v0.3.0",
        "Failed",
        Some("InterOperatorGroupOwnerConflict"),
    )
    .await;
    let message = lost["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("intersecting operatorgroups provide the same apis")
            && message.contains("ReverseWordsApp.v1alpha1.apps.linuxera.org")
            && message.contains(&format!("{}/reverse-words.v0.3.0", first.name)),
        "{message}"
    );
    let winner = get(&first.name, "csv/reverse-words.v0.3.0").unwrap();
    assert_eq!(winner["status"]["phase"], "Succeeded");
    let advertised = |ns: &str| {
        get(ns, "operatorgroup/og").unwrap()["metadata"]["annotations"]["olm.providedAPIs"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        advertised(&first.name),
        "ReverseWordsApp.v1alpha1.apps.linuxera.org"
    );
    // The loser's group may have advertised it before the CSV failed: it stops.
    eventually("the second group advertising nothing", WAIT, || async {
        advertised(&second.name).is_empty().then_some(())
    })
    .await;
    // The earlier operator goes: the later one installs (it looks again every minute).
    kubectl(
        &[
            "delete",
            "csv",
            "reverse-words.v0.3.0",
            "-n",
            &first.name,
            "--wait=false",
        ],
        None,
    )
    .ok();
    eventually(
        "the later CSV Succeeded",
        std::time::Duration::from_secs(180),
        || async {
            let csv = get(&second.name, "csv/reverse-words-fork.v0.3.0")?;
            (csv["status"]["phase"] == "Succeeded").then_some(())
        },
    )
    .await;
}
