//! Putting a catalog together from `ListBundles` messages and `GetPackage` answers:
//! bundles once each, channels from their entries, deprecations, and package icons and
//! descriptions from the default channel's head CSV.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{BundleFromApiError, api, bundle_from_api};
use crate::catalog::bundles::csv::{bundle_csv, package_display};
use crate::catalog::model::fbc::{
    self, DeclarativeConfig, PROP_BUNDLE_OBJECT, SCHEMA_BUNDLE, SCHEMA_CHANNEL,
    SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};

/// A bundle as `ListBundles` or `GetBundle` sent it, before channels are known.
pub(super) struct PendingBundle {
    pub(super) bundle: fbc::Bundle,
    /// The first channel it was listed in (for `GetBundle`).
    pub(super) channel: String,
    pub(super) has_objects: bool,
}

/// The catalog being put together from `ListBundles` messages.
#[derive(Default)]
pub(super) struct Assembly {
    pub(super) bundles: Vec<PendingBundle>,
    bundle_ix: HashMap<(String, String), usize>,
    /// (package, channel) in first-seen order, with their entries.
    channels: Vec<((String, String), Vec<fbc::ChannelEntry>)>,
    channel_ix: HashMap<(String, String), usize>,
    /// (package, channel, bundle) of every entry so far.
    entry_ix: HashSet<(String, String, String)>,
    /// (package, bundle) → deprecation message, in first-seen order.
    bundle_deprecations: Vec<((String, String), String)>,
    /// Bundles that could not be read, and why.
    pub(super) skipped: Vec<((String, String), BundleFromApiError)>,
    skipped_ix: HashSet<(String, String)>,
}

impl Assembly {
    pub(super) fn add(&mut self, b: api::Bundle) {
        let key = (b.package_name.clone(), b.csv_name.clone());
        if self.skipped_ix.contains(&key) {
            return;
        }
        if !self.bundle_ix.contains_key(&key) {
            match bundle_from_api(&b) {
                Ok(bundle) => {
                    self.bundle_ix.insert(key.clone(), self.bundles.len());
                    self.bundles.push(PendingBundle {
                        has_objects: bundle
                            .properties
                            .iter()
                            .any(|p| p.type_ == PROP_BUNDLE_OBJECT),
                        bundle,
                        channel: b.channel_name.clone(),
                    });
                    if let Some(d) = &b.deprecation {
                        self.bundle_deprecations.push((key, d.message.clone()));
                    }
                }
                Err(reason) => {
                    self.skipped_ix.insert(key.clone());
                    self.skipped.push((key, reason));
                    return;
                }
            }
        }
        let channel_key = (b.package_name.clone(), b.channel_name.clone());
        let at = *self
            .channel_ix
            .entry(channel_key.clone())
            .or_insert_with(|| {
                self.channels.push((channel_key, Vec::new()));
                self.channels.len() - 1
            });
        let entry_key = (b.package_name, b.channel_name, b.csv_name.clone());
        if self.entry_ix.insert(entry_key) {
            self.channels[at].1.push(fbc::ChannelEntry {
                name: b.csv_name,
                replaces: b.replaces,
                skips: b.skips,
                skip_range: b.skip_range,
            });
        }
    }

    pub(super) fn package_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .channels
            .iter()
            .map(|((package, _), _)| package.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub(super) fn finish(mut self, packages: &BTreeMap<String, api::Package>) -> DeclarativeConfig {
        let mut out = DeclarativeConfig::default();
        for (name, p) in packages {
            // Icon and description from the default channel's head, when its CSV is known.
            let head = p
                .channels
                .iter()
                .find(|c| c.name == p.default_channel_name)
                .and_then(|c| self.bundle_ix.get(&(name.clone(), c.csv_name.clone())))
                .and_then(|&i| bundle_csv(&self.bundles[i].bundle));
            let (icon, description) = head.as_ref().map(package_display).unwrap_or_default();
            out.packages.push(fbc::Package {
                schema: SCHEMA_PACKAGE.into(),
                name: name.clone(),
                default_channel: p.default_channel_name.clone(),
                icon,
                description,
                properties: Vec::new(),
            });

            // Channels in the package's order, then any it did not name.
            let mut order: Vec<usize> = p
                .channels
                .iter()
                .filter_map(|c| {
                    self.channel_ix
                        .get(&(name.clone(), c.name.clone()))
                        .copied()
                })
                .collect();
            for (i, ((package, _), _)) in self.channels.iter().enumerate() {
                if package == name && !order.contains(&i) {
                    order.push(i);
                }
            }
            for i in order {
                let ((package, channel), entries) = &mut self.channels[i];
                out.channels.push(fbc::Channel {
                    schema: SCHEMA_CHANNEL.into(),
                    name: channel.clone(),
                    package: package.clone(),
                    entries: std::mem::take(entries),
                    properties: Vec::new(),
                });
            }

            let mut entries = Vec::new();
            if let Some(d) = &p.deprecation {
                entries.push(deprecation_entry(SCHEMA_PACKAGE, "", &d.message));
            }
            for c in &p.channels {
                if let Some(d) = &c.deprecation {
                    entries.push(deprecation_entry(SCHEMA_CHANNEL, &c.name, &d.message));
                }
            }
            for ((package, bundle), message) in &self.bundle_deprecations {
                if package == name {
                    entries.push(deprecation_entry(SCHEMA_BUNDLE, bundle, message));
                }
            }
            if !entries.is_empty() {
                out.deprecations.push(fbc::Deprecation {
                    schema: SCHEMA_DEPRECATIONS.into(),
                    package: name.clone(),
                    entries,
                });
            }
        }
        out.bundles = self
            .bundles
            .into_iter()
            .map(|b| b.bundle)
            .filter(|b| packages.contains_key(&b.package))
            .collect();
        out
    }
}

fn deprecation_entry(schema: &str, name: &str, message: &str) -> fbc::DeprecationEntry {
    fbc::DeprecationEntry {
        reference: fbc::DeprecationReference {
            schema: schema.to_string(),
            name: name.to_string(),
        },
        message: message.to_string(),
    }
}
