//! Our own `catalog/` and the community-operators testdata, rendered with our tooling.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::*;
use crate::catalog::bundles::render::{RenderOptions, render_package_folders};
use crate::catalog::reading::load::load_path;

fn our_catalog() -> CatalogIndex {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("catalog");
    let content = load_path(&dir).expect("catalog/ loads");
    CatalogIndex::new(&[Catalog {
        name: "olm-rs".into(),
        namespace: "olm".into(),
        priority: 0,
        content,
    }])
}

fn subscribe(package: &str, catalog: &str) -> Subscription {
    Subscription {
        source: CatalogRef::new(catalog, "olm"),
        ..sub(package, catalog)
    }
}

#[test]
fn ptemplate_pulls_kernel_module_management() {
    let plan = resolve(
        &our_catalog(),
        &ns(vec![], vec![subscribe("ptemplate", "olm-rs")]),
    )
    .unwrap();
    assert_eq!(
        steps(&plan),
        vec![
            "kernel-module-management.v2.2.0@olm-rs",
            "ptemplate.v0.3.0@olm-rs"
        ]
    );
    assert_eq!(plan.steps[0].dependency_of, vec!["ptemplate.v0.3.0"]);
    assert_eq!(
        plan.steps[0].reason,
        Reason::Dependency {
            generated_subscription: "kernel-module-management-stable-olm-rs-olm".into()
        }
    );
}

#[test]
fn reverse_words_upgrades_along_replaces_then_the_skip_range() {
    let index = our_catalog();
    let mut from = installed("reverse-words", "0.1.0");
    let mut hops = Vec::new();
    // Each resolution is one hop (one InstallPlan upstream); follow them to the head.
    for _ in 0..5 {
        let plan = resolve(
            &index,
            &ns(
                vec![from.clone()],
                vec![subscribe("reverse-words", "olm-rs")],
            ),
        )
        .unwrap();
        let Some(step) = plan.steps.first() else {
            break;
        };
        assert_eq!(step.replaces.as_deref(), Some(from.name.as_str()));
        hops.push(step.bundle.clone());
        from = InstalledCsv {
            name: step.bundle.clone(),
            version: semver::Version::parse(&step.version).unwrap(),
            ..from
        };
    }
    assert_eq!(
        hops,
        vec![
            "reverse-words.v0.2.0",
            "reverse-words.v0.4.0",
            "reverse-words.v0.5.0"
        ]
    );
    // The alpha channel has 0.2.1 too, but it is skipped: 0.2.0 still jumps to 0.4.0, the
    // newest bundle whose skipRange covers it.
    let mut alpha = subscribe("reverse-words", "olm-rs");
    alpha.channel = Some("alpha".into());
    let plan = resolve(
        &index,
        &ns(vec![installed("reverse-words", "0.2.0")], vec![alpha]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["reverse-words.v0.4.0@olm-rs"]);
}

fn testdata_dir() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("../shared/testdata/community-operators/operators")
}

/// Every testdata package rendered into one catalog (rendering is slow in debug: once).
fn testdata_catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let content = render_package_folders(&testdata_dir(), &RenderOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        Catalog {
            name: "community".into(),
            namespace: "olm".into(),
            priority: 0,
            content,
        }
    })
}

fn testdata() -> &'static CatalogIndex {
    static INDEX: OnceLock<CatalogIndex> = OnceLock::new();
    INDEX.get_or_init(|| CatalogIndex::new(std::slice::from_ref(testdata_catalog())))
}

fn resolve_testdata(package: &str, starting: Option<&str>) -> Result<Plan, ResolveError> {
    let mut s = subscribe(package, "community");
    s.starting_csv = starting.map(String::from);
    resolve(testdata(), &ns(vec![], vec![s]))
}

