//! A stable digest of a catalog's content, so that a reload can tell a real change from the
//! same content read again (in another order, or from another server).
//!
//! Each package, channel, bundle, deprecation and other blob is hashed on its own over a
//! canonical form (object keys sorted, channel entries, skips, properties and related images
//! as sets, `olm.bundle.object` data decoded to the manifest it carries, so that base64 of
//! YAML and base64 of JSON of the same object agree). Each section's item digests are sorted
//! before they are hashed together, so the order blobs were loaded or streamed in does not
//! matter. SHA-256 is the sha2 crate's, as everywhere else in olm (OCI digests,
//! packageserver hashes).

use serde_json::Value;

use crate::catalog::bundles::csv::decode_bundle_object;
use crate::catalog::model::fbc::*;

/// The hex SHA-256 of the catalog's canonical content.
pub fn content_digest(config: &DeclarativeConfig) -> String {
    let mut digest = ContentDigest::default();
    digest.add(config);
    digest.finish()
}

/// [`content_digest`] of a catalog read piece by piece: what each added piece contributes is
/// its items' digests (32 bytes each), so the pieces need not be kept.
#[derive(Clone, Debug, Default)]
pub struct ContentDigest {
    packages: Vec<[u8; 32]>,
    channels: Vec<[u8; 32]>,
    bundles: Vec<[u8; 32]>,
    deprecations: Vec<[u8; 32]>,
    others: Vec<[u8; 32]>,
}

impl ContentDigest {
    pub fn add(&mut self, config: &DeclarativeConfig) {
        self.packages
            .extend(config.packages.iter().map(package_digest));
        self.channels
            .extend(config.channels.iter().map(channel_digest));
        self.bundles
            .extend(config.bundles.iter().map(bundle_digest));
        self.deprecations
            .extend(config.deprecations.iter().map(deprecation_digest));
        self.others.extend(config.others.iter().map(|m| {
            let mut h = Sha256::new();
            h.string(&m.schema);
            h.string(&m.package);
            h.string(&m.name);
            h.value(&m.blob);
            h.finish()
        }));
    }

    pub fn finish(self) -> String {
        let mut sections = Sha256::new();
        section(&mut sections, "packages", self.packages.into_iter());
        section(&mut sections, "channels", self.channels.into_iter());
        section(&mut sections, "bundles", self.bundles.into_iter());
        section(&mut sections, "deprecations", self.deprecations.into_iter());
        section(&mut sections, "others", self.others.into_iter());
        hex(&sections.finish())
    }
}

/// Hashes a sorted multiset of item digests under a label.
fn section(h: &mut Sha256, label: &str, items: impl Iterator<Item = [u8; 32]>) {
    let mut digests: Vec<[u8; 32]> = items.collect();
    digests.sort_unstable();
    h.string(label);
    h.count(digests.len());
    for d in &digests {
        h.update(d);
    }
}

fn properties_section(h: &mut Sha256, properties: &[Property]) {
    section(h, "properties", properties.iter().map(property_digest));
}

fn property_digest(p: &Property) -> [u8; 32] {
    let mut h = Sha256::new();
    h.string(&p.type_);
    match (p.type_.as_str(), decode_bundle_object(&p.value).ok()) {
        (PROP_BUNDLE_OBJECT, Some(manifest)) => {
            h.string("manifest");
            h.value(&manifest);
        }
        _ => h.value(&p.value),
    }
    h.finish()
}

fn package_digest(p: &Package) -> [u8; 32] {
    let mut h = Sha256::new();
    h.string(&p.schema);
    h.string(&p.name);
    h.string(&p.default_channel);
    match &p.icon {
        Some(icon) => {
            h.string("icon");
            h.string(&icon.base64data);
            h.string(&icon.mediatype);
        }
        None => h.string("no icon"),
    }
    h.string(&p.description);
    properties_section(&mut h, &p.properties);
    h.finish()
}

