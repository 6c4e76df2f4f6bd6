//! Upstream's ConfigMap catalog format (CatalogSource `sourceType: configmap`, or its
//! deprecated alias `internal`), as upstream's e2e tests write it.
//!
//! The ConfigMap's `data` holds three YAML lists:
//! - `customResourceDefinitions`: CRD objects;
//! - `clusterServiceVersions`: CSV objects;
//! - `packages`: `{packageName, channels: [{name, currentCSV}], defaultChannel}`.
//!
//! Upstream (operator-registry's `ConfigMapLoader`, run by the `configmap-server` pod OLM
//! starts for such a catalog, without `--permissive`, so any load error is fatal) turns them
//! into a catalog this way, and so does [`from_configmap_data`]:
//! - Each CSV is a bundle, with the CRDs its `spec.customresourcedefinitions.owned` names
//!   (matched by plural, group, version and kind; a missing one is an error). Unowned CRDs
//!   are ignored. Two CRDs defining the same group/version/kind are an error.
//! - A bundle provides every version of its CRDs (as upstream's `Bundle.ProvidedAPIs` reads
//!   them from the CRD objects) plus what its CSV owns; its CSV's required CRDs and
//!   APIServices become `olm.gvk.required`; the `olm.properties` annotation adds properties.
//! - A channel is the `spec.replaces` chain from its `currentCSV`; every bundle on it keeps its
//!   `spec.skips` and `olm.skipRange` annotation, and skipped CSVs present in the ConfigMap join
//!   the channel (without edges of their own). A chain through a CSV that is not in the
//!   ConfigMap, or a cycle, is an error.
//! - The default channel is `defaultChannel` when it names a channel, else the only channel;
//!   a package with several channels and none of them default is an error.
//! - CSVs no channel reaches are left out (upstream keeps them in its database, where no
//!   query finds them).
//!
//! ConfigMap catalogs have no bundle images: each bundle carries its CSV and CRDs as
//! `olm.bundle.object` properties, so it can be installed from the catalog alone.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::bundle::{ANNOTATION_PACKAGE, BundleDir, Manifest, SKIP_RANGE_ANNOTATION};
use super::csv::package_display;
use super::fbc::*;
use super::go_json;
use super::render::{RenderError, RenderOptions, render_bundle};

pub const KEY_CRDS: &str = "customResourceDefinitions";
pub const KEY_CSVS: &str = "clusterServiceVersions";
pub const KEY_PACKAGES: &str = "packages";

