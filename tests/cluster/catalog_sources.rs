//! The CatalogSource controller against the real control plane, driven the way users drive
//! it: `kubectl apply` of upstream-shaped YAML, `kubectl wait` on `connectionState`, and
//! `olm run`'s `/debug/catalogs` to see the snapshot the resolver would use.

use std::time::Duration;

use serde_json::Value;

use super::harness::{TestNamespace, client, eventually, install_crds, kubectl, repo_root};
use super::processes::{OlmRun, free_port, olm_serve};

const WAIT: Duration = Duration::from_secs(60);

pub fn catalog_source_yaml(namespace: &str, name: &str, address: &str, extra_spec: &str) -> String {
    format!(
        r#"apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: {name}
  namespace: {namespace}
spec:
  sourceType: grpc
  address: {address}
  displayName: Test Operators
  publisher: olm-rs tests
{extra_spec}"#
    )
}

pub fn get_json(namespace: &str, resource: &str) -> Value {
    let out = kubectl(&["get", resource, "-n", namespace, "-o", "json"], None).ok();
    serde_json::from_str(&out.stdout()).unwrap()
}

pub fn condition<'a>(catsrc: &'a Value, type_: &str) -> &'a Value {
    catsrc["status"]["conditions"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {:#}", catsrc["status"]))
}

pub fn wait_for_state(namespace: &str, name: &str, state: &str) {
    kubectl(
        &[
            "wait",
            "-n",
            namespace,
            &format!("catalogsource/{name}"),
            &format!("--for=jsonpath={{.status.connectionState.lastObservedState}}={state}"),
            "--timeout=60s",
        ],
        None,
    )
    .ok();
}

/// Reasons of the Events recorded on one object.
pub fn event_reasons(namespace: &str, name: &str) -> Vec<String> {
    let out = kubectl(
        &[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "-o",
            "json",
        ],
        None,
    )
    .ok();
    let events: Value = serde_json::from_str(&out.stdout()).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Waits until an Event with `reason` is recorded on the object.
pub async fn wait_for_event(namespace: &str, name: &str, reason: &str) {
    eventually(&format!("a {reason} event on {name}"), WAIT, || async {
        event_reasons(namespace, name)
            .iter()
            .any(|r| r == reason)
            .then_some(())
    })
    .await;
}

fn our_catalog_packages() -> Vec<String> {
    let content = olm::catalog::reading::load::load_path(&repo_root().join("catalog")).unwrap();
    let mut names: Vec<String> = content.packages.iter().map(|p| p.name.clone()).collect();
    names.sort();
    names
}

fn our_catalog_bundles() -> u64 {
    let content = olm::catalog::reading::load::load_path(&repo_root().join("catalog")).unwrap();
    content.bundles.len() as u64
}

#[tokio::test]
async fn grpc_catalog_follows_its_server_and_writes_nothing_at_steady_state() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-grpc").await;
    let port = free_port();
    let mut server = olm_serve(&repo_root().join("catalog"), port);
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);

    let address = format!("127.0.0.1:{port}");
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(&ns.name, "operators", &address, "")),
    )
    .ok();
    wait_for_state(&ns.name, "operators", "READY");

    // The snapshot holds our catalog, and the conditions say so.
    let snapshot = eventually("the snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "operators")
    })
    .await;
    let packages: Vec<String> = serde_json::from_value(snapshot["packages"].clone()).unwrap();
    assert_eq!(packages, our_catalog_packages());
    assert_eq!(snapshot["bundles"], our_catalog_bundles());
    let catsrc = get_json(&ns.name, "catalogsource/operators");
    assert_eq!(
        catsrc["status"]["connectionState"]["address"],
        address.as_str()
    );
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");
    assert_eq!(condition(&catsrc, "Connected")["status"], "True");

    // Steady state: rounds keep running (one a second) but nothing is written. Waits for
    // three more rounds to be counted, not for a fixed time.
    let version = catsrc["metadata"]["resourceVersion"].clone();
    let rounds = r#"olm_reconciles_total{controller="catalogsource"}"#;
    let writes = r#"olm_status_writes_total{controller="catalogsource"}"#;
    let rounds_before = olm.metric(rounds).unwrap();
    let writes_before = olm.metric(writes).unwrap();
    eventually("three more health-check rounds", WAIT, || async {
        olm.metric(rounds).filter(|now| *now >= rounds_before + 3.0)
    })
    .await;
    assert_eq!(
        olm.metric(writes).unwrap(),
        writes_before,
        "no status write at steady state"
    );
    let catsrc = get_json(&ns.name, "catalogsource/operators");
    assert_eq!(
        catsrc["metadata"]["resourceVersion"], version,
        "no write at steady state: {:#}",
        catsrc["status"]
    );

    // The server goes away: TRANSIENT_FAILURE, a condition and an Event; the content stays.
    server.kill();
    wait_for_state(&ns.name, "operators", "TRANSIENT_FAILURE");
    let catsrc = get_json(&ns.name, "catalogsource/operators");
    let connected = condition(&catsrc, "Connected");
    assert_eq!(connected["status"], "False");
    assert_eq!(connected["reason"], "ConnectionFailed");
    assert!(
        connected["message"].as_str().unwrap().contains(&address),
        "the message names the address: {connected:#}"
    );
    assert_eq!(condition(&catsrc, "CatalogLoaded")["status"], "True");
    assert!(
        olm.snapshot(&ns.name, "operators").is_some(),
        "the last good snapshot stays"
    );
    wait_for_event(&ns.name, "operators", "ConnectionFailed").await;

    // It comes back on the same address: READY again.
    let _server = olm_serve(&repo_root().join("catalog"), port);
    wait_for_state(&ns.name, "operators", "READY");
    let catsrc = get_json(&ns.name, "catalogsource/operators");
    assert_eq!(condition(&catsrc, "Connected")["status"], "True");
    assert_eq!(
        catsrc["status"].get("reason"),
        None,
        "{:#}",
        catsrc["status"]
    );
}