fn channel_digest(c: &Channel) -> [u8; 32] {
    let mut h = Sha256::new();
    h.string(&c.schema);
    h.string(&c.package);
    h.string(&c.name);
    section(
        &mut h,
        "entries",
        c.entries.iter().map(|e| {
            let mut h = Sha256::new();
            h.string(&e.name);
            h.string(&e.replaces);
            let mut skips: Vec<&str> = e.skips.iter().map(String::as_str).collect();
            skips.sort_unstable();
            h.count(skips.len());
            for s in skips {
                h.string(s);
            }
            h.string(&e.skip_range);
            h.finish()
        }),
    );
    properties_section(&mut h, &c.properties);
    h.finish()
}

fn bundle_digest(b: &Bundle) -> [u8; 32] {
    let mut h = Sha256::new();
    h.string(&b.schema);
    h.string(&b.package);
    h.string(&b.name);
    h.string(&b.image);
    properties_section(&mut h, &b.properties);
    section(
        &mut h,
        "relatedImages",
        b.related_images.iter().map(|r| {
            let mut h = Sha256::new();
            h.string(&r.name);
            h.string(&r.image);
            h.finish()
        }),
    );
    h.finish()
}

fn deprecation_digest(d: &Deprecation) -> [u8; 32] {
    let mut h = Sha256::new();
    h.string(&d.schema);
    h.string(&d.package);
    section(
        &mut h,
        "entries",
        d.entries.iter().map(|e| {
            let mut h = Sha256::new();
            h.string(&e.reference.schema);
            h.string(&e.reference.name);
            h.string(&e.message);
            h.finish()
        }),
    );
    h.finish()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// SHA-256 (the sha2 crate's), fed with unambiguous, length-prefixed items.
struct Sha256 {
    context: sha2::Sha256,
}

impl Sha256 {
    fn new() -> Self {
        Sha256 {
            context: <sha2::Sha256 as sha2::Digest>::new(),
        }
    }

    fn update(&mut self, data: &[u8]) {
        sha2::Digest::update(&mut self.context, data);
    }

    fn finish(self) -> [u8; 32] {
        sha2::Digest::finalize(self.context).into()
    }

    fn count(&mut self, n: usize) {
        self.update(&(n as u64).to_le_bytes());
    }

    fn string(&mut self, s: &str) {
        self.count(s.len());
        self.update(s.as_bytes());
    }

    /// A JSON value with object keys in sorted order, each kind tagged.
    fn value(&mut self, v: &Value) {
        match v {
            Value::Null => self.update(b"z"),
            Value::Bool(b) => self.update(if *b { b"t" } else { b"f" }),
            Value::Number(n) => {
                self.update(b"n");
                self.string(&n.to_string());
            }
            Value::String(s) => {
                self.update(b"s");
                self.string(s);
            }
            Value::Array(items) => {
                self.update(b"a");
                self.count(items.len());
                for item in items {
                    self.value(item);
                }
            }
            Value::Object(map) => {
                self.update(b"o");
                self.count(map.len());
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                for k in keys {
                    self.string(k);
                    self.value(&map[k]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    fn sha(data: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(data);
        hex(&h.finish())
    }

    #[test]
    fn sha256_matches_the_standard_vectors() {
        assert_eq!(
            sha(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        // Fed in uneven pieces across block boundaries.
        let mut h = Sha256::new();
        let million = vec![b'a'; 1_000_000];
        for piece in million.chunks(997) {
            h.update(piece);
        }
        assert_eq!(
            hex(&h.finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    fn catalog() -> DeclarativeConfig {
        let object = |text: &str| {
            Property::new(
                PROP_BUNDLE_OBJECT,
                json!({ "data": base64::engine::general_purpose::STANDARD.encode(text) }),
            )
        };
        DeclarativeConfig {
            packages: vec![
                Package {
                    schema: SCHEMA_PACKAGE.into(),
                    name: "a".into(),
                    default_channel: "stable".into(),
                    ..Default::default()
                },
                Package {
                    schema: SCHEMA_PACKAGE.into(),
                    name: "b".into(),
                    default_channel: "alpha".into(),
                    ..Default::default()
                },
            ],
            channels: vec![Channel {
                schema: SCHEMA_CHANNEL.into(),
                name: "stable".into(),
                package: "a".into(),
                entries: vec![
                    ChannelEntry {
                        name: "a.v1".into(),
                        ..Default::default()
                    },
                    ChannelEntry {
                        name: "a.v2".into(),
                        replaces: "a.v1".into(),
                        skips: vec!["a.v0".into(), "a.v0.5".into()],
                        ..Default::default()
                    },
                ],
                properties: vec![],
            }],
            bundles: vec![Bundle {
                schema: SCHEMA_BUNDLE.into(),
                name: "a.v1".into(),
                package: "a".into(),
                image: "quay.io/a:v1".into(),
                properties: vec![
                    Property::new(
                        PROP_PACKAGE,
                        json!({"packageName": "a", "version": "1.0.0"}),
                    ),
                    Property::new(
                        PROP_GVK,
                        json!({"group": "g", "kind": "K", "version": "v1"}),
                    ),
                    object("{\"kind\":\"ClusterServiceVersion\",\"metadata\":{\"name\":\"a.v1\"}}"),
                ],
                related_images: vec![],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn digest_of_pieces_is_the_digest_of_the_whole() {
        let whole = catalog();
        let mut pieces = ContentDigest::default();
        for bundle in whole.bundles.iter().rev() {
            pieces.add(&DeclarativeConfig {
                bundles: vec![bundle.clone()],
                ..Default::default()
            });
        }
        pieces.add(&DeclarativeConfig {
            bundles: vec![],
            ..whole.clone()
        });
        assert_eq!(pieces.finish(), content_digest(&whole));
    }

    #[test]
    fn order_and_encoding_do_not_change_the_digest() {
        let base = catalog();
        let digest = content_digest(&base);
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, content_digest(&base));

        let mut shuffled = base;
        shuffled.packages.reverse();
        shuffled.channels[0].entries.reverse();
        shuffled.channels[0].entries[0].skips.reverse();
        shuffled.bundles[0].properties.reverse();
        // Keys in another order, and the manifest as YAML instead of JSON.
        shuffled.bundles[0].properties[1] = Property::new(
            PROP_GVK,
            json!({"version": "v1", "kind": "K", "group": "g"}),
        );
        shuffled.bundles[0].properties[0] = Property::new(
            PROP_BUNDLE_OBJECT,
            json!({ "data": base64::engine::general_purpose::STANDARD
                .encode("metadata:\n  name: a.v1\nkind: ClusterServiceVersion\n") }),
        );
        assert_eq!(content_digest(&shuffled), digest);
    }

    #[test]
    fn content_changes_change_the_digest() {
        let base = catalog();
        let digest = content_digest(&base);
        let mut changed = vec![];
        let mut c = base.clone();
        c.packages[1].default_channel = "beta".into();
        changed.push(c);
        let mut c = base.clone();
        c.channels[0].entries[1].skip_range = "<2.0.0".into();
        changed.push(c);
        let mut c = base.clone();
        c.bundles[0].image = "quay.io/a:v1.0".into();
        changed.push(c);
        let mut c = base.clone();
        c.bundles[0].properties[0] = Property::new(
            PROP_PACKAGE,
            json!({"packageName": "a", "version": "1.0.1"}),
        );
        changed.push(c);
        let mut c = base.clone();
        c.deprecations.push(Deprecation {
            schema: SCHEMA_DEPRECATIONS.into(),
            package: "a".into(),
            entries: vec![DeprecationEntry {
                reference: DeprecationReference {
                    schema: SCHEMA_PACKAGE.into(),
                    name: String::new(),
                },
                message: "gone".into(),
            }],
        });
        changed.push(c);
        // Moving a name from one field to the next is a change too.
        let mut c = base.clone();
        c.channels[0].entries[1].replaces = String::new();
        c.channels[0].entries[1].skips.push("a.v1".into());
        changed.push(c);
        let mut c = base;
        c.bundles[0].related_images.push(RelatedImage {
            name: "op".into(),
            image: "quay.io/op:v1".into(),
        });
        changed.push(c);
        let digests: std::collections::BTreeSet<String> =
            changed.iter().map(content_digest).collect();
        assert_eq!(digests.len(), changed.len());
        assert!(!digests.contains(&digest));
    }
}
