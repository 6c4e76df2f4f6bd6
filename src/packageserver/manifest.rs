//! PackageManifests from a catalog snapshot, field for field as upstream's package-server
//! builds them from a registry server (`provider/registry.go`): one per package with at least
//! one channel whose head has a CSV; channels sorted by name; the default channel's head (or
//! the first channel's) gives the provider and the CSV labels.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::description::{AppLink, CsvDescription, describe, head_csv, str_at, string_map};
pub use crate::snapshots::ChannelHeadTexts;
use crate::snapshots::HeadText;
use crate::snapshots::{LoadProjection, StreamingProjection};

use crate::catalog::model::fbc::{
    Bundle, Channel, DeclarativeConfig, PROP_BUNDLE_OBJECT, PROP_DEPRECATED, Package, Property,
};

/// A fetched channel head's [`HeadCsv`] (icon included) as JSON text, in place of its
/// manifests ([`condense_head`]) until [`keep_channel_heads`] moves it out of the bundle.
const PROP_HEAD_CSV: &str = "olm-rs.packagemanifest.head-csv";

/// What a PackageManifest shows of a channel head's CSV.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadCsv {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub desc: CsvDescription,
}

impl HeadCsv {
    /// The JSON text a snapshot keeps, not a JSON value tree (a tree of a CSV description
    /// costs about three times its text in allocations). `desc` is its last field, so the
    /// text ends with the description's JSON and a `}` (where the served manifests' JSON
    /// reads it from, `super::listed`).
    fn to_text(&self) -> String {
        let mut text = serde_json::to_string(self).expect("a HeadCsv always serializes");
        // Grown while written: without this a blob keeps up to twice its size.
        text.shrink_to_fit();
        text
    }

    fn from_text(text: &str) -> Option<HeadCsv> {
        serde_json::from_str(text).ok()
    }

    fn of(bundle: &Bundle) -> Option<HeadCsv> {
        if let Some(condensed) = bundle.properties_of(PROP_HEAD_CSV).next() {
            return HeadCsv::from_text(condensed.as_str()?);
        }
        let csv = head_csv(bundle)?;
        let labels = string_map(&csv["metadata"]["labels"]);
        Some(HeadCsv {
            name: str_at(&csv, &["metadata", "name"]),
            labels,
            desc: describe(&csv),
        })
    }
}

/// What a catalog load keeps of a channel head it fetched (`LoadOptions::condense_fetched`):
/// the part of its CSV that PackageManifests show, in place of all its manifests, so that a
/// load never holds every head's manifests at once. [`keep_channel_heads`] takes it from
/// there. A bundle without a CSV is left as it is.
pub fn condense_head(bundle: &mut Bundle) {
    let Some(mut head) = HeadCsv::of(bundle) else {
        return;
    };
    // Only the first icon is ever served.
    head.desc.icon.truncate(1);
    bundle.properties.retain(|p| p.type_ != PROP_BUNDLE_OBJECT);
    bundle
        .properties
        .push(Property::new(PROP_HEAD_CSV, Value::String(head.to_text())));
}

/// Snapshots drop the bundles' manifests; before they do, this keeps what PackageManifests
/// need of each channel head's CSV (its description, without icons) as JSON texts, returned
/// for the snapshot to keep beside the content: a few KiB per channel instead of every
/// manifest; and, in `content`, the one icon served per package ([`super::icon`]).
pub fn keep_channel_heads(content: &mut DeclarativeConfig) -> ChannelHeadTexts {
    let mut heads = std::collections::BTreeSet::new();
    for channel in &content.channels {
        if let Ok(head) = UpgradeEdges::new(&channel.entries).head() {
            heads.insert((channel.package.clone(), head.to_string()));
        }
    }
    let mut kept = ChannelHeadsKeeper::default();
    for bundle in &content.bundles {
        if heads.contains(&(bundle.package.clone(), bundle.name.clone())) {
            kept.keep(bundle);
        }
    }
    kept.heads = heads;
    kept.finish(content)
}

/// [`keep_channel_heads`] for a catalog read blob by blob, so that manifests can be dropped
/// as each bundle goes by: a bundle's head CSV is kept when it heads a channel seen so far,
/// or is in none seen yet (its channels may come later); [`Self::finish`] keeps the heads.
/// A bundle that a later channel makes head after an earlier channel of its package listed
/// it lower down is missed (catalogs write a package's channels together).
#[derive(Debug, Default)]
pub struct ChannelHeadsKeeper {
    heads: std::collections::BTreeSet<(String, String)>,
    in_channels: std::collections::BTreeSet<(String, String)>,
    kept: Vec<((String, String), String)>,
    icons: super::icon::HeadIcons,
}