#[tokio::test]
async fn registry_poll_reloads_content_and_only_a_change_is_an_update() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-poll").await;
    // A copy of our catalog that the test edits while it is served.
    let dir = std::env::temp_dir().join(format!("olm-poll-{}", ns.name));
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&repo_root().join("catalog"), &dir);
    let port = free_port();
    let mut server = olm_serve(&dir, port);
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let poll = "  updateStrategy:\n    registryPoll:\n      interval: 1s\n";
    kubectl(
        &["apply", "-f", "-"],
        Some(&catalog_source_yaml(
            &ns.name,
            "polled",
            &format!("127.0.0.1:{port}"),
            poll,
        )),
    )
    .ok();
    wait_for_state(&ns.name, "polled", "READY");
    let first = eventually("the snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "polled")
    })
    .await;
    let labels = format!(r#"{{namespace="{}",name="polled"}}"#, ns.name);
    let updates = |olm: &OlmRun| {
        olm.metric(&format!("olm_catalog_content_updates_total{labels}"))
            .unwrap()
    };
    let loads = |olm: &OlmRun| {
        olm.metric(&format!("olm_catalog_loads_total{labels}"))
            .unwrap()
    };
    assert_eq!(updates(&olm), 1.0);

    // Polls with unchanged content: loads happen, nothing is updated or written.
    let version = get_json(&ns.name, "catalogsource/polled")["metadata"]["resourceVersion"].clone();
    let loads_before = loads(&olm);
    eventually("two more polls", WAIT, || async {
        Some(()).filter(|()| loads(&olm) >= loads_before + 2.0)
    })
    .await;
    assert_eq!(updates(&olm), 1.0, "same content is not an update");
    assert_eq!(
        get_json(&ns.name, "catalogsource/polled")["metadata"]["resourceVersion"],
        version
    );

    // New content (at is removed): the next poll picks it up and says so.
    server.kill();
    std::fs::remove_dir_all(dir.join("at")).unwrap();
    let _server = olm_serve(&dir, port);
    let second = eventually("the updated snapshot", WAIT, || async {
        olm.snapshot(&ns.name, "polled")
            .filter(|s| s["digest"] != first["digest"])
    })
    .await;
    let packages: Vec<String> = serde_json::from_value(second["packages"].clone()).unwrap();
    assert!(!packages.contains(&"at".to_string()), "{packages:?}");
    wait_for_event(&ns.name, "polled", "CatalogUpdated").await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_bad_spec_or_an_unreadable_object_is_reported_and_the_rest_keeps_working() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-bad").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);

    // sourceType is a free string in upstream's schema: "bogus" is read, and refused in
    // status as upstream does (SpecInvalidError, "unknown sourcetype: bogus").
    let unreadable = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: unreadable\n  namespace: {}\nspec:\n  sourceType: bogus\n",
        ns.name
    );
    // grpc without an address, and an address nothing listens on.
    let no_address = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: no-address\n  namespace: {}\nspec:\n  sourceType: grpc\n",
        ns.name
    );
    let nobody = catalog_source_yaml(
        &ns.name,
        "nobody",
        &format!("127.0.0.1:{}", free_port()),
        "",
    );
    let good = catalog_source_yaml(&ns.name, "good", &format!("127.0.0.1:{port}"), "");
    // An interval Go cannot parse, on a source nobody serves: upstream names the interval
    // first, whatever state the source is in.
    let bad_interval = catalog_source_yaml(
        &ns.name,
        "bad-interval",
        &format!("127.0.0.1:{}", free_port()),
        "  updateStrategy:\n    registryPoll:\n      interval: 1x\n",
    );
    for yaml in [&unreadable, &no_address, &nobody, &good, &bad_interval] {
        kubectl(&["apply", "-f", "-"], Some(yaml)).ok();
    }

    wait_for_state(&ns.name, "good", "READY");
    // What serves it, as upstream's tools wait for it.
    let good = get_json(&ns.name, "catalogsource/good");
    let service = &good["status"]["registryService"];
    assert_eq!(service["protocol"], "grpc", "{service:#}");
    assert_eq!(service["serviceName"], "127.0.0.1");
    assert_eq!(service["serviceNamespace"], ns.name.as_str());
    assert_eq!(service["port"], port.to_string());
    assert!(service["createdAt"].is_string());
    wait_for_state(&ns.name, "nobody", "TRANSIENT_FAILURE");
    let nobody = get_json(&ns.name, "catalogsource/nobody");
    assert_eq!(condition(&nobody, "CatalogLoaded")["reason"], "NotLoaded");

    let no_address = eventually("a status on no-address", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/no-address");
        catsrc["status"]["reason"].is_string().then_some(catsrc)
    })
    .await;
    assert_eq!(no_address["status"]["reason"], "SpecInvalidError");
    assert!(
        no_address["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec.address"),
        "{:#}",
        no_address["status"]
    );

    let bogus = eventually("a status on the unknown source type", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/unreadable");
        catsrc["status"]["reason"].is_string().then_some(catsrc)
    })
    .await;
    assert_eq!(
        bogus["status"]["reason"], "SpecInvalidError",
        "{:#}",
        bogus["status"]
    );
    assert_eq!(bogus["status"]["message"], "unknown sourcetype: bogus");

    wait_for_state(&ns.name, "bad-interval", "TRANSIENT_FAILURE");
    let bad_interval = get_json(&ns.name, "catalogsource/bad-interval");
    assert_eq!(bad_interval["status"]["reason"], "InvalidIntervalError");
    assert_eq!(
        bad_interval["status"]["message"],
        "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of \
         15m0s instead. Error: time: unknown unit \"x\" in duration \"1x\""
    );
    assert_eq!(condition(&bad_interval, "Connected")["status"], "False");
    assert!(olm.snapshot(&ns.name, "good").is_some());
}

