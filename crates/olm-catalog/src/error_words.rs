//! Error messages pinned whole, through the public entry points: users, tests of the `olm`
//! crate and the opm-parity checks compare them, whatever type carries them.

use serde_json::{Value, json};

use crate::catalog::checks::validate::{check_image_reference, validate, warnings};
use crate::catalog::model::fbc::{DeclarativeConfig, Property};
use crate::catalog::model::semver_range::VersionRange;
use crate::catalog::template::semver;
use crate::resolver::cel::CelRule;
use crate::resolver::constraints::{Dependency, dependencies};

fn range_error(range: &str) -> String {
    VersionRange::parse(range).unwrap_err().to_string()
}

#[test]
fn versions_are_refused_in_blangs_words() {
    let not_a_version = |v: &str, why: &str| {
        format!(r#"invalid range "{v}": "{v}": "{v}" is not a version: {why}"#)
    };
    for (version, why) in [
        ("1.2", "no Major.Minor.Patch elements found"),
        ("1.a.3", r#"invalid character(s) found in minor number "a""#),
        (
            "01.2.3",
            r#"major number must not contain leading zeroes "01""#,
        ),
        ("1..3", "minor number is empty"),
        (
            "1.2.99999999999999999999",
            r#"patch number "99999999999999999999" is out of range"#,
        ),
        ("1.2.3-", "prerelease is empty"),
        (
            "1.2.3-01",
            r#"numeric prerelease version must not contain leading zeroes "01""#,
        ),
        (
            "1.2.3-99999999999999999999",
            r#"numeric prerelease version "99999999999999999999" is out of range"#,
        ),
        (
            "1.2.3-a_b",
            r#"invalid character(s) found in prerelease "a_b""#,
        ),
        ("1.2.3+", "build meta data is empty"),
        (
            "1.2.3+a_b",
            r#"invalid character(s) found in build meta data "a_b""#,
        ),
    ] {
        assert_eq!(range_error(version), not_a_version(version, why));
    }
    assert_eq!(
        range_error(">=a"),
        r#"invalid range ">=a": ">=a": no version found"#
    );
    assert_eq!(
        range_error(">x"),
        r#"invalid range ">x": ">x": no version found"#
    );
}

/// The problem of the one dependency `value` (a property of type `type_`) declares.
fn problem(type_: &str, value: Value) -> String {
    match dependencies(&[Property::new(type_, value)]).as_slice() {
        [Dependency::Invalid { problem, .. }] => problem.to_string(),
        other => panic!("expected one invalid dependency, got {other:?}"),
    }
}

#[test]
fn unreadable_dependencies_say_what_they_lack() {
    let constraint = |v: Value| problem("olm.constraint", v);
    assert_eq!(
        problem("olm.package.required", json!({})),
        "needs a packageName"
    );
    assert_eq!(
        problem("olm.package.required", json!({"packageName": "p"})),
        "needs a versionRange"
    );
    assert_eq!(
        problem(
            "olm.package.required",
            json!({"packageName": "p", "versionRange": ">=a"})
        ),
        range_error(">=a")
    );
    assert_eq!(
        problem("olm.gvk.required", json!({"group": "g"})),
        "needs string fields group, version and kind"
    );
    let kinds = r#"["gvk", "package", "all", "any", "not", "cel"]"#;
    assert_eq!(
        constraint(json!({})),
        format!("a constraint needs exactly one of {kinds}, found []")
    );
    assert_eq!(
        constraint(json!({"gvk": {}, "cel": {}})),
        format!(r#"a constraint needs exactly one of {kinds}, found ["gvk", "cel"]"#)
    );
    assert_eq!(
        constraint(json!({"all": {}})),
        "all needs a constraints list"
    );
    assert_eq!(
        constraint(json!({"any": {"constraints": []}})),
        "any needs at least one constraint"
    );
    assert_eq!(
        constraint(json!({"gvk": {"group": "g"}})),
        "gvk needs string fields group, version and kind"
    );
    assert_eq!(constraint(json!({"cel": {}})), "cel needs a rule");
    assert!(
        constraint(json!({"cel": {"rule": "1 +"}}))
            .starts_with(r#"CEL rule "1 +" does not compile: "#)
    );
}

#[test]
fn cel_rules_that_give_no_bool_say_so() {
    let e = CelRule::compile("1").unwrap().evaluate(&[]).unwrap_err();
    assert_eq!(e.to_string(), r#"CEL rule "1" returned Int(1), not a bool"#);
    let e = CelRule::compile("properties[3] == 1")
        .unwrap()
        .evaluate(&[])
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with(r#"CEL rule "properties[3] == 1" failed: "#),
        "{e}"
    );
}

#[test]
fn template_fields_of_the_wrong_shape_are_named() {
    let error = |text: &str| semver::parse(text).unwrap_err().to_string();
    for (text, words) in [
        ("[]", "the template must be a mapping, not a list"),
        (
            r#"{"schema": "olm.semver", "bogus": 1}"#,
            r#"unknown field "bogus" in the template"#,
        ),
        (
            r#"{"schema": "olm.semver", "stable": {"bundles": {}}}"#,
            "stable.bundles must be a list, not a mapping",
        ),
        (
            r#"{"schema": "olm.semver", "fast": 1}"#,
            "fast must be a mapping, not a number",
        ),
        (r#"{"schema": 1}"#, "schema must be a string, not a number"),
        (
            r#"{"schema": "olm.semver", "generateMajorChannels": "yes"}"#,
            "generateMajorChannels must be true or false, not a string",
        ),
        (
            r#"{"schema": "olm.semver", "stable": {"bundles": [{"image": 1}]}}"#,
            "image must be a string, not a number",
        ),
        (
            r#"{"schema": "olm.semver", "stable": {"bundles": [{"img": "x"}]}}"#,
            r#"unknown field "img" in stable.bundles[]"#,
        ),
    ] {
        assert_eq!(error(text), format!("semver template: {words}"), "{text}");
    }
}

#[test]
fn image_references_are_refused_naming_the_part() {
    let error = |image: &str| check_image_reference(image).unwrap_err().to_string();
    assert_eq!(error("quay.io/x@sha256"), "digest must be algorithm:hex");
    assert_eq!(
        error("quay.io/x@sha256:abc"),
        r#"invalid digest "sha256:abc""#
    );
    assert_eq!(error("quay.io/x:-bad"), r#"invalid tag "-bad""#);
    assert_eq!(error(":tag"), "empty repository name");
    assert_eq!(
        error("quay.io/X"),
        r#"invalid repository path component "X""#
    );
}

#[test]
fn icons_are_refused_or_warned_about_naming_the_problem() {
    use base64::Engine;
    let encode = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    let package = |data: String, mediatype: &str| DeclarativeConfig {
        packages: vec![
            serde_json::from_value(json!({
                "schema": "olm.package", "name": "p",
                "icon": {"base64data": data, "mediatype": mediatype}
            }))
            .unwrap(),
        ],
        ..Default::default()
    };
    let messages = |problems: Vec<crate::catalog::checks::validate::Problem>| -> Vec<String> {
        problems.into_iter().map(|p| p.message).collect()
    };
    let refused = messages(validate(&package("!!".into(), "image/png")));
    assert!(
        refused
            .iter()
            .any(|m| m.starts_with("icon data is not base64: ")),
        "{refused:?}"
    );
    assert_eq!(
        messages(warnings(&package(encode(b"hello"), "image/png"))),
        [r#"icon data is not an image of a known type (mediatype "image/png")"#]
    );
    assert_eq!(
        messages(warnings(&package(encode(b"<svg/>"), "image/png"))),
        [r#"icon mediatype "image/png" does not match its data (image/svg+xml)"#]
    );
}
