//! Channel graphs, upgrade candidates and fresh installs.

use super::*;
use crate::resolver::channel_graph::{ChannelGraph, ChannelGraphError};

fn graph(entries: Vec<ChannelEntry>) -> Result<ChannelGraph, ChannelGraphError> {
    ChannelGraph::build(&Channel {
        name: "c".into(),
        package: "p".into(),
        entries,
        ..Default::default()
    })
}

/// reverse-words' alpha channel shape: a replaces chain, a skipped side entry, a skipRange.
fn alpha() -> Vec<ChannelEntry> {
    vec![
        entry("p.v0.1.0"),
        entry("p.v0.2.0").replaces("p.v0.1.0"),
        entry("p.v0.2.1").replaces("p.v0.2.0"),
        entry("p.v0.3.0").replaces("p.v0.2.0").skips(&["p.v0.2.1"]),
        entry("p.v0.4.0")
            .replaces("p.v0.3.0")
            .range(">=0.2.0 <0.4.0"),
    ]
}

fn versions(cat: Cat, package: &str, versions: &[&str]) -> Cat {
    versions
        .iter()
        .fold(cat, |c, v| c.bundle(package, v, vec![]))
}

fn alpha_catalog() -> Cat {
    versions(
        Cat::new("ops")
            .package("p", "alpha")
            .channel("p", "alpha", alpha()),
        "p",
        &["0.1.0", "0.2.0", "0.2.1", "0.3.0", "0.4.0"],
    )
}

#[test]
fn channel_graph_rules() {
    struct Case {
        rule: &'static str,
        entries: Vec<ChannelEntry>,
        expect: Result<(&'static str, Vec<&'static str>), ChannelGraphError>,
    }
    let cases = vec![
        Case {
            rule: "head is the entry nothing replaces or skips; order walks replaces back; skipped entries are never installable",
            entries: alpha(),
            expect: Ok((
                "p.v0.4.0",
                vec!["p.v0.4.0", "p.v0.3.0", "p.v0.2.0", "p.v0.1.0"],
            )),
        },
        Case {
            rule: "an entry reachable only through a skipped entry is not installable",
            entries: vec![
                entry("p.v1"),
                entry("p.v2").replaces("p.v1"),
                entry("p.v3").replaces("p.v2"),
                entry("p.v4").skips(&["p.v3"]),
            ],
            expect: Ok(("p.v4", vec!["p.v4"])),
        },
        Case {
            rule: "replaces may name a bundle outside the channel",
            entries: vec![
                entry("p.v2").replaces("p.v1"),
                entry("p.v3").replaces("p.v2"),
            ],
            expect: Ok(("p.v3", vec!["p.v3", "p.v2"])),
        },
        Case {
            rule: "two heads is an error",
            entries: vec![
                entry("p.v1"),
                entry("p.v2").replaces("p.v1"),
                entry("p.v3").replaces("p.v1"),
            ],
            expect: Err(ChannelGraphError::MultipleHeads(vec![
                "p.v2".into(),
                "p.v3".into(),
            ])),
        },
        Case {
            rule: "a cycle is an error",
            entries: vec![
                entry("p.v1").replaces("p.v3"),
                entry("p.v2").replaces("p.v1"),
                entry("p.v3").replaces("p.v2"),
            ],
            expect: Err(ChannelGraphError::Cycle(vec![
                "p.v1".into(),
                "p.v2".into(),
                "p.v3".into(),
            ])),
        },
        Case {
            rule: "a cycle below a head is an error too",
            entries: vec![
                entry("p.v1").replaces("p.v2"),
                entry("p.v2").replaces("p.v1"),
                entry("p.v3").replaces("p.v2"),
            ],
            expect: Err(ChannelGraphError::Cycle(vec!["p.v1".into(), "p.v2".into()])),
        },
        Case {
            rule: "an empty channel is an error",
            entries: vec![],
            expect: Err(ChannelGraphError::Empty),
        },
        Case {
            rule: "a duplicate entry is an error",
            entries: vec![entry("p.v1"), entry("p.v1")],
            expect: Err(ChannelGraphError::DuplicateEntry("p.v1".into())),
        },
    ];
    for case in cases {
        let got = graph(case.entries).map(|g| {
            let head = g.head().unwrap().name.clone();
            (
                head,
                g.installable()
                    .iter()
                    .map(|e| e.name.clone())
                    .collect::<Vec<_>>(),
            )
        });
        let want = case.expect.map(|(h, order)| {
            (
                h.to_string(),
                order.into_iter().map(String::from).collect::<Vec<_>>(),
            )
        });
        assert_eq!(got, want, "rule: {}", case.rule);
    }
    assert!(matches!(
        graph(vec![entry("p.v1").range("~1.0")]),
        Err(ChannelGraphError::BadSkipRange { .. })
    ));
}

