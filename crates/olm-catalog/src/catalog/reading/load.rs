//! Loading a file-based catalog from a directory tree of JSON and YAML files, as upstream's
//! loader does: many blobs per file, `schema`/`package`/`name` keys matched without regard
//! to case, blobs of unknown schemas kept, `.indexignore` honoured.

use std::path::Path;

use serde_json::Value;

use super::files::catalog_files;
use super::stream::{self, Document, Stop};
use crate::catalog::model::fbc::*;
use crate::catalog::text::go_json;
use crate::catalog::text::limits::{MAX_BLOBS, MAX_BUNDLES, MAX_PROPERTIES};

pub use super::error::LoadError;

/// How much of each blob to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Replace the (large, base64) `olm.bundle.object` data by `null`: validation and
    /// resolution only need to know the objects are there, and this keeps memory small.
    pub drop_bundle_objects: bool,
}

/// Loads every `.json`, `.yaml` and `.yml` file below `root` (or `root` itself if it is a
/// file), in path order.
pub fn load_path(root: &Path) -> Result<DeclarativeConfig, LoadError> {
    load_path_with(root, LoadOptions::default())
}

pub fn load_path_with(root: &Path, options: LoadOptions) -> Result<DeclarativeConfig, LoadError> {
    let io = |source| LoadError::Io {
        path: root.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(root).map_err(io)?;
    if meta.is_file() {
        return load_file_with(root, options);
    }
    let mut config = DeclarativeConfig::default();
    for file in catalog_files(root)? {
        config.merge(load_file_with(&file, options)?);
        check_counts(&config, &file)?;
    }
    Ok(config)
}

pub fn load_file(path: &Path) -> Result<DeclarativeConfig, LoadError> {
    load_file_with(path, LoadOptions::default())
}

/// Reads the file as a stream (see [`stream`]): a big JSON catalog is decoded one blob at
/// a time, never held twice (text and values) in memory.
pub fn load_file_with(path: &Path, options: LoadOptions) -> Result<DeclarativeConfig, LoadError> {
    let file = std::fs::File::open(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load_reader(
        path,
        std::io::BufReader::with_capacity(1 << 20, file),
        options,
    )
}

/// Reads one catalog file blob by blob, handing each to `each` as a catalog of that one blob:
/// only one document is decoded at a time, so a caller that keeps only what it needs (an
/// index) loads a catalog of any size in little memory.
pub fn for_each_blob<E: From<LoadError>>(
    path: &Path,
    options: LoadOptions,
    mut each: impl FnMut(DeclarativeConfig) -> Result<(), E>,
) -> Result<(), E> {
    let file = std::fs::File::open(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let reader = std::io::BufReader::with_capacity(1 << 20, file);
    stream::for_each_document(reader, |document| {
        let mut one = DeclarativeConfig::default();
        add_blob(&mut one, path, document, options)?;
        each(one)
    })
    .map_err(|stop| match stop {
        Stop::Stream(e) => e.in_file(path).into(),
        Stop::Callback(e) => e,
    })
}

/// Parses one file's text, exactly as [`load_file`] reads the same bytes from disk.
pub fn load_str(path: &Path, text: &str) -> Result<DeclarativeConfig, LoadError> {
    load_str_with(path, text, LoadOptions::default())
}

pub fn load_str_with(
    path: &Path,
    text: &str,
    options: LoadOptions,
) -> Result<DeclarativeConfig, LoadError> {
    load_reader(path, text.as_bytes(), options)
}

/// The one way a catalog file is read, from disk or from memory.
fn load_reader(
    path: &Path,
    reader: impl std::io::BufRead,
    options: LoadOptions,
) -> Result<DeclarativeConfig, LoadError> {
    let mut config = DeclarativeConfig::default();
    stream::for_each_document(reader, |document| {
        add_blob(&mut config, path, document, options)?;
        check_counts(&config, path)
    })
    .map_err(|stop| match stop {
        Stop::Stream(e) => e.in_file(path),
        Stop::Callback(e) => e,
    })?;
    Ok(config)
}

/// The documents of a JSON stream or a multi-document YAML file, read as catalog files are
/// (bundle manifests use this); documents with no content dropped.
pub fn parse_documents(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    let mut docs = Vec::new();
    stream::for_each_document(text.as_bytes(), |document| {
        if !document.value.is_null() {
            docs.push(document.value);
        }
        Ok::<_, LoadError>(())
    })
    .map_err(|stop| match stop {
        Stop::Stream(e) => e.in_file(path),
        Stop::Callback(e) => e,
    })?;
    Ok(docs)
}

/// Renames keys that match `canonical` names without regard to case to their canonical form,
/// so that serde (which is case-sensitive) reads what Go's decoder would.
fn canonicalize(value: &mut Value, canonical: &[&str]) {
    if let Value::Object(map) = value {
        let keys: Vec<String> = map
            .keys()
            .filter(|k| !canonical.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in keys {
            if let Some(name) = go_json::field_name(canonical, &key)
                && !map.contains_key(name)
                && let Some(v) = map.remove(&key)
            {
                map.insert(name.to_string(), v);
            }
        }
    }
}

/// Blobs in a catalog (so far): at most [`MAX_BUNDLES`] bundles and [`MAX_BLOBS`] in all.
/// `path` is the file that brought the catalog past a limit.
pub fn check_counts(config: &DeclarativeConfig, path: &Path) -> Result<(), LoadError> {
    let too_many = |what, limit| LoadError::TooMany {
        path: path.to_path_buf(),
        what,
        limit,
    };
    if config.bundles.len() > MAX_BUNDLES {
        return Err(too_many("bundles", MAX_BUNDLES));
    }
    let blobs = config.packages.len()
        + config.channels.len()
        + config.bundles.len()
        + config.deprecations.len()
        + config.others.len();
    if blobs > MAX_BLOBS {
        return Err(too_many("blobs", MAX_BLOBS));
    }
    Ok(())
}

fn add_blob(
    config: &mut DeclarativeConfig,
    path: &Path,
    Document {
        index: document,
        line,
        value: mut blob,
    }: Document,
    options: LoadOptions,
) -> Result<(), LoadError> {
    let missing = || LoadError::MissingSchema {
        path: path.to_path_buf(),
        line,
        document,
    };
    let map = blob.as_object().ok_or_else(missing)?;
    let schema = go_json::get(map, "schema")
        .and_then(Value::as_str)
        .ok_or_else(missing)?
        .to_string();
    let name = go_json::get(map, "name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let package = go_json::get(map, "package")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let invalid = |message: String| LoadError::InvalidBlob {
        path: path.to_path_buf(),
        line,
        document,
        schema: schema.clone(),
        name: if name.is_empty() {
            package.clone()
        } else {
            name.clone()
        },
        message,
    };
    if let Some(Value::Array(props)) = go_json::get(map, "properties")
        && props.len() > MAX_PROPERTIES
    {
        return Err(invalid(format!(
            "{} properties, more than the limit of {MAX_PROPERTIES}",
            props.len()
        )));
    }
    canonicalize_blob(&schema, &mut blob, options.drop_bundle_objects);
    match schema.as_str() {
        SCHEMA_PACKAGE => config
            .packages
            .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?),
        SCHEMA_CHANNEL => config
            .channels
            .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?),
        SCHEMA_BUNDLE => config
            .bundles
            .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?),
        SCHEMA_DEPRECATIONS => config
            .deprecations
            .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?),
        _ => config.others.push(Meta {
            schema,
            package,
            name,
            blob,
        }),
    }
    Ok(())
}

