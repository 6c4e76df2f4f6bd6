//! Resolving one Subscription with dependencies, against synthetic catalogs of 1,000,
//! 10,000 and 100,000 bundles and against the community-operators testdata.
//! The catalog index is built once per catalog (as a controller would, per catalog change);
//! what is measured is the resolution. `cargo bench --bench resolve`.
//!
//! With `OLM_BENCH_CATALOG=DIR` (an FBC directory, e.g. the whole community catalog as
//! `hack/bench/install-catalog.py` renders it into WORKDIR/catalog), also against that
//! catalog, and that catalog ×2 and ×4 (copies under renamed packages): building its index
//! and resolving one Subscription (`OLM_BENCH_PACKAGE`, default argocd-operator); and, on
//! the catalog itself, one namespace with 1, 10, 20 and 50 Subscriptions at once (the first
//! packages that resolve on their own).

// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

use olm::catalog::bundles::render::{RenderOptions, render_package_folders};
use olm::catalog::model::fbc::*;
use olm::catalog::reading::load::{LoadOptions, load_path_with};
use olm::resolver::{Catalog, CatalogIndex, CatalogRef, Namespace, Subscription, resolve};

const VERSIONS_PER_PACKAGE: usize = 10;
/// Packages come in clusters of this size; package i depends on package i+1 inside its
/// cluster (by package range and by GVK), so one Subscription pulls a whole cluster.
const CLUSTER: usize = 5;

/// A catalog of `bundles` bundles in packages of ten versions, each channel a replaces chain
/// whose head also has a skipRange.
fn synthetic(bundles: usize) -> Catalog {
    let mut content = DeclarativeConfig::default();
    for p in 0..bundles / VERSIONS_PER_PACKAGE {
        let package = format!("pkg{p}");
        content.packages.push(Package {
            schema: SCHEMA_PACKAGE.into(),
            name: package.clone(),
            default_channel: "stable".into(),
            ..Default::default()
        });
        let mut entries = Vec::new();
        for v in 1..=VERSIONS_PER_PACKAGE {
            let name = format!("{package}.v{v}.0.0");
            let mut entry = ChannelEntry {
                name: name.clone(),
                ..Default::default()
            };
            if v > 1 {
                entry.replaces = format!("{package}.v{}.0.0", v - 1);
            }
            if v == VERSIONS_PER_PACKAGE {
                entry.skip_range = format!(">=1.0.0 <{v}.0.0");
            }
            entries.push(entry);
            let mut properties = vec![
                Property::new(
                    PROP_PACKAGE,
                    json!({"packageName": package, "version": format!("{v}.0.0")}),
                ),
                Property::new(
                    PROP_GVK,
                    json!({"group": "bench.io", "version": "v1", "kind": format!("Kind{p}")}),
                ),
            ];
            if p % CLUSTER < CLUSTER - 1 {
                let next = p + 1;
                properties.push(Property::new(
                    PROP_PACKAGE_REQUIRED,
                    json!({"packageName": format!("pkg{next}"), "versionRange": ">=2.0.0 <9.0.0"}),
                ));
                properties.push(Property::new(
                    PROP_GVK_REQUIRED,
                    json!({"group": "bench.io", "version": "v1", "kind": format!("Kind{next}")}),
                ));
            }
            content.bundles.push(Bundle {
                schema: SCHEMA_BUNDLE.into(),
                name,
                package: package.clone(),
                properties,
                ..Default::default()
            });
        }
        content.channels.push(Channel {
            schema: SCHEMA_CHANNEL.into(),
            name: "stable".into(),
            package,
            entries,
            properties: Vec::new(),
        });
    }
    Catalog {
        name: "synthetic".into(),
        namespace: "olm".into(),
        priority: 0,
        content,
    }
}

fn testdata() -> Catalog {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/testdata/community-operators/operators");
    let content = render_package_folders(&dir, &RenderOptions::default()).unwrap();
    Catalog {
        name: "community".into(),
        namespace: "olm".into(),
        priority: 0,
        content,
    }
}

