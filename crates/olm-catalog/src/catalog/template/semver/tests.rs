//! Tests of the semver template: parsing, channel generation and linking (opm's own
//! cases among them), the default channel, package metadata and render errors.

use super::*;
use crate::catalog::model::fbc::*;
use base64::Engine;
use base64::engine::general_purpose;
use serde_json::json;

fn bundle(pkg: &str, version: &str) -> Bundle {
    Bundle {
        schema: "olm.bundle".into(),
        name: format!("{pkg}.v{version}"),
        package: pkg.into(),
        image: image(pkg, version),
        properties: vec![Property::new(
            PROP_PACKAGE,
            json!({ "packageName": pkg, "version": version }),
        )],
        related_images: vec![],
    }
}

fn image(pkg: &str, version: &str) -> String {
    format!("quay.io/foo/olm:{pkg}.v{version}")
}

fn list(pkg: &str, versions: &[&str]) -> ChannelBundles {
    ChannelBundles {
        bundles: versions
            .iter()
            .map(|v| BundleEntry {
                image: image(pkg, v),
            })
            .collect(),
    }
}

/// A resolver that knows every version used by the templates below, and counts calls.
fn fake_resolve(calls: &mut Vec<String>) -> impl FnMut(&str) -> Result<Bundle, String> + '_ {
    move |img: &str| {
        calls.push(img.to_string());
        let rest = img
            .strip_prefix("quay.io/foo/olm:")
            .ok_or_else(|| format!("unknown image {img}"))?;
        let (pkg, version) = rest
            .split_once(".v")
            .ok_or_else(|| format!("unknown image {img}"))?;
        Ok(bundle(pkg, version))
    }
}

fn render_ok(t: &SemverTemplate) -> DeclarativeConfig {
    let mut calls = Vec::new();
    render(t, &mut fake_resolve(&mut calls)).unwrap_or_else(|e| panic!("{e}"))
}

fn template(major: bool, minor: bool, pref: &str) -> SemverTemplate {
    SemverTemplate {
        schema: SCHEMA.into(),
        generate_major_channels: major,
        generate_minor_channels: minor,
        default_channel_type_preference: pref.into(),
        ..Default::default()
    }
}

/// Channels as (name, entry specs), an entry spec being `name`, then `>replaces` and
/// `+skip` items, with bundle names shortened (`t` for `testoperator.v`, `a` for `a.v`).
type Specs = Vec<(String, Vec<String>)>;

fn channels_of(cfg: &DeclarativeConfig) -> Specs {
    cfg.channels
        .iter()
        .map(|c| {
            let entries = c
                .entries
                .iter()
                .map(|e| {
                    let mut s = e.name.clone();
                    if !e.replaces.is_empty() {
                        s += &format!(">{}", e.replaces);
                    }
                    for k in &e.skips {
                        s += &format!("+{k}");
                    }
                    s.replace("testoperator.v", "t").replace("a.v", "a")
                })
                .collect();
            (c.name.clone(), entries)
        })
        .collect()
}

fn expect(channels: &[(&str, &[&str])]) -> Specs {
    channels
        .iter()
        .map(|(n, es)| {
            (
                n.to_string(),
                es.iter().map(std::string::ToString::to_string).collect(),
            )
        })
        .collect()
}

/// The template of opm's README.
fn readme(major: bool, minor: bool) -> SemverTemplate {
    let p = "testoperator";
    SemverTemplate {
        candidate: list(
            p,
            &[
                "0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.2.1", "0.2.2", "0.3.0", "1.0.0",
                "1.0.1", "1.1.0",
            ],
        ),
        fast: list(p, &["0.2.1", "0.2.2", "0.3.0", "1.0.1", "1.1.0"]),
        stable: list(p, &["1.0.1"]),
        ..template(major, minor, "")
    }
}