/// Spells a blob's keys as our types expect them, per schema (Go's JSON decoding matches
/// keys case-insensitively), and drops bundle objects' data when asked.
fn canonicalize_blob(schema: &str, blob: &mut Value, drop_bundle_objects: bool) {
    let fix_properties = |blob: &mut Value| {
        if let Some(Value::Array(props)) = blob.get_mut("properties") {
            props
                .iter_mut()
                .for_each(|p| canonicalize(p, &["type", "value"]));
        }
    };
    match schema {
        SCHEMA_PACKAGE => {
            canonicalize(
                blob,
                &[
                    "schema",
                    "name",
                    "defaultChannel",
                    "icon",
                    "description",
                    "properties",
                ],
            );
            fix_properties(blob);
        }
        SCHEMA_CHANNEL => {
            canonicalize(
                blob,
                &["schema", "name", "package", "entries", "properties"],
            );
            if let Some(Value::Array(entries)) = blob.get_mut("entries") {
                entries
                    .iter_mut()
                    .for_each(|e| canonicalize(e, &["name", "replaces", "skips", "skipRange"]));
            }
            fix_properties(blob);
        }
        SCHEMA_BUNDLE => {
            canonicalize(
                blob,
                &[
                    "schema",
                    "name",
                    "package",
                    "image",
                    "properties",
                    "relatedImages",
                ],
            );
            fix_properties(blob);
            if drop_bundle_objects && let Some(Value::Array(props)) = blob.get_mut("properties") {
                for p in props.iter_mut().filter(|p| p["type"] == PROP_BUNDLE_OBJECT) {
                    p["value"] = Value::Null;
                }
            }
        }
        SCHEMA_DEPRECATIONS => canonicalize(blob, &["schema", "package", "entries"]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_stream_and_yaml_documents_with_case_insensitive_keys() {
        let json = r#"{"Schema":"olm.package","Name":"p","defaultchannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[{"name":"p.v1","SkipRange":"<1.0.0"}]}"#;
        let config = load_str(Path::new("c.json"), json).unwrap();
        assert_eq!(config.packages[0].name, "p");
        assert_eq!(config.packages[0].default_channel, "stable");
        assert_eq!(config.channels[0].entries[0].skip_range, "<1.0.0");

        let yaml = "---\nschema: olm.bundle\nname: p.v1\npackage: p\nimage: quay.io/p:v1\nproperties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n---\nschema: my.custom\nname: x\nfoo: 1\n";
        let config = load_str(Path::new("c.yaml"), yaml).unwrap();
        assert_eq!(config.bundles[0].version(), Some("1.0.0"));
        assert_eq!(config.others[0].schema, "my.custom");
    }

    #[test]
    fn errors_name_the_file_and_document() {
        let err = load_str(
            Path::new("cat/p.yaml"),
            "schema: olm.package\nname: p\n---\nname: nothing\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cat/p.yaml:4: document 2: a catalog blob must be an object with a \"schema\" key"
        );
        let err = load_str(Path::new("cat/p.json"), "{\"schema\": \"olm.package\", ").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cat/p.json:1:26: document 1: malformed JSON"),
            "{err}"
        );
        let err = load_str(
            Path::new("cat/p.yaml"),
            "schema: olm.package\nname: [unclosed\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cat/p.yaml:3:1: document 1: malformed YAML"),
            "{err}"
        );
        let err = load_str(
            Path::new("p.yaml"),
            "schema: olm.channel\nname: c\npackage: p\nentries: 3\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.yaml:1: document 1: invalid olm.channel \"c\""),
            "{err}"
        );
    }
}

