//! Why a catalog could not be indexed, directly or through the cache. Names are quoted as
//! upstream quotes them (`{:?}`).

use std::path::PathBuf;

use crate::catalog::reading::load::LoadError;
use crate::registry::convert::ConvertError;

/// Why a catalog could not be indexed: its files, or what they say.
#[derive(Debug, thiserror::Error)]
pub enum IndexBuildError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("creating the spill file")]
    SpillFile(#[source] std::io::Error),
    /// Writing manifests to the spill file, or finishing it.
    #[error(transparent)]
    Spill(#[from] std::io::Error),
    #[error("package {package:?}, bundle {bundle:?}: {source}")]
    Bundle {
        package: String,
        bundle: String,
        #[source]
        source: ConvertError,
    },
    #[error("duplicate package {0:?}")]
    DuplicatePackage(String),
    #[error("cannot apply deprecations to an unknown package {0:?}")]
    DeprecationOfUnknownPackage(String),
    #[error("package {package:?}: cannot deprecate an object of schema {schema:?}")]
    DeprecatedSchema { package: String, schema: String },
    #[error("unknown package {package:?} for channel {channel:?}")]
    ChannelOfUnknownPackage { package: String, channel: String },
    #[error("unknown package {package:?} for bundle {bundle:?}")]
    BundleOfUnknownPackage { package: String, bundle: String },
    #[error("package {package:?} has duplicate bundle {bundle:?}")]
    DuplicateBundle { package: String, bundle: String },
    #[error("package {package:?} has duplicate channel {channel:?}")]
    DuplicateChannel { package: String, channel: String },
    #[error("package {package:?}: default channel {channel:?} not found")]
    DefaultChannelNotFound { package: String, channel: String },
    #[error("package {package:?}, channel {channel:?}: channel must contain at least one bundle")]
    EmptyChannel { package: String, channel: String },
    #[error("invalid package {package:?}, channel {channel:?}: duplicate entry {entry:?}")]
    DuplicateEntry {
        package: String,
        channel: String,
        entry: String,
    },
    #[error("no olm.bundle blobs found in package {package:?} for olm.channel entries [{entry}]")]
    EntryWithoutBundle { package: String, entry: String },
    #[error("package {package:?}, channel {channel:?}: no channel head found in graph")]
    NoHead { package: String, channel: String },
    #[error(
        "package {package:?}, channel {channel:?}: multiple channel heads found in graph: {}",
        heads.join(", ")
    )]
    MultipleHeads {
        package: String,
        channel: String,
        heads: Vec<String>,
    },
    #[error("package {package:?}, bundle {bundle:?} not found in any channel entries")]
    UnlistedBundle { package: String, bundle: String },
    #[error("catalog too large to index (over 4 GiB)")]
    TooLarge,
    #[error(transparent)]
    Encode(#[from] prost::EncodeError),
    #[error(transparent)]
    Conversion(#[from] std::num::TryFromIntError),
}

/// Why a catalog could not be loaded through the cache (a cache that is merely stale or
/// unwritable is not an error: the index is built again, or without the cache).
#[derive(Debug, thiserror::Error)]
pub enum IndexCacheError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A catalog file, read for the cache key.
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A catalog file's length, for the cache key.
    #[error(transparent)]
    Metadata(std::io::Error),
    #[error("creating {}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Build(#[from] IndexBuildError),
}
