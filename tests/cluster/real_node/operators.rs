//! Our operators installed by OLM and run for real: the operator's pod starts from the image
//! its bundle names (`quay.io/olm-rs/…`, served by the node's registry), reconciles with the
//! ServiceAccount token OLM made, and the pods it makes serve; an upgrade rolls the
//! Deployment to the new image, and the old CSV goes only once the new pod is Ready.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher;
use olm::api::ClusterServiceVersion;

use super::{
    Node, WAIT, all_pods, approve_pending, assert_running_for_real, expect_operator_running,
    http_through_service, image_of, namespace, ready,
};
use crate::catalog_sources::{catalog_source_yaml, wait_for_state};
use crate::harness::{client, eventually, install_crds, kubectl, repo_root};
use crate::operators::apply;
use crate::processes::{OlmRun, free_port, olm_serve};

const OPERATOR_IMAGE: &str = "quay.io/olm-rs/reverse-words-operator:";

/// A `ReverseWordsApp` named `name`: its pod runs on the node and its Service answers.
pub async fn expect_app_answering(namespace: &str, name: &str) {
    apply(&format!(
        "apiVersion: apps.linuxera.org/v1alpha1\nkind: ReverseWordsApp\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  replicas: 1\n"
    ));
    let deployment = format!("deployment/dp-{name}");
    eventually(&format!("{deployment} made"), WAIT, || async {
        kubectl(&["get", "-n", namespace, &deployment], None)
            .success()
            .then_some(())
    })
    .await;
    kubectl(
        &[
            "rollout",
            "status",
            "-n",
            namespace,
            &deployment,
            "--timeout=120s",
        ],
        None,
    )
    .ok();
    let app = all_pods(namespace)
        .into_iter()
        .find(|p| image_of(p).contains("/reverse-words-app:") && ready(p))
        .expect("a Ready app pod");
    assert_running_for_real(&app);
    let answer = eventually("the app answers through its Service", WAIT, || async {
        http_through_service(
            namespace,
            &format!("service-{name}"),
            8080,
            "POST",
            Some(r#"{"word":"PALC"}"#),
        )
    })
    .await;
    assert!(answer.contains("CLAP"), "{answer}");
}

/// The reverse-words operator's images that are Ready right now, by tag.
async fn ready_operator_tags(pods: &Api<Pod>) -> Vec<String> {
    let list = pods.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .filter(ready)
        .filter_map(|p| {
            image_of(&p)
                .strip_prefix(OPERATOR_IMAGE)
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn reverse_words_runs_and_upgrades_from_0_2_0_to_0_5_0_on_the_real_node() {
    install_crds();
    let node = Node::get();
    let tags = ["v0.2.0", "v0.3.0", "v0.4.0", "v0.5.0"];
    node.push_binary("reverse-words-operator", &tags);
    node.push_binary("reverse-words-app", &["v0.5.0"]);
    let client = client().await;
    let ns = namespace(&client, "rn-upgrade").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    apply(&catalog_source_yaml(
        &ns.name,
        "operators",
        &format!("127.0.0.1:{port}"),
        "",
    ));
    wait_for_state(&ns.name, "operators", "READY");
    apply(&super::reverse_words_subscription(
        &ns.name,
        "  startingCSV: reverse-words.v0.2.0\n  installPlanApproval: Manual\n",
    ));
    eventually("the first InstallPlan approved", WAIT, || async {
        (approve_pending(&ns.name) > 0).then_some(())
    })
    .await;
    expect_operator_running(
        &ns.name,
        "reverse-words.v0.2.0",
        &format!("{OPERATOR_IMAGE}v0.2.0"),
    )
    .await;
    expect_app_answering(&ns.name, "words").await;

    // Every CSV deletion from here on, with the operator images Ready at that moment.
    let deletions = Arc::new(Mutex::new(Vec::<(String, Vec<String>)>::new()));
    let existing = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let names = existing.clone();
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let seen = deletions.clone();
    let watch = tokio::spawn(async move {
        let mut events = watcher(csvs, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::Delete(csv) => {
                    let name = csv.metadata.name.unwrap_or_default();
                    let ready = ready_operator_tags(&pods).await;
                    names.lock().unwrap().remove(&name);
                    seen.lock().unwrap().push((name, ready));
                }
                watcher::Event::Apply(csv) | watcher::Event::InitApply(csv) => {
                    names
                        .lock()
                        .unwrap()
                        .insert(csv.metadata.name.unwrap_or_default());
                }
                _ => {}
            }
        }
    });

    // Approve each next plan until the head of the channel runs.
    eventually("reverse-words.v0.5.0 Succeeded", WAIT * 2, || async {
        let _ = approve_pending(&ns.name);
        let out = kubectl(
            &[
                "get",
                "csv",
                "reverse-words.v0.5.0",
                "-n",
                &ns.name,
                "-o",
                "jsonpath={.status.phase}",
            ],
            None,
        );
        (out.stdout() == "Succeeded").then_some(())
    })
    .await;
    expect_operator_running(
        &ns.name,
        "reverse-words.v0.5.0",
        &format!("{OPERATOR_IMAGE}v0.5.0"),
    )
    .await;
    eventually("every old CSV gone", WAIT, || async {
        let left = existing.lock().unwrap().clone();
        (left.len() == 1 && left.contains("reverse-words.v0.5.0")).then_some(())
    })
    .await;
    assert!(!deletions.lock().unwrap().is_empty());
    watch.abort();
    for (csv, ready_tags) in deletions.lock().unwrap().iter() {
        let old = csv.trim_start_matches("reverse-words.");
        assert!(
            ready_tags.iter().any(|t| version(t) > version(old)),
            "{csv} deleted while the Ready operator images were {ready_tags:?}"
        );
    }
    // The app the old operator made is still served, by the new one.
    expect_app_answering(&ns.name, "words").await;
    let events = kubectl(&["get", "events", "-n", &ns.name, "-o", "json"], None)
        .ok()
        .stdout();
    assert!(!events.contains("CrashLoopBackOff"), "{events}");
}

fn version(tag: &str) -> semver::Version {
    semver::Version::parse(tag.trim_start_matches('v')).unwrap()
}
