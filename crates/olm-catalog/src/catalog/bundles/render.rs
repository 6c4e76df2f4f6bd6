//! Rendering registry+v1 bundles into FBC, with the content rules of `opm render`, and whole
//! package folders (bundles side by side, plus `ci.yaml`) into a package with channels.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::bundle::{
    BundleDir, BundleError, ManifestMemo, is_bundle_dir, read_bundle, read_bundle_with,
};
use super::csv::package_display;
pub use super::related::related_images;
use crate::catalog::model::fbc::*;
use crate::catalog::model::semver_range::parse_version;
use crate::catalog::reading::load::load_path;

/// Manifest bytes remembered while rendering many bundle directories (their parsed objects
/// take a few times that). On community-operators-prod, 8 MiB finds 42.2% of all manifest
/// bytes already parsed, 48 MiB 42.4%: what repeats is the previous bundle's CRDs.
const MANIFEST_MEMO_BYTES: usize = 8 << 20;

fn input_error(path: &Path, message: impl Into<String>) -> BundleError {
    BundleError::Input {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// How a package's channels get their upgrade edges (`ci.yaml` `updateGraph`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateGraph {
    /// Edges from each CSV's replaces / skips / olm.skipRange.
    Replaces,
    /// Each bundle replaces the next lower version in its channel.
    Semver,
    /// Like semver, but a bundle replaces only the highest patch of the previous minor and
    /// skips lower patches of its own minor.
    SemverSkipPatch,
}

impl UpdateGraph {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "replaces-mode" => Some(Self::Replaces),
            "semver-mode" => Some(Self::Semver),
            "semver-skippatch-mode" => Some(Self::SemverSkipPatch),
            _ => None,
        }
    }
}

/// Options shared by every render.
#[derive(Clone, Debug, Default)]
pub struct RenderOptions {
    /// Fills each bundle's `image` (`{{.Package}}`, `{{.Name}}`, `{{.Version}}`), like opm's
    /// `--alpha-image-ref-template`.
    pub image_template: Option<String>,
    /// Refuse bundles with problems opm passes over silently (see
    /// [`BundleDir::warnings`]) instead of rendering them with a warning.
    pub strict: bool,
}

impl RenderOptions {
    fn image_for(&self, package: &str, name: &str, version: &str) -> String {
        self.image_template
            .as_deref()
            .map(|t| {
                t.replace("{{.Package}}", package)
                    .replace("{{.Name}}", name)
                    .replace("{{.Version}}", version)
            })
            .unwrap_or_default()
    }
}

/// Renders inputs the way `opm render` does, extended to package folders:
/// - a bundle directory → its `olm.bundle`;
/// - a folder of bundle directories (a package, as in community-operators) → `olm.package`,
///   `olm.channel`s and `olm.bundle`s;
/// - anything else is loaded as a file-based catalog and passed through.
pub fn render_paths(
    inputs: &[PathBuf],
    options: &RenderOptions,
) -> Result<DeclarativeConfig, BundleError> {
    let mut out = DeclarativeConfig::default();
    render_paths_each(inputs, options, |part| {
        out.merge(part);
        Ok(())
    })?;
    Ok(out)
}

/// Like [`render_paths`], handing each piece to `sink` as soon as it is rendered, in input
/// order, so a caller can write output without holding the whole catalog. Runs of bundle
/// directories are rendered in parallel while `sink` writes the ones already done.
pub fn render_paths_each(
    inputs: &[PathBuf],
    options: &RenderOptions,
    mut sink: impl FnMut(DeclarativeConfig) -> Result<(), BundleError>,
) -> Result<(), BundleError> {
    let threads = crate::parallel::cores();
    let mut index = 0;
    while index < inputs.len() {
        let input = &inputs[index];
        if !input.exists() {
            return Err(input_error(input, "no such file or directory"));
        }
        if is_bundle_dir(input) {
            index += render_bundle_dirs(&inputs[index..], options, threads, |bundle| {
                sink(DeclarativeConfig {
                    bundles: vec![bundle?],
                    ..Default::default()
                })
            })?;
            continue;
        }
        if input.is_dir() && has_bundle_subdirs(input) {
            sink(render_package_dir(input, options)?)?;
        } else {
            sink(load_path(input)?)?;
        }
        index += 1;
    }
    Ok(())
}

