//! What the registry RPCs need, built once at startup.
//!
//! In memory: packages (default channel, deprecation), channels (head, deprecation, their
//! entries with replaces/skips/skipRange), and per bundle its provided GVKs and the protobuf
//! encoding of its *light* `api.Bundle` (no manifests). The manifests (`csvJson`, `object`)
//! and custom-schema blobs go to a spill file ([`super::store`]) and are read back only by
//! the RPCs that return them. Catalog files are loaded one at a time, so the whole catalog is
//! never decoded in memory at once.
//!
//! The index is a handful of flat tables: every string is interned once into one text
//! buffer, every light bundle encoding sits in one byte buffer, and the variable-length
//! parts (a package's channels, a channel's entries, an entry's skips, a bundle's GVKs) are
//! [`Span`]s into shared tables. So it takes a few large allocations instead of thousands of
//! small ones scattered among the loader's freed memory, and that memory can go back to the
//! OS once the catalog is loaded.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use prost::Message;
use serde_json::Value;

use super::convert::{convert_bundle, csv_from_metadata};
use super::generated as api;
use super::store::{Loc, Store, StoreWriter};
use crate::catalog::fbc::{self, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use crate::catalog::files::catalog_files;
use crate::catalog::load::{LoadOptions, load_file_with};
use crate::catalog::upgrade_edges::{HeadError, UpgradeEdges};

/// A query failure: upstream answers these with gRPC code UNKNOWN and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

/// `start..end` in one of the index's tables: a string in [`Index::text`], a light bundle
/// in [`Index::light`], or rows of [`Index::channels`], [`Index::entries`],
/// [`Index::skips`] or [`Index::gvks`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    fn rows(self) -> std::ops::Range<u32> {
        self.start..self.end
    }
}

/// A table length or offset as stored in the index.
fn offset(n: usize) -> anyhow::Result<u32> {
    u32::try_from(n).map_err(|_| anyhow::anyhow!("catalog too large to index (over 4 GiB)"))
}

struct PackageIdx {
    name: Span,
    default_channel: Span,
    deprecation: Option<Span>,
    /// Rows of `Index::channels`, sorted by name.
    channels: Span,
}

struct ChannelIdx {
    name: Span,
    deprecation: Option<Span>,
    /// Row of `Index::entries` of the head.
    head: u32,
    /// Rows of `Index::entries`, in the channel's order.
    entries: Span,
}

/// One bundle in one channel.
struct EntryIdx {
    package: u32,
    /// Row of `Index::channels`.
    channel: u32,
    bundle: u32,
    replaces: Span,
    /// Rows of `Index::skips`.
    skips: Span,
    skip_range: Span,
}

/// One bundle of a package (shared by the channels that list it).
struct BundleIdx {
    name: Span,
    /// Rows of `Index::gvks`.
    provided: Span,
    has_path: bool,
    /// Bytes of `Index::light`.
    light: Span,
    heavy: Loc,
}

pub struct Index {
    /// Every string of the index, each distinct one once.
    text: Box<str>,
    /// Sorted by name.
    packages: Box<[PackageIdx]>,
    /// Grouped by package.
    channels: Box<[ChannelIdx]>,
    entries: Box<[EntryIdx]>,
    /// The skips of every entry, back to back.
    skips: Box<[Span]>,
    bundles: Box<[BundleIdx]>,
    /// The provided (group, version, kind) of every bundle, back to back.
    gvks: Box<[[Span; 3]]>,
    /// The light `api.Bundle` encoding of every bundle, back to back.
    light: Box<[u8]>,
    /// (schema, package) → blobs of custom schemas (compact JSON), in load order.
    custom: HashMap<(String, String), Box<[Loc]>>,
    store: Store,
}

/// Interns strings into one buffer while the index is built.
#[derive(Default)]
struct TextBuilder {
    text: String,
    seen: HashMap<String, Span>,
}

impl TextBuilder {
    fn intern(&mut self, s: &str) -> anyhow::Result<Span> {
        if let Some(&span) = self.seen.get(s) {
            return Ok(span);
        }
        let start = offset(self.text.len())?;
        let end = offset(self.text.len() + s.len())?;
        self.text.push_str(s);
        let span = Span { start, end };
        self.seen.insert(s.to_owned(), span);
        Ok(span)
    }
}

fn q(s: &str) -> String {
    format!("{s:?}")
}

