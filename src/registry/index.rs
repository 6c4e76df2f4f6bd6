//! What the registry RPCs need, built once at startup.
//!
//! In memory: packages (default channel, deprecation), channels (head, deprecation, their
//! entries with replaces/skips/skipRange), and per bundle its provided GVKs and the protobuf
//! encoding of its *light* `api.Bundle` (no manifests). The manifests (`csvJson`, `object`)
//! and custom-schema blobs go to a spill file ([`super::store`]) and are read back only by
//! the RPCs that return them. Catalog files are loaded one at a time, so the whole catalog is
//! never decoded in memory at once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use prost::Message;
use serde_json::Value;

use super::convert::{convert_bundle, csv_from_metadata};
use super::generated as api;
use super::store::{Loc, Store, StoreWriter};
use crate::catalog::fbc::{self, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use crate::catalog::load::{LoadOptions, load_file_with, load_path_with};

/// A query failure: upstream answers these with gRPC code UNKNOWN and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

type Gvk = (String, String, String);

struct PackageIdx {
    name: String,
    default_channel: String,
    deprecation: Option<String>,
    /// Sorted by name.
    channels: Vec<ChannelIdx>,
}

struct ChannelIdx {
    name: String,
    deprecation: Option<String>,
    /// Index into `Index::entries` of the head.
    head: u32,
    /// Indexes into `Index::entries`, in the channel's order.
    entries: std::ops::Range<u32>,
}

/// One bundle in one channel.
struct EntryIdx {
    package: u32,
    channel: u32,
    bundle: u32,
    replaces: String,
    skips: Vec<String>,
    skip_range: String,
}

/// One bundle of a package (shared by the channels that list it).
struct BundleIdx {
    name: String,
    provided: Vec<Gvk>,
    has_path: bool,
    light: Box<[u8]>,
    heavy: Loc,
}

pub struct Index {
    /// Sorted by name.
    packages: Vec<PackageIdx>,
    entries: Vec<EntryIdx>,
    bundles: Vec<BundleIdx>,
    /// (schema, package) → blobs of custom schemas (compact JSON), in load order.
    custom: HashMap<(String, String), Vec<Loc>>,
    store: Store,
}

fn q(s: &str) -> String {
    format!("{s:?}")
}

fn err<T>(message: String) -> Result<T, QueryError> {
    Err(QueryError(message))
}

/// Catalog files below `root` in path order, or `None` when an `.indexignore` file asks for
/// the full loader's ignore rules.
fn catalog_files(root: &Path) -> std::io::Result<Option<Vec<PathBuf>>> {
    if root.is_file() {
        return Ok(Some(vec![root.to_path_buf()]));
    }
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for entry in entries {
            let path = entry.path();
            if entry.file_name() == ".indexignore" {
                return Ok(None);
            }
            if path.is_dir() {
                subdirs.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml" | "yml")
            ) {
                out.push(path);
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    out.sort();
    Ok(Some(out))
}

struct PendingBundle {
    package: String,
    name: String,
    light: api::Bundle,
    provided: Vec<Gvk>,
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

        // Bundles, by (package, name).
        let mut bundle_ix: HashMap<(String, String), u32> = HashMap::new();
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
            bundle_ix.insert(key, bundles.len() as u32);
            bundles.push(BundleIdx {
                has_path: !b.light.bundle_path.is_empty(),
                light: b.light.encode_to_vec().into_boxed_slice(),
                name: b.name,
                provided: b.provided,
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
            let mut out_channels = Vec::with_capacity(channels.len());
            for (ci, c) in channels.into_iter().enumerate() {
                if c.entries.is_empty() {
                    bail!(
                        "package {}, channel {}: channel must contain at least one bundle",
                        q(&p.name),
                        q(&c.name)
                    );
                }
                let start = entries.len() as u32;
                let mut incoming: HashSet<&str> = HashSet::new();
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
                    if !e.replaces.is_empty() {
                        incoming.insert(&e.replaces);
                    }
                    incoming.extend(e.skips.iter().map(String::as_str));
                }
                let mut heads = Vec::new();
                for e in &c.entries {
                    let Some(&bi) = bundle_ix.get(&(p.name.clone(), e.name.clone())) else {
                        bail!(
                            "no olm.bundle blobs found in package {} for olm.channel entries [{}]",
                            q(&p.name),
                            e.name
                        );
                    };
                    listed.insert(bi);
                    if !incoming.contains(e.name.as_str()) {
                        heads.push(entries.len() as u32);
                    }
                    entries.push(EntryIdx {
                        package: pi as u32,
                        channel: ci as u32,
                        bundle: bi,
                        replaces: e.replaces.clone(),
                        skips: e.skips.clone(),
                        skip_range: e.skip_range.clone(),
                    });
                }
                let head = match heads.as_slice() {
                    [one] => *one,
                    [] => bail!(
                        "package {}, channel {}: no channel head found in graph",
                        q(&p.name),
                        q(&c.name)
                    ),
                    many => {
                        let mut names: Vec<&str> = many
                            .iter()
                            .map(|&i| bundles[entries[i as usize].bundle as usize].name.as_str())
                            .collect();
                        names.sort_unstable();
                        bail!(
                            "package {}, channel {}: multiple channel heads found in graph: {}",
                            q(&p.name),
                            q(&c.name),
                            names.join(", ")
                        )
                    }
                };
                out_channels.push(ChannelIdx {
                    deprecation: channel_deprecation
                        .get(&(p.name.clone(), c.name.clone()))
                        .cloned(),
                    name: c.name,
                    head,
                    entries: start..entries.len() as u32,
                });
            }
            packages.push(PackageIdx {
                name: p.name.clone(),
                default_channel: p.default_channel.clone(),
                deprecation: pkg_deprecation.get(&p.name).cloned(),
                channels: out_channels,
            });
        }
        if let Some((bi, _)) = bundles
            .iter()
            .enumerate()
            .find(|(i, _)| !listed.contains(&(*i as u32)))
        {
            let pkg = bundle_ix
                .iter()
                .find(|(_, v)| **v == bi as u32)
                .map(|(k, _)| k.0.clone())
                .unwrap_or_default();
            bail!(
                "package {}, bundle {} not found in any channel entries",
                q(&pkg),
                q(&bundles[bi].name)
            );
        }
        let mut index = Index {
            packages,
            entries,
            bundles,
            custom: self.custom,
            store: store.finish()?,
        };
        index.shrink();
        Ok(index)
    }
}

/// Hands the heap freed after loading (each file's decoded blobs) back to the OS, so that
/// the resident size after startup is the index's, not the loader's high-water mark.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's malloc_trim only releases free memory; it has no preconditions.
        unsafe {
            malloc_trim(0);
        }
    }
}