/// Reads and renders the bundle directories `inputs` starts with on `threads + 1` workers,
/// handing each result to `sink` in input order on the calling thread, which writes while
/// the workers go on; returns how many inputs that run took. Each input is looked at as it
/// is handed out, so the checks overlap the work instead of delaying its start.
/// Threads take the next directory as they finish one, since bundle sizes vary a lot; at
/// most a few bundles per thread wait for their turn, so memory stays bounded.
fn render_bundle_dirs(
    inputs: &[PathBuf],
    options: &RenderOptions,
    threads: usize,
    sink: impl FnMut(Result<Bundle, BundleError>) -> Result<(), BundleError>,
) -> Result<usize, BundleError> {
    let memo = ManifestMemo::new(MANIFEST_MEMO_BYTES);
    let render_one = |dir: &PathBuf| {
        // A panic is this bundle's error, not the end of the render.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_bundle_with(dir, Some(&memo)).and_then(|b| render_bundle(&b, options))
        }))
        .unwrap_or_else(|_| Err(input_error(dir, "rendering panicked")))
    };
    // One worker more than cores keeps the cores busy while a worker waits (on a file, or
    // on a manifest another worker is parsing); the writing thread needs little.
    let mut run = 0;
    crate::parallel::map_in_order(
        (threads + 1).min(inputs.len()),
        threads * 8,
        |push| {
            for dir in inputs.iter().take_while(|p| is_bundle_dir(p)) {
                run += 1;
                push(dir)?;
            }
            Ok(())
        },
        render_one,
        sink,
    )?;
    Ok(run)
}

fn has_bundle_subdirs(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .any(|e| is_bundle_dir(&e.path()))
        })
        .unwrap_or(false)
}

fn gvk_value(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "kind": kind, "version": version })
}

/// APIs named by the CSV (`owned` or `required`), as `olm.gvk` values. The group of a CRD
/// is the part of its name after the plural.
fn csv_apis(csv: &Value, which: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for crd in csv["spec"]["customresourcedefinitions"][which]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = crd["name"].as_str().unwrap_or_default();
        let group = name.split_once('.').map(|(_, g)| g).unwrap_or_default();
        out.push(gvk_value(
            group,
            crd["version"].as_str().unwrap_or_default(),
            crd["kind"].as_str().unwrap_or_default(),
        ));
    }
    out.extend(api_services(csv, which));
    out
}

/// Every version of every CRD shipped in the bundle, as opm provides them (whatever the
/// CSV's `owned` list says): `spec.versions[].name`, and v1beta1's single `spec.version`.
fn crd_apis(dir: &BundleDir) -> Vec<Value> {
    let mut out = Vec::new();
    for crd in dir.crds() {
        let spec = &crd.object["spec"];
        let group = spec["group"].as_str().unwrap_or_default();
        let kind = spec["names"]["kind"].as_str().unwrap_or_default();
        let versions = spec["versions"].as_array().into_iter().flatten();
        for version in versions.map(|v| &v["name"]).chain([&spec["version"]]) {
            if let Some(version) = version.as_str().filter(|v| !v.is_empty()) {
                out.push(gvk_value(group, version, kind));
            }
        }
    }
    out
}

/// The CSV's `apiservicedefinitions` (`owned` or `required`) as `olm.gvk` values.
fn api_services(csv: &Value, which: &str) -> Vec<Value> {
    csv["spec"]["apiservicedefinitions"][which]
        .as_array()
        .into_iter()
        .flatten()
        .map(|api| {
            gvk_value(
                api["group"].as_str().unwrap_or_default(),
                api["version"].as_str().unwrap_or_default(),
                api["kind"].as_str().unwrap_or_default(),
            )
        })
        .collect()
}

