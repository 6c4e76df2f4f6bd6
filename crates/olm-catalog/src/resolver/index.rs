//! Catalogs prepared for resolution: every bundle's version, provided APIs and dependencies
//! parsed once, channel graphs built once, and lookups by package and by GVK. Build it when
//! a catalog changes; resolve against it on every event.

use std::collections::{BTreeMap, HashMap};

use semver::Version;

use super::channel_graph::{ChannelGraph, ChannelGraphError};
use super::constraints::{Dependency, Gvk, dependencies, provided_gvks};
use super::input::{Catalog, CatalogRef};
use crate::catalog::model::fbc::{PROP_BUNDLE_OBJECT, PROP_DEPRECATED};
use crate::catalog::model::semver_range::parse_version;

pub type BundleId = usize;

#[derive(Debug)]
pub struct CatalogInfo {
    pub source: CatalogRef,
    pub priority: i32,
    pub packages: BTreeMap<String, PackageInfo>,
}

#[derive(Debug, Default)]
pub struct PackageInfo {
    pub default_channel: String,
    pub channels: BTreeMap<String, Result<ChannelGraph, ChannelGraphError>>,
    pub bundles: HashMap<String, BundleId>,
}

#[derive(Debug)]
pub struct BundleInfo {
    pub catalog: usize,
    pub name: String,
    pub package: String,
    /// None when the bundle's `olm.package` version is missing or not semver.
    pub version: Option<Version>,
    pub gvks: Vec<Gvk>,
    pub deprecated: bool,
    /// Properties without the (large) bundle objects, for CEL.
    pub properties: BundleProperties,
    pub dependencies: Vec<Dependency>,
    /// The channel a dependency install would use: the default channel when the bundle is
    /// installable there, else the channel where it is nearest to the head; and that distance.
    pub channel: Option<(String, usize)>,
}

impl BundleInfo {
    /// May be chosen at all: installable in some channel, with a version, not deprecated.
    pub fn usable(&self) -> bool {
        self.channel.is_some() && self.version.is_some() && !self.deprecated
    }

    /// Why it may not be chosen, for explanations.
    pub fn unusable_reason(&self) -> Option<&'static str> {
        if self.deprecated {
            Some("it is deprecated (olm.deprecated)")
        } else if self.version.is_none() {
            Some("it has no valid olm.package version")
        } else if self.channel.is_none() {
            Some("it is not installable in any channel (skipped, or off the replaces chain)")
        } else {
            None
        }
    }
}

pub use super::properties::BundleProperties;

#[derive(Debug, Default)]
pub struct CatalogIndex {
    pub catalogs: Vec<CatalogInfo>,
    pub bundles: Vec<BundleInfo>,
    /// Usable bundles per package, across catalogs, in catalog order.
    pub by_package: HashMap<String, Vec<BundleId>>,
    /// Usable bundles per provided GVK, across catalogs.
    pub by_gvk: HashMap<Gvk, Vec<BundleId>>,
}

impl CatalogIndex {
    pub fn new(catalogs: &[Catalog]) -> CatalogIndex {
        Self::from_catalogs(catalogs)
    }

    /// As [`CatalogIndex::new`], over catalogs held elsewhere (the controllers' snapshots),
    /// without copying them.
    pub fn from_catalogs<'a>(catalogs: impl IntoIterator<Item = &'a Catalog>) -> CatalogIndex {
        let mut index = CatalogIndex::default();
        for (ci, catalog) in catalogs.into_iter().enumerate() {
            let mut packages: BTreeMap<String, PackageInfo> = BTreeMap::new();
            for p in &catalog.content.packages {
                packages.entry(p.name.clone()).or_default().default_channel =
                    p.default_channel.clone();
            }
            for c in &catalog.content.channels {
                packages
                    .entry(c.package.clone())
                    .or_default()
                    .channels
                    .insert(c.name.clone(), ChannelGraph::build(c));
            }
            for b in &catalog.content.bundles {
                let id = index.bundles.len();
                let pkg = packages.entry(b.package.clone()).or_default();
                pkg.bundles.insert(b.name.clone(), id);
                index.bundles.push(BundleInfo {
                    catalog: ci,
                    name: b.name.clone(),
                    package: b.package.clone(),
                    version: b.version().and_then(|v| parse_version(v).ok()),
                    gvks: provided_gvks(&b.properties),
                    deprecated: b.properties.iter().any(|p| p.type_ == PROP_DEPRECATED),
                    properties: BundleProperties::packed(
                        b.properties
                            .iter()
                            .filter(|p| p.type_ != PROP_BUNDLE_OBJECT),
                    ),
                    dependencies: dependencies(&b.properties),
                    channel: preferred_channel(pkg, &b.name),
                });
            }
            index.catalogs.push(CatalogInfo {
                source: CatalogRef::new(&catalog.name, &catalog.namespace),
                priority: catalog.priority,
                packages,
            });
        }
        for (id, b) in index.bundles.iter().enumerate() {
            if !b.usable() {
                continue;
            }
            index
                .by_package
                .entry(b.package.clone())
                .or_default()
                .push(id);
            for g in &b.gvks {
                index.by_gvk.entry(g.clone()).or_default().push(id);
            }
        }
        index
    }

    pub fn catalog_id(&self, source: &CatalogRef) -> Option<usize> {
        self.catalogs.iter().position(|c| &c.source == source)
    }

    /// A bundle by name: in `preferred` catalog first, else in any catalog (catalog order).
    pub fn find_bundle(
        &self,
        name: &str,
        package: &str,
        preferred: Option<usize>,
    ) -> Option<BundleId> {
        let in_catalog = |ci: usize| {
            self.catalogs[ci]
                .packages
                .get(package)
                .and_then(|p| p.bundles.get(name))
                .copied()
        };
        preferred
            .and_then(in_catalog)
            .or_else(|| (0..self.catalogs.len()).find_map(in_catalog))
    }
}

fn preferred_channel(pkg: &PackageInfo, bundle: &str) -> Option<(String, usize)> {
    let distance_in = |name: &str| pkg.channels.get(name)?.as_ref().ok()?.distance(bundle);
    if let Some(d) = distance_in(&pkg.default_channel) {
        return Some((pkg.default_channel.clone(), d));
    }
    // BTreeMap order makes ties go to the channel name that sorts first.
    pkg.channels
        .keys()
        .filter_map(|name| distance_in(name).map(|d| (name.clone(), d)))
        .min_by_key(|(_, d)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::model::fbc::Property;
    use serde_json::json;

    #[test]
    fn properties_are_kept_as_text_unless_too_deep_to_read_back() {
        let shallow = [Property::new(
            "olm.gvk",
            json!({"group": "g.io", "kind": "K", "version": "v1"}),
        )];
        let packed = BundleProperties::packed(shallow.iter());
        assert!(matches!(packed, BundleProperties::Text(_)));
        assert_eq!(*packed.decode(), shallow[..]);

        let mut value = json!("leaf");
        for _ in 0..126 {
            value = json!([value]);
        }
        let deep = [Property::new("x", value)];
        let packed = BundleProperties::packed(deep.iter());
        assert!(matches!(packed, BundleProperties::Decoded(_)));
        assert_eq!(*packed.decode(), deep[..]);
    }
}
