//! Version policies (a Subscription's allowed versions) and rollback steps.

use super::*;
use crate::catalog::model::semver_range::VersionRange;
use crate::resolver::{Held, Outcome, RollbackError, VersionPolicy, rollback_step};

/// p 0.1.0 → 0.2.0 → 0.3.0 (skips nothing) → 0.4.0 (skipRange <0.4.0): from 0.1.0 the
/// graph's shortest path is one hop to 0.4.0.
fn catalog() -> Cat {
    ["0.1.0", "0.2.0", "0.3.0", "0.4.0"].iter().fold(
        Cat::new("ops").package("p", "stable").channel(
            "p",
            "stable",
            vec![
                entry("p.v0.1.0"),
                entry("p.v0.2.0").replaces("p.v0.1.0"),
                entry("p.v0.3.0").replaces("p.v0.2.0"),
                entry("p.v0.4.0")
                    .replaces("p.v0.3.0")
                    .range(">=0.1.0 <0.4.0"),
            ],
        ),
        |c, v| c.bundle("p", v, vec![]),
    )
}

fn limited(ranges: &[(&str, &str)]) -> Subscription {
    Subscription {
        versions: VersionPolicy {
            ranges: ranges
                .iter()
                .map(|(r, why)| (VersionRange::parse(r).unwrap(), why.to_string()))
                .collect(),
        },
        ..sub("p", "ops")
    }
}

fn only_result(plan: &Plan) -> (&Outcome, Option<&Held>) {
    let result = &plan.subscriptions[0];
    (&result.outcome, result.held.as_ref())
}

#[test]
fn a_cap_takes_the_furthest_hop_it_allows_and_names_what_it_held() {
    let namespace = ns(
        vec![installed("p", "0.1.0")],
        vec![limited(&[("<=0.3.0", "approvedVersion 0.3.0")])],
    );
    let plan = run(&[catalog()], &namespace).unwrap();
    assert_eq!(steps(&plan), ["p.v0.2.0@ops"]);
    let (outcome, held) = only_result(&plan);
    assert_eq!(
        outcome,
        &Outcome::Upgrade {
            from: "p.v0.1.0".into(),
            to: "p.v0.2.0".into()
        }
    );
    let held = held.expect("0.4.0 is held");
    assert_eq!(
        (
            held.bundle.as_str(),
            held.version.as_str(),
            held.policy.as_str()
        ),
        ("p.v0.4.0", "0.4.0", "approvedVersion 0.3.0")
    );
    // Without a cap the graph goes to the head in one hop, and nothing is held.
    let free = run(
        &[catalog()],
        &ns(vec![installed("p", "0.1.0")], vec![sub("p", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&free), ["p.v0.4.0@ops"]);
    assert_eq!(free.subscriptions[0].held, None);
}

#[test]
fn at_the_cap_the_subscription_stays_and_says_what_is_newer() {
    let namespace = ns(
        vec![installed("p", "0.3.0")],
        vec![limited(&[("<0.4.0", "versionRange <0.4.0")])],
    );
    let plan = run(&[catalog()], &namespace).unwrap();
    assert!(plan.steps.is_empty());
    let (outcome, held) = only_result(&plan);
    assert_eq!(
        outcome,
        &Outcome::AtLatestKnown {
            csv: "p.v0.3.0".into()
        }
    );
    assert_eq!(held.map(|h| h.bundle.as_str()), Some("p.v0.4.0"));
}

#[test]
fn a_fresh_install_takes_the_newest_allowed_or_says_nothing_is_allowed() {
    let plan = run(
        &[catalog()],
        &ns(
            vec![],
            vec![limited(&[("<=0.2.0", "approvedVersion 0.2.0")])],
        ),
    )
    .unwrap();
    assert_eq!(steps(&plan), ["p.v0.2.0@ops"]);
    let refused = error_text(run(
        &[catalog()],
        &ns(
            vec![],
            vec![limited(&[(">0.4.0", "rejectedVersions 0.4.0")])],
        ),
    ));
    assert_eq!(
        refused,
        "subscription p: no installable bundle of channel \"stable\" of package p is allowed by \
         rejectedVersions 0.4.0 (newest: p.v0.4.0)"
    );
}

#[test]
fn a_held_bundle_is_named_only_when_nothing_allowed_is_preferred() {
    // Rejecting 0.2.0 and older leaves the head allowed: nothing is held.
    let plan = run(
        &[catalog()],
        &ns(
            vec![installed("p", "0.1.0")],
            vec![limited(&[(">0.2.0", "rejectedVersions 0.2.0")])],
        ),
    )
    .unwrap();
    assert_eq!(steps(&plan), ["p.v0.4.0@ops"]);
    assert_eq!(plan.subscriptions[0].held, None);
}

#[test]
fn a_rollback_step_replaces_the_installed_csv_with_the_older_bundle() {
    let cats = [catalog()];
    let catalogs: Vec<Catalog> = cats.iter().map(|c| c.catalog.clone()).collect();
    let index = CatalogIndex::new(&catalogs);
    let from = installed("p", "0.4.0");
    let step = rollback_step(&index, &sub("p", "ops"), &from, &"0.2.0".parse().unwrap()).unwrap();
    assert_eq!(
        (
            step.bundle.as_str(),
            step.replaces.as_deref(),
            step.channel.as_str()
        ),
        ("p.v0.2.0", Some("p.v0.4.0"), "stable")
    );
    assert_eq!(
        rollback_step(&index, &sub("p", "ops"), &from, &"0.9.0".parse().unwrap()),
        Err(RollbackError::NoSuchVersion {
            package: "p".into(),
            version: "0.9.0".parse().unwrap(),
            catalog: CatalogRef::new("ops", "olm"),
        })
    );
}