/// Why a ConfigMap's data is not a catalog; every variant names the data key, and the list
/// item (index and name) where there is one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigMapCatalogError {
    #[error("the ConfigMap data has no {key:?} key")]
    MissingKey { key: &'static str },
    #[error("{key}: malformed YAML{}: {message}", at_line(*.line))]
    Yaml {
        key: &'static str,
        line: Option<usize>,
        message: String,
    },
    #[error("{key}: expected a YAML list, found {found}")]
    NotAList { key: &'static str, found: String },
    #[error("{key}[{index}]{}: {message}", named(.name))]
    Item {
        key: &'static str,
        index: usize,
        /// The item's name (CSV or CRD `metadata.name`, `packageName`), when it has one.
        name: Option<String>,
        message: String,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}

fn named(name: &Option<String>) -> String {
    name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
}

type Error = ConfigMapCatalogError;

fn item_error(key: &'static str, index: usize, name: &str, message: impl fmt::Display) -> Error {
    Error::Item {
        key,
        index,
        name: (!name.is_empty()).then(|| name.to_string()),
        message: message.to_string(),
    }
}

/// The ConfigMap's `data` → a catalog (see the module documentation for the rules).
pub fn from_configmap_data(data: &BTreeMap<String, String>) -> Result<DeclarativeConfig, Error> {
    let crd_items = parse_list(data, KEY_CRDS)?;
    let csv_items = parse_list(data, KEY_CSVS)?;
    let package_items = parse_list(data, KEY_PACKAGES)?;

    // CRDs by (group, version, kind, plural), one key per version.
    let mut crds: Vec<Crd> = Vec::with_capacity(crd_items.len());
    let mut crd_by_key: HashMap<ApiKey, usize> = HashMap::new();
    for (index, item) in crd_items.into_iter().enumerate() {
        let crd = Crd::parse(index, item)?;
        for version in &crd.versions {
            let key = ApiKey {
                group: crd.group.clone(),
                version: version.clone(),
                kind: crd.kind.clone(),
                plural: crd.plural.clone(),
            };
            if let Some(&other) = crd_by_key.get(&key) {
                return Err(item_error(
                    KEY_CRDS,
                    index,
                    &crd.name,
                    format!(
                        "{} is already defined by {KEY_CRDS}[{other}]; a CRD can be added only once",
                        key
                    ),
                ));
            }
            crd_by_key.insert(key, crds.len());
        }
        crds.push(crd);
    }

    // CSVs by name, each with the CRDs it owns.
    let mut csvs: Vec<Csv> = Vec::with_capacity(csv_items.len());
    let mut csv_by_name: HashMap<String, usize> = HashMap::new();
    for (index, item) in csv_items.into_iter().enumerate() {
        let csv = Csv::parse(index, item, &crd_by_key)?;
        if let Some(&other) = csv_by_name.get(&csv.name) {
            return Err(item_error(
                KEY_CSVS,
                index,
                &csv.name,
                format!("{KEY_CSVS}[{}] has the same name", csvs[other].index),
            ));
        }
        csv_by_name.insert(csv.name.clone(), csvs.len());
        csvs.push(csv);
    }

    // Packages and their channels.
    let mut out = DeclarativeConfig::default();
    let mut member_of: HashMap<usize, (usize, String)> = HashMap::new();
    let mut seen_packages: HashMap<String, usize> = HashMap::new();
    for (index, item) in package_items.into_iter().enumerate() {
        let manifest = PackageManifest::parse(index, &item)?;
        let err = |message: String| item_error(KEY_PACKAGES, index, &manifest.name, message);
        if let Some(other) = seen_packages.insert(manifest.name.clone(), index) {
            return Err(err(format!(
                "{KEY_PACKAGES}[{other}] defines the same package"
            )));
        }
        let default_channel = manifest.default_channel().map_err(err)?;
        let mut channel_names = HashSet::new();
        for (name, current) in &manifest.channels {
            if !channel_names.insert(name.as_str()) {
                return Err(err(format!("channel {name:?} is listed twice")));
            }
            let (entries, members) = channel_entries(&csvs, &csv_by_name, current)
                .map_err(|m| err(format!("channel {name:?}: {m}")))?;
            for m in members {
                match member_of.get(&m) {
                    Some((p, other)) if *p != index => {
                        return Err(item_error(
                            KEY_CSVS,
                            csvs[m].index,
                            &csvs[m].name,
                            format!(
                                "the channels of packages {other:?} and {:?} both reach it; a CSV belongs to one package",
                                manifest.name
                            ),
                        ));
                    }
                    _ => {
                        member_of.insert(m, (index, manifest.name.clone()));
                    }
                }
            }
            out.channels.push(Channel {
                schema: SCHEMA_CHANNEL.into(),
                name: name.clone(),
                package: manifest.name.clone(),
                entries,
                properties: Vec::new(),
            });
        }
        // Icon and description from the default channel's head, as upstream's conversion
        // of such a registry to a file-based catalog takes the icon.
        let head = manifest
            .channels
            .iter()
            .find(|(name, _)| *name == default_channel)
            .and_then(|(_, current)| csv_by_name.get(current))
            .map(|&i| &csvs[i].object);
        let (icon, description) = head.map(package_display).unwrap_or_default();
        out.packages.push(Package {
            schema: SCHEMA_PACKAGE.into(),
            name: manifest.name.clone(),
            default_channel,
            icon,
            description,
            properties: Vec::new(),
        });
    }

    // Bundles, in the order of the CSV list.
    for (i, csv) in csvs.iter().enumerate() {
        let Some((_, package)) = member_of.get(&i) else {
            continue;
        };
        let owned: Vec<&Crd> = csv.owned_crds.iter().map(|&c| &crds[c]).collect();
        out.bundles.push(csv.to_bundle(package, &owned)?);
    }
    Ok(out)
}

/// A key's YAML list; an empty value is an empty list (as upstream reads it).
fn parse_list(data: &BTreeMap<String, String>, key: &'static str) -> Result<Vec<Value>, Error> {
    let text = data.get(key).ok_or(Error::MissingKey { key })?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: Value = serde_yaml::from_str(text).map_err(|e| {
        let location = e.location();
        let mut message = e.to_string();
        if let Some(l) = &location {
            // The line is in the error already; drop the message's own mention of it.
            let at = format!(" at line {} column {}", l.line(), l.column());
            message = message.replacen(&at, "", 1);
        }
        Error::Yaml {
            key,
            line: location.map(|l| l.line()),
            message,
        }
    })?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => Ok(items),
        other => Err(Error::NotAList {
            key,
            found: json_kind(&other).into(),
        }),
    }
}

/// An optional string field: absent and null read as "".
fn opt_str(map: Option<&Map<String, Value>>, key: &str) -> Result<String, String> {
    match map.and_then(|m| go_json::get(m, key)) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("{key} must be a string, not {}", json_kind(other))),
    }
}

