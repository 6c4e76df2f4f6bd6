//! Building the index: catalog files loaded one at a time, bundles converted and their
//! manifests spilled, then the tables laid out package by package.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use prost::Message;
use serde_json::Value;

use super::{BundleIdx, ChannelIdx, EntryIdx, Index, PackageIdx, Span, api, offset, q};
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
                    object: vec![csv],
                    ..Default::default()
                };
                b.heavy = store.put(&heavy.encode_to_vec())?;
                b.csv_object = Some(0);
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
                csv_object: b.csv_object.map(u32::try_from).transpose()?,
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

/// Why loading stopped: the file, or what the builder made of a blob.
enum BuildStop {
    Load(LoadError),
    Build(anyhow::Error),
}

impl From<LoadError> for BuildStop {
    fn from(e: LoadError) -> Self {
        BuildStop::Load(e)
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
                .map(std::thread::ScopedJoinHandle::join)
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
        // Blob by blob: one document and the index in memory, never a whole file. The
        // catalog limits count across files, as `load_path` counts them.
        let (mut bundles, mut blobs) = (0usize, 0usize);
        for file in catalog_files(root)? {
            for_each_blob(&file, LoadOptions::default(), |blob| {
                bundles += blob.bundles.len();
                blobs += 1;
                let too_many = |what, limit| {
                    BuildStop::Load(LoadError::TooMany {
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
                builder.add(blob, &mut store).map_err(BuildStop::Build)
            })
            .map_err(|stop| match stop {
                BuildStop::Load(e) => anyhow::Error::from(e),
                BuildStop::Build(e) => e,
            })?;
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
}
