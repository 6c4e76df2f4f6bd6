//! Loading a file-based catalog from a directory tree of JSON and YAML files, as upstream's
//! loader does: many blobs per file, `schema`/`package`/`name` keys matched without regard
//! to case, blobs of unknown schemas kept, `.indexignore` honoured.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::fbc::*;
use super::files::catalog_files;
use super::go_json;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: document {document}: malformed {format}: {message}")]
    Parse {
        path: PathBuf,
        document: usize,
        format: &'static str,
        message: String,
    },
    #[error("{path}: document {document}: a catalog blob must be an object with a \"schema\" key")]
    MissingSchema { path: PathBuf, document: usize },
    #[error("{path}: document {document}: invalid {schema} {name:?}: {message}")]
    InvalidBlob {
        path: PathBuf,
        document: usize,
        schema: String,
        name: String,
        message: String,
    },
}

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
    let mut config = DeclarativeConfig::default();
    for file in catalog_files(root)? {
        config.merge(load_file_with(&file, options)?);
    }
    Ok(config)
}

pub fn load_file(path: &Path) -> Result<DeclarativeConfig, LoadError> {
    load_file_with(path, LoadOptions::default())
}

/// JSON files are decoded as a stream straight from the file, one blob at a time, so a big
/// catalog is never held twice (text and values) in memory.
pub fn load_file_with(path: &Path, options: LoadOptions) -> Result<DeclarativeConfig, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file =
        std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path).map_err(io)?);
    let first = {
        use std::io::BufRead;
        let buf = file.fill_buf().map_err(io)?;
        buf.iter().copied().find(|b| !b.is_ascii_whitespace())
    };
    if first == Some(b'{') {
        let mut config = DeclarativeConfig::default();
        let mut document = 0;
        for_each_json_object(&mut file, |bytes| {
            document += 1;
            let blob: Value = serde_json::from_slice(bytes).map_err(|e| LoadError::Parse {
                path: path.to_path_buf(),
                document,
                format: "JSON",
                message: e.to_string(),
            })?;
            add_blob(&mut config, path, document, blob, options)
        })
        .map_err(|e| match e {
            SplitError::Io(source) => LoadError::Io {
                path: path.to_path_buf(),
                source,
            },
            SplitError::Unterminated(message) => LoadError::Parse {
                path: path.to_path_buf(),
                document: document + 1,
                format: "JSON",
                message,
            },
            SplitError::Load(e) => e,
        })?;
        return Ok(config);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).map_err(io)?;
    load_str_with(path, &text, options)
}

enum SplitError {
    Io(std::io::Error),
    Unterminated(String),
    Load(LoadError),
}

impl From<LoadError> for SplitError {
    fn from(e: LoadError) -> Self {
        SplitError::Load(e)
    }
}

/// Calls `each` with the bytes of every top-level JSON value in a stream, reading the file
/// in chunks: parsing each blob from a slice is several times faster than serde_json's
/// reader, and only one blob plus one chunk is in memory at a time.
fn for_each_json_object(
    reader: &mut impl std::io::Read,
    mut each: impl FnMut(&[u8]) -> Result<(), LoadError>,
) -> Result<(), SplitError> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut chunk = vec![0u8; 1 << 20];
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut start: Option<usize> = None;
    let mut scanned = 0;
    loop {
        let n = reader.read(&mut chunk).map_err(SplitError::Io)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut consumed = 0;
        for i in scanned..buf.len() {
            let b = buf[i];
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => {
                    if depth == 0 {
                        start = Some(i);
                    }
                    depth += 1;
                }
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0
                        && let Some(s) = start.take()
                    {
                        each(&buf[s..=i])?;
                        consumed = i + 1;
                    }
                }
                b if b.is_ascii_whitespace() => {}
                _ if depth == 0 => {
                    // A bare scalar at the top level: let serde_json name the problem.
                    let end = buf[i..]
                        .iter()
                        .position(|c| c.is_ascii_whitespace())
                        .map_or(buf.len(), |p| i + p);
                    each(&buf[i..end])?;
                    return Err(SplitError::Unterminated(
                        "a catalog blob must be a JSON object".into(),
                    ));
                }
                _ => {}
            }
        }
        buf.drain(..consumed);
        start = start.map(|s| s - consumed);
        scanned = buf.len();
    }
    if depth > 0 || in_string {
        return Err(SplitError::Unterminated("EOF while parsing a value".into()));
    }
    Ok(())
}