fn opt_object<'a>(
    map: Option<&'a Map<String, Value>>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    map.and_then(|m| go_json::get(m, key))
        .and_then(Value::as_object)
}

fn opt_list<'a>(map: Option<&'a Map<String, Value>>, key: &str) -> Result<&'a [Value], String> {
    match map.and_then(|m| go_json::get(m, key)) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(format!("{key} must be a list, not {}", json_kind(other))),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ApiKey {
    group: String,
    version: String,
    kind: String,
    plural: String,
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} (version {}, kind {})",
            self.plural, self.group, self.version, self.kind
        )
    }
}

struct Crd {
    name: String,
    group: String,
    kind: String,
    plural: String,
    versions: Vec<String>,
    object: Value,
}

impl Crd {
    fn parse(index: usize, object: Value) -> Result<Crd, Error> {
        let Some(map) = object.as_object() else {
            return Err(item_error(
                KEY_CRDS,
                index,
                "",
                format!("expected a CRD object, found {}", json_kind(&object)),
            ));
        };
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let name = opt_str(metadata, "name").unwrap_or_default();
        let err = |m: String| item_error(KEY_CRDS, index, &name, m);
        let spec = go_json::get(map, "spec").and_then(Value::as_object);
        let names = opt_object(spec, "names");
        let group = opt_str(spec, "group").map_err(|m| err(format!("spec.{m}")))?;
        let kind = opt_str(names, "kind").map_err(|m| err(format!("spec.names.{m}")))?;
        let plural = opt_str(names, "plural").map_err(|m| err(format!("spec.names.{m}")))?;
        let mut versions = Vec::new();
        for v in opt_list(spec, "versions").map_err(|m| err(format!("spec.{m}")))? {
            let version =
                opt_str(v.as_object(), "name").map_err(|m| err(format!("spec.versions[].{m}")))?;
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        // apiextensions v1beta1's single `spec.version`.
        let legacy = opt_str(spec, "version").map_err(|m| err(format!("spec.{m}")))?;
        if !legacy.is_empty() && !versions.contains(&legacy) {
            versions.push(legacy);
        }
        Ok(Crd {
            name,
            group,
            kind,
            plural,
            versions,
            object,
        })
    }
}

struct Csv {
    index: usize,
    name: String,
    object: Value,
    replaces: String,
    skips: Vec<String>,
    skip_range: String,
    /// Indexes into the CRD list, each once, in `owned` order.
    owned_crds: Vec<usize>,
}

/// `<plural>.<group>` of a CSV's CRD description.
fn split_crd_name(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
}

impl Csv {
    fn parse(index: usize, mut object: Value, crds: &HashMap<ApiKey, usize>) -> Result<Csv, Error> {
        let Some(map) = object.as_object_mut() else {
            return Err(item_error(
                KEY_CSVS,
                index,
                "",
                format!(
                    "expected a ClusterServiceVersion object, found {}",
                    json_kind(&object)
                ),
            ));
        };
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let name = opt_str(metadata, "name").unwrap_or_default();
        let err = |m: String| item_error(KEY_CSVS, index, &name, m);
        if name.is_empty() {
            return Err(err("metadata.name is missing; a CSV needs a name".into()));
        }
        // Upstream's e2e CSVs carry their type; fill it in when a hand-written one does not,
        // so the object can be applied as it is.
        match go_json::get(map, "kind") {
            None | Some(Value::Null) => {
                map.insert("kind".into(), json!("ClusterServiceVersion"));
                map.entry("apiVersion")
                    .or_insert_with(|| json!("operators.coreos.com/v1alpha1"));
            }
            Some(Value::String(k)) if k == "ClusterServiceVersion" => {}
            Some(other) => {
                return Err(err(format!(
                    "kind is {other}, expected \"ClusterServiceVersion\""
                )));
            }
        }
        let map = &*map;
        let metadata = go_json::get(map, "metadata").and_then(Value::as_object);
        let spec = go_json::get(map, "spec").and_then(Value::as_object);
        let version = match spec.and_then(|s| go_json::get(s, "version")) {
            None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
            Some(other) => Err(err(format!(
                "spec.version must be a string, not {}",
                json_kind(other)
            ))),
        };
        version?;
        let replaces = opt_str(spec, "replaces").map_err(|m| err(format!("spec.{m}")))?;
        let mut skips = Vec::new();
        for s in opt_list(spec, "skips").map_err(|m| err(format!("spec.{m}")))? {
            match s.as_str() {
                Some(s) => skips.push(s.to_string()),
                None => return Err(err("spec.skips must be a list of CSV names".into())),
            }
        }
        let annotations = opt_object(metadata, "annotations");
        let skip_range = opt_str(annotations, SKIP_RANGE_ANNOTATION)
            .map_err(|m| err(format!("metadata.annotations.{m}")))?;

        let descriptions = opt_object(spec, "customresourcedefinitions");
        let mut owned_crds = Vec::new();
        for owned in opt_list(descriptions, "owned")
            .map_err(|m| err(format!("spec.customresourcedefinitions.{m}")))?
        {
            let o = owned.as_object();
            let crd_name = opt_str(o, "name").unwrap_or_default();
            let Some((plural, group)) = split_crd_name(&crd_name) else {
                return Err(err(format!(
                    "owned CRD name {crd_name:?} is not <plural>.<group>"
                )));
            };
            let key = ApiKey {
                group: group.to_string(),
                version: opt_str(o, "version").unwrap_or_default(),
                kind: opt_str(o, "kind").unwrap_or_default(),
                plural: plural.to_string(),
            };
            let Some(&crd) = crds.get(&key) else {
                return Err(err(format!("owned CRD {key} is not among {KEY_CRDS}")));
            };
            if !owned_crds.contains(&crd) {
                owned_crds.push(crd);
            }
        }
        for required in opt_list(descriptions, "required")
            .map_err(|m| err(format!("spec.customresourcedefinitions.{m}")))?
        {
            let crd_name = opt_str(required.as_object(), "name").unwrap_or_default();
            if split_crd_name(&crd_name).is_none() {
                return Err(err(format!(
                    "required CRD name {crd_name:?} is not <plural>.<group>"
                )));
            }
        }
        Ok(Csv {
            index,
            name,
            replaces,
            skips,
            skip_range,
            owned_crds,
            object,
        })
    }