#[test]
fn upgrade_rules() {
    struct Case {
        rule: &'static str,
        installed: &'static str,
        expect: Option<&'static str>,
    }
    let cases = [
        Case {
            rule: "an entry that replaces X",
            installed: "0.1.0",
            expect: Some("p.v0.2.0"),
        },
        Case {
            rule: "entries replacing, skipping and skipRange-ing X: nearest the head wins",
            installed: "0.2.0",
            expect: Some("p.v0.4.0"),
        },
        Case {
            rule: "an entry that skips X (and one whose skipRange holds it): nearest the head",
            installed: "0.2.1",
            expect: Some("p.v0.4.0"),
        },
        Case {
            rule: "the skipRange jump",
            installed: "0.3.0",
            expect: Some("p.v0.4.0"),
        },
        Case {
            rule: "no candidate: stay on X",
            installed: "0.4.0",
            expect: None,
        },
    ];
    for case in cases {
        let namespace = ns(vec![installed("p", case.installed)], vec![sub("p", "ops")]);
        let plan =
            run(&[alpha_catalog()], &namespace).unwrap_or_else(|e| panic!("{}: {e}", case.rule));
        match case.expect {
            Some(to) => {
                assert_eq!(
                    steps(&plan),
                    vec![format!("{to}@ops")],
                    "rule: {}",
                    case.rule
                );
                assert_eq!(
                    plan.steps[0].replaces.as_deref(),
                    Some(format!("p.v{}", case.installed).as_str())
                );
                assert_eq!(
                    plan.subscriptions[0].outcome,
                    Outcome::Upgrade {
                        from: format!("p.v{}", case.installed),
                        to: to.into()
                    }
                );
            }
            None => {
                assert!(plan.steps.is_empty(), "rule: {}", case.rule);
                assert_eq!(
                    plan.subscriptions[0].outcome,
                    Outcome::AtLatestKnown {
                        csv: format!("p.v{}", case.installed)
                    }
                );
            }
        }
    }
}

/// Every entry with skipRange `>=0.12.0` (node-maintenance-operator, fence-agents-remediation
/// and debezium publish such channels): the range also holds the head's own version, yet the
/// head stays put and an older entry upgrades only to nearer the head, never back.
#[test]
fn a_skip_range_holding_the_head_never_moves_an_install_back() {
    let with_range = |e: ChannelEntry| e.range(">=0.12.0");
    let cat = versions(
        Cat::new("ops").package("p", "stable").channel(
            "p",
            "stable",
            vec![
                with_range(entry("p.v0.19.0")),
                with_range(entry("p.v0.20.0").replaces("p.v0.19.0")),
                with_range(entry("p.v0.21.0").replaces("p.v0.20.0")),
            ],
        ),
        "p",
        &["0.19.0", "0.20.0", "0.21.0"],
    );
    let at = |version: &str| {
        run(
            std::slice::from_ref(&cat),
            &ns(vec![installed("p", version)], vec![sub("p", "ops")]),
        )
        .unwrap()
    };
    let head = at("0.21.0");
    assert!(steps(&head).is_empty(), "{:?}", steps(&head));
    assert_eq!(steps(&at("0.20.0")), vec!["p.v0.21.0@ops"]);
    assert_eq!(steps(&at("0.19.0")), vec!["p.v0.21.0@ops"]);
}

