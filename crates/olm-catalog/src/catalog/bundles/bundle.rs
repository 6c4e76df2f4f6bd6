//! registry+v1 bundles on disk: `manifests/` (a CSV, CRDs, other objects) and
//! `metadata/annotations.yaml` (+ optional `dependencies.yaml`, `properties.yaml`, read by
//! content as opm reads them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::Value;

use super::memo::ContentMemo;
use crate::catalog::model::fbc::Property;
use crate::catalog::reading::load::{LoadError, parse_documents};
use crate::catalog::text::go_json;
use crate::catalog::text::limits::{MAX_BUNDLE_FILES, MAX_DOCUMENT_BYTES, human_bytes};

pub const ANNOTATION_MEDIATYPE: &str = "operators.operatorframework.io.bundle.mediatype.v1";
pub const ANNOTATION_MANIFESTS: &str = "operators.operatorframework.io.bundle.manifests.v1";
pub const ANNOTATION_METADATA: &str = "operators.operatorframework.io.bundle.metadata.v1";
pub const ANNOTATION_PACKAGE: &str = "operators.operatorframework.io.bundle.package.v1";
pub const ANNOTATION_CHANNELS: &str = "operators.operatorframework.io.bundle.channels.v1";
pub const ANNOTATION_DEFAULT_CHANNEL: &str =
    "operators.operatorframework.io.bundle.channel.default.v1";
pub const SKIP_RANGE_ANNOTATION: &str = "olm.skipRange";

/// Why a bundle could not be read or rendered: the one error of the bundles room.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The bundle directory's content is not a valid bundle.
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// A catalog that a render reads (an input that is no bundle, or what an FBC template
    /// expands to) failed to load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A render's input, or a file it names (`ci.yaml`, a template), cannot be rendered.
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
}

fn invalid(path: &Path, message: impl Into<String>) -> BundleError {
    BundleError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// One object from `manifests/`, with the file it came from. The object is shared with
/// the [`ManifestMemo`] (and other bundles shipping the same file), as is its encoding.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub file: PathBuf,
    pub object: Arc<Value>,
    encoded: Arc<OnceLock<String>>,
}

impl Manifest {
    pub fn new(file: PathBuf, object: Value) -> Self {
        Manifest {
            file,
            object: Arc::new(object),
            encoded: Arc::default(),
        }
    }
    /// The object as `olm.bundle.object` data carries it: base64 of Go's JSON encoding,
    /// made once for every bundle sharing this file.
    pub fn bundle_object_data(&self) -> String {
        self.encoded
            .get_or_init(|| STANDARD.encode(go_json::to_vec(&self.object)))
            .clone()
    }
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// A bundle directory, read but not yet judged (see [`validate_bundle`]).
#[derive(Clone, Debug)]
pub struct BundleDir {
    pub path: PathBuf,
    pub annotations: BTreeMap<String, String>,
    pub manifests: Vec<Manifest>,
    /// `metadata/dependencies.yaml` entries, as written.
    pub dependencies: Vec<Property>,
    /// `metadata/properties.yaml` entries, as written.
    pub properties: Vec<Property>,
    /// Problems opm passes over silently and that do not stop a render (a malformed
    /// `dependencies.yaml`, whose dependencies are then lost): `--strict` refuses them.
    pub warnings: Vec<BundleProblem>,
}

impl BundleDir {
    pub fn package(&self) -> &str {
        self.annotations
            .get(ANNOTATION_PACKAGE)
            .map(String::as_str)
            .unwrap_or_default()
    }