/// Parses one file's text: a stream of JSON values, or YAML documents.
pub fn load_str(path: &Path, text: &str) -> Result<DeclarativeConfig, LoadError> {
    load_str_with(path, text, LoadOptions::default())
}

pub fn load_str_with(
    path: &Path,
    text: &str,
    options: LoadOptions,
) -> Result<DeclarativeConfig, LoadError> {
    let mut config = DeclarativeConfig::default();
    for (index, blob) in parse_documents(path, text)?.into_iter().enumerate() {
        add_blob(&mut config, path, index + 1, blob, options)?;
    }
    Ok(config)
}

/// The documents of a JSON stream or a multi-document YAML file; empty documents dropped.
pub fn parse_documents(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    let parse_error = |document, format, message: String| LoadError::Parse {
        path: path.to_path_buf(),
        document,
        format,
        message,
    };
    let mut docs = Vec::new();
    if text.trim_start().starts_with('{') {
        for (i, value) in serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
        {
            docs.push(value.map_err(|e| parse_error(i + 1, "JSON", e.to_string()))?);
        }
    } else {
        for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let value = Value::deserialize(document)
                .map_err(|e| parse_error(i + 1, "YAML", e.to_string()))?;
            if !value.is_null() {
                docs.push(value);
            }
        }
    }
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
            {
                let v = map.remove(&key).unwrap();
                map.insert(name.to_string(), v);
            }
        }
    }
}

fn add_blob(
    config: &mut DeclarativeConfig,
    path: &Path,
    document: usize,
    mut blob: Value,
    options: LoadOptions,
) -> Result<(), LoadError> {
    let missing = || LoadError::MissingSchema {
        path: path.to_path_buf(),
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
        document,
        schema: schema.clone(),
        name: if name.is_empty() {
            package.clone()
        } else {
            name.clone()
        },
        message,
    };
    let properties_keys = ["type", "value"];
    let fix_properties = |blob: &mut Value| {
        if let Some(Value::Array(props)) = blob.get_mut("properties") {
            props
                .iter_mut()
                .for_each(|p| canonicalize(p, &properties_keys));
        }
    };
    match schema.as_str() {
        SCHEMA_PACKAGE => {
            canonicalize(
                &mut blob,
                &[
                    "schema",
                    "name",
                    "defaultChannel",
                    "icon",
                    "description",
                    "properties",
                ],
            );
            fix_properties(&mut blob);
            config
                .packages
                .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?);
        }
        SCHEMA_CHANNEL => {
            canonicalize(
                &mut blob,
                &["schema", "name", "package", "entries", "properties"],
            );
            if let Some(Value::Array(entries)) = blob.get_mut("entries") {
                entries
                    .iter_mut()
                    .for_each(|e| canonicalize(e, &["name", "replaces", "skips", "skipRange"]));
            }
            fix_properties(&mut blob);
            config
                .channels
                .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?);
        }
        SCHEMA_BUNDLE => {
            canonicalize(
                &mut blob,
                &[
                    "schema",
                    "name",
                    "package",
                    "image",
                    "properties",
                    "relatedImages",
                ],
            );
            fix_properties(&mut blob);
            if options.drop_bundle_objects
                && let Some(Value::Array(props)) = blob.get_mut("properties")
            {
                for p in props.iter_mut().filter(|p| p["type"] == PROP_BUNDLE_OBJECT) {
                    p["value"] = Value::Null;
                }
            }
            config
                .bundles
                .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?);
        }
        SCHEMA_DEPRECATIONS => {
            canonicalize(&mut blob, &["schema", "package", "entries"]);
            config
                .deprecations
                .push(serde_json::from_value(blob).map_err(|e| invalid(e.to_string()))?);
        }
        _ => config.others.push(Meta {
            schema,
            package,
            name,
            blob,
        }),
    }
    Ok(())
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
            "cat/p.yaml: document 2: a catalog blob must be an object with a \"schema\" key"
        );
        let err = load_str(Path::new("cat/p.json"), "{\"schema\": \"olm.package\", ").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cat/p.json: document 1: malformed JSON"),
            "{err}"
        );
        let err = load_str(
            Path::new("cat/p.yaml"),
            "schema: olm.package\nname: [unclosed\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cat/p.yaml: document 1: malformed YAML"),
            "{err}"
        );
        let err = load_str(
            Path::new("p.yaml"),
            "schema: olm.channel\nname: c\npackage: p\nentries: 3\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p.yaml: document 1: invalid olm.channel \"c\""),
            "{err}"
        );
    }
}
