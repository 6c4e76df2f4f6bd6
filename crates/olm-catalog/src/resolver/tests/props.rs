//! Property tests over random catalogs: whatever the resolver answers keeps the namespace
//! consistent (one bundle per package, one provider per GVK, every dependency provided) and
//! every upgrade follows a catalog edge. The test counts the cases that get as far as each
//! check and fails when too few do, so a generator that stops producing resolvable
//! catalogs cannot pass unnoticed.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::resolver::constraints::{Dependency, Gvk};

#[derive(Clone, Debug)]
struct Spec {
    /// Per package: versions count, provided GVK index, and per version its dependencies
    /// (package index + upper major, or GVK index).
    packages: Vec<(usize, usize, Vec<Vec<Dep>>)>,
    installed: Vec<(usize, usize)>,
    subscribed: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Dep {
    Package(usize, u64),
    Gvk(usize),
}

fn spec() -> impl Strategy<Value = Spec> {
    let dep = prop_oneof![
        (0..5usize, 1..5u64).prop_map(|(p, m)| Dep::Package(p, m)),
        (0..4usize).prop_map(Dep::Gvk)
    ];
    let package = (
        1..5usize,
        0..4usize,
        proptest::collection::vec(proptest::collection::vec(dep, 0..3), 4),
    );
    (
        proptest::collection::vec(package, 2..6),
        proptest::collection::vec((0..6usize, 0..4usize), 0..3),
        proptest::collection::vec(0..6usize, 1..3),
    )
        .prop_map(|(packages, installed, subscribed)| Spec {
            packages,
            installed,
            subscribed,
        })
}

fn gvk_value(i: usize) -> Value {
    gvk("example.com", "v1", &format!("Kind{i}"))
}

fn build(spec: &Spec) -> (Cat, Namespace) {
    let n = spec.packages.len();
    let mut cat = Cat::new("ops");
    for (p, (count, provided, deps)) in spec.packages.iter().enumerate() {
        let versions: Vec<String> = (1..=*count).map(|v| format!("{v}.0.0")).collect();
        let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
        let deps = deps.clone();
        let provided = *provided;
        cat = cat.linear(&format!("p{p}"), &refs, &move |v| {
            let major: usize = v.split('.').next().unwrap().parse().unwrap();
            let mut props = vec![prop(PROP_GVK, gvk_value(provided))];
            for d in &deps[major - 1] {
                props.push(match d {
                    Dep::Package(q, m) => {
                        requires_package(&format!("p{}", q % n), &format!(">=1.0.0 <{m}.0.0"))
                    }
                    Dep::Gvk(g) => prop(PROP_GVK_REQUIRED, gvk_value(*g)),
                });
            }
            props
        });
    }
    let mut installed_pkgs = BTreeSet::new();
    let mut inst = Vec::new();
    for (p, v) in &spec.installed {
        let p = p % n;
        let count = spec.packages[p].0;
        if installed_pkgs.insert(p) {
            inst.push(installed(
                &format!("p{p}"),
                &format!("{}.0.0", v % count + 1),
            ));
        }
    }
    let subs: BTreeSet<usize> = spec.subscribed.iter().map(|p| p % n).collect();
    (
        cat,
        ns(
            inst,
            subs.into_iter()
                .map(|p| sub(&format!("p{p}"), "ops"))
                .collect(),
        ),
    )
}

/// How many of the generated cases reached which assertions.
#[derive(Debug, Default)]
struct Reached {
    /// The resolver answered with a plan, so the namespace checks ran.
    plans: usize,
    /// The plan installs something, so the dependency checks ran.
    steps: usize,
    /// The plan upgrades an installed CSV, so the catalog-edge check ran.
    upgrades: usize,
}

/// The properties of one case; the case counts in `reached` once it gets to them.
fn check(spec: &Spec, reached: &mut Reached) -> Result<(), TestCaseError> {
    let (cat, namespace) = build(spec);
    let index = CatalogIndex::new(std::slice::from_ref(&cat.catalog));
    let result = resolve(&index, &namespace);
    prop_assert_eq!(&result, &resolve(&index, &namespace), "deterministic");
    let Ok(plan) = result else { return Ok(()) };
    reached.plans += 1;
    reached.steps += usize::from(!plan.steps.is_empty());
    reached.upgrades += usize::from(plan.steps.iter().any(|s| s.replaces.is_some()));

    // The namespace after the plan: installed CSVs minus the replaced ones, plus new bundles.
    let replaced: BTreeSet<&str> = plan
        .steps
        .iter()
        .filter_map(|s| s.replaces.as_deref())
        .collect();
    let mut final_bundles: Vec<&str> = namespace
        .installed
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| !replaced.contains(n))
        .collect();
    final_bundles.extend(plan.steps.iter().map(|s| s.bundle.as_str()));
    let info = |name: &str| index.bundles.iter().find(|b| b.name == name).unwrap();

    let mut per_package: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_gvk: BTreeMap<&Gvk, usize> = BTreeMap::new();
    for name in &final_bundles {
        let b = info(name);
        *per_package.entry(&b.package).or_default() += 1;
        for g in &b.gvks {
            *per_gvk.entry(g).or_default() += 1;
        }
    }
    prop_assert!(
        per_package.values().all(|c| *c == 1),
        "two bundles of one package: {:?}",
        per_package
    );
    prop_assert!(
        per_gvk.values().all(|c| *c == 1),
        "two providers of one GVK: {:?}",
        per_gvk
    );

    for step in &plan.steps {
        for dep in &info(&step.bundle).dependencies {
            let provided = final_bundles.iter().map(|n| info(n)).any(|b| match dep {
                Dependency::Package { package, range, .. } => {
                    &b.package == package && range.contains(b.version.as_ref().unwrap())
                }
                Dependency::Gvk { gvk, .. } => b.gvks.contains(gvk),
                _ => true,
            });
            prop_assert!(
                provided,
                "{} requires {} and nothing provides it",
                step.bundle,
                dep
            );
        }
        if let Some(from) = &step.replaces {
            let catalog = &index.catalogs[0].packages[&step.package];
            let graph = catalog.channels[&step.channel].as_ref().unwrap();
            let from_version = &namespace
                .installed
                .iter()
                .find(|c| &c.name == from)
                .unwrap()
                .version;
            let entry = graph
                .installable()
                .iter()
                .find(|e| e.name == step.bundle)
                .unwrap();
            prop_assert!(
                entry.upgrades_from(from, from_version),
                "{} -> {} is no catalog edge",
                from,
                step.bundle
            );
        }
    }
    Ok(())
}

const CASES: u32 = 200;

#[test]
fn resolutions_keep_the_namespace_consistent() {
    let config = ProptestConfig {
        cases: CASES,
        source_file: Some(file!()),
        ..ProptestConfig::default()
    };
    let reached = std::cell::RefCell::new(Reached::default());
    let mut runner = proptest::test_runner::TestRunner::new(config);
    if let Err(e) = runner.run(&spec(), |spec| check(&spec, &mut reached.borrow_mut())) {
        panic!("{e}");
    }
    // Random catalogs that mostly fail to resolve would pass while checking little.
    let reached = reached.into_inner();
    let enough = |count: usize, percent: u32| count * 100 >= (CASES * percent) as usize;
    assert!(
        enough(reached.plans, 50) && enough(reached.steps, 40) && enough(reached.upgrades, 2),
        "too few of {CASES} cases reached the assertions: {reached:?}"
    );
}