#[test]
fn skip_only_edge_is_an_upgrade() {
    let cat = versions(
        Cat::new("ops").package("p", "s").channel(
            "p",
            "s",
            vec![entry("p.v1.0.0"), entry("p.v2.0.0").skips(&["p.v1.0.0"])],
        ),
        "p",
        &["1.0.0", "2.0.0"],
    );
    // p.v1.0.0 is skipped, so not installable, but once installed it upgrades along the skip.
    let plan = run(
        &[cat],
        &ns(vec![installed("p", "1.0.0")], vec![sub("p", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["p.v2.0.0@ops"]);
}

#[test]
fn candidates_come_only_from_the_subscription_catalog_and_channel() {
    let ops = versions(
        Cat::new("ops")
            .package("p", "stable")
            .channel(
                "p",
                "stable",
                vec![entry("p.v1.0.0"), entry("p.v1.1.0").replaces("p.v1.0.0")],
            )
            .channel(
                "p",
                "fast",
                vec![
                    entry("p.v1.0.0"),
                    entry("p.v1.1.0").replaces("p.v1.0.0"),
                    entry("p.v2.0.0").replaces("p.v1.1.0"),
                ],
            ),
        "p",
        &["1.0.0", "1.1.0", "2.0.0"],
    );
    let other = versions(
        Cat::in_ns("other", "olm", 100)
            .package("p", "stable")
            .channel("p", "stable", vec![entry("p.v9.0.0").replaces("p.v1.0.0")]),
        "p",
        &["9.0.0"],
    );
    let namespace = ns(vec![installed("p", "1.0.0")], vec![sub("p", "ops")]);
    assert_eq!(
        steps(&run(&[ops.clone(), other.clone()], &namespace).unwrap()),
        vec!["p.v1.1.0@ops"]
    );
    let mut fast = sub("p", "ops");
    fast.channel = Some("fast".into());
    let plan = run(&[ops, other], &ns(vec![], vec![fast])).unwrap();
    assert_eq!(steps(&plan), vec!["p.v2.0.0@ops"]);
    assert_eq!(plan.steps[0].channel, "fast");
}

#[test]
fn fresh_install_rules() {
    // Head by default (the default channel when the Subscription names none).
    let plan = run(&[alpha_catalog()], &ns(vec![], vec![sub("p", "ops")])).unwrap();
    assert_eq!(steps(&plan), vec!["p.v0.4.0@ops"]);
    assert_eq!(
        plan.subscriptions[0].outcome,
        Outcome::Install {
            bundle: "p.v0.4.0".into()
        }
    );
    assert_eq!(plan.steps[0].replaces, None);

    // startingCSV wins.
    let mut starting = sub("p", "ops");
    starting.starting_csv = Some("p.v0.2.0".into());
    assert_eq!(
        steps(&run(&[alpha_catalog()], &ns(vec![], vec![starting.clone()])).unwrap()),
        vec!["p.v0.2.0@ops"]
    );

    // A skipped startingCSV is refused, saying why.
    starting.starting_csv = Some("p.v0.2.1".into());
    let text = error_text(run(&[alpha_catalog()], &ns(vec![], vec![starting.clone()])));
    assert!(
        text.contains("p.v0.2.1") && text.contains("skipped"),
        "{text}"
    );

    // An unknown startingCSV names channel and package.
    starting.starting_csv = Some("p.v9.9.9".into());
    let text = error_text(run(&[alpha_catalog()], &ns(vec![], vec![starting])));
    assert!(
        text.contains("p.v9.9.9") && text.contains("\"alpha\"") && text.contains("package p"),
        "{text}"
    );
}

#[test]
fn subscription_errors_name_the_missing_piece() {
    let two_heads = versions(
        Cat::new("heads").package("q", "s").channel(
            "q",
            "s",
            vec![entry("q.v1.0.0"), entry("q.v2.0.0"), entry("q.v3.0.0")],
        ),
        "q",
        &["1.0.0", "2.0.0", "3.0.0"],
    );
    let no_default = versions(
        Cat::new("nd")
            .package("r", "")
            .channel("r", "a", vec![entry("r.v1.0.0")]),
        "r",
        &["1.0.0"],
    );
    let cats = [alpha_catalog(), two_heads, no_default];
    let mut wrong_channel = sub("p", "ops");
    wrong_channel.channel = Some("beta".into());
    let cases: Vec<(Subscription, &[&str])> = vec![
        (
            sub("p", "nowhere"),
            &["subscription p", "olm/nowhere", "olm/ops"],
        ),
        (sub("zzz", "ops"), &["package zzz", "olm/ops"]),
        (wrong_channel, &["\"beta\"", "channels: alpha"]),
        (
            sub("q", "heads"),
            &["multiple channel heads", "q.v2.0.0", "q.v3.0.0"],
        ),
        (sub("r", "nd"), &["no default channel", "package r"]),
    ];
    for (subscription, needles) in cases {
        let text = error_text(run(&cats, &ns(vec![], vec![subscription])));
        for needle in needles {
            assert!(text.contains(needle), "{needle:?} not in {text:?}");
        }
    }
}

#[test]
fn deprecated_bundles_are_never_chosen() {
    let cat = Cat::new("ops").linear("p", &["1.0.0", "2.0.0"], &|v| {
        if v == "2.0.0" {
            vec![prop(PROP_DEPRECATED, json!({}))]
        } else {
            vec![]
        }
    });
    // The deprecated head is passed over for the next entry.
    assert_eq!(
        steps(
            &run(
                std::slice::from_ref(&cat),
                &ns(vec![], vec![sub("p", "ops")])
            )
            .unwrap()
        ),
        vec!["p.v1.0.0@ops"]
    );
    // ... and is no upgrade target.
    let plan = run(
        std::slice::from_ref(&cat),
        &ns(vec![installed("p", "1.0.0")], vec![sub("p", "ops")]),
    )
    .unwrap();
    assert!(plan.steps.is_empty());
    let mut starting = sub("p", "ops");
    starting.starting_csv = Some("p.v2.0.0".into());
    assert!(error_text(run(&[cat], &ns(vec![], vec![starting]))).contains("deprecated"));
}

#[test]
fn head_with_unsatisfiable_dependency_falls_back_to_an_older_entry() {
    // Upstream makes every channel entry a candidate for a fresh install, head first.
    let cat = Cat::new("ops").linear("p", &["1.0.0", "2.0.0"], &|v| {
        if v == "2.0.0" {
            vec![requires_package("missing", ">=1.0.0")]
        } else {
            vec![]
        }
    });
    assert_eq!(
        steps(&run(&[cat], &ns(vec![], vec![sub("p", "ops")])).unwrap()),
        vec!["p.v1.0.0@ops"]
    );
}

#[test]
fn upgrade_blocked_by_a_dependency_stays_put() {
    let cat = Cat::new("ops").linear("p", &["1.0.0", "2.0.0"], &|v| {
        if v == "2.0.0" {
            vec![requires_package("missing", ">=1.0.0")]
        } else {
            vec![]
        }
    });
    let plan = run(
        &[cat],
        &ns(vec![installed("p", "1.0.0")], vec![sub("p", "ops")]),
    )
    .unwrap();
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.subscriptions[0].outcome,
        Outcome::AtLatestKnown {
            csv: "p.v1.0.0".into()
        }
    );
}

/// Upstream's "switching from one package to another": a Subscription moved from package a
/// to package b, whose head replaces a's installed CSV and provides the same API.
#[test]
fn switching_packages_through_a_replaces_edge() {
    let api = || vec![prop(PROP_GVK, gvk("example.com", "v1", "Thing"))];
    let cat = Cat::new("ops")
        .package("a", "stable")
        .channel("a", "stable", vec![entry("a.v1.0.0")])
        .bundle("a", "1.0.0", api())
        .package("b", "stable")
        .channel("b", "stable", vec![entry("b.v1.0.0").replaces("a.v1.0.0")])
        .bundle("b", "1.0.0", api());
    // The Subscription's installed CSV is a's: it counts as the Subscription's install
    // (upstream relates them by the installed CSV's name), so b's replaces edge upgrades it.
    let mut a = installed("b", "1.0.0");
    a.name = "a.v1.0.0".into();
    a.source = Some(CatalogRef::new("ops", "olm"));
    a.provided = api();
    let result = run(&[cat], &ns(vec![a], vec![sub("b", "ops")]));
    let plan = result.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(steps(&plan), ["b.v1.0.0@ops"]);
}