fn err<T>(message: String) -> Result<T, QueryError> {
    Err(QueryError(message))
}

struct PendingBundle {
    package: String,
    name: String,
    light: api::Bundle,
    provided: Vec<(String, String, String)>,
    heavy: Loc,
    /// For bundles whose CSV is synthesised from `olm.csv.metadata` once the package is known.
    csv_metadata: Option<(Value, Vec<fbc::RelatedImage>)>,
}

#[derive(Default)]
struct Builder {
    packages: Vec<fbc::Package>,
    channels: Vec<fbc::Channel>,
    bundles: Vec<PendingBundle>,
    deprecations: Vec<fbc::Deprecation>,
    custom: HashMap<(String, String), Vec<Loc>>,
}

impl Builder {
    fn add(
        &mut self,
        mut config: DeclarativeConfig,
        store: &mut StoreWriter,
    ) -> anyhow::Result<()> {
        for mut p in config.packages.drain(..) {
            p.properties.clear();
            self.packages.push(p);
        }
        self.channels.append(&mut config.channels);
        self.deprecations.append(&mut config.deprecations);
        for b in config.bundles.drain(..) {
            let c = convert_bundle(&b, None).map_err(|e| {
                anyhow::anyhow!("package {}, bundle {}: {e}", q(&b.package), q(&b.name))
            })?;
            let mut heavy = api::Bundle {
                csv_json: c.csv_json,
                object: c.objects,
                ..Default::default()
            };
            let csv_metadata = c.csv_metadata.map(|m| (m, b.related_images.clone()));
            let heavy = if csv_metadata.is_some() {
                Loc::default()
            } else {
                store.put(&std::mem::take(&mut heavy).encode_to_vec())?
            };
            self.bundles.push(PendingBundle {
                package: b.package,
                name: b.name,
                light: c.light,
                provided: c.provided,
                heavy,
                csv_metadata,
            });
        }
        for meta in config.others.drain(..) {
            if matches!(
                meta.schema.as_str(),
                SCHEMA_PACKAGE | SCHEMA_CHANNEL | SCHEMA_BUNDLE
            ) {
                continue;
            }
            let loc = store.put(meta.blob.to_string().as_bytes())?;
            self.custom
                .entry((meta.schema, meta.package))
                .or_default()
                .push(loc);
        }
        Ok(())
    }

