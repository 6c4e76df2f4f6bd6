use std::path::{Path, PathBuf};

use super::*;

fn serde_refuses_as_too_deep(text: &str) -> bool {
    match serde_yaml::from_str::<serde_json::Value>(text) {
        Ok(_) => false,
        Err(e) => e.to_string().contains("recursion limit exceeded"),
    }
}

#[test]
fn flow_nesting_at_the_limit_passes_and_one_level_more_does_not() {
    for (open, close) in [("[", "]"), ("{a: ", "}")] {
        let nested =
            |depth: usize| format!("key: {}1{}\n", open.repeat(depth), close.repeat(depth));
        assert_eq!(check(nested(MAX_NESTING).as_bytes()), Ok(()));
        let err = check(nested(MAX_NESTING + 1).as_bytes()).unwrap_err();
        assert_eq!(err.line, 1);
        assert_eq!(err.column, 6 + MAX_NESTING * open.len());
        assert_eq!(
            err.located(),
            format!(
                "nested more than the limit of 128 levels at line 1 column {}",
                err.column
            )
        );
    }
}

#[test]
fn the_verdict_agrees_with_the_parser_around_the_limit() {
    // serde_yaml counts the document's own mapping as a level too.
    for depth in [
        MAX_NESTING - 2,
        MAX_NESTING - 1,
        MAX_NESTING,
        MAX_NESTING + 1,
    ] {
        let text = format!("- {}x{}\n", "[".repeat(depth), "]".repeat(depth));
        if check(text.as_bytes()).is_err() {
            assert!(
                serde_refuses_as_too_deep(&text),
                "depth {depth}: we refuse what parses"
            );
        }
    }
}

#[test]
fn unclosed_brackets_are_refused_without_parsing() {
    // 1 MiB of these took libyaml minutes; the scan is linear.
    for unit in ["[", "{", "[a: ", "{a: ", "- [", "key: [a, "] {
        let text = unit.repeat((1 << 20) / unit.len());
        assert!(check(text.as_bytes()).is_err(), "{unit:?} × many passed");
    }
}

#[test]
fn brackets_that_open_no_collection_are_not_counted() {
    let deep = "[".repeat(200);
    let cases = [
        format!("key: \"{deep}\"\n"),
        format!("key: '{deep}'\n"),
        format!("key: 'it''s {deep}'\n"),
        format!("key: \"a \\\" {deep}\"\n"),
        format!("key: value # {deep}\n"),
        format!("# {deep}\nkey: 1\n"),
        format!("key: plain{deep}\n"),
        format!("key: see {deep} there\n"),
        format!("key: |\n  {deep}\n  more\n\n  {deep}\nnext: 1\n"),
        format!("- name: x\n  description: >-\n    {deep}\n- name: y\n"),
        format!("key: [\"{deep}\", '{deep}']\n"),
        format!("key: \"multi\n  line {deep}\"\n"),
    ];
    for text in cases {
        assert_eq!(check(text.as_bytes()), Ok(()), "refused:\n{text}");
        assert!(
            !serde_refuses_as_too_deep(&text),
            "the parser refuses:\n{text}"
        );
    }
}

#[test]
fn a_block_scalar_ends_where_its_indentation_does() {
    let text = format!("a: |\n  [[[\nb: {}\n", "[".repeat(MAX_NESTING + 1));
    let err = check(text.as_bytes()).unwrap_err();
    assert_eq!((err.line, err.column), (3, 4 + MAX_NESTING));
}

#[test]
fn anchors_tags_and_sequence_entries_precede_flow_collections() {
    for prefix in ["&anchor ", "!!seq ", "- ", "- - ", "? "] {
        let text = format!("{prefix}{}\n", "[".repeat(MAX_NESTING + 1));
        assert!(
            check(text.as_bytes()).is_err(),
            "{prefix:?} hid the brackets"
        );
    }
}

/// Every YAML or JSON file under `dir`.
pub(in crate::catalog) fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
}

#[test]
fn no_real_catalog_or_bundle_file_is_refused() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut files = Vec::new();
    for dir in ["catalog", "bundles", "tests/catalogs", "../shared/testdata"] {
        yaml_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 500, "only {} files found", files.len());
    for path in files {
        let text = std::fs::read(&path).unwrap();
        assert_eq!(check(&text), Ok(()), "{} refused", path.display());
    }
}
