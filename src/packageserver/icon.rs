//! The package icon the `icon` subresource serves: the first icon of the default channel's
//! head CSV. Only that subresource shows an icon (lists, gets and watches leave them out,
//! as upstream), and icons are most of a channel head's description, so a snapshot keeps
//! one per package, as a blob of [`SCHEMA_DEFAULT_ICON`], and PackageManifests keep none:
//! the subresource reads it from the snapshot when asked. Icons are kept by content
//! ([`SCHEMA_ICON_DATA`]): packages that show the same icon (a vendor's operators, the
//! same package in several catalogs' copies) share one.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::description::{Icon, describe, head_csv};
use crate::catalog::model::fbc::{Bundle, Channel, DeclarativeConfig, Meta, Package};
use crate::catalog::model::upgrade_edges::UpgradeEdges;
use crate::snapshots::{ChannelHeadTexts, PackedOthers};

/// The schema of the blobs that name a package's default icon in a snapshot: the blob is
/// the name of the [`SCHEMA_ICON_DATA`] blob that holds it.
pub const SCHEMA_DEFAULT_ICON: &str = "olm-rs.packagemanifest.icon";

/// The schema of the blobs that hold an icon, named by the SHA-256 of its content.
pub const SCHEMA_ICON_DATA: &str = "olm-rs.packagemanifest.icon-data";

/// The name an icon is kept under: the SHA-256 of its media type and data, in hex.
fn content_name(icon: &Icon) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(icon.mediatype.as_bytes());
    hash.update([0]);
    hash.update(icon.base64data.as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The head bundle whose icon is `package`'s default icon, as [`super::manifest::manifests`]
/// picks the default channel: the default channel's head; when that head has no CSV, the
/// first channel by name whose head has one; none when no channel has the default's name.
fn icon_head<'c>(
    package: &Package,
    channels: impl Iterator<Item = &'c Channel>,
    has_csv: impl Fn(&str, &str) -> bool,
) -> Option<&'c str> {
    let mut heads: Vec<(&str, Option<&str>)> = channels
        .filter(|c| c.package == package.name)
        .map(|c| {
            let head = UpgradeEdges::new(&c.entries).head().ok();
            let head = head.filter(|h| has_csv(&package.name, h));
            (c.name.as_str(), head)
        })
        .collect();
    heads.sort_by(|a, b| a.0.cmp(b.0));
    match heads
        .iter()
        .find(|(name, _)| *name == package.default_channel)
    {
        Some((_, Some(head))) => Some(head),
        Some((_, None)) => heads.iter().find_map(|(_, head)| *head),
        None => None,
    }
}

/// Adds to `content` the blobs of its default icons, taken from `icons` (the first icon of
/// each channel head, by package and bundle); `kept` are the heads whose CSVs were kept.
pub(super) fn keep_default_icons(
    content: &mut DeclarativeConfig,
    mut icons: HeadIcons,
    kept: &BTreeSet<(String, String)>,
) {
    let found: Vec<Meta> = {
        let content = &*content;
        // A head not kept may still show a CSV: one its `olm.csv.metadata` describes.
        let has_csv = |package: &str, name: &str| {
            kept.contains(&(package.to_string(), name.to_string()))
                || content
                    .bundles
                    .iter()
                    .find(|b| b.package == package && b.name == name)
                    .and_then(head_csv)
                    .is_some()
        };
        let mut found = Vec::new();
        let mut data = BTreeSet::new();
        for package in &content.packages {
            let Some(head) = icon_head(package, content.channels.iter(), has_csv) else {
                continue;
            };
            if let Some(icon) = icons.remove(&(package.name.clone(), head.to_string())) {
                let name = content_name(&icon);
                if data.insert(name.clone()) {
                    found.push(Meta {
                        schema: SCHEMA_ICON_DATA.into(),
                        package: String::new(),
                        name: name.clone(),
                        // Moved, not serialized: a string grown while writing would keep up
                        // to twice the icon's size.
                        blob: serde_json::json!({
                            "base64data": icon.base64data,
                            "mediatype": icon.mediatype,
                        }),
                    });
                }
                found.push(Meta {
                    schema: SCHEMA_DEFAULT_ICON.into(),
                    package: package.name.clone(),
                    name: head.to_string(),
                    blob: Value::String(name),
                });
            }
        }
        found
    };
    content
        .others
        .retain(|m| m.schema != SCHEMA_DEFAULT_ICON && m.schema != SCHEMA_ICON_DATA);
    content.others.extend(found);
}

/// The default icons of a catalog, found by package.
pub struct DefaultIcons<'a> {
    /// Content that still has its manifests, whose icons are read from the bundles' CSVs;
    /// None for content whose manifests were dropped (channel heads were kept beside it),
    /// where an icon not kept is no icon.
    content: Option<&'a DeclarativeConfig>,
    /// Package → the name of its icon's data.
    kept: BTreeMap<&'a str, &'a str>,
    data: BTreeMap<&'a str, &'a Value>,
}

impl<'a> DefaultIcons<'a> {
    /// The icons of `content`, whose channel heads `heads` are (none: content with its
    /// manifests).
    pub fn of(content: &'a DeclarativeConfig, heads: &ChannelHeadTexts) -> Self {
        DefaultIcons {
            content: heads.is_empty().then_some(content),
            ..Self::kept(&content.others)
        }
    }

