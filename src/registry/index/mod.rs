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
//!
//! Files: `build.rs` loads a catalog into the tables, `query.rs` answers the RPCs from
//! them, `tests.rs` tests both; `error.rs` says why a catalog could not be loaded.

use std::collections::HashMap;

use super::generated as api;
use super::store::{Loc, Store};

mod build;
mod cache;
mod error;

pub use error::{IndexBuildError, IndexCacheError};
mod query;
#[cfg(test)]
mod tests;

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
fn offset(n: usize) -> Result<u32, IndexBuildError> {
    u32::try_from(n).map_err(|_| IndexBuildError::TooLarge)
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
    /// The manifests (`object`), spilled.
    heavy: Loc,
    /// Which manifest is the CSV, served again as `csvJson`.
    csv_object: Option<u32>,
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

/// A name quoted as upstream's messages quote it.
fn q(s: &str) -> String {
    format!("{s:?}")
}

impl Index {
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

    fn entry_named(&self, ch: &ChannelIdx, name: &str) -> Option<u32> {
        ch.entries.rows().find(|&i| self.bundle_name(i) == name)
    }

    fn provides(&self, e: u32, gvk: (&str, &str, &str)) -> bool {
        let b = &self.bundles[self.entries[e as usize].bundle as usize];
        self.gvks[b.provided.range()]
            .iter()
            .any(|&[g, v, k]| (self.str(g), self.str(v), self.str(k)) == gvk)
    }
}
