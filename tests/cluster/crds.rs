//! The OLM CRDs install with `olm crds | kubectl apply -f -`, become Established, show
//! upstream's columns in `kubectl get`, and the API server enforces their schemas.

use crate::harness::{OLM_CRDS, TestNamespace, client, eventually, install_crds, kubectl};

/// One object of each kind, as a user would write them.
const OBJECTS: &str = r#"
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: demo-catalog}
spec: {sourceType: grpc, address: "127.0.0.1:50051", displayName: Demo Catalog, publisher: OLM-rs}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: demo-og}
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: demo-sub}
spec: {name: reverse-words, source: demo-catalog, sourceNamespace: olm, channel: stable}
---
apiVersion: operators.coreos.com/v1alpha1
kind: InstallPlan
metadata: {name: install-abcde}
spec: {clusterServiceVersionNames: [reverse-words.v0.1.0], approval: Manual, approved: false}
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: reverse-words.v0.2.0}
spec:
  displayName: Reverse Words
  version: 0.2.0
  replaces: reverse-words.v0.1.0
  install: {strategy: deployment, spec: {deployments: []}}
"#;

#[tokio::test]
async fn crds_are_established_and_kubectl_get_prints_upstream_columns() {
    install_crds();
    for crd in OLM_CRDS {
        let established = kubectl(
            &[
                "get",
                "crd",
                crd,
                "-o",
                r#"jsonpath={.status.conditions[?(@.type=="Established")].status}"#,
            ],
            None,
        )
        .ok();
        assert_eq!(established.stdout(), "True", "{crd}");
    }
    let client = client().await;
    let ns = TestNamespace::create(&client, "columns").await;
    kubectl(&["apply", "-n", &ns.name, "-f", "-"], Some(OBJECTS)).ok();

    // `ip` is upstream's short name too, but since Kubernetes 1.33 kubectl resolves `ip` to the
    // built-in networking.k8s.io IPAddress first, on any cluster; `installplan` is unambiguous.
    let listing = kubectl(&["get", "csv,sub,installplan,catsrc,og", "-A"], None)
        .ok()
        .stdout();
    let headers: Vec<Vec<&str>> = listing
        .lines()
        .filter(|l| l.starts_with("NAMESPACE"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        headers,
        vec![
            vec![
                "NAMESPACE",
                "NAME",
                "DISPLAY",
                "VERSION",
                "RELEASE",
                "REPLACES",
                "PHASE"
            ],
            vec!["NAMESPACE", "NAME", "PACKAGE", "SOURCE", "CHANNEL"],
            vec!["NAMESPACE", "NAME", "CSV", "APPROVAL", "APPROVED"],
            vec!["NAMESPACE", "NAME", "DISPLAY", "TYPE", "PUBLISHER", "AGE"],
            vec!["NAMESPACE", "NAME", "AGE"],
        ],
        "{listing}"
    );
    let row = |name: &str| -> Vec<String> {
        let suffix = format!("/{name}");
        let line = listing
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|n| n.ends_with(&suffix))
            })
            .unwrap_or_else(|| panic!("{name} in {listing}"));
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(
        row("reverse-words.v0.2.0")[2..],
        ["Reverse", "Words", "0.2.0", "reverse-words.v0.1.0"]
    );
    assert_eq!(
        row("demo-sub")[2..],
        ["reverse-words", "demo-catalog", "stable"]
    );
    assert_eq!(
        row("install-abcde")[2..],
        ["reverse-words.v0.1.0", "Manual", "false"]
    );
    assert_eq!(
        row("demo-catalog")[2..6],
        ["Demo", "Catalog", "grpc", "OLM-rs"]
    );

    // The short names and the `olm` category work as upstream's do.
    // Retried: another test may have just created a CRD of the same category (upstream's
    // OLMConfig) that discovery lists before it is served.
    let by_category = eventually(
        "kubectl get olm",
        std::time::Duration::from_secs(60),
        || async {
            let out = kubectl(&["get", "olm", "-n", &ns.name, "-o", "name"], None);
            out.success().then(|| out.stdout())
        },
    )
    .await;
    for kind in [
        "clusterserviceversion",
        "subscription",
        "installplan",
        "catalogsource",
        "operatorgroup",
    ] {
        assert!(
            by_category.contains(&format!("{kind}.operators.coreos.com/")),
            "{kind} in {by_category}"
        );
    }
    // An OperatorGroup without spec is defaulted like upstream's.
    let strategy = kubectl(
        &[
            "get",
            "og",
            "demo-og",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={.spec.upgradeStrategy}",
        ],
        None,
    )
    .ok();
    assert_eq!(strategy.stdout(), "Default");
}

#[tokio::test]
async fn invalid_objects_are_refused_with_the_api_servers_message() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "invalid").await;
    let cases = [
        (
            "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: no-package}\nspec: {source: c, sourceNamespace: olm}\n",
            "spec.name: Required value",
        ),
        (
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: bad-targets}\nspec: {targetNamespaces: default}\n",
            "spec.targetNamespaces: Invalid value: \"string\"",
        ),
        (
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {name: no-type}\nspec: {address: \"x:1\"}\n",
            "spec.sourceType: Required value",
        ),
        (
            "apiVersion: operators.coreos.com/v1alpha1\nkind: InstallPlan\nmetadata: {name: install-x}\nspec: {approval: Automatic, approved: \"yes\", clusterServiceVersionNames: [a]}\n",
            "spec.approved: Invalid value: \"string\"",
        ),
        (
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata: {name: no-install}\nspec: {displayName: X}\n",
            "spec.install: Required value",
        ),
        (
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: bad-strategy}\nspec: {upgradeStrategy: Sometimes}\n",
            "spec.upgradeStrategy: Unsupported value: \"Sometimes\"",
        ),
    ];
    for (manifest, message) in cases {
        let result = kubectl(&["apply", "-n", &ns.name, "-f", "-"], Some(manifest));
        assert!(!result.success(), "the API server accepted:\n{manifest}");
        assert!(
            result.stderr().contains(message),
            "expected {message:?} in: {}",
            result.stderr()
        );
    }
}