    /// The icons kept in `others` (of content whose manifests were dropped, see
    /// [`keep_default_icons`]), without the rest of the content.
    pub fn kept(others: &'a [Meta]) -> Self {
        let (mut kept, mut data) = (BTreeMap::new(), BTreeMap::new());
        for meta in others {
            if meta.schema == SCHEMA_DEFAULT_ICON
                && let Some(name) = meta.blob.as_str()
            {
                kept.insert(meta.package.as_str(), name);
            }
            if meta.schema == SCHEMA_ICON_DATA {
                data.insert(meta.name.as_str(), &meta.blob);
            }
        }
        DefaultIcons {
            content: None,
            kept,
            data,
        }
    }

    /// `package`'s default icon, if its default channel's head CSV has one.
    pub fn get(&self, package: &str) -> Option<Icon> {
        if let Some(name) = self.kept.get(package) {
            let blob = self.data.get(name)?;
            return Icon::deserialize(*blob).ok();
        }
        let content = self.content?;
        let bundle = |p: &str, b: &str| -> Option<&Bundle> {
            content
                .bundles
                .iter()
                .find(|x| x.package == p && x.name == b)
        };
        let pkg = content.packages.iter().find(|p| p.name == package)?;
        let has_csv = |p: &str, b: &str| bundle(p, b).and_then(head_csv).is_some();
        let head = icon_head(pkg, content.channels.iter(), has_csv)?;
        let csv = head_csv(bundle(package, head)?)?;
        describe(&csv).icon.into_iter().next()
    }
}

/// `package`'s default icon as a snapshot keeps it (content whose manifests were dropped,
/// see [`keep_default_icons`]): only that icon's blob is decoded.
pub fn kept_icon(others: &PackedOthers, package: &str) -> Option<Icon> {
    let pointer = others.find(|schema, p, _| schema == SCHEMA_DEFAULT_ICON && p == package)?;
    let name = pointer.blob.as_str()?;
    let data = others.find(|schema, _, n| schema == SCHEMA_ICON_DATA && n == name)?;
    Icon::deserialize(&data.blob).ok()
}

/// An icon's bytes as served, decoded as upstream decodes them (white space skipped); none
/// when the data is not base64.
pub fn decode(icon: &Icon) -> Option<Vec<u8>> {
    use base64::Engine;
    let data: String = icon.base64data.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

/// The first icon of each channel head, by (package, bundle), collected for
/// [`keep_default_icons`].
pub(super) type HeadIcons = BTreeMap<(String, String), Icon>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packageserver::manifest::keep_channel_heads;

    fn our_catalog() -> DeclarativeConfig {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        crate::catalog::reading::load::load_path(&root).unwrap()
    }

    /// `content` with a copy of `package` under another name: same bundles, same icon.
    fn with_copy(mut content: DeclarativeConfig, package: &str, copy: &str) -> DeclarativeConfig {
        let mut p = content
            .packages
            .iter()
            .find(|p| p.name == package)
            .unwrap()
            .clone();
        p.name = copy.into();
        content.packages.push(p);
        let channels: Vec<Channel> = content
            .channels
            .iter()
            .filter(|c| c.package == package)
            .cloned()
            .collect();
        for mut c in channels {
            c.package = copy.into();
            content.channels.push(c);
        }
        let bundles: Vec<Bundle> = content
            .bundles
            .iter()
            .filter(|b| b.package == package)
            .cloned()
            .collect();
        for mut b in bundles {
            b.package = copy.into();
            content.bundles.push(b);
        }
        content
    }

    #[test]
    fn packages_with_the_same_icon_share_its_data() {
        let full = with_copy(our_catalog(), "reverse-words", "reverse-words-copy");
        let mut slim = full.clone();
        let heads = keep_channel_heads(&mut slim);
        let count = |schema: &str| slim.others.iter().filter(|m| m.schema == schema).count();
        let (full_icons, slim_icons) = (
            DefaultIcons::of(&full, &ChannelHeadTexts::default()),
            DefaultIcons::of(&slim, &heads),
        );
        let icon = slim_icons
            .get("reverse-words")
            .expect("reverse-words has an icon");
        assert_eq!(slim_icons.get("reverse-words-copy").as_ref(), Some(&icon));
        assert_eq!(full_icons.get("reverse-words-copy").as_ref(), Some(&icon));
        assert_eq!(count(SCHEMA_DEFAULT_ICON), count(SCHEMA_ICON_DATA) + 1);
        assert!(decode(&icon).is_some_and(|bytes| !bytes.is_empty()));
        // As a snapshot keeps them (packed): the same icon for every package, none for a
        // package that has none.
        let packed = crate::snapshots::SnapshotContent::pack(slim.clone());
        for package in &slim.packages {
            assert_eq!(
                kept_icon(&packed.others, &package.name),
                slim_icons.get(&package.name),
                "{}",
                package.name
            );
        }
        assert_eq!(kept_icon(&packed.others, "no-such-package"), None);
    }

    #[test]
    fn data_that_is_not_base64_is_no_icon() {
        let icon = Icon {
            base64data: "not base64!".into(),
            mediatype: "image/png".into(),
        };
        assert_eq!(decode(&icon), None);
        let spaced = Icon {
            base64data: "aGVs\nbG8=".into(),
            mediatype: "image/png".into(),
        };
        assert_eq!(decode(&spaced).as_deref(), Some(&b"hello"[..]));
    }
}
