//! Tests of the registry index: the RPC answers over a small catalog, and refused catalogs.

use std::path::Path;

use super::*;
use crate::catalog::reading::load::load_str;

const CATALOG: &str = r#"
{"schema":"olm.package","name":"b","defaultChannel":"stable"}
{"schema":"olm.channel","package":"b","name":"stable","entries":[
  {"name":"b.v1"},
  {"name":"b.v2","replaces":"b.v1","skipRange":"<2.0.0"},
  {"name":"b.v3","replaces":"b.v2","skips":["b.v1","x.v0"]}]}
{"schema":"olm.channel","package":"b","name":"alpha","entries":[{"name":"b.v1"}]}
{"schema":"olm.bundle","package":"b","name":"b.v1","image":"quay.io/b:v1","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"1.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}}]}
{"schema":"olm.bundle","package":"b","name":"b.v2","image":"quay.io/b:v2","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"2.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}}]}
{"schema":"olm.bundle","package":"b","name":"b.v3","image":"quay.io/b:v3","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"3.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}},
  {"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="}}]}
{"schema":"olm.deprecations","package":"b","entries":[
  {"reference":{"schema":"olm.channel","name":"alpha"},"message":"use stable"},
  {"reference":{"schema":"olm.bundle","name":"b.v1"},"message":"too old"}]}
{"schema":"olm.package","name":"a","defaultChannel":"stable"}
{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1"}]}
{"schema":"olm.bundle","package":"a","name":"a.v1","properties":[
  {"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}},
  {"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="}}]}
{"schema":"my.notes","package":"a","text":"hello"}
"#;

fn index() -> Index {
    Index::from_config(load_str(Path::new("c.json"), CATALOG).unwrap()).unwrap()
}

#[test]
fn packages_channels_heads_and_deprecations() {
    let ix = index();
    assert_eq!(ix.list_packages(), ["a", "b"]);
    let p = ix.get_package("b").unwrap();
    let chans: Vec<(&str, &str)> = p
        .channels
        .iter()
        .map(|c| (c.name.as_str(), c.csv_name.as_str()))
        .collect();
    assert_eq!(chans, [("alpha", "b.v1"), ("stable", "b.v3")]);
    assert_eq!(
        p.channels[0].deprecation.as_ref().unwrap().message,
        "use stable"
    );
    assert_eq!(p.default_channel_name, "stable");
    assert_eq!(
        ix.get_package("zz").unwrap_err().0,
        "package \"zz\" not found"
    );
}

#[test]
fn single_bundle_rpcs_blank_replaces_and_skips() {
    let ix = index();
    let b = ix.get_bundle("b", "stable", "b.v3").unwrap();
    assert_eq!((b.replaces.as_str(), b.skips.len()), ("", 0));
    assert_eq!(b.csv_json, r#"{"kind":"ClusterServiceVersion"}"#);
    assert_eq!(b.object.len(), 1);
    let b2 = ix.get_bundle("b", "stable", "b.v2").unwrap();
    assert_eq!(b2.skip_range, "<2.0.0");
    assert_eq!(
        ix.get_bundle("b", "alpha", "b.v1")
            .unwrap()
            .deprecation
            .unwrap()
            .message,
        "too old"
    );
    assert_eq!(
        ix.get_bundle_for_channel("b", "stable").unwrap().csv_name,
        "b.v3"
    );
    assert_eq!(
        ix.get_bundle_that_replaces("b.v1", "b", "stable")
            .unwrap()
            .csv_name,
        "b.v2"
    );
    assert_eq!(
        ix.get_bundle_that_replaces("b.v1", "x", "stable")
            .unwrap_err()
            .0,
        "package x not found"
    );
}

#[test]
fn list_bundles_drops_manifests_of_bundles_with_an_image() {
    let ix = index();
    let all: Vec<api::Bundle> = (0..ix.entry_count())
        .map(|i| ix.list_bundle(i).unwrap())
        .collect();
    assert_eq!(all.len(), 5);
    let b3 = all.iter().find(|b| b.csv_name == "b.v3").unwrap();
    assert!(b3.csv_json.is_empty() && b3.object.is_empty());
    assert_eq!(b3.skips, ["b.v1", "x.v0"]);
    let a1 = all.iter().find(|b| b.csv_name == "a.v1").unwrap();
    assert!(!a1.csv_json.is_empty());
}

#[test]
fn replace_and_provide_queries() {
    let ix = index();
    let r = ix.get_channel_entries_that_replace("b.v1").unwrap();
    let names: Vec<(&str, &str)> = r
        .iter()
        .map(|e| (e.bundle_name.as_str(), e.replaces.as_str()))
        .collect();
    assert_eq!(names, [("b.v2", "b.v1"), ("b.v3", "b.v2")]);
    assert!(ix.get_channel_entries_that_replace("nope").is_err());

    let all = ix
        .get_channel_entries_that_provide("g.io", "v1", "K")
        .unwrap();
    // a.v1, b.v1 twice (two channels), b.v2, b.v3 three times (replaces + two skips).
    assert_eq!(all.len(), 7);
    let latest = ix
        .get_latest_channel_entries_that_provide("g.io", "v1", "K")
        .unwrap();
    // Heads only; the skip of x.v0 (not in the channel) is left out.
    let l: Vec<(&str, &str, &str)> = latest
        .iter()
        .map(|e| {
            (
                e.channel_name.as_str(),
                e.bundle_name.as_str(),
                e.replaces.as_str(),
            )
        })
        .collect();
    assert_eq!(
        l,
        [
            ("stable", "a.v1", ""),
            ("alpha", "b.v1", ""),
            ("stable", "b.v3", "b.v2"),
            ("stable", "b.v3", "b.v1")
        ]
    );
    assert_eq!(
        ix.get_default_bundle_that_provides("g.io", "v1", "K")
            .unwrap()
            .csv_name,
        "a.v1"
    );
    assert!(
        ix.get_default_bundle_that_provides("g.io", "v1", "Nope")
            .unwrap_err()
            .0
            .starts_with("no channel entries found")
    );
}

#[test]
fn custom_schemas_by_package() {
    let ix = index();
    assert_eq!(
        ix.custom_schema_blobs("my.notes", "a").unwrap()[0]["text"],
        "hello"
    );
    assert!(ix.custom_schema_blobs("my.notes", "").unwrap().is_empty());
}

#[test]
fn broken_catalogs_are_refused() {
    let two_heads = r#"{"schema":"olm.package","name":"p"}
{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"p.v1"},{"name":"p.v2"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v2","properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}"#;
    let e = Index::from_config(load_str(Path::new("c.json"), two_heads).unwrap())
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("multiple channel heads found in graph: p.v1, p.v2"),
        "{e}"
    );

    // Each refusal as its message reads (`olm catalog serve` prints it after the path).
    let package = r#"{"schema":"olm.package","name":"p","defaultChannel":"c"}"#;
    let channel =
        r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"p.v1"}]}"#;
    let bundle = |name: &str, extra: &str| {
        format!(
            r#"{{"schema":"olm.bundle","package":"p","name":"{name}","properties":[{{"type":"olm.package","value":{{"packageName":"p","version":"1.0.0"}}}}{extra}]}}"#
        )
    };
    let v1 = bundle("p.v1", "");
    let meta = r#",{"type":"olm.csv.metadata","value":{}}"#;
    for (lines, expected) in [
        (
            vec![
                package,
                channel,
                r#"{"schema":"olm.bundle","package":"p","name":"p.v1"}"#,
            ],
            r#"package "p", bundle "p.v1": expected exactly 1 property of type "olm.package", found 0"#,
        ),
        (
            vec![package, channel, &bundle("p.v1", &meta.repeat(2))],
            r#"package "p", bundle "p.v1": expected at most 1 property of type "olm.csv.metadata", found 2"#,
        ),
        (
            vec![package, package, channel, &v1],
            r#"duplicate package "p""#,
        ),
        (
            vec![
                package,
                channel,
                &v1,
                r#"{"schema":"olm.deprecations","package":"q"}"#,
            ],
            r#"cannot apply deprecations to an unknown package "q""#,
        ),
        (
            vec![
                package,
                r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"p.v1"},{"name":"p.v1"}]}"#,
                &v1,
            ],
            r#"invalid package "p", channel "c": duplicate entry "p.v1""#,
        ),
        (
            vec![
                package,
                r#"{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"p.v1"},{"name":"p.v3","replaces":"p.v1"}]}"#,
                &v1,
            ],
            r#"no olm.bundle blobs found in package "p" for olm.channel entries [p.v3]"#,
        ),
        (
            vec![package, channel, &v1, &bundle("p.v2", "")],
            r#"package "p", bundle "p.v2" not found in any channel entries"#,
        ),
    ] {
        let text = lines.join("\n");
        let e = Index::from_config(load_str(Path::new("c.json"), &text).unwrap())
            .err()
            .unwrap();
        assert_eq!(e.to_string(), expected);
    }
}

#[test]
fn a_served_catalog_over_the_bundle_limit_is_refused_naming_the_file() {
    use crate::catalog::text::limits::MAX_BUNDLES;
    use std::fmt::Write as _;
    let dir = std::env::temp_dir().join(format!("olm-index-limit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bundles = |from: usize, n: usize| {
        let mut text = String::new();
        for i in from..from + n {
            writeln!(
                text,
                r#"{{"schema":"olm.bundle","name":"b{i}","package":"p","properties":[{{"type":"olm.package","value":{{"packageName":"p","version":"0.0.{i}"}}}}]}}"#
            )
            .unwrap();
        }
        text
    };
    // The limit counts across files, as `load_path` counts it.
    std::fs::write(dir.join("a.json"), bundles(0, MAX_BUNDLES)).unwrap();
    std::fs::write(dir.join("b.json"), bundles(MAX_BUNDLES, 1)).unwrap();
    let Err(e) = Index::load(&dir) else {
        panic!("a catalog over the limit was served");
    };
    let e = e.to_string();
    assert!(
        e.contains("b.json") && e.contains("more than the limit of 100000 bundles"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
