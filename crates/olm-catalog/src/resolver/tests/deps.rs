//! Dependencies, uniqueness, search order, determinism and the plan's shape.

use super::*;

const KIND: (&str, &str, &str) = ("example.com", "v1", "Widget");

fn widget() -> Value {
    gvk(KIND.0, KIND.1, KIND.2)
}

fn provides_widget(_: &str) -> Vec<Property> {
    vec![prop(PROP_GVK, widget())]
}

/// `app` (one version) with the given dependency properties, plus `lib` 1.0.0..3.0.0.
fn app_with(deps: Vec<Property>) -> Cat {
    Cat::new("ops")
        .linear("app", &["1.0.0"], &move |_| deps.clone())
        .linear("lib", &["1.0.0", "2.0.0", "3.0.0"], &|_| vec![])
}

fn resolve_app(deps: Vec<Property>) -> Result<Plan, ResolveError> {
    run(&[app_with(deps)], &ns(vec![], vec![sub("app", "ops")]))
}

#[test]
fn dependency_rules() {
    struct Case {
        rule: &'static str,
        deps: Vec<Property>,
        /// The bundles installed, or words the failure must contain.
        expect: Result<Vec<&'static str>, Vec<&'static str>>,
    }
    let cel = |rule: &str| constraint(json!({"cel": {"rule": rule}}));
    let lib_version = |op: &str, v: &str| {
        format!(
            "properties.exists(p, p.type == 'olm.package' && semver_compare(p.value.version, '{v}') {op} 0)"
        )
    };
    let cases = vec![
        Case {
            rule: "no dependencies",
            deps: vec![],
            expect: Ok(vec!["app.v1.0.0"]),
        },
        Case {
            rule: "olm.package.required picks the bundle nearest the head within the blang range",
            deps: vec![requires_package("lib", ">=1.0.0 <3.0.0")],
            expect: Ok(vec!["lib.v2.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "blang x-range",
            deps: vec![requires_package("lib", "1.x")],
            expect: Ok(vec!["lib.v1.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.package.required with nothing in range names package, range and what exists",
            deps: vec![requires_package("lib", ">=4.0.0")],
            expect: Err(vec![
                "app.v1.0.0 requires package lib",
                "\">=4.0.0\"",
                "1.0.0, 2.0.0, 3.0.0",
            ]),
        },
        Case {
            rule: "olm.package.required of an unknown package names it",
            deps: vec![requires_package("cert-manager", "1.14.2")],
            expect: Err(vec![
                "package cert-manager",
                "subscription app",
                "no catalog has an installable bundle of package cert-manager",
            ]),
        },
        Case {
            rule: "olm.gvk.required with no provider names the GVK",
            deps: vec![prop(PROP_GVK_REQUIRED, gvk("other.io", "v1", "Thing"))],
            expect: Err(vec!["Thing (other.io/v1)", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint package",
            deps: vec![constraint(
                json!({"package": {"packageName": "lib", "versionRange": "<2.0.0"}}),
            )],
            expect: Ok(vec!["lib.v1.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint failureMessage is shown",
            deps: vec![constraint(
                json!({"failureMessage": "lib 9 is needed for widgets", "package": {"packageName": "lib", "versionRange": ">=9.0.0"}}),
            )],
            expect: Err(vec!["lib 9 is needed for widgets"]),
        },
        Case {
            rule: "olm.constraint all: one bundle satisfying every part",
            deps: vec![constraint(json!({"all": {"constraints": [
                {"package": {"packageName": "lib", "versionRange": ">=1.0.0"}},
                {"not": {"constraints": [{"package": {"packageName": "lib", "versionRange": ">=3.0.0"}}]}}
            ]}}))],
            expect: Ok(vec!["lib.v2.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint any: the first satisfiable alternative",
            deps: vec![constraint(json!({"any": {"constraints": [
                {"package": {"packageName": "nope", "versionRange": ">=1.0.0"}},
                {"package": {"packageName": "lib", "versionRange": "<2.0.0"}}
            ]}}))],
            expect: Ok(vec!["lib.v1.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint all that nothing satisfies, with its failureMessage",
            deps: vec![constraint(
                json!({"failureMessage": "needs lib 2 that is also 3", "all": {"constraints": [
                    {"package": {"packageName": "lib", "versionRange": "2.0.0"}},
                    {"package": {"packageName": "lib", "versionRange": "3.0.0"}}
                ]}}),
            )],
            expect: Err(vec!["needs lib 2 that is also 3", "all of(package lib"]),
        },
        Case {
            rule: "olm.constraint cel with semver_compare over the candidate's properties",
            deps: vec![constraint(json!({"all": {"constraints": [
                {"package": {"packageName": "lib", "versionRange": ">=0.0.0"}},
                {"cel": {"rule": lib_version("<", "3.0.0")}}
            ]}}))],
            expect: Ok(vec!["lib.v2.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint cel alone searches every bundle",
            deps: vec![cel(
                "properties.exists(p, p.type == 'olm.package' && p.value.packageName == 'lib' && p.value.version == '1.0.0')",
            )],
            expect: Ok(vec!["lib.v1.0.0", "app.v1.0.0"]),
        },
        Case {
            rule: "olm.constraint cel that nothing satisfies shows the failureMessage",
            deps: vec![constraint(
                json!({"failureMessage": "requires lib newer than 5", "cel": {"rule": lib_version(">", "5.0.0")}}),
            )],
            expect: Err(vec!["requires lib newer than 5", "CEL rule"]),
        },
        Case {
            rule: "an olm.constraint cel that does not compile makes the bundle uninstallable, saying so",
            deps: vec![cel("properties.exists(p, ")],
            expect: Err(vec!["does not compile", "app.v1.0.0"]),
        },
        Case {
            rule: "an olm.constraint with two kinds is invalid",
            deps: vec![constraint(
                json!({"gvk": widget(), "package": {"packageName": "lib", "versionRange": "1.0.0"}}),
            )],
            expect: Err(vec!["exactly one of"]),
        },
    ];
    for case in cases {
        let got = resolve_app(case.deps);
        match case.expect {
            Ok(want) => {
                let plan = got.unwrap_or_else(|e| panic!("rule {:?}: {e}", case.rule));
                let names: Vec<&str> = plan.steps.iter().map(|s| s.bundle.as_str()).collect();
                assert_eq!(names, want, "rule: {}", case.rule);
            }
            Err(needles) => {
                let text = error_text(got);
                for needle in needles {
                    assert!(
                        text.contains(needle),
                        "rule {:?}: {needle:?} not in:\n{text}",
                        case.rule
                    );
                }
            }
        }
    }
}

#[test]
fn gvk_dependencies_and_one_provider_per_gvk() {
    let cat = Cat::new("ops")
        .linear("app", &["1.0.0"], &|_| {
            vec![prop(PROP_GVK_REQUIRED, widget())]
        })
        .linear("maker", &["1.0.0"], &provides_widget)
        .linear("rival", &["1.0.0"], &provides_widget);
    // A GVK requirement pulls one provider (catalog order ties broken by name: maker).
    let plan = run(
        std::slice::from_ref(&cat),
        &ns(vec![], vec![sub("app", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["maker.v1.0.0@ops", "app.v1.0.0@ops"]);
    // The gvk olm.constraint works the same way.
    let cat2 = Cat::new("ops")
        .linear("app", &["1.0.0"], &|_| {
            vec![constraint(json!({"gvk": widget()}))]
        })
        .linear("maker", &["1.0.0"], &provides_widget);
    assert_eq!(
        steps(
            &run(
                std::slice::from_ref(&cat2),
                &ns(vec![], vec![sub("app", "ops")])
            )
            .unwrap()
        ),
        vec!["maker.v1.0.0@ops", "app.v1.0.0@ops"]
    );
    // An installed provider satisfies it and nothing new is pulled.
    let plan = run(
        std::slice::from_ref(&cat),
        &ns(vec![installed("rival", "1.0.0")], vec![sub("app", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["app.v1.0.0@ops"]);
    assert_eq!(plan.steps[0].dependency_of, Vec::<String>::new());
    // So does a CSV no catalog knows (created directly, no Subscription), by the APIs its
    // own spec owns, as upstream counts the namespace's CSVs.
    let direct = InstalledCsv {
        name: "hand-made.v0.1.0".into(),
        package: "hand-made.v0.1.0".into(),
        version: semver::Version::new(0, 1, 0),
        source: None,
        provided: provides_widget(""),
    };
    let plan = run(
        std::slice::from_ref(&cat),
        &ns(vec![direct.clone()], vec![sub("app", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["app.v1.0.0@ops"]);
    let unrelated = InstalledCsv {
        provided: vec![],
        ..direct
    };
    let plan = run(
        std::slice::from_ref(&cat),
        &ns(vec![unrelated], vec![sub("app", "ops")]),
    )
    .unwrap();
    assert_eq!(steps(&plan), vec!["maker.v1.0.0@ops", "app.v1.0.0@ops"]);
    // Two providers of one GVK cannot share a namespace.
    let text = error_text(run(
        std::slice::from_ref(&cat),
        &ns(vec![], vec![sub("maker", "ops"), sub("rival", "ops")]),
    ));
    assert!(
        text.contains("Widget (example.com/v1)")
            && text.contains("maker")
            && text.contains("rival"),
        "{text}"
    );
    // Nor can a new provider join an installed one.
    let text = error_text(run(
        &[cat],
        &ns(vec![installed("rival", "1.0.0")], vec![sub("maker", "ops")]),
    ));
    assert!(text.contains("Widget (example.com/v1)"), "{text}");
}

#[test]
fn one_bundle_per_package() {
    // app needs lib >=3, tool needs lib <2: they cannot both be installed.
    let cat = Cat::new("ops")
        .linear("app", &["1.0.0"], &|_| {
            vec![requires_package("lib", ">=3.0.0")]
        })
        .linear("tool", &["1.0.0"], &|_| {
            vec![requires_package("lib", "<2.0.0")]
        })
        .linear("lib", &["1.0.0", "2.0.0", "3.0.0"], &none);
    let text = error_text(run(
        std::slice::from_ref(&cat),
        &ns(vec![], vec![sub("app", "ops"), sub("tool", "ops")]),
    ));
    assert!(
        text.contains("lib")
            && text.contains("subscription app")
            && text.contains("subscription tool"),
        "{text}"
    );
    // An installed CSV that no Subscription owns stays, so it blocks a conflicting one.
    let text = error_text(run(
        &[cat],
        &ns(vec![installed("lib", "1.0.0")], vec![sub("app", "ops")]),
    ));
    assert!(
        text.contains("lib.v1.0.0") && text.contains("no subscription"),
        "{text}"
    );
}

#[test]
fn dependency_search_order() {
    // lib exists in several catalogs; each case changes one tie-breaker.
    fn lib_cat(name: &str, namespace: &str, priority: i32, version: &str) -> Cat {
        Cat::in_ns(name, namespace, priority).linear("lib", &[version], &none)
    }
    let app = |name: &str| {
        Cat::in_ns(name, "olm", 0).linear("app", &["1.0.0"], &|_| {
            vec![requires_package("lib", ">=1.0.0")]
        })
    };
    let app_sub = |catalog: &str| sub("app", catalog);
    struct Case {
        rule: &'static str,
        cats: Vec<Cat>,
        installed: Vec<InstalledCsv>,
        expect: &'static str,
    }
    let cases = vec![
        Case {
            rule: "installed first",
            cats: vec![app("a").linear("lib", &["2.0.0"], &none)],
            installed: vec![installed("lib", "1.0.0")],
            expect: "",
        },
        Case {
            rule: "the dependent's own catalog beats priority",
            cats: vec![
                app("a").linear("lib", &["1.0.0"], &none),
                lib_cat("b", "olm", 10, "2.0.0"),
            ],
            installed: vec![],
            expect: "lib.v1.0.0@a",
        },
        Case {
            rule: "higher priority next",
            cats: vec![
                app("a"),
                lib_cat("b", "olm", 1, "1.0.0"),
                lib_cat("c", "olm", 5, "2.0.0"),
            ],
            installed: vec![],
            expect: "lib.v2.0.0@c",
        },
        Case {
            rule: "then a catalog in the resolving namespace",
            cats: vec![
                app("a"),
                lib_cat("b", "olm", 0, "1.0.0"),
                lib_cat("c", "operators", 0, "2.0.0"),
            ],
            installed: vec![],
            expect: "lib.v2.0.0@c",
        },
        Case {
            rule: "then catalog name",
            cats: vec![
                app("a"),
                lib_cat("z", "olm", 0, "1.0.0"),
                lib_cat("m", "olm", 0, "2.0.0"),
            ],
            installed: vec![],
            expect: "lib.v2.0.0@m",
        },
    ];
    for case in cases {
        let plan = run(&case.cats, &ns(case.installed, vec![app_sub("a")]))
            .unwrap_or_else(|e| panic!("{}: {e}", case.rule));
        let deps: Vec<String> = steps(&plan)
            .into_iter()
            .filter(|s| !s.starts_with("app."))
            .collect();
        let want: Vec<String> = if case.expect.is_empty() {
            vec![]
        } else {
            vec![case.expect.to_string()]
        };
        assert_eq!(deps, want, "rule: {}", case.rule);
    }

    // Within a catalog: the default channel first, then nearest to the head.
    let cat = app("a")
        .package("lib", "stable")
        .channel("lib", "stable", vec![entry("lib.v1.0.0")])
        .channel(
            "lib",
            "fast",
            vec![
                entry("lib.v1.0.0"),
                entry("lib.v2.0.0").replaces("lib.v1.0.0"),
            ],
        )
        .bundle("lib", "1.0.0", vec![])
        .bundle("lib", "2.0.0", vec![]);
    let plan = run(&[cat], &ns(vec![], vec![app_sub("a")])).unwrap();
    assert_eq!(steps(&plan)[0], "lib.v1.0.0@a");
    assert_eq!(plan.steps[0].channel, "stable");
}

#[test]
fn plan_order_reasons_and_generated_subscriptions() {
    let cat = Cat::in_ns("ops", "olm", 0)
        .linear("app", &["1.0.0"], &|_| {
            vec![requires_package("mid", ">=1.0.0")]
        })
        .linear("mid", &["1.0.0"], &|_| {
            vec![prop(PROP_GVK_REQUIRED, widget())]
        })
        .linear("maker", &["1.0.0"], &provides_widget);
    let plan = run(&[cat], &ns(vec![], vec![sub("app", "ops")])).unwrap();
    assert_eq!(
        steps(&plan),
        vec!["maker.v1.0.0@ops", "mid.v1.0.0@ops", "app.v1.0.0@ops"]
    );
    assert_eq!(plan.steps[0].dependency_of, vec!["mid.v1.0.0"]);
    assert_eq!(plan.steps[1].dependency_of, vec!["app.v1.0.0"]);
    assert_eq!(
        plan.steps[0].reason,
        Reason::Dependency {
            generated_subscription: "maker-stable-ops-olm".into()
        }
    );
    assert_eq!(
        plan.steps[2].reason,
        Reason::Subscribed {
            subscription: "app".into()
        }
    );
    let line = plan.steps[0].to_string();
    assert!(
        line.contains("maker.v1.0.0")
            && line.contains("dependency of mid.v1.0.0")
            && line.contains("maker-stable-ops-olm"),
        "{line}"
    );
}

#[test]
fn deprecated_dependency_is_passed_over() {
    let cat = Cat::new("ops")
        .linear("app", &["1.0.0"], &|_| {
            vec![requires_package("lib", ">=1.0.0")]
        })
        .linear("lib", &["1.0.0", "2.0.0"], &|v| {
            if v == "2.0.0" {
                vec![prop(PROP_DEPRECATED, json!({}))]
            } else {
                vec![]
            }
        });
    assert_eq!(
        steps(&run(&[cat], &ns(vec![], vec![sub("app", "ops")])).unwrap()),
        vec!["lib.v1.0.0@ops", "app.v1.0.0@ops"]
    );
}

#[test]
fn deterministic() {
    let cat = Cat::new("ops")
        .linear("app", &["1.0.0", "2.0.0"], &|_| {
            vec![
                prop(PROP_GVK_REQUIRED, widget()),
                requires_package("lib", ">=1.0.0"),
            ]
        })
        .linear("a-maker", &["1.0.0"], &provides_widget)
        .linear("b-maker", &["1.0.0"], &provides_widget)
        .linear("lib", &["1.0.0", "2.0.0", "3.0.0"], &none);
    let namespace = ns(vec![], vec![sub("app", "ops")]);
    let first = run(std::slice::from_ref(&cat), &namespace).unwrap();
    for _ in 0..5 {
        assert_eq!(run(std::slice::from_ref(&cat), &namespace).unwrap(), first);
    }
}
