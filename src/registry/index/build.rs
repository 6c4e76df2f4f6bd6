//! Building the index: catalog files loaded one at a time, bundles converted and their
//! manifests spilled, then the tables laid out package by package.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use prost::Message;
use serde_json::Value;

use super::{
    BundleIdx, ChannelIdx, EntryIdx, Index, IndexBuildError, PackageIdx, Span, api, offset,
};
use crate::catalog::model::fbc::{
    self, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use crate::catalog::model::upgrade_edges::{HeadError, UpgradeEdges};
use crate::catalog::reading::files::catalog_files;
use crate::catalog::reading::load::{LoadError, LoadOptions, for_each_blob};
use crate::catalog::text::limits::{MAX_BLOBS, MAX_BUNDLES};
use crate::registry::convert::{convert_bundle, csv_from_metadata};
use crate::registry::store::{Loc, StoreWriter};

/// Interns strings into one buffer while the index is built.
#[derive(Default)]
struct TextBuilder {
    text: String,
    seen: HashMap<String, Span>,
}

impl TextBuilder {
    fn intern(&mut self, s: &str) -> Result<Span, IndexBuildError> {
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

struct PendingBundle {
    package: String,
    name: String,
    light: api::Bundle,
    provided: Vec<(String, String, String)>,
    heavy: Loc,
    csv_object: Option<usize>,
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
    ) -> Result<(), IndexBuildError> {
        for mut p in config.packages.drain(..) {
            p.properties.clear();
            self.packages.push(p);
        }
        self.channels.append(&mut config.channels);
        self.deprecations.append(&mut config.deprecations);
        for b in config.bundles.drain(..) {
            let c = convert_bundle(&b, None).map_err(|source| IndexBuildError::Bundle {
                package: b.package.clone(),
                bundle: b.name.clone(),
                source,
            })?;
            let mut heavy = api::Bundle {
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
                csv_object: c.csv_object,
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

    /// Lays out the tables: packages sorted by name, each with its channels (sorted by
    /// name) and their entries; bundles in the order they were added.
    fn finish(self, mut store: StoreWriter) -> Result<Index, IndexBuildError> {
        let Builder {
            mut packages,
            channels,
            bundles,
            deprecations: deprecation_blobs,
            custom,
        } = self;
        packages.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = packages.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(IndexBuildError::DuplicatePackage(w[0].name.clone()));
        }
        let package_ix: HashMap<&str, usize> = packages
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let deprecations = Deprecations::from_blobs(&deprecation_blobs, &package_ix)?;
        let mut tables = Tables::default();
        let rows =
            tables.add_bundles(bundles, &packages, &package_ix, &deprecations, &mut store)?;
        let by_package = channels_by_package(channels, &package_ix)?;
        let listed = tables.add_packages(&packages, by_package, &rows, &deprecations)?;
        tables.check_listed(&packages, &rows, &listed)?;
        // The scaffolding goes first, so that the tables below are the last allocations
        // of the load.
        drop((rows, listed, package_ix, deprecations));
        tables.into_index(custom, store)
    }
}

/// Deprecation messages, by what they deprecate.
#[derive(Default)]
struct Deprecations {
    /// By package name.
    packages: HashMap<String, String>,
    /// By (package, channel name).
    channels: HashMap<(String, String), String>,
    /// By (package, bundle name).
    bundles: HashMap<(String, String), String>,
}

impl Deprecations {
    /// The messages of `olm.deprecations` blobs, each of a known package (by `package_ix`).
    fn from_blobs(
        deprecations: &[fbc::Deprecation],
        package_ix: &HashMap<&str, usize>,
    ) -> Result<Self, IndexBuildError> {
        let mut out = Deprecations::default();
        for d in deprecations {
            if !package_ix.contains_key(d.package.as_str()) {
                return Err(IndexBuildError::DeprecationOfUnknownPackage(
                    d.package.clone(),
                ));
            }
            for e in &d.entries {
                let key = (d.package.clone(), e.reference.name.clone());
                match e.reference.schema.as_str() {
                    SCHEMA_PACKAGE => {
                        out.packages.insert(d.package.clone(), e.message.clone());
                    }
                    SCHEMA_CHANNEL => {
                        out.channels.insert(key, e.message.clone());
                    }
                    SCHEMA_BUNDLE => {
                        out.bundles.insert(key, e.message.clone());
                    }
                    other => {
                        return Err(IndexBuildError::DeprecatedSchema {
                            package: d.package.clone(),
                            schema: other.to_string(),
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The bundle rows, as the channels' entries look them up.
struct BundleRows {
    /// Row of `Tables::bundles` by (package, name).
    by_key: HashMap<(String, String), u32>,
    /// Each row's package (its place among the sorted packages).
    package: Vec<usize>,
}

/// The channels of each package (by its place among the sorted packages), as loaded.
fn channels_by_package(
    channels: Vec<fbc::Channel>,
    package_ix: &HashMap<&str, usize>,
) -> Result<BTreeMap<usize, Vec<fbc::Channel>>, IndexBuildError> {
    let mut by_package: BTreeMap<usize, Vec<fbc::Channel>> = BTreeMap::new();
    for c in channels {
        let Some(&pi) = package_ix.get(c.package.as_str()) else {
            return Err(IndexBuildError::ChannelOfUnknownPackage {
                package: c.package,
                channel: c.name,
            });
        };
        by_package.entry(pi).or_default().push(c);
    }
    Ok(by_package)
}

/// The row of the channel's head among its entries.
fn channel_head(p: &fbc::Package, c: &fbc::Channel) -> Result<u32, IndexBuildError> {
    match UpgradeEdges::new(&c.entries).head() {
        Ok(name) => {
            let row = c.entries.iter().position(|e| e.name == name);
            offset(row.expect("the head is an entry"))
        }
        Err(HeadError::NoHead) => Err(IndexBuildError::NoHead {
            package: p.name.clone(),
            channel: c.name.clone(),
        }),
        Err(HeadError::MultipleHeads(names)) => Err(IndexBuildError::MultipleHeads {
            package: p.name.clone(),
            channel: c.name.clone(),
            heads: names.into_iter().map(str::to_string).collect(),
        }),
    }
}

/// The tables of the index while they grow, and the text they point into.
#[derive(Default)]
struct Tables {
    text: TextBuilder,
    gvks: Vec<[Span; 3]>,
    light: Vec<u8>,
    bundles: Vec<BundleIdx>,
    entries: Vec<EntryIdx>,
    skips: Vec<Span>,
    channels: Vec<ChannelIdx>,
    packages: Vec<PackageIdx>,
}

impl Tables {
    /// The bundle table, in the order the bundles were loaded. A bundle whose CSV comes
    /// from `olm.csv.metadata` gets it here, now that its package (icon, description) is
    /// known.
    fn add_bundles(
        &mut self,
        pending: Vec<PendingBundle>,
        packages: &[fbc::Package],
        package_ix: &HashMap<&str, usize>,
        deprecations: &Deprecations,
        store: &mut StoreWriter,
    ) -> Result<BundleRows, IndexBuildError> {
        let mut rows = BundleRows {
            by_key: HashMap::new(),
            package: Vec::with_capacity(pending.len()),
        };
        self.bundles.reserve_exact(pending.len());
        for mut b in pending {
            let key = (b.package.clone(), b.name.clone());
            let Some(&pi) = package_ix.get(b.package.as_str()) else {
                return Err(IndexBuildError::BundleOfUnknownPackage {
                    package: b.package,
                    bundle: b.name,
                });
            };
            if rows.by_key.contains_key(&key) {
                return Err(IndexBuildError::DuplicateBundle {
                    package: b.package,
                    bundle: b.name,
                });
            }
            if let Some((metadata, related)) = &b.csv_metadata {
                let pkg = &packages[pi];
                let csv = csv_from_metadata(
                    &b.name,
                    &b.light.version,
                    metadata,
                    pkg.icon.as_ref(),
                    &pkg.description,
                    related,
                );
                let heavy = api::Bundle {
                    object: vec![csv],
                    ..Default::default()
                };
                b.heavy = store.put(&heavy.encode_to_vec())?;
                b.csv_object = Some(0);
            }
            b.light.deprecation = deprecations
                .bundles
                .get(&key)
                .map(|m| api::Deprecation { message: m.clone() });
            rows.by_key.insert(key, self.bundles.len() as u32);
            rows.package.push(pi);
            self.add_bundle(b)?;
        }
        Ok(rows)
    }

    /// One row of the bundle table, with the APIs it provides and its light bundle.
    fn add_bundle(&mut self, b: PendingBundle) -> Result<(), IndexBuildError> {
        let provided_start = offset(self.gvks.len())?;
        for (g, v, k) in &b.provided {
            let gvk = [
                self.text.intern(g)?,
                self.text.intern(v)?,
                self.text.intern(k)?,
            ];
            self.gvks.push(gvk);
        }
        let light_start = offset(self.light.len())?;
        b.light.encode(&mut self.light)?;
        let row = BundleIdx {
            name: self.text.intern(&b.name)?,
            provided: Span {
                start: provided_start,
                end: offset(self.gvks.len())?,
            },
            has_path: !b.light.bundle_path.is_empty(),
            light: Span {
                start: light_start,
                end: offset(self.light.len())?,
            },
            heavy: b.heavy,
            csv_object: b.csv_object.map(u32::try_from).transpose()?,
        };
        self.bundles.push(row);
        Ok(())
    }

    /// The package, channel and entry tables, package by package; returns the bundle rows
    /// that some channel lists.
    fn add_packages(
        &mut self,
        packages: &[fbc::Package],
        mut by_package: BTreeMap<usize, Vec<fbc::Channel>>,
        rows: &BundleRows,
        deprecations: &Deprecations,
    ) -> Result<HashSet<u32>, IndexBuildError> {
        let mut listed = HashSet::new();
        for (pi, p) in packages.iter().enumerate() {
            let channels = by_package.remove(&pi).unwrap_or_default();
            self.add_package(pi, p, channels, rows, deprecations, &mut listed)?;
        }
        Ok(listed)
    }

    /// One package's row, after its channels (sorted by name) and their entries.
    fn add_package(
        &mut self,
        pi: usize,
        p: &fbc::Package,
        mut channels: Vec<fbc::Channel>,
        rows: &BundleRows,
        deprecations: &Deprecations,
        listed: &mut HashSet<u32>,
    ) -> Result<(), IndexBuildError> {
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = channels.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(IndexBuildError::DuplicateChannel {
                package: p.name.clone(),
                channel: w[0].name.clone(),
            });
        }
        if !p.default_channel.is_empty() && !channels.iter().any(|c| c.name == p.default_channel) {
            return Err(IndexBuildError::DefaultChannelNotFound {
                package: p.name.clone(),
                channel: p.default_channel.clone(),
            });
        }
        let channels_start = offset(self.channels.len())?;
        for c in &channels {
            let deprecation = deprecations
                .channels
                .get(&(p.name.clone(), c.name.clone()))
                .map(String::as_str);
            self.add_channel(pi, p, c, rows, deprecation, listed)?;
        }
        let deprecation =
            self.intern_message(deprecations.packages.get(&p.name).map(String::as_str))?;
        self.packages.push(PackageIdx {
            name: self.text.intern(&p.name)?,
            default_channel: self.text.intern(&p.default_channel)?,
            deprecation,
            channels: Span {
                start: channels_start,
                end: offset(self.channels.len())?,
            },
        });
        Ok(())
    }

    /// One channel's row, after its entries.
    fn add_channel(
        &mut self,
        pi: usize,
        p: &fbc::Package,
        c: &fbc::Channel,
        rows: &BundleRows,
        deprecation: Option<&str>,
        listed: &mut HashSet<u32>,
    ) -> Result<(), IndexBuildError> {
        if c.entries.is_empty() {
            return Err(IndexBuildError::EmptyChannel {
                package: p.name.clone(),
                channel: c.name.clone(),
            });
        }
        let ci = offset(self.channels.len())?;
        let start = offset(self.entries.len())?;
        let mut seen: HashSet<&str> = HashSet::new();
        for e in &c.entries {
            if !seen.insert(&e.name) {
                return Err(IndexBuildError::DuplicateEntry {
                    package: p.name.clone(),
                    channel: c.name.clone(),
                    entry: e.name.clone(),
                });
            }
        }
        for e in &c.entries {
            let Some(&bi) = rows.by_key.get(&(p.name.clone(), e.name.clone())) else {
                return Err(IndexBuildError::EntryWithoutBundle {
                    package: p.name.clone(),
                    entry: e.name.clone(),
                });
            };
            listed.insert(bi);
            self.add_entry(pi as u32, ci, bi, e)?;
        }
        let head = start + channel_head(p, c)?;
        let deprecation = self.intern_message(deprecation)?;
        self.channels.push(ChannelIdx {
            name: self.text.intern(&c.name)?,
            deprecation,
            head,
            entries: Span {
                start,
                end: offset(self.entries.len())?,
            },
        });
        Ok(())
    }

    /// One entry's row: the bundle at row `bundle` in the channel at row `channel`.
    fn add_entry(
        &mut self,
        package: u32,
        channel: u32,
        bundle: u32,
        e: &fbc::ChannelEntry,
    ) -> Result<(), IndexBuildError> {
        let skips_start = offset(self.skips.len())?;
        for s in &e.skips {
            let skip = self.text.intern(s)?;
            self.skips.push(skip);
        }
        let row = EntryIdx {
            package,
            channel,
            bundle,
            replaces: self.text.intern(&e.replaces)?,
            skips: Span {
                start: skips_start,
                end: offset(self.skips.len())?,
            },
            skip_range: self.text.intern(&e.skip_range)?,
        };
        self.entries.push(row);
        Ok(())
    }

    /// A deprecation message, interned when there is one.
    fn intern_message(&mut self, message: Option<&str>) -> Result<Option<Span>, IndexBuildError> {
        message.map(|m| self.text.intern(m)).transpose()
    }

    /// Every bundle is listed by some channel (`listed`, from [`Tables::add_packages`]).
    fn check_listed(
        &self,
        packages: &[fbc::Package],
        rows: &BundleRows,
        listed: &HashSet<u32>,
    ) -> Result<(), IndexBuildError> {
        if let Some(bi) = (0..self.bundles.len()).find(|&i| !listed.contains(&(i as u32))) {
            return Err(IndexBuildError::UnlistedBundle {
                package: packages[rows.package[bi]].name.clone(),
                bundle: self.text.text[self.bundles[bi].name.range()].to_string(),
            });
        }
        Ok(())
    }

    /// The tables, boxed, with the custom blobs and the spilled manifests.
    fn into_index(
        self,
        custom: HashMap<(String, String), Vec<Loc>>,
        store: StoreWriter,
    ) -> Result<Index, IndexBuildError> {
        let TextBuilder { text, seen } = self.text;
        drop(seen);
        Ok(Index {
            text: text.into_boxed_str(),
            packages: self.packages.into_boxed_slice(),
            channels: self.channels.into_boxed_slice(),
            entries: self.entries.into_boxed_slice(),
            skips: self.skips.into_boxed_slice(),
            bundles: self.bundles.into_boxed_slice(),
            gvks: self.gvks.into_boxed_slice(),
            light: self.light.into_boxed_slice(),
            custom: custom
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
    pub fn load(root: &Path) -> Result<Index, IndexBuildError> {
        Self::on_loader_thread(|| Self::load_here(root))
    }

    /// Runs `load` on a thread of its own (see [`Index::load`]), then hands the loader's
    /// freed memory back to the OS.
    pub(super) fn on_loader_thread<E: Send>(
        load: impl Fn() -> Result<Index, E> + Sync,
    ) -> Result<Index, E> {
        let loaded = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("catalog-load".into())
                .spawn_scoped(s, &load)
                .map(std::thread::ScopedJoinHandle::join)
        });
        let index = match loaded {
            Ok(Ok(index)) => index?,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            // No thread to spare: load on this one.
            Err(_) => load()?,
        };
        crate::memory::release_free_memory();
        Ok(index)
    }

    fn load_here(root: &Path) -> Result<Index, IndexBuildError> {
        let store = StoreWriter::new().map_err(IndexBuildError::SpillFile)?;
        Self::build(&catalog_files(root)?, store)
    }

    /// Builds the index of the catalog `files`, its manifests spilled into `store`.
    pub(super) fn build(
        files: &[std::path::PathBuf],
        mut store: StoreWriter,
    ) -> Result<Index, IndexBuildError> {
        let mut builder = Builder::default();
        // Blob by blob: one document and the index in memory, never a whole file. The
        // catalog limits count across files, as `load_path` counts them.
        let (mut bundles, mut blobs) = (0usize, 0usize);
        for file in files {
            for_each_blob(file, LoadOptions::default(), |blob| {
                bundles += blob.bundles.len();
                blobs += 1;
                let too_many = |what, limit| {
                    IndexBuildError::Load(LoadError::TooMany {
                        path: file.clone(),
                        what,
                        limit,
                    })
                };
                if bundles > MAX_BUNDLES {
                    return Err(too_many("bundles", MAX_BUNDLES));
                }
                if blobs > MAX_BLOBS {
                    return Err(too_many("blobs", MAX_BLOBS));
                }
                builder.add(blob, &mut store)
            })?;
        }
        builder.finish(store)
    }

    /// Builds an index from a catalog already in memory.
    pub fn from_config(config: DeclarativeConfig) -> Result<Index, IndexBuildError> {
        let mut store = StoreWriter::new()?;
        let mut builder = Builder::default();
        builder.add(config, &mut store)?;
        builder.finish(store)
    }
}