impl Index {
    /// Loads the catalog at `root` (a directory or one file).
    pub fn load(root: &Path) -> anyhow::Result<Index> {
        use anyhow::Context;
        let mut store = StoreWriter::new().context("creating the spill file")?;
        let mut builder = Builder::default();
        match catalog_files(root).with_context(|| format!("reading {}", root.display()))? {
            Some(files) => {
                for file in files {
                    builder.add(load_file_with(&file, LoadOptions::default())?, &mut store)?;
                }
            }
            None => builder.add(load_path_with(root, LoadOptions::default())?, &mut store)?,
        }
        let index = builder.finish(store)?;
        release_free_memory();
        Ok(index)
    }

    /// Builds an index from a catalog already in memory.
    pub fn from_config(config: DeclarativeConfig) -> anyhow::Result<Index> {
        let mut store = StoreWriter::new()?;
        let mut builder = Builder::default();
        builder.add(config, &mut store)?;
        builder.finish(store)
    }

    fn shrink(&mut self) {
        self.entries.shrink_to_fit();
        self.bundles.shrink_to_fit();
        self.custom.shrink_to_fit();
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

    fn package(&self, name: &str) -> Option<&PackageIdx> {
        self.packages
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.packages[i])
    }

    fn channel<'a>(&self, pkg: &'a PackageIdx, name: &str) -> Option<&'a ChannelIdx> {
        pkg.channels
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .ok()
            .map(|i| &pkg.channels[i])
    }

    fn entry_parts(&self, e: u32) -> (&EntryIdx, &PackageIdx, &ChannelIdx, &BundleIdx) {
        let entry = &self.entries[e as usize];
        let pkg = &self.packages[entry.package as usize];
        (
            entry,
            pkg,
            &pkg.channels[entry.channel as usize],
            &self.bundles[entry.bundle as usize],
        )
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
        let mut bytes = Vec::with_capacity(
            b.light.len()
                + if with_manifests {
                    b.heavy.len as usize
                } else {
                    0
                },
        );
        bytes.extend_from_slice(&b.light);
        if with_manifests && b.heavy.len > 0 {
            self.store
                .read_into(b.heavy, &mut bytes)
                .map_err(|e| QueryError(format!("reading bundle {}: {e}", q(&b.name))))?;
        }
        let mut bundle = api::Bundle::decode(bytes.as_slice())
            .map_err(|e| QueryError(format!("decoding bundle {}: {e}", q(&b.name))))?;
        bundle.channel_name = channel.name.clone();
        bundle.skip_range = entry.skip_range.clone();
        if !trimmed {
            bundle.replaces = entry.replaces.clone();
            bundle.skips = entry.skips.clone();
        }
        Ok(bundle)
    }

    fn entry_named(&self, pkg: &PackageIdx, ch: &ChannelIdx, name: &str) -> Option<u32> {
        let _ = pkg;
        ch.entries
            .clone()
            .find(|&i| self.bundles[self.entries[i as usize].bundle as usize].name == name)
    }

    fn provides(&self, e: u32, gvk: (&str, &str, &str)) -> bool {
        let b = &self.bundles[self.entries[e as usize].bundle as usize];
        b.provided
            .iter()
            .any(|(g, v, k)| (g.as_str(), v.as_str(), k.as_str()) == gvk)
    }

    fn channel_entry(&self, e: u32, replaces: &str) -> api::ChannelEntry {
        let (_, pkg, ch, b) = self.entry_parts(e);
        api::ChannelEntry {
            package_name: pkg.name.clone(),
            channel_name: ch.name.clone(),
            bundle_name: b.name.clone(),
            replaces: replaces.to_string(),
        }
    }

    /// The channel entries upstream reports for a bundle that provides an API: one for its
    /// `replaces`, plus one per other skipped name (only names in the same channel unless
    /// `any_skip`).
    fn entries_for_bundle(&self, e: u32, any_skip: bool, out: &mut Vec<api::ChannelEntry>) {
        let (entry, pkg, ch, _) = self.entry_parts(e);
        out.push(self.channel_entry(e, &entry.replaces));
        for s in &entry.skips {
            if *s != entry.replaces && (any_skip || self.entry_named(pkg, ch, s).is_some()) {
                out.push(self.channel_entry(e, s));
            }
        }
    }

    pub fn list_packages(&self) -> Vec<String> {
        self.packages.iter().map(|p| p.name.clone()).collect()
    }

    pub fn get_package(&self, name: &str) -> Result<api::Package, QueryError> {
        let Some(pkg) = self.package(name) else {
            return err(format!("package {} not found", q(name)));
        };
        let deprecation =
            |m: &Option<String>| m.as_ref().map(|m| api::Deprecation { message: m.clone() });
        Ok(api::Package {
            name: pkg.name.clone(),
            channels: pkg
                .channels
                .iter()
                .map(|c| api::Channel {
                    name: c.name.clone(),
                    csv_name: self.bundles[self.entries[c.head as usize].bundle as usize]
                        .name
                        .clone(),
                    deprecation: deprecation(&c.deprecation),
                })
                .collect(),
            default_channel_name: pkg.default_channel.clone(),
            deprecation: deprecation(&pkg.deprecation),
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
        let (pkg, ch) = self.package_channel(pkg_name, channel_name)?;
        let Some(e) = self.entry_named(pkg, ch, csv_name) else {
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
            if e.replaces == name {
                out.push(self.channel_entry(i as u32, &e.replaces));
            }
            for s in &e.skips {
                if s == name && *s != e.replaces {
                    out.push(self.channel_entry(i as u32, &e.replaces));
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
        let found = ch.entries.clone().find(|&i| {
            let e = &self.entries[i as usize];
            e.replaces == name || e.skips.iter().any(|s| s == name)
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
        for pkg in &self.packages {
            for ch in &pkg.channels {
                if self.provides(ch.head, (group, version, kind)) {
                    self.entries_for_bundle(ch.head, false, &mut out);
                }
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
        for pkg in &self.packages {
            for ch in &pkg.channels {
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
