//! A stable digest of a catalog's content, so that a reload can tell a real change from the
//! same content read again (in another order, or from another server).
//!
//! Each package, channel, bundle, deprecation and other blob is hashed on its own over a
//! canonical form (object keys sorted, channel entries, skips, properties and related images
//! as sets, `olm.bundle.object` data decoded to the manifest it carries, so that base64 of
//! YAML and base64 of JSON of the same object agree). Each section's item digests are sorted
//! before they are hashed together, so the order blobs were loaded or streamed in does not
//! matter. SHA-256 is written out here to keep the dependency set small.

use base64::Engine;
use serde_json::Value;

use super::fbc::*;

/// The hex SHA-256 of the catalog's canonical content.
pub fn content_digest(config: &DeclarativeConfig) -> String {
    let mut sections = Sha256::new();
    section(
        &mut sections,
        "packages",
        config.packages.iter().map(package_digest),
    );
    section(
        &mut sections,
        "channels",
        config.channels.iter().map(channel_digest),
    );
    section(
        &mut sections,
        "bundles",
        config.bundles.iter().map(bundle_digest),
    );
    section(
        &mut sections,
        "deprecations",
        config.deprecations.iter().map(deprecation_digest),
    );
    section(
        &mut sections,
        "others",
        config.others.iter().map(|m| {
            let mut h = Sha256::new();
            h.string(&m.schema);
            h.string(&m.package);
            h.string(&m.name);
            h.value(&m.blob);
            h.finish()
        }),
    );
    hex(&sections.finish())
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
    match (p.type_.as_str(), bundle_object_manifest(&p.value)) {
        (PROP_BUNDLE_OBJECT, Some(manifest)) => {
            h.string("manifest");
            h.value(&manifest);
        }
        _ => h.value(&p.value),
    }
    h.finish()
}

/// The object an `olm.bundle.object` value carries (base64 of JSON or YAML).
fn bundle_object_manifest(value: &Value) -> Option<Value> {
    let data = value.get("data")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    serde_json::from_slice(&bytes)
        .ok()
        .or_else(|| serde_yaml::from_slice(&bytes).ok())
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

/// SHA-256 (FIPS 180-4), fed with unambiguous, length-prefixed items.
struct Sha256 {
    state: [u32; 8],
    block: [u8; 64],
    filled: usize,
    length: u64,
}

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

impl Sha256 {
    fn new() -> Self {
        Sha256 {
            state: [
                0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
                0x5be0cd19,
            ],
            block: [0; 64],
            filled: 0,
            length: 0,
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        self.length = self.length.wrapping_add(data.len() as u64);
        while !data.is_empty() {
            let take = (64 - self.filled).min(data.len());
            self.block[self.filled..self.filled + take].copy_from_slice(&data[..take]);
            self.filled += take;
            data = &data[take..];
            if self.filled == 64 {
                let block = self.block;
                self.compress(&block);
                self.filled = 0;
            }
        }
    }

    fn compress(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 64];
        for (i, chunk) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = self.state;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (s, v) in self.state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *s = s.wrapping_add(v);
        }
    }

    fn finish(mut self) -> [u8; 32] {
        let bits = self.length.wrapping_mul(8);
        self.update(&[0x80]);
        while self.filled != 56 {
            self.update(&[0]);
        }
        self.update(&bits.to_be_bytes());
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(self.state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
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
    fn order_and_encoding_do_not_change_the_digest() {
        let base = catalog();
        let digest = content_digest(&base);
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, content_digest(&base.clone()));

        let mut shuffled = base.clone();
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