fn sort_dedup(values: &mut Vec<Value>) {
    values.sort_by_key(std::string::ToString::to_string);
    values.dedup();
}

/// Appends each property not yet listed: opm keeps alike properties once, whether from
/// `metadata/properties.yaml` (lightbits-operator lists three `relatedImage` entries whose
/// value is missing, so alike) or from the CSV's `olm.properties` annotation.
fn add_distinct(properties: &mut Vec<Property>, more: impl IntoIterator<Item = Property>) {
    for p in more {
        if !properties.contains(&p) {
            properties.push(p);
        }
    }
}

/// One bundle directory → `olm.bundle`.
pub fn render_bundle(dir: &BundleDir, options: &RenderOptions) -> Result<Bundle, BundleError> {
    if let Some(first) = dir.warnings.first() {
        if options.strict {
            return Err(input_error(
                &first.file,
                format!("{} (--strict)", first.message),
            ));
        }
        for w in &dir.warnings {
            eprintln!("warning: {w}");
        }
    }
    let csv = dir.csv().ok_or_else(|| {
        input_error(
            &dir.path,
            "bundle has no (or more than one) ClusterServiceVersion",
        )
    })?;
    let package = dir.package().to_string();
    if package.is_empty() {
        return Err(input_error(
            &dir.path,
            "metadata/annotations.yaml does not name the package",
        ));
    }
    let name = dir.csv_name().to_string();
    let version = dir.version().to_string();
    let mut properties = vec![Property::new(
        PROP_PACKAGE,
        json!({ "packageName": package, "version": version }),
    )];

    let mut provided = crd_apis(dir);
    provided.extend(api_services(&csv.object, "owned"));
    sort_dedup(&mut provided);
    properties.extend(provided.into_iter().map(|v| Property::new(PROP_GVK, v)));

    let mut required = csv_apis(&csv.object, "required");
    let mut other_dependencies = Vec::new();
    for dependency in &dir.dependencies {
        match dependency.type_.as_str() {
            PROP_PACKAGE => properties.push(Property::new(
                PROP_PACKAGE_REQUIRED,
                json!({
                    "packageName": dependency.value["packageName"],
                    "versionRange": dependency.value["version"],
                }),
            )),
            PROP_GVK => required.push(gvk_value(
                dependency.value["group"].as_str().unwrap_or_default(),
                dependency.value["version"].as_str().unwrap_or_default(),
                dependency.value["kind"].as_str().unwrap_or_default(),
            )),
            _ => other_dependencies.push(dependency.clone()),
        }
    }
    sort_dedup(&mut required);
    properties.extend(
        required
            .into_iter()
            .map(|v| Property::new(PROP_GVK_REQUIRED, v)),
    );
    properties.extend(other_dependencies);
    add_distinct(&mut properties, dir.properties.iter().cloned());
    // Properties declared in the CSV's `olm.properties` annotation (a JSON list).
    if let Some(text) = csv.object["metadata"]["annotations"]["olm.properties"].as_str() {
        let declared: Vec<Property> = serde_json::from_str(text).map_err(|e| {
            input_error(
                &csv.file,
                format!(
                    "CSV {name:?}: annotation olm.properties is not a JSON list of properties: {e}"
                ),
            )
        })?;
        add_distinct(&mut properties, declared);
    }
    for manifest in &dir.manifests {
        let data = manifest.bundle_object_data();
        properties.push(Property::new(PROP_BUNDLE_OBJECT, json!({ "data": data })));
    }

    let image = options.image_for(&package, &name, &version);
    Ok(Bundle {
        schema: SCHEMA_BUNDLE.into(),
        name,
        package,
        related_images: related_images(&csv.object, &image),
        image,
        properties,
    })
}

