//! CSVs and their CRDs as FBC bundles (rendered as `opm render` renders a registry+v1
//! bundle), and a channel as the replaces chain from its `currentCSV`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::error::{Error, KEY_CSVS, item_error};
use super::parse::{Crd, Csv};
use crate::catalog::bundles::bundle::{ANNOTATION_PACKAGE, BundleDir, BundleError, Manifest};
use crate::catalog::bundles::render::{RenderOptions, render_bundle};
use crate::catalog::model::fbc::{Bundle, ChannelEntry, PROP_GVK, PROP_PACKAGE, Property};

impl Csv {
    /// The bundle: the CSV and its owned CRDs, with properties as `opm render` gives a
    /// registry+v1 bundle of the same manifests.
    pub(super) fn to_bundle(&self, package: &str, owned: &[&Crd]) -> Result<Bundle, Error> {
        let file = PathBuf::from(format!("{KEY_CSVS}[{}]", self.index));
        let mut manifests = vec![Manifest::new(file.clone(), self.object.clone())];
        manifests.extend(
            owned
                .iter()
                .map(|crd| Manifest::new(file.clone(), crd.object.clone())),
        );
        let dir = BundleDir {
            path: file,
            annotations: BTreeMap::from([(ANNOTATION_PACKAGE.to_string(), package.to_string())]),
            manifests,
            dependencies: Vec::new(),
            properties: Vec::new(),
            warnings: Vec::new(),
        };
        let mut bundle = render_bundle(&dir, &RenderOptions::default()).map_err(|e| {
            let message = match e {
                BundleError::Input { message, .. } => message,
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

/// Why a channel's replaces chain cannot be followed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ChainError {
    #[error("currentCSV {0:?} is not among {KEY_CSVS}")]
    NoCurrent(String),
    #[error("the replaces chain has a cycle: {chain} -> {replaces}")]
    Cycle { chain: String, replaces: String },
    #[error("CSV {csv:?} replaces {replaces:?}, which is not among {KEY_CSVS}")]
    NoReplaced { csv: String, replaces: String },
}

/// A channel's entries: the replaces chain from `current`, then the skipped CSVs present in
/// the ConfigMap. Also returns the CSVs (indexes) that are members. The chain stops before a
/// CSV of another package (`foreign`: upstream's tests write a CSV that replaces one of
/// another package, to switch a Subscription between them): its entry still names it in
/// `replaces`, and it stays its own package's.
pub(super) fn channel_entries(
    csvs: &[Csv],
    by_name: &HashMap<String, usize>,
    current: &str,
    foreign: &dyn Fn(usize) -> bool,
) -> Result<(Vec<ChannelEntry>, Vec<usize>), ChainError> {
    let mut at = *by_name
        .get(current)
        .ok_or_else(|| ChainError::NoCurrent(current.into()))?;
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
            return Err(ChainError::Cycle {
                chain: chain.join(" -> "),
                replaces: csv.replaces.clone(),
            });
        }
        at = *by_name
            .get(&csv.replaces)
            .ok_or_else(|| ChainError::NoReplaced {
                csv: csv.name.clone(),
                replaces: csv.replaces.clone(),
            })?;
        if foreign(at) {
            break;
        }
    }
    for s in skipped {
        let csv = &csvs[s];
        if !foreign(s) && on_chain.insert(&csv.name) {
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