#[test]
fn every_testdata_package_resolves_or_names_what_is_missing() {
    let index = testdata();
    let mut packages: Vec<&String> = index.catalogs[0].packages.keys().collect();
    packages.sort();
    assert!(packages.len() >= 30, "{packages:?}");
    for package in packages {
        match resolve_testdata(package, None) {
            Ok(plan) => assert!(
                plan.steps.iter().any(|s| &s.package == package),
                "{package}: {:?}",
                steps(&plan)
            ),
            Err(e) => {
                let text = e.to_string();
                // A failure must name a dependency that no bundle in the catalog provides.
                let names_missing = text
                    .contains("no catalog has an installable bundle of package")
                    || text.contains("only has versions")
                    || text.contains("no installable bundle in any catalog provides")
                    || text.contains("channel");
                assert!(names_missing, "{package}: {text}");
            }
        }
    }
}

#[test]
fn kuadrant_versions_needing_cert_manager_name_it() {
    let index = testdata();
    let package = &index.catalogs[0].packages["kuadrant-operator"];
    let mut checked = 0;
    for (name, &b) in &package.bundles {
        let needs_cert_manager = index.bundles[b]
            .dependencies
            .iter()
            .any(|d| d.to_string().contains("cert-manager"));
        if !needs_cert_manager || !index.bundles[b].usable() {
            continue;
        }
        let text = error_text(resolve_testdata("kuadrant-operator", Some(name)));
        assert!(
            text.contains("package cert-manager") && text.contains(name),
            "{name}: {text}"
        );
        checked += 1;
    }
    assert!(
        checked >= 1,
        "no kuadrant-operator version needs cert-manager"
    );
}

#[test]
fn l5_operator_names_crunchy_postgres_operator() {
    let text = error_text(resolve_testdata("l5-operator", None));
    assert!(text.contains("crunchy-postgres-operator"), "{text}");
}

#[test]
fn silicom_sts_operator_pulls_special_resource_operator() {
    // Its head has no dependencies; v0.0.1 needs special-resource-operator, and both need
    // NodeFeatureDiscovery, which the testdata lacks: the failure walks that chain.
    let text = error_text(resolve_testdata(
        "silicom-sts-operator",
        Some("silicom-sts-operator.v0.0.1"),
    ));
    assert!(
        text.contains("special-resource-operator.v4.9.0")
            && text.contains("NodeFeatureDiscovery (nfd.openshift.io/v1)"),
        "{text}"
    );

    // With a catalog that provides NodeFeatureDiscovery (as OperatorHub's nfd does), it resolves.
    let nfd = Cat::in_ns("redhat-operators", "olm", 0)
        .linear("nfd", &["4.9.0"], &|_| {
            vec![prop(
                PROP_GVK,
                gvk("nfd.openshift.io", "v1", "NodeFeatureDiscovery"),
            )]
        })
        .catalog;
    let index = CatalogIndex::new(&[testdata_catalog().clone(), nfd]);
    let mut s = subscribe("silicom-sts-operator", "community");
    s.starting_csv = Some("silicom-sts-operator.v0.0.1".into());
    let plan = resolve(&index, &ns(vec![], vec![s])).unwrap();
    let packages: Vec<&str> = plan.steps.iter().map(|s| s.package.as_str()).collect();
    assert_eq!(
        packages,
        vec!["nfd", "special-resource-operator", "silicom-sts-operator"]
    );
    let sro = &plan.steps[1];
    assert_eq!(sro.dependency_of, vec!["silicom-sts-operator.v0.0.1"]);
    // "<=4.9.0" and nearest the head: the newest that fits.
    assert_eq!(sro.bundle, "special-resource-operator.v4.9.0");
}

#[test]
fn rabbitmq_messaging_topology_operator_pulls_rabbitmq_cluster_operator() {
    let plan = resolve_testdata("rabbitmq-messaging-topology-operator", None).unwrap();
    let packages: Vec<&str> = plan.steps.iter().map(|s| s.package.as_str()).collect();
    assert_eq!(
        packages,
        vec![
            "rabbitmq-cluster-operator",
            "rabbitmq-messaging-topology-operator"
        ]
    );
}