fn subscribe(package: &str, catalog: &str) -> Namespace {
    Namespace {
        name: "operators".into(),
        installed: Vec::new(),
        subscriptions: vec![Subscription {
            name: package.into(),
            package: package.into(),
            channel: None,
            source: CatalogRef::new(catalog, "olm"),
            starting_csv: None,
            versions: Default::default(),
        }],
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("resolve");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for size in [1_000, 10_000, 100_000] {
        let index = CatalogIndex::new(&[synthetic(size)]);
        // The middle of the catalog, so that nothing benefits from being first.
        let package = format!(
            "pkg{}",
            (size / VERSIONS_PER_PACKAGE / 2) / CLUSTER * CLUSTER
        );
        let namespace = subscribe(&package, "synthetic");
        let plan = resolve(&index, &namespace).expect("synthetic catalog resolves");
        assert_eq!(
            plan.steps.len(),
            CLUSTER,
            "the whole dependency cluster is installed"
        );
        group.bench_with_input(BenchmarkId::new("synthetic", size), &size, |b, _| {
            b.iter(|| resolve(&index, &namespace).unwrap());
        });
    }
    let index = CatalogIndex::new(&[testdata()]);
    let namespace = subscribe("rabbitmq-messaging-topology-operator", "community");
    assert_eq!(resolve(&index, &namespace).unwrap().steps.len(), 2);
    group.bench_function("testdata/rabbitmq-messaging-topology-operator", |b| {
        b.iter(|| resolve(&index, &namespace).unwrap());
    });
    group.finish();

    let mut group = c.benchmark_group("index");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let catalog = synthetic(10_000);
    group.bench_function("synthetic/10000", |b| {
        b.iter(|| CatalogIndex::new(std::slice::from_ref(&catalog)));
    });
    group.finish();
}

/// The catalog of `OLM_BENCH_CATALOG`, without its bundles' objects (resolution never
/// reads them; controllers' snapshots do not hold them either).
fn real_catalog() -> Option<Catalog> {
    let dir = std::env::var_os("OLM_BENCH_CATALOG")?;
    let content = load_path_with(
        Path::new(&dir),
        LoadOptions {
            drop_bundle_objects: true,
        },
    )
    .unwrap();
    Some(Catalog {
        name: "community".into(),
        namespace: "olm".into(),
        priority: 0,
        content,
    })
}

/// `catalog` `copies` times, each copy after the first with its packages renamed
/// (`name-cN`): a bigger catalog of the same shape, with `copies` providers of each API.
fn replicated(catalog: &Catalog, copies: usize) -> Catalog {
    let mut content = catalog.content.clone();
    for copy in 1..copies {
        let renamed = |name: &str| format!("{name}-c{copy}");
        for p in &catalog.content.packages {
            let mut p = p.clone();
            p.name = renamed(&p.name);
            content.packages.push(p);
        }
        for c in &catalog.content.channels {
            let mut c = c.clone();
            c.package = renamed(&c.package);
            content.channels.push(c);
        }
        for b in &catalog.content.bundles {
            let mut b = b.clone();
            b.package = renamed(&b.package);
            for p in &mut b.properties {
                if p.type_ == PROP_PACKAGE
                    && let Some(name) = p.value.get("packageName").and_then(|n| n.as_str())
                {
                    p.value["packageName"] = json!(renamed(name));
                }
            }
            content.bundles.push(b);
        }
    }
    Catalog {
        content,
        ..catalog.clone()
    }
}

fn bench_real_catalog(c: &mut Criterion) {
    let Some(catalog) = real_catalog() else {
        eprintln!("OLM_BENCH_CATALOG not set: the real-catalog benches are skipped");
        return;
    };
    eprintln!(
        "real catalog: {} packages, {} bundles",
        catalog.content.packages.len(),
        catalog.content.bundles.len()
    );
    let mut group = c.benchmark_group("real");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    let package = std::env::var("OLM_BENCH_PACKAGE").unwrap_or_else(|_| "argocd-operator".into());
    let one = subscribe(&package, "community");
    // How cost grows with the catalog: ×1, ×2, ×4 of its bundles.
    for copies in [1, 2, 4] {
        let bigger = replicated(&catalog, copies);
        group.bench_with_input(
            BenchmarkId::new("index", format!("x{copies}")),
            &copies,
            |b, _| {
                b.iter(|| CatalogIndex::new(std::slice::from_ref(&bigger)));
            },
        );
        let index = CatalogIndex::new(std::slice::from_ref(&bigger));
        let plan = resolve(&index, &one).unwrap();
        eprintln!(
            "x{copies}: {package}: {} bundle(s) planned",
            plan.steps.len()
        );
        group.bench_with_input(
            BenchmarkId::new(format!("one-subscription/{package}"), format!("x{copies}")),
            &copies,
            |b, _| b.iter(|| resolve(&index, &one).unwrap()),
        );
    }
    // And with the Subscriptions of one namespace: 1, 10, 20, 50, each to a package that
    // resolves on its own (the catalog's first such packages).
    let index = CatalogIndex::new(std::slice::from_ref(&catalog));
    let resolvable: Vec<Subscription> = catalog
        .content
        .packages
        .iter()
        .map(|p| subscribe(&p.name, "community"))
        .filter(|alone| resolve(&index, alone).is_ok())
        .flat_map(|alone| alone.subscriptions)
        .take(50)
        .collect();
    for n in [1, 10, 20, 50] {
        let mut namespace = subscribe(&package, "community");
        namespace.subscriptions = resolvable[..n.min(resolvable.len())].to_vec();
        let plan = resolve(&index, &namespace).unwrap();
        eprintln!("{n} subscriptions: {} bundle(s) planned", plan.steps.len());
        group.bench_with_input(BenchmarkId::new("subscriptions", n), &n, |b, _| {
            b.iter(|| resolve(&index, &namespace).unwrap());
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_real_catalog);
criterion_main!(benches);