#[test]
fn readme_major_channels() {
    let cfg = render_ok(&readme(true, false));
    assert_eq!(cfg.packages.len(), 1);
    assert_eq!(cfg.packages[0].name, "testoperator");
    assert_eq!(cfg.packages[0].default_channel, "stable-v1");
    let want: &[(&str, &[&str])] = &[
        (
            "candidate-v0",
            &[
                "t0.1.0",
                "t0.1.1",
                "t0.1.2",
                "t0.1.3+t0.1.0+t0.1.1+t0.1.2",
                "t0.2.0",
                "t0.2.1",
                "t0.2.2>t0.1.3+t0.1.0+t0.1.1+t0.1.2+t0.2.0+t0.2.1",
                "t0.3.0>t0.2.2+t0.1.0+t0.1.1+t0.1.2+t0.1.3+t0.2.0+t0.2.1",
            ],
        ),
        (
            "candidate-v1",
            &["t1.0.0", "t1.0.1+t1.0.0", "t1.1.0>t1.0.1+t1.0.0"],
        ),
        (
            "fast-v0",
            &["t0.2.1", "t0.2.2+t0.2.1", "t0.3.0>t0.2.2+t0.2.1"],
        ),
        ("fast-v1", &["t1.0.1", "t1.1.0>t1.0.1"]),
        ("stable-v1", &["t1.0.1"]),
    ];
    let want = expect(want);
    assert_eq!(channels_of(&cfg), want);
    // Every bundle once, sorted by name.
    let names: Vec<&str> = cfg.bundles.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names.len(), 11);
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    assert!(
        cfg.channels
            .iter()
            .all(|c| c.package == "testoperator" && c.schema == SCHEMA_CHANNEL)
    );
}

#[test]
fn readme_minor_channels_by_default() {
    let cfg = render_ok(&readme(false, false));
    assert_eq!(cfg.packages[0].default_channel, "stable-v1.0");
    let want: &[(&str, &[&str])] = &[
        (
            "candidate-v0.1",
            &["t0.1.0", "t0.1.1", "t0.1.2", "t0.1.3+t0.1.0+t0.1.1+t0.1.2"],
        ),
        (
            "candidate-v0.2",
            &[
                "t0.2.0",
                "t0.2.1",
                "t0.2.2>t0.1.3+t0.1.0+t0.1.1+t0.1.2+t0.2.0+t0.2.1",
            ],
        ),
        (
            "candidate-v0.3",
            &["t0.3.0>t0.2.2+t0.1.0+t0.1.1+t0.1.2+t0.1.3+t0.2.0+t0.2.1"],
        ),
        ("candidate-v1.0", &["t1.0.0", "t1.0.1+t1.0.0"]),
        ("candidate-v1.1", &["t1.1.0>t1.0.1+t1.0.0"]),
        ("fast-v0.2", &["t0.2.1", "t0.2.2+t0.2.1"]),
        ("fast-v0.3", &["t0.3.0>t0.2.2+t0.2.1"]),
        ("fast-v1.0", &["t1.0.1"]),
        ("fast-v1.1", &["t1.1.0>t1.0.1"]),
        ("stable-v1.0", &["t1.0.1"]),
    ];
    assert_eq!(channels_of(&cfg), expect(want));
}

#[test]
fn each_image_is_resolved_and_emitted_once() {
    let mut calls = Vec::new();
    let cfg = render(&readme(true, true), &mut fake_resolve(&mut calls)).unwrap();
    assert_eq!(calls.len(), 11);
    assert_eq!(calls[0], image("testoperator", "0.1.0"));
    assert_eq!(cfg.bundles.len(), 11);
}

/// opm's TestGenerateChannels data set (all in stable, with pre-releases).
fn opm_generate_channels(major: bool, minor: bool, pref: &str) -> SemverTemplate {
    SemverTemplate {
        stable: list(
            "a",
            &[
                "0.1.0",
                "0.1.1",
                "1.1.0",
                "1.2.1",
                "1.3.1",
                "2.1.0",
                "1.3.1-beta",
                "2.1.1",
                "2.3.1",
                "2.3.2",
                "3.1.0",
                "3.1.1",
                "1.3.1-alpha",
                "1.4.1",
                "1.4.1-beta1",
                "1.4.1-beta2",
            ],
        ),
        ..template(major, minor, pref)
    }
}