/// The testdata rendered into a fresh directory named after the test.
#[cfg(feature = "upstream-tests")]
fn rendered_testdata(name: &str, with_kuadrant: bool) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("olm-testdata-fbc-{name}-{with_kuadrant}"));
    let _ = std::fs::remove_dir_all(&dir);
    super::common::render_testdata(&dir, with_kuadrant);
    dir
}

#[cfg(feature = "upstream-tests")]
#[tokio::test]
async fn reads_catalogs_served_by_upstream_opm_like_those_served_by_olm() {
    use super::processes::opm_serve;
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-opm").await;
    let testdata = rendered_testdata(&ns.name, false);
    let with_kuadrant = rendered_testdata(&ns.name, true);
    let testdata_bundles = olm::catalog::reading::load::load_path(&testdata)
        .unwrap()
        .bundles
        .len() as u64;
    let ports: Vec<u16> = (0..5).map(|_| free_port()).collect();
    let _servers = [
        opm_serve(&repo_root().join("catalog"), ports[0]),
        olm_serve(&repo_root().join("catalog"), ports[1]),
        opm_serve(&testdata, ports[2]),
        olm_serve(&testdata, ports[3]),
        // Ours serves what opm would refuse; the CatalogSource then refuses it, as upstream.
        olm_serve(&with_kuadrant, ports[4]),
    ];
    let olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let names = [
        "ours-from-opm",
        "ours-from-olm",
        "testdata-from-opm",
        "testdata-from-olm",
        "invalid",
    ];
    for (name, port) in names.iter().zip(&ports) {
        kubectl(
            &["apply", "-f", "-"],
            Some(&catalog_source_yaml(
                &ns.name,
                name,
                &format!("127.0.0.1:{port}"),
                "",
            )),
        )
        .ok();
    }
    let mut snapshots = Vec::new();
    for name in &names[..4] {
        wait_for_state(&ns.name, name, "READY");
        let snapshot = eventually(name, WAIT, || async { olm.snapshot(&ns.name, name) }).await;
        let catsrc = get_json(&ns.name, &format!("catalogsource/{name}"));
        assert_eq!(
            condition(&catsrc, "CatalogLoaded")["status"],
            "True",
            "{name}: {:#}",
            catsrc["status"]
        );
        snapshots.push(snapshot);
    }
    let packages: Vec<String> = serde_json::from_value(snapshots[0]["packages"].clone()).unwrap();
    assert_eq!(packages, our_catalog_packages());
    assert_eq!(snapshots[0]["bundles"], our_catalog_bundles());
    assert_eq!(snapshots[2]["bundles"], testdata_bundles);
    // The same content, read through either server, is the same catalog.
    assert_eq!(snapshots[0]["digest"], snapshots[1]["digest"]);
    assert_eq!(snapshots[2]["digest"], snapshots[3]["digest"]);

    // A catalog that does not validate: connected, but not loaded, and the condition says why.
    let invalid = eventually("the InvalidCatalog condition", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/invalid");
        catsrc["status"]["conditions"]
            .as_array()
            .is_some_and(|list| list.iter().any(|c| c["reason"] == "InvalidCatalog"))
            .then_some(catsrc)
    })
    .await;
    let loaded = condition(&invalid, "CatalogLoaded");
    let message = loaded["message"].as_str().unwrap();
    assert!(
        message.contains("kuadrant-operator") && message.contains("oci://"),
        "{message}"
    );
    assert!(message.contains("no content loaded"), "{message}");
    assert!(olm.snapshot(&ns.name, "invalid").is_none());
    wait_for_event(&ns.name, "invalid", "InvalidCatalog").await;
    let _ = std::fs::remove_dir_all(&testdata);
    let _ = std::fs::remove_dir_all(&with_kuadrant);
}