/// `ci.yaml` of a community-operators package folder.
fn read_update_graph(dir: &Path) -> Result<UpdateGraph, BundleError> {
    let ci = dir.join("ci.yaml");
    if !ci.is_file() {
        return Ok(UpdateGraph::Replaces);
    }
    let text = std::fs::read_to_string(&ci).map_err(|e| input_error(&ci, e.to_string()))?;
    let value: Value = crate::catalog::text::yaml_nesting::from_str(&text)
        .map_err(|e| input_error(&ci, format!("malformed YAML: {e}")))?;
    match value.get("updateGraph").and_then(Value::as_str) {
        None => Ok(UpdateGraph::Replaces),
        Some(mode) => UpdateGraph::parse(mode)
            .ok_or_else(|| input_error(&ci, format!("unknown updateGraph {mode:?}"))),
    }
}

/// Every package folder directly below `dir` (the community-operators layout), rendered
/// into one catalog, in name order. Empty when `dir` holds no package folders.
pub fn render_package_folders(
    dir: &Path,
    options: &RenderOptions,
) -> Result<DeclarativeConfig, BundleError> {
    let mut packages: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| input_error(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && has_bundle_subdirs(p))
        .collect();
    packages.sort();
    let mut out = DeclarativeConfig::default();
    for package in packages {
        out.merge(render_package_dir(&package, options)?);
    }
    Ok(out)
}

/// The catalog template a community-operators package publishes with, when its `ci.yaml`
/// says `fbc: {enabled: true, catalog_mapping: […]}`: the newest mapping's template file.
fn fbc_template(dir: &Path) -> Result<Option<(PathBuf, String)>, BundleError> {
    let ci = dir.join("ci.yaml");
    if !ci.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&ci).map_err(|e| input_error(&ci, e.to_string()))?;
    let value: Value = crate::catalog::text::yaml_nesting::from_str(&text)
        .map_err(|e| input_error(&ci, format!("malformed YAML: {e}")))?;
    let fbc = &value["fbc"];
    if fbc["enabled"] != Value::Bool(true) {
        return Ok(None);
    }
    let Some(mapping) = fbc["catalog_mapping"].as_array().and_then(|m| m.last()) else {
        return Ok(None);
    };
    let name = mapping["template_name"]
        .as_str()
        .ok_or_else(|| input_error(&ci, "fbc.catalog_mapping entry without template_name"))?;
    let kind = mapping["type"]
        .as_str()
        .unwrap_or("olm.template.basic")
        .to_string();
    Ok(Some((dir.join("catalog-templates").join(name), kind)))
}