    fn finish(mut self, mut store: StoreWriter) -> anyhow::Result<Index> {
        use anyhow::bail;
        self.packages.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = self.packages.windows(2).find(|w| w[0].name == w[1].name) {
            bail!("duplicate package {}", q(&w[0].name));
        }
        let package_ix: HashMap<&str, usize> = self
            .packages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();

        // Deprecations, by package.
        let mut pkg_deprecation: HashMap<String, String> = HashMap::new();
        let mut channel_deprecation: HashMap<(String, String), String> = HashMap::new();
        let mut bundle_deprecation: HashMap<(String, String), String> = HashMap::new();
        for d in &self.deprecations {
            if !package_ix.contains_key(d.package.as_str()) {
                bail!(
                    "cannot apply deprecations to an unknown package {}",
                    q(&d.package)
                );
            }
            for e in &d.entries {
                let key = (d.package.clone(), e.reference.name.clone());
                match e.reference.schema.as_str() {
                    SCHEMA_PACKAGE => {
                        pkg_deprecation.insert(d.package.clone(), e.message.clone());
                    }
                    SCHEMA_CHANNEL => {
                        channel_deprecation.insert(key, e.message.clone());
                    }
                    SCHEMA_BUNDLE => {
                        bundle_deprecation.insert(key, e.message.clone());
                    }
                    other => bail!(
                        "package {}: cannot deprecate an object of schema {}",
                        q(&d.package),
                        q(other)
                    ),
                }
            }
        }

        let mut text = TextBuilder::default();
        let mut gvks: Vec<[Span; 3]> = Vec::new();
        let mut light: Vec<u8> = Vec::new();

        // Bundles, by (package, name).
        let mut bundle_ix: HashMap<(String, String), u32> = HashMap::new();
        let mut bundle_package: Vec<usize> = Vec::with_capacity(self.bundles.len());
        let mut bundles = Vec::with_capacity(self.bundles.len());
        for mut b in self.bundles.drain(..) {
            let key = (b.package.clone(), b.name.clone());
            let Some(&pi) = package_ix.get(b.package.as_str()) else {
                bail!(
                    "unknown package {} for bundle {}",
                    q(&b.package),
                    q(&b.name)
                );
            };
            if bundle_ix.contains_key(&key) {
                bail!(
                    "package {} has duplicate bundle {}",
                    q(&b.package),
                    q(&b.name)
                );
            }
            if let Some((metadata, related)) = &b.csv_metadata {
                let pkg = &self.packages[pi];
                let csv = csv_from_metadata(
                    &b.name,
                    &b.light.version,
                    metadata,
                    pkg.icon.as_ref(),
                    &pkg.description,
                    related,
                );
                let heavy = api::Bundle {
                    csv_json: csv.clone(),
                    object: vec![csv],
                    ..Default::default()
                };
                b.heavy = store.put(&heavy.encode_to_vec())?;
            }
            b.light.deprecation = bundle_deprecation
                .get(&key)
                .map(|m| api::Deprecation { message: m.clone() });
            let provided_start = offset(gvks.len())?;
            for (g, v, k) in &b.provided {
                gvks.push([text.intern(g)?, text.intern(v)?, text.intern(k)?]);
            }
            let light_start = offset(light.len())?;
            b.light.encode(&mut light)?;
            bundle_ix.insert(key, bundles.len() as u32);
            bundle_package.push(pi);
            bundles.push(BundleIdx {
                name: text.intern(&b.name)?,
                provided: Span {
                    start: provided_start,
                    end: offset(gvks.len())?,
                },
                has_path: !b.light.bundle_path.is_empty(),
                light: Span {
                    start: light_start,
                    end: offset(light.len())?,
                },
                heavy: b.heavy,
            });
        }

        // Channels, by package and name.
        let mut by_package: BTreeMap<usize, Vec<fbc::Channel>> = BTreeMap::new();
        for c in self.channels.drain(..) {
            let Some(&pi) = package_ix.get(c.package.as_str()) else {
                bail!(
                    "unknown package {} for channel {}",
                    q(&c.package),
                    q(&c.name)
                );
            };
            by_package.entry(pi).or_default().push(c);
        }
        let mut listed: HashSet<u32> = HashSet::new();
        let mut entries = Vec::new();
        let mut skips = Vec::new();
        let mut out_channels = Vec::new();
        let mut packages = Vec::with_capacity(self.packages.len());
        for (pi, p) in self.packages.iter().enumerate() {
            let mut channels = by_package.remove(&pi).unwrap_or_default();
            channels.sort_by(|a, b| a.name.cmp(&b.name));
            if let Some(w) = channels.windows(2).find(|w| w[0].name == w[1].name) {
                bail!(
                    "package {} has duplicate channel {}",
                    q(&p.name),
                    q(&w[0].name)
                );
            }
            if !p.default_channel.is_empty()
                && !channels.iter().any(|c| c.name == p.default_channel)
            {
                bail!(
                    "package {}: default channel {} not found",
                    q(&p.name),
                    q(&p.default_channel)
                );
            }
            let channels_start = offset(out_channels.len())?;
            for c in channels {
                if c.entries.is_empty() {
                    bail!(
                        "package {}, channel {}: channel must contain at least one bundle",
                        q(&p.name),
                        q(&c.name)
                    );
                }
                let ci = offset(out_channels.len())?;
                let start = offset(entries.len())?;
                let mut seen: HashSet<&str> = HashSet::new();
                for e in &c.entries {
                    if !seen.insert(&e.name) {
                        bail!(
                            "invalid package {}, channel {}: duplicate entry {}",
                            q(&p.name),
                            q(&c.name),
                            q(&e.name)
                        );
                    }
                }
                for e in &c.entries {
                    let Some(&bi) = bundle_ix.get(&(p.name.clone(), e.name.clone())) else {
                        bail!(
                            "no olm.bundle blobs found in package {} for olm.channel entries [{}]",
                            q(&p.name),
                            e.name
                        );
                    };
                    listed.insert(bi);
                    let skips_start = offset(skips.len())?;
                    for s in &e.skips {
                        skips.push(text.intern(s)?);
                    }
                    entries.push(EntryIdx {
                        package: pi as u32,
                        channel: ci,
                        bundle: bi,
                        replaces: text.intern(&e.replaces)?,
                        skips: Span {
                            start: skips_start,
                            end: offset(skips.len())?,
                        },
                        skip_range: text.intern(&e.skip_range)?,
                    });
                }
                let head = match UpgradeEdges::new(&c.entries).head() {
                    Ok(name) => {
                        let row = c.entries.iter().position(|e| e.name == name);
                        start + offset(row.expect("the head is an entry"))?
                    }
                    Err(HeadError::NoHead) => bail!(
                        "package {}, channel {}: no channel head found in graph",
                        q(&p.name),
                        q(&c.name)
                    ),
                    Err(HeadError::MultipleHeads(names)) => bail!(
                        "package {}, channel {}: multiple channel heads found in graph: {}",
                        q(&p.name),
                        q(&c.name),
                        names.join(", ")
                    ),
                };
                let deprecation = match channel_deprecation.get(&(p.name.clone(), c.name.clone())) {
                    Some(m) => Some(text.intern(m)?),
                    None => None,
                };
                out_channels.push(ChannelIdx {
                    name: text.intern(&c.name)?,
                    deprecation,
                    head,
                    entries: Span {
                        start,
                        end: offset(entries.len())?,
                    },
                });
            }
            let deprecation = match pkg_deprecation.get(&p.name) {
                Some(m) => Some(text.intern(m)?),
                None => None,
            };
            packages.push(PackageIdx {
                name: text.intern(&p.name)?,
                default_channel: text.intern(&p.default_channel)?,
                deprecation,
                channels: Span {
                    start: channels_start,
                    end: offset(out_channels.len())?,
                },
            });
        }
        if let Some(bi) = (0..bundles.len()).find(|&i| !listed.contains(&(i as u32))) {
            bail!(
                "package {}, bundle {} not found in any channel entries",
                q(&self.packages[bundle_package[bi]].name),
                q(&text.text[bundles[bi].name.range()])
            );
        }
        // The scaffolding goes first, so that the tables below are the last allocations
        // of the load.
        drop((bundle_ix, listed, by_package, package_ix, bundle_package));
        let TextBuilder { text, seen } = text;
        drop(seen);
        Ok(Index {
            text: text.into_boxed_str(),
            packages: packages.into_boxed_slice(),
            channels: out_channels.into_boxed_slice(),
            entries: entries.into_boxed_slice(),
            skips: skips.into_boxed_slice(),
            bundles: bundles.into_boxed_slice(),
            gvks: gvks.into_boxed_slice(),
            light: light.into_boxed_slice(),
            custom: self
                .custom
                .into_iter()
                .map(|(k, v)| (k, v.into_boxed_slice()))
                .collect(),
            store: store.finish()?,
        })
    }
}