    /// The bundle: the CSV and its owned CRDs, with properties as `opm render` gives a
    /// registry+v1 bundle of the same manifests.
    fn to_bundle(&self, package: &str, owned: &[&Crd]) -> Result<Bundle, Error> {
        let file = PathBuf::from(format!("{KEY_CSVS}[{}]", self.index));
        let mut manifests = vec![Manifest {
            file: file.clone(),
            object: self.object.clone(),
        }];
        manifests.extend(owned.iter().map(|crd| Manifest {
            file: file.clone(),
            object: crd.object.clone(),
        }));
        let dir = BundleDir {
            path: file,
            annotations: BTreeMap::from([(ANNOTATION_PACKAGE.to_string(), package.to_string())]),
            manifests,
            dependencies: Vec::new(),
            properties: Vec::new(),
        };
        let mut bundle = render_bundle(&dir, &RenderOptions::default()).map_err(|e| {
            let message = match e {
                RenderError::Input { message, .. } => message,
                other => other.to_string(),
            };
            item_error(KEY_CSVS, self.index, &self.name, message)
        })?;
        // Every version of an owned CRD is provided, not only the one the CSV describes.
        let mut extra: Vec<Value> = Vec::new();
        for crd in owned {
            for version in &crd.versions {
                let value = json!({ "group": crd.group, "kind": crd.kind, "version": version });
                let known = bundle
                    .properties
                    .iter()
                    .any(|p| p.type_ == PROP_GVK && p.value == value);
                if !known && !extra.contains(&value) {
                    extra.push(value);
                }
            }
        }
        if !extra.is_empty() {
            let at = bundle
                .properties
                .iter()
                .rposition(|p| p.type_ == PROP_GVK || p.type_ == PROP_PACKAGE)
                .map_or(0, |i| i + 1);
            let added = extra.into_iter().map(|v| Property::new(PROP_GVK, v));
            bundle.properties.splice(at..at, added);
        }
        Ok(bundle)
    }
}

struct PackageManifest {
    name: String,
    default_channel: String,
    /// (name, currentCSV), in the listed order.
    channels: Vec<(String, String)>,
}

impl PackageManifest {
    fn parse(index: usize, item: &Value) -> Result<PackageManifest, Error> {
        let Some(map) = item.as_object() else {
            return Err(item_error(
                KEY_PACKAGES,
                index,
                "",
                format!("expected a package manifest, found {}", json_kind(item)),
            ));
        };
        let name = opt_str(Some(map), "packageName").unwrap_or_default();
        let err = |m: String| item_error(KEY_PACKAGES, index, &name, m);
        if name.is_empty() {
            return Err(err("packageName is missing".into()));
        }
        let default_channel = opt_str(Some(map), "defaultChannel").map_err(err)?;
        let mut channels = Vec::new();
        for (i, c) in opt_list(Some(map), "channels")
            .map_err(err)?
            .iter()
            .enumerate()
        {
            let Some(c) = c.as_object() else {
                return Err(err(format!("channels[{i}] is not a mapping")));
            };
            let channel =
                opt_str(Some(c), "name").map_err(|m| err(format!("channels[{i}].{m}")))?;
            let current =
                opt_str(Some(c), "currentCSV").map_err(|m| err(format!("channels[{i}].{m}")))?;
            if channel.is_empty() {
                return Err(err(format!("channels[{i}] has no name")));
            }
            if current.is_empty() {
                return Err(err(format!("channel {channel:?} has no currentCSV")));
            }
            channels.push((channel, current));
        }
        Ok(PackageManifest {
            name,
            default_channel,
            channels,
        })
    }

