//! An index kept on disk (`--cache-dir`, as `opm serve --cache-dir`): the tables in
//! `index.bin`, the spilled manifests in `store.bin`. A server started on the same catalog
//! files reads the tables back instead of parsing the catalog again (the public community
//! catalog: 1.4 GB of JSON, seconds of parsing, against a few MiB of tables).
//!
//! The cache is keyed by the catalog's files: a SHA-256 over each catalog file's path
//! (relative to the root), length and bytes, in the loader's order. Any change of a file,
//! of this build of olm, or damage to `index.bin` (its own SHA-256 ends it) means a
//! rebuild, never a stale or broken answer.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{BundleIdx, ChannelIdx, EntryIdx, Index, IndexCacheError, PackageIdx, Span};
use crate::catalog::reading::files::catalog_files;
use crate::registry::store::{Loc, Store, StoreWriter};

const MAGIC: &[u8; 8] = b"OLMIDX1\n";
const INDEX_FILE: &str = "index.bin";
const STORE_FILE: &str = "store.bin";

/// Why the cached index is not used; logged, and the index is built again.
#[derive(Debug, thiserror::Error)]
enum StaleCache {
    #[error("no cached index")]
    NoIndex(#[source] std::io::Error),
    #[error("the cached index is truncated")]
    Truncated,
    #[error("the cached index is damaged (checksum)")]
    Damaged,
    #[error("not a cached index of this format")]
    Format,
    #[error("the catalog files or olm changed since the cache was built")]
    Changed,
    #[error("no cached store")]
    NoStore(#[source] std::io::Error),
    /// The cached store's length.
    #[error(transparent)]
    Store(std::io::Error),
    #[error("the cached store does not match the index")]
    StoreMismatch,
    #[error("cached text")]
    Text(#[source] std::string::FromUtf8Error),
    /// A custom blob's schema or package.
    #[error(transparent)]
    Utf8(#[from] std::string::FromUtf8Error),
    /// A count that does not fit this machine's `usize`.
    #[error(transparent)]
    Count(#[from] std::num::TryFromIntError),
    #[error("the cached index has trailing bytes")]
    TrailingBytes,
}

/// What a cache was built for: the catalog files' digest and the build of olm.
fn cache_key(root: &Path, files: &[PathBuf]) -> Result<[u8; 32], IndexCacheError> {
    let mut hash = Sha256::new();
    hash.update(env!("CARGO_PKG_VERSION").as_bytes());
    hash.update([0]);
    let mut buf = vec![0; 1 << 20];
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(file);
        hash.update(relative.to_string_lossy().as_bytes());
        hash.update([0]);
        let reading = |source| IndexCacheError::Read {
            path: file.clone(),
            source,
        };
        let mut f = std::fs::File::open(file).map_err(reading)?;
        let len = f.metadata().map_err(IndexCacheError::Metadata)?.len();
        hash.update(len.to_le_bytes());
        loop {
            let n = f.read(&mut buf).map_err(reading)?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
        }
    }
    Ok(hash.finalize().into())
}

impl Index {
    /// The index of the catalog at `root`, read from the cache in `cache_dir` when it was
    /// built from the same files, else built (and the cache written).
    pub fn load_cached(root: &Path, cache_dir: &Path) -> Result<Index, IndexCacheError> {
        let files = catalog_files(root)?;
        let key = cache_key(root, &files)?;
        let (index_path, store_path) = (cache_dir.join(INDEX_FILE), cache_dir.join(STORE_FILE));
        match read(&index_path, &store_path, &key) {
            Ok(index) => {
                tracing::info!(cache = %cache_dir.display(), "catalog index read from the cache");
                return Ok(index);
            }
            Err(why) if index_path.exists() => {
                tracing::info!(cache = %cache_dir.display(), %why, "rebuilding the cached index");
            }
            Err(_) => {}
        }
        if let Err(why) = writable(cache_dir, &index_path) {
            // A read-only image or volume: serve without a cache rather than not at all.
            tracing::warn!(cache = %cache_dir.display(), %why, "cannot write the index cache; loading without it");
            return Ok(Index::load(root)?);
        }
        let index = Index::on_loader_thread(|| -> Result<Index, IndexCacheError> {
            let store =
                StoreWriter::create(&store_path).map_err(|source| IndexCacheError::Create {
                    path: store_path.clone(),
                    source,
                })?;
            Ok(Index::build(&files, store)?)
        })?;
        write(&index, &index_path, &key).map_err(|source| IndexCacheError::Write {
            path: index_path.clone(),
            source,
        })?;
        Ok(index)
    }
}

/// Makes `cache_dir` ready for a new cache: created, and the old tables removed first (a
/// crash while the store is rewritten leaves no cache that names a store it does not
/// match). An error means the cache cannot be written there.
fn writable(cache_dir: &Path, index_path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(cache_dir)?;
    match std::fs::remove_file(index_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    // The directory itself must take new files (the store, then the tables).
    let probe = cache_dir.join(".write-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

fn write(index: &Index, path: &Path, key: &[u8; 32]) -> std::io::Result<()> {
    let mut e = Encoder(Vec::with_capacity(
        index.text.len() + index.light.len() + (1 << 20),
    ));
    e.0.extend_from_slice(MAGIC);
    e.0.extend_from_slice(key);
    e.u64(index.store.len()?);
    e.bytes(index.text.as_bytes());
    e.rows(&index.packages, |e, p| {
        e.span(p.name);
        e.span(p.default_channel);
        e.opt_span(p.deprecation);
        e.span(p.channels);
    });
    e.rows(&index.channels, |e, c| {
        e.span(c.name);
        e.opt_span(c.deprecation);
        e.u32(c.head);
        e.span(c.entries);
    });
    e.rows(&index.entries, |e, x| {
        e.u32(x.package);
        e.u32(x.channel);
        e.u32(x.bundle);
        e.span(x.replaces);
        e.span(x.skips);
        e.span(x.skip_range);
    });
    e.rows(&index.skips, |e, s| e.span(*s));
    e.rows(&index.bundles, |e, b| {
        e.span(b.name);
        e.span(b.provided);
        e.u8(u8::from(b.has_path));
        e.span(b.light);
        e.loc(b.heavy);
        match b.csv_object {
            Some(i) => {
                e.u8(1);
                e.u32(i);
            }
            None => e.u8(0),
        }
    });
    e.rows(&index.gvks, |e, gvk| gvk.iter().for_each(|s| e.span(*s)));
    e.bytes(&index.light);
    // Sorted: the same catalog gives the same bytes (a cache baked into an image keeps the
    // image reproducible).
    let mut custom: Vec<_> = index.custom.iter().collect();
    custom.sort_unstable_by(|a, b| a.0.cmp(b.0));
    e.rows(&custom, |e, ((schema, package), locs)| {
        e.bytes(schema.as_bytes());
        e.bytes(package.as_bytes());
        e.rows(locs, |e, loc| e.loc(*loc));
    });
    let sum: [u8; 32] = Sha256::digest(&e.0).into();
    e.0.extend_from_slice(&sum);
    let partial = path.with_extension("bin.partial");
    std::fs::write(&partial, &e.0)?;
    std::fs::rename(&partial, path)?;
    Ok(())
}

fn read(index_path: &Path, store_path: &Path, key: &[u8; 32]) -> Result<Index, StaleCache> {
    let data = std::fs::read(index_path).map_err(StaleCache::NoIndex)?;
    let Some((body, sum)) = data.split_last_chunk::<32>() else {
        return Err(StaleCache::Truncated);
    };
    if Sha256::digest(body).as_slice() != sum {
        return Err(StaleCache::Damaged);
    }
    let mut d = Decoder(body);
    if d.take(MAGIC.len())? != MAGIC {
        return Err(StaleCache::Format);
    }
    if d.take(32)? != key {
        return Err(StaleCache::Changed);
    }
    let store_len = d.u64()?;
    let store = Store::open(store_path).map_err(StaleCache::NoStore)?;
    if store.len().map_err(StaleCache::Store)? != store_len {
        return Err(StaleCache::StoreMismatch);
    }
    let text = String::from_utf8(d.bytes()?.to_vec()).map_err(StaleCache::Text)?;
    let packages = d.rows(|d| {
        Ok(PackageIdx {
            name: d.span()?,
            default_channel: d.span()?,
            deprecation: d.opt_span()?,
            channels: d.span()?,
        })
    })?;
    let channels = d.rows(|d| {
        Ok(ChannelIdx {
            name: d.span()?,
            deprecation: d.opt_span()?,
            head: d.u32()?,
            entries: d.span()?,
        })
    })?;
    let entries = d.rows(|d| {
        Ok(EntryIdx {
            package: d.u32()?,
            channel: d.u32()?,
            bundle: d.u32()?,
            replaces: d.span()?,
            skips: d.span()?,
            skip_range: d.span()?,
        })
    })?;
    let skips = d.rows(Decoder::span)?;
    let bundles = d.rows(|d| {
        Ok(BundleIdx {
            name: d.span()?,
            provided: d.span()?,
            has_path: d.u8()? != 0,
            light: d.span()?,
            heavy: d.loc()?,
            csv_object: match d.u8()? {
                0 => None,
                _ => Some(d.u32()?),
            },
        })
    })?;
    let gvks = d.rows(|d| Ok([d.span()?, d.span()?, d.span()?]))?;
    let light = d.bytes()?.into();
    let custom: HashMap<(String, String), Box<[Loc]>> = d
        .rows(|d| {
            let schema = String::from_utf8(d.bytes()?.to_vec())?;
            let package = String::from_utf8(d.bytes()?.to_vec())?;
            Ok(((schema, package), d.rows(Decoder::loc)?))
        })?
        .into_vec()
        .into_iter()
        .collect();
    if !d.0.is_empty() {
        return Err(StaleCache::TrailingBytes);
    }
    Ok(Index {
        text: text.into_boxed_str(),
        packages,
        channels,
        entries,
        skips,
        bundles,
        gvks,
        light,
        custom,
        store,
    })
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }
    fn span(&mut self, s: Span) {
        self.u32(s.start);
        self.u32(s.end);
    }
    fn opt_span(&mut self, s: Option<Span>) {
        match s {
            Some(s) => {
                self.u8(1);
                self.span(s);
            }
            None => self.u8(0),
        }
    }
    fn loc(&mut self, l: Loc) {
        self.u64(l.offset);
        self.u32(l.len);
    }
    fn rows<T>(&mut self, rows: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.len(rows.len());
        for row in rows {
            each(self, row);
        }
    }
}

struct Decoder<'a>(&'a [u8]);

impl<'a> Decoder<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StaleCache> {
        let Some((head, rest)) = self.0.split_at_checked(n) else {
            return Err(StaleCache::Truncated);
        };
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], StaleCache> {
        let Some((head, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(StaleCache::Truncated);
        };
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> Result<u8, StaleCache> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, StaleCache> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, StaleCache> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn len(&mut self) -> Result<usize, StaleCache> {
        let n = usize::try_from(self.u64()?)?;
        // A count can never exceed the bytes left (every row takes at least one).
        if n > self.0.len() {
            return Err(StaleCache::Truncated);
        }
        Ok(n)
    }
    fn bytes(&mut self) -> Result<&'a [u8], StaleCache> {
        let n = self.len()?;
        self.take(n)
    }
    fn span(&mut self) -> Result<Span, StaleCache> {
        Ok(Span {
            start: self.u32()?,
            end: self.u32()?,
        })
    }
    fn opt_span(&mut self) -> Result<Option<Span>, StaleCache> {
        Ok(match self.u8()? {
            0 => None,
            _ => Some(self.span()?),
        })
    }
    fn loc(&mut self) -> Result<Loc, StaleCache> {
        Ok(Loc {
            offset: self.u64()?,
            len: self.u32()?,
        })
    }
    fn rows<T>(
        &mut self,
        mut each: impl FnMut(&mut Self) -> Result<T, StaleCache>,
    ) -> Result<Box<[T]>, StaleCache> {
        let n = self.len()?;
        (0..n).map(|_| each(self)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every answer the index gives over our catalog: packages, every bundle listed and
    /// fetched whole (manifests from the store), and the custom blobs.
    fn answers(index: &Index) -> Vec<String> {
        let mut out = Vec::new();
        for package in index.list_packages() {
            let p = index.get_package(&package).unwrap();
            out.push(format!("{p:?}"));
            for channel in &p.channels {
                let head = index
                    .get_bundle_for_channel(&package, &channel.name)
                    .unwrap();
                out.push(format!("{head:?}"));
            }
        }
        for i in 0..index.entry_count() {
            out.push(format!("{:?}", index.list_bundle(i).unwrap()));
        }
        for (schema, package) in index.custom.keys() {
            let blobs = index.custom_schema_blobs(schema, package).unwrap();
            out.push(format!("{schema} {package} {blobs:?}"));
        }
        out.sort();
        out
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("olm-index-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_cached_index_answers_as_the_built_one_and_changes_rebuild_it() {
        let repo_catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        let work = scratch("answers");
        let (root, cache) = (work.join("catalog"), work.join("cache"));
        std::fs::create_dir_all(&root).unwrap();
        for package in ["reverse-words", "at"] {
            std::fs::create_dir_all(root.join(package)).unwrap();
            std::fs::copy(
                repo_catalog.join(package).join("catalog.yaml"),
                root.join(package).join("catalog.yaml"),
            )
            .unwrap();
        }
        let built = Index::load_cached(&root, &cache).unwrap();
        let expected = answers(&Index::load(&root).unwrap());
        assert_eq!(answers(&built), expected);
        let key = cache_key(&root, &catalog_files(&root).unwrap()).unwrap();
        let (index_path, store_path) = (cache.join(INDEX_FILE), cache.join(STORE_FILE));
        let cached = read(&index_path, &store_path, &key).unwrap();
        assert_eq!(answers(&cached), expected);

        // Damage is found by the checksum, and the cache is built again.
        let mut bytes = std::fs::read(&index_path).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 1;
        std::fs::write(&index_path, &bytes).unwrap();
        let err = read(&index_path, &store_path, &key).err().unwrap();
        assert!(err.to_string().contains("damaged"), "{err}");
        assert_eq!(
            answers(&Index::load_cached(&root, &cache).unwrap()),
            expected
        );
        assert!(read(&index_path, &store_path, &key).is_ok());

        // A changed catalog file changes the key: the old cache is not read.
        std::fs::remove_dir_all(root.join("at")).unwrap();
        let new_key = cache_key(&root, &catalog_files(&root).unwrap()).unwrap();
        let err = read(&index_path, &store_path, &new_key).err().unwrap();
        assert!(err.to_string().contains("changed"), "{err}");
        let rebuilt = Index::load_cached(&root, &cache).unwrap();
        assert_eq!(rebuilt.list_packages(), ["reverse-words"]);
        assert!(read(&index_path, &store_path, &new_key).is_ok());
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn the_same_catalog_gives_the_same_cache_bytes_and_an_unwritable_cache_is_skipped() {
        let work = scratch("reproducible");
        // Our catalog plus blobs of other schemas, kept per (schema, package) in a map
        // whose order differs between two builds unless the cache sorts it.
        let root = work.join("catalog");
        let repo_catalog = Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog");
        std::fs::create_dir_all(root.join("reverse-words")).unwrap();
        std::fs::copy(
            repo_catalog.join("reverse-words/catalog.yaml"),
            root.join("reverse-words/catalog.yaml"),
        )
        .unwrap();
        let custom: String = (0..12)
            .map(|i| format!("{{\"schema\":\"example.custom{i}\",\"package\":\"p{i}\"}}\n"))
            .collect();
        std::fs::write(root.join("custom.json"), custom).unwrap();
        let (one, two) = (work.join("one"), work.join("two"));
        let expected = answers(&Index::load_cached(&root, &one).unwrap());
        Index::load_cached(&root, &two).unwrap();
        for file in [INDEX_FILE, STORE_FILE] {
            assert!(
                std::fs::read(one.join(file)).unwrap() == std::fs::read(two.join(file)).unwrap(),
                "{file} differs between two builds"
            );
        }
        // A cache directory that cannot be made (under a file): served without a cache.
        let blocker = work.join("a-file");
        std::fs::write(&blocker, b"").unwrap();
        let uncached = Index::load_cached(&root, &blocker.join("cache")).unwrap();
        assert_eq!(answers(&uncached), expected);
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn a_truncated_cache_is_refused_not_read() {
        let work = scratch("truncated");
        let (index_path, store_path) = (work.join(INDEX_FILE), work.join(STORE_FILE));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(&store_path, b"").unwrap();
        for bytes in [&b""[..], &[0; 31], &[0; 100]] {
            std::fs::write(&index_path, bytes).unwrap();
            assert!(read(&index_path, &store_path, &[0; 32]).is_err());
        }
        std::fs::remove_dir_all(&work).unwrap();
    }
}
