//! `olm resolve` end to end: the built binary against our `catalog/` and the testdata.

// A test reads as one scenario, top to bottom; the 100-line rule is for the code it tests.
#![allow(clippy::too_many_lines)]
// Test and bench code: a failed unwrap is a failed run, with its message (the lint stays
// on for library code; clippy.toml allows it inside #[test] functions).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn olm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_olm"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("olm runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn text_plan_lists_dependencies_first_with_reasons() {
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog,name=olm-rs",
        "--subscribe",
        "ptemplate",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("install kernel-module-management.v2.2.0"),
        "{text}"
    );
    assert!(
        lines[0].contains("dependency of ptemplate.v0.3.0")
            && lines[0].contains("kernel-module-management-stable-olm-rs-olm"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("install ptemplate.v0.3.0")
            && lines[1].contains("subscription ptemplate"),
        "{text}"
    );
}

#[test]
fn json_plan_for_an_upgrade() {
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog,name=olm-rs,namespace=olm,priority=5",
        "--subscribe",
        "reverse-words,channel=stable,source=olm-rs",
        "--installed",
        "reverse-words.v0.2.0,package=reverse-words,version=0.2.0,source=olm-rs",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let steps = plan.as_array().unwrap();
    assert_eq!(steps.len(), 1);
    let step = &steps[0];
    for (key, want) in [
        ("package", "reverse-words"),
        ("bundle", "reverse-words.v0.4.0"),
        ("version", "0.4.0"),
        ("catalog", "olm-rs"),
        ("channel", "stable"),
        ("replaces", "reverse-words.v0.2.0"),
    ] {
        assert_eq!(step[key], want, "{key} in {step}");
    }
    assert_eq!(step["dependencyOf"], serde_json::json!([]));
}

#[test]
fn at_latest_known_says_so() {
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog",
        "--subscribe",
        "at",
        "--installed",
        "at.v0.3.0,package=at,version=0.3.0",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "keep at.v0.3.0: subscription at is at the latest known version"
    );
}

#[test]
fn failure_exits_1_with_the_explanation() {
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog,name=olm-rs",
        "--subscribe",
        "reverse-words,channel=nightly",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("\"nightly\"")
            && err.contains("reverse-words")
            && err.contains("channels: alpha, stable"),
        "{err}"
    );

    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog,name=olm-rs",
        "--subscribe",
        "reverse-words,starting=reverse-words.v0.2.1,channel=alpha",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let body: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("reverse-words.v0.2.1") && error.contains("skipped"),
        "{error}"
    );
}

#[test]
fn testdata_failure_names_the_missing_package() {
    let dir = repo().join("../shared/testdata/community-operators/operators/l5-operator");
    let out = olm(&[
        "resolve",
        "--catalog",
        &format!("{},name=community", dir.display()),
        "--subscribe",
        "l5-operator",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let body: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("crunchy-postgres-operator") && error.contains("subscription l5-operator"),
        "{error}"
    );
}

#[test]
fn bad_flags_are_refused() {
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog",
        "--subscribe",
        "at,chanel=stable",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unknown key \"chanel\""),
        "{}",
        stderr(&out)
    );
    let out = olm(&[
        "resolve",
        "--catalog",
        "catalog",
        "--subscribe",
        "at",
        "--installed",
        "at.v0.1.0,package=at",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("needs version=V"), "{}", stderr(&out));
}
