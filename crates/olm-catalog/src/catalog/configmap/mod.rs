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
//!   ConfigMap, or a cycle, is an error. A chain stops before a CSV of another package (the
//!   head of one of its channels, or a member of a package listed earlier), which its last
//!   entry still names in `replaces`: upstream's sqlite loader shares such a CSV between the
//!   packages, a file-based catalog cannot; one CSV at the head of two packages is an error.
//! - The default channel is `defaultChannel` when it names a channel, else the only channel;
//!   a package with several channels and none of them default is an error.
//! - CSVs no channel reaches are left out (upstream keeps them in its database, where no
//!   query finds them).
//!
//! ConfigMap catalogs have no bundle images: each bundle carries its CSV and CRDs as
//! `olm.bundle.object` properties, so it can be installed from the catalog alone.//!
//! Files: this one turns the three lists into a catalog; `parse.rs` reads the list items,
//! `convert.rs` makes bundles and channels of them, `tests.rs` tests it all on the fixture.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::catalog::bundles::csv::package_display;
use crate::catalog::model::fbc::*;

mod convert;
mod error;
mod parse;
#[cfg(test)]
mod tests;

use convert::channel_entries;
use parse::{ApiKey, Crd, Csv, PackageManifest, parse_list};

pub use error::{ConfigMapCatalogError, KEY_CRDS, KEY_CSVS, KEY_PACKAGES, MAX_CONFIGMAP_BYTES};
use error::{Error, item_error};

/// The ConfigMap's `data` → a catalog (see the module documentation for the rules).
pub fn from_configmap_data(data: &BTreeMap<String, String>) -> Result<DeclarativeConfig, Error> {
    let size: usize = data.values().map(String::len).sum();
    if size > MAX_CONFIGMAP_BYTES {
        return Err(Error::TooLarge { size });
    }
    let crd_items = parse_list(data, KEY_CRDS)?;
    let csv_items = parse_list(data, KEY_CSVS)?;
    let package_items = parse_list(data, KEY_PACKAGES)?;

    let (crds, crd_by_key) = index_crds(crd_items)?;
    let (csvs, csv_by_name) = index_csvs(csv_items, &crd_by_key)?;

    // Packages and their channels. A channel head is its package's before any walk: another
    // package's chain that reaches it stops there.
    let manifests = package_items
        .iter()
        .enumerate()
        .map(|(index, item)| PackageManifest::parse(index, item))
        .collect::<Result<Vec<_>, _>>()?;
    let mut head_of: HashMap<usize, usize> = HashMap::new();
    for (index, manifest) in manifests.iter().enumerate() {
        for (_, current) in &manifest.channels {
            if let Some(&at) = csv_by_name.get(current) {
                head_of.entry(at).or_insert(index);
            }
        }
    }
    let mut out = DeclarativeConfig::default();
    let mut member_of: HashMap<usize, (usize, String)> = HashMap::new();
    let mut seen_packages: HashMap<String, usize> = HashMap::new();
    for (index, manifest) in manifests.into_iter().enumerate() {
        let err = |message: String| item_error(KEY_PACKAGES, index, &manifest.name, message);
        if let Some(other) = seen_packages.insert(manifest.name.clone(), index) {
            return Err(err(format!(
                "{KEY_PACKAGES}[{other}] defines the same package"
            )));
        }
        let default_channel = manifest.default_channel().map_err(|e| err(e.to_string()))?;
        let mut channel_names = HashSet::new();
        for (name, current) in &manifest.channels {
            if !channel_names.insert(name.as_str()) {
                return Err(err(format!("channel {name:?} is listed twice")));
            }
            let foreign = |csv: usize| {
                head_of.get(&csv).is_some_and(|&p| p != index)
                    || member_of.get(&csv).is_some_and(|(p, _)| *p != index)
            };
            let (entries, members) = channel_entries(&csvs, &csv_by_name, current, &foreign)
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

/// The CRDs by (group, version, kind, plural), one key per version; a key defined twice is
/// an error naming both items.
fn index_crds(crd_items: Vec<Value>) -> Result<(Vec<Crd>, HashMap<ApiKey, usize>), Error> {
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
    Ok((crds, crd_by_key))
}

/// The CSVs by name, each with the CRDs it owns; a name used twice is an error.
fn index_csvs(
    csv_items: Vec<Value>,
    crd_by_key: &HashMap<ApiKey, usize>,
) -> Result<(Vec<Csv>, HashMap<String, usize>), Error> {
    let mut csvs: Vec<Csv> = Vec::with_capacity(csv_items.len());
    let mut csv_by_name: HashMap<String, usize> = HashMap::new();
    for (index, item) in csv_items.into_iter().enumerate() {
        let csv = Csv::parse(index, item, crd_by_key)?;
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
    Ok((csvs, csv_by_name))
}