const OPM_MAJOR: &[(&str, &[&str])] = &[
    ("stable-v0", &["a0.1.0", "a0.1.1+a0.1.0"]),
    (
        "stable-v1",
        &[
            "a1.1.0",
            "a1.2.1>a1.1.0",
            "a1.3.1-alpha",
            "a1.3.1-beta",
            "a1.3.1>a1.2.1+a1.1.0+a1.3.1-alpha+a1.3.1-beta",
            "a1.4.1-beta1",
            "a1.4.1-beta2",
            "a1.4.1>a1.3.1+a1.1.0+a1.2.1+a1.3.1-alpha+a1.3.1-beta+a1.4.1-beta1+a1.4.1-beta2",
        ],
    ),
    (
        "stable-v2",
        &[
            "a2.1.0",
            "a2.1.1+a2.1.0",
            "a2.3.1",
            "a2.3.2>a2.1.1+a2.1.0+a2.3.1",
        ],
    ),
    ("stable-v3", &["a3.1.0", "a3.1.1+a3.1.0"]),
];

const OPM_MINOR: &[(&str, &[&str])] = &[
    ("stable-v0.1", &["a0.1.0", "a0.1.1+a0.1.0"]),
    ("stable-v1.1", &["a1.1.0"]),
    ("stable-v1.2", &["a1.2.1>a1.1.0"]),
    (
        "stable-v1.3",
        &[
            "a1.3.1-alpha",
            "a1.3.1-beta",
            "a1.3.1>a1.2.1+a1.1.0+a1.3.1-alpha+a1.3.1-beta",
        ],
    ),
    (
        "stable-v1.4",
        &[
            "a1.4.1-beta1",
            "a1.4.1-beta2",
            "a1.4.1>a1.3.1+a1.1.0+a1.2.1+a1.3.1-alpha+a1.3.1-beta+a1.4.1-beta1+a1.4.1-beta2",
        ],
    ),
    ("stable-v2.1", &["a2.1.0", "a2.1.1+a2.1.0"]),
    ("stable-v2.3", &["a2.3.1", "a2.3.2>a2.1.1+a2.1.0+a2.3.1"]),
    ("stable-v3.1", &["a3.1.0", "a3.1.1+a3.1.0"]),
];

#[test]
fn opm_generate_channels_cases() {
    let mut combined = expect(OPM_MAJOR);
    combined.extend(expect(OPM_MINOR));
    combined.sort();
    // (major, minor, preference, default channel, channels), as in opm's test table
    let cases: Vec<(bool, bool, &str, &str, Specs)> = vec![
        (false, true, "minor", "stable-v3.1", expect(OPM_MINOR)),
        (true, false, "major", "stable-v3", expect(OPM_MAJOR)),
        (true, true, "minor", "stable-v3.1", combined.clone()),
        (true, true, "major", "stable-v3", combined),
        (false, true, "", "stable-v3.1", expect(OPM_MINOR)),
        (true, false, "", "stable-v3", expect(OPM_MAJOR)),
    ];
    for (major, minor, pref, default, channels) in cases {
        let cfg = render_ok(&opm_generate_channels(major, minor, pref));
        assert_eq!(
            cfg.packages[0].default_channel, default,
            "{major} {minor} {pref}"
        );
        assert_eq!(channels_of(&cfg), channels, "{major} {minor} {pref}");
    }
}

