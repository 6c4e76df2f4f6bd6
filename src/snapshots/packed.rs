//! A catalog's content as a snapshot holds it between resolutions: the bundles (most of a
//! catalog: every property of every bundle) as deflated JSON, the rest as loaded.
//!
//! Bundle properties decoded are `serde_json::Value` trees, a map node of about 600 bytes
//! for a three-field `olm.gvk`: the public community catalog (5,895 bundles) held about
//! 35 MiB of them, for about 3 MiB of JSON text, in every process that loaded it. Readers
//! decode them when they build something of their own from a catalog (a resolver index,
//! the packagemanifests), which happens when the content changes, not per request.

use std::io::{Read, Write};
use std::sync::Arc;

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

use crate::catalog::model::fbc::{
    Bundle, Channel, DeclarativeConfig, Deprecation, Meta, Package, reads_back_from_text,
};
use crate::resolver::input::Catalog;

/// Bundles packed: their JSON, deflated.
#[derive(Clone, Debug)]
pub struct PackedBundles {
    held: Held,
    count: usize,
}

#[derive(Clone, Debug)]
enum Held {
    Deflated(Arc<[u8]>),
    /// Bundles whose JSON could not be decoded again: a property nested nearly as deep as
    /// the decoder allows (128 levels) is deeper than that inside a bundle list.
    Plain(Arc<[Bundle]>),
}

impl Default for PackedBundles {
    fn default() -> Self {
        PackedBundles::pack(Vec::new())
    }
}

impl PackedBundles {
    pub fn pack(bundles: Vec<Bundle>) -> PackedBundles {
        let count = bundles.len();
        let readable = bundles
            .iter()
            .flat_map(|b| &b.properties)
            .all(|p| reads_back_from_text(&p.value));
        if !readable {
            return PackedBundles {
                held: Held::Plain(bundles.into()),
                count,
            };
        }
        // Fast compression: the JSON repeats its keys and names, and level 1 keeps most of
        // what level 9 gains for a fraction of the time.
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
        serde_json::to_writer(&mut encoder, &bundles)
            .and_then(|()| encoder.flush().map_err(serde_json::Error::io))
            .expect("serializing bundles into memory cannot fail");
        let deflated = encoder.finish().expect("deflating into memory cannot fail");
        PackedBundles {
            held: Held::Deflated(deflated.into()),
            count,
        }
    }