    pub fn channels(&self) -> Vec<String> {
        self.annotations
            .get(ANNOTATION_CHANNELS)
            .map(|c| {
                c.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn default_channel(&self) -> Option<&str> {
        self.annotations
            .get(ANNOTATION_DEFAULT_CHANNEL)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The ClusterServiceVersion, when there is exactly one.
    pub fn csv(&self) -> Option<&Manifest> {
        let mut csvs = self
            .manifests
            .iter()
            .filter(|m| m.kind() == "ClusterServiceVersion");
        let csv = csvs.next()?;
        csvs.next().is_none().then_some(csv)
    }

    pub fn csv_name(&self) -> &str {
        self.csv().map(Manifest::name).unwrap_or_default()
    }

    pub fn version(&self) -> &str {
        self.csv()
            .and_then(|c| c.object["spec"]["version"].as_str())
            .unwrap_or_default()
    }

    pub fn replaces(&self) -> &str {
        self.csv()
            .and_then(|c| c.object["spec"]["replaces"].as_str())
            .unwrap_or_default()
    }

    pub fn skips(&self) -> Vec<String> {
        self.csv()
            .and_then(|c| c.object["spec"]["skips"].as_array())
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn skip_range(&self) -> &str {
        self.csv()
            .and_then(|c| c.object["metadata"]["annotations"][SKIP_RANGE_ANNOTATION].as_str())
            .unwrap_or_default()
    }

    pub fn crds(&self) -> impl Iterator<Item = &Manifest> {
        self.manifests
            .iter()
            .filter(|m| m.kind() == "CustomResourceDefinition")
    }
}

#[derive(Deserialize)]
struct AnnotationsFile {
    #[serde(default)]
    annotations: BTreeMap<String, Value>,
}

fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, BundleError> {
    let text = read_text(path)?;
    crate::catalog::text::yaml_nesting::from_str(&text)
        .map_err(|e| invalid(path, format!("malformed YAML: {e}")))
}

/// A bundle file's bytes, refusing files over [`MAX_DOCUMENT_BYTES`] before reading them.
fn read_bytes(path: &Path) -> Result<Vec<u8>, BundleError> {
    let io = |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    };
    // One open and one stat per file: a render of a whole repository reads tens of thousands.
    let mut file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let too_large = |size: u64| {
        invalid(
            path,
            format!(
                "{size} bytes, larger than the limit of {} for one bundle file",
                human_bytes(MAX_DOCUMENT_BYTES)
            ),
        )
    };
    if size > MAX_DOCUMENT_BYTES as u64 {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // Bounded even if the file grows while it is read.
    std::io::Read::read_to_end(
        &mut std::io::Read::take(&mut file, MAX_DOCUMENT_BYTES as u64 + 1),
        &mut bytes,
    )
    .map_err(io)?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn read_text(path: &Path) -> Result<String, BundleError> {
    String::from_utf8(read_bytes(path)?).map_err(|e| {
        invalid(
            path,
            format!("not UTF-8 (at byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// The directory an annotation (`…manifests.v1`, `…metadata.v1`) names, inside the bundle:
/// a leading `/` means the bundle's root (as in the image), and `..` may not leave it.
fn bundle_subdir(
    dir: &Path,
    annotation: &str,
    value: Option<&String>,
    default: &str,
) -> Result<PathBuf, BundleError> {
    let value = value.map(String::as_str).unwrap_or(default);
    let relative = Path::new(value.trim_start_matches('/'));
    if relative.components().any(|c| {
        !matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    }) {
        return Err(invalid(
            &dir.join("metadata/annotations.yaml"),
            format!("{annotation}: {value:?} is not a directory inside the bundle"),
        ));
    }
    Ok(dir.join(relative))
}

/// Whether `dir` looks like a bundle (has `metadata/annotations.yaml`).
pub fn is_bundle_dir(dir: &Path) -> bool {
    dir.join("metadata/annotations.yaml").is_file()
}

/// Reads a bundle directory. Structural problems that make it unreadable are errors; the
/// rest is for [`validate_bundle`].
pub fn read_bundle(dir: &Path) -> Result<BundleDir, BundleError> {
    read_bundle_with(dir, None)
}

/// A manifest file's first document (or none) and how many documents it holds.
type Parsed = (Option<Manifest>, usize);

/// Manifest files already parsed, by content: the bundles of a package ship the same
/// CRDs version after version (42% of the manifest bytes of community-operators-prod
/// repeat an earlier file), so a render of many bundle directories parses each once.
pub type ManifestMemo = ContentMemo<Parsed>;

/// The first object of a manifest file and how many YAML documents it holds, from `memo`
/// when it has seen the same content.
fn read_manifest(file: &Path, memo: Option<&ManifestMemo>) -> Result<(Parsed, bool), BundleError> {
    let mut text = read_text(file)?;
    let leading_empty = leading_empty_document(&text);
    // Go's YAML reader ends the last line at the end of the file: a keep-chomped block
    // scalar (`>+`, `|+`) there gets its final line break, as opm renders it.
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let parse = || {
        let docs = parse_documents(file, &text).map_err(|e| invalid(file, e.to_string()))?;
        let documents = docs.len();
        let first = docs.into_iter().next();
        if first.as_ref().is_some_and(|object| !object.is_object()) {
            return Err(invalid(file, "a manifest must be a Kubernetes object"));
        }
        Ok((
            first.map(|object| Manifest::new(file.to_path_buf(), object)),
            documents,
        ))
    };
    let Some(memo) = memo else {
        return Ok((parse()?, leading_empty));
    };
    let (first, documents) = memo.get_or_parse(text.as_bytes(), parse)?;
    // The object is shared; the file it came from is this bundle's.
    let first = first.map(|m| Manifest {
        file: file.to_path_buf(),
        ..m
    });
    Ok(((first, documents), leading_empty))
}

/// Whether the file opens with a document holding nothing but comments or blank lines
/// before its first `---`. Go's YAML reader (and so opm) takes that empty document as the
/// file's one object and never sees the object after it.
fn leading_empty_document(text: &str) -> bool {
    for (lines_before, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            return lines_before > 0;
        }
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            return false;
        }
    }
    false
}

/// [`read_bundle`], with manifest files parsed once per content across the bundles that
/// share `memo`.
pub fn read_bundle_with(dir: &Path, memo: Option<&ManifestMemo>) -> Result<BundleDir, BundleError> {
    let annotations_path = dir.join("metadata/annotations.yaml");
    if !annotations_path.is_file() {
        return Err(invalid(
            dir,
            "not a bundle: metadata/annotations.yaml is missing",
        ));
    }
    let annotations: AnnotationsFile = read_yaml(&annotations_path)?;
    let annotations: BTreeMap<String, String> = annotations
        .annotations
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (k, v)
        })
        .collect();
    let manifests_dir = bundle_subdir(
        dir,
        ANNOTATION_MANIFESTS,
        annotations.get(ANNOTATION_MANIFESTS),
        "manifests/",
    )?;
    let (manifests, mut warnings) = read_manifests(&manifests_dir, memo)?;
    let metadata_dir = bundle_subdir(
        dir,
        ANNOTATION_METADATA,
        annotations.get(ANNOTATION_METADATA),
        "metadata/",
    )?;
    let metadata = read_metadata(&metadata_dir)?;
    warnings.extend(metadata.warnings);
    Ok(BundleDir {
        path: dir.to_path_buf(),
        annotations,
        manifests,
        dependencies: metadata.dependencies,
        properties: metadata.properties,
        warnings,
    })
}

/// The objects of `manifests/`, one per file as opm reads them, in file name order, with
/// the problems opm passes over silently.
fn read_manifests(
    manifests_dir: &Path,
    memo: Option<&ManifestMemo>,
) -> Result<(Vec<Manifest>, Vec<BundleProblem>), BundleError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests_dir)
        .map_err(|source| BundleError::Io {
            path: manifests_dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .take(MAX_BUNDLE_FILES + 1)
        .collect();
    if files.len() > MAX_BUNDLE_FILES {
        return Err(too_many_files(manifests_dir));
    }
    files.sort();
    let mut manifests = Vec::new();
    let mut warnings = Vec::new();
    // A CSV opm never sees, behind an empty first document.
    let mut hidden_csv = None;
    for file in files {
        let ((first, documents), leading_empty) = read_manifest(&file, memo)?;
        if leading_empty && let Some(object) = first {
            // Go's YAML reader (and so opm, and upstream's install from the bundle image)
            // takes the empty document as the file's one object: this one is left out.
            if object.kind() == "ClusterServiceVersion" {
                hidden_csv.get_or_insert(file.clone());
            }
            warnings.push(left_out(file, object.kind()));
            continue;
        }
        // opm decodes one object per manifest file: later documents are not part of the
        // bundle it renders (nor of what upstream installs). Same here, said out loud.
        if documents > 1 {
            warnings.push(BundleProblem {
                file: file.clone(),
                message: format!(
                    "holds {documents} YAML documents; only the first is part of the bundle, \
                     as opm reads manifests (split the others into files of their own)"
                ),
            });
        }
        manifests.extend(first);
    }
    // Without a CSV there is no bundle: refused as opm refuses it, in its words.
    if let Some(file) = hidden_csv
        && !manifests
            .iter()
            .any(|m| m.kind() == "ClusterServiceVersion")
    {
        let opm = if manifests.is_empty() {
            "no bundle objects found"
        } else {
            "no csv in bundle"
        };
        let why = left_out(file, "ClusterServiceVersion");
        return Err(invalid(&why.file, format!("{opm}: {}", why.message)));
    }
    Ok((manifests, warnings))
}

/// An object behind an empty first YAML document, which opm never reads.
fn left_out(file: PathBuf, kind: &str) -> BundleProblem {
    let kind = if kind.is_empty() { "object" } else { kind };
    BundleProblem {
        file,
        message: format!(
            "its first YAML document is empty (only comments before `---`); opm reads only \
             that document, so this {kind} is not part of the bundle (remove the `---` line)"
        ),
    }
}

/// What `metadata/` declares besides annotations.
#[derive(Default)]
struct Metadata {
    dependencies: Vec<Property>,
    properties: Vec<Property>,
    warnings: Vec<BundleProblem>,
}

/// Reads `metadata/` as opm does: every file, in path order (subdirectories too), is tried
/// as YAML; the first that holds a non-empty `dependencies:` list gives the dependencies and
/// the first with a non-empty `properties:` list the properties, whatever the file is called
/// (`dependency.yaml`, a `properties.yaml` holding dependencies…). Files that do not parse
/// are passed over, as opm does, with a warning naming file and line.
fn read_metadata(dir: &Path) -> Result<Metadata, BundleError> {
    let mut out = Metadata::default();
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    let (mut have_dependencies, mut have_properties) = (false, false);
    for file in files {
        if have_dependencies && have_properties {
            break;
        }
        let bytes = read_bytes(&file)?;
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        // Most metadata files are annotations only: skip parsing them.
        let (wants_dependencies, wants_properties) = (
            !have_dependencies && text.contains("dependencies"),
            !have_properties && text.contains("properties"),
        );
        if !wants_dependencies && !wants_properties {
            continue;
        }
        let warn = |out: &mut Metadata, message: String| {
            out.warnings.push(BundleProblem {
                file: file.clone(),
                message,
            });
        };
        let document = match parse_documents(&file, text) {
            Ok(docs) => docs.into_iter().next().unwrap_or_default(),
            Err(e) => {
                // Named as `file:line:column`, the way editors jump to it.
                let (at, message) = match e {
                    crate::catalog::reading::load::LoadError::Parse {
                        line,
                        column,
                        message,
                        ..
                    } => (
                        format!("{}:{line}:{}", file.display(), column.unwrap_or(1)),
                        message,
                    ),
                    other => (file.display().to_string(), other.to_string()),
                };
                out.warnings.push(BundleProblem {
                    file: at.into(),
                    message: format!(
                        "malformed YAML ({message}); the file is ignored, as opm ignores it, \
                         so what it declares (dependencies) is lost"
                    ),
                });
                continue;
            }
        };
        let take = |key: &str, out: &mut Metadata| -> Option<Vec<Property>> {
            let list = document.get(key)?;
            match serde_json::from_value::<Vec<Property>>(list.clone()) {
                Ok(list) if !list.is_empty() => Some(list),
                Ok(_) => None,
                Err(e) => {
                    warn(
                        out,
                        format!("{key}: {e}; ignored, as opm ignores it (its {key} are lost)"),
                    );
                    None
                }
            }
        };
        if wants_dependencies && let Some(list) = take("dependencies", &mut out) {
            out.dependencies = list;
            have_dependencies = true;
        }
        if wants_properties && let Some(list) = take("properties", &mut out) {
            out.properties = list;
            have_properties = true;
        }
    }
    Ok(out)
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BundleError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BundleError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => collect_files(&path, out)?,
            Ok(t) if t.is_file() => out.push(path),
            // A symbolic link counts for what it points at.
            Ok(t) if t.is_symlink() && path.is_file() => out.push(path),
            _ => {}
        }
        if out.len() > MAX_BUNDLE_FILES {
            return Err(too_many_files(dir));
        }
    }
    Ok(())
}

fn too_many_files(dir: &Path) -> BundleError {
    invalid(
        dir,
        format!("more than the limit of {MAX_BUNDLE_FILES} files in one bundle directory"),
    )
}

/// One problem with a bundle, naming the file it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleProblem {
    pub file: PathBuf,
    pub message: String,
}

impl std::fmt::Display for BundleProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

/// Whether a CSV object fits the ClusterServiceVersion schema, by decoding it into the
/// typed CSV (which lives with the Kubernetes types, outside this crate:
/// `olm::api::check_csv_schema`).
pub type CsvSchemaCheck<'a> = &'a dyn Fn(&Value) -> Result<(), serde_json::Error>;

/// Checks layout, annotations and CSV sanity (the CSV against `csv_schema`); returns every
/// problem found.
pub fn validate_bundle(bundle: &BundleDir, csv_schema: CsvSchemaCheck<'_>) -> Vec<BundleProblem> {
    let mut problems = Vec::new();
    let annotations_file = bundle.path.join("metadata/annotations.yaml");
    let mut problem = |file: &Path, message: String| {
        problems.push(BundleProblem {
            file: file.to_path_buf(),
            message,
        });
    };

    check_annotations(bundle, &annotations_file, &mut problem);

    let csvs: Vec<&Manifest> = bundle
        .manifests
        .iter()
        .filter(|m| m.kind() == "ClusterServiceVersion")
        .collect();
    let manifests_dir = bundle.path.join("manifests");
    let csv = match csvs.as_slice() {
        [csv] => *csv,
        [] => {
            problem(
                &manifests_dir,
                "no ClusterServiceVersion in manifests/".into(),
            );
            return problems;
        }
        many => {
            let files: Vec<_> = many.iter().map(|m| m.file.display().to_string()).collect();
            problem(
                &manifests_dir,
                format!("more than one ClusterServiceVersion: {}", files.join(", ")),
            );
            return problems;
        }
    };
    let file = csv.file.as_path();
    if let Err(e) = csv_schema(&csv.object) {
        problem(
            file,
            format!(
                "CSV {:?} does not match the ClusterServiceVersion schema: {e}",
                csv.name()
            ),
        );
    }
    if csv.name().is_empty() {
        problem(file, "CSV has no metadata.name".into());
    }
    let version = bundle.version();
    if version.is_empty() {
        problem(
            file,
            format!("CSV {:?}: spec.version is missing", csv.name()),
        );
    } else if let Err(e) = crate::catalog::model::semver_range::parse_version(version) {
        problem(
            file,
            format!(
                "CSV {:?}: spec.version {version:?} is not semver: {e}",
                csv.name()
            ),
        );
    }
    let skip_range = bundle.skip_range();
    if !skip_range.is_empty()
        && let Err(e) = crate::catalog::model::semver_range::VersionRange::parse(skip_range)
    {
        problem(
            file,
            format!("CSV {:?}: annotation olm.skipRange: {e}", csv.name()),
        );
    }
    check_install_modes(csv, &mut problem);
    check_deployments(csv, &mut problem);
    check_owned_crds(bundle, csv, &mut problem);
    for m in &bundle.manifests {
        if m.kind().is_empty()
            || m.object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        {
            problem(&m.file, "object without apiVersion or kind".into());
        } else if m.name().is_empty() {
            problem(&m.file, format!("{} without metadata.name", m.kind()));
        }
    }
    problems
}

/// `metadata/annotations.yaml`: the media type, a DNS-1123 package name, channels, and a
/// default channel among them.
fn check_annotations(bundle: &BundleDir, annotations_file: &Path, problem: Reporter<'_>) {
    match bundle
        .annotations
        .get(ANNOTATION_MEDIATYPE)
        .map(String::as_str)
    {
        Some("registry+v1" | "plain+v0") => {}
        Some(other) => problem(
            annotations_file,
            format!("{ANNOTATION_MEDIATYPE} is {other:?}, expected \"registry+v1\""),
        ),
        None => problem(
            annotations_file,
            format!("missing annotation {ANNOTATION_MEDIATYPE}"),
        ),
    }
    if bundle.package().is_empty() {
        problem(
            annotations_file,
            format!("missing annotation {ANNOTATION_PACKAGE}"),
        );
    } else if !crate::catalog::checks::validate::is_dns1123_label(bundle.package()) {
        problem(
            annotations_file,
            format!(
                "package name {:?} is not a valid DNS-1123 label",
                bundle.package()
            ),
        );
    }
    let channels = bundle.channels();
    if channels.is_empty() {
        problem(
            annotations_file,
            format!("missing annotation {ANNOTATION_CHANNELS}"),
        );
    }
    if let Some(default) = bundle.default_channel()
        && !channels.iter().any(|c| c == default)
    {
        problem(
            annotations_file,
            format!("default channel {default:?} is not one of the bundle's channels {channels:?}"),
        );
    }
}

/// Where a bundle check reports a problem: the file and what is wrong.
type Reporter<'a> = &'a mut dyn FnMut(&Path, String);

/// The CSV's install modes: at least one, one supported, each of a known type.
fn check_install_modes(csv: &Manifest, problem: Reporter<'_>) {
    let file = csv.file.as_path();
    let spec = &csv.object["spec"];
    let modes = spec["installModes"].as_array().cloned().unwrap_or_default();
    if modes.is_empty() {
        problem(
            file,
            format!("CSV {:?}: spec.installModes is empty", csv.name()),
        );
    } else if !modes.iter().any(|m| m["supported"] == Value::Bool(true)) {
        problem(
            file,
            format!("CSV {:?}: no install mode is supported", csv.name()),
        );
    }
    for m in &modes {
        let t = m["type"].as_str().unwrap_or_default();
        if ![
            "OwnNamespace",
            "SingleNamespace",
            "MultiNamespace",
            "AllNamespaces",
        ]
        .contains(&t)
        {
            problem(
                file,
                format!("CSV {:?}: unknown install mode type {t:?}", csv.name()),
            );
        }
    }
}

/// The CSV's deployment strategy: `deployment`, with named deployments that have containers.
fn check_deployments(csv: &Manifest, problem: Reporter<'_>) {
    let file = csv.file.as_path();
    let spec = &csv.object["spec"];
    let deployments = spec["install"]["spec"]["deployments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if spec["install"]["strategy"].as_str() != Some("deployment") {
        problem(
            file,
            format!(
                "CSV {:?}: spec.install.strategy must be \"deployment\"",
                csv.name()
            ),
        );
    }
    if deployments.is_empty() {
        problem(
            file,
            format!(
                "CSV {:?}: spec.install.spec.deployments is empty",
                csv.name()
            ),
        );
    }
    for (i, d) in deployments.iter().enumerate() {
        if d["name"].as_str().unwrap_or_default().is_empty() {
            problem(
                file,
                format!("CSV {:?}: deployment {i} has no name", csv.name()),
            );
        }
        if d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .is_none_or(std::vec::Vec::is_empty)
        {
            problem(
                file,
                format!(
                    "CSV {:?}: deployment {:?} has no containers",
                    csv.name(),
                    d["name"].as_str().unwrap_or_default()
                ),
            );
        }
    }
}

/// Every owned CRD ships in the bundle, with the version and kind the CSV names.
fn check_owned_crds(bundle: &BundleDir, csv: &Manifest, problem: Reporter<'_>) {
    let file = csv.file.as_path();
    let spec = &csv.object["spec"];
    // Every owned CRD must ship in the bundle, with the version the CSV names.
    for owned in spec["customresourcedefinitions"]["owned"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let name = owned["name"].as_str().unwrap_or_default();
        let version = owned["version"].as_str().unwrap_or_default();
        let kind = owned["kind"].as_str().unwrap_or_default();
        match bundle.crds().find(|c| c.name() == name) {
            None => problem(
                file,
                format!(
                    "CSV {:?} owns CRD {name:?} but manifests/ does not contain it",
                    csv.name()
                ),
            ),
            Some(crd) => {
                // apiextensions v1 lists `versions`; v1beta1 may name a single `version`.
                let versions = crd.object["spec"]["versions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let single = crd.object["spec"]["version"].as_str();
                if single != Some(version)
                    && !versions.iter().any(|v| v["name"].as_str() == Some(version))
                {
                    problem(
                        &crd.file,
                        format!(
                            "CRD {name:?} has no version {version:?} that CSV {:?} owns",
                            csv.name()
                        ),
                    );
                }
                if crd.object["spec"]["names"]["kind"].as_str() != Some(kind) {
                    problem(
                        &crd.file,
                        format!(
                            "CRD {name:?} has kind {:?}, CSV {:?} says {kind:?}",
                            crd.object["spec"]["names"]["kind"],
                            csv.name()
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod memo_tests {
    use super::*;

    fn bundle(version: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join(format!("bundles/reverse-words/{version}"))
    }

    fn crd(dir: &BundleDir) -> &Manifest {
        let crd = dir
            .manifests
            .iter()
            .find(|m| m.kind() == "CustomResourceDefinition");
        crd.expect("the bundle ships its CRD")
    }

    #[test]
    fn bundles_shipping_the_same_file_share_one_parse_and_one_encoding() {
        let memo = ManifestMemo::new(1 << 20);
        let old = read_bundle_with(&bundle("0.1.0"), Some(&memo)).unwrap();
        let new = read_bundle_with(&bundle("0.2.0"), Some(&memo)).unwrap();
        // Both ship the same CRD file: one object, one encoding, each bundle's own path.
        assert!(Arc::ptr_eq(&crd(&old).object, &crd(&new).object));
        // Encoding through one bundle's manifest encodes the other's too.
        assert!(crd(&new).encoded.get().is_none());
        let data = crd(&old).bundle_object_data();
        assert_eq!(
            crd(&new).encoded.get(),
            Some(&data),
            "encoded once for both"
        );
        assert!(
            crd(&new).file.starts_with(bundle("0.2.0")),
            "{:?}",
            crd(&new).file
        );
        // Their CSVs differ: parsed on their own, as without the memo.
        assert!(!Arc::ptr_eq(
            &old.csv().unwrap().object,
            &new.csv().unwrap().object
        ));
        let plain = read_bundle(&bundle("0.2.0")).unwrap();
        assert_eq!(plain.manifests.len(), new.manifests.len());
        for (a, b) in plain.manifests.iter().zip(&new.manifests) {
            assert_eq!((&a.file, &*a.object), (&b.file, &*b.object));
        }
    }

    #[test]
    fn a_broken_file_is_named_each_time_it_is_read() {
        let dir = std::env::temp_dir().join(format!("olm-memo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["manifests", "metadata"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            for f in std::fs::read_dir(bundle("0.1.0").join(sub)).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), dir.join(sub).join(f.file_name())).unwrap();
            }
        }
        std::fs::write(dir.join("manifests/broken.yaml"), "kind: [unclosed\n").unwrap();
        let memo = ManifestMemo::new(1 << 20);
        for _ in 0..2 {
            let e = read_bundle_with(&dir, Some(&memo)).unwrap_err().to_string();
            assert!(e.contains("broken.yaml"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A copy of reverse-words 0.1.0 whose files holding `hide` open with a comment and
    /// `---` (an empty first YAML document), plus `extra` files.
    fn with_empty_first_document(
        name: &str,
        hide: Option<&str>,
        extra: &[(&str, &str)],
    ) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("olm-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["manifests", "metadata"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
            for f in std::fs::read_dir(bundle("0.1.0").join(sub)).unwrap() {
                let f = f.unwrap();
                let mut text = std::fs::read_to_string(f.path()).unwrap();
                if hide.is_some_and(|h| text.contains(h)) {
                    text = format!("# generated by a tool\n---\n{text}");
                }
                std::fs::write(dir.join(sub).join(f.file_name()), text).unwrap();
            }
        }
        for (file, text) in extra {
            std::fs::write(dir.join("manifests").join(file), text).unwrap();
        }
        dir
    }

    /// A CSV file opening with a comment and `---`: opm sees only the empty first document
    /// and refuses the bundle, "no csv in bundle"; so do we, naming the file.
    #[test]
    fn a_csv_behind_an_empty_first_document_is_refused_in_opms_words() {
        let dir = with_empty_first_document("hidden-csv", Some("kind: ClusterServiceVersion"), &[]);
        let e = read_bundle(&dir).unwrap_err().to_string();
        assert!(
            e.contains("clusterserviceversion.yaml: no csv in bundle: ")
                && e.contains("first YAML document is empty"),
            "{e}"
        );
        // The CSV the only manifest: opm finds no object at all.
        for f in std::fs::read_dir(dir.join("manifests")).unwrap() {
            let path = f.unwrap().path();
            if !path.to_string_lossy().contains("clusterserviceversion") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let e = read_bundle(&dir).unwrap_err().to_string();
        assert!(e.contains(": no bundle objects found: "), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Any other object behind an empty first document is left out, as opm leaves it out,
    /// with a warning; a CSV too when another file holds one, which opm then takes.
    #[test]
    fn other_objects_behind_an_empty_first_document_are_left_out_with_a_warning() {
        let service = "# a\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n";
        let dir = with_empty_first_document("hidden-service", None, &[("svc.yaml", service)]);
        let read = read_bundle(&dir).unwrap();
        assert!(read.manifests.iter().all(|m| m.kind() != "Service"));
        let warnings: Vec<String> = read.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings.len() == 1
                && warnings[0].contains("svc.yaml: its first YAML document is empty")
                && warnings[0].contains("this Service is not part of the bundle"),
            "{warnings:?}"
        );
        let csv = std::fs::read_dir(dir.join("manifests"))
            .unwrap()
            .map(|f| f.unwrap().path())
            .find(|p| p.to_string_lossy().contains("clusterserviceversion"))
            .unwrap();
        let text = std::fs::read_to_string(&csv).unwrap();
        std::fs::write(
            dir.join("manifests/0-hidden.yaml"),
            format!("#\n---\n{text}"),
        )
        .unwrap();
        let read = read_bundle(&dir).unwrap();
        assert!(read.csv().is_some_and(|c| c.file == csv));
        assert_eq!(read.warnings.len(), 2, "{:?}", read.warnings);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_first_document_is_comments_or_blank_lines_before_the_first_separator() {
        assert!(!leading_empty_document("# a\nkind: X\n---\nkind: Y\n"));
        assert!(!leading_empty_document("---\nkind: X\n"));
        assert!(leading_empty_document("# a\n---\nkind: X\n"));
        assert!(leading_empty_document("\n--- # b\nkind: X\n"));
    }
}
