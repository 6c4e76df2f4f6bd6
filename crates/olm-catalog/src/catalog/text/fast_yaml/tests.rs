use std::path::Path;

use super::*;
use crate::catalog::reading::stream::{libyaml_document, yaml_documents};
use crate::catalog::text::yaml_nesting::tests::yaml_files;

/// The fast reading of `doc`, checked against libyaml's whenever it gives one.
fn fast(doc: &str) -> Option<Value> {
    let value = parse(doc)?;
    let full = libyaml_document(doc).unwrap_or_else(|e| {
        panic!("fast path read text libyaml refuses ({e}):\n{doc}\nas {value}")
    });
    assert_eq!(value, full, "fast path differs from libyaml on:\n{doc}");
    Some(value)
}

#[test]
fn common_manifest_text_takes_the_fast_path_and_reads_as_libyaml_does() {
    let docs = [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {app: x, \"k\": 'v'}\n",
        "---\na: 1\nb: -2\nc: 0.1.0\nd: v1.2\ne: true\nf: ~\ng:\nh: 010\ni: 18446744073709551615\n",
        "a:\n- x\n- y: 1\n  z: [1, \"two\", 'th''ree', {k: v}]\n-   w: deep\n    v:\n      - q\nb: []\nc: {}\n",
        "spec:\n  description: this is a long\n    plain scalar that folds\n\n    with a blank line\n  next: x # comment\n",
        "a: |\n  line 1\n    indented\n\n  line 3\nb: |-\n  stripped\n\nc: >\n  folded\n  text\n\n  para\nd: >-\n  x\ne: |\nf: end\n",
        "a: \"esc \\\" \\\\ \\n \\t \\u00e9 \\x41 \\/\"\nb: 'it''s'\n\"quoted key\": 1\n'single': 2\n",
        "# leading comment\n\na: x#y\nb: http://example.com:8080/path\nc: -not-an-item\n",
        "a:\n  - b:\n      c: 1\n    d: 2\n  -\n    e: 3\n",
        "list:\n  - 'a'   # c\n  - \"b\"\n  -   [x]\nempty_item:\n  -\n  - ok\n",
        "k: café ünïcödé 日本語\nurl: \"https://x.io/a?b=c&d=e\"\nq: what?\ncolon: a:b\n",
        "a: 1\na: 2\n",
        "top: x\n  bad: indentation\n",
        "a: b: c\n",
        "a: &anchor 1\nb: *anchor\n",
        "a: !!str 1\n",
        "<<: {a: 1}\n",
        "a: 1.5\nb: 0x1F\nc: +1\nd: .inf\ne: 1e3\n",
        "a: [1, 2,\n  3]\n",
        "a: \"multi\n  line\"\n",
        "a:\tb\n",
        "\ta: b\n",
        "a: |+\n  keep\n\n",
        "a: |2\n   x\n",
        "- top level sequence\n",
        "just a scalar\n",
        "a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Yes\n",
        "a: -\nb: -1\nc: '-'\nd: \"\"\ne: ''\n",
        "a: x\r\nb: y\r\n",
        "a:\n  b\n  c: d\n",
        "a: |\n  x\n   \n  y\n",
        "a: >\n  x\n    more\n  y\n",
        "a:\n  # comment inside\n  b: 1\n  # another\nc: 2\n",
        "a: 'x' y\n",
        "a: {b: }\n",
        "a: [a: b]\n",
        "? complex\n: key\n",
        // Quoted text may go on at any indentation, as libyaml reads it.
        "a:\n  description: 'x\n y'\n  type: string\n",
        "a:\n  description: \"x\ny\"\n  type: string\n",
        "a:\n  - 'x\n  y'\n",
        "a:\n  d: 'x\n  \ty'\n  t: s\n",
        "a: 'x\n---\n'\n",
        "a: 'x\n-- y'\n",
        "a: 'x\n\ty'\n",
        "a: \"x\n...\"\n",
        "a:\n  - 'x\n  - y'\n  - \"p\n# q\"\n",
        // Indentation indicators count from the enclosing collection's indentation.
        "a:\n- |1\n   x\n",
        "a:\n  - |2+\n      x\n\n  - y\n",
        "a:\n  - k: >2\n        x\n        y\n    j: 1\n",
        "a:\n  - k: |2\n        x\n      y\n    j: 1\n",
        "a: >+2\n   x\n  y\n\nb: 1\n",
        "a: |3\n  x\n",
        "a: |0\n  x\n",
        "a: |2\n\n",
        // Folded text keeps the line breaks next to more indented lines.
        "a: >-\n  [\n    {\n      \"k\": \"v\"\n    }\n  ]\nb: 1\n",
        "a: >\n  x\n  \ty\n  z\n",
        "a: >+\n    x\n  y\n\n\nb: 1\n",
        "a: |\n  x\n\n    y\n  z\n",
        "a: 1\n...\n",
        "a:\n- b\nc: d\n",
        "a:\n  - b\n  c: d\n",
        "a: b\n  # comment\n  c\n",
        "a: \"\\ud800\"\n",
        "a: \"\\q\"\n",
        "1: one\n",
        "null: x\n",
        "a: [-1, -x, -]\n",
        "a: {x: [1, {y: z}]}\n",
        "a: |\n\n  first line after a blank\n",
        "a: >\n\n  first line after a blank\n",
        "a:   value with trailing spaces   \nb: x\n",
        "a:\n  - - nested\n",
        "\t\n",
        "a: |\n  x\n\t\n  y\n",
        "a: 'x\n\t\n  y'\n",
        "a: \"x \\\n  y\"\nb: 'p\n\n  q'\n",
        "a: x\n  - y\n  'z'\n",
        "desc: >-\n  Keep: this, [brackets] and {braces} # not a comment\n",
    ];
    // Each may fall back; whatever the fast path reads must read as libyaml reads it.
    for doc in docs {
        fast(doc);
    }
    // The first ten are what manifests are made of: they must not fall back.
    for doc in &docs[..10] {
        assert!(parse(doc).is_some(), "fell back on:\n{doc}");
    }
}

/// Every YAML document under `root` (manifests, metadata, catalogs): each the fast path
/// reads must read as libyaml reads it. Returns (documents, read fast).
fn compare_tree(root: &Path) -> (usize, usize) {
    let mut files = Vec::new();
    yaml_files(root, &mut files);
    files.retain(|p| p.extension().is_some_and(|x| x != "json"));
    let (mut docs, mut fast_docs) = (0, 0);
    for file in files {
        let Ok(mut text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        for (_, doc) in yaml_documents(text.as_bytes(), 1).flatten() {
            let doc = std::str::from_utf8(doc).unwrap();
            let doc = doc.strip_prefix('\u{feff}').unwrap_or(doc);
            docs += 1;
            let fast = parse(doc);
            if fast.is_none()
                && std::env::var_os("OLM_YAML_SHOW_FALLBACKS").is_some()
                && libyaml_document(doc).is_ok()
            {
                println!("fallback: {}", file.display());
            }
            if let Some(value) = fast {
                fast_docs += 1;
                match libyaml_document(doc) {
                    Ok(full) => assert!(
                        value == full,
                        "{}: the fast path reads a document differently",
                        file.display()
                    ),
                    Err(e) => panic!(
                        "{}: fast path read text libyaml refuses: {e}",
                        file.display()
                    ),
                }
            }
        }
    }
    (docs, fast_docs)
}

#[test]
fn the_testdata_reads_the_same_both_ways() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("../shared/testdata");
    let (docs, fast_docs) = compare_tree(&root);
    assert!(docs > 500, "{docs} documents under {}", root.display());
    // Nearly all real manifests take the fast path.
    assert!(
        fast_docs * 10 >= docs * 9,
        "{fast_docs} of {docs} read fast"
    );
}

/// The same over any tree: `OLM_YAML_CORPUS=/path/to/community-operators-prod cargo test
/// --release --lib fast_yaml -- --ignored --nocapture`.
#[test]
#[ignore = "needs OLM_YAML_CORPUS"]
fn a_corpus_reads_the_same_both_ways() {
    let root = std::env::var("OLM_YAML_CORPUS").expect("OLM_YAML_CORPUS");
    let (docs, fast_docs) = compare_tree(Path::new(&root));
    println!("{fast_docs} of {docs} documents read on the fast path, all as libyaml reads them");
}

#[test]
fn what_real_crds_and_csvs_hold_reads_fast() {
    // Quoted text continued at the key's indentation, indentation indicators, folded
    // examples with more indented lines: each seen in hundreds of public manifests (the
    // edge cases of each, and where they fall back, are in the test above).
    for doc in [
        "a:\n  d: 'x defines\n  of an object. More info: https://x#resources'\n  t: s\n",
        "a:\n  b: |2\n        indented\n      less\n  c: x\n",
        "a:\n  b: |2-\n\n     x\n\n  c: x\n",
        "a: |-3\n    x\n   y\n",
        "a:\n  alm-examples: >-\n    [\n      {\n        \"k\": \"v\"\n      }\n    ]\nb: 1\n",
        "a: >\n  x\n   y\n  z\n\n  w\n\n    v\n  u\n",
        "a: >\n\n\n  x\n  y\n",
    ] {
        assert!(fast(doc).is_some(), "fell back on:\n{doc}");
    }
}