    pub fn unpack(&self) -> Vec<Bundle> {
        match &self.held {
            Held::Plain(bundles) => bundles.to_vec(),
            // None is too deep: `pack` kept those decoded.
            Held::Deflated(deflated) => inflated_json(deflated),
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held deflated (0 when kept decoded).
    pub fn packed_size(&self) -> usize {
        match &self.held {
            Held::Deflated(deflated) => deflated.len(),
            Held::Plain(_) => 0,
        }
    }
}

/// JSON this process serialized and deflated, decoded again (nothing too deep to decode is
/// ever deflated: see [`reads_back_from_text`]).
fn inflated_json<T: serde::de::DeserializeOwned>(deflated: &[u8]) -> T {
    let mut json = Vec::new();
    DeflateDecoder::new(deflated)
        .read_to_end(&mut json)
        .expect("inflating what this process deflated cannot fail");
    serde_json::from_slice(&json).expect("JSON this process serialized decodes")
}

/// A [`DeclarativeConfig`] with its bundles packed.
#[derive(Clone, Debug, Default)]
pub struct SnapshotContent {
    pub packages: Vec<Package>,
    pub channels: Vec<Channel>,
    pub bundles: PackedBundles,
    pub deprecations: Vec<Deprecation>,
    /// Blobs of other schemas: what the packageserver keeps of a load (icons), each packed
    /// on its own, as a request reads one.
    pub others: PackedOthers,
}

impl SnapshotContent {
    pub fn pack(content: DeclarativeConfig) -> SnapshotContent {
        SnapshotContent {
            bundles: PackedBundles::pack(content.bundles),
            packages: content.packages,
            channels: content.channels,
            deprecations: content.deprecations,
            others: PackedOthers::pack(content.others),
        }
    }

    /// The content whole again (a copy; the snapshot keeps its packed form).
    pub fn unpack(&self) -> DeclarativeConfig {
        DeclarativeConfig {
            packages: self.packages.clone(),
            channels: self.channels.clone(),
            bundles: self.bundles.unpack(),
            deprecations: self.deprecations.clone(),
            others: self.others.unpack(),
        }
    }
}

/// Blobs of other schemas, each with its JSON deflated when that saves memory: icons (most
/// of them PNG in base64) are most of these, and deflate wins back most of base64's
/// third. A request reads one blob, so each is packed on its own.
#[derive(Clone, Debug, Default)]
pub struct PackedOthers(Vec<PackedMeta>);

#[derive(Clone, Debug)]
struct PackedMeta {
    schema: Box<str>,
    package: Box<str>,
    name: Box<str>,
    blob: PackedBlob,
}

#[derive(Clone, Debug)]
enum PackedBlob {
    /// Small blobs (a name, a flag) and blobs too deep to decode again stay as they are.
    Plain(serde_json::Value),
    Deflated(Box<[u8]>),
}

/// Blobs whose JSON is shorter than this are kept plain: deflate gains nothing on them.
const DEFLATE_FROM: usize = 512;

impl PackedOthers {
    pub fn pack(metas: Vec<Meta>) -> PackedOthers {
        let packed = metas
            .into_iter()
            .map(|meta| {
                let json = serde_json::to_vec(&meta.blob).expect("a JSON value serializes");
                let blob = if json.len() < DEFLATE_FROM || !reads_back_from_text(&meta.blob) {
                    PackedBlob::Plain(meta.blob)
                } else {
                    let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
                    encoder
                        .write_all(&json)
                        .expect("deflating into memory cannot fail");
                    let deflated = encoder.finish().expect("deflating into memory cannot fail");
                    PackedBlob::Deflated(deflated.into_boxed_slice())
                };
                PackedMeta {
                    schema: meta.schema.into(),
                    package: meta.package.into(),
                    name: meta.name.into(),
                    blob,
                }
            })
            .collect();
        PackedOthers(packed)
    }

    pub fn unpack(&self) -> Vec<Meta> {
        self.0.iter().map(PackedMeta::unpack).collect()
    }

    /// The first blob whose (schema, package, name) `matches`, decoded; no other is.
    pub fn find(&self, matches: impl Fn(&str, &str, &str) -> bool) -> Option<Meta> {
        self.0
            .iter()
            .find(|m| matches(&m.schema, &m.package, &m.name))
            .map(PackedMeta::unpack)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes the blobs take as held (plain ones counted as their JSON).
    pub fn packed_size(&self) -> usize {
        self.0
            .iter()
            .map(|m| match &m.blob {
                PackedBlob::Plain(value) => value.to_string().len(),
                PackedBlob::Deflated(bytes) => bytes.len(),
            })
            .sum()
    }
}

impl PackedMeta {
    fn unpack(&self) -> Meta {
        let blob = match &self.blob {
            PackedBlob::Plain(value) => value.clone(),
            PackedBlob::Deflated(deflated) => inflated_json(deflated),
        };
        Meta {
            schema: self.schema.to_string(),
            package: self.package.to_string(),
            name: self.name.to_string(),
            blob,
        }
    }
}

/// A channel head's text as a snapshot keeps it (the JSON of what packagemanifests show of
/// its CSV), compressed: descriptions are prose, most of a catalog's packagemanifests.
/// Every list reads every head, so LZ4: it decompresses at GB/s where deflate took 40 ms per
/// list of the community catalog, for about half the text instead of a third.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadText {
    compressed: Box<[u8]>,
    len: usize,
}

impl HeadText {
    pub fn new(text: &str) -> HeadText {
        HeadText {
            compressed: lz4_flex::block::compress(text.as_bytes()).into_boxed_slice(),
            len: text.len(),
        }
    }

    /// The text's bytes, decompressed (no UTF-8 check: lists write them as they are).
    pub fn bytes(&self) -> Vec<u8> {
        lz4_flex::block::decompress(&self.compressed, self.len)
            .expect("decompressing what this process compressed cannot fail")
    }

    /// The text, decompressed.
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes()).expect("the text was UTF-8 when compressed")
    }