impl ChannelHeadsKeeper {
    /// Takes note of `piece`'s channels and keeps its bundles' head CSVs that may be needed.
    pub fn add(&mut self, piece: &DeclarativeConfig) {
        for channel in &piece.channels {
            if let Ok(head) = UpgradeEdges::new(&channel.entries).head() {
                self.heads
                    .insert((channel.package.clone(), head.to_string()));
            }
            for entry in &channel.entries {
                self.in_channels
                    .insert((channel.package.clone(), entry.name.clone()));
            }
        }
        for bundle in &piece.bundles {
            let key = (bundle.package.clone(), bundle.name.clone());
            if self.heads.contains(&key) || !self.in_channels.contains(&key) {
                self.keep(bundle);
            }
        }
    }

    /// Keeps `bundle`'s head CSV without icons, and its first icon apart.
    fn keep(&mut self, bundle: &Bundle) {
        let Some(mut head) = HeadCsv::of(bundle) else {
            return;
        };
        let key = (bundle.package.clone(), bundle.name.clone());
        if let Some(icon) = std::mem::take(&mut head.desc.icon).into_iter().next() {
            self.icons.insert(key.clone(), icon);
        }
        self.kept.push((key, head.to_text()));
    }

    /// The kept head CSVs (for the snapshot, beside `content`); the default icons go into
    /// `content`, as [`keep_channel_heads`] does.
    pub fn finish(self, content: &mut DeclarativeConfig) -> ChannelHeadTexts {
        let heads = self.heads;
        let kept: ChannelHeadTexts = self
            .kept
            .into_iter()
            .filter(|(key, _)| heads.contains(key))
            .map(|(key, text)| (key, Arc::new(HeadText::new(&text))))
            .collect();
        let names = kept.keys().cloned().collect();
        for bundle in &mut content.bundles {
            bundle.properties.retain(|p| p.type_ != PROP_HEAD_CSV);
        }
        super::icon::keep_default_icons(content, self.icons, &names);
        kept
    }
}

use crate::catalog::model::upgrade_edges::UpgradeEdges;

pub const GROUP: &str = "packages.operators.coreos.com";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "packages.operators.coreos.com/v1";
pub const KIND: &str = "PackageManifest";

const OS_LABEL_PREFIX: &str = "operatorframework.io/os";
const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch";