impl Index {
    /// Loads the catalog at `root` (a directory or one file).
    ///
    /// The loading runs on a thread of its own: when that thread ends, the blocks its
    /// allocator cache (glibc's tcache) still holds are freed too, so that all of the
    /// loader's memory, not just most of it, can be handed back to the OS afterwards.
    pub fn load(root: &Path) -> anyhow::Result<Index> {
        let loaded = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("catalog-load".into())
                .spawn_scoped(s, || Self::load_here(root))
                .map(|t| t.join())
        });
        let index = match loaded {
            Ok(Ok(index)) => index?,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // No thread to spare: load on this one.
            Err(_) => Self::load_here(root)?,
        };
        crate::memory::release_free_memory();
        Ok(index)
    }

    fn load_here(root: &Path) -> anyhow::Result<Index> {
        use anyhow::Context;
        let mut store = StoreWriter::new().context("creating the spill file")?;
        let mut builder = Builder::default();
        for file in catalog_files(root)? {
            builder.add(load_file_with(&file, LoadOptions::default())?, &mut store)?;
        }
        builder.finish(store)
    }

    /// Builds an index from a catalog already in memory.
    pub fn from_config(config: DeclarativeConfig) -> anyhow::Result<Index> {
        let mut store = StoreWriter::new()?;
        let mut builder = Builder::default();
        builder.add(config, &mut store)?;
        builder.finish(store)
    }

    pub fn package_count(&self) -> usize {
        self.packages.len()
    }

    pub fn bundle_count(&self) -> usize {
        self.bundles.len()
    }

    /// The number of (channel, bundle) pairs, i.e. of `ListBundles` messages.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    fn str(&self, s: Span) -> &str {
        &self.text[s.range()]
    }

    fn package(&self, name: &str) -> Option<&PackageIdx> {
        self.packages
            .binary_search_by(|p| self.str(p.name).cmp(name))
            .ok()
            .map(|i| &self.packages[i])
    }

    fn channels_of(&self, pkg: &PackageIdx) -> &[ChannelIdx] {
        &self.channels[pkg.channels.range()]
    }

    fn channel(&self, pkg: &PackageIdx, name: &str) -> Option<&ChannelIdx> {
        let channels = self.channels_of(pkg);
        channels
            .binary_search_by(|c| self.str(c.name).cmp(name))
            .ok()
            .map(|i| &channels[i])
    }

    fn entry_parts(&self, e: u32) -> (&EntryIdx, &PackageIdx, &ChannelIdx, &BundleIdx) {
        let entry = &self.entries[e as usize];
        (
            entry,
            &self.packages[entry.package as usize],
            &self.channels[entry.channel as usize],
            &self.bundles[entry.bundle as usize],
        )
    }

    fn skips(&self, entry: &EntryIdx) -> &[Span] {
        &self.skips[entry.skips.range()]
    }

    fn bundle_name(&self, e: u32) -> &str {
        self.str(self.bundles[self.entries[e as usize].bundle as usize].name)
    }

    /// The `api.Bundle` of one channel entry. `with_manifests` reads `csvJson` and `object`
    /// back from the spill file; `trimmed` blanks `replaces` and `skips`, as upstream's
    /// single-bundle RPCs do.
    fn bundle(
        &self,
        e: u32,
        with_manifests: bool,
        trimmed: bool,
    ) -> Result<api::Bundle, QueryError> {
        let (entry, _, channel, b) = self.entry_parts(e);
        let light = &self.light[b.light.range()];
        let mut bundle = if with_manifests && b.heavy.len > 0 {
            let mut bytes = Vec::with_capacity(light.len() + b.heavy.len as usize);
            bytes.extend_from_slice(light);
            self.store
                .read_into(b.heavy, &mut bytes)
                .map_err(|e| QueryError(format!("reading bundle {}: {e}", q(self.str(b.name)))))?;
            api::Bundle::decode(bytes.as_slice())
        } else {
            api::Bundle::decode(light)
        }
        .map_err(|e| QueryError(format!("decoding bundle {}: {e}", q(self.str(b.name)))))?;
        bundle.channel_name = self.str(channel.name).to_owned();
        bundle.skip_range = self.str(entry.skip_range).to_owned();
        if !trimmed {
            bundle.replaces = self.str(entry.replaces).to_owned();
            bundle.skips = self
                .skips(entry)
                .iter()
                .map(|&s| self.str(s).to_owned())
                .collect();
        }
        Ok(bundle)
    }

    fn entry_named(&self, ch: &ChannelIdx, name: &str) -> Option<u32> {
        ch.entries.rows().find(|&i| self.bundle_name(i) == name)
    }

    fn provides(&self, e: u32, gvk: (&str, &str, &str)) -> bool {
        let b = &self.bundles[self.entries[e as usize].bundle as usize];
        self.gvks[b.provided.range()]
            .iter()
            .any(|&[g, v, k]| (self.str(g), self.str(v), self.str(k)) == gvk)
    }

    fn channel_entry(&self, e: u32, replaces: Span) -> api::ChannelEntry {
        let (_, pkg, ch, b) = self.entry_parts(e);
        api::ChannelEntry {
            package_name: self.str(pkg.name).to_owned(),
            channel_name: self.str(ch.name).to_owned(),
            bundle_name: self.str(b.name).to_owned(),
            replaces: self.str(replaces).to_owned(),
        }
    }

    /// The channel entries upstream reports for a bundle that provides an API: one for its
    /// `replaces`, plus one per other skipped name (only names in the same channel unless
    /// `any_skip`). Interned spans compare equal exactly when their strings do.
    fn entries_for_bundle(&self, e: u32, any_skip: bool, out: &mut Vec<api::ChannelEntry>) {
        let (entry, _, ch, _) = self.entry_parts(e);
        out.push(self.channel_entry(e, entry.replaces));
        for &s in self.skips(entry) {
            if s != entry.replaces && (any_skip || self.entry_named(ch, self.str(s)).is_some()) {
                out.push(self.channel_entry(e, s));
            }
        }
    }

    pub fn list_packages(&self) -> Vec<String> {
        self.packages
            .iter()
            .map(|p| self.str(p.name).to_owned())
            .collect()
    }

    pub fn get_package(&self, name: &str) -> Result<api::Package, QueryError> {
        let Some(pkg) = self.package(name) else {
            return err(format!("package {} not found", q(name)));
        };
        let deprecation = |m: Option<Span>| {
            m.map(|m| api::Deprecation {
                message: self.str(m).to_owned(),
            })
        };
        Ok(api::Package {
            name: self.str(pkg.name).to_owned(),
            channels: self
                .channels_of(pkg)
                .iter()
                .map(|c| api::Channel {
                    name: self.str(c.name).to_owned(),
                    csv_name: self.bundle_name(c.head).to_owned(),
                    deprecation: deprecation(c.deprecation),
                })
                .collect(),
            default_channel_name: self.str(pkg.default_channel).to_owned(),
            deprecation: deprecation(pkg.deprecation),
        })
    }

    fn package_channel(
        &self,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<(&PackageIdx, &ChannelIdx), QueryError> {
        let Some(pkg) = self.package(pkg_name) else {
            return err(format!("package {} not found", q(pkg_name)));
        };
        let Some(ch) = self.channel(pkg, channel_name) else {
            return err(format!(
                "package {}, channel {} not found",
                q(pkg_name),
                q(channel_name)
            ));
        };
        Ok((pkg, ch))
    }

    pub fn get_bundle(
        &self,
        pkg_name: &str,
        channel_name: &str,
        csv_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let (_, ch) = self.package_channel(pkg_name, channel_name)?;
        let Some(e) = self.entry_named(ch, csv_name) else {
            return err(format!(
                "package {}, channel {}, bundle {} not found",
                q(pkg_name),
                q(channel_name),
                q(csv_name)
            ));
        };
        self.bundle(e, true, true)
    }

    pub fn get_bundle_for_channel(
        &self,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let (_, ch) = self.package_channel(pkg_name, channel_name)?;
        self.bundle(ch.head, true, true)
    }

    pub fn get_channel_entries_that_replace(
        &self,
        name: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if self.str(e.replaces) == name {
                out.push(self.channel_entry(i as u32, e.replaces));
            }
            for &s in self.skips(e) {
                if self.str(s) == name && s != e.replaces {
                    out.push(self.channel_entry(i as u32, e.replaces));
                }
            }
        }
        if out.is_empty() {
            return err(format!("no channel entries found that replace {name}"));
        }
        Ok(out)
    }

    pub fn get_bundle_that_replaces(
        &self,
        name: &str,
        pkg_name: &str,
        channel_name: &str,
    ) -> Result<api::Bundle, QueryError> {
        let Some(pkg) = self.package(pkg_name) else {
            return err(format!("package {pkg_name} not found"));
        };
        let Some(ch) = self.channel(pkg, channel_name) else {
            return err(format!(
                "package {}, channel {} not found",
                q(pkg_name),
                q(channel_name)
            ));
        };
        let found = ch.entries.rows().find(|&i| {
            let e = &self.entries[i as usize];
            self.str(e.replaces) == name || self.skips(e).iter().any(|&s| self.str(s) == name)
        });
        match found {
            Some(e) => self.bundle(e, true, true),
            None => err(format!(
                "no entry found for package {}, channel {}",
                q(pkg_name),
                q(channel_name)
            )),
        }
    }

    fn not_provided(group: &str, version: &str, kind: &str) -> QueryError {
        QueryError(format!(
            "no channel entries found that provide group:{} version:{} kind:{}",
            q(group),
            q(version),
            q(kind)
        ))
    }

    pub fn get_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for e in 0..self.entries.len() as u32 {
            if self.provides(e, (group, version, kind)) {
                self.entries_for_bundle(e, true, &mut out);
            }
        }
        if out.is_empty() {
            return Err(Self::not_provided(group, version, kind));
        }
        Ok(out)
    }

    pub fn get_latest_channel_entries_that_provide(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Vec<api::ChannelEntry>, QueryError> {
        let mut out = Vec::new();
        for ch in self.channels.iter() {
            if self.provides(ch.head, (group, version, kind)) {
                self.entries_for_bundle(ch.head, false, &mut out);
            }
        }
        if out.is_empty() {
            return Err(Self::not_provided(group, version, kind));
        }
        Ok(out)
    }

    pub fn get_default_bundle_that_provides(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<api::Bundle, QueryError> {
        let mut any = false;
        // Packages are sorted, so the first default-channel head that provides the API is
        // the one with the lowest package name, as upstream picks.
        for pkg in self.packages.iter() {
            for ch in self.channels_of(pkg) {
                if self.provides(ch.head, (group, version, kind)) {
                    any = true;
                    if ch.name == pkg.default_channel {
                        return self.bundle(ch.head, true, true);
                    }
                }
            }
        }
        if !any {
            return Err(Self::not_provided(group, version, kind));
        }
        err(format!(
            "no entry found that provides group:{} version:{} kind:{}",
            q(group),
            q(version),
            q(kind)
        ))
    }

    /// The `i`th `ListBundles` message (`0..entry_count()`): replaces and skips kept,
    /// manifests dropped when the bundle has an image (`bundlePath`), as upstream does.
    pub fn list_bundle(&self, i: usize) -> Result<api::Bundle, QueryError> {
        let with_manifests = !self.bundles[self.entries[i].bundle as usize].has_path;
        self.bundle(i as u32, with_manifests, false)
    }

    /// The blobs of a custom schema for a package ("" for blobs without one), as JSON.
    pub fn custom_schema_blobs(
        &self,
        schema: &str,
        package: &str,
    ) -> Result<Vec<Value>, QueryError> {
        let Some(locs) = self.custom.get(&(schema.to_string(), package.to_string())) else {
            return Ok(Vec::new());
        };
        locs.iter()
            .map(|&loc| {
                let bytes = self
                    .store
                    .get(loc)
                    .map_err(|e| QueryError(format!("read meta blobs: {e}")))?;
                serde_json::from_slice(&bytes)
                    .map_err(|e| QueryError(format!("parse meta JSON: {e}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::load::load_str;

    const CATALOG: &str = r#"
{"schema":"olm.package","name":"b","defaultChannel":"stable"}
{"schema":"olm.channel","package":"b","name":"stable","entries":[
  {"name":"b.v1"},
  {"name":"b.v2","replaces":"b.v1","skipRange":"<2.0.0"},
  {"name":"b.v3","replaces":"b.v2","skips":["b.v1","x.v0"]}]}
{"schema":"olm.channel","package":"b","name":"alpha","entries":[{"name":"b.v1"}]}
{"schema":"olm.bundle","package":"b","name":"b.v1","image":"quay.io/b:v1","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"1.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}}]}
{"schema":"olm.bundle","package":"b","name":"b.v2","image":"quay.io/b:v2","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"2.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}}]}
{"schema":"olm.bundle","package":"b","name":"b.v3","image":"quay.io/b:v3","properties":[
  {"type":"olm.package","value":{"packageName":"b","version":"3.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}},
  {"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="}}]}
{"schema":"olm.deprecations","package":"b","entries":[
  {"reference":{"schema":"olm.channel","name":"alpha"},"message":"use stable"},
  {"reference":{"schema":"olm.bundle","name":"b.v1"},"message":"too old"}]}
{"schema":"olm.package","name":"a","defaultChannel":"stable"}
{"schema":"olm.channel","package":"a","name":"stable","entries":[{"name":"a.v1"}]}
{"schema":"olm.bundle","package":"a","name":"a.v1","properties":[
  {"type":"olm.package","value":{"packageName":"a","version":"1.0.0"}},
  {"type":"olm.gvk","value":{"group":"g.io","kind":"K","version":"v1"}},
  {"type":"olm.bundle.object","value":{"data":"eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0="}}]}
{"schema":"my.notes","package":"a","text":"hello"}
"#;

    fn index() -> Index {
        Index::from_config(load_str(Path::new("c.json"), CATALOG).unwrap()).unwrap()
    }

    #[test]
    fn packages_channels_heads_and_deprecations() {
        let ix = index();
        assert_eq!(ix.list_packages(), ["a", "b"]);
        let p = ix.get_package("b").unwrap();
        let chans: Vec<(&str, &str)> = p
            .channels
            .iter()
            .map(|c| (c.name.as_str(), c.csv_name.as_str()))
            .collect();
        assert_eq!(chans, [("alpha", "b.v1"), ("stable", "b.v3")]);
        assert_eq!(
            p.channels[0].deprecation.as_ref().unwrap().message,
            "use stable"
        );
        assert_eq!(p.default_channel_name, "stable");
        assert_eq!(
            ix.get_package("zz").unwrap_err().0,
            "package \"zz\" not found"
        );
    }

    #[test]
    fn single_bundle_rpcs_blank_replaces_and_skips() {
        let ix = index();
        let b = ix.get_bundle("b", "stable", "b.v3").unwrap();
        assert_eq!((b.replaces.as_str(), b.skips.len()), ("", 0));
        assert_eq!(b.csv_json, r#"{"kind":"ClusterServiceVersion"}"#);
        assert_eq!(b.object.len(), 1);
        let b2 = ix.get_bundle("b", "stable", "b.v2").unwrap();
        assert_eq!(b2.skip_range, "<2.0.0");
        assert_eq!(
            ix.get_bundle("b", "alpha", "b.v1")
                .unwrap()
                .deprecation
                .unwrap()
                .message,
            "too old"
        );
        assert_eq!(
            ix.get_bundle_for_channel("b", "stable").unwrap().csv_name,
            "b.v3"
        );
        assert_eq!(
            ix.get_bundle_that_replaces("b.v1", "b", "stable")
                .unwrap()
                .csv_name,
            "b.v2"
        );
        assert_eq!(
            ix.get_bundle_that_replaces("b.v1", "x", "stable")
                .unwrap_err()
                .0,
            "package x not found"
        );
    }

    #[test]
    fn list_bundles_drops_manifests_of_bundles_with_an_image() {
        let ix = index();
        let all: Vec<api::Bundle> = (0..ix.entry_count())
            .map(|i| ix.list_bundle(i).unwrap())
            .collect();
        assert_eq!(all.len(), 5);
        let b3 = all.iter().find(|b| b.csv_name == "b.v3").unwrap();
        assert!(b3.csv_json.is_empty() && b3.object.is_empty());
        assert_eq!(b3.skips, ["b.v1", "x.v0"]);
        let a1 = all.iter().find(|b| b.csv_name == "a.v1").unwrap();
        assert!(!a1.csv_json.is_empty());
    }

    #[test]
    fn replace_and_provide_queries() {
        let ix = index();
        let r = ix.get_channel_entries_that_replace("b.v1").unwrap();
        let names: Vec<(&str, &str)> = r
            .iter()
            .map(|e| (e.bundle_name.as_str(), e.replaces.as_str()))
            .collect();
        assert_eq!(names, [("b.v2", "b.v1"), ("b.v3", "b.v2")]);
        assert!(ix.get_channel_entries_that_replace("nope").is_err());

        let all = ix
            .get_channel_entries_that_provide("g.io", "v1", "K")
            .unwrap();
        // a.v1, b.v1 twice (two channels), b.v2, b.v3 three times (replaces + two skips).
        assert_eq!(all.len(), 7);
        let latest = ix
            .get_latest_channel_entries_that_provide("g.io", "v1", "K")
            .unwrap();
        // Heads only; the skip of x.v0 (not in the channel) is left out.
        let l: Vec<(&str, &str, &str)> = latest
            .iter()
            .map(|e| {
                (
                    e.channel_name.as_str(),
                    e.bundle_name.as_str(),
                    e.replaces.as_str(),
                )
            })
            .collect();
        assert_eq!(
            l,
            [
                ("stable", "a.v1", ""),
                ("alpha", "b.v1", ""),
                ("stable", "b.v3", "b.v2"),
                ("stable", "b.v3", "b.v1")
            ]
        );
        assert_eq!(
            ix.get_default_bundle_that_provides("g.io", "v1", "K")
                .unwrap()
                .csv_name,
            "a.v1"
        );
        assert!(
            ix.get_default_bundle_that_provides("g.io", "v1", "Nope")
                .unwrap_err()
                .0
                .starts_with("no channel entries found")
        );
    }

    #[test]
    fn custom_schemas_by_package() {
        let ix = index();
        assert_eq!(
            ix.custom_schema_blobs("my.notes", "a").unwrap()[0]["text"],
            "hello"
        );
        assert!(ix.custom_schema_blobs("my.notes", "").unwrap().is_empty());
    }

    #[test]
    fn broken_catalogs_are_refused() {
        let two_heads = r#"{"schema":"olm.package","name":"p"}
{"schema":"olm.channel","package":"p","name":"c","entries":[{"name":"p.v1"},{"name":"p.v2"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1","properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v2","properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}"#;
        let e = Index::from_config(load_str(Path::new("c.json"), two_heads).unwrap())
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("multiple channel heads found in graph: p.v1, p.v2"),
            "{e}"
        );
    }
}