    /// Upstream's rule: a channel is the default when it is named by `defaultChannel`, or
    /// when it is the only channel.
    fn default_channel(&self) -> Result<String, String> {
        if let Some((name, _)) = self
            .channels
            .iter()
            .find(|(name, _)| *name == self.default_channel)
        {
            return Ok(name.clone());
        }
        match self.channels.as_slice() {
            [(only, _)] => Ok(only.clone()),
            [] => Err("the package has no channels".into()),
            _ if self.default_channel.is_empty() => {
                Err("no default channel specified, and the package has several channels".into())
            }
            _ => Err(format!(
                "defaultChannel {:?} is not one of the package's channels",
                self.default_channel
            )),
        }
    }
}

/// A channel's entries: the replaces chain from `current`, then the skipped CSVs present in
/// the ConfigMap. Also returns the CSVs (indexes) that are members.
fn channel_entries(
    csvs: &[Csv],
    by_name: &HashMap<String, usize>,
    current: &str,
) -> Result<(Vec<ChannelEntry>, Vec<usize>), String> {
    let mut at = *by_name
        .get(current)
        .ok_or_else(|| format!("currentCSV {current:?} is not among {KEY_CSVS}"))?;
    let mut entries = Vec::new();
    let mut members = Vec::new();
    let mut on_chain: HashSet<&str> = HashSet::new();
    let mut chain: Vec<&str> = Vec::new();
    let mut skipped: Vec<usize> = Vec::new();
    loop {
        let csv = &csvs[at];
        on_chain.insert(&csv.name);
        chain.push(&csv.name);
        members.push(at);
        entries.push(ChannelEntry {
            name: csv.name.clone(),
            replaces: csv.replaces.clone(),
            skips: csv.skips.clone(),
            skip_range: csv.skip_range.clone(),
        });
        skipped.extend(csv.skips.iter().filter_map(|s| by_name.get(s).copied()));
        if csv.replaces.is_empty() {
            break;
        }
        if on_chain.contains(csv.replaces.as_str()) {
            return Err(format!(
                "the replaces chain has a cycle: {} -> {}",
                chain.join(" -> "),
                csv.replaces
            ));
        }
        at = *by_name.get(&csv.replaces).ok_or_else(|| {
            format!(
                "CSV {:?} replaces {:?}, which is not among {KEY_CSVS}",
                csv.name, csv.replaces
            )
        })?;
    }
    for s in skipped {
        let csv = &csvs[s];
        if on_chain.insert(&csv.name) {
            members.push(s);
            entries.push(ChannelEntry {
                name: csv.name.clone(),
                skip_range: csv.skip_range.clone(),
                ..Default::default()
            });
        }
    }
    Ok((entries, members))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::validate::validate;
    use base64::Engine;

    const FIXTURE: &str = include_str!("../../tests/catalogs/configmap/etcd.yaml");

    /// The `data` of the fixture ConfigMap.
    fn fixture() -> BTreeMap<String, String> {
        let cm: Value = serde_yaml::from_str(FIXTURE).unwrap();
        serde_json::from_value(cm["data"].clone()).unwrap()
    }

    fn with(key: &str, text: &str) -> BTreeMap<String, String> {
        let mut data = fixture();
        data.insert(key.to_string(), text.to_string());
        data
    }

    fn bundle<'a>(c: &'a DeclarativeConfig, name: &str) -> &'a Bundle {
        c.bundles.iter().find(|b| b.name == name).unwrap()
    }

    fn props(b: &Bundle, kind: &str) -> Vec<Value> {
        b.properties_of(kind).cloned().collect()
    }

    fn manifests(b: &Bundle) -> Vec<Value> {
        b.properties_of(PROP_BUNDLE_OBJECT)
            .map(|v| {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(v["data"].as_str().unwrap())
                    .unwrap();
                serde_json::from_slice(&data).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_etcd_fixture_becomes_a_valid_catalog() {
        let c = from_configmap_data(&fixture()).unwrap();
        let packages: Vec<(&str, &str)> = c
            .packages
            .iter()
            .map(|p| (p.name.as_str(), p.default_channel.as_str()))
            .collect();
        assert_eq!(packages, [("etcd", "alpha"), ("etcd-backup", "stable")]);
        let etcd = &c.packages[0];
        assert_eq!(etcd.icon.as_ref().unwrap().mediatype, "image/svg+xml");
        assert!(
            etcd.description
                .starts_with("etcd is a distributed key value store")
        );

        let channels: Vec<(&str, &str, Vec<&str>)> = c
            .channels
            .iter()
            .map(|ch| {
                (
                    ch.package.as_str(),
                    ch.name.as_str(),
                    ch.entries.iter().map(|e| e.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            channels,
            [
                (
                    "etcd",
                    "alpha",
                    vec![
                        "etcdoperator.v0.9.2",
                        "etcdoperator.v0.9.0",
                        "etcdoperator.v0.6.1",
                        "etcdoperator.v0.9.1"
                    ]
                ),
                (
                    "etcd",
                    "beta",
                    vec!["etcdoperator.v0.9.0", "etcdoperator.v0.6.1"]
                ),
                ("etcd-backup", "stable", vec!["etcd-backup.v0.1.0"]),
            ]
        );
        let alpha = &c.channels[0];
        assert_eq!(alpha.entries[0].replaces, "etcdoperator.v0.9.0");
        assert_eq!(
            alpha.entries[0].skips,
            ["etcdoperator.v0.9.1", "etcdoperator.v0.8.0"]
        );
        assert_eq!(alpha.entries[0].skip_range, ">=0.6.0 <0.9.2");
        assert_eq!(alpha.entries[1].replaces, "etcdoperator.v0.6.1");
        // A skipped CSV joins the channel without edges of its own.
        assert_eq!(
            alpha.entries[3],
            ChannelEntry {
                name: "etcdoperator.v0.9.1".into(),
                ..Default::default()
            }
        );

        // Bundles in CSV-list order; the CSV no channel reaches is left out.
        let names: Vec<&str> = c.bundles.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "etcdoperator.v0.6.1",
                "etcdoperator.v0.9.0",
                "etcdoperator.v0.9.1",
                "etcdoperator.v0.9.2",
                "etcd-backup.v0.1.0"
            ]
        );

        let v092 = bundle(&c, "etcdoperator.v0.9.2");
        assert!(v092.image.is_empty());
        assert_eq!(
            props(v092, PROP_PACKAGE),
            [json!({"packageName": "etcd", "version": "0.9.2"})]
        );
        // Both versions of the etcdclusters CRD, though the CSV describes one.
        assert_eq!(
            props(v092, PROP_GVK),
            [
                json!({"group": "etcd.database.coreos.com", "kind": "EtcdBackup", "version": "v1beta2"}),
                json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"}),
                json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta3"}),
            ]
        );
        assert!(props(v092, PROP_GVK_REQUIRED).is_empty());
        // The olm.properties annotation.
        assert_eq!(props(v092, "olm.maxOpenShiftVersion"), [json!("4.20")]);
        let objects = manifests(v092);
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "ClusterServiceVersion",
                "CustomResourceDefinition",
                "CustomResourceDefinition"
            ]
        );
        assert_eq!(objects[0]["metadata"]["name"], "etcdoperator.v0.9.2");
        assert_eq!(
            v092.related_images,
            [RelatedImage {
                name: String::new(),
                image: "quay.io/coreos/etcd-operator@sha256:c0301e4686c3ed4206e370b42de5a3bd2229b9fb4906cf85f3f30650424abec2".into()
            }]
        );

        // The required CRD of the backup operator.
        let backup = bundle(&c, "etcd-backup.v0.1.0");
        assert_eq!(
            props(backup, PROP_GVK_REQUIRED),
            [
                json!({"group": "etcd.database.coreos.com", "kind": "EtcdCluster", "version": "v1beta2"})
            ]
        );
        assert_eq!(
            props(backup, PROP_GVK),
            [json!({"group": "backup.example.com", "kind": "Snapshot", "version": "v1"})]
        );
        // A CSV without kind gets it, so it can be applied.
        assert_eq!(manifests(backup)[0]["kind"], "ClusterServiceVersion");

        let problems = validate(&c);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn empty_values_are_empty_lists_and_only_channel_is_default() {
        let mut data = BTreeMap::new();
        data.insert(KEY_CRDS.to_string(), String::new());
        data.insert(
            KEY_CSVS.to_string(),
            "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {name: p.v1}\n  spec: {version: 1.0.0, displayName: P}\n".into(),
        );
        data.insert(
            KEY_PACKAGES.to_string(),
            "- packageName: p\n  defaultChannel: nope\n  channels:\n  - {name: only, currentCSV: p.v1}\n".into(),
        );
        let c = from_configmap_data(&data).unwrap();
        assert_eq!(c.packages[0].default_channel, "only");
        assert_eq!(c.bundles.len(), 1);
        assert!(validate(&c).is_empty(), "{:#?}", validate(&c));
    }

    fn error(data: &BTreeMap<String, String>) -> String {
        from_configmap_data(data).unwrap_err().to_string()
    }

    #[test]
    fn malformed_yaml_names_the_key_and_line() {
        let e = error(&with(
            KEY_PACKAGES,
            "- packageName: etcd\n  channels:\n  - name: [alpha\n",
        ));
        assert_eq!(
            e,
            "packages: malformed YAML at line 4: did not find expected ',' or ']', while parsing a flow sequence at line 3 column 11"
        );
        let e = error(&with(KEY_CSVS, "metadata: {name: x}\n"));
        assert_eq!(
            e,
            "clusterServiceVersions: expected a YAML list, found a mapping"
        );
    }

    #[test]
    fn a_missing_key_is_named() {
        for key in [KEY_CRDS, KEY_CSVS, KEY_PACKAGES] {
            let mut data = fixture();
            data.remove(key);
            assert_eq!(
                error(&data),
                format!("the ConfigMap data has no {key:?} key")
            );
        }
    }

    #[test]
    fn an_unknown_current_csv_names_the_package_and_channel() {
        let text = fixture()[KEY_PACKAGES].replace(
            "currentCSV: etcd-backup.v0.1.0",
            "currentCSV: etcd-backup.v9",
        );
        assert_eq!(
            error(&with(KEY_PACKAGES, &text)),
            "packages[1] (etcd-backup): channel \"stable\": currentCSV \"etcd-backup.v9\" is not among clusterServiceVersions"
        );
    }

    #[test]
    fn a_csv_without_a_name_is_named_by_index() {
        let text = fixture()[KEY_CSVS].replace(
            "name: etcdoperator.v0.9.0\n",
            "generateName: etcdoperator-\n",
        );
        let e = error(&with(KEY_CSVS, &text));
        assert_eq!(
            e,
            "clusterServiceVersions[1]: metadata.name is missing; a CSV needs a name"
        );
    }

    #[test]
    fn a_replaces_chain_into_a_missing_csv_is_refused() {
        let text = fixture()[KEY_CSVS].replace(
            "replaces: etcdoperator.v0.6.1",
            "replaces: etcdoperator.v0.5.0",
        );
        assert_eq!(
            error(&with(KEY_CSVS, &text)),
            "packages[0] (etcd): channel \"alpha\": CSV \"etcdoperator.v0.9.0\" replaces \"etcdoperator.v0.5.0\", which is not among clusterServiceVersions"
        );
    }

    #[test]
    fn a_replaces_cycle_is_refused() {
        let text = fixture()[KEY_CSVS].replace(
            "  spec:\n    displayName: etcd\n    version: 0.6.1\n",
            "  spec:\n    displayName: etcd\n    version: 0.6.1\n    replaces: etcdoperator.v0.9.2\n",
        );
        let e = error(&with(KEY_CSVS, &text));
        assert!(e.contains("the replaces chain has a cycle: etcdoperator.v0.9.2 -> etcdoperator.v0.9.0 -> etcdoperator.v0.6.1 -> etcdoperator.v0.9.2"), "{e}");
    }

    #[test]
    fn an_owned_crd_missing_from_the_list_is_refused() {
        let text = fixture()[KEY_CRDS].replace("plural: etcdbackups", "plural: etcdbackupz");
        let e = error(&with(KEY_CRDS, &text));
        assert_eq!(
            e,
            "clusterServiceVersions[1] (etcdoperator.v0.9.0): owned CRD etcdbackups.etcd.database.coreos.com (version v1beta2, kind EtcdBackup) is not among customResourceDefinitions"
        );
    }

    #[test]
    fn a_crd_defined_twice_is_refused() {
        let crds = fixture()[KEY_CRDS].clone();
        let first = crds.split("\n- ").next().unwrap().to_string();
        let e = error(&with(KEY_CRDS, &format!("{crds}\n{first}\n")));
        assert!(
            e.starts_with("customResourceDefinitions[3] (etcdbackups.etcd.database.coreos.com): etcdbackups.etcd.database.coreos.com (version v1beta2, kind EtcdBackup) is already defined by customResourceDefinitions[0]"),
            "{e}"
        );
    }

    #[test]
    fn package_errors_name_the_package() {
        let e = error(&with(
            KEY_PACKAGES,
            "- channels: [{name: a, currentCSV: x}]\n",
        ));
        assert_eq!(e, "packages[0]: packageName is missing");
        let e = error(&with(
            KEY_PACKAGES,
            "- packageName: etcd\n  channels:\n  - {name: alpha, currentCSV: etcdoperator.v0.9.2}\n  - {name: beta, currentCSV: etcdoperator.v0.9.0}\n",
        ));
        assert_eq!(
            e,
            "packages[0] (etcd): no default channel specified, and the package has several channels"
        );
        let e = error(&with(KEY_PACKAGES, "- packageName: etcd\n  channels: []\n"));
        assert_eq!(e, "packages[0] (etcd): the package has no channels");
    }

    #[test]
    fn a_csv_in_two_packages_is_refused() {
        let text = format!(
            "{}\n- packageName: other\n  channels:\n  - {{name: a, currentCSV: etcdoperator.v0.6.1}}\n",
            fixture()[KEY_PACKAGES].trim_end()
        );
        let e = error(&with(KEY_PACKAGES, &text));
        assert_eq!(
            e,
            "clusterServiceVersions[0] (etcdoperator.v0.6.1): the channels of packages \"etcd\" and \"other\" both reach it; a CSV belongs to one package"
        );
    }

    #[test]
    fn a_bad_olm_properties_annotation_names_the_csv() {
        let text = fixture()[KEY_CSVS].replace(
            r#"olm.properties: '[{"type": "olm.maxOpenShiftVersion", "value": "4.20"}]'"#,
            "olm.properties: 'not json'",
        );
        let e = error(&with(KEY_CSVS, &text));
        assert!(
            e.starts_with("clusterServiceVersions[3] (etcdoperator.v0.9.2): CSV \"etcdoperator.v0.9.2\": annotation olm.properties is not a JSON list of properties"),
            "{e}"
        );
    }
}