#[tokio::test]
async fn catalogs_of_the_global_namespace_are_visible_from_every_namespace() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-global").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    // This test's namespace plays the global catalog namespace for one process, not the other.
    let global = OlmRun::start(
        &ns.name,
        &[
            "--leader-elect=false",
            "--global-catalog-namespace",
            &ns.name,
        ],
    );
    let local = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    for (name, priority) in [("low", "0"), ("high", "10")] {
        let spec = format!("  priority: {priority}\n");
        kubectl(
            &["apply", "-f", "-"],
            Some(&catalog_source_yaml(
                &ns.name,
                name,
                &format!("127.0.0.1:{port}"),
                &spec,
            )),
        )
        .ok();
    }
    wait_for_state(&ns.name, "low", "READY");
    wait_for_state(&ns.name, "high", "READY");
    let visible = |olm: &OlmRun, from: &str| -> Vec<String> {
        let (code, body) = olm
            .get(&format!("/debug/catalogs?visibleFrom={from}"))
            .unwrap();
        assert_eq!(code, 200, "{body}");
        let list: Value = serde_json::from_str(&body).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    eventually("both snapshots in both processes", WAIT, || async {
        (visible(&global, &ns.name).len() == 2 && visible(&local, &ns.name).len() == 2)
            .then_some(())
    })
    .await;
    // Own namespace: both, highest priority first.
    assert_eq!(visible(&global, &ns.name), ["high", "low"]);
    // Another namespace sees them only where they are global.
    assert_eq!(visible(&global, "some-other-namespace"), ["high", "low"]);
    assert!(visible(&local, "some-other-namespace").is_empty());
}