#[test]
fn no_edges_across_majors_or_archetypes() {
    // opm's TestLinkChannels "last edge is archetype change" and "last edge is X change".
    let t = SemverTemplate {
        stable: list("a", &["1.1.0", "1.2.1", "1.3.1", "2.1.0", "2.1.1", "2.3.1"]),
        candidate: list("a", &["2.3.2"]),
        ..template(true, false, "")
    };
    let want: &[(&str, &[&str])] = &[
        ("candidate-v2", &["a2.3.2"]),
        (
            "stable-v1",
            &["a1.1.0", "a1.2.1>a1.1.0", "a1.3.1>a1.2.1+a1.1.0"],
        ),
        (
            "stable-v2",
            &["a2.1.0", "a2.1.1+a2.1.0", "a2.3.1>a2.1.1+a2.1.0"],
        ),
    ];
    assert_eq!(channels_of(&render_ok(&t)), expect(want));

    let t = SemverTemplate {
        stable: list("a", &["0.1.0", "0.1.1", "1.1.0", "1.2.1", "1.3.1", "2.1.0"]),
        ..template(true, false, "")
    };
    let want: &[(&str, &[&str])] = &[
        ("stable-v0", &["a0.1.0", "a0.1.1+a0.1.0"]),
        (
            "stable-v1",
            &["a1.1.0", "a1.2.1>a1.1.0", "a1.3.1>a1.2.1+a1.1.0"],
        ),
        ("stable-v2", &["a2.1.0"]),
    ];
    assert_eq!(channels_of(&render_ok(&t)), expect(want));

    // Minimum viable channel.
    let t = SemverTemplate {
        stable: list("a", &["0.1.0"]),
        ..template(true, false, "")
    };
    assert_eq!(
        channels_of(&render_ok(&t)),
        expect(&[("stable-v0", &["a0.1.0"])])
    );
}

#[test]
fn same_bundle_in_two_archetypes_gets_independent_edges() {
    let t = SemverTemplate {
        candidate: list("a", &["1.0.0", "1.1.0"]),
        stable: list("a", &["1.1.0"]),
        ..template(false, true, "")
    };
    let cfg = render_ok(&t);
    let want: &[(&str, &[&str])] = &[
        ("candidate-v1.0", &["a1.0.0"]),
        ("candidate-v1.1", &["a1.1.0>a1.0.0"]),
        ("stable-v1.1", &["a1.1.0"]),
    ];
    assert_eq!(channels_of(&cfg), expect(want));
    assert_eq!(cfg.bundles.len(), 2);
    assert_eq!(cfg.packages[0].default_channel, "stable-v1.1");
}

#[test]
fn default_channel_choice() {
    // (template, expected default channel)
    let cases = vec![
        // the most stable archetype wins over a higher version elsewhere
        (
            SemverTemplate {
                candidate: list("a", &["5.0.0"]),
                stable: list("a", &["1.0.0"]),
                ..template(false, false, "")
            },
            "stable-v1.0",
        ),
        (
            SemverTemplate {
                candidate: list("a", &["5.0.0"]),
                fast: list("a", &["1.0.0"]),
                ..template(false, false, "")
            },
            "fast-v1.0",
        ),
        (
            SemverTemplate {
                candidate: list("a", &["5.0.0", "0.1.0"]),
                ..template(false, false, "")
            },
            "candidate-v5.0",
        ),
        // then the highest version
        (
            SemverTemplate {
                stable: list("a", &["2.0.0", "1.0.0", "1.9.0"]),
                ..template(false, false, "")
            },
            "stable-v2.0",
        ),
        // then the preferred kind, on a tie
        (
            SemverTemplate {
                stable: list("a", &["2.0.0"]),
                ..template(true, true, "major")
            },
            "stable-v2",
        ),
        (
            SemverTemplate {
                stable: list("a", &["2.0.0"]),
                ..template(true, true, "minor")
            },
            "stable-v2.0",
        ),
        (
            SemverTemplate {
                stable: list("a", &["2.0.0"]),
                ..template(true, true, "")
            },
            "stable-v2.0",
        ),
        // opm compares channels when they are created: the minor channel opened by 2.1.0
        // beats stable-v2 (opened by 2.0.0) even though major is preferred.
        (
            SemverTemplate {
                stable: list("a", &["2.0.0", "2.1.0"]),
                ..template(true, true, "major")
            },
            "stable-v2.1",
        ),
        (
            SemverTemplate {
                stable: list("a", &["2.0.0", "2.0.1"]),
                ..template(true, true, "major")
            },
            "stable-v2",
        ),
    ];
    for (t, want) in cases {
        assert_eq!(render_ok(&t).packages[0].default_channel, want, "{t:?}");
    }
}