    /// The length of the text.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn packed_size(&self) -> usize {
        self.compressed.len()
    }
}

/// A catalog as a snapshot holds it: [`Catalog`] with its content packed and shared (a
/// priority change makes a new snapshot of the same content).
#[derive(Clone, Debug)]
pub struct SnapshotCatalog {
    pub name: String,
    pub namespace: String,
    pub priority: i32,
    pub content: Arc<SnapshotContent>,
}

impl SnapshotCatalog {
    pub fn pack(catalog: Catalog) -> SnapshotCatalog {
        SnapshotCatalog {
            name: catalog.name,
            namespace: catalog.namespace,
            priority: catalog.priority,
            content: Arc::new(SnapshotContent::pack(catalog.content)),
        }
    }

    /// The catalog as the resolver reads it (decoded: a copy).
    pub fn unpack(&self) -> Catalog {
        Catalog {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            priority: self.priority,
            content: self.content.unpack(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_catalog_unpacks_as_it_was_packed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        let content = crate::catalog::reading::load::load_path(&root).unwrap();
        let packed = SnapshotContent::pack(content.clone());
        assert_eq!(packed.bundles.len(), content.bundles.len());
        assert_eq!(packed.unpack(), content);
        // Its manifests make most of it; packed, they take a fraction of their JSON.
        let json = serde_json::to_vec(&content.bundles).unwrap().len();
        assert!(
            packed.bundles.packed_size() * 3 < json,
            "{} of {json}",
            packed.bundles.packed_size()
        );
    }

    #[test]
    fn a_head_text_reads_back_whole_and_is_held_compressed() {
        let text = format!(
            r#"{{"name":"x.v1","desc":{{"description":"{}"}}}}"#,
            "Deploys and manages the X application. ".repeat(60)
        );
        let head = HeadText::new(&text);
        assert_eq!(head.text(), text);
        assert_eq!(head.len(), text.len());
        assert!(
            head.packed_size() * 5 < text.len(),
            "{}",
            head.packed_size()
        );
        assert_eq!(HeadText::new("").text(), "");
    }

    #[test]
    fn other_blobs_are_deflated_one_by_one_and_read_alone() {
        let icon_data: String = (0..4000).map(|i| ["iVBO", "Rw0K", "Gg=="][i % 3]).collect();
        let metas = vec![
            Meta {
                schema: "icon".into(),
                package: "p".into(),
                name: "abc".into(),
                blob: serde_json::json!({"base64data": icon_data, "mediatype": "image/png"}),
            },
            Meta {
                schema: "pointer".into(),
                package: "p".into(),
                name: "p.v1".into(),
                blob: serde_json::json!("abc"),
            },
        ];
        let packed = PackedOthers::pack(metas.clone());
        assert_eq!(packed.unpack(), metas);
        assert_eq!(packed.len(), 2);
        let json: usize = metas.iter().map(|m| m.blob.to_string().len()).sum();
        assert!(packed.packed_size() * 4 < json, "{}", packed.packed_size());
        assert_eq!(
            packed.find(|schema, _, name| schema == "icon" && name == "abc"),
            Some(metas[0].clone())
        );
        assert_eq!(packed.find(|_, package, _| package == "q"), None);
    }

    #[test]
    fn a_property_nested_too_deep_to_decode_in_a_list_is_kept_decoded() {
        let mut value = serde_json::json!("leaf");
        for _ in 0..126 {
            value = serde_json::json!([value]);
        }
        let bundle = Bundle {
            name: "deep.v1".into(),
            package: "deep".into(),
            properties: vec![crate::catalog::model::fbc::Property::new("x", value)],
            ..Bundle::default()
        };
        let packed = PackedBundles::pack(vec![bundle.clone()]);
        assert_eq!(packed.packed_size(), 0);
        assert_eq!(packed.unpack(), [bundle]);
    }
}