/// Malformed and edge-case streams, read from a file and from a string: both ways must give
/// the same result, and it must be opm's verdict (see tests/upstream_opm.rs, which checks
/// these same inputs against opm itself).
#[cfg(test)]
mod stream_tests {
    use super::*;

    const PACKAGE: &str = r#"{"schema":"olm.package","name":"p"}"#;
    const CHANNEL: &str = r#"{"schema":"olm.channel","package":"p","name":"c","entries":[]}"#;

    /// Loads `bytes` as the file `name` from disk and, when they are UTF-8, from memory;
    /// checks that both agree and returns the outcome (the error as text).
    fn load_both(name: &str, bytes: &[u8]) -> Result<DeclarativeConfig, String> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "olm-load-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        let from_file = load_file(&file).map_err(|e| e.to_string());
        std::fs::remove_dir_all(&dir).unwrap();
        let from_file = from_file.map_err(|e| e.replace(&dir.display().to_string(), "DIR"));
        if let Ok(text) = std::str::from_utf8(bytes) {
            let from_str = load_str(&Path::new("DIR").join(name), text).map_err(|e| e.to_string());
            assert_eq!(from_file, from_str, "file and string loading disagree");
        }
        from_file
    }

    fn refused(name: &str, bytes: &[u8]) -> String {
        match load_both(name, bytes) {
            Ok(config) => panic!(
                "{:?} was accepted: {config:?}",
                String::from_utf8_lossy(bytes)
            ),
            Err(e) => e,
        }
    }

    fn accepted(name: &str, bytes: &[u8]) -> DeclarativeConfig {
        load_both(name, bytes)
            .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(bytes)))
    }

    #[test]
    fn stray_closing_brackets_between_documents() {
        let text = format!("{PACKAGE}}} ]{CHANNEL}");
        assert_eq!(
            refused("c.json", text.as_bytes()),
            "DIR/c.json:1:36: document 2: malformed JSON: invalid character '}' looking for beginning of value"
        );
        let text = format!("{PACKAGE}\n{CHANNEL}\n]\n");
        assert_eq!(
            refused("c.json", text.as_bytes()),
            "DIR/c.json:3:1: document 3: malformed JSON: invalid character ']' looking for beginning of value"
        );
        let err = refused("c.json", br#"{"schema":"olm.package","name":"p"]"#);
        assert!(err.starts_with("DIR/c.json:1:"), "{err}");
    }

    #[test]
    fn trailing_garbage() {
        let text = format!("{PACKAGE}\n{CHANNEL}\ngarbage\n");
        assert_eq!(
            refused("c.json", text.as_bytes()),
            "DIR/c.json:3:1: document 3: malformed JSON: invalid character 'g' looking for beginning of value"
        );
        // After one document opm tries the rest as YAML: a bare word is no catalog blob, so
        // the JSON error stands.
        let text = format!("{PACKAGE} garbage");
        assert!(
            refused("c.json", text.as_bytes())
                .starts_with("DIR/c.json:1:37: document 2: malformed JSON"),
        );
    }

    #[test]
    fn truncated_documents() {
        let text = format!("{PACKAGE}\n{}", &CHANNEL[..30]);
        let err = refused("c.json", text.as_bytes());
        assert!(err.starts_with("DIR/c.json:2:"), "{err}");
        assert!(
            err.contains("document 2: malformed JSON: EOF while parsing"),
            "{err}"
        );
        let err = refused("c.json", b"{\"schema\": \"olm.package\", \"name\": \"p");
        assert!(
            err.contains("document 1: malformed JSON: EOF while parsing"),
            "{err}"
        );
        let err = refused("c.yaml", b"schema: olm.package\nname: [p\n");
        assert!(err.starts_with("DIR/c.yaml:"), "{err}");
        assert!(err.contains("document 1: malformed YAML"), "{err}");
    }

    #[test]
    fn nul_bytes() {
        let text = format!("{PACKAGE}\0{CHANNEL}");
        assert_eq!(
            refused("c.json", text.as_bytes()),
            "DIR/c.json:1:36: document 2: malformed JSON: invalid character '\\0' looking for beginning of value"
        );
        let err = refused("c.json", format!("{PACKAGE}\n{CHANNEL}\n\0").as_bytes());
        assert!(
            err.starts_with("DIR/c.json:3:1: document 3: malformed JSON"),
            "{err}"
        );
        let err = refused("c.json", b"{\"schema\":\"olm.package\",\"name\":\"p\0\"}");
        assert!(err.contains("control character"), "{err}");
        let err = refused("c.yaml", b"schema: olm.package\nname: p\0\n");
        assert!(
            err.starts_with("DIR/c.yaml:1:1: document 1: malformed YAML: control characters"),
            "{err}"
        );
    }

    #[test]
    fn invalid_utf8_and_unpaired_surrogates() {
        // In YAML, or between JSON documents, bytes that are not UTF-8 are refused…
        let err = refused("c.yaml", b"schema: olm.package\nname: \xff\n");
        assert_eq!(
            err,
            "DIR/c.yaml:2:7: document 1: malformed YAML: invalid UTF-8"
        );
        let text = [PACKAGE.as_bytes(), b"\xff", CHANNEL.as_bytes()].concat();
        let err = refused("c.json", &text);
        assert!(
            err.starts_with("DIR/c.json:1:36: document 2: malformed JSON: invalid character"),
            "{err}"
        );
        // …but in JSON strings Go's decoder (so opm) reads them as U+FFFD, and unpaired
        // surrogate escapes too.
        let config = accepted(
            "c.json",
            b"{\"schema\":\"olm.package\",\"name\":\"p\",\"description\":\"a\xffb\"}",
        );
        assert_eq!(config.packages[0].description, "a\u{fffd}b");
        let config = accepted(
            "c.json",
            br#"{"schema":"olm.package","name":"p","description":"\ud800\\ud800 \udc00\ud83d\ude00"}"#,
        );
        assert_eq!(
            config.packages[0].description,
            "\u{fffd}\\ud800 \u{fffd}\u{1f600}"
        );
    }

    #[test]
    fn byte_order_mark() {
        // opm sees no `{` first, so reads the file as YAML: one JSON document is YAML too…
        let one = accepted("c.json", format!("\u{feff}{PACKAGE}\n").as_bytes());
        assert_eq!(one.packages[0].name, "p");
        // …but of a JSON stream, YAML reads only the first document and ignores the rest.
        let stream = accepted(
            "c.json",
            format!("\u{feff}{PACKAGE}\n{CHANNEL}\n").as_bytes(),
        );
        assert_eq!((stream.packages.len(), stream.channels.len()), (1, 0));
        let yaml = accepted(
            "c.yaml",
            "\u{feff}schema: olm.package\nname: p\n---\nschema: olm.package\nname: q\n".as_bytes(),
        );
        assert_eq!(yaml.packages[1].name, "q");
    }

    #[test]
    fn empty_and_blank_files() {
        assert_eq!(accepted("c.json", b""), DeclarativeConfig::default());
        assert_eq!(accepted("c.yaml", b""), DeclarativeConfig::default());
        // A file with nothing but blanks or comments holds one empty document: opm refuses
        // it as a blob without a schema.
        for blank in [&b"\n"[..], b"  \n \n", b"# nothing\n", b"---\n"] {
            for name in ["c.yaml", "c.json"] {
                let err = refused(name, blank);
                assert_eq!(
                    err,
                    format!(
                        "DIR/{name}:1: document 1: a catalog blob must be an object with a \"schema\" key"
                    )
                );
            }
        }
        // A tab that starts a line is no YAML at all.
        let err = refused("c.yaml", b"\t\n");
        assert!(err.contains("malformed YAML"), "{err}");
    }

    #[test]
    fn documents_without_separators() {
        let text = format!("{PACKAGE}{CHANNEL}{PACKAGE}");
        let config = accepted("c.json", text.as_bytes());
        assert_eq!((config.packages.len(), config.channels.len()), (2, 1));
        let text = format!("\n\n  {PACKAGE}\r\n\t{CHANNEL}\n\n");
        accepted("c.json", text.as_bytes());
    }

    #[test]
    fn yaml_multi_document() {
        let text = "---\nschema: olm.package\nname: p\n---\nschema: olm.channel\npackage: p\nname: c\nentries: []\n--- # trailing\n";
        let config = accepted("c.yaml", text.as_bytes());
        assert_eq!((config.packages.len(), config.channels.len()), (1, 1));
        // A separator line with content after `---` is refused, as opm refuses it.
        let err = refused("c.yaml", b"schema: olm.package\nname: p\n--- x\n");
        assert!(err.contains("invalid YAML document separator"), "{err}");
        // An empty document between separators is a blob without a schema.
        let err = refused(
            "c.yaml",
            b"schema: olm.package\nname: p\n---\n\n---\nschema: olm.package\nname: q\n",
        );
        assert!(
            err.starts_with("DIR/c.yaml:4: document 2: a catalog blob must be"),
            "{err}"
        );
    }

    #[test]
    fn one_json_document_then_yaml_is_read_as_opm_reads_it() {
        let text = format!("{PACKAGE}\nschema: olm.package\nname: q\n");
        let config = accepted("c.json", text.as_bytes());
        assert_eq!(config.packages.len(), 2);
        // JSON that is only YAML (a trailing comma) is YAML.
        let config = accepted("c.json", br#"{"schema": "olm.package", "name": "p",}"#);
        assert_eq!(config.packages[0].name, "p");
        // After two JSON documents it is a JSON stream, and YAML is garbage.
        let text = format!("{PACKAGE}\n{PACKAGE}\nschema: olm.package\nname: q\n");
        assert!(refused("c.json", text.as_bytes()).contains("malformed JSON"));
    }

    #[test]
    fn json_values_other_than_objects_are_refused() {
        for text in [r#"["schema"]"#, r#""olm.package""#, "42", "null"] {
            let text = format!("{PACKAGE}\n{PACKAGE}\n{text}\n");
            refused("c.json", text.as_bytes());
        }
    }
}