/// `olm.catalogImageTemplate` (upstream's "adding catalog template adjusts image used"):
/// the API server's version fills the template into `spec.image`, with upstream's two
/// conditions; a template that cannot resolve leaves the image alone and says why; removing
/// the annotation removes the conditions. The catalog itself keeps serving throughout.
#[tokio::test]
async fn a_catalog_image_template_follows_the_kube_version() {
    install_crds();
    let client = client().await;
    let ns = TestNamespace::create(&client, "catsrc-template").await;
    let port = free_port();
    let _server = olm_serve(&repo_root().join("catalog"), port);
    let _olm = OlmRun::start(&ns.name, &["--leader-elect=false"]);
    let version: Value =
        serde_json::from_str(&kubectl(&["version", "-o", "json"], None).ok().stdout()).unwrap();
    let git_version = version["serverVersion"]["gitVersion"].as_str().unwrap();
    let numbers = git_version.trim_start_matches('v');
    let numbers = numbers.split(['+', '-']).next().unwrap();

    let with_template = |template: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata:\n  name: templated\n  namespace: {}\n  annotations:\n    olm.catalogImageTemplate: \"{template}\"\nspec:\n  sourceType: grpc\n  address: 127.0.0.1:{port}\n  image: quay.io/olmtest/catsrc-update-test:old\n",
            ns.name
        )
    };
    let has = |catsrc: &Value, type_: &str, status: &str| {
        catsrc["status"]["conditions"].as_array().is_some_and(|l| {
            l.iter()
                .any(|c| c["type"] == type_ && c["status"] == status)
        })
    };
    kubectl(
        &["apply", "-f", "-"],
        Some(&with_template(
            "quay.io/olmtest/catsrc-update-test:{kube_major_version}.{kube_minor_version}.{kube_patch_version}",
        )),
    )
    .ok();
    let resolved = eventually("the image resolved from the template", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/templated");
        has(&catsrc, "ResolvedImage", "True").then_some(catsrc)
    })
    .await;
    let expected = format!("quay.io/olmtest/catsrc-update-test:{numbers}");
    assert_eq!(resolved["spec"]["image"], expected.as_str());
    let templates = condition(&resolved, "TemplatesHaveResolved");
    assert_eq!(templates["status"], "True");
    assert_eq!(templates["reason"], "AllTemplatesResolved");
    assert_eq!(
        condition(&resolved, "ResolvedImage")["message"],
        expected.as_str()
    );
    wait_for_state(&ns.name, "templated", "READY");

    kubectl(
        &[
            "annotate",
            "--overwrite",
            "catalogsource/templated",
            "-n",
            &ns.name,
            "olm.catalogImageTemplate=quay.io/olmtest/catsrc-update-test:{openshift_version}",
        ],
        None,
    )
    .ok();
    let unresolved = eventually("the template refused", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/templated");
        has(&catsrc, "TemplatesHaveResolved", "False").then_some(catsrc)
    })
    .await;
    assert_eq!(
        condition(&unresolved, "TemplatesHaveResolved")["reason"],
        "UnableToResolve"
    );
    assert_eq!(unresolved["spec"]["image"], expected.as_str());

    kubectl(
        &[
            "annotate",
            "catalogsource/templated",
            "-n",
            &ns.name,
            "olm.catalogImageTemplate-",
        ],
        None,
    )
    .ok();
    eventually("the template's conditions removed", WAIT, || async {
        let catsrc = get_json(&ns.name, "catalogsource/templated");
        let conditions = catsrc["status"]["conditions"].as_array().cloned()?;
        conditions
            .iter()
            .all(|c| c["type"] != "TemplatesHaveResolved" && c["type"] != "ResolvedImage")
            .then_some(())
    })
    .await;
}