#[test]
fn build_metadata_is_ignored_in_order_but_conflicts_are_errors() {
    // opm's TestBailOnVersionBuildMetadata
    let t = SemverTemplate {
        stable: list(
            "a",
            &[
                "0.1.0",
                "0.1.1",
                "1.1.0",
                "1.2.1",
                "1.3.1",
                "2.1.0",
                "2.1.1",
                "2.3.1",
                "2.3.2",
                "1.3.1-alpha",
                "1.3.1-alpha+2001Jan21",
                "1.3.1-alpha+2003May06",
            ],
        ),
        ..template(false, true, "")
    };
    let mut calls = Vec::new();
    let err = render(&t, &mut fake_resolve(&mut calls)).unwrap_err();
    assert!(
        matches!(
            err,
            TemplateError::BuildMetadataConflict {
                archetype: "stable",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("a.v1.3.1-alpha+2001Jan21"),
        "{err}"
    );

    // The same versions in different archetypes are fine, and a build suffix alone orders
    // like the plain version.
    let t = SemverTemplate {
        candidate: list("a", &["1.1.0+b1"]),
        stable: list("a", &["1.1.0+b2", "1.0.0"]),
        ..template(false, true, "")
    };
    let cfg = render_ok(&t);
    let want: &[(&str, &[&str])] = &[
        ("candidate-v1.1", &["a1.1.0+b1"]),
        ("stable-v1.0", &["a1.0.0"]),
        ("stable-v1.1", &["a1.1.0+b2>a1.0.0"]),
    ];
    assert_eq!(channels_of(&cfg), expect(want));
}

#[test]
fn render_errors() {
    fn err_of(
        t: &SemverTemplate,
        resolve: &mut dyn FnMut(&str) -> Result<Bundle, String>,
    ) -> TemplateError {
        render(t, resolve).unwrap_err()
    }
    let mut calls = Vec::new();
    let mut ok = fake_resolve(&mut calls);

    // no bundles
    assert_eq!(
        err_of(&template(false, false, ""), &mut ok),
        TemplateError::NoBundles
    );
    // unknown schema
    let t = SemverTemplate {
        schema: "olm.template.basic".into(),
        stable: list("a", &["1.0.0"]),
        ..Default::default()
    };
    assert_eq!(
        err_of(&t, &mut ok),
        TemplateError::UnknownSchema("olm.template.basic".into())
    );
    // preference for a kind that is not generated
    let t = SemverTemplate {
        stable: list("a", &["1.0.0"]),
        ..template(true, false, "minor")
    };
    assert!(matches!(
        err_of(&t, &mut ok),
        TemplateError::PreferenceMismatch { .. }
    ));
    // bundles of two packages
    let t = SemverTemplate {
        candidate: list("a", &["1.0.0"]),
        stable: list("b", &["1.0.0"]),
        ..template(false, false, "")
    };
    let e = err_of(&t, &mut ok);
    assert!(
        matches!(&e, TemplateError::PackageMismatch { found, expected, .. } if found == "b" && expected == "a"),
        "{e}"
    );
    assert!(e.to_string().contains("quay.io/foo/olm:b.v1.0.0"), "{e}");
    // a version that is not semver (blang rules: no leading v, no two-part versions)
    for (bad, why) in [
        ("1.0", "no Major.Minor.Patch elements found"),
        (
            "01.0.0",
            r#"major number must not contain leading zeroes "01""#,
        ),
        (
            "1.0.0-01",
            r#"numeric prerelease version must not contain leading zeroes "01""#,
        ),
    ] {
        let t = SemverTemplate {
            stable: list("a", &[bad]),
            ..template(false, false, "")
        };
        let e = err_of(&t, &mut ok);
        assert!(
            matches!(&e, TemplateError::InvalidVersion { version, .. } if version == bad),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with(&format!("has invalid version {bad:?}: {why}")),
            "{e}"
        );
    }
    // the same bundle twice in one archetype
    let t = SemverTemplate {
        stable: list("a", &["1.0.0", "1.0.0"]),
        ..template(false, false, "")
    };
    assert!(matches!(
        err_of(&t, &mut ok),
        TemplateError::DuplicateEntry {
            archetype: "stable",
            ..
        }
    ));
    drop(ok);

    // resolve failures name the image
    let t = SemverTemplate {
        stable: list("a", &["1.0.0"]),
        ..template(false, false, "")
    };
    let e = err_of(&t, &mut |_: &str| Err("pull failed".to_string()));
    assert_eq!(
        e.to_string(),
        r#"bundle image "quay.io/foo/olm:a.v1.0.0": pull failed"#
    );
    // no olm.package property, or two
    let e = err_of(&t, &mut |img: &str| {
        Ok(Bundle {
            name: "x".into(),
            image: img.into(),
            ..Default::default()
        })
    });
    assert!(
        matches!(e, TemplateError::PackagePropertyCount { count: 0, .. }),
        "{e}"
    );
    let e = err_of(&t, &mut |img: &str| {
        let mut b = bundle("a", "1.0.0");
        b.image = img.into();
        b.properties.push(b.properties[0].clone());
        Ok(b)
    });
    assert!(
        matches!(e, TemplateError::PackagePropertyCount { count: 2, .. }),
        "{e}"
    );
    // two images rendering to one bundle name with different content
    let t = SemverTemplate {
        candidate: list("a", &["1.0.0"]),
        stable: list("a", &["1.0.1"]),
        ..template(false, false, "")
    };
    let e = err_of(&t, &mut |img: &str| {
        let mut b = bundle("a", "1.0.0");
        b.image = img.into();
        Ok(b)
    });
    assert!(matches!(e, TemplateError::ConflictingBundles { .. }), "{e}");
}

#[test]
fn parse_template() {
    let text = "---\nschema: olm.semver\ngenerateMajorChannels: true\ncandidate:\n  bundles:\n  - image: quay.io/foo/olm:a.v1.0.0\nstable:\n  bundles:\n  - image: quay.io/foo/olm:a.v0.9.0\n";
    let t = parse(text).unwrap();
    assert!(t.generate_major_channels && !t.generate_minor_channels);
    assert_eq!(t.default_channel_type_preference, "major");
    assert_eq!(t.candidate.bundles[0].image, "quay.io/foo/olm:a.v1.0.0");
    assert!(t.fast.bundles.is_empty());

    // defaults: minor channels, preference minor
    let t = parse("schema: olm.semver\n").unwrap();
    assert!(t.generate_minor_channels && !t.generate_major_channels);
    assert_eq!(t.default_channel_type_preference, "minor");

    // JSON, and opm README's capitalised keys (Go matches field names case-insensitively)
    let t = parse(r#"{"Schema": "olm.semver", "GenerateMajorChannels": true, "GenerateMinorChannels": true, "Stable": {"Bundles": [{"Image": "x"}]}}"#).unwrap();
    assert_eq!(t.stable.bundles, vec![BundleEntry { image: "x".into() }]);
    assert_eq!(t.default_channel_type_preference, "minor");

    // through serde directly as well
    let t: SemverTemplate =
        serde_yaml::from_str("schema: olm.semver\nfast: {bundles: [{image: y}]}\n").unwrap();
    assert_eq!(t.fast.bundles[0].image, "y");

    // null fields are unset
    let t = parse("schema: olm.semver\ncandidate:\nfast: {bundles: null}\n").unwrap();
    assert!(t.candidate.bundles.is_empty() && t.fast.bundles.is_empty());
}

#[test]
fn parse_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "schema: olm.semver\ninvalid:\n  bundles: []\n",
            "unknown field \"invalid\"",
        ),
        (
            "schema: olm.semver\nstable:\n  bundles:\n  - image: x\n    tag: y\n",
            "unknown field \"tag\"",
        ),
        (
            "schema: olm.template.basic\n",
            "schema \"olm.template.basic\"",
        ),
        ("", "schema \"\""),
        ("generateMajorChannels: true\n", "schema \"\""),
        (
            "schema: olm.semver\ngenerateMajorChannels: true\ndefaultChannelTypePreference: minor\n",
            "generateMinorChannels",
        ),
        (
            "schema: olm.semver\ngenerateMinorChannels: true\ndefaultChannelTypePreference: major\n",
            "generateMajorChannels",
        ),
        (
            "schema: olm.semver\ndefaultChannelTypePreference: foo\n",
            "unknown defaultChannelTypePreference \"foo\"",
        ),
        (
            "schema: olm.semver\ngenerateMajorChannels: \"true\"\n",
            "generateMajorChannels must be true or false",
        ),
        (
            "schema: olm.semver\nstable: [x]\n",
            "stable must be a mapping",
        ),
        ("- schema: olm.semver\n", "must be a mapping"),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn package_metadata_from_head_bundle_csv() {
    fn with_csv(mut b: Bundle, description: &str, icon_data: &str) -> Bundle {
        let csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": b.name},
            "spec": {"description": description, "icon": [{"base64data": icon_data, "mediatype": "image/svg+xml"}, {"base64data": "", "mediatype": "x"}]},
        });
        let data = general_purpose::STANDARD.encode(serde_json::to_vec(&csv).unwrap());
        b.properties
            .push(Property::new(PROP_BUNDLE_OBJECT, json!({ "data": data })));
        b
    }
    let t = SemverTemplate {
        stable: list("a", &["1.0.0", "1.1.0"]),
        ..template(true, false, "")
    };
    let mut resolve = |img: &str| -> Result<Bundle, String> {
        Ok(if img.ends_with("1.1.0") {
            with_csv(bundle("a", "1.1.0"), "New description", "aGVsbG93b3JsZA==")
        } else {
            with_csv(bundle("a", "1.0.0"), "Old description", "b2xkZGF0YQ==")
        })
    };
    let cfg = render(&t, &mut resolve).unwrap();
    let pkg = &cfg.packages[0];
    assert_eq!(pkg.default_channel, "stable-v1");
    assert_eq!(pkg.description, "New description");
    assert_eq!(
        pkg.icon,
        Some(Icon {
            base64data: "aGVsbG93b3JsZA==".into(),
            mediatype: "image/svg+xml".into()
        })
    );

    // Bad icon data means no icon, but the description still comes through.
    let mut resolve = |_: &str| Ok::<_, String>(with_csv(bundle("a", "1.0.0"), "D", "not base64!"));
    let t = SemverTemplate {
        stable: list("a", &["1.0.0"]),
        ..template(false, false, "")
    };
    let cfg = render(&t, &mut resolve).unwrap();
    assert_eq!(cfg.packages[0].description, "D");
    assert_eq!(cfg.packages[0].icon, None);

    // Without a CSV object, olm.csv.metadata gives the description.
    let mut resolve = |_: &str| {
        let mut b = bundle("a", "1.0.0");
        b.properties.push(Property::new(
            PROP_CSV_METADATA,
            json!({"description": "From metadata"}),
        ));
        Ok::<_, String>(b)
    };
    let cfg = render(&t, &mut resolve).unwrap();
    assert_eq!(cfg.packages[0].description, "From metadata");
    assert_eq!(cfg.packages[0].icon, None);

    // Without either, nothing.
    let cfg = render_ok(&t);
    assert_eq!(cfg.packages[0].description, "");
    assert_eq!(cfg.packages[0].icon, None);
}