/// What a PackageManifest shows of its CatalogSource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CatalogInfo {
    pub name: String,
    pub namespace: String,
    pub display_name: String,
    pub publisher: String,
    pub labels: BTreeMap<String, String>,
    /// RFC 3339, as the API server wrote it.
    pub creation_timestamp: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageManifest {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: Metadata,
    pub spec: Map<String, Value>,
    pub status: Status,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub catalog_source: String,
    pub catalog_source_display_name: String,
    pub catalog_source_publisher: String,
    pub catalog_source_namespace: String,
    pub provider: AppLink,
    pub package_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    pub channels: Vec<PackageChannel>,
    pub default_channel: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Deprecation {
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageChannel {
    pub name: String,
    #[serde(rename = "currentCSV")]
    pub current_csv: String,
    #[serde(rename = "currentCSVDesc")]
    pub current_csv_desc: CsvDescription,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
    pub entries: Vec<ChannelEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelEntry {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

impl PackageManifest {
    /// The same manifest as a namespace sees it (global catalogs are rewritten into it).
    pub fn in_namespace(&self, namespace: &str) -> PackageManifest {
        let mut out = self.clone();
        out.metadata.namespace = namespace.to_string();
        out
    }

    /// Upstream serves neither lists nor gets with icons (only the icon subresource has them).
    pub fn without_icons(mut self) -> PackageManifest {
        for channel in &mut self.status.channels {
            channel.current_csv_desc.icon.clear();
        }
        self
    }
}

/// Every PackageManifest of one catalog, by package name.
pub fn manifests(
    content: &DeclarativeConfig,
    heads: &ChannelHeadTexts,
    info: &CatalogInfo,
) -> BTreeMap<String, PackageManifest> {
    let mut out = BTreeMap::new();
    for_each_manifest(content, heads, info, |m| {
        out.insert(m.metadata.name.clone(), m);
    });
    out
}

/// The PackageManifests of one catalog, handed to `f` one at a time in package order (a
/// package declared twice comes twice), so that a caller keeping less than the whole
/// manifest never holds all of them.
pub fn for_each_manifest(
    content: &DeclarativeConfig,
    heads: &ChannelHeadTexts,
    info: &CatalogInfo,
    mut f: impl FnMut(PackageManifest),
) {
    let index = Index::of(content, heads);
    for package in &content.packages {
        if let Some(manifest) = index.manifest(&content.channels, package, info) {
            f(manifest);
        }
    }
}

/// What building a catalog's manifests looks up: bundles, kept channel heads and
/// deprecations, by name.
struct Index<'a> {
    deprecations: Deprecations<'a>,
    bundles: BTreeMap<(&'a str, &'a str), &'a Bundle>,
    /// Decoded when a manifest needs one: all at once would hold every description twice.
    kept: BTreeMap<(&'a str, &'a str), &'a HeadText>,
}

impl<'a> Index<'a> {
    fn of(content: &'a DeclarativeConfig, heads: &'a ChannelHeadTexts) -> Self {
        let mut bundles = BTreeMap::new();
        for bundle in &content.bundles {
            bundles.insert((bundle.package.as_str(), bundle.name.as_str()), bundle);
        }
        let kept = heads
            .iter()
            .map(|((package, name), text)| ((package.as_str(), name.as_str()), &**text))
            .collect();
        Index {
            deprecations: Deprecations::of(content),
            bundles,
            kept,
        }
    }

    /// `package`'s manifest; none when no channel's head has a CSV.
    fn manifest(
        &self,
        channels: &[Channel],
        package: &Package,
        info: &CatalogInfo,
    ) -> Option<PackageManifest> {
        let mut channels: Vec<_> = channels
            .iter()
            .filter(|c| c.package == package.name)
            .collect();
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut status = Status {
            catalog_source: info.name.clone(),
            catalog_source_display_name: info.display_name.clone(),
            catalog_source_publisher: info.publisher.clone(),
            catalog_source_namespace: info.namespace.clone(),
            provider: AppLink::default(),
            package_name: package.name.clone(),
            deprecation: self.deprecations.find(&package.name, "olm.package", ""),
            channels: Vec::new(),
            default_channel: package.default_channel.clone(),
        };
        let default_csv = self.add_channels(&mut status, &package.name, channels)?;
        Some(PackageManifest {
            api_version: API_VERSION,
            kind: KIND,
            metadata: Metadata {
                name: package.name.clone(),
                namespace: info.namespace.clone(),
                resource_version: String::new(),
                creation_timestamp: info.creation_timestamp.clone(),
                labels: labels(info, &status.provider, &default_csv),
            },
            spec: Map::new(),
            status,
        })
    }

    /// Adds to `status` the channels whose head has a CSV, with the provider; returns the
    /// default channel's head CSV (else the first channel's), none when no head has one. A
    /// default channel without one gives way to the first channel.
    fn add_channels(
        &self,
        status: &mut Status,
        package: &str,
        channels: Vec<&Channel>,
    ) -> Option<HeadCsv> {
        let mut default_elided = false;
        let mut default_csv: Option<HeadCsv> = None;
        let mut provider_set = false;
        for channel in channels {
            let Some(csv) = self.head_csv(package, channel) else {
                default_elided |= channel.name == status.default_channel;
                continue;
            };
            if default_csv.is_none() || channel.name == status.default_channel {
                default_csv = Some(csv.clone());
            }
            // Icons are served from the snapshot ([`super::icon`]), not kept per manifest.
            let mut desc = csv.desc.clone();
            desc.icon = Vec::new();
            if (!status.default_channel.is_empty() && channel.name == status.default_channel)
                || !provider_set
            {
                status.provider = desc.provider.clone();
                provider_set = true;
            }
            status.channels.push(PackageChannel {
                name: channel.name.clone(),
                current_csv: csv.name.clone(),
                current_csv_desc: desc,
                deprecation: self
                    .deprecations
                    .find(package, "olm.channel", &channel.name),
                entries: self.entries(package, channel),
            });
        }
        let default_csv = default_csv?;
        if default_elided {
            status.default_channel = status.channels[0].name.clone();
        }
        Some(default_csv)
    }

    /// The head's CSV as kept beside the snapshot, else from its bundle.
    fn head_csv(&self, package: &str, channel: &Channel) -> Option<HeadCsv> {
        let head = UpgradeEdges::new(&channel.entries).head().ok()?;
        self.kept
            .get(&(package, head))
            .and_then(|text| HeadCsv::from_text(&text.text()))
            .or_else(|| {
                self.bundles
                    .get(&(package, head))
                    .and_then(|bundle| HeadCsv::of(bundle))
            })
    }

    /// The channel's bundles that are not deprecated, newest first.
    fn entries(&self, package: &str, channel: &Channel) -> Vec<ChannelEntry> {
        let mut entries: Vec<ChannelEntry> = channel
            .entries
            .iter()
            .filter_map(|e| self.bundles.get(&(package, e.name.as_str())))
            .filter(|b| b.properties_of(PROP_DEPRECATED).next().is_none())
            .map(|b| ChannelEntry {
                name: b.name.clone(),
                version: b.version().unwrap_or_default().to_string(),
                deprecation: self.deprecations.find(package, "olm.bundle", &b.name),
            })
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(version_of(&e.version)));
        entries
    }
}

/// A manifest's labels: the CatalogSource's, the catalog and provider, then the default
/// head CSV's, and the default OS and architecture.
fn labels(
    info: &CatalogInfo,
    provider: &AppLink,
    default_csv: &HeadCsv,
) -> BTreeMap<String, String> {
    let mut labels = info.labels.clone();
    labels.insert("catalog".into(), info.name.clone());
    labels.insert("catalog-namespace".into(), info.namespace.clone());
    labels.insert("provider".into(), provider.name.clone());
    labels.insert("provider-url".into(), provider.url.clone());
    for (k, v) in &default_csv.labels {
        labels.insert(k.clone(), v.clone());
    }
    set_default_os_arch_labels(&mut labels);
    labels
}

/// linux/amd64 are supported unless the CSV says which OSes or architectures are.
fn set_default_os_arch_labels(labels: &mut BTreeMap<String, String>) {
    if !labels.keys().any(|k| k.starts_with(OS_LABEL_PREFIX)) {
        labels.insert(format!("{OS_LABEL_PREFIX}.linux"), "supported".into());
    }
    if !labels.keys().any(|k| k.starts_with(ARCH_LABEL_PREFIX)) {
        labels.insert(format!("{ARCH_LABEL_PREFIX}.amd64"), "supported".into());
    }
}

/// A version for ordering entries; unparseable versions sort as 0.0.0, as upstream.
fn version_of(text: &str) -> semver::Version {
    semver::Version::parse(text).unwrap_or(semver::Version::new(0, 0, 0))
}

/// The `olm.deprecations` messages of a catalog, by (package, schema, name).
struct Deprecations<'a>(BTreeMap<(&'a str, &'a str, &'a str), &'a str>);

impl<'a> Deprecations<'a> {
    fn of(content: &'a DeclarativeConfig) -> Self {
        let mut map = BTreeMap::new();
        for d in &content.deprecations {
            for e in &d.entries {
                map.insert(
                    (
                        d.package.as_str(),
                        e.reference.schema.as_str(),
                        e.reference.name.as_str(),
                    ),
                    e.message.as_str(),
                );
            }
        }
        Deprecations(map)
    }

    fn find(&self, package: &str, schema: &str, name: &str) -> Option<Deprecation> {
        self.0.get(&(package, schema, name)).map(|m| Deprecation {
            message: (*m).to_string(),
        })
    }
}

/// The packageserver's [`LoadProjection`]: channel heads' CSVs kept beside each snapshot.
pub struct ChannelHeadProjection;

impl LoadProjection for ChannelHeadProjection {
    fn condense_fetched(&self) -> fn(&mut Bundle) {
        condense_head
    }

    fn streaming(&self) -> Box<dyn StreamingProjection> {
        Box::new(ChannelHeadsKeeper::default())
    }

    fn keep(&self, content: &mut DeclarativeConfig) -> ChannelHeadTexts {
        keep_channel_heads(content)
    }
}

impl StreamingProjection for ChannelHeadsKeeper {
    fn add(&mut self, blob: &DeclarativeConfig) {
        ChannelHeadsKeeper::add(self, blob);
    }

    fn finish(self: Box<Self>, content: &mut DeclarativeConfig) -> ChannelHeadTexts {
        ChannelHeadsKeeper::finish(*self, content)
    }
}

/// Our catalog (`catalog/`) as the CatalogSource `olm/operatorhub` ("Community Operators")
/// shows it: what the packageserver's tests serve.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub fn our_catalog() -> DeclarativeConfig {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        crate::catalog::reading::load::load_path(&root).unwrap()
    }

    pub fn info() -> CatalogInfo {
        CatalogInfo {
            name: "operatorhub".into(),
            namespace: "olm".into(),
            display_name: "Community Operators".into(),
            publisher: "Me".into(),
            labels: [("team".to_string(), "a".to_string())].into(),
            creation_timestamp: Some("2026-01-01T00:00:00Z".into()),
        }
    }

    pub fn our_manifests() -> BTreeMap<String, PackageManifest> {
        manifests(&our_catalog(), &ChannelHeadTexts::default(), &info())
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{info, our_catalog};
    use super::*;
    use crate::packageserver::icon::DefaultIcons;

    /// Content with its manifests: no heads kept beside it.
    fn none() -> ChannelHeadTexts {
        ChannelHeadTexts::default()
    }

    #[test]
    fn every_package_of_our_catalog_has_a_manifest_with_channel_heads() {
        let catalog = our_catalog();
        let all = manifests(&catalog, &none(), &info());
        assert_eq!(
            all.keys().collect::<Vec<_>>(),
            [
                "at",
                "kernel-module-management",
                "ptemplate",
                "reverse-words"
            ]
        );
        let rw = &all["reverse-words"];
        assert_eq!(rw.status.catalog_source_display_name, "Community Operators");
        assert_eq!(rw.metadata.labels["catalog"], "operatorhub");
        assert_eq!(rw.metadata.labels["catalog-namespace"], "olm");
        assert_eq!(rw.metadata.labels["team"], "a");
        assert_eq!(
            rw.metadata.labels["operatorframework.io/arch.amd64"],
            "supported"
        );
        assert_eq!(rw.metadata.labels["provider"], rw.status.provider.name);
        let names: Vec<&str> = rw.status.channels.iter().map(|c| c.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "channels sorted by name");
        for channel in &rw.status.channels {
            assert_eq!(
                channel.current_csv, channel.entries[0].name,
                "{}",
                channel.name
            );
            assert!(!channel.current_csv_desc.display_name.is_empty());
        }
        let icon = crate::packageserver::icon::DefaultIcons::of(&catalog, &none())
            .get("reverse-words")
            .expect("reverse-words has an icon");
        assert!(
            !crate::packageserver::icon::decode(&icon)
                .unwrap()
                .is_empty()
        );
        assert_eq!(icon.mediatype, "image/svg+xml");
        let json = serde_json::to_value(rw.clone().without_icons()).unwrap();
        assert!(
            json["status"]["channels"][0]["currentCSVDesc"]
                .get("icon")
                .is_none()
        );
    }

    #[test]
    fn snapshots_without_manifests_give_the_same_packagemanifests() {
        let full = our_catalog();
        let mut slim = full.clone();
        let heads = keep_channel_heads(&mut slim);
        for bundle in &mut slim.bundles {
            bundle
                .properties
                .retain(|p| p.type_ != crate::catalog::model::fbc::PROP_BUNDLE_OBJECT);
        }
        let from_full = manifests(&full, &none(), &info());
        let from_slim = manifests(&slim, &heads, &info());
        let (icons_full, icons_slim) = (
            DefaultIcons::of(&full, &none()),
            DefaultIcons::of(&slim, &heads),
        );
        for (name, m) in &from_full {
            assert_eq!(&from_slim[name], m, "{name}");
            assert_eq!(icons_slim.get(name), icons_full.get(name), "{name}");
        }
        assert_eq!(from_full.len(), from_slim.len());
        assert!(
            from_full
                .values()
                .flat_map(|m| &m.status.channels)
                .all(|c| c.current_csv_desc.icon.is_empty()),
            "manifests keep no icons"
        );
        // One icon per package at most, not one per channel head.
        let icons = slim
            .others
            .iter()
            .filter(|m| m.schema == crate::packageserver::icon::SCHEMA_DEFAULT_ICON)
            .count();
        assert!(icons >= 1 && icons <= from_full.len(), "{icons}");
        assert!(
            heads.values().all(|text| HeadCsv::from_text(&text.text())
                .unwrap()
                .desc
                .icon
                .is_empty()),
            "channel heads keep no icons"
        );
    }

    #[test]
    fn heads_condensed_while_loading_keep_what_their_manifests_would() {
        let full = our_catalog();
        let mut whole = full.clone();
        let whole_heads = keep_channel_heads(&mut whole);
        // As a load condenses each head it fetched: every bundle here, heads or not.
        let mut condensed = full.clone();
        for bundle in &mut condensed.bundles {
            condense_head(bundle);
            assert!(
                bundle.properties_of(PROP_BUNDLE_OBJECT).next().is_none(),
                "{}: manifests given up",
                bundle.name
            );
        }
        let heads = keep_channel_heads(&mut condensed);
        assert!(
            condensed
                .bundles
                .iter()
                .all(|b| b.properties_of(PROP_HEAD_CSV).next().is_none()),
            "the condensed heads leave the bundles once kept"
        );
        assert_eq!(condensed.others, whole.others);
        assert_eq!(heads, whole_heads);
        assert_eq!(
            manifests(&condensed, &heads, &info()),
            manifests(&whole, &whole_heads, &info())
        );
        let icon = DefaultIcons::of(&condensed, &heads).get("reverse-words");
        assert!(icon.is_some());
        assert_eq!(icon, DefaultIcons::of(&full, &none()).get("reverse-words"));
    }

    #[test]
    fn the_icon_follows_the_default_channel_as_manifests_pick_it() {
        let mut full = our_catalog();
        let package = full
            .packages
            .iter_mut()
            .find(|p| p.name == "reverse-words")
            .unwrap();
        // A default channel that does not exist: no default icon, as no default channel.
        package.default_channel = "nowhere".into();
        let mut slim = full.clone();
        let heads = keep_channel_heads(&mut slim);
        assert_eq!(DefaultIcons::of(&full, &none()).get("reverse-words"), None);
        assert_eq!(DefaultIcons::of(&slim, &heads).get("reverse-words"), None);
    }

    #[test]
    fn heads_kept_blob_by_blob_are_the_heads_kept_of_the_whole() {
        let full = our_catalog();
        let mut whole = full.clone();
        let whole_heads = keep_channel_heads(&mut whole);
        // Bundles before their channels, one blob at a time, as a file may order them.
        let mut keeper = ChannelHeadsKeeper::default();
        // finish() sees the whole content, as the loader merges every blob before it.
        let mut streamed = full.clone();
        for bundle in &full.bundles {
            keeper.add(&DeclarativeConfig {
                bundles: vec![bundle.clone()],
                ..Default::default()
            });
        }
        keeper.add(&DeclarativeConfig {
            bundles: vec![],
            ..full
        });
        let streamed_heads = keeper.finish(&mut streamed);
        assert!(!whole_heads.is_empty());
        assert_eq!(streamed_heads, whole_heads);
        let names = |c: &DeclarativeConfig| {
            let mut kept: Vec<(String, String, Value)> = c
                .others
                .iter()
                .filter(|m| m.schema.starts_with("olm-rs.packagemanifest."))
                .map(|m| (m.package.clone(), m.name.clone(), m.blob.clone()))
                .collect();
            kept.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            kept
        };
        assert!(!names(&whole).is_empty());
        assert_eq!(names(&streamed), names(&whole));
    }

    #[test]
    fn deprecations_and_deprecated_bundles_show_as_upstream() {
        let mut content = our_catalog();
        let rw_channel = content
            .channels
            .iter()
            .find(|c| c.package == "reverse-words")
            .unwrap()
            .clone();
        let head = UpgradeEdges::new(&rw_channel.entries)
            .head()
            .unwrap()
            .to_string();
        content
            .deprecations
            .push(crate::catalog::model::fbc::Deprecation {
                package: "reverse-words".into(),
                entries: vec![
                    dep("olm.package", "", "package gone"),
                    dep("olm.channel", &rw_channel.name, "channel gone"),
                    dep("olm.bundle", &head, "bundle gone"),
                ],
                ..Default::default()
            });
        let all = manifests(&content, &none(), &info());
        let rw = &all["reverse-words"];
        assert_eq!(
            rw.status.deprecation.as_ref().unwrap().message,
            "package gone"
        );
        let ch = rw
            .status
            .channels
            .iter()
            .find(|c| c.name == rw_channel.name)
            .unwrap();
        assert_eq!(ch.deprecation.as_ref().unwrap().message, "channel gone");
        let entry = ch.entries.iter().find(|e| e.name == head).unwrap();
        assert_eq!(entry.deprecation.as_ref().unwrap().message, "bundle gone");
    }

    fn dep(
        schema: &str,
        name: &str,
        message: &str,
    ) -> crate::catalog::model::fbc::DeprecationEntry {
        crate::catalog::model::fbc::DeprecationEntry {
            reference: crate::catalog::model::fbc::DeprecationReference {
                schema: schema.into(),
                name: name.into(),
            },
            message: message.into(),
        }
    }
}