/// Why a template's bundle image has no bundle directory to render.
#[derive(Debug, thiserror::Error)]
enum ImageBundleError {
    #[error("image {0:?} has no tag")]
    NoTag(String),
    #[error("image {image:?}: no bundle directory {}", .dir.display())]
    NoDirectory { image: String, dir: PathBuf },
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// Renders a bundle named by image in a community-operators template: the image's tag is
/// the bundle's directory name (`…/<package>:<version>` → `<dir>/<version>`).
fn bundle_for_image(
    dir: &Path,
    image: &str,
    options: &RenderOptions,
) -> Result<Bundle, ImageBundleError> {
    let tag = image
        .rsplit_once(':')
        .map(|(_, t)| t)
        .filter(|t| !t.contains('/'))
        .ok_or_else(|| ImageBundleError::NoTag(image.into()))?;
    let bundle_dir = dir.join(tag);
    if !is_bundle_dir(&bundle_dir) {
        return Err(ImageBundleError::NoDirectory {
            image: image.into(),
            dir: bundle_dir,
        });
    }
    let bundle = read_bundle(&bundle_dir)?;
    let mut rendered = render_bundle(&bundle, options)?;
    rendered.image = image.to_string();
    Ok(rendered)
}

/// A package whose channels are defined by a catalog template rather than by its CSVs.
fn render_package_template(
    dir: &Path,
    template: &Path,
    kind: &str,
    options: &RenderOptions,
) -> Result<DeclarativeConfig, BundleError> {
    let text =
        std::fs::read_to_string(template).map_err(|e| input_error(template, e.to_string()))?;
    let mut resolve = |image: &str| bundle_for_image(dir, image, options);
    match kind {
        "olm.semver" => crate::catalog::template::semver::parse(&text)
            .and_then(|t| crate::catalog::template::semver::render(&t, &mut resolve))
            .map_err(|e| input_error(template, e.to_string())),
        "olm.template.basic" => {
            let value: Value = crate::catalog::text::yaml_nesting::from_str(&text)
                .map_err(|e| input_error(template, format!("malformed YAML: {e}")))?;
            let entries = value
                .get("entries")
                .and_then(Value::as_array)
                .ok_or_else(|| input_error(template, "basic template without entries"))?;
            let mut out = DeclarativeConfig::default();
            let mut blobs = String::new();
            for entry in entries {
                if entry["schema"] == SCHEMA_BUNDLE && entry.get("properties").is_none() {
                    // Images pinned by digest cannot be mapped to a directory offline; those
                    // bundles are found by the channel entries' names below.
                    if let Ok(bundle) = resolve(entry["image"].as_str().unwrap_or_default()) {
                        out.bundles.push(bundle);
                    }
                } else {
                    blobs.push_str(&serde_json::to_string(entry).expect("JSON value serializes"));
                    blobs.push('\n');
                }
            }
            out.merge(crate::catalog::reading::load::load_str(template, &blobs)?);
            let wanted: std::collections::BTreeSet<String> = out
                .channels
                .iter()
                .flat_map(|c| c.entries.iter().map(|e| e.name.clone()))
                .collect();
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|n| !out.bundles.iter().any(|b| &&b.name == n))
                .collect();
            if !missing.is_empty() {
                for path in std::fs::read_dir(dir)
                    .map_err(|e| input_error(dir, e.to_string()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                {
                    if !is_bundle_dir(&path) {
                        continue;
                    }
                    let bundle = read_bundle(&path)?;
                    if missing.iter().any(|n| *n == bundle.csv_name()) {
                        out.bundles.push(render_bundle(&bundle, options)?);
                    }
                }
            }
            Ok(out)
        }
        other => Err(input_error(
            template,
            format!("unsupported template type {other:?}"),
        )),
    }
}

/// A folder of bundle directories → one package with its channels: from its catalog
/// template when `ci.yaml` names one, else from the bundles' CSVs and annotations.
pub fn render_package_dir(
    dir: &Path,
    options: &RenderOptions,
) -> Result<DeclarativeConfig, BundleError> {
    if let Some((template, kind)) = fbc_template(dir)? {
        return render_package_template(dir, &template, &kind, options);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| input_error(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_bundle_dir(p))
        .collect();
    entries.sort();
    // Read on every core, in order; the memo spares re-parsing the CRDs that each
    // version ships again. The first unreadable directory (in order) stops the read.
    let memo = ManifestMemo::new(MANIFEST_MEMO_BYTES);
    let cores = crate::parallel::cores();
    let mut bundle_dirs = Vec::with_capacity(entries.len());
    crate::parallel::map_in_order(
        cores.min(entries.len()),
        cores * 3,
        |push| entries.iter().try_for_each(push),
        |p| read_bundle_with(p, Some(&memo)),
        |bundle| {
            bundle_dirs.push(bundle?);
            Ok::<_, BundleError>(())
        },
    )?;
    render_package(dir, &bundle_dirs, read_update_graph(dir)?, options)
}

/// Bundles of one package → `olm.package` + `olm.channel`s + `olm.bundle`s.
pub fn render_package(
    dir: &Path,
    bundles: &[BundleDir],
    graph: UpdateGraph,
    options: &RenderOptions,
) -> Result<DeclarativeConfig, BundleError> {
    let mut out = DeclarativeConfig::default();
    let mut with_versions = Vec::new();
    for b in bundles {
        let version = parse_version(b.version()).map_err(|e| {
            input_error(
                &b.path,
                format!(
                    "CSV {:?}: spec.version {:?} is not semver: {e}",
                    b.csv_name(),
                    b.version()
                ),
            )
        })?;
        with_versions.push((version, b));
    }
    with_versions.sort_by(|a, b| a.0.cmp_precedence(&b.0));
    let package = one_package(dir, bundles)?;
    let newest = with_versions
        .last()
        .map(|(_, b)| *b)
        .ok_or_else(|| input_error(dir, "no bundles"))?;

    let mut channels: BTreeMap<String, Vec<(semver::Version, &BundleDir)>> = BTreeMap::new();
    for (version, b) in &with_versions {
        for c in b.channels() {
            channels.entry(c).or_default().push((version.clone(), *b));
        }
    }
    // The newest bundle that declares a default channel decides, as upstream's registry did.
    let default_channel = with_versions
        .iter()
        .rev()
        .find_map(|(_, b)| b.default_channel().map(String::from))
        .or_else(|| {
            channels
                .keys()
                .next()
                .filter(|_| channels.len() == 1)
                .cloned()
        })
        .unwrap_or_default();

    let (icon, description) = newest
        .csv()
        .map(|csv| package_display(&csv.object))
        .unwrap_or_default();
    out.packages.push(Package {
        schema: SCHEMA_PACKAGE.into(),
        name: package.clone(),
        default_channel,
        icon,
        description,
        properties: Vec::new(),
    });

    for (name, members) in &channels {
        let entries = match graph {
            UpdateGraph::Replaces => members
                .iter()
                .map(|(_, b)| ChannelEntry {
                    name: b.csv_name().to_string(),
                    replaces: b.replaces().to_string(),
                    skips: b.skips(),
                    skip_range: b.skip_range().to_string(),
                })
                .collect(),
            UpdateGraph::Semver | UpdateGraph::SemverSkipPatch => semver_entries(members, graph),
        };
        out.channels.push(Channel {
            schema: SCHEMA_CHANNEL.into(),
            name: name.clone(),
            package: package.clone(),
            entries,
            properties: Vec::new(),
        });
    }
    for (_, b) in &with_versions {
        out.bundles.push(render_bundle(b, options)?);
    }
    Ok(out)
}

/// The one package `bundles` name; a package folder holds one.
fn one_package(dir: &Path, bundles: &[BundleDir]) -> Result<String, BundleError> {
    let packages: std::collections::BTreeSet<&str> = bundles
        .iter()
        .map(super::bundle::BundleDir::package)
        .collect();
    match packages.iter().collect::<Vec<_>>().as_slice() {
        [one] => Ok(one.to_string()),
        _ => Err(input_error(
            dir,
            format!(
                "bundles name {} packages ({:?}); a package folder holds one",
                packages.len(),
                packages
            ),
        )),
    }
}

/// Version-ordered edges: each entry replaces the one before it; CSV skips and skipRange stay.
fn semver_entries(
    members: &[(semver::Version, &BundleDir)],
    graph: UpdateGraph,
) -> Vec<ChannelEntry> {
    let mut entries = Vec::new();
    for (i, (version, b)) in members.iter().enumerate() {
        let mut entry = ChannelEntry {
            name: b.csv_name().to_string(),
            replaces: String::new(),
            skips: b.skips(),
            skip_range: b.skip_range().to_string(),
        };
        if i > 0 {
            match graph {
                UpdateGraph::SemverSkipPatch => {
                    // Replace the newest bundle of an older minor; skip older patches of ours.
                    let older_patches: Vec<String> = members[..i]
                        .iter()
                        .filter(|(v, _)| v.major == version.major && v.minor == version.minor)
                        .map(|(_, o)| o.csv_name().to_string())
                        .collect();
                    let previous_minor = members[..i]
                        .iter()
                        .rev()
                        .find(|(v, _)| (v.major, v.minor) != (version.major, version.minor));
                    if let Some((_, p)) = previous_minor {
                        entry.replaces = p.csv_name().to_string();
                    } else if let Some(last) = older_patches.last() {
                        entry.replaces = last.clone();
                    }
                    for s in older_patches {
                        if s != entry.replaces && !entry.skips.contains(&s) {
                            entry.skips.push(s);
                        }
                    }
                }
                _ => entry.replaces = members[i - 1].1.csv_name().to_string(),
            }
        }
        entries.push(entry);
    }
    entries
}
